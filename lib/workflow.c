/* workflow.c - building workflows, and the client's calls on them
 * (sluice-workflow.h).
 *
 * Enqueueing compiles the tree into tasks and joins. Every node produces
 * "completions" (its last tasks' final outcomes), counted by the join it
 * reports to: a task produces one, a group the sum of its members', a
 * chain or a chord those of its last part. A chain step and a chord's
 * group report to a join of their own, whose release submits what runs
 * next; everything else reports to the join its parent gave it, at the
 * member index it gave it, and the root reports to the end join, which
 * only counts (the workflow's status). Tasks that start at once go in the
 * join_open call with the joins: the broker writes all of it in one step.
 */
#include "config.h"

#include <string.h>

#include "lib/sluice-private.h"

typedef enum {
  NODE_TASK,
  NODE_GROUP,
  NODE_CHAIN,
  NODE_CHORD,
} NodeKind;

struct _SluiceWorkflow {
  gatomicrefcount ref_count;
  NodeKind kind;
  SluiceWorkflow *parent; /* weak: cleared when the parent goes */
  GPtrArray *children;    /* SluiceWorkflow* (a reference each); a chord's
                             are its group and its callback */
  gchar *problem;         /* the first mistake made building under it */
  /* NODE_TASK */
  gchar *task;
  GBytes *args;
  SluiceEnqueueOptions options; /* queue and headers point at ours below */
  gchar *queue;
  GHashTable *headers;
  gboolean continue_on_failure;
  /* NODE_CHORD */
  SluiceChordPolicy policy;
};

static SluiceWorkflow *
node_new(NodeKind kind)
{
  SluiceWorkflow *node = g_new0(SluiceWorkflow, 1);

  g_atomic_ref_count_init(&node->ref_count);
  node->kind = kind;
  node->children = g_ptr_array_new();
  sluice_enqueue_options_init(&node->options);
  return node;
}

SluiceWorkflow *
sluice_workflow_task(const gchar *task, GBytes *args,
                     const SluiceEnqueueOptions *options)
{
  SluiceWorkflow *node = node_new(NODE_TASK);

  node->task = g_strdup(task);
  node->args = args != NULL ? g_bytes_ref(args) : NULL;
  if (options != NULL) {
    node->options = *options;
    node->queue = g_strdup(options->queue);
    node->options.queue = node->queue;
    if (options->id != NULL || options->delay_ms != 0 || options->eta_ms != 0)
      node->problem = g_strdup_printf(
          "task “%s” sets an id, a delay or an ETA, which a workflow decides "
          "itself: leave them unset",
          task != NULL ? task : "(null)");
    node->options.id = NULL;
    node->options.delay_ms = node->options.eta_ms = 0;
    if (options->headers != NULL) {
      GHashTableIter iter;
      gpointer k, v;

      node->headers =
          g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
      g_hash_table_iter_init(&iter, options->headers);
      while (g_hash_table_iter_next(&iter, &k, &v))
        g_hash_table_insert(node->headers, g_strdup(k), g_strdup(v));
    }
    node->options.headers = node->headers;
  }
  return node;
}

SluiceWorkflow *
sluice_workflow_group(void)
{
  return node_new(NODE_GROUP);
}

SluiceWorkflow *
sluice_workflow_chain(void)
{
  return node_new(NODE_CHAIN);
}

/* Records the first mistake at @node; later ones add nothing. */
static void
mistake(SluiceWorkflow *node, const gchar *text)
{
  if (node->problem == NULL)
    node->problem = g_strdup(text);
}

/* Takes @child into @parent unless that would share or loop the tree. */
static void
adopt(SluiceWorkflow *parent, SluiceWorkflow *child)
{
  for (SluiceWorkflow *up = parent; up != NULL; up = up->parent)
    if (up == child) {
      mistake(parent, "a node was added into itself or into one of its own "
                      "members, which would make a cycle");
      sluice_workflow_unref(child);
      return;
    }
  if (child->parent != NULL) {
    mistake(parent, "a node was added to two places of a workflow: build a "
                    "new node for each place");
    sluice_workflow_unref(child);
    return;
  }
  child->parent = parent;
  g_ptr_array_add(parent->children, child);
}

SluiceWorkflow *
sluice_workflow_chord(SluiceWorkflow *group, SluiceWorkflow *callback,
                      SluiceChordPolicy policy)
{
  SluiceWorkflow *node = node_new(NODE_CHORD);

  g_return_val_if_fail(group != NULL && callback != NULL, node);
  node->policy = policy;
  if (policy != SLUICE_CHORD_FAIL_FAST && policy != SLUICE_CHORD_WAIT_ALL &&
      policy != SLUICE_CHORD_IGNORE_FAILURES)
    mistake(node, "a chord's policy is not a SluiceChordPolicy");
  if (group->kind != NODE_GROUP)
    mistake(node, "a chord's first part must be a group "
                  "(sluice_workflow_group())");
  if (group == callback) {
    mistake(node, "a chord's group and callback are the same node");
    sluice_workflow_unref(callback);
    callback = NULL;
  }
  adopt(node, group);
  if (callback != NULL)
    adopt(node, callback);
  return node;
}

void
sluice_workflow_add(SluiceWorkflow *parent, SluiceWorkflow *child)
{
  g_return_if_fail(parent != NULL && child != NULL);
  if (parent->kind != NODE_GROUP && parent->kind != NODE_CHAIN) {
    mistake(parent, "sluice_workflow_add() takes a group or a chain");
    sluice_workflow_unref(child);
    return;
  }
  adopt(parent, child);
}

void
sluice_workflow_set_continue(SluiceWorkflow *step, gboolean continue_on_failure)
{
  g_return_if_fail(step != NULL);
  step->continue_on_failure = continue_on_failure;
}

SluiceWorkflow *
sluice_workflow_ref(SluiceWorkflow *workflow)
{
  g_return_val_if_fail(workflow != NULL, NULL);
  g_atomic_ref_count_inc(&workflow->ref_count);
  return workflow;
}

void
sluice_workflow_unref(SluiceWorkflow *workflow)
{
  if (workflow == NULL || !g_atomic_ref_count_dec(&workflow->ref_count))
    return;
  for (guint i = 0; i < workflow->children->len; i++) {
    SluiceWorkflow *child = g_ptr_array_index(workflow->children, i);
    if (child->parent == workflow)
      child->parent = NULL;
    sluice_workflow_unref(child);
  }
  g_ptr_array_unref(workflow->children);
  g_free(workflow->problem);
  g_free(workflow->task);
  g_clear_pointer(&workflow->args, g_bytes_unref);
  g_free(workflow->queue);
  g_clear_pointer(&workflow->headers, g_hash_table_unref);
  g_free(workflow);
}

/* ---- Checking ------------------------------------------------------------ */

static const gchar *
kind_name(NodeKind kind)
{
  static const gchar *const names[] = {"task", "group", "chain", "chord"};
  return names[kind];
}

/* Checks the tree under @node (@path names it in messages) and counts its
 * tasks into @n_tasks, stopping at the cap. */
static gboolean
check_tree(SluiceWorkflow *node, const gchar *path, guint *n_tasks,
           GError **error)
{
  if (node->problem != NULL) {
    g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
                "the workflow's %s at %s is not valid: %s",
                kind_name(node->kind), path, node->problem);
    return FALSE;
  }
  if (node->kind == NODE_TASK) {
    if (++*n_tasks > SLUICE_WORKFLOW_MAX_TASKS) {
      g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
                  "the workflow holds more than %d tasks "
                  "(SLUICE_WORKFLOW_MAX_TASKS): split it into several",
                  SLUICE_WORKFLOW_MAX_TASKS);
      return FALSE;
    }
    return TRUE;
  }
  if (node->children->len == 0 ||
      (node->kind == NODE_CHORD && node->children->len < 2)) {
    g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
                "the workflow's %s at %s is empty: a group, a chain or a "
                "chord's group needs at least one member",
                kind_name(node->kind), path);
    return FALSE;
  }
  for (guint i = 0; i < node->children->len; i++) {
    g_autofree gchar *sub = g_strdup_printf("%s/%u", path, i);
    if (!check_tree(g_ptr_array_index(node->children, i), sub, n_tasks, error))
      return FALSE;
  }
  return TRUE;
}

/* How many completions @node produces. */
static guint
width(SluiceWorkflow *node)
{
  guint n = 0;

  switch (node->kind) {
  case NODE_TASK:
    return 1;
  case NODE_GROUP:
    for (guint i = 0; i < node->children->len; i++)
      n += width(g_ptr_array_index(node->children, i));
    return n;
  case NODE_CHAIN:
    return width(g_ptr_array_index(node->children, node->children->len - 1));
  case NODE_CHORD:
  default:
    return width(g_ptr_array_index(node->children, 1));
  }
}

/* The workflow's shape, for `sluice workflow show` (see SluiceWfMeta.tree);
 * task numbers follow the compiler's depth-first order. */
static void
pack_tree(msgpack_packer *pk, SluiceWorkflow *node, guint *n)
{
  gsize len;

  switch (node->kind) {
  case NODE_TASK:
    msgpack_pack_array(pk, 3);
    msgpack_pack_uint32(pk, 0);
    msgpack_pack_uint32(pk, (*n)++);
    len = strlen(node->task);
    msgpack_pack_str(pk, len);
    msgpack_pack_str_body(pk, node->task, len);
    return;
  case NODE_GROUP:
  case NODE_CHAIN:
    msgpack_pack_array(pk, 2);
    msgpack_pack_uint32(pk, node->kind == NODE_GROUP ? 1 : 2);
    msgpack_pack_array(pk, node->children->len);
    for (guint i = 0; i < node->children->len; i++)
      pack_tree(pk, g_ptr_array_index(node->children, i), n);
    return;
  case NODE_CHORD:
  default:
    msgpack_pack_array(pk, 4);
    msgpack_pack_uint32(pk, 3);
    msgpack_pack_uint32(pk, node->policy);
    pack_tree(pk, g_ptr_array_index(node->children, 0), n);
    pack_tree(pk, g_ptr_array_index(node->children, 1), n);
    return;
  }
}

static GBytes *
tree_of(SluiceWorkflow *root)
{
  msgpack_sbuffer buf;
  msgpack_packer pk;
  GBytes *bytes;
  guint n = 0;

  msgpack_sbuffer_init(&buf);
  msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
  pack_tree(&pk, root, &n);
  bytes = g_bytes_new(buf.data, buf.size);
  msgpack_sbuffer_destroy(&buf);
  return bytes;
}

/* ---- Compiling ----------------------------------------------------------- */

typedef struct {
  gchar *id;
  guint total;
  SluiceWfMeta meta;
  GArray *release; /* SluicePrepared */
} JoinBuild;

typedef struct {
  SluiceClient *client;
  const gchar *wf;
  gint64 now;
  guint n_tasks;
  GArray *joins; /* JoinBuild */
  GArray *start; /* SluicePrepared: what starts at once */
} Build;

/* Where a node reports: a join, the member index of its first completion
 * and the join's policy; and what it is given. */
typedef struct {
  const gchar *to;
  guint base;
  gchar policy;
  const gchar *from;
  gchar mode;
} Place;

static guint
new_join(Build *b, guint total, const gchar *kind, gchar policy)
{
  JoinBuild j = {0};

  j.id = b->joins->len == 0 ? g_strdup(b->wf)
                            : g_strdup_printf("%s/%u", b->wf, b->joins->len);
  j.total = total;
  g_strlcpy(j.meta.kind, kind, sizeof j.meta.kind);
  j.meta.policy = policy;
  j.release = g_array_new(FALSE, TRUE, sizeof(SluicePrepared));
  g_array_append_val(b->joins, j);
  return b->joins->len - 1;
}

/* The set a node's first tasks go to: the start (-1) or a join's release. */
static GArray *
set_of(Build *b, gint set)
{
  return set < 0 ? b->start : g_array_index(b->joins, JoinBuild, set).release;
}

static gchar
chord_policy_char(SluiceChordPolicy policy)
{
  return policy == SLUICE_CHORD_FAIL_FAST  ? 'f'
         : policy == SLUICE_CHORD_WAIT_ALL ? 'a'
                                           : 'i';
}

static gboolean compile(Build *b, SluiceWorkflow *node, gint set,
                        const Place *at, GError **error);

static gboolean
compile_task(Build *b, SluiceWorkflow *node, gint set, const Place *at,
             GError **error)
{
  SluiceWfRef ref = {(gchar *)b->wf, (gchar *)at->to,   at->base,
                     at->policy,     (gchar *)at->from, at->mode};
  g_autofree gchar *text = sluice_wf__format(&ref);
  g_autofree gchar *id = g_strdup_printf("%s.%u", b->wf, b->n_tasks++);
  SluicePrepared p;

  if (!sluice_client__prepare(b->client, node->task, node->args, &node->options,
                              id, text, b->now, &p, error))
    return FALSE;
  /* A task a join releases is submitted without a record: the broker
   * stores only its message until then. */
  if (set >= 0)
    g_clear_pointer(&p.record, g_bytes_unref);
  g_array_append_val(set_of(b, set), p);
  return TRUE;
}

static gboolean
compile_chain(Build *b, SluiceWorkflow *node, gint set, const Place *at,
              GError **error)
{
  guint last = node->children->len - 1;
  guint last_width = width(g_ptr_array_index(node->children, last));
  Place here = {.from = at->from, .mode = at->mode};
  g_autofree gchar *from = NULL;

  for (guint i = 0; i < last; i++) {
    SluiceWorkflow *step = g_ptr_array_index(node->children, i);
    guint w = width(step);
    gchar policy = step->continue_on_failure ? 'k' : 's';
    guint j = new_join(b, w, "chain", policy);
    JoinBuild *jb = &g_array_index(b->joins, JoinBuild, j);
    Place step_at = {jb->id, 0, policy, here.from, here.mode};

    jb->meta.up_join = g_strdup(at->to);
    jb->meta.up_base = at->base;
    jb->meta.up_width = last_width;
    jb->meta.up_policy = at->policy;
    if (!compile(b, step, set, &step_at, error))
      return FALSE;
    set = (gint)j;
    g_free(from);
    from = g_strdup(g_array_index(b->joins, JoinBuild, j).id);
    here.from = from;
    here.mode = w == 1 && step->kind != NODE_GROUP ? 'v' : 'm';
  }
  here.to = at->to;
  here.base = at->base;
  here.policy = at->policy;
  return compile(b, g_ptr_array_index(node->children, last), set, &here, error);
}

static gboolean
compile(Build *b, SluiceWorkflow *node, gint set, const Place *at,
        GError **error)
{
  switch (node->kind) {
  case NODE_TASK:
    return compile_task(b, node, set, at, error);
  case NODE_GROUP: {
    Place member = *at;
    for (guint i = 0; i < node->children->len; i++) {
      SluiceWorkflow *child = g_ptr_array_index(node->children, i);
      if (!compile(b, child, set, &member, error))
        return FALSE;
      member.base += width(child);
    }
    return TRUE;
  }
  case NODE_CHAIN:
    return compile_chain(b, node, set, at, error);
  case NODE_CHORD:
  default: {
    SluiceWorkflow *group = g_ptr_array_index(node->children, 0);
    gchar policy = chord_policy_char(node->policy);
    guint j = new_join(b, width(group), "chord", policy);
    g_autofree gchar *jid = g_strdup(g_array_index(b->joins, JoinBuild, j).id);
    Place members = {jid, 0, policy, at->from, at->mode};
    Place callback = {at->to, at->base, at->policy, jid,
                      policy == 'i' ? 'o' : 'm'};
    guint lo = b->n_tasks;

    if (!compile(b, group, set, &members, error))
      return FALSE;
    g_array_index(b->joins, JoinBuild, j).meta.lo = lo;
    g_array_index(b->joins, JoinBuild, j).meta.hi = b->n_tasks;
    return compile(b, g_ptr_array_index(node->children, 1), (gint)j, &callback,
                   error);
  }
  }
}

static void
prepared_array_free(GArray *a)
{
  for (guint i = 0; i < a->len; i++)
    sluice_client__prepared_clear(&g_array_index(a, SluicePrepared, i));
  g_array_unref(a);
}

static void
build_clear(Build *b)
{
  for (guint i = 0; i < b->joins->len; i++) {
    JoinBuild *j = &g_array_index(b->joins, JoinBuild, i);
    g_free(j->id);
    sluice_wf__meta_clear(&j->meta);
    prepared_array_free(j->release);
  }
  g_array_unref(b->joins);
  prepared_array_free(b->start);
}

static SluiceSubmit *
submits_of(SluiceClient *client, GArray *prepared)
{
  SluiceSubmit *s = g_new0(SluiceSubmit, MAX(prepared->len, 1));

  for (guint i = 0; i < prepared->len; i++) {
    sluice_client__fill_submit(
        client, &g_array_index(prepared, SluicePrepared, i), &s[i]);
    s[i].dedup_ttl_ms = 0;
  }
  return s;
}

gchar *
sluice_client_enqueue_workflow(SluiceClient *client, SluiceWorkflow *workflow,
                               GError **error)
{
  Build b = {0};
  guint n_tasks = 0, end;
  SluiceJoinSpec *specs;
  SluiceSubmit *start;
  GPtrArray *releases, *metas;
  gchar *id = NULL;
  gboolean ok;
  Place root;

  g_return_val_if_fail(client != NULL && workflow != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  if (!check_tree(workflow, "the root", &n_tasks, error))
    return NULL;
  b.client = client;
  b.wf = id = sluice_client__new_id();
  b.now = sluice_clock_now_ms(sluice_client__clock(client));
  b.joins = g_array_new(FALSE, TRUE, sizeof(JoinBuild));
  b.start = g_array_new(FALSE, TRUE, sizeof(SluicePrepared));
  end = new_join(&b, width(workflow), "end", 'a');
  g_array_index(b.joins, JoinBuild, end).meta.n_tasks = n_tasks;
  g_array_index(b.joins, JoinBuild, end).meta.tree = tree_of(workflow);
  root = (Place){b.wf, 0, 'a', NULL, 0};
  if (!compile(&b, workflow, -1, &root, error)) {
    g_prefix_error(error, "cannot enqueue the workflow: ");
    build_clear(&b);
    g_free(id);
    return NULL;
  }

  specs = g_new0(SluiceJoinSpec, b.joins->len);
  releases = g_ptr_array_new_with_free_func(g_free);
  metas = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
  for (guint i = 0; i < b.joins->len; i++) {
    JoinBuild *j = &g_array_index(b.joins, JoinBuild, i);
    SluiceSubmit *r = submits_of(client, j->release);
    GBytes *meta = sluice_wf__meta_encode(&j->meta);

    g_ptr_array_add(releases, r);
    g_ptr_array_add(metas, meta);
    specs[i].id = j->id;
    specs[i].total = j->total;
    specs[i].release = r;
    specs[i].n_release = j->release->len;
    specs[i].meta = meta;
    specs[i].ttl_ms = SLUICE_WORKFLOW_TTL_MS;
  }
  start = submits_of(client, b.start);
  if (sluice_client__options(client)->events && b.start->len > 0) {
    g_autofree SluiceEnvelope **envs = g_new0(SluiceEnvelope *, b.start->len);
    for (guint i = 0; i < b.start->len; i++)
      envs[i] = g_array_index(b.start, SluicePrepared, i).env;
    sluice_events__enqueued(sluice_client_get_broker(client), envs,
                            b.start->len, b.now);
  }
  ok = sluice_broker_join_open(sluice_client_get_broker(client), specs,
                               b.joins->len, start, b.start->len, NULL, error);
  g_free(start);
  g_free(specs);
  g_ptr_array_unref(releases);
  g_ptr_array_unref(metas);
  build_clear(&b);
  if (!ok) {
    g_prefix_error(error, "cannot enqueue the workflow: ");
    g_clear_pointer(&id, g_free);
  }
  return id;
}

/* ---- For batches (workflow-batch.c) -------------------------------------- */

gboolean
sluice_workflow__flat_tasks(SluiceWorkflow *node, GPtrArray *out,
                            GError **error)
{
  guint n = 0;

  if (!check_tree(node, "the root", &n, error))
    return FALSE;
  if (node->kind == NODE_TASK) {
    g_ptr_array_add(out, node);
    return TRUE;
  }
  if (node->kind == NODE_GROUP)
    for (guint i = 0; i < node->children->len; i++) {
      SluiceWorkflow *child = g_ptr_array_index(node->children, i);
      if (child->kind == NODE_TASK) {
        g_ptr_array_add(out, child);
        continue;
      }
      g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
                  "a batch holds tasks, not a %s (member %u): enqueue "
                  "workflows with sluice_client_enqueue_workflow()",
                  kind_name(child->kind), i);
      return FALSE;
    }
  else {
    g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
                "a batch takes a task or a group of tasks, not a %s",
                kind_name(node->kind));
    return FALSE;
  }
  return TRUE;
}

gboolean
sluice_workflow__prepare_task(SluiceClient *client, SluiceWorkflow *node,
                              const gchar *id, const SluiceWfRef *ref,
                              gint64 now, SluicePrepared *out, GError **error)
{
  g_autofree gchar *text = sluice_wf__format(ref);

  g_return_val_if_fail(node->kind == NODE_TASK, FALSE);
  return sluice_client__prepare(client, node->task, node->args, &node->options,
                                id, text, now, out, error);
}

/* ---- Status and cancellation --------------------------------------------- */

static gboolean
read_end(SluiceClient *client, const gchar *id, gboolean with_outcomes,
         SluiceJoinState *state, GError **error)
{
  gboolean found = FALSE;

  if (!sluice_client__check_name(SLUICE_NAME_ID, id, error))
    return FALSE;
  if (!sluice_broker_join_read(sluice_client_get_broker(client), id,
                               with_outcomes, state, &found, error))
    return FALSE;
  if (!found) {
    g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_NOT_FOUND,
                "no workflow “%s” is known: it was never enqueued, or its "
                "state expired",
                id);
    return FALSE;
  }
  return TRUE;
}

gboolean
sluice_client_get_workflow(SluiceClient *client, const gchar *id,
                           SluiceWorkflowStatus *out, GError **error)
{
  SluiceJoinState state;
  SluiceWfMeta meta = {0};

  g_return_val_if_fail(client != NULL && id != NULL && out != NULL, FALSE);
  memset(out, 0, sizeof *out);
  if (!read_end(client, id, TRUE, &state, error))
    return FALSE;
  out->total = state.total;
  out->finished = state.arrived;
  for (guint i = 0; state.outcomes != NULL && i < state.outcomes->len; i++) {
    GBytes *o = g_ptr_array_index(state.outcomes, i);
    if (o != NULL && !sluice_wf__outcome_succeeded(o))
      out->failed++;
  }
  if (sluice_wf__meta_decode(state.meta, &meta))
    out->tasks = meta.n_tasks;
  sluice_wf__meta_clear(&meta);
  sluice_join_state_clear(&state);
  return TRUE;
}

gboolean
sluice_client_cancel_workflow(SluiceClient *client, const gchar *id,
                              GError **error)
{
  SluiceJoinState state;
  SluiceWfMeta meta = {0};
  gboolean ok = TRUE;

  g_return_val_if_fail(client != NULL && id != NULL, FALSE);
  if (!read_end(client, id, FALSE, &state, error))
    return FALSE;
  if (!sluice_wf__meta_decode(state.meta, &meta)) {
    g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
                "“%s” is not a workflow this version of Sluice can read", id);
    sluice_join_state_clear(&state);
    return FALSE;
  }
  for (guint i = 0; ok && i < meta.n_tasks; i++) {
    g_autofree gchar *task_id = g_strdup_printf("%s.%u", id, i);
    ok = sluice_client_cancel(client, task_id, error) != SLUICE_CANCEL_FAILED;
  }
  sluice_wf__meta_clear(&meta);
  sluice_join_state_clear(&state);
  return ok;
}

/* ---- The tree ------------------------------------------------------------ */

void
sluice_workflow_node_free(SluiceWorkflowNode *node)
{
  if (node == NULL)
    return;
  g_free(node->task);
  g_free(node->task_id);
  g_ptr_array_unref(node->children);
  g_free(node);
}

static SluiceTaskState
state_of(SluiceClient *client, const gchar *id)
{
  g_autoptr(SluiceResult) r = sluice_client_inspect(client, id, NULL);
  return r != NULL ? sluice_result_get_state(r) : SLUICE_STATE_UNKNOWN;
}

/* Builds the node @o describes (SluiceWfMeta.tree); NULL if it is not one.
 * Bounded by the decoder's nesting limit. */
static SluiceWorkflowNode *
node_of(SluiceClient *client, const gchar *wf, const msgpack_object *o)
{
  SluiceWorkflowNode *node;
  const msgpack_object *a;
  guint64 kind;

  if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size < 2 ||
      o->via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
      (kind = o->via.array.ptr[0].via.u64) > SLUICE_WORKFLOW_NODE_CHORD)
    return NULL;
  a = o->via.array.ptr;
  node = g_new0(SluiceWorkflowNode, 1);
  node->kind = (SluiceWorkflowNodeKind)kind;
  node->children =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_workflow_node_free);
  if (kind == SLUICE_WORKFLOW_NODE_TASK) {
    if (o->via.array.size == 3 &&
        a[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
        a[2].type == MSGPACK_OBJECT_STR) {
      node->task = g_strndup(a[2].via.str.ptr, a[2].via.str.size);
      node->task_id =
          g_strdup_printf("%s.%" G_GUINT64_FORMAT, wf, a[1].via.u64);
      node->state = state_of(client, node->task_id);
      return node;
    }
  } else if (kind == SLUICE_WORKFLOW_NODE_CHORD) {
    if (o->via.array.size == 4 &&
        a[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
      SluiceWorkflowNode *g = node_of(client, wf, &a[2]);
      SluiceWorkflowNode *cb = g != NULL ? node_of(client, wf, &a[3]) : NULL;
      node->policy = (SluiceChordPolicy)MIN(a[1].via.u64, 2);
      if (g != NULL)
        g_ptr_array_add(node->children, g);
      if (cb != NULL) {
        g_ptr_array_add(node->children, cb);
        return node;
      }
    }
  } else if (o->via.array.size == 2 && a[1].type == MSGPACK_OBJECT_ARRAY) {
    gboolean ok = TRUE;
    for (guint32 i = 0; ok && i < a[1].via.array.size; i++) {
      SluiceWorkflowNode *child = node_of(client, wf, &a[1].via.array.ptr[i]);
      ok = child != NULL;
      if (ok)
        g_ptr_array_add(node->children, child);
    }
    if (ok)
      return node;
  }
  sluice_workflow_node_free(node);
  return NULL;
}

SluiceWorkflowNode *
sluice_client_get_workflow_tree(SluiceClient *client, const gchar *id,
                                GError **error)
{
  SluiceJoinState state;
  SluiceWfMeta meta = {0};
  SluiceWorkflowNode *root = NULL;

  g_return_val_if_fail(client != NULL && id != NULL, NULL);
  if (!read_end(client, id, FALSE, &state, error))
    return NULL;
  if (sluice_wf__meta_decode(state.meta, &meta) && meta.tree != NULL) {
    msgpack_zone zone;
    msgpack_object o;
    gsize len, off = 0;
    const gchar *data = g_bytes_get_data(meta.tree, &len);

    msgpack_zone_init(&zone, 4096);
    if (msgpack_unpack(data, len, &off, &zone, &o) == MSGPACK_UNPACK_SUCCESS)
      root = node_of(client, id, &o);
    msgpack_zone_destroy(&zone);
  }
  sluice_wf__meta_clear(&meta);
  sluice_join_state_clear(&state);
  if (root == NULL)
    g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
                "workflow “%s” has no shape this Sluice can read", id);
  return root;
}

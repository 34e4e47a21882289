/* workflow-batch.c - batches (sluice-batch.h), built on one join per batch.
 *
 * Batch B is join "B" of kind "batch". Its members are its tasks, member n
 * being task "B.<n>", each reporting its final outcome to B under policy
 * 'a'; an open batch has one more member, 0, the holder, which
 * sluice_client_close_batch() makes arrive (meta "lo" 1: results start
 * after it). The callbacks are B's release: on_complete gathers B's
 * outcomes ('m'), on_success only when all succeeded ('s'). Adding to an
 * open batch is `join_grow`, a compare-and-set on B's total, so the new
 * tasks' member numbers, baked into their envelopes, are theirs alone.
 */
#include "config.h"

#include <string.h>

#include "lib/sluice-private.h"

/* Adds @n prepared tasks for @nodes, numbered from @first, to @out. */
static gboolean
prepare_members(SluiceClient *client, const gchar *batch, GPtrArray *nodes,
                guint first, gint64 now, GArray *out, GError **error)
{
  for (guint i = 0; i < nodes->len; i++) {
    g_autofree gchar *id = g_strdup_printf("%s.%u", batch, first + i);
    SluiceWfRef ref = {(gchar *)batch, (gchar *)batch, first + i, 'a', NULL, 0};
    SluicePrepared p;

    if (!sluice_workflow__prepare_task(client, g_ptr_array_index(nodes, i), id,
                                       &ref, now, &p, error))
      return FALSE;
    g_array_append_val(out, p);
  }
  return TRUE;
}

static void
prepared_free(GArray *a)
{
  for (guint i = 0; i < a->len; i++)
    sluice_client__prepared_clear(&g_array_index(a, SluicePrepared, i));
  g_array_unref(a);
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

/* A callback node, prepared as "<B>.<name>", gathering B's outcomes. */
static gboolean
prepare_callback(SluiceClient *client, const gchar *batch, SluiceWorkflow *node,
                 const gchar *name, gchar mode, gint64 now, GArray *out,
                 GError **error)
{
  g_autoptr(GPtrArray) nodes = g_ptr_array_new();
  g_autofree gchar *id = g_strdup_printf("%s.%s", batch, name);
  SluiceWfRef ref = {(gchar *)batch, NULL, 0, 0, (gchar *)batch, mode};
  SluicePrepared p;

  if (node == NULL)
    return TRUE;
  if (!sluice_workflow__flat_tasks(node, nodes, error))
    return FALSE;
  if (nodes->len != 1 || g_ptr_array_index(nodes, 0) != node) {
    g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
                "a batch's %s callback must be one task", name);
    return FALSE;
  }
  if (!sluice_workflow__prepare_task(client, node, id, &ref, now, &p, error))
    return FALSE;
  g_clear_pointer(&p.record, g_bytes_unref);
  g_array_append_val(out, p);
  return TRUE;
}

gchar *
sluice_client_start_batch(SluiceClient *client, SluiceWorkflow *tasks,
                          SluiceWorkflow *on_complete,
                          SluiceWorkflow *on_success, gboolean keep_open,
                          GError **error)
{
  g_autoptr(GPtrArray) nodes = g_ptr_array_new();
  g_autofree gchar *id = sluice_client__new_id();
  g_autofree SluiceSubmit *start = NULL, *release = NULL;
  g_autoptr(GBytes) meta_bytes = NULL;
  gint64 now = sluice_clock_now_ms(sluice_client__clock(client));
  GArray *members = g_array_new(FALSE, TRUE, sizeof(SluicePrepared));
  GArray *callbacks = g_array_new(FALSE, TRUE, sizeof(SluicePrepared));
  SluiceWfMeta meta = {.kind = "batch"};
  SluiceJoinSpec spec = {0};
  guint holder = keep_open ? 1 : 0;
  gboolean ok;

  g_return_val_if_fail(client != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  ok = (tasks == NULL || sluice_workflow__flat_tasks(tasks, nodes, error)) &&
       prepare_members(client, id, nodes, holder, now, members, error) &&
       prepare_callback(client, id, on_complete, "complete", 'm', now,
                        callbacks, error) &&
       prepare_callback(client, id, on_success, "success", 's', now, callbacks,
                        error);
  if (ok && nodes->len + holder == 0) {
    g_set_error_literal(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
                        "an empty batch must be kept open (keep_open): it "
                        "would otherwise never complete");
    ok = FALSE;
  }
  if (ok && nodes->len > SLUICE_WORKFLOW_MAX_TASKS) {
    g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
                "a batch starts with at most %d tasks "
                "(SLUICE_WORKFLOW_MAX_TASKS): add the others with "
                "sluice_client_add_to_batch()",
                SLUICE_WORKFLOW_MAX_TASKS);
    ok = FALSE;
  }
  if (ok) {
    meta.policy = 'a';
    meta.lo = holder;
    meta_bytes = sluice_wf__meta_encode(&meta);
    start = submits_of(client, members);
    release = submits_of(client, callbacks);
    spec = (SluiceJoinSpec){id,         nodes->len + holder,
                            release,    callbacks->len,
                            meta_bytes, SLUICE_WORKFLOW_TTL_MS};
    if (sluice_client__options(client)->events && members->len > 0) {
      g_autofree SluiceEnvelope **envs = g_new0(SluiceEnvelope *, members->len);
      for (guint i = 0; i < members->len; i++)
        envs[i] = g_array_index(members, SluicePrepared, i).env;
      sluice_events__enqueued(sluice_client_get_broker(client), envs,
                              members->len, now);
    }
    ok = sluice_broker_join_open(sluice_client_get_broker(client), &spec, 1,
                                 start, members->len, NULL, error);
    if (!ok)
      g_prefix_error(error, "cannot start the batch: ");
  }
  prepared_free(members);
  prepared_free(callbacks);
  return ok ? g_steal_pointer(&id) : NULL;
}

/* Reads batch @id: FALSE with NOT_FOUND when there is none. */
static gboolean
read_batch(SluiceClient *client, const gchar *id, gboolean with_outcomes,
           SluiceJoinState *state, SluiceWfMeta *meta, GError **error)
{
  gboolean found = FALSE;

  if (!sluice_client__check_name(SLUICE_NAME_ID, id, error) ||
      !sluice_broker_join_read(sluice_client_get_broker(client), id,
                               with_outcomes, state, &found, error))
    return FALSE;
  if (!found || !sluice_wf__meta_decode(state->meta, meta) ||
      strcmp(meta->kind, "batch") != 0) {
    sluice_join_state_clear(state);
    sluice_wf__meta_clear(meta);
    g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_NOT_FOUND,
                "no batch “%s” is known: it was never started, or its state "
                "expired",
                id);
    return FALSE;
  }
  return TRUE;
}

gboolean
sluice_client_add_to_batch(SluiceClient *client, const gchar *batch_id,
                           SluiceWorkflow *tasks, GError **error)
{
  g_autoptr(GPtrArray) nodes = g_ptr_array_new();
  SluiceJoinState state;
  SluiceWfMeta meta;
  guint total;

  g_return_val_if_fail(client != NULL && batch_id != NULL && tasks != NULL,
                       FALSE);
  if (!sluice_workflow__flat_tasks(tasks, nodes, error) ||
      !read_batch(client, batch_id, FALSE, &state, &meta, error))
    return FALSE;
  total = state.status == SLUICE_JOIN_OPEN ? state.total : 0;
  sluice_join_state_clear(&state);
  sluice_wf__meta_clear(&meta);
  if (nodes->len == 0)
    return TRUE;
  /* A compare-and-set: another producer adding first moves the total, and
   * this add is prepared again for the new one. */
  for (guint round = 0; total > 0 && round < 100; round++) {
    GArray *members = g_array_new(FALSE, TRUE, sizeof(SluicePrepared));
    g_autofree SluiceSubmit *items = NULL;
    guint now_total = 0;
    gint64 now = sluice_clock_now_ms(sluice_client__clock(client));
    gboolean ok =
        prepare_members(client, batch_id, nodes, total, now, members, error);

    if (ok) {
      items = submits_of(client, members);
      if (sluice_client__options(client)->events) {
        g_autofree SluiceEnvelope **envs =
            g_new0(SluiceEnvelope *, members->len);
        for (guint i = 0; i < members->len; i++)
          envs[i] = g_array_index(members, SluicePrepared, i).env;
        sluice_events__enqueued(sluice_client_get_broker(client), envs,
                                members->len, now);
      }
      ok = sluice_broker_join_grow(sluice_client_get_broker(client), batch_id,
                                   total, nodes->len, items, members->len,
                                   &now_total, error);
    }
    prepared_free(members);
    if (!ok)
      return FALSE;
    if (now_total == total + nodes->len)
      return TRUE;
    total = now_total;
  }
  if (total == 0) {
    g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
                "batch “%s” is closed (or complete): it takes no more tasks",
                batch_id);
    return FALSE;
  }
  g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_FAILED,
              "batch “%s” kept growing under 100 tries to add to it: try "
              "again",
              batch_id);
  return FALSE;
}

gboolean
sluice_client_close_batch(SluiceClient *client, const gchar *batch_id,
                          GError **error)
{
  SluiceJoinState state;
  SluiceWfMeta meta;
  g_autoptr(GBytes) outcome = NULL;
  SluiceJoinArrival a = {0};
  gboolean held;

  g_return_val_if_fail(client != NULL && batch_id != NULL, FALSE);
  if (!read_batch(client, batch_id, FALSE, &state, &meta, error))
    return FALSE;
  held = meta.lo > 0;
  sluice_join_state_clear(&state);
  sluice_wf__meta_clear(&meta);
  if (!held)
    return TRUE; /* started closed */
  outcome = sluice_wf__outcome(NULL, "succeeded", NULL, NULL);
  a.join_id = batch_id;
  a.member = 0;
  a.outcome = outcome;
  a.step = SLUICE_JOIN_COUNT;
  return sluice_broker_join_arrive(sluice_client_get_broker(client), &a, 1,
                                   error);
}

gboolean
sluice_client_get_batch(SluiceClient *client, const gchar *batch_id,
                        SluiceBatchStatus *out, GError **error)
{
  SluiceJoinState state;
  SluiceWfMeta meta;

  g_return_val_if_fail(client != NULL && batch_id != NULL && out != NULL,
                       FALSE);
  memset(out, 0, sizeof *out);
  if (!read_batch(client, batch_id, TRUE, &state, &meta, error))
    return FALSE;
  out->total = state.total - MIN(meta.lo, state.total);
  out->open = meta.lo > 0 && state.outcomes != NULL &&
              state.outcomes->len > 0 &&
              g_ptr_array_index(state.outcomes, 0) == NULL;
  for (guint i = meta.lo; state.outcomes != NULL && i < state.outcomes->len;
       i++) {
    GBytes *o = g_ptr_array_index(state.outcomes, i);
    if (o == NULL)
      out->pending++;
    else if (sluice_wf__outcome_succeeded(o))
      out->succeeded++;
    else
      out->failed++;
  }
  out->complete = state.status == SLUICE_JOIN_RELEASED;
  sluice_wf__meta_clear(&meta);
  sluice_join_state_clear(&state);
  return TRUE;
}

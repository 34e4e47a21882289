/* workflow-run.c - what a worker does for the tasks of a workflow: the
 * reference each envelope carries, the outcome it reports to its join,
 * the arguments a callback or a chain step gathers from the join it
 * waits on, and the follow-ups of an arrival (see "Workflows" in
 * sluice-private.h for the formats).
 *
 * The broker only counts and releases; every decision is taken here: which
 * step an outcome asks of a join, whom a fail-fast release cancels, where
 * a stopped chain's missing completions are reported.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "lib/sluice-private.h"

/* ---- The reference ------------------------------------------------------- */

gchar *
sluice_wf__format(const SluiceWfRef *ref)
{
  return g_strdup_printf(
      "%s|%s|%u|%c|%s|%c", ref->workflow, ref->to != NULL ? ref->to : "",
      ref->index, ref->policy != 0 ? ref->policy : '-',
      ref->from != NULL ? ref->from : "", ref->mode != 0 ? ref->mode : '-');
}

void
sluice_wf__clear(SluiceWfRef *ref)
{
  g_free(ref->workflow);
  g_free(ref->to);
  g_free(ref->from);
  memset(ref, 0, sizeof *ref);
}

gboolean
sluice_wf__parse(const gchar *text, SluiceWfRef *out)
{
  g_auto(GStrv) parts = NULL;
  gchar *end = NULL;
  guint64 index;

  memset(out, 0, sizeof *out);
  if (text == NULL)
    return FALSE;
  parts = g_strsplit(text, "|", 7);
  if (g_strv_length(parts) != 6 || parts[0][0] == '\0' ||
      strlen(parts[3]) != 1 || strlen(parts[5]) != 1)
    return FALSE;
  index = g_ascii_strtoull(parts[2], &end, 10);
  if (end == parts[2] || *end != '\0' || index > G_MAXUINT32)
    return FALSE;
  if (strchr("faisk-", parts[3][0]) == NULL ||
      strchr("vmos-", parts[5][0]) == NULL)
    return FALSE;
  out->workflow = g_strdup(parts[0]);
  out->to = parts[1][0] != '\0' ? g_strdup(parts[1]) : NULL;
  out->index = (guint)index;
  out->policy = parts[3][0] != '-' ? parts[3][0] : 0;
  out->from = parts[4][0] != '\0' ? g_strdup(parts[4]) : NULL;
  out->mode = parts[5][0] != '-' ? parts[5][0] : 0;
  if (out->from != NULL && out->mode == 0) {
    sluice_wf__clear(out);
    return FALSE;
  }
  return TRUE;
}

SluiceJoinStep
sluice_wf__step(gchar policy, gboolean failed)
{
  if (!failed)
    return SLUICE_JOIN_COUNT;
  switch (policy) {
  case 'f':
    return SLUICE_JOIN_RELEASE_NOW;
  case 's':
    return SLUICE_JOIN_ABANDON;
  default:
    return SLUICE_JOIN_COUNT;
  }
}

/* ---- msgpack helpers ----------------------------------------------------- */

static void
pack_str(msgpack_packer *pk, const gchar *s)
{
  gsize len = strlen(s);

  msgpack_pack_str(pk, len);
  msgpack_pack_str_body(pk, s, len);
}

static GBytes *
sbuffer_to_bytes(msgpack_sbuffer *buf)
{
  /* msgpack's buffer is malloc()ed: hand it over as it is. */
  GBytes *bytes =
      g_bytes_new_with_free_func(buf->data, buf->size, free, buf->data);
  buf->data = NULL;
  buf->size = buf->alloc = 0;
  return bytes;
}

/* The value under @key in the map @o, or NULL. */
static const msgpack_object *
map_get(const msgpack_object *o, const gchar *key)
{
  gsize len = strlen(key);

  if (o == NULL || o->type != MSGPACK_OBJECT_MAP)
    return NULL;
  for (guint32 i = 0; i < o->via.map.size; i++) {
    const msgpack_object *k = &o->via.map.ptr[i].key;
    if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == len &&
        memcmp(k->via.str.ptr, key, len) == 0)
      return &o->via.map.ptr[i].val;
  }
  return NULL;
}

static gboolean
get_uint(const msgpack_object *o, guint *out)
{
  if (o == NULL || o->type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
      o->via.u64 > G_MAXUINT32)
    return FALSE;
  *out = (guint)o->via.u64;
  return TRUE;
}

static gchar *
get_str(const msgpack_object *o)
{
  if (o == NULL || o->type != MSGPACK_OBJECT_STR)
    return NULL;
  return g_strndup(o->via.str.ptr, o->via.str.size);
}

static gchar
get_char(const msgpack_object *o)
{
  if (o == NULL || o->type != MSGPACK_OBJECT_STR || o->via.str.size != 1)
    return 0;
  return o->via.str.ptr[0];
}

/* Unpacks @bytes into @zone; NULL when they are not one msgpack value. */
static const msgpack_object *
unpack(GBytes *bytes, msgpack_zone *zone, msgpack_object *out)
{
  gsize len, off = 0;
  const gchar *data;

  if (bytes == NULL)
    return NULL;
  data = g_bytes_get_data(bytes, &len);
  if (msgpack_unpack(data, len, &off, zone, out) != MSGPACK_UNPACK_SUCCESS ||
      off != len)
    return NULL;
  return out;
}

/* ---- Outcomes ------------------------------------------------------------ */

GBytes *
sluice_wf__outcome(const gchar *id, const gchar *state, GBytes *value,
                   const gchar *error)
{
  msgpack_sbuffer buf;
  msgpack_packer pk;

  msgpack_sbuffer_init(&buf);
  msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 2 + (value != NULL) + (error != NULL));
  pack_str(&pk, "id");
  pack_str(&pk, id != NULL ? id : "");
  pack_str(&pk, "state");
  pack_str(&pk, state);
  if (value != NULL) {
    gsize len;
    gconstpointer data = g_bytes_get_data(value, &len);
    pack_str(&pk, "result");
    /* A result is one msgpack value already: copied as it is. */
    msgpack_sbuffer_write(&buf, data, len);
  }
  if (error != NULL) {
    pack_str(&pk, "error");
    pack_str(&pk, error);
  }
  return sbuffer_to_bytes(&buf);
}

gboolean
sluice_wf__outcome_succeeded(GBytes *outcome)
{
  msgpack_zone zone;
  msgpack_object o;
  const msgpack_object *state;
  gboolean ok;

  msgpack_zone_init(&zone, 256);
  state = map_get(unpack(outcome, &zone, &o), "state");
  ok = state != NULL && state->type == MSGPACK_OBJECT_STR &&
       state->via.str.size == 9 &&
       memcmp(state->via.str.ptr, "succeeded", 9) == 0;
  msgpack_zone_destroy(&zone);
  return ok;
}

/* ---- Join meta ----------------------------------------------------------- */

GBytes *
sluice_wf__meta_encode(const SluiceWfMeta *meta)
{
  msgpack_sbuffer buf;
  msgpack_packer pk;
  gchar policy[2] = {meta->policy, '\0'};

  msgpack_sbuffer_init(&buf);
  msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 5 + (meta->up_join != NULL) + (meta->tree != NULL));
  pack_str(&pk, "k");
  pack_str(&pk, meta->kind);
  pack_str(&pk, "p");
  pack_str(&pk, policy);
  pack_str(&pk, "lo");
  msgpack_pack_uint32(&pk, meta->lo);
  pack_str(&pk, "hi");
  msgpack_pack_uint32(&pk, meta->hi);
  pack_str(&pk, "n");
  msgpack_pack_uint32(&pk, meta->n_tasks);
  if (meta->up_join != NULL) {
    gchar up_policy[2] = {meta->up_policy, '\0'};
    pack_str(&pk, "up");
    msgpack_pack_array(&pk, 4);
    pack_str(&pk, meta->up_join);
    msgpack_pack_uint32(&pk, meta->up_base);
    msgpack_pack_uint32(&pk, meta->up_width);
    pack_str(&pk, up_policy);
  }
  if (meta->tree != NULL) {
    gsize len;
    gconstpointer data = g_bytes_get_data(meta->tree, &len);
    pack_str(&pk, "tree");
    msgpack_sbuffer_write(&buf, data, len);
  }
  return sbuffer_to_bytes(&buf);
}

gboolean
sluice_wf__meta_decode(GBytes *bytes, SluiceWfMeta *out)
{
  msgpack_zone zone;
  msgpack_object o;
  const msgpack_object *m, *kind, *up;
  gboolean ok;

  memset(out, 0, sizeof *out);
  msgpack_zone_init(&zone, 256);
  m = unpack(bytes, &zone, &o);
  kind = map_get(m, "k");
  ok = kind != NULL && kind->type == MSGPACK_OBJECT_STR &&
       kind->via.str.size < sizeof out->kind &&
       get_uint(map_get(m, "lo"), &out->lo) &&
       get_uint(map_get(m, "hi"), &out->hi) &&
       get_uint(map_get(m, "n"), &out->n_tasks);
  if (ok) {
    memcpy(out->kind, kind->via.str.ptr, kind->via.str.size);
    out->policy = get_char(map_get(m, "p"));
    up = map_get(m, "up");
    if (up != NULL) {
      ok = up->type == MSGPACK_OBJECT_ARRAY && up->via.array.size == 4 &&
           get_uint(&up->via.array.ptr[1], &out->up_base) &&
           get_uint(&up->via.array.ptr[2], &out->up_width) &&
           (out->up_join = get_str(&up->via.array.ptr[0])) != NULL;
      out->up_policy = ok ? get_char(&up->via.array.ptr[3]) : 0;
    }
    if (ok && map_get(m, "tree") != NULL) {
      msgpack_sbuffer tb;
      msgpack_packer tpk;
      msgpack_sbuffer_init(&tb);
      msgpack_packer_init(&tpk, &tb, msgpack_sbuffer_write);
      msgpack_pack_object(&tpk, *map_get(m, "tree"));
      out->tree = sbuffer_to_bytes(&tb);
    }
  }
  msgpack_zone_destroy(&zone);
  if (!ok)
    sluice_wf__meta_clear(out);
  return ok;
}

void
sluice_wf__meta_clear(SluiceWfMeta *meta)
{
  g_free(meta->up_join);
  g_clear_pointer(&meta->tree, g_bytes_unref);
  memset(meta, 0, sizeof *meta);
}

/* ---- Follow-ups of arrivals ---------------------------------------------- */

/* A fail-fast release: the members that have not finished are cancelled
 * (revoked: a queued one is skipped, a running one has its cancellable
 * cancelled, one a join has yet to release is skipped when it is). */
static void
cancel_rest(SluiceBroker *broker, const gchar *join_id, gint64 now_ms)
{
  SluiceJoinState state;
  SluiceWfMeta meta;
  gboolean found = FALSE;
  g_autoptr(GError) error = NULL;
  const gchar *slash;
  g_autofree gchar *wf = NULL;

  if (!sluice_broker_join_read(broker, join_id, FALSE, &state, &found,
                               &error)) {
    sluice_log__message(G_LOG_LEVEL_WARNING,
                        "workflow join %s failed fast, but the members still "
                        "running could not be found to cancel them: %s",
                        join_id, error->message);
    return;
  }
  if (!found || !sluice_wf__meta_decode(state.meta, &meta)) {
    sluice_join_state_clear(&state);
    return;
  }
  slash = strrchr(join_id, '/');
  wf = slash != NULL ? g_strndup(join_id, (gsize)(slash - join_id))
                     : g_strdup(join_id);
  for (guint i = meta.lo; i < meta.hi; i++) {
    g_autofree gchar *id = g_strdup_printf("%s.%u", wf, i);
    g_autoptr(GError) local = NULL;
    if (!sluice_broker_revoke(broker, id, now_ms + SLUICE_DEFAULT_REVOKE_TTL_MS,
                              &local)) {
      sluice_log__message(G_LOG_LEVEL_WARNING,
                          "workflow join %s failed fast, but task %s could "
                          "not be cancelled: %s",
                          join_id, id, local->message);
      break;
    }
  }
  sluice_wf__meta_clear(&meta);
  sluice_join_state_clear(&state);
}

/* A chain stopped at @join_id: the steps it holds never run, so the
 * completions they would have made are reported as failures where the
 * chain reports (which may stop an outer chain in turn). Bounded by the
 * nesting of the workflow. */
static void
report_stopped(SluiceBroker *broker, const gchar *join_id, gint64 now_ms)
{
  g_autofree gchar *current = g_strdup(join_id);

  for (guint depth = 0; current != NULL && depth < SLUICE_WORKFLOW_MAX_TASKS;
       depth++) {
    SluiceJoinState state;
    SluiceWfMeta meta;
    gboolean found = FALSE, abandoned = FALSE;
    g_autoptr(GError) error = NULL;
    g_autofree gchar *why = NULL;
    g_autofree SluiceJoinArrival *items = NULL;
    g_autoptr(GBytes) outcome = NULL;

    if (!sluice_broker_join_read(broker, current, FALSE, &state, &found,
                                 &error)) {
      sluice_log__message(G_LOG_LEVEL_WARNING,
                          "a workflow chain stopped at %s, but what follows "
                          "could not be told: %s",
                          current, error->message);
      return;
    }
    if (!found || !sluice_wf__meta_decode(state.meta, &meta)) {
      sluice_join_state_clear(&state);
      return;
    }
    sluice_join_state_clear(&state);
    if (meta.up_join == NULL || meta.up_width == 0) {
      sluice_wf__meta_clear(&meta);
      return;
    }
    why = g_strdup_printf("not run: its chain stopped at %s", current);
    outcome = sluice_wf__outcome(NULL, "cancelled", NULL, why);
    items = g_new0(SluiceJoinArrival, meta.up_width);
    for (guint i = 0; i < meta.up_width; i++) {
      items[i].join_id = meta.up_join;
      items[i].member = meta.up_base + i;
      items[i].outcome = outcome;
      items[i].step = sluice_wf__step(meta.up_policy, TRUE);
    }
    if (!sluice_broker_join_arrive(broker, items, meta.up_width, &error)) {
      sluice_log__message(G_LOG_LEVEL_WARNING,
                          "a workflow chain stopped at %s, but %s could not "
                          "be told: %s",
                          current, meta.up_join, error->message);
      sluice_wf__meta_clear(&meta);
      return;
    }
    for (guint i = 0; i < meta.up_width; i++) {
      if (items[i].released && items[i].step == SLUICE_JOIN_RELEASE_NOW)
        cancel_rest(broker, meta.up_join, now_ms);
      if (items[i].counted && items[i].step == SLUICE_JOIN_ABANDON)
        abandoned = TRUE;
    }
    g_free(current);
    current = abandoned ? g_strdup(meta.up_join) : NULL;
    sluice_wf__meta_clear(&meta);
  }
}

void
sluice_wf__after_arrivals(SluiceBroker *broker, gint64 now_ms,
                          const SluiceJoinArrival *items, guint n)
{
  for (guint i = 0; i < n; i++) {
    if (items[i].released && items[i].step == SLUICE_JOIN_RELEASE_NOW)
      cancel_rest(broker, items[i].join_id, now_ms);
    /* Only the arrival that counted: a repeat must not report twice
     * (reporting is idempotent, but costs round trips). */
    if (items[i].counted && items[i].step == SLUICE_JOIN_ABANDON)
      report_stopped(broker, items[i].join_id, now_ms);
  }
}

/* ---- Gathering arguments ------------------------------------------------- */

static GBytes *
gather(const SluiceWfRef *ref, const SluiceJoinState *state, GBytes *own_args,
       guint first)
{
  msgpack_sbuffer buf;
  msgpack_packer pk;
  msgpack_zone zone;
  GPtrArray *outcomes = state->outcomes;
  guint n = outcomes != NULL ? outcomes->len : 0;
  guint n_ok = 0, n_failed = 0;
  msgpack_object *objs = g_new0(msgpack_object, MAX(n, 1));
  gboolean *have = g_new0(gboolean, MAX(n, 1));
  gboolean *succeeded = g_new0(gboolean, MAX(n, 1));

  msgpack_zone_init(&zone, 4096);
  for (guint i = first; i < n; i++) {
    const msgpack_object *state_o;
    have[i] = unpack(g_ptr_array_index(outcomes, i), &zone, &objs[i]) != NULL;
    state_o = have[i] ? map_get(&objs[i], "state") : NULL;
    succeeded[i] = state_o != NULL && state_o->type == MSGPACK_OBJECT_STR &&
                   state_o->via.str.size == 9 &&
                   memcmp(state_o->via.str.ptr, "succeeded", 9) == 0;
    if (succeeded[i])
      n_ok++;
    else if (have[i])
      n_failed++;
  }

  msgpack_sbuffer_init(&buf);
  msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
  if (ref->mode == 'v') {
    const msgpack_object *r =
        n > 0 && succeeded[0] ? map_get(&objs[0], "result") : NULL;
    if (r != NULL)
      msgpack_pack_object(&pk, *r);
    else
      msgpack_pack_nil(&pk);
  } else {
    gboolean only_ok = ref->mode == 'o';

    msgpack_pack_map(&pk, 3);
    pack_str(&pk, "results");
    msgpack_pack_array(&pk, only_ok ? n_ok : n - MIN(first, n));
    for (guint i = first; i < n; i++) {
      const msgpack_object *r =
          succeeded[i] ? map_get(&objs[i], "result") : NULL;
      if (only_ok && !succeeded[i])
        continue;
      if (r != NULL)
        msgpack_pack_object(&pk, *r);
      else
        msgpack_pack_nil(&pk);
    }
    pack_str(&pk, "errors");
    msgpack_pack_array(&pk, only_ok ? 0 : n_failed);
    for (guint i = first; !only_ok && i < n; i++) {
      const msgpack_object *id, *st, *err;
      if (!have[i] || succeeded[i])
        continue;
      id = map_get(&objs[i], "id");
      st = map_get(&objs[i], "state");
      err = map_get(&objs[i], "error");
      msgpack_pack_map(&pk, 4);
      pack_str(&pk, "index");
      msgpack_pack_uint32(&pk, i - first);
      pack_str(&pk, "id");
      if (id != NULL)
        msgpack_pack_object(&pk, *id);
      else
        msgpack_pack_nil(&pk);
      pack_str(&pk, "state");
      if (st != NULL)
        msgpack_pack_object(&pk, *st);
      else
        msgpack_pack_nil(&pk);
      pack_str(&pk, "error");
      if (err != NULL)
        msgpack_pack_object(&pk, *err);
      else
        msgpack_pack_nil(&pk);
    }
    pack_str(&pk, "args");
    if (own_args != NULL) {
      gsize len;
      gconstpointer data = g_bytes_get_data(own_args, &len);
      msgpack_sbuffer_write(&buf, data, len);
    } else {
      msgpack_pack_nil(&pk);
    }
  }
  msgpack_zone_destroy(&zone);
  g_free(objs);
  g_free(have);
  g_free(succeeded);
  return sbuffer_to_bytes(&buf);
}

gboolean
sluice_wf__gather_args(SluiceBroker *broker, SluiceEnvelope *env,
                       gboolean *out_gathered, GError **error)
{
  SluiceWfRef ref;
  SluiceJoinState state;
  gboolean found = FALSE;
  GBytes *args;

  *out_gathered = FALSE;
  if (!sluice_wf__parse(env->wf, &ref) || ref.from == NULL) {
    sluice_wf__clear(&ref);
    return TRUE;
  }
  if (!sluice_broker_join_read(broker, ref.from, TRUE, &state, &found, error)) {
    g_prefix_error(error, "could not read the results this workflow step "
                          "waits for: ");
    sluice_wf__clear(&ref);
    return FALSE;
  }
  if (!found) {
    g_set_error(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_FATAL,
                "the results this workflow step waits for (join %s) are gone: "
                "the workflow's state expired",
                ref.from);
    sluice_wf__clear(&ref);
    return FALSE;
  }
  {
    SluiceWfMeta meta;
    guint first = 0;
    gboolean failures = FALSE;

    /* A batch's holder is no member of the results. */
    if (sluice_wf__meta_decode(state.meta, &meta) &&
        strcmp(meta.kind, "batch") == 0)
      first = meta.lo;
    sluice_wf__meta_clear(&meta);
    for (guint i = first; state.outcomes != NULL && i < state.outcomes->len;
         i++) {
      GBytes *o = g_ptr_array_index(state.outcomes, i);
      if (o == NULL || !sluice_wf__outcome_succeeded(o))
        failures = TRUE;
    }
    if (ref.mode == 's' && failures) {
      g_set_error(error, G_IO_ERROR, G_IO_ERROR_CANCELLED,
                  "not run: a task of its batch (%s) failed", ref.from);
      sluice_join_state_clear(&state);
      sluice_wf__clear(&ref);
      return FALSE;
    }
    args = gather(&ref, &state, env->args, first);
  }
  sluice_join_state_clear(&state);
  g_clear_pointer(&env->args, g_bytes_unref);
  env->args = args;
  g_clear_pointer(&ref.from, g_free);
  ref.mode = 0;
  g_free(env->wf);
  env->wf = sluice_wf__format(&ref);
  sluice_wf__clear(&ref);
  *out_gathered = TRUE;
  return TRUE;
}

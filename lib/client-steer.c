/* client-steer.c - what operators do with a client besides enqueueing and
 * awaiting: list tasks by state, pause and resume queues, purge a queue,
 * delete one task, run a scheduled one now, read a periodic schedule's
 * last occurrence (see sluice-client.h), and follow the event stream
 * (sluice-events.h; the decoding is events.c's).
 *
 * The core decides, the broker finds: the listing slots hand back stored
 * messages as they are, and this file decodes them, tells a delay from a
 * retry (the envelope's attempt), takes a retry's last error from its
 * history, filters by queue and task name and pages. Running tasks are
 * not in the store at all on every broker (redis-fast pops them), so they
 * come from what the workers announce, the same way on every broker.
 *
 * A listing cursor is the broker's cursor behind a letter naming the
 * listing it belongs to, so a cursor passed to a listing of another state
 * is refused instead of misread.
 */
#include "config.h"

#include <string.h>

#include "lib/sluice-private.h"

/* At most this many entries are read per call of a filtered listing,
 * beyond the page asked for: 10 x the limit, at least this many. */
#define LIST_MIN_BUDGET 1000

void
sluice_list_options_init(SluiceListOptions *options)
{
  g_return_if_fail(options != NULL);
  memset(options, 0, sizeof *options);
  options->state = SLUICE_STATE_QUEUED;
}

static SluiceListedTask *
listed_task_new(SluiceTaskState state)
{
  SluiceListedTask *t = g_new0(SluiceListedTask, 1);

  t->state = state;
  return t;
}

void
sluice_listed_task_free(SluiceListedTask *task)
{
  if (task == NULL)
    return;
  g_free(task->id);
  g_free(task->task);
  g_free(task->queue);
  g_free(task->worker);
  g_free(task->error);
  g_free(task->dead_letter_reason);
  g_free(task->entry_id);
  if (task->args != NULL)
    g_bytes_unref(task->args);
  g_free(task->seal);
  g_free(task);
}

/* ---- Listing ------------------------------------------------------------- */

typedef struct {
  SluiceClient *client;
  const SluiceListOptions *o;
  guint limit;
  guint budget;   /* entries read at most */
  guint examined; /* entries read so far */
  GPtrArray *out;
} Listing;

static gboolean
wanted(const Listing *l, const gchar *task, const gchar *queue)
{
  if (l->o->task != NULL && g_strcmp0(l->o->task, task) != 0)
    return FALSE;
  return l->o->queue == NULL || g_strcmp0(l->o->queue, queue) == 0;
}

/* The args of @env into @t: in clear as they are; sealed, opened with
 * the client's keyring, else left sealed with the key named in t->seal. */
static void
set_args(SluiceClient *client, SluiceListedTask *t, const SluiceEnvelope *env)
{
  if (env->seal != NULL) {
    GBytes *plain = sluice_seal__open(sluice_client__get_keyring(client),
                                      SLUICE_SEAL_ARGS, env->seal, env->id,
                                      env->task, env->queue, env->args, NULL);
    if (plain != NULL) {
      t->args = plain;
      return;
    }
    t->seal = g_strdup(env->seal);
  }
  t->args = env->args != NULL ? g_bytes_ref(env->args) : NULL;
}

/* A listed message as a task: decoded, or named as undecodable. */
static SluiceListedTask *
task_of_message(SluiceClient *client, const SluiceListedMessage *m,
                SluiceTaskState state)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceEnvelope) env =
      sluice_envelope_decode(m->payload, NULL, &error);
  SluiceListedTask *t = listed_task_new(state);

  t->queue = g_strdup(m->queue);
  t->due_at_ms = m->due_at;
  if (env == NULL) {
    t->id = g_strdup(m->id);
    t->error = g_strdup_printf("its message cannot be decoded (%s); a worker "
                               "buries it `malformed` when it meets it",
                               error->message);
    return t;
  }
  t->id = g_strdup(env->id);
  t->task = g_strdup(env->task);
  t->attempt = env->attempt;
  t->enqueued_at_ms = env->enqueued_at;
  set_args(client, t, env);
  if (state == SLUICE_STATE_SCHEDULED && env->unknown_since > 0)
    t->error = g_strdup_printf(
        "deferred: no worker knows a task named “%s”; it is buried "
        "unknown_task if none does by unknown_task_timeout",
        env->task);
  else if (env->history != NULL && env->history->len > 0)
    t->error = g_strdup(g_ptr_array_index(env->history, env->history->len - 1));
  return t;
}

/* One page of a source: reads at most @want entries after @cursor, adds
 * what matches to l->out, sets @out_next (NULL at the end) and
 * @out_examined. */
typedef gboolean (*PageFunc)(Listing *l, const gchar *cursor, guint want,
                             gchar **out_next, guint *out_examined,
                             GError **error);

static gboolean
queued_page(Listing *l, const gchar *cursor, guint want, gchar **out_next,
            guint *out_examined, GError **error)
{
  g_autoptr(GPtrArray) page = g_ptr_array_new_with_free_func(
      (GDestroyNotify)sluice_listed_message_free);

  if (!sluice_broker_list_queued(sluice_client_get_broker(l->client),
                                 l->o->queue, cursor, want, page, out_next,
                                 error))
    return FALSE;
  *out_examined = page->len;
  for (guint i = 0; i < page->len; i++) {
    SluiceListedTask *t =
        task_of_message(l->client, page->pdata[i], SLUICE_STATE_QUEUED);
    if (wanted(l, t->task, t->queue))
      g_ptr_array_add(l->out, t);
    else
      sluice_listed_task_free(t);
  }
  return TRUE;
}

/* The schedule holds delays and retries alike: a retry is a message past
 * its first attempt (a deferred unknown task keeps its attempt). */
static gboolean
scheduled_page(Listing *l, const gchar *cursor, guint want, gchar **out_next,
               guint *out_examined, GError **error)
{
  g_autoptr(GPtrArray) page = g_ptr_array_new_with_free_func(
      (GDestroyNotify)sluice_listed_message_free);

  if (!sluice_broker_list_scheduled(sluice_client_get_broker(l->client), cursor,
                                    want, page, out_next, error))
    return FALSE;
  *out_examined = page->len;
  for (guint i = 0; i < page->len; i++) {
    SluiceListedTask *t =
        task_of_message(l->client, page->pdata[i], l->o->state);
    gboolean retrying = t->attempt > 1;

    if (retrying == (l->o->state == SLUICE_STATE_RETRYING) &&
        wanted(l, t->task, t->queue))
      g_ptr_array_add(l->out, t);
    else
      sluice_listed_task_free(t);
  }
  return TRUE;
}

static gboolean
dead_page(Listing *l, const gchar *cursor, guint want, gchar **out_next,
          guint *out_examined, GError **error)
{
  g_autoptr(GPtrArray) page =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);

  if (!sluice_broker_dlq_list(sluice_client_get_broker(l->client), cursor, want,
                              page, error))
    return FALSE;
  *out_examined = page->len;
  *out_next =
      page->len == want
          ? g_strdup(((SluiceDeadLetter *)page->pdata[page->len - 1])->entry_id)
          : NULL;
  for (guint i = 0; i < page->len; i++) {
    const SluiceDeadLetter *dl = page->pdata[i];
    g_autoptr(SluiceEnvelope) env =
        sluice_envelope_decode(dl->payload, NULL, NULL);
    SluiceListedTask *t;

    if (!wanted(l, dl->task, dl->source))
      continue;
    t = listed_task_new(SLUICE_STATE_DEAD_LETTERED);
    t->id = g_strdup(dl->task_id);
    t->task = g_strdup(dl->task);
    t->queue = g_strdup(dl->source);
    t->error = g_strdup(dl->detail);
    t->dead_letter_reason = g_strdup(dl->reason);
    t->entry_id = g_strdup(dl->entry_id);
    if (env != NULL) {
      t->attempt = env->attempt;
      t->enqueued_at_ms = env->enqueued_at;
      set_args(l->client, t, env);
    }
    g_ptr_array_add(l->out, t);
  }
  return TRUE;
}

/* Reads pages of @f until the page is full, the source ends or the budget
 * is spent. Each read asks for no more than the page still needs, so every
 * entry read is either kept or filtered out: the cursor after the last
 * read is exactly where the next call goes on. */
static gboolean
page_through(Listing *l, PageFunc f, const gchar *cursor, gchar **out_next,
             GError **error)
{
  g_autofree gchar *at = g_strdup(cursor);

  for (;;) {
    guint want = MIN(l->limit - l->out->len, l->budget - l->examined);
    guint examined = 0;
    gchar *next = NULL;

    if (want == 0)
      break;
    if (!f(l, at, want, &next, &examined, error))
      return FALSE;
    l->examined += MAX(examined, 1);
    g_free(at);
    at = next;
    if (at == NULL)
      break;
  }
  *out_next = g_steal_pointer(&at);
  return TRUE;
}

static gint
by_start(gconstpointer a, gconstpointer b)
{
  const SluiceListedTask *x = *(SluiceListedTask *const *)a;
  const SluiceListedTask *y = *(SluiceListedTask *const *)b;

  if (x->started_at_ms != y->started_at_ms)
    return x->started_at_ms < y->started_at_ms ? -1 : 1;
  return g_strcmp0(x->id, y->id);
}

/* Running tasks, from what the live workers announced: sorted by start
 * time and id, which is also the cursor ("<started_at>:<id>"). */
static gboolean
running_list(Listing *l, const gchar *cursor, gchar **out_next, GError **error)
{
  static const gchar *const no_queues[] = {NULL};
  g_autoptr(GPtrArray) all =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_listed_task_free);
  gint64 after_started = 0;
  const gchar *after_id = NULL;
  SluiceBrokerStats stats;
  guint i = 0;

  if (cursor != NULL) {
    gchar *end = NULL;
    after_started = g_ascii_strtoll(cursor, &end, 10);
    if (end == cursor || *end != ':') {
      g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
                  "“%s” is not a cursor of a listing of running tasks: pass "
                  "the cursor the previous page returned",
                  cursor);
      return FALSE;
    }
    after_id = end + 1;
  }
  if (!sluice_client_get_stats(l->client, no_queues, &stats, error))
    return FALSE;
  for (guint w = 0; w < stats.workers->len; w++) {
    const SluiceWorkerInfo *info = stats.workers->pdata[w];

    for (guint k = 0; info->alive && info->running_tasks != NULL &&
                      k < info->running_tasks->len;
         k++) {
      const SluiceRunningTask *r = info->running_tasks->pdata[k];
      SluiceListedTask *t;

      if (!wanted(l, r->task, r->queue))
        continue;
      t = listed_task_new(SLUICE_STATE_RUNNING);
      t->id = g_strdup(r->id);
      t->task = g_strdup(r->task);
      t->queue = g_strdup(r->queue);
      t->started_at_ms = r->started_at_ms;
      t->worker = g_strdup(info->id);
      g_ptr_array_add(all, t);
    }
  }
  sluice_broker_stats_clear(&stats);
  g_ptr_array_sort(all, by_start);
  if (cursor != NULL) {
    for (; i < all->len; i++) {
      const SluiceListedTask *t = all->pdata[i];
      if (t->started_at_ms > after_started ||
          (t->started_at_ms == after_started && g_strcmp0(t->id, after_id) > 0))
        break;
    }
  }
  for (; i < all->len && l->out->len < l->limit; i++)
    g_ptr_array_add(l->out, g_steal_pointer(&all->pdata[i]));
  if (i < all->len && l->out->len > 0) {
    const SluiceListedTask *last = l->out->pdata[l->out->len - 1];
    *out_next = g_strdup_printf("%" G_GINT64_FORMAT ":%s", last->started_at_ms,
                                last->id);
  }
  return TRUE;
}

/* The letter a listing's cursors carry. */
static gchar
cursor_letter(SluiceTaskState state)
{
  switch (state) {
  case SLUICE_STATE_QUEUED:
    return 'q';
  case SLUICE_STATE_SCHEDULED:
    return 's';
  case SLUICE_STATE_RETRYING:
    return 't';
  case SLUICE_STATE_RUNNING:
    return 'r';
  case SLUICE_STATE_DEAD_LETTERED:
    return 'd';
  default:
    return '\0';
  }
}

static gboolean
check_list_options(const SluiceListOptions *o, GError **error)
{
  if (cursor_letter(o->state) == '\0') {
    g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
                "cannot list tasks that are %s: list queued, scheduled, "
                "retrying, running or dead_lettered ones (a finished task's "
                "record is read with sluice_client_inspect)",
                sluice_task_state_to_string(o->state));
    return FALSE;
  }
  if (o->state == SLUICE_STATE_QUEUED && o->queue == NULL) {
    g_set_error_literal(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
                        "which queue? queued tasks are listed one queue at a "
                        "time: set the listing's queue");
    return FALSE;
  }
  if (o->queue != NULL &&
      !sluice_client__check_name(SLUICE_NAME_QUEUE, o->queue, error))
    return FALSE;
  if (o->limit > SLUICE_LIST_MAX_LIMIT) {
    g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
                "a page holds at most %u tasks, not %u: page through with "
                "the cursor",
                SLUICE_LIST_MAX_LIMIT, o->limit);
    return FALSE;
  }
  if (o->cursor != NULL &&
      (o->cursor[0] != cursor_letter(o->state) || o->cursor[1] != ':')) {
    g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
                "“%s” is not a cursor of a listing of %s tasks: pass the "
                "cursor the previous page of this listing returned",
                o->cursor, sluice_task_state_to_string(o->state));
    return FALSE;
  }
  return TRUE;
}

GPtrArray *
sluice_client_list(SluiceClient *client, const SluiceListOptions *options,
                   gchar **out_next_cursor, GError **error)
{
  SluiceListOptions defaults;
  g_autoptr(GPtrArray) out =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_listed_task_free);
  g_autofree gchar *next = NULL;
  const gchar *cursor;
  Listing l = {0};
  gboolean ok;

  g_return_val_if_fail(client != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  if (out_next_cursor != NULL)
    *out_next_cursor = NULL;
  if (options == NULL) {
    sluice_list_options_init(&defaults);
    options = &defaults;
  }
  if (!check_list_options(options, error))
    return NULL;

  l.client = client;
  l.o = options;
  l.limit = options->limit > 0 ? options->limit : SLUICE_LIST_DEFAULT_LIMIT;
  l.budget = MAX(10 * l.limit, LIST_MIN_BUDGET);
  l.out = out;
  cursor = options->cursor != NULL ? options->cursor + 2 : NULL;
  switch (options->state) {
  case SLUICE_STATE_QUEUED:
    ok = page_through(&l, queued_page, cursor, &next, error);
    break;
  case SLUICE_STATE_SCHEDULED:
  case SLUICE_STATE_RETRYING:
    ok = page_through(&l, scheduled_page, cursor, &next, error);
    break;
  case SLUICE_STATE_DEAD_LETTERED:
    ok = page_through(&l, dead_page, cursor, &next, error);
    break;
  default:
    ok = running_list(&l, cursor, &next, error);
    break;
  }
  if (!ok)
    return NULL;
  if (out_next_cursor != NULL && next != NULL)
    *out_next_cursor =
        g_strdup_printf("%c:%s", cursor_letter(options->state), next);
  return g_steal_pointer(&out);
}

/* ---- Pausing and purging ------------------------------------------------- */

static gboolean
set_paused(SluiceClient *client, const gchar *queue, gboolean paused,
           GError **error)
{
  g_return_val_if_fail(client != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  if (!sluice_client__check_name(SLUICE_NAME_QUEUE, queue, error))
    return FALSE;
  return sluice_broker_set_paused(sluice_client_get_broker(client), queue,
                                  paused, error);
}

gboolean
sluice_client_pause(SluiceClient *client, const gchar *queue, GError **error)
{
  return set_paused(client, queue, TRUE, error);
}

gboolean
sluice_client_resume(SluiceClient *client, const gchar *queue, GError **error)
{
  return set_paused(client, queue, FALSE, error);
}

static gint
compare_names(gconstpointer a, gconstpointer b)
{
  return g_strcmp0(*(const gchar *const *)a, *(const gchar *const *)b);
}

gchar **
sluice_client_list_paused(SluiceClient *client, GError **error)
{
  g_autoptr(GPtrArray) paused = g_ptr_array_new_with_free_func(g_free);

  g_return_val_if_fail(client != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  if (!sluice_broker_list_paused(sluice_client_get_broker(client), paused,
                                 error))
    return NULL;
  g_ptr_array_sort(paused, compare_names);
  g_ptr_array_add(paused, NULL);
  g_ptr_array_set_free_func(paused, NULL);
  return (gchar **)g_ptr_array_free(g_steal_pointer(&paused), FALSE);
}

/* ---- Taking queued tasks out ---------------------------------------------
 *
 * The broker cannot read a message's task id (the payload is the core's),
 * so the core finds queued tasks with list_queued, reads their ids, and
 * has the broker take out exactly the messages it listed (remove_queued),
 * each with its `cancelled` record in the same step. A message fetched
 * between the listing and the removal is not taken out: it is a
 * worker's now, and is revoked instead. */

/* Messages listed and removed per round trip. */
#define REMOVE_PAGE 500

/* Whether @payload may hold task @id: a cheap look for the id's bytes
 * before a decode, where the id is written as it is in both encodings
 * (printable ASCII that JSON does not escape). */
static gboolean
may_hold_id(GBytes *payload, const gchar *id)
{
  gsize size, len = strlen(id);
  const gchar *data = g_bytes_get_data(payload, &size);
  const gchar *end = data != NULL ? data + size : NULL;

  for (const gchar *p = id; *p != '\0'; p++)
    if (*p < 0x20 || *p > 0x7e || *p == '"' || *p == '\\' || *p == '/')
      return TRUE;
  for (const gchar *p = data; p != NULL && (gsize)(end - p) >= len; p++) {
    p = memchr(p, id[0], (gsize)(end - p) - len + 1);
    if (p == NULL || memcmp(p, id, len) == 0)
      return p != NULL;
  }
  return FALSE;
}

/* Looks for task @id among the ready messages of @queue and takes it out
 * with a `cancelled` record saying @why. Sets @out_listed when it was
 * there, @out_removed when it is out now. */
static gboolean
remove_from_queue(SluiceClient *client, const gchar *queue, const gchar *id,
                  const gchar *why, gboolean *out_listed, gboolean *out_removed,
                  GError **error)
{
  SluiceBroker *broker = sluice_client_get_broker(client);
  g_autofree gchar *cursor = NULL;

  do {
    g_autoptr(GPtrArray) page = g_ptr_array_new_with_free_func(
        (GDestroyNotify)sluice_listed_message_free);
    gchar *next = NULL;

    if (!sluice_broker_list_queued(broker, queue, cursor, REMOVE_PAGE, page,
                                   &next, error))
      return FALSE;
    g_free(cursor);
    cursor = next;
    for (guint i = 0; i < page->len; i++) {
      SluiceListedMessage *m = page->pdata[i];
      g_autoptr(SluiceEnvelope) env = NULL;
      g_autoptr(GBytes) record = NULL;
      SluiceRemoval r = {0};

      if (!may_hold_id(m->payload, id) ||
          (env = sluice_envelope_decode(m->payload, NULL, NULL)) == NULL ||
          g_strcmp0(env->id, id) != 0)
        continue;
      record = sluice_client__cancelled_record_of(client, id, env, why);
      r.queue = queue;
      r.payload = m->payload;
      r.handle = m->handle;
      r.id = id;
      r.record = record;
      r.record_ttl_ms = sluice_client__options(client)->result_ttl_ms;
      if (!sluice_broker_remove_queued(broker, &r, 1, error))
        return FALSE;
      *out_listed = TRUE;
      *out_removed = r.removed;
      return TRUE;
    }
  } while (cursor != NULL);
  return TRUE;
}

/* Takes the ready messages of @queue out page by page from the head, each
 * with its `cancelled` record, up to as many as were ready at the start
 * (so that producers enqueueing meanwhile cannot keep it going). */
static gboolean
purge_by_removal(SluiceClient *client, const gchar *queue, guint64 *out_removed,
                 GError **error)
{
  SluiceBroker *broker = sluice_client_get_broker(client);
  const gchar *const queues[] = {queue, NULL};
  g_autofree gchar *why =
      g_strdup_printf("purged from queue %s before it ran", queue);
  gint64 ttl = sluice_client__options(client)->result_ttl_ms;
  SluiceBrokerStats stats;
  guint64 budget = 0, examined = 0;

  sluice_broker_stats_init(&stats);
  if (!sluice_broker_stats(broker, queues, &stats, error)) {
    sluice_broker_stats_clear(&stats);
    return FALSE;
  }
  for (guint i = 0; i < stats.queues->len; i++) {
    const SluiceQueueStats *q = stats.queues->pdata[i];
    if (g_strcmp0(q->name, queue) == 0)
      budget = (guint64)MAX(q->ready, 0);
  }
  sluice_broker_stats_clear(&stats);
  while (examined < budget) {
    g_autoptr(GPtrArray) page = g_ptr_array_new_with_free_func(
        (GDestroyNotify)sluice_listed_message_free);
    g_autoptr(GPtrArray) keep =
        g_ptr_array_new_with_free_func((GDestroyNotify)sluice_envelope_free);
    g_autoptr(GPtrArray) records =
        g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
    g_autofree SluiceRemoval *items = NULL;
    g_autofree gchar *next = NULL;

    if (!sluice_broker_list_queued(broker, queue, NULL,
                                   (guint)MIN(budget - examined, REMOVE_PAGE),
                                   page, &next, error))
      return FALSE;
    if (page->len == 0)
      break;
    items = g_new0(SluiceRemoval, page->len);
    for (guint i = 0; i < page->len; i++) {
      SluiceListedMessage *m = page->pdata[i];
      SluiceEnvelope *env = sluice_envelope_decode(m->payload, NULL, NULL);

      items[i].queue = queue;
      items[i].payload = m->payload;
      items[i].handle = m->handle;
      items[i].record_ttl_ms = ttl;
      if (env == NULL)
        continue; /* no id to record it under: only taken out */
      g_ptr_array_add(keep, env);
      g_ptr_array_add(records, sluice_client__cancelled_record_of(
                                   client, env->id, env, why));
      items[i].id = env->id;
      items[i].record = records->pdata[records->len - 1];
    }
    if (!sluice_broker_remove_queued(broker, items, page->len, error))
      return FALSE;
    for (guint i = 0; i < page->len; i++)
      *out_removed += items[i].removed ? 1 : 0;
    examined += page->len;
  }
  return TRUE;
}

gboolean
sluice_client_purge(SluiceClient *client, const gchar *queue,
                    guint64 *out_removed, GError **error)
{
  g_autoptr(GError) local = NULL;
  guint64 removed = 0;

  g_return_val_if_fail(client != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  if (out_removed != NULL)
    *out_removed = 0;
  if (!sluice_client__check_name(SLUICE_NAME_QUEUE, queue, error))
    return FALSE;
  /* Each task with its record where the broker can; else in one step,
   * records untouched. */
  if (!purge_by_removal(client, queue, &removed, &local)) {
    if (!g_error_matches(local, SLUICE_BROKER_ERROR,
                         SLUICE_BROKER_ERROR_UNSUPPORTED)) {
      g_propagate_error(error, g_steal_pointer(&local));
      return FALSE;
    }
    g_clear_error(&local);
    removed = 0;
    if (!sluice_broker_purge(sluice_client_get_broker(client), queue, &removed,
                             error))
      return FALSE;
  }
  if (out_removed != NULL)
    *out_removed = removed;
  return TRUE;
}

/* ---- One task ------------------------------------------------------------ */

/* The queues a queued task may be in: its record's, or every queue the
 * broker knows of that holds something. Returns: (transfer full). */
static GPtrArray *
queues_to_search(SluiceClient *client, SluiceResult *stored, GError **error)
{
  GPtrArray *queues = g_ptr_array_new_with_free_func(g_free);
  SluiceBrokerStats stats;

  if (stored != NULL && sluice_result_get_queue(stored) != NULL) {
    g_ptr_array_add(queues, g_strdup(sluice_result_get_queue(stored)));
    return queues;
  }
  sluice_broker_stats_init(&stats);
  if (!sluice_broker_stats(sluice_client_get_broker(client), NULL, &stats,
                           error)) {
    sluice_broker_stats_clear(&stats);
    g_ptr_array_unref(queues);
    return NULL;
  }
  for (guint i = 0; i < stats.queues->len; i++) {
    const SluiceQueueStats *q = stats.queues->pdata[i];
    if (q->ready != 0)
      g_ptr_array_add(queues, g_strdup(q->name));
  }
  sluice_broker_stats_clear(&stats);
  return queues;
}

/* Whether a live worker announced that it runs task @id. */
static gboolean
announced_running(SluiceClient *client, const gchar *id, GError **error)
{
  static const gchar *const no_queues[] = {NULL};
  SluiceBrokerStats stats;
  gboolean running = FALSE;

  if (!sluice_client_get_stats(client, no_queues, &stats, error))
    return FALSE;
  for (guint w = 0; w < stats.workers->len && !running; w++) {
    const SluiceWorkerInfo *info = stats.workers->pdata[w];

    for (guint k = 0; info->alive && info->running_tasks != NULL &&
                      k < info->running_tasks->len && !running;
         k++)
      running =
          g_strcmp0(
              ((const SluiceRunningTask *)info->running_tasks->pdata[k])->id,
              id) == 0;
  }
  sluice_broker_stats_clear(&stats);
  return running;
}

SluiceDeleteOutcome
sluice_client_delete(SluiceClient *client, const gchar *id, GError **error)
{
  const SluiceClientOptions *o;
  SluiceBroker *broker;
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(GBytes) stored_bytes = NULL;
  g_autoptr(SluiceResult) stored = NULL;
  g_autoptr(GPtrArray) queues = NULL;
  g_autoptr(GError) local = NULL;
  SluiceTaskLocation loc = {0};
  gboolean removed = FALSE, listed = FALSE, searched = TRUE;
  SluiceTaskState state = SLUICE_STATE_UNKNOWN;
  gint64 now;

  g_return_val_if_fail(client != NULL, SLUICE_DELETE_FAILED);
  g_return_val_if_fail(error == NULL || *error == NULL, SLUICE_DELETE_FAILED);
  if (!sluice_client__check_name(SLUICE_NAME_ID, id, error))
    return SLUICE_DELETE_FAILED;
  o = sluice_client__options(client);
  broker = sluice_client_get_broker(client);
  now = sluice_clock_now_ms(sluice_broker_get_clock(broker));

  /* The schedule first: removing from it is atomic and certain. The
   * record keeps what the scheduled message says of the task. */
  if (!sluice_broker_lookup_task(broker, id, &loc, error))
    return SLUICE_DELETE_FAILED;
  bytes = sluice_client__cancelled_record(
      client, id, loc.place == SLUICE_TASK_PLACE_SCHEDULED ? loc.payload : NULL,
      "deleted before it ran");
  if (!sluice_broker_cancel_scheduled(broker, id, bytes, o->result_ttl_ms,
                                      &removed, error)) {
    sluice_task_location_clear(&loc);
    return SLUICE_DELETE_FAILED;
  }
  if (removed) {
    sluice_task_location_clear(&loc);
    return SLUICE_DELETE_UNSCHEDULED;
  }
  if (loc.place == SLUICE_TASK_PLACE_DEAD) {
    gboolean found = FALSE;
    gboolean ok = sluice_broker_dlq_delete(broker, loc.dead_letter->entry_id,
                                           &found, error);
    sluice_task_location_clear(&loc);
    if (!ok)
      return SLUICE_DELETE_FAILED;
    if (found)
      return SLUICE_DELETE_DEAD_LETTER;
    /* Replayed or deleted meanwhile: it may be queued now. */
  }
  sluice_task_location_clear(&loc);

  /* Queued: out of its queue, with its record, in one step. A record
   * that says queued, scheduled or retrying (a promoted task keeps the
   * latter two until it starts), or none, may be of a queued task. */
  if (!sluice_broker_get_record(broker, id, &stored_bytes, error))
    return SLUICE_DELETE_FAILED;
  if (stored_bytes != NULL &&
      (stored = sluice_result_decode(stored_bytes, NULL)) != NULL)
    state = sluice_result_get_state(stored);
  if (stored != NULL && sluice_task_state_is_final(state)) {
    g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_NOT_FOUND,
                "nothing deleted: task %s already finished (%s)", id,
                sluice_task_state_to_string(state));
    return SLUICE_DELETE_FAILED;
  }
  if (stored == NULL || state != SLUICE_STATE_RUNNING) {
    if ((queues = queues_to_search(client, stored, error)) == NULL)
      return SLUICE_DELETE_FAILED;
    for (guint i = 0; i < queues->len && !listed; i++) {
      if (remove_from_queue(client, queues->pdata[i], id,
                            "deleted before it ran", &listed, &removed, &local))
        continue;
      if (!g_error_matches(local, SLUICE_BROKER_ERROR,
                           SLUICE_BROKER_ERROR_UNSUPPORTED)) {
        g_propagate_error(error, g_steal_pointer(&local));
        return SLUICE_DELETE_FAILED;
      }
      /* The broker cannot take a message out: a revocation must do. */
      g_clear_error(&local);
      searched = FALSE;
      break;
    }
    if (removed)
      return SLUICE_DELETE_REMOVED;
  }

  /* Running, or fetched meanwhile (a worker holds it): a revocation makes
   * the worker cancel it or skip it. Nothing knows of it: say so. */
  if (stored == NULL && searched && !listed) {
    gboolean running = announced_running(client, id, &local);

    if (local != NULL) {
      g_propagate_error(error, g_steal_pointer(&local));
      return SLUICE_DELETE_FAILED;
    }
    if (!running) {
      g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_NOT_FOUND,
                  "nothing deleted: no task %s is scheduled, queued, running "
                  "or dead-lettered (it never existed, or it finished and "
                  "its record expired)",
                  id);
      return SLUICE_DELETE_FAILED;
    }
  }
  if (!sluice_broker_revoke(broker, id, now + o->revoke_ttl_ms, error))
    return SLUICE_DELETE_FAILED;
  return SLUICE_DELETE_REVOKED;
}

/* Where a task that is not on the schedule is instead, in words. */
static gchar *
where_instead(SluiceBroker *broker, const gchar *id)
{
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(SluiceResult) record = NULL;
  SluiceTaskLocation loc;
  gchar *where = NULL;

  if (sluice_broker_lookup_task(broker, id, &loc, NULL) &&
      loc.place == SLUICE_TASK_PLACE_DEAD)
    where =
        g_strdup_printf("it is a dead letter (entry %s): replay it with "
                        "sluice_client_dlq_replay or `sluice dlq replay "
                        "%s`",
                        loc.dead_letter->entry_id, loc.dead_letter->entry_id);
  sluice_task_location_clear(&loc);
  if (where != NULL)
    return where;
  if (sluice_broker_get_record(broker, id, &bytes, NULL) && bytes != NULL)
    record = sluice_result_decode(bytes, NULL);
  if (record != NULL)
    return g_strdup_printf(
        "its record says it is %s",
        sluice_task_state_to_string(sluice_result_get_state(record)));
  return g_strdup("it is queued or running (without track_state nothing "
                  "says which), finished, or does not exist");
}

gboolean
sluice_client_run_now(SluiceClient *client, const gchar *id, GError **error)
{
  SluiceBroker *broker;
  g_autofree gchar *where = NULL;
  gboolean found = FALSE;

  g_return_val_if_fail(client != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  if (!sluice_client__check_name(SLUICE_NAME_ID, id, error))
    return FALSE;
  broker = sluice_client_get_broker(client);
  if (!sluice_broker_reschedule(broker, id, 0, &found, error))
    return FALSE;
  if (found)
    return TRUE;
  where = where_instead(broker, id);
  g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_NOT_FOUND,
              "task %s is not on the schedule, so it cannot be moved to run "
              "now: %s",
              id, where);
  return FALSE;
}

gboolean
sluice_client_get_last_periodic(SluiceClient *client, const gchar *name,
                                gint64 *out_last, GError **error)
{
  g_return_val_if_fail(client != NULL && name != NULL, FALSE);
  g_return_val_if_fail(out_last != NULL, FALSE);
  return sluice_broker_last_periodic(sluice_client_get_broker(client), name,
                                     out_last, error);
}

/* ---- The event stream ---------------------------------------------------- */

GPtrArray *
sluice_client_read_events(SluiceClient *client, const gchar *cursor,
                          guint limit, gint64 block_ms, gchar **out_cursor,
                          GError **error)
{
  g_return_val_if_fail(client != NULL && out_cursor != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  return sluice_events__read(sluice_client_get_broker(client), cursor, limit,
                             block_ms, out_cursor, error);
}

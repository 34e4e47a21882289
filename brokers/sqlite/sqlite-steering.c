/* sqlite-steering.c - the SQLite broker's slots for operators: stats, purge,
 * check, announcements, listings and pauses.
 *
 * Listing cursors. A queue's cursor is the `mid` of the last message
 * listed: a message's place in its queue, which never changes (a release
 * keeps it), so pages listed while others fetch neither skip nor repeat a
 * message that stays ready. The schedule's cursor is "due_at:rowid" of
 * the last entry listed, the order of the schedule's index.
 */
#include "config.h"

#include "brokers/sqlite/sqlite-broker.h"

/* ---- stats ---------------------------------------------------------------- */

typedef struct {
  const gchar *const *queues;
  SluiceBrokerStats *out;
  gint64 now;
} StatsJob;

static gboolean
count(SluiceSqliteConn *c, const gchar *sql, const gchar *arg, gint64 *out,
      GError **error)
{
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);
  gboolean row = FALSE;

  if (stmt == NULL)
    return FALSE;
  if (arg != NULL)
    sluice_sqlite__bind_str(stmt, 1, arg);
  if (!sluice_sqlite__row(c, stmt, &row, "counting", error))
    return FALSE;
  *out = row ? sqlite3_column_int64(stmt, 0) : 0;
  if (row)
    sqlite3_reset(stmt);
  return TRUE;
}

typedef void (*AddByReason)(SluiceBrokerStats *stats, const gchar *reason,
                            gint64 n);

static gboolean
by_reason(SluiceSqliteConn *c, const gchar *sql, SluiceBrokerStats *out,
          AddByReason add, GError **error)
{
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);
  int rc;

  if (stmt == NULL)
    return FALSE;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    const gchar *reason = (const gchar *)sqlite3_column_text(stmt, 0);
    add(out, reason != NULL ? reason : "unknown",
        sqlite3_column_int64(stmt, 1));
  }
  sqlite3_reset(stmt);
  if (rc != SQLITE_DONE)
    return sluice_sqlite__fail(c, rc, "counting dead letters", error);
  return TRUE;
}

static gboolean
stats_step(SluiceSqliteConn *c, gpointer data, gboolean *notify, GError **error)
{
  static const gchar names_sql[] = "SELECT name FROM queues ORDER BY name";
  static const gchar ready_sql[] =
      "SELECT COUNT(*) FROM messages WHERE queue = ?1 AND owner IS NULL";
  static const gchar scheduled_sql[] = "SELECT COUNT(*) FROM schedule";
  static const gchar in_flight_sql[] =
      "SELECT COUNT(*) FROM messages WHERE owner IS NOT NULL";
  static const gchar dead_sql[] = "SELECT COUNT(*) FROM dead_letters";
  static const gchar reasons_sql[] =
      "SELECT reason, COUNT(*) FROM dead_letters GROUP BY reason";
  static const gchar dropped_sql[] = "SELECT reason, n FROM dropped";
  static const gchar workers_sql[] =
      "SELECT name, info, last_seen, expires_at FROM workers";
  StatsJob *job = data;
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
  sqlite3_stmt *stmt;
  int rc;

  if (job->queues != NULL) {
    for (guint i = 0; job->queues[i] != NULL; i++)
      g_ptr_array_add(names, g_strdup(job->queues[i]));
  } else {
    stmt = sluice_sqlite__stmt(c, names_sql, error);
    if (stmt == NULL)
      return FALSE;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
      g_ptr_array_add(names, sluice_sqlite__col_str(stmt, 0));
    sqlite3_reset(stmt);
    if (rc != SQLITE_DONE)
      return sluice_sqlite__fail(c, rc, "listing queues", error);
  }
  for (guint i = 0; i < names->len; i++) {
    gint64 ready;
    if (!count(c, ready_sql, names->pdata[i], &ready, error))
      return FALSE;
    sluice_broker_stats_add_queue(job->out, names->pdata[i], ready);
  }
  if (!count(c, scheduled_sql, NULL, &job->out->scheduled, error) ||
      !count(c, in_flight_sql, NULL, &job->out->in_flight, error) ||
      !count(c, dead_sql, NULL, &job->out->dead_letters, error) ||
      !sluice_sqlite__get_counter(c, "stale_settles", &job->out->stale_settles,
                                  error) ||
      !by_reason(c, reasons_sql, job->out, sluice_broker_stats_add_dead_letters,
                 error) ||
      !by_reason(c, dropped_sql, job->out, sluice_broker_stats_add_dropped,
                 error))
    return FALSE;
  job->out->dead_letters_dropped = 0;
  {
    GHashTableIter iter;
    gpointer value;
    g_hash_table_iter_init(&iter, job->out->dead_letters_dropped_by_reason);
    while (g_hash_table_iter_next(&iter, NULL, &value))
      job->out->dead_letters_dropped += *(gint64 *)value;
  }
  stmt = sluice_sqlite__stmt(c, workers_sql, error);
  if (stmt == NULL)
    return FALSE;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    gint64 last_seen = sqlite3_column_int64(stmt, 2);
    gint64 expires_at = sqlite3_column_int64(stmt, 3);
    gint64 ttl = expires_at - last_seen;
    g_autoptr(GBytes) info = sluice_sqlite__col_bytes(stmt, 1);

    /* A lapsed worker is shown dead for two more of its periods (the
     * sweep deletes it later). */
    if (job->now >= expires_at + 2 * ttl)
      continue;
    sluice_broker_stats_add_worker_info(
        job->out, (const gchar *)sqlite3_column_text(stmt, 0), last_seen,
        job->now < expires_at, info);
  }
  sqlite3_reset(stmt);
  if (rc != SQLITE_DONE)
    return sluice_sqlite__fail(c, rc, "listing workers", error);
  return TRUE;
}

gboolean
sluice_sqlite__stats(SluiceBroker *broker, const gchar *const *queues,
                     SluiceBrokerStats *out, GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  StatsJob job = {queues, out, sluice_sqlite__now(self)};

  /* One read snapshot: the figures agree with each other. */
  return sluice_sqlite__run(self, FALSE, stats_step, &job, error);
}

/* ---- purge, check, announce ----------------------------------------------- */

typedef struct {
  const gchar *name;
  GBytes *info;
  gint64 ttl_ms;
  gint64 now;
  gboolean flag;
  guint64 n;
} AdminJob;

static gboolean
purge_step(SluiceSqliteConn *c, gpointer data, gboolean *notify, GError **error)
{
  static const gchar sql[] =
      "DELETE FROM messages WHERE queue = ?1 AND owner IS NULL";
  AdminJob *job = data;
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, job->name);
  if (!sluice_sqlite__done(c, stmt, "purging a queue", error))
    return FALSE;
  job->n = (guint64)sqlite3_changes(c->db);
  return TRUE;
}

gboolean
sluice_sqlite__purge(SluiceBroker *broker, const gchar *queue,
                     guint64 *out_removed, GError **error)
{
  AdminJob job = {.name = queue};

  if (!sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), TRUE, purge_step, &job,
                          error))
    return FALSE;
  *out_removed = job.n;
  return TRUE;
}

static gboolean
check_step(SluiceSqliteConn *c, gpointer data, gboolean *notify, GError **error)
{
  return TRUE;
}

gboolean
sluice_sqlite__check(SluiceBroker *broker, GError **error)
{
  /* A write transaction: proves the file is there, ours and writable. */
  return sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), TRUE, check_step,
                            NULL, error);
}

static gboolean
announce_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
              GError **error)
{
  static const gchar put_sql[] =
      "INSERT OR REPLACE INTO workers (name, info, last_seen, expires_at) "
      "VALUES (?1, ?2, ?3, ?4)";
  static const gchar sweep_sql[] =
      "DELETE FROM workers WHERE ?1 >= expires_at + 2 * (expires_at - "
      "last_seen)";
  AdminJob *job = data;
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, put_sql, error);

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, job->name);
  sluice_sqlite__bind_bytes(stmt, 2, job->info);
  sqlite3_bind_int64(stmt, 3, job->now);
  sqlite3_bind_int64(stmt, 4, job->now + job->ttl_ms);
  if (!sluice_sqlite__done(c, stmt, "announcing a worker", error))
    return FALSE;
  stmt = sluice_sqlite__stmt(c, sweep_sql, error);
  if (stmt == NULL)
    return FALSE;
  sqlite3_bind_int64(stmt, 1, job->now);
  return sluice_sqlite__done(c, stmt, "forgetting lapsed workers", error);
}

gboolean
sluice_sqlite__announce(SluiceBroker *broker, const gchar *consumer,
                        GBytes *info, gint64 ttl_ms, GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  AdminJob job = {.name = consumer,
                  .info = info,
                  .ttl_ms = ttl_ms,
                  .now = sluice_sqlite__now(self)};

  return sluice_sqlite__run(self, TRUE, announce_step, &job, error);
}

/* ---- listings ------------------------------------------------------------- */

typedef struct {
  const gchar *queue;
  gint64 after_mid;
  gint64 after_due;
  gint64 after_rowid;
  gboolean from_start;
  guint limit;
  GPtrArray *out;
  gchar *next;
} ListJob;

static gboolean
list_queued_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                 GError **error)
{
  static const gchar sql[] =
      "SELECT mid, payload FROM messages WHERE queue = ?1 AND owner IS NULL "
      "AND mid > ?2 ORDER BY mid LIMIT ?3";
  ListJob *job = data;
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);
  gint64 last = 0;
  guint n = 0;
  int rc;

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, job->queue);
  sqlite3_bind_int64(stmt, 2, job->after_mid);
  /* One more than asked tells whether the queue goes on. */
  sqlite3_bind_int64(stmt, 3, (gint64)job->limit + 1);
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    if (n++ < job->limit) {
      g_autoptr(GBytes) payload = sluice_sqlite__col_bytes(stmt, 1);
      SluiceListedMessage *m;
      g_autofree gchar *handle = NULL;

      last = sqlite3_column_int64(stmt, 0);
      handle = g_strdup_printf("%" G_GINT64_FORMAT, last);
      m = sluice_listed_message_new(NULL, job->queue, payload, 0);
      sluice_listed_message_set_handle(m, handle);
      g_ptr_array_add(job->out, m);
    }
  }
  sqlite3_reset(stmt);
  if (rc != SQLITE_DONE)
    return sluice_sqlite__fail(c, rc, "listing a queue", error);
  if (n > job->limit && job->limit > 0)
    job->next = g_strdup_printf("%" G_GINT64_FORMAT, last);
  return TRUE;
}

gboolean
sluice_sqlite__list_queued(SluiceBroker *broker, const gchar *queue,
                           const gchar *cursor, guint limit, GPtrArray *out,
                           gchar **out_cursor, GError **error)
{
  ListJob job = {.queue = queue, .limit = limit, .out = out};
  guint64 v = 0;

  if (cursor != NULL &&
      !g_ascii_string_to_unsigned(cursor, 10, 0, G_MAXINT64, &v, NULL)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "“%s” is not a cursor of a queue listing: pass the cursor a "
                "previous page returned, or none to start at the head",
                cursor);
    return FALSE;
  }
  job.after_mid = (gint64)v;
  if (!sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), FALSE, list_queued_step,
                          &job, error))
    return FALSE;
  *out_cursor = job.next;
  return TRUE;
}

typedef struct {
  SluiceRemoval *items;
  guint n;
  gint64 now;
} RemoveJob;

/* A message is ready while nobody owns it; its mid is its handle. */
static gboolean
remove_queued_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                   GError **error)
{
  static const gchar sql[] =
      "DELETE FROM messages WHERE mid = ?1 AND queue = ?2 AND owner IS NULL";
  RemoveJob *job = data;

  for (guint i = 0; i < job->n; i++) {
    SluiceRemoval *r = &job->items[i];
    sqlite3_stmt *stmt;
    guint64 mid;

    r->removed = FALSE;
    if (r->handle == NULL ||
        !g_ascii_string_to_unsigned(r->handle, 10, 1, G_MAXINT64, &mid, NULL))
      continue;
    if ((stmt = sluice_sqlite__stmt(c, sql, error)) == NULL)
      return FALSE;
    sqlite3_bind_int64(stmt, 1, (gint64)mid);
    sluice_sqlite__bind_str(stmt, 2, r->queue);
    if (!sluice_sqlite__done(c, stmt, "taking a task out of its queue", error))
      return FALSE;
    if (sqlite3_changes(c->db) == 0)
      continue;
    if (r->record != NULL &&
        !sluice_sqlite__put_record(c, r->id, r->record, TRUE, r->record_ttl_ms,
                                   job->now, error))
      return FALSE;
    r->removed = TRUE;
    *notify = *notify || r->record != NULL;
  }
  return TRUE;
}

gboolean
sluice_sqlite__remove_queued(SluiceBroker *broker, SluiceRemoval *items,
                             guint n_items, GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  RemoveJob job = {items, n_items, sluice_sqlite__now(self)};

  /* One transaction for the batch; on failure nothing of it happened. */
  if (sluice_sqlite__run(self, TRUE, remove_queued_step, &job, error))
    return TRUE;
  for (guint i = 0; i < n_items; i++)
    items[i].removed = FALSE;
  return FALSE;
}

static gboolean
list_scheduled_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                    GError **error)
{
  static const gchar first_sql[] =
      "SELECT rowid, id, queue, payload, due_at FROM schedule ORDER BY due_at, "
      "rowid LIMIT ?1";
  static const gchar after_sql[] =
      "SELECT rowid, id, queue, payload, due_at FROM schedule WHERE (due_at, "
      "rowid) > (?2, ?3) ORDER BY due_at, rowid LIMIT ?1";
  ListJob *job = data;
  sqlite3_stmt *stmt =
      sluice_sqlite__stmt(c, job->from_start ? first_sql : after_sql, error);
  gint64 last_due = 0, last_rowid = 0;
  guint n = 0;
  int rc;

  if (stmt == NULL)
    return FALSE;
  sqlite3_bind_int64(stmt, 1, (gint64)job->limit + 1);
  if (!job->from_start) {
    sqlite3_bind_int64(stmt, 2, job->after_due);
    sqlite3_bind_int64(stmt, 3, job->after_rowid);
  }
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    if (n++ < job->limit) {
      g_autoptr(GBytes) payload = sluice_sqlite__col_bytes(stmt, 3);
      last_rowid = sqlite3_column_int64(stmt, 0);
      last_due = sqlite3_column_int64(stmt, 4);
      g_ptr_array_add(job->out, sluice_listed_message_new(
                                    (const gchar *)sqlite3_column_text(stmt, 1),
                                    (const gchar *)sqlite3_column_text(stmt, 2),
                                    payload, last_due));
    }
  }
  sqlite3_reset(stmt);
  if (rc != SQLITE_DONE)
    return sluice_sqlite__fail(c, rc, "listing the schedule", error);
  if (n > job->limit && job->limit > 0)
    job->next = g_strdup_printf("%" G_GINT64_FORMAT ":%" G_GINT64_FORMAT,
                                last_due, last_rowid);
  return TRUE;
}

gboolean
sluice_sqlite__list_scheduled(SluiceBroker *broker, const gchar *cursor,
                              guint limit, GPtrArray *out, gchar **out_cursor,
                              GError **error)
{
  ListJob job = {.limit = limit, .out = out, .from_start = cursor == NULL};

  if (cursor != NULL) {
    gchar *end = NULL;
    guint64 rowid;

    job.after_due = g_ascii_strtoll(cursor, &end, 10);
    if (end == cursor || *end != ':' ||
        !g_ascii_string_to_unsigned(end + 1, 10, 0, G_MAXINT64, &rowid, NULL)) {
      g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                  "“%s” is not a cursor of a schedule listing: pass the "
                  "cursor a previous page returned, or none to start at the "
                  "earliest",
                  cursor);
      return FALSE;
    }
    job.after_rowid = (gint64)rowid;
  }
  if (!sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), FALSE,
                          list_scheduled_step, &job, error))
    return FALSE;
  *out_cursor = job.next;
  return TRUE;
}

/* ---- pauses --------------------------------------------------------------- */

static gboolean
set_paused_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                GError **error)
{
  static const gchar pause_sql[] =
      "INSERT OR IGNORE INTO paused (queue) VALUES (?1)";
  static const gchar resume_sql[] = "DELETE FROM paused WHERE queue = ?1";
  AdminJob *job = data;
  sqlite3_stmt *stmt =
      sluice_sqlite__stmt(c, job->flag ? pause_sql : resume_sql, error);

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, job->name);
  /* A resume gives waiting fetchers something: what the queue holds. */
  *notify = !job->flag;
  return sluice_sqlite__done(c, stmt, "pausing a queue", error);
}

gboolean
sluice_sqlite__set_paused(SluiceBroker *broker, const gchar *queue,
                          gboolean paused, GError **error)
{
  AdminJob job = {.name = queue, .flag = paused};

  return sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), TRUE, set_paused_step,
                            &job, error);
}

static gboolean
list_paused_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                 GError **error)
{
  static const gchar sql[] = "SELECT queue FROM paused";
  GPtrArray *out = data;
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);
  int rc;

  if (stmt == NULL)
    return FALSE;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
    g_ptr_array_add(out, sluice_sqlite__col_str(stmt, 0));
  sqlite3_reset(stmt);
  if (rc != SQLITE_DONE)
    return sluice_sqlite__fail(c, rc, "listing paused queues", error);
  return TRUE;
}

gboolean
sluice_sqlite__list_paused(SluiceBroker *broker, GPtrArray *out, GError **error)
{
  return sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), FALSE,
                            list_paused_step, out, error);
}

/* sqlite-events.c - the SQLite broker's events and progress slots: the
 * lifecycle events of tasks (table `events`, appended with a cap on its
 * length and age, read from a cursor, a read that finds nothing waiting
 * for a wakeup) and each task's latest progress report (a row per task
 * with its expiry on the broker's clock).
 */
#include "config.h"

#include "brokers/sqlite/sqlite-broker.h"

/* ---- progress ------------------------------------------------------------- */

typedef struct {
  const gchar *id;
  GBytes *progress;
  gint64 ttl_ms;
  gint64 now;
} ProgressJob;

static gboolean
put_progress_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                  GError **error)
{
  static const gchar sql[] = "INSERT OR REPLACE INTO progress (id, progress, "
                             "expires_at) VALUES (?1, ?2, ?3)";
  ProgressJob *job = data;
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, job->id);
  sluice_sqlite__bind_bytes(stmt, 2, job->progress);
  sqlite3_bind_int64(stmt, 3, job->now + job->ttl_ms);
  return sluice_sqlite__done(c, stmt, "storing a task's progress", error);
}

gboolean
sluice_sqlite__put_progress(SluiceBroker *broker, const gchar *id,
                            GBytes *progress, gint64 ttl_ms, GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  ProgressJob job = {id, progress, ttl_ms, sluice_sqlite__now(self)};

  return sluice_sqlite__run(self, TRUE, put_progress_step, &job, error);
}

static gboolean
get_progress_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                  GError **error)
{
  static const gchar sql[] =
      "SELECT progress FROM progress WHERE id = ?1 AND expires_at > ?2";
  ProgressJob *job = data;
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);
  gboolean row = FALSE;

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, job->id);
  sqlite3_bind_int64(stmt, 2, job->now);
  if (!sluice_sqlite__row(c, stmt, &row, "reading a task's progress", error))
    return FALSE;
  if (row) {
    job->progress = sluice_sqlite__col_bytes(stmt, 0);
    sqlite3_reset(stmt);
  }
  return TRUE;
}

gboolean
sluice_sqlite__get_progress(SluiceBroker *broker, const gchar *id,
                            GBytes **out_progress, GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  ProgressJob job = {id, NULL, 0, sluice_sqlite__now(self)};

  if (!sluice_sqlite__run(self, FALSE, get_progress_step, &job, error))
    return FALSE;
  *out_progress = job.progress;
  return TRUE;
}

/* ---- events --------------------------------------------------------------- */

typedef struct {
  GBytes *const *events;
  guint n;
  guint max_len;
  gint64 max_age_ms;
  gint64 now;
  gint64 after;
  guint limit;
  GPtrArray *out;
  gint64 last;
  gint64 newest;
} EventsJob;

static gboolean
append_events_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                   GError **error)
{
  static const gchar insert_sql[] =
      "INSERT INTO events (at, event) VALUES (?1, ?2)";
  /* By length (seq has no gaps within a file's life: AUTOINCREMENT), then
   * by age (at grows with seq, as the appenders' clocks do). */
  static const gchar trim_sql[] =
      "DELETE FROM events WHERE seq <= (SELECT MAX(seq) FROM events) - ?1 "
      "OR at <= ?2";
  EventsJob *job = data;
  sqlite3_stmt *stmt;

  for (guint i = 0; i < job->n; i++) {
    stmt = sluice_sqlite__stmt(c, insert_sql, error);
    if (stmt == NULL)
      return FALSE;
    sqlite3_bind_int64(stmt, 1, job->now);
    sluice_sqlite__bind_bytes(stmt, 2, job->events[i]);
    if (!sluice_sqlite__done(c, stmt, "appending an event", error))
      return FALSE;
  }
  stmt = sluice_sqlite__stmt(c, trim_sql, error);
  if (stmt == NULL)
    return FALSE;
  sqlite3_bind_int64(stmt, 1, job->max_len);
  sqlite3_bind_int64(stmt, 2, job->now - job->max_age_ms);
  *notify = TRUE;
  return sluice_sqlite__done(c, stmt, "trimming the events", error);
}

gboolean
sluice_sqlite__append_events(SluiceBroker *broker, GBytes *const *events,
                             guint n, guint max_len, gint64 max_age_ms,
                             gint64 now_ms, GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  EventsJob job = {.events = events,
                   .n = n,
                   .max_len = max_len,
                   .max_age_ms = max_age_ms,
                   .now = now_ms};

  return sluice_sqlite__run(self, TRUE, append_events_step, &job, error);
}

static gboolean
read_events_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                 GError **error)
{
  static const gchar sql[] = "SELECT seq, event FROM events WHERE seq > ?1 "
                             "ORDER BY seq LIMIT ?2";
  EventsJob *job = data;
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);
  gboolean row = FALSE;

  if (stmt == NULL)
    return FALSE;
  sqlite3_bind_int64(stmt, 1, job->after);
  sqlite3_bind_int64(stmt, 2, job->limit);
  for (;;) {
    g_autofree gchar *cursor = NULL;
    g_autoptr(GBytes) event = NULL;

    if (!sluice_sqlite__row(c, stmt, &row, "reading events", error))
      return FALSE;
    if (!row)
      break;
    job->last = sqlite3_column_int64(stmt, 0);
    cursor = g_strdup_printf("%" G_GINT64_FORMAT, job->last);
    event = sluice_sqlite__col_bytes(stmt, 1);
    g_ptr_array_add(job->out, sluice_event_entry_new(cursor, event));
  }
  return TRUE;
}

/* The newest sequence number ever given to an event (AUTOINCREMENT keeps
 * it after the event is trimmed), 0 when none. */
static gboolean
newest_event_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                  GError **error)
{
  static const gchar sql[] =
      "SELECT seq FROM sqlite_sequence WHERE name = 'events'";
  EventsJob *job = data;
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);
  gboolean row = FALSE;

  if (stmt == NULL)
    return FALSE;
  job->newest = 0;
  for (;;) {
    if (!sluice_sqlite__row(c, stmt, &row, "reading the newest event", error))
      return FALSE;
    if (!row)
      break;
    job->newest = sqlite3_column_int64(stmt, 0);
  }
  return TRUE;
}

gboolean
sluice_sqlite__read_events(SluiceBroker *broker, const gchar *cursor,
                           guint limit, gint64 block_ms, GPtrArray *out,
                           gchar **out_cursor, GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  gint64 deadline = g_get_monotonic_time() + block_ms * 1000;
  EventsJob job = {.limit = limit, .out = out};

  if (!sluice_broker_parse_events_cursor(cursor, &job.after, error))
    return FALSE;
  job.last = job.after;
  if (job.after > 0) {
    if (!sluice_sqlite__run(self, FALSE, newest_event_step, &job, error))
      return FALSE;
    /* A cursor ahead of every event ever appended was never handed out. */
    if (job.after > job.newest) {
      g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                  "events cursor %s is unknown: no event has reached it (the "
                  "newest is %" G_GINT64_FORMAT "); pass one a read returned",
                  cursor, job.newest);
      return FALSE;
    }
  }
  for (;;) {
    /* The generation before the look: an append committed after it moves
     * it and ends the wait. */
    guint64 gen = sluice_sqlite__wake_gen(self);

    if (!sluice_sqlite__run(self, FALSE, read_events_step, &job, error))
      return FALSE;
    if (job.last != job.after || g_get_monotonic_time() >= deadline)
      break;
    sluice_sqlite__wait(self, gen, deadline);
  }
  *out_cursor = g_strdup_printf("%" G_GINT64_FORMAT, job.last);
  return TRUE;
}

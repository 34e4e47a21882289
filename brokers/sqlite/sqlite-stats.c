/* sqlite-stats.c - the SQLite broker's stats and worker slots: counts of
 * a namespace's queues, schedule, holdings, dead letters and workers, and
 * the announcements workers make of themselves (table `workers`, each row
 * forgotten once it has lapsed for twice its TTL).
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

/* ---- announce ------------------------------------------------------------- */

typedef struct {
  const gchar *name;
  GBytes *info;
  gint64 ttl_ms;
  gint64 now;
} AnnounceJob;

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
  AnnounceJob *job = data;
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
  AnnounceJob job = {.name = consumer,
                     .info = info,
                     .ttl_ms = ttl_ms,
                     .now = sluice_sqlite__now(self)};

  return sluice_sqlite__run(self, TRUE, announce_step, &job, error);
}

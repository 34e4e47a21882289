/* sqlite-periodic.c - the SQLite broker's periodic slots: the claim of
 * an occurrence and its enqueue in one write transaction, so any number
 * of schedulers sharing the file dispatch an occurrence at most once.
 */
#include "config.h"

#include "brokers/sqlite/sqlite-broker.h"

/* ---- periodic ------------------------------------------------------------- */

typedef struct {
  const gchar *name;
  gint64 occurrence_at;
  SluiceSubmit *item;
  gint64 now;
  gboolean claimed;
  gint64 last;
} PeriodicJob;

static gboolean
last_periodic_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                   GError **error)
{
  static const gchar sql[] = "SELECT last FROM periodic WHERE name = ?1";
  PeriodicJob *job = data;
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);
  gboolean row = FALSE;

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, job->name);
  if (!sluice_sqlite__row(c, stmt, &row, "reading a periodic claim", error))
    return FALSE;
  job->last = row ? sqlite3_column_int64(stmt, 0) : 0;
  if (row)
    sqlite3_reset(stmt);
  return TRUE;
}

static gboolean
claim_periodic_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                    GError **error)
{
  static const gchar sql[] =
      "INSERT OR REPLACE INTO periodic (name, last) VALUES (?1, ?2)";
  PeriodicJob *job = data;
  sqlite3_stmt *stmt;
  gboolean ready = FALSE;

  /* Read and write under the one write lock: a compare-and-set. */
  if (!last_periodic_step(c, data, notify, error))
    return FALSE;
  job->claimed = job->last == 0 || job->last < job->occurrence_at;
  if (!job->claimed)
    return TRUE;
  stmt = sluice_sqlite__stmt(c, sql, error);
  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, job->name);
  sqlite3_bind_int64(stmt, 2, job->occurrence_at);
  if (!sluice_sqlite__done(c, stmt, "claiming a periodic occurrence", error) ||
      !sluice_sqlite__submit(c, job->item, job->now, &ready, error))
    return FALSE;
  *notify = ready;
  return TRUE;
}

gboolean
sluice_sqlite__claim_periodic(SluiceBroker *broker, const gchar *name,
                              gint64 occurrence_at, SluiceSubmit *item,
                              gboolean *out_claimed, GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  PeriodicJob job = {name, occurrence_at, item, sluice_sqlite__now(self), FALSE,
                     0};

  if (!sluice_sqlite__run(self, TRUE, claim_periodic_step, &job, error))
    return FALSE;
  *out_claimed = job.claimed;
  return TRUE;
}

gboolean
sluice_sqlite__last_periodic(SluiceBroker *broker, const gchar *name,
                             gint64 *out_last, GError **error)
{
  PeriodicJob job = {.name = name};

  if (!sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), FALSE,
                          last_periodic_step, &job, error))
    return FALSE;
  *out_last = job.last;
  return TRUE;
}

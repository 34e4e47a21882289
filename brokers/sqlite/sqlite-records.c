/* sqlite-records.c - the SQLite broker's record slots: result records
 * (and waiting for one) and task lookups.
 *
 * Every TTL is an absolute expiry on the broker's clock stored with the
 * row: a reader treats a lapsed row as absent, and promote_due's sweep
 * deletes lapsed rows, so a fake clock makes records expire as the
 * contract's CLOCK_TTL promises, and the real clock does in production.
 */
#include "config.h"

#include "brokers/sqlite/sqlite-broker.h"

/* ---- records -------------------------------------------------------------- */

typedef struct {
  const gchar *id;
  gint64 now;
  GBytes *record;
  gboolean final;
  gint64 ttl_ms;
  const SluiceRecordWrite *items;
  guint n;
} RecordJob;

static gboolean
get_record_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                GError **error)
{
  static const gchar sql[] =
      "SELECT record, final FROM records WHERE id = ?1 AND expires_at > ?2";
  RecordJob *job = data;
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);
  gboolean row = FALSE;

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, job->id);
  sqlite3_bind_int64(stmt, 2, job->now);
  if (!sluice_sqlite__row(c, stmt, &row, "reading a record", error))
    return FALSE;
  if (row) {
    job->record = sluice_sqlite__col_bytes(stmt, 0);
    job->final = sqlite3_column_int(stmt, 1) != 0;
    sqlite3_reset(stmt);
  }
  return TRUE;
}

gboolean
sluice_sqlite__get_record(SluiceBroker *broker, const gchar *id,
                          GBytes **out_record, GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  RecordJob job = {.id = id, .now = sluice_sqlite__now(self)};

  if (!sluice_sqlite__run(self, FALSE, get_record_step, &job, error))
    return FALSE;
  *out_record = job.record;
  return TRUE;
}

static gboolean
put_record_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                GError **error)
{
  RecordJob *job = data;

  if (job->items != NULL) {
    for (guint i = 0; i < job->n; i++)
      if (!sluice_sqlite__put_record(c, job->items[i].id, job->items[i].record,
                                     FALSE, job->items[i].ttl_ms, job->now,
                                     error))
        return FALSE;
    return TRUE;
  }
  *notify = job->final;
  return sluice_sqlite__put_record(c, job->id, job->record, job->final,
                                   job->ttl_ms, job->now, error);
}

gboolean
sluice_sqlite__put_record_slot(SluiceBroker *broker, const gchar *id,
                               GBytes *record, gboolean final, gint64 ttl_ms,
                               GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  RecordJob job = {.id = id,
                   .now = sluice_sqlite__now(self),
                   .record = record,
                   .final = final,
                   .ttl_ms = ttl_ms};

  return sluice_sqlite__run(self, TRUE, put_record_step, &job, error);
}

gboolean
sluice_sqlite__put_records(SluiceBroker *broker, const SluiceRecordWrite *items,
                           guint n, GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  RecordJob job = {.now = sluice_sqlite__now(self), .items = items, .n = n};

  if (n == 0)
    return TRUE;
  return sluice_sqlite__run(self, TRUE, put_record_step, &job, error);
}

gboolean
sluice_sqlite__wait_record(SluiceBroker *broker, const gchar *id,
                           gint64 timeout_ms, GBytes **out_record,
                           GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  gint64 deadline = g_get_monotonic_time() + MAX(timeout_ms, 0) * 1000;

  for (;;) {
    /* The generation is read before the look, so a final record committed
     * after the look (by any process) moves it and ends the wait. */
    guint64 gen = sluice_sqlite__wake_gen(self);
    RecordJob job = {.id = id, .now = sluice_sqlite__now(self)};

    if (!sluice_sqlite__run(self, FALSE, get_record_step, &job, error))
      return FALSE;
    if ((job.record != NULL && job.final) ||
        g_get_monotonic_time() >= deadline) {
      *out_record = job.record;
      return TRUE;
    }
    g_clear_pointer(&job.record, g_bytes_unref);
    sluice_sqlite__wait(self, gen, deadline);
  }
}

/* ---- lookup --------------------------------------------------------------- */

typedef struct {
  const gchar *id;
  SluiceTaskLocation *out;
} LookupJob;

static gboolean
lookup_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
            GError **error)
{
  static const gchar sql[] =
      "SELECT queue, payload, due_at FROM schedule WHERE id = ?1";
  LookupJob *job = data;
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);
  SluiceDeadLetter *dead = NULL;
  gboolean row = FALSE;

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, job->id);
  if (!sluice_sqlite__row(c, stmt, &row, "looking a task up", error))
    return FALSE;
  if (row) {
    job->out->place = SLUICE_TASK_PLACE_SCHEDULED;
    job->out->queue = sluice_sqlite__col_str(stmt, 0);
    job->out->payload = sluice_sqlite__col_bytes(stmt, 1);
    job->out->due_at = sqlite3_column_int64(stmt, 2);
    sqlite3_reset(stmt);
    return TRUE;
  }
  if (!sluice_sqlite__newest_dead_letter(c, job->id, &dead, error))
    return FALSE;
  if (dead != NULL) {
    job->out->place = SLUICE_TASK_PLACE_DEAD;
    job->out->dead_letter = dead;
  }
  return TRUE;
}

gboolean
sluice_sqlite__lookup_task(SluiceBroker *broker, const gchar *id,
                           SluiceTaskLocation *out, GError **error)
{
  LookupJob job = {id, out};

  return sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), FALSE, lookup_step,
                            &job, error);
}

/* sqlite-schedule.c - the SQLite broker's schedule slots: promoting what
 * is due into its queue, and cancelling a scheduled task. The schedule is
 * the table `schedule` (id, queue, payload, due_at), read in due order by
 * its index; writing an entry is sqlite-rows.c's, shared by every slot
 * that schedules.
 */
#include "config.h"

#include "brokers/sqlite/sqlite-broker.h"

/* ---- schedule ------------------------------------------------------------- */

typedef struct {
  gint64 now;
  guint max;
  guint promoted;
  gint64 next_due;
} PromoteJob;

static gboolean
promote_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
             GError **error)
{
  static const gchar due_sql[] =
      "SELECT rowid, queue, payload FROM schedule WHERE due_at <= ?1 ORDER BY "
      "due_at, rowid LIMIT ?2";
  static const gchar delete_sql[] = "DELETE FROM schedule WHERE rowid = ?1";
  static const gchar next_sql[] = "SELECT MIN(due_at) FROM schedule";
  PromoteJob *job = data;
  g_autoptr(GPtrArray) found = g_ptr_array_new_with_free_func(
      (GDestroyNotify)sluice_listed_message_free);
  g_autoptr(GArray) rowids = g_array_new(FALSE, FALSE, sizeof(gint64));
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, due_sql, error);
  gboolean row = FALSE;
  int rc;

  if (stmt == NULL)
    return FALSE;
  sqlite3_bind_int64(stmt, 1, job->now);
  sqlite3_bind_int64(stmt, 2, job->max);
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    g_autoptr(GBytes) payload = sluice_sqlite__col_bytes(stmt, 2);
    gint64 rowid = sqlite3_column_int64(stmt, 0);

    g_array_append_val(rowids, rowid);
    g_ptr_array_add(
        found,
        sluice_listed_message_new(
            NULL, (const gchar *)sqlite3_column_text(stmt, 1), payload, 0));
  }
  sqlite3_reset(stmt);
  if (rc != SQLITE_DONE)
    return sluice_sqlite__fail(c, rc, "reading the schedule", error);
  for (guint i = 0; i < found->len; i++) {
    SluiceListedMessage *m = found->pdata[i];
    stmt = sluice_sqlite__stmt(c, delete_sql, error);
    if (stmt == NULL)
      return FALSE;
    sqlite3_bind_int64(stmt, 1, g_array_index(rowids, gint64, i));
    if (!sluice_sqlite__done(c, stmt, "promoting a message", error) ||
        !sluice_sqlite__push_ready(c, m->queue, m->payload, 0, error))
      return FALSE;
  }
  job->promoted = found->len;
  *notify = found->len > 0;
  stmt = sluice_sqlite__stmt(c, next_sql, error);
  if (stmt == NULL ||
      !sluice_sqlite__row(c, stmt, &row, "reading the schedule", error))
    return FALSE;
  job->next_due = row ? sqlite3_column_int64(stmt, 0) : 0;
  if (row)
    sqlite3_reset(stmt);
  /* Housekeeping calls this every worker tick: the place to forget what
   * lapsed. */
  return sluice_sqlite__sweep(c, sluice_sqlite__now(c->owner), error);
}

gboolean
sluice_sqlite__promote_due(SluiceBroker *broker, gint64 now_ms, guint max,
                           guint *out_promoted, gint64 *out_next_due,
                           GError **error)
{
  PromoteJob job = {now_ms, max, 0, 0};

  if (!sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), TRUE, promote_step,
                          &job, error))
    return FALSE;
  *out_promoted = job.promoted;
  *out_next_due = job.next_due;
  return TRUE;
}

typedef struct {
  const gchar *id;
  GBytes *record;
  gint64 record_ttl_ms;
  gint64 now;
  gboolean found;
} ScheduledJob;

static const gchar unschedule_sql[] = "DELETE FROM schedule WHERE id = ?1";

static gboolean
cancel_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
            GError **error)
{
  ScheduledJob *job = data;
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, unschedule_sql, error);

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, job->id);
  if (!sluice_sqlite__done(c, stmt, "cancelling a scheduled task", error))
    return FALSE;
  job->found = sqlite3_changes(c->db) > 0;
  if (job->found && job->record != NULL) {
    if (!sluice_sqlite__put_record(c, job->id, job->record, TRUE,
                                   job->record_ttl_ms, job->now, error))
      return FALSE;
    *notify = TRUE;
  }
  return TRUE;
}

gboolean
sluice_sqlite__cancel_scheduled(SluiceBroker *broker, const gchar *id,
                                GBytes *record, gint64 record_ttl_ms,
                                gboolean *out_removed, GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  ScheduledJob job = {id, record, record_ttl_ms, sluice_sqlite__now(self),
                      FALSE};

  if (!sluice_sqlite__run(self, TRUE, cancel_step, &job, error))
    return FALSE;
  *out_removed = job.found;
  return TRUE;
}

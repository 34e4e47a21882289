/* sqlite-revocations.c - the SQLite broker's revocation slots: one row
 * per revoked task id with its expiry on the broker's clock, listed in
 * insertion order (the cursor is the row's sequence), so a worker syncing
 * them never misses one that expires out of order.
 */
#include "config.h"

#include "brokers/sqlite/sqlite-broker.h"

/* ---- revocations ---------------------------------------------------------- */

typedef struct {
  const gchar *id;
  gint64 expires_at;
  gint64 cursor;
  gint64 now;
  GPtrArray *out;
} RevokeJob;

static gboolean
revoke_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
            GError **error)
{
  /* Revoking again never shortens a revocation, and is recorded anew. */
  static const gchar sql[] =
      "INSERT INTO revocations (id, expires_at, seq) VALUES (?1, ?2, ?3) ON "
      "CONFLICT (id) DO UPDATE SET expires_at = MAX(expires_at, "
      "excluded.expires_at), seq = excluded.seq";
  RevokeJob *job = data;
  sqlite3_stmt *stmt;
  gint64 seq;

  if (!sluice_sqlite__add_counter(c, "revocation_seq", 1, error) ||
      !sluice_sqlite__get_counter(c, "revocation_seq", &seq, error))
    return FALSE;
  stmt = sluice_sqlite__stmt(c, sql, error);
  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, job->id);
  sqlite3_bind_int64(stmt, 2, job->expires_at);
  sqlite3_bind_int64(stmt, 3, seq);
  return sluice_sqlite__done(c, stmt, "revoking a task", error);
}

gboolean
sluice_sqlite__revoke(SluiceBroker *broker, const gchar *id, gint64 expires_at,
                      GError **error)
{
  RevokeJob job = {.id = id, .expires_at = expires_at};

  return sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), TRUE, revoke_step,
                            &job, error);
}

static gboolean
list_revocations_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                      GError **error)
{
  static const gchar since_sql[] =
      "SELECT id, expires_at FROM revocations WHERE seq > ?1 AND expires_at > "
      "?2 ORDER BY seq";
  RevokeJob *job = data;
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, since_sql, error);
  int rc;

  if (stmt == NULL)
    return FALSE;
  sqlite3_bind_int64(stmt, 1, job->cursor);
  sqlite3_bind_int64(stmt, 2, job->now);
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
    g_ptr_array_add(job->out, sluice_revocation_new(
                                  (const gchar *)sqlite3_column_text(stmt, 0),
                                  sqlite3_column_int64(stmt, 1)));
  sqlite3_reset(stmt);
  if (rc != SQLITE_DONE)
    return sluice_sqlite__fail(c, rc, "listing revocations", error);
  {
    gint64 seq;
    /* Same read snapshot as the rows: everything up to seq was seen. */
    if (!sluice_sqlite__get_counter(c, "revocation_seq", &seq, error))
      return FALSE;
    job->cursor = MAX(job->cursor, seq);
  }
  return TRUE;
}

gboolean
sluice_sqlite__list_revocations(SluiceBroker *broker, gint64 cursor,
                                gint64 now_ms, GPtrArray *out,
                                gint64 *out_cursor, GError **error)
{
  RevokeJob job = {.cursor = cursor, .now = now_ms, .out = out};

  if (!sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), FALSE,
                          list_revocations_step, &job, error))
    return FALSE;
  *out_cursor = job.cursor;
  return TRUE;
}

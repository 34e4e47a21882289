/* sqlite-dead-letters.c - the SQLite broker's dead-letter slots: list,
 * read, replay and delete entries of the table `dead_letters`, capped at
 * dead_letter_max. Burying one and reading one back from a row are
 * row-level steps of sqlite-rows.c (a settle buries, a lookup reads).
 */
#include "config.h"

#include "brokers/sqlite/sqlite-broker.h"

/* ---- Dead-letter entry ids (sqlite-rows.c formats them) ------------------- */

static gboolean
parse_entry_id(const gchar *entry_id, gint64 *entry)
{
  guint64 v;

  if (entry_id == NULL ||
      !g_ascii_string_to_unsigned(entry_id, 10, 0, G_MAXINT64, &v, NULL))
    return FALSE;
  *entry = (gint64)v;
  return TRUE;
}

/* ---- dead letters --------------------------------------------------------- */

typedef struct {
  gint64 entry;
  guint limit;
  GPtrArray *out;
  SluiceDeadLetter *found;
  SluiceSubmit *item;
  gint64 now;
  gboolean exists;
} DlqJob;

static gboolean
dlq_list_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
              GError **error)
{
  static const gchar sql[] = "SELECT " DEAD_LETTER_COLUMNS
                             " FROM dead_letters WHERE entry > ?1 ORDER BY "
                             "entry LIMIT ?2";
  DlqJob *job = data;
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);
  int rc;

  if (stmt == NULL)
    return FALSE;
  sqlite3_bind_int64(stmt, 1, job->entry);
  sqlite3_bind_int64(stmt, 2, job->limit);
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
    g_ptr_array_add(job->out, sluice_sqlite__dead_letter_of(stmt));
  sqlite3_reset(stmt);
  if (rc != SQLITE_DONE)
    return sluice_sqlite__fail(c, rc, "listing dead letters", error);
  return TRUE;
}

gboolean
sluice_sqlite__dlq_list(SluiceBroker *broker, const gchar *after, guint limit,
                        GPtrArray *out, GError **error)
{
  DlqJob job = {.limit = limit, .out = out};

  if (after != NULL && !parse_entry_id(after, &job.entry)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "“%s” is not a dead-letter entry id: pass one a listing "
                "returned, or none to start at the oldest",
                after);
    return FALSE;
  }
  return sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), FALSE, dlq_list_step,
                            &job, error);
}

static gboolean
dlq_get_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
             GError **error)
{
  static const gchar sql[] =
      "SELECT " DEAD_LETTER_COLUMNS " FROM dead_letters WHERE entry = ?1";
  DlqJob *job = data;
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);
  gboolean row = FALSE;

  if (stmt == NULL)
    return FALSE;
  sqlite3_bind_int64(stmt, 1, job->entry);
  if (!sluice_sqlite__row(c, stmt, &row, "reading a dead letter", error))
    return FALSE;
  if (row) {
    job->found = sluice_sqlite__dead_letter_of(stmt);
    sqlite3_reset(stmt);
  }
  return TRUE;
}

gboolean
sluice_sqlite__dlq_get(SluiceBroker *broker, const gchar *entry_id,
                       SluiceDeadLetter **out_entry, GError **error)
{
  DlqJob job = {0};

  if (parse_entry_id(entry_id, &job.entry) &&
      !sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), FALSE, dlq_get_step,
                          &job, error))
    return FALSE;
  if (job.found == NULL) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_NOT_FOUND,
                "no dead letter with entry id %s", entry_id);
    return FALSE;
  }
  *out_entry = job.found;
  return TRUE;
}

static gboolean
dlq_delete_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                GError **error)
{
  static const gchar sql[] = "DELETE FROM dead_letters WHERE entry = ?1";
  DlqJob *job = data;
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);
  gboolean ready = FALSE;

  if (stmt == NULL)
    return FALSE;
  sqlite3_bind_int64(stmt, 1, job->entry);
  if (!sluice_sqlite__done(c, stmt, "deleting a dead letter", error))
    return FALSE;
  job->exists = sqlite3_changes(c->db) > 0;
  if (job->exists && job->item != NULL) {
    if (!sluice_sqlite__submit(c, job->item, job->now, &ready, error))
      return FALSE;
    *notify = ready;
  }
  return TRUE;
}

gboolean
sluice_sqlite__dlq_replay(SluiceBroker *broker, const gchar *entry_id,
                          SluiceSubmit *item, gboolean *out_found,
                          GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  DlqJob job = {.item = item, .now = sluice_sqlite__now(self)};

  *out_found = FALSE;
  if (!parse_entry_id(entry_id, &job.entry))
    return TRUE;
  if (!sluice_sqlite__run(self, TRUE, dlq_delete_step, &job, error))
    return FALSE;
  *out_found = job.exists;
  return TRUE;
}

gboolean
sluice_sqlite__dlq_delete(SluiceBroker *broker, const gchar *entry_id,
                          gboolean *out_found, GError **error)
{
  DlqJob job = {0};

  *out_found = FALSE;
  if (!parse_entry_id(entry_id, &job.entry))
    return TRUE;
  if (!sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), TRUE, dlq_delete_step,
                          &job, error))
    return FALSE;
  *out_found = job.exists;
  return TRUE;
}

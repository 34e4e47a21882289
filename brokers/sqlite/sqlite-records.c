/* sqlite-records.c - the SQLite broker's per-task slots: records (and
 * waiting for one), revocations, periodic claims, dead letters and
 * lookups.
 *
 * Every TTL is an absolute expiry on the broker's clock stored with the
 * row: a reader treats a lapsed row as absent, and promote_due's sweep
 * deletes lapsed rows, so a fake clock makes records expire as the
 * contract's CLOCK_TTL promises, and the real clock does in production.
 */
#include "config.h"

#include "brokers/sqlite/sqlite-broker.h"

/* ---- Dead-letter entry ids ------------------------------------------------ */

static gchar *
entry_id_of(gint64 entry)
{
  /* Zero-padded, so entry ids sort as they were buried. */
  return g_strdup_printf("%020" G_GINT64_FORMAT, entry);
}

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

/* ---- dead letters --------------------------------------------------------- */

#define DEAD_LETTER_COLUMNS                                                    \
  "entry, task_id, task, reason, detail, source, deliveries, at, payload"

static SluiceDeadLetter *
dead_letter_of(sqlite3_stmt *stmt)
{
  SluiceDeadLetter *dl = sluice_dead_letter_new();

  dl->entry_id = entry_id_of(sqlite3_column_int64(stmt, 0));
  dl->task_id = sluice_sqlite__col_str(stmt, 1);
  dl->task = sluice_sqlite__col_str(stmt, 2);
  dl->reason = sluice_sqlite__col_str(stmt, 3);
  dl->detail = sluice_sqlite__col_str(stmt, 4);
  dl->source = sluice_sqlite__col_str(stmt, 5);
  dl->deliveries = (guint)sqlite3_column_int64(stmt, 6);
  dl->at = sqlite3_column_int64(stmt, 7);
  dl->payload = sluice_sqlite__col_bytes(stmt, 8);
  return dl;
}

typedef struct {
  gint64 entry;
  guint limit;
  GPtrArray *out;
  SluiceDeadLetter *found;
  SluiceSubmit *item;
  gint64 now;
  gboolean exists;
  const gchar *task_id;
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
    g_ptr_array_add(job->out, dead_letter_of(stmt));
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
  static const gchar by_task_sql[] =
      "SELECT " DEAD_LETTER_COLUMNS " FROM dead_letters WHERE task_id = ?1 "
      "ORDER BY entry DESC LIMIT 1";
  DlqJob *job = data;
  sqlite3_stmt *stmt =
      sluice_sqlite__stmt(c, job->task_id != NULL ? by_task_sql : sql, error);
  gboolean row = FALSE;

  if (stmt == NULL)
    return FALSE;
  if (job->task_id != NULL)
    sluice_sqlite__bind_str(stmt, 1, job->task_id);
  else
    sqlite3_bind_int64(stmt, 1, job->entry);
  if (!sluice_sqlite__row(c, stmt, &row, "reading a dead letter", error))
    return FALSE;
  if (row) {
    job->found = dead_letter_of(stmt);
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
  DlqJob dlq = {.task_id = job->id};
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
  if (!dlq_get_step(c, &dlq, notify, error))
    return FALSE;
  if (dlq.found != NULL) {
    job->out->place = SLUICE_TASK_PLACE_DEAD;
    job->out->dead_letter = dlq.found;
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

/* sqlite-rows.c - the row-level steps that several of the SQLite broker's
 * slots share, each run inside the caller's transaction: queueing,
 * scheduling and submitting a message, writing a record, counters, the
 * sweep of lapsed rows, and burying a dead letter and reading one back.
 *
 * The slot files (one per topic: sqlite-queue.c, sqlite-schedule.c,
 * sqlite-dead-letters.c, ...) call these and never each other, so
 * replaying a dead letter (dead-letters) can submit a message (queue) and
 * a settle (queue) can bury one (dead-letters).
 */
#include "config.h"

#include "brokers/sqlite/sqlite-broker.h"

/* ---- Messages: queueing, scheduling, submitting --------------------------- */

static void
note_queue(SluiceSqliteConn *c, const gchar *queue, gboolean *known)
{
  SluiceSqliteBroker *self = c->owner;

  g_mutex_lock(&self->queues_lock);
  *known = g_hash_table_contains(self->queues_known, queue);
  g_mutex_unlock(&self->queues_lock);
}

gboolean
sluice_sqlite__push_ready(SluiceSqliteConn *c, const gchar *queue,
                          GBytes *payload, gint64 delivery_count,
                          GError **error)
{
  static const gchar push_sql[] =
      "INSERT INTO messages (queue, payload, deliveries) VALUES (?1, ?2, ?3)";
  static const gchar queue_sql[] =
      "INSERT OR IGNORE INTO queues (name) VALUES (?1)";
  sqlite3_stmt *stmt;
  gboolean known;

  note_queue(c, queue, &known);
  if (!known) {
    stmt = sluice_sqlite__stmt(c, queue_sql, error);
    if (stmt == NULL)
      return FALSE;
    sluice_sqlite__bind_str(stmt, 1, queue);
    if (!sluice_sqlite__done(c, stmt, "naming a queue", error))
      return FALSE;
    /* Known once written; a rollback only costs a repeated INSERT OR
     * IGNORE next time, never a missing name (the next push writes it). */
    g_mutex_lock(&c->owner->queues_lock);
    g_hash_table_add(c->owner->queues_known, g_strdup(queue));
    g_mutex_unlock(&c->owner->queues_lock);
  }
  stmt = sluice_sqlite__stmt(c, push_sql, error);
  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, queue);
  sluice_sqlite__bind_bytes(stmt, 2, payload);
  sqlite3_bind_int64(stmt, 3, delivery_count);
  return sluice_sqlite__done(c, stmt, "queueing a message", error);
}

gboolean
sluice_sqlite__schedule(SluiceSqliteConn *c, const gchar *id,
                        const gchar *queue, GBytes *payload, gint64 due_at,
                        GError **error)
{
  /* REPLACE: one entry per id, and a new rowid orders it after entries
   * already due at the same time. */
  static const gchar sql[] = "INSERT OR REPLACE INTO schedule (id, queue, "
                             "payload, due_at) VALUES (?1, ?2, ?3, ?4)";
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, id);
  sluice_sqlite__bind_str(stmt, 2, queue);
  sluice_sqlite__bind_bytes(stmt, 3, payload);
  sqlite3_bind_int64(stmt, 4, due_at);
  return sluice_sqlite__done(c, stmt, "scheduling a message", error);
}

gboolean
sluice_sqlite__submit(SluiceSqliteConn *c, SluiceSubmit *item, gint64 now,
                      gboolean *out_ready, GError **error)
{
  static const gchar claim_get_sql[] =
      "SELECT expires_at FROM dedup WHERE id = ?1";
  static const gchar claim_put_sql[] =
      "INSERT OR REPLACE INTO dedup (id, expires_at) VALUES (?1, ?2)";
  sqlite3_stmt *stmt;

  item->existed = FALSE;
  if (item->dedup_ttl_ms > 0) {
    gboolean row = FALSE;

    stmt = sluice_sqlite__stmt(c, claim_get_sql, error);
    if (stmt == NULL)
      return FALSE;
    sluice_sqlite__bind_str(stmt, 1, item->id);
    if (!sluice_sqlite__row(c, stmt, &row, "reading an idempotency claim",
                            error))
      return FALSE;
    if (row) {
      gint64 expires_at = sqlite3_column_int64(stmt, 0);
      sqlite3_reset(stmt);
      if (expires_at > now) {
        item->existed = TRUE;
        return TRUE;
      }
    }
    stmt = sluice_sqlite__stmt(c, claim_put_sql, error);
    if (stmt == NULL)
      return FALSE;
    sluice_sqlite__bind_str(stmt, 1, item->id);
    sqlite3_bind_int64(stmt, 2, now + item->dedup_ttl_ms);
    if (!sluice_sqlite__done(c, stmt, "claiming a task id", error))
      return FALSE;
  }
  if (item->due_at > 0) {
    if (!sluice_sqlite__schedule(c, item->id, item->queue, item->payload,
                                 item->due_at, error))
      return FALSE;
  } else {
    if (!sluice_sqlite__push_ready(c, item->queue, item->payload, 0, error))
      return FALSE;
    *out_ready = TRUE;
  }
  if (item->record != NULL &&
      !sluice_sqlite__put_record(c, item->id, item->record, FALSE,
                                 item->record_ttl_ms, now, error))
    return FALSE;
  return TRUE;
}

/* ---- Records, counters, the sweep, burial --------------------------------- */

gboolean
sluice_sqlite__put_record(SluiceSqliteConn *c, const gchar *id, GBytes *record,
                          gboolean final, gint64 ttl_ms, gint64 now,
                          GError **error)
{
  static const gchar sql[] = "INSERT OR REPLACE INTO records (id, record, "
                             "final, expires_at) VALUES (?1, ?2, ?3, ?4)";
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, id);
  sluice_sqlite__bind_bytes(stmt, 2, record);
  sqlite3_bind_int(stmt, 3, final ? 1 : 0);
  sqlite3_bind_int64(stmt, 4, now + MAX(ttl_ms, 1));
  return sluice_sqlite__done(c, stmt, "writing a record", error);
}

gboolean
sluice_sqlite__add_counter(SluiceSqliteConn *c, const gchar *name, gint64 n,
                           GError **error)
{
  static const gchar sql[] =
      "INSERT INTO counters (name, n) VALUES (?1, ?2) ON CONFLICT (name) DO "
      "UPDATE SET n = n + excluded.n";
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, name);
  sqlite3_bind_int64(stmt, 2, n);
  return sluice_sqlite__done(c, stmt, "counting", error);
}

gboolean
sluice_sqlite__get_counter(SluiceSqliteConn *c, const gchar *name, gint64 *out,
                           GError **error)
{
  static const gchar sql[] = "SELECT n FROM counters WHERE name = ?1";
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);
  gboolean row = FALSE;

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, name);
  if (!sluice_sqlite__row(c, stmt, &row, "reading a counter", error))
    return FALSE;
  *out = row ? sqlite3_column_int64(stmt, 0) : 0;
  if (row)
    sqlite3_reset(stmt);
  return TRUE;
}

gboolean
sluice_sqlite__sweep(SluiceSqliteConn *c, gint64 now, GError **error)
{
  /* Bounded per call, so one housekeeping tick never holds the write lock
   * for long; the indexes on expiry make each a range scan. */
  static const gchar *const sweeps[] = {
      "DELETE FROM records WHERE rowid IN (SELECT rowid FROM records WHERE "
      "expires_at <= ?1 LIMIT 1000)",
      "DELETE FROM dedup WHERE rowid IN (SELECT rowid FROM dedup WHERE "
      "expires_at <= ?1 LIMIT 1000)",
      "DELETE FROM revocations WHERE rowid IN (SELECT rowid FROM revocations "
      "WHERE expires_at <= ?1 LIMIT 1000)",
      /* A join's rows first, then the join: members and releases are
       * found by the joins that lapsed. */
      "DELETE FROM progress WHERE rowid IN (SELECT rowid FROM progress WHERE "
      "expires_at <= ?1 LIMIT 1000)",
      "DELETE FROM join_members WHERE join_id IN (SELECT id FROM joins WHERE "
      "expires_at <= ?1 LIMIT 100)",
      "DELETE FROM join_release WHERE join_id IN (SELECT id FROM joins WHERE "
      "expires_at <= ?1 LIMIT 100)",
      "DELETE FROM joins WHERE id IN (SELECT id FROM joins WHERE "
      "expires_at <= ?1 LIMIT 100)",
      /* Buckets keep microseconds. */
      "DELETE FROM rate_buckets WHERE rowid IN (SELECT rowid FROM "
      "rate_buckets WHERE tat <= ?1 * 1000 LIMIT 1000)",
      "DELETE FROM unique_claims WHERE rowid IN (SELECT rowid FROM "
      "unique_claims WHERE expires_at <= ?1 LIMIT 1000)",
  };

  /* A lapsed liveness row means what no row means (dead), so deleting it
   * changes nothing but the size of the table a crashed worker left it
   * in. Liveness is on the real time. */
  static const gchar consumers_sql[] =
      "DELETE FROM consumers WHERE alive_until <= ?1";
  sqlite3_stmt *stmt;

  for (gsize i = 0; i < G_N_ELEMENTS(sweeps); i++) {
    stmt = sluice_sqlite__stmt(c, sweeps[i], error);
    if (stmt == NULL)
      return FALSE;
    sqlite3_bind_int64(stmt, 1, now);
    if (!sluice_sqlite__done(c, stmt, "deleting lapsed entries", error))
      return FALSE;
  }
  stmt = sluice_sqlite__stmt(c, consumers_sql, error);
  if (stmt == NULL)
    return FALSE;
  sqlite3_bind_int64(stmt, 1, sluice_sqlite__real_now());
  return sluice_sqlite__done(c, stmt, "forgetting dead consumers", error);
}

gboolean
sluice_sqlite__bury(SluiceSqliteConn *c, const SluiceDeadLetter *dl,
                    guint *dropped, GError **error)
{
  static const gchar insert_sql[] =
      "INSERT INTO dead_letters (task_id, task, reason, detail, source, "
      "deliveries, at, payload) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
  static const gchar count_sql[] = "SELECT COUNT(*) FROM dead_letters";
  static const gchar oldest_sql[] =
      "SELECT entry, reason FROM dead_letters ORDER BY entry LIMIT ?1";
  static const gchar delete_sql[] = "DELETE FROM dead_letters WHERE entry = ?1";
  static const gchar dropped_sql[] =
      "INSERT INTO dropped (reason, n) VALUES (?1, 1) ON CONFLICT (reason) "
      "DO UPDATE SET n = n + 1";
  guint max = c->owner->dead_letter_max;
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, insert_sql, error);
  g_autoptr(GArray) entries = g_array_new(FALSE, FALSE, sizeof(gint64));
  g_autoptr(GPtrArray) reasons = g_ptr_array_new_with_free_func(g_free);
  gboolean row = FALSE;
  gint64 count;
  int rc;

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, dl->task_id);
  sluice_sqlite__bind_str(stmt, 2, dl->task);
  sluice_sqlite__bind_str(stmt, 3, dl->reason);
  sluice_sqlite__bind_str(stmt, 4, dl->detail);
  sluice_sqlite__bind_str(stmt, 5, dl->source);
  sqlite3_bind_int64(stmt, 6, dl->deliveries);
  sqlite3_bind_int64(stmt, 7, dl->at);
  if (dl->payload != NULL)
    sluice_sqlite__bind_bytes(stmt, 8, dl->payload);
  if (!sluice_sqlite__done(c, stmt, "burying a message", error))
    return FALSE;

  stmt = sluice_sqlite__stmt(c, count_sql, error);
  if (stmt == NULL ||
      !sluice_sqlite__row(c, stmt, &row, "counting dead letters", error))
    return FALSE;
  count = row ? sqlite3_column_int64(stmt, 0) : 0;
  sqlite3_reset(stmt);
  if (count <= max)
    return TRUE;
  stmt = sluice_sqlite__stmt(c, oldest_sql, error);
  if (stmt == NULL)
    return FALSE;
  sqlite3_bind_int64(stmt, 1, count - max);
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    gint64 entry = sqlite3_column_int64(stmt, 0);
    gchar *reason = sluice_sqlite__col_str(stmt, 1);
    g_array_append_val(entries, entry);
    g_ptr_array_add(reasons, reason != NULL ? reason : g_strdup("unknown"));
  }
  sqlite3_reset(stmt);
  if (rc != SQLITE_DONE)
    return sluice_sqlite__fail(c, rc, "reading dead letters", error);
  for (guint i = 0; i < entries->len; i++) {
    stmt = sluice_sqlite__stmt(c, delete_sql, error);
    if (stmt == NULL)
      return FALSE;
    sqlite3_bind_int64(stmt, 1, g_array_index(entries, gint64, i));
    if (!sluice_sqlite__done(c, stmt, "dropping a dead letter", error))
      return FALSE;
    stmt = sluice_sqlite__stmt(c, dropped_sql, error);
    if (stmt == NULL)
      return FALSE;
    sluice_sqlite__bind_str(stmt, 1, reasons->pdata[i]);
    if (!sluice_sqlite__done(c, stmt, "counting a dropped dead letter", error))
      return FALSE;
  }
  *dropped += entries->len;
  return TRUE;
}

static gchar *
entry_id_of(gint64 entry)
{
  /* Zero-padded, so entry ids sort as they were buried. */
  return g_strdup_printf("%020" G_GINT64_FORMAT, entry);
}

SluiceDeadLetter *
sluice_sqlite__dead_letter_of(sqlite3_stmt *stmt)
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

gboolean
sluice_sqlite__newest_dead_letter(SluiceSqliteConn *c, const gchar *task_id,
                                  SluiceDeadLetter **out, GError **error)
{
  static const gchar sql[] =
      "SELECT " DEAD_LETTER_COLUMNS " FROM dead_letters WHERE task_id = ?1 "
      "ORDER BY entry DESC LIMIT 1";
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);
  gboolean row = FALSE;

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, task_id);
  if (!sluice_sqlite__row(c, stmt, &row, "reading a dead letter", error))
    return FALSE;
  if (row) {
    *out = sluice_sqlite__dead_letter_of(stmt);
    sqlite3_reset(stmt);
  }
  return TRUE;
}

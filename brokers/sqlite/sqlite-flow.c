/* sqlite-flow.c - the SQLite broker's flow-control slots: rate-limit
 * buckets, one row each (table rate_buckets: key -> tat, the theoretical
 * arrival time in microseconds of the broker's clock), and concurrency
 * slots (below).
 *
 * A call is one write transaction, so every item's read-compare-write is
 * atomic against every other process sharing the file. Rows whose time is
 * past mean what no row means (a bucket that admits at once); the sweep
 * deletes them.
 */
#include "config.h"

#include "brokers/sqlite/sqlite-broker.h"

typedef struct {
  SluiceRateAcquire *items;
  guint n;
  gint64 now;
} RateJob;

static gboolean
rate_acquire_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                  GError **error)
{
  static const gchar get_sql[] = "SELECT tat FROM rate_buckets WHERE key = ?1";
  static const gchar put_sql[] =
      "INSERT INTO rate_buckets (key, tat) VALUES (?1, ?2) "
      "ON CONFLICT (key) DO UPDATE SET tat = excluded.tat";
  RateJob *job = data;

  for (guint i = 0; i < job->n; i++) {
    SluiceRateAcquire *item = &job->items[i];
    sqlite3_stmt *stmt = sluice_sqlite__stmt(c, get_sql, error);
    gboolean row;
    gint64 tat, next;

    if (stmt == NULL)
      return FALSE;
    sluice_sqlite__bind_str(stmt, 1, item->key);
    if (!sluice_sqlite__row(c, stmt, &row, "reading a rate-limit bucket",
                            error))
      return FALSE;
    tat = row ? sqlite3_column_int64(stmt, 0) : 0;
    sqlite3_reset(stmt);
    if (!sluice_broker_gcra_step(item, job->now, tat, &next))
      continue; /* refused: the bucket stays as it was */
    stmt = sluice_sqlite__stmt(c, put_sql, error);
    if (stmt == NULL)
      return FALSE;
    sluice_sqlite__bind_str(stmt, 1, item->key);
    sqlite3_bind_int64(stmt, 2, next);
    if (!sluice_sqlite__done(c, stmt, "writing a rate-limit bucket", error))
      return FALSE;
  }
  return TRUE;
}

gboolean
sluice_sqlite__rate_acquire(SluiceBroker *broker, SluiceRateAcquire *items,
                            guint n_items, GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  RateJob job = {.items = items, .n = n_items, .now = sluice_sqlite__now(self)};

  return sluice_sqlite__run(self, TRUE, rate_acquire_step, &job, error);
}

/* ---- concurrency slots ---------------------------------------------------
 *
 * slot_holders (key, holder) -> expires_at, and slot_waiters, oldest first
 * by their row number. Leases are on the real time: every process sharing
 * the file must agree on them, as on the consumers' liveness. */

/* A waiter older than this and not on the schedule is forgotten: it ran,
 * or was deleted (a younger one may only not be settled yet). */
#define WAITER_GRACE_MS 60000

typedef struct {
  SluiceSlotAcquire *acquire;
  SluiceSlotRelease *release;
  guint n;
  gint64 now;
} SlotJob;

static gboolean
run_sql(SluiceSqliteConn *c, const gchar *sql, const gchar *key,
        const gchar *other, gint64 number, const gchar *what, GError **error)
{
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);

  int n;

  if (stmt == NULL)
    return FALSE;
  /* ?1 is the key; the statement may use ?2 (a name) and ?3 (a time). */
  n = sqlite3_bind_parameter_count(stmt);
  sluice_sqlite__bind_str(stmt, 1, key);
  if (n >= 2)
    sluice_sqlite__bind_str(stmt, 2, other);
  if (n >= 3)
    sqlite3_bind_int64(stmt, 3, number);
  return sluice_sqlite__done(c, stmt, what, error);
}

static gboolean
slot_acquire_one(SluiceSqliteConn *c, SluiceSlotAcquire *item, gint64 now,
                 GError **error)
{
  static const gchar lapse_sql[] =
      "DELETE FROM slot_holders WHERE key = ?1 AND expires_at <= ?3";
  static const gchar count_sql[] =
      "SELECT count(*), sum(holder = ?2) FROM slot_holders WHERE key = ?1";
  static const gchar hold_sql[] =
      "INSERT INTO slot_holders (key, holder, expires_at) VALUES (?1, ?2, ?3) "
      "ON CONFLICT (key, holder) DO UPDATE SET expires_at = "
      "excluded.expires_at";
  static const gchar unwait_sql[] =
      "DELETE FROM slot_waiters WHERE key = ?1 AND id = ?2";
  static const gchar wait_sql[] =
      "INSERT OR IGNORE INTO slot_waiters (key, id, added_at) "
      "VALUES (?1, ?2, ?3)";
  sqlite3_stmt *stmt;
  gboolean row;
  gint64 held, mine;

  if (!run_sql(c, lapse_sql, item->key, "", now, "dropping lapsed slots",
               error))
    return FALSE;
  stmt = sluice_sqlite__stmt(c, count_sql, error);
  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, item->key);
  sluice_sqlite__bind_str(stmt, 2, item->holder);
  if (!sluice_sqlite__row(c, stmt, &row, "counting slot holders", error))
    return FALSE;
  held = row ? sqlite3_column_int64(stmt, 0) : 0;
  mine = row ? sqlite3_column_int64(stmt, 1) : 0;
  sqlite3_reset(stmt);
  item->granted = mine > 0 || held < item->max;
  if (item->granted) {
    if (!run_sql(c, hold_sql, item->key, item->holder, now + item->lease_ms,
                 "taking a slot", error))
      return FALSE;
    return item->waiter == NULL ||
           run_sql(c, unwait_sql, item->key, item->waiter, 0,
                   "forgetting a waiter", error);
  }
  return item->waiter == NULL || run_sql(c, wait_sql, item->key, item->waiter,
                                         now, "adding a waiter", error);
}

static gboolean
slot_acquire_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                  GError **error)
{
  SlotJob *job = data;

  for (guint i = 0; i < job->n; i++)
    if (!slot_acquire_one(c, &job->acquire[i], job->now, error))
      return FALSE;
  return TRUE;
}

gboolean
sluice_sqlite__slot_acquire(SluiceBroker *broker, SluiceSlotAcquire *items,
                            guint n_items, GError **error)
{
  SlotJob job = {
      .acquire = items, .n = n_items, .now = sluice_sqlite__real_now()};

  return sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), TRUE,
                            slot_acquire_step, &job, error);
}

/* Wakes the oldest waiter of @item's key that is on the schedule. */
static gboolean
wake_one(SluiceSqliteConn *c, SluiceSlotRelease *item, gint64 now,
         gboolean *notify, GError **error)
{
  static const gchar waiters_sql[] =
      "SELECT n, id, added_at FROM slot_waiters WHERE key = ?1 ORDER BY n "
      "LIMIT 16";
  static const gchar scheduled_sql[] =
      "SELECT queue, payload FROM schedule WHERE id = ?1";
  static const gchar unschedule_sql[] = "DELETE FROM schedule WHERE id = ?1";
  static const gchar forget_sql[] = "DELETE FROM slot_waiters WHERE n = ?1";
  g_autoptr(GArray) ns = g_array_new(FALSE, FALSE, sizeof(gint64));
  g_autoptr(GArray) added = g_array_new(FALSE, FALSE, sizeof(gint64));
  g_autoptr(GPtrArray) ids = g_ptr_array_new_with_free_func(g_free);
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, waiters_sql, error);
  int rc;

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, item->key);
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    gint64 n = sqlite3_column_int64(stmt, 0);
    gint64 at = sqlite3_column_int64(stmt, 2);
    g_array_append_val(ns, n);
    g_array_append_val(added, at);
    g_ptr_array_add(ids, sluice_sqlite__col_str(stmt, 1));
  }
  sqlite3_reset(stmt);
  if (rc != SQLITE_DONE)
    return sluice_sqlite__fail(c, rc, "reading slot waiters", error);
  for (guint i = 0; i < ids->len; i++) {
    g_autofree gchar *queue = NULL;
    g_autoptr(GBytes) payload = NULL;
    gboolean row;
    sqlite3_stmt *forget;

    stmt = sluice_sqlite__stmt(c, scheduled_sql, error);
    if (stmt == NULL)
      return FALSE;
    sluice_sqlite__bind_str(stmt, 1, ids->pdata[i]);
    if (!sluice_sqlite__row(c, stmt, &row, "reading the schedule", error))
      return FALSE;
    if (row) {
      queue = sluice_sqlite__col_str(stmt, 0);
      payload = sluice_sqlite__col_bytes(stmt, 1);
    }
    sqlite3_reset(stmt);
    if (!row && now - g_array_index(added, gint64, i) < WAITER_GRACE_MS)
      continue;
    forget = sluice_sqlite__stmt(c, forget_sql, error);
    if (forget == NULL)
      return FALSE;
    sqlite3_bind_int64(forget, 1, g_array_index(ns, gint64, i));
    if (!sluice_sqlite__done(c, forget, "forgetting a waiter", error))
      return FALSE;
    if (!row)
      continue;
    stmt = sluice_sqlite__stmt(c, unschedule_sql, error);
    if (stmt == NULL)
      return FALSE;
    sluice_sqlite__bind_str(stmt, 1, ids->pdata[i]);
    if (!sluice_sqlite__done(c, stmt, "waking a waiter", error) ||
        !sluice_sqlite__push_ready(c, queue, payload, 0, error))
      return FALSE;
    item->woke = TRUE;
    *notify = TRUE;
    return TRUE;
  }
  return TRUE;
}

static gboolean
slot_release_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                  GError **error)
{
  static const gchar release_sql[] =
      "DELETE FROM slot_holders WHERE key = ?1 AND holder = ?2";
  SlotJob *job = data;

  for (guint i = 0; i < job->n; i++) {
    SluiceSlotRelease *item = &job->release[i];

    item->woke = FALSE;
    if (!run_sql(c, release_sql, item->key, item->holder, 0,
                 "giving a slot back", error) ||
        !wake_one(c, item, job->now, notify, error))
      return FALSE;
  }
  return TRUE;
}

gboolean
sluice_sqlite__slot_release(SluiceBroker *broker, SluiceSlotRelease *items,
                            guint n_items, GError **error)
{
  SlotJob job = {
      .release = items, .n = n_items, .now = sluice_sqlite__real_now()};

  return sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), TRUE,
                            slot_release_step, &job, error);
}

/* ---- reading the slots (list_slots) ---------------------------------------
 */

typedef struct {
  guint limit;
  GPtrArray *out;
  gint64 now;
} ListJob;

static gboolean
list_slots_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                GError **error)
{
  static const gchar keys_sql[] =
      "SELECT key FROM slot_holders WHERE expires_at > ?1 UNION "
      "SELECT key FROM slot_waiters LIMIT ?2";
  static const gchar holders_sql[] = "SELECT holder FROM slot_holders "
                                     "WHERE key = ?1 AND expires_at > ?2";
  static const gchar waiting_sql[] =
      "SELECT count(*) FROM slot_waiters WHERE key = ?1";
  ListJob *job = data;
  g_autoptr(GPtrArray) keys = g_ptr_array_new_with_free_func(g_free);
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, keys_sql, error);
  gboolean row = FALSE;

  if (stmt == NULL)
    return FALSE;
  sqlite3_bind_int64(stmt, 1, job->now);
  sqlite3_bind_int64(stmt, 2, job->limit);
  for (;;) {
    if (!sluice_sqlite__row(c, stmt, &row, "listing concurrency keys", error))
      return FALSE;
    if (!row)
      break;
    g_ptr_array_add(keys,
                    g_strdup((const gchar *)sqlite3_column_text(stmt, 0)));
  }
  for (guint i = 0; i < keys->len; i++) {
    SluiceSlotState *s = sluice_slot_state_new(keys->pdata[i]);

    g_ptr_array_add(job->out, s);
    stmt = sluice_sqlite__stmt(c, holders_sql, error);
    if (stmt == NULL)
      return FALSE;
    sluice_sqlite__bind_str(stmt, 1, s->key);
    sqlite3_bind_int64(stmt, 2, job->now);
    for (;;) {
      if (!sluice_sqlite__row(c, stmt, &row, "listing slot holders", error))
        return FALSE;
      if (!row)
        break;
      g_ptr_array_add(s->holders,
                      g_strdup((const gchar *)sqlite3_column_text(stmt, 0)));
    }
    stmt = sluice_sqlite__stmt(c, waiting_sql, error);
    if (stmt == NULL)
      return FALSE;
    sluice_sqlite__bind_str(stmt, 1, s->key);
    if (!sluice_sqlite__row(c, stmt, &row, "counting slot waiters", error))
      return FALSE;
    if (row) {
      s->waiting = (guint)sqlite3_column_int64(stmt, 0);
      sqlite3_reset(stmt);
    }
  }
  return TRUE;
}

gboolean
sluice_sqlite__list_slots(SluiceBroker *broker, guint limit, GPtrArray *out,
                          GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  g_autoptr(GPtrArray) found =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_slot_state_free);
  ListJob job = {limit, found, sluice_sqlite__real_now()};

  if (!sluice_sqlite__run(self, FALSE, list_slots_step, &job, error))
    return FALSE;
  for (guint i = 0; i < found->len; i++)
    g_ptr_array_add(out, g_steal_pointer(&found->pdata[i]));
  g_ptr_array_set_free_func(found, NULL);
  return TRUE;
}

/* sqlite-flow.c - the SQLite broker's flow-control slot: rate-limit
 * buckets, one row each (table rate_buckets: key -> tat, the theoretical
 * arrival time in microseconds of the broker's clock).
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
  gint64 now_us = job->now * 1000;

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
    tat = row ? MAX(sqlite3_column_int64(stmt, 0), now_us) : now_us;
    sqlite3_reset(stmt);
    item->now_ms = job->now;
    item->granted = FALSE;
    item->wait_ms = 0;
    if (item->block_ms > 0) {
      next = MAX(tat, now_us + item->block_ms * 1000 + item->tolerance_us);
      item->wait_ms = item->block_ms;
    } else if (tat - item->tolerance_us <= now_us) {
      next = tat + item->interval_us;
      item->granted = TRUE;
    } else {
      item->wait_ms = (tat - item->tolerance_us - now_us + 999) / 1000;
      continue;
    }
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

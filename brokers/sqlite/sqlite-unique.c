/* sqlite-unique.c - the SQLite broker's uniqueness slots: one row per
 * claimed key (table unique_claims: key -> holder, running, expires_at on
 * the broker's clock). A call is one write transaction, so a claim and the
 * message it admits are written together, against every process sharing
 * the file; a row whose time is past means what no row means.
 */
#include "config.h"

#include "brokers/sqlite/sqlite-broker.h"

typedef struct {
  gchar *holder; /* NULL: no live claim */
  gboolean running;
} Claim;

static gboolean
read_claim(SluiceSqliteConn *c, const gchar *key, gint64 now, Claim *out,
           GError **error)
{
  static const gchar sql[] = "SELECT holder, running FROM unique_claims "
                             "WHERE key = ?1 AND expires_at > ?2";
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);
  gboolean row = FALSE;

  out->holder = NULL;
  out->running = FALSE;
  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, key);
  sqlite3_bind_int64(stmt, 2, now);
  if (!sluice_sqlite__row(c, stmt, &row, "reading a uniqueness claim", error))
    return FALSE;
  if (row) {
    out->holder = g_strdup((const gchar *)sqlite3_column_text(stmt, 0));
    out->running = sqlite3_column_int(stmt, 1) != 0;
    sqlite3_reset(stmt);
  }
  return TRUE;
}

static gboolean
write_claim(SluiceSqliteConn *c, const gchar *key, const gchar *holder,
            gboolean running, gint64 expires_at, GError **error)
{
  static const gchar sql[] =
      "INSERT OR REPLACE INTO unique_claims (key, holder, running, "
      "expires_at) VALUES (?1, ?2, ?3, ?4)";
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, key);
  sluice_sqlite__bind_str(stmt, 2, holder);
  sqlite3_bind_int(stmt, 3, running ? 1 : 0);
  sqlite3_bind_int64(stmt, 4, expires_at);
  return sluice_sqlite__done(c, stmt, "writing a uniqueness claim", error);
}

static gboolean
delete_row(SluiceSqliteConn *c, const gchar *sql, const gchar *arg,
           const gchar *what, GError **error)
{
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, arg);
  return sluice_sqlite__done(c, stmt, what, error);
}

typedef struct {
  SluiceUniqueSubmit *items;
  guint n;
  gint64 now;
} EnqueueJob;

static gboolean
unique_enqueue_one(SluiceSqliteConn *c, SluiceUniqueSubmit *item, gint64 now,
                   gboolean *notify, GError **error)
{
  Claim claim;
  g_autofree gchar *old = NULL;

  if (!read_claim(c, item->key, now, &claim, error))
    return FALSE;
  old = claim.holder;
  if (old != NULL &&
      (!item->replace || claim.running || g_str_equal(old, item->submit.id))) {
    item->existed = TRUE;
    item->holder = g_steal_pointer(&old);
    return TRUE;
  }
  if (!sluice_sqlite__submit(c, &item->submit, now, notify, error))
    return FALSE;
  if (item->submit.existed)
    return TRUE;
  /* Off the schedule if it waits there; one in its queue is skipped by
   * the worker when it starts (the claim names another id). */
  if (old != NULL) {
    if (!delete_row(c, "DELETE FROM schedule WHERE id = ?1", old,
                    "taking a replaced task off the schedule", error))
      return FALSE;
    item->replaced = TRUE;
    item->holder = g_steal_pointer(&old);
  }
  return write_claim(c, item->key, item->submit.id, FALSE,
                     now + item->claim_ttl_ms, error);
}

static gboolean
unique_enqueue_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                    GError **error)
{
  EnqueueJob *job = data;

  for (guint i = 0; i < job->n; i++)
    if (!unique_enqueue_one(c, &job->items[i], job->now, notify, error))
      return FALSE;
  return TRUE;
}

gboolean
sluice_sqlite__unique_enqueue(SluiceBroker *broker, SluiceUniqueSubmit *items,
                              guint n_items, GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  EnqueueJob job = {items, n_items, sluice_sqlite__now(self)};
  gboolean ok =
      sluice_sqlite__run(self, TRUE, unique_enqueue_step, &job, error);

  /* A transaction that was rolled back wrote nothing: forget what it said. */
  if (!ok)
    for (guint i = 0; i < n_items; i++) {
      g_clear_pointer(&items[i].holder, g_free);
      items[i].existed = items[i].replaced = FALSE;
    }
  return ok;
}

typedef struct {
  SluiceUniqueUpdate *items;
  guint n;
  gint64 now;
} UpdateJob;

static gboolean
unique_update_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                   GError **error)
{
  UpdateJob *job = data;

  for (guint i = 0; i < job->n; i++) {
    SluiceUniqueUpdate *item = &job->items[i];
    Claim claim;
    g_autofree gchar *holder = NULL;
    gboolean mine;

    if (!read_claim(c, item->key, job->now, &claim, error))
      return FALSE;
    holder = claim.holder;
    mine = holder != NULL && g_str_equal(holder, item->id);
    item->superseded = holder != NULL && !mine;
    if (item->superseded)
      continue;
    switch (item->action) {
    case SLUICE_UNIQUE_CHECK:
      break;
    case SLUICE_UNIQUE_START:
    case SLUICE_UNIQUE_RELEASE:
      if (mine && !delete_row(c, "DELETE FROM unique_claims WHERE key = ?1",
                              item->key, "ending a uniqueness claim", error))
        return FALSE;
      break;
    case SLUICE_UNIQUE_HOLD:
    case SLUICE_UNIQUE_WAIT:
      if (!write_claim(c, item->key, item->id,
                       item->action == SLUICE_UNIQUE_HOLD,
                       job->now + item->ttl_ms, error))
        return FALSE;
      break;
    case SLUICE_UNIQUE_RENEW:
      if (mine && claim.running &&
          !write_claim(c, item->key, item->id, TRUE, job->now + item->ttl_ms,
                       error))
        return FALSE;
      break;
    }
  }
  return TRUE;
}

gboolean
sluice_sqlite__unique_update(SluiceBroker *broker, SluiceUniqueUpdate *items,
                             guint n_items, GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  UpdateJob job = {items, n_items, sluice_sqlite__now(self)};

  return sluice_sqlite__run(self, TRUE, unique_update_step, &job, error);
}

/* sqlite-queue.c - the SQLite broker's queue slots: enqueue, fetch,
 * settle, and leases (heartbeat, reclaim, leave).
 *
 * A message is one row of `messages` from its enqueue to its
 * acknowledgement: fetching sets its owner and lease, a release clears
 * them (the message keeps its place: it is fetched next), a takeover
 * changes the owner and counts a delivery. Fencing is by owner: a settle
 * whose consumer no longer owns the row changes nothing but the record
 * (STALE while another consumer owns it, GONE once nobody does).
 */
#include "config.h"

#include "brokers/sqlite/sqlite-broker.h"

/* ---- enqueue -------------------------------------------------------------- */

typedef struct {
  SluiceSubmit *items;
  guint n;
  gint64 now;
} EnqueueJob;

static gboolean
enqueue_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
             GError **error)
{
  EnqueueJob *job = data;

  for (guint i = 0; i < job->n; i++)
    if (!sluice_sqlite__submit(c, &job->items[i], job->now, notify, error))
      return FALSE;
  return TRUE;
}

gboolean
sluice_sqlite__enqueue(SluiceBroker *broker, SluiceSubmit *items, guint n_items,
                       GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  EnqueueJob job = {items, n_items, sluice_sqlite__now(self)};

  /* The whole batch is one transaction: stronger than the contract asks,
   * and one commit (one fsync) for the lot. */
  return sluice_sqlite__run(self, TRUE, enqueue_step, &job, error);
}

/* ---- fetch ---------------------------------------------------------------- */

typedef struct {
  const gchar *consumer;
  const gchar *const *queues;
  guint max;
  GPtrArray *out;
  gboolean ready; /* probe_step's answer */
} FetchJob;

static gboolean
take_step(SluiceSqliteConn *c, gpointer data, gboolean *notify, GError **error)
{
  /* The pause is read in the transaction that takes: once set_paused
   * committed, no fetch takes from the queue. */
  static const gchar pick_sql[] =
      "SELECT mid, payload, deliveries FROM messages WHERE queue = ?1 AND "
      "owner IS NULL AND NOT EXISTS (SELECT 1 FROM paused WHERE queue = ?1) "
      "ORDER BY mid LIMIT ?2";
  static const gchar take_sql[] =
      "UPDATE messages SET owner = ?2, touched_at = ?3, deliveries = "
      "deliveries + 1 WHERE mid = ?1";
  FetchJob *job = data;
  gint64 now = sluice_sqlite__real_now();
  guint first = job->out->len;

  for (guint q = 0; job->queues[q] != NULL && job->out->len < job->max; q++) {
    sqlite3_stmt *pick = sluice_sqlite__stmt(c, pick_sql, error);
    g_autoptr(GArray) mids = g_array_new(FALSE, FALSE, sizeof(gint64));
    int rc;

    if (pick == NULL)
      return FALSE;
    sluice_sqlite__bind_str(pick, 1, job->queues[q]);
    sqlite3_bind_int64(pick, 2, job->max - job->out->len);
    while ((rc = sqlite3_step(pick)) == SQLITE_ROW) {
      g_autoptr(GBytes) payload = sluice_sqlite__col_bytes(pick, 1);
      gint64 mid = sqlite3_column_int64(pick, 0);
      g_autofree gchar *handle = g_strdup_printf("%" G_GINT64_FORMAT, mid);

      g_array_append_val(mids, mid);
      g_ptr_array_add(job->out, sluice_delivery_new(
                                    job->queues[q], payload, handle,
                                    (guint)sqlite3_column_int64(pick, 2) + 1));
    }
    sqlite3_reset(pick);
    if (rc != SQLITE_DONE)
      goto fail_rc;
    for (guint i = 0; i < mids->len; i++) {
      sqlite3_stmt *take = sluice_sqlite__stmt(c, take_sql, error);
      if (take == NULL)
        goto fail;
      sqlite3_bind_int64(take, 1, g_array_index(mids, gint64, i));
      sluice_sqlite__bind_str(take, 2, job->consumer);
      sqlite3_bind_int64(take, 3, now);
      if (!sluice_sqlite__done(c, take, "taking a message", error))
        goto fail;
    }
    continue;
  fail_rc:
    sluice_sqlite__fail(c, rc, "fetching", error);
  fail:
    /* Nothing was taken: the caller must not hold what it will not get. */
    g_ptr_array_remove_range(job->out, first, job->out->len - first);
    return FALSE;
  }
  return TRUE;
}

/* Whether any of the queues has a ready message, in a read snapshot: a
 * fetcher woken by a commit that gave it nothing (another queue's message,
 * a record) finds that out without taking the write lock, which every
 * process's writers share. */
static gboolean
probe_step(SluiceSqliteConn *c, gpointer data, gboolean *notify, GError **error)
{
  static const gchar sql[] =
      "SELECT 1 FROM messages WHERE queue = ?1 AND owner IS NULL AND NOT "
      "EXISTS (SELECT 1 FROM paused WHERE queue = ?1) LIMIT 1";
  FetchJob *job = data;

  job->ready = FALSE;
  for (guint q = 0; job->queues[q] != NULL && !job->ready; q++) {
    sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);
    if (stmt == NULL)
      return FALSE;
    sluice_sqlite__bind_str(stmt, 1, job->queues[q]);
    if (!sluice_sqlite__row(c, stmt, &job->ready, "looking for messages",
                            error))
      return FALSE;
    if (job->ready)
      sqlite3_reset(stmt);
  }
  return TRUE;
}

gboolean
sluice_sqlite__fetch(SluiceBroker *broker, const gchar *consumer,
                     const gchar *const *queues, guint max, gint64 block_ms,
                     GPtrArray *out, GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  gint64 deadline = g_get_monotonic_time() + MAX(block_ms, 0) * 1000;
  guint64 wakeups = sluice_sqlite__wakeups(self);
  FetchJob job = {consumer, queues, max, out, FALSE};
  guint before = out->len;
  gboolean first = TRUE;

  for (;;) {
    guint64 gen = sluice_sqlite__wake_gen(self);

    /* The first look takes at once (a busy worker's fetches find work);
     * a woken one probes first. */
    if (!first && !sluice_sqlite__run(self, FALSE, probe_step, &job, error))
      return FALSE;
    if ((first || job.ready) &&
        !sluice_sqlite__run(self, TRUE, take_step, &job, error))
      return FALSE;
    first = FALSE;
    if (out->len > before || block_ms <= 0 ||
        sluice_sqlite__wakeups(self) != wakeups ||
        g_get_monotonic_time() >= deadline)
      return TRUE;
    sluice_sqlite__wait(self, gen, deadline);
    if (sluice_sqlite__wakeups(self) != wakeups)
      return TRUE;
  }
}

/* ---- settle --------------------------------------------------------------- */

typedef struct {
  const gchar *consumer;
  SluiceSettlement *items;
  guint n;
  gint64 now;
  guint dropped;
} SettleJob;

static gboolean
parse_handle(const gchar *handle, gint64 *mid)
{
  guint64 v;

  if (handle == NULL ||
      !g_ascii_string_to_unsigned(handle, 10, 1, G_MAXINT64, &v, NULL))
    return FALSE;
  *mid = (gint64)v;
  return TRUE;
}

static gboolean
settle_one(SluiceSqliteConn *c, SettleJob *job, SluiceSettlement *s,
           gboolean *notify, GError **error)
{
  static const gchar owner_sql[] = "SELECT owner FROM messages WHERE mid = ?1";
  static const gchar delete_sql[] = "DELETE FROM messages WHERE mid = ?1";
  static const gchar release_sql[] =
      "UPDATE messages SET owner = NULL, touched_at = NULL, deliveries = ?2 "
      "WHERE mid = ?1";
  sqlite3_stmt *stmt;
  gboolean row = FALSE;
  gint64 mid = 0;
  g_autofree gchar *owner = NULL;

  if (parse_handle(s->delivery->handle, &mid)) {
    stmt = sluice_sqlite__stmt(c, owner_sql, error);
    if (stmt == NULL)
      return FALSE;
    sqlite3_bind_int64(stmt, 1, mid);
    if (!sluice_sqlite__row(c, stmt, &row, "reading a delivery", error))
      return FALSE;
    if (row) {
      owner = sluice_sqlite__col_str(stmt, 0);
      sqlite3_reset(stmt);
    }
  }
  if (owner == NULL || g_strcmp0(owner, job->consumer) != 0) {
    /* Fenced: nothing but the record (the last to finish wins). */
    s->status = owner != NULL ? SLUICE_SETTLE_STALE : SLUICE_SETTLE_GONE;
    if (s->status == SLUICE_SETTLE_STALE &&
        !sluice_sqlite__add_counter(c, "stale_settles", 1, error))
      return FALSE;
    if (s->record != NULL && s->id != NULL) {
      if (!sluice_sqlite__put_record(c, s->id, s->record, s->record_final,
                                     s->record_ttl_ms, job->now, error))
        return FALSE;
      *notify |= s->record_final;
    }
    return TRUE;
  }

  if (s->action == SLUICE_SETTLE_RELEASE) {
    stmt = sluice_sqlite__stmt(c, release_sql, error);
    if (stmt == NULL)
      return FALSE;
    sqlite3_bind_int64(stmt, 1, mid);
    /* Not a failed delivery: the next fetch reports the same count. */
    sqlite3_bind_int64(stmt, 2,
                       s->delivery->delivery_count > 0
                           ? (gint64)s->delivery->delivery_count - 1
                           : 0);
    if (!sluice_sqlite__done(c, stmt, "releasing a delivery", error))
      return FALSE;
    *notify = TRUE;
  } else {
    stmt = sluice_sqlite__stmt(c, delete_sql, error);
    if (stmt == NULL)
      return FALSE;
    sqlite3_bind_int64(stmt, 1, mid);
    if (!sluice_sqlite__done(c, stmt, "acknowledging a delivery", error))
      return FALSE;
    if (s->action == SLUICE_SETTLE_RETRY &&
        !sluice_sqlite__schedule(c, s->id, s->delivery->queue,
                                 s->reschedule_payload, s->reschedule_at,
                                 error))
      return FALSE;
    if (s->action == SLUICE_SETTLE_DEAD_LETTER &&
        !sluice_sqlite__bury(c, s->dead_letter, &job->dropped, error))
      return FALSE;
  }
  if (s->record != NULL && s->id != NULL) {
    if (!sluice_sqlite__put_record(c, s->id, s->record, s->record_final,
                                   s->record_ttl_ms, job->now, error))
      return FALSE;
    *notify |= s->record_final;
  }
  s->status = SLUICE_SETTLE_DONE;
  return TRUE;
}

static gboolean
settle_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
            GError **error)
{
  SettleJob *job = data;

  job->dropped = 0;
  for (guint i = 0; i < job->n; i++)
    if (!settle_one(c, job, &job->items[i], notify, error))
      return FALSE;
  return TRUE;
}

gboolean
sluice_sqlite__settle(SluiceBroker *broker, const gchar *consumer,
                      SluiceSettlement *items, guint n_items, GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  SettleJob job = {consumer, items, n_items, sluice_sqlite__now(self), 0};

  if (!sluice_sqlite__run(self, TRUE, settle_step, &job, error))
    return FALSE;
  /* The cap doing what it was set to do (a documented way to lose data,
   * counted in the stats): a notice, not a warning, which GLib tests make
   * fatal. */
  if (job.dropped > 0)
    sluice_broker_log(broker, G_LOG_LEVEL_MESSAGE,
                      "the dead-letter queue is full (dead_letter_max %u): "
                      "dropped the %u oldest dead letters for good",
                      self->dead_letter_max, job.dropped);
  return TRUE;
}

/* ---- leases --------------------------------------------------------------- */

typedef struct {
  const gchar *consumer;
  gint64 lease_ms;
  SluiceDelivery *const *held;
  guint n_held;
} HeartbeatJob;

static gboolean
heartbeat_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
               GError **error)
{
  static const gchar alive_sql[] = "INSERT OR REPLACE INTO consumers (name, "
                                   "alive_until) VALUES (?1, ?2)";
  static const gchar renew_sql[] =
      "UPDATE messages SET touched_at = ?3 WHERE mid = ?1 AND owner = ?2";
  HeartbeatJob *job = data;
  gint64 now = sluice_sqlite__real_now();
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, alive_sql, error);

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, job->consumer);
  sqlite3_bind_int64(stmt, 2, now + job->lease_ms);
  if (!sluice_sqlite__done(c, stmt, "renewing the consumer's liveness", error))
    return FALSE;
  for (guint i = 0; i < job->n_held; i++) {
    gint64 mid;
    if (!parse_handle(job->held[i]->handle, &mid))
      continue;
    stmt = sluice_sqlite__stmt(c, renew_sql, error);
    if (stmt == NULL)
      return FALSE;
    sqlite3_bind_int64(stmt, 1, mid);
    sluice_sqlite__bind_str(stmt, 2, job->consumer);
    sqlite3_bind_int64(stmt, 3, now);
    if (!sluice_sqlite__done(c, stmt, "renewing a lease", error))
      return FALSE;
  }
  return TRUE;
}

gboolean
sluice_sqlite__heartbeat(SluiceBroker *broker, const gchar *consumer,
                         gint64 lease_ms, SluiceDelivery *const *held,
                         guint n_held, GError **error)
{
  HeartbeatJob job = {consumer, lease_ms, held, n_held};

  return sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), TRUE, heartbeat_step,
                            &job, error);
}

/* What a takeover may take: held by a consumer that is not alive (no
 * liveness row, or lapsed), or not renewed for @idle_ms. */
static const gchar reclaimable_sql[] =
    "SELECT m.mid, m.payload, m.deliveries FROM messages m LEFT JOIN "
    "consumers c ON c.name = m.owner WHERE m.queue = ?1 AND m.owner IS NOT "
    "NULL AND (c.alive_until IS NULL OR c.alive_until <= ?2 OR m.touched_at "
    "<= ?3) ORDER BY m.mid LIMIT ?4";

typedef struct {
  const gchar *consumer;
  const gchar *const *queues;
  guint max;
  gint64 idle_ms;
  GPtrArray *out; /* NULL: count only */
  guint n;
} ReclaimJob;

static gboolean
reclaim_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
             GError **error)
{
  static const gchar take_sql[] =
      "UPDATE messages SET owner = ?2, touched_at = ?3, deliveries = "
      "deliveries + 1 WHERE mid = ?1";
  ReclaimJob *job = data;
  gint64 now = sluice_sqlite__real_now();
  guint first = job->out != NULL ? job->out->len : 0;

  job->n = 0;
  for (guint q = 0; job->queues[q] != NULL && job->n < job->max; q++) {
    sqlite3_stmt *pick = sluice_sqlite__stmt(c, reclaimable_sql, error);
    g_autoptr(GArray) mids = g_array_new(FALSE, FALSE, sizeof(gint64));
    int rc;

    if (pick == NULL)
      goto fail;
    sluice_sqlite__bind_str(pick, 1, job->queues[q]);
    sqlite3_bind_int64(pick, 2, now);
    sqlite3_bind_int64(pick, 3, now - job->idle_ms);
    sqlite3_bind_int64(pick, 4, job->max - job->n);
    while ((rc = sqlite3_step(pick)) == SQLITE_ROW) {
      gint64 mid = sqlite3_column_int64(pick, 0);

      job->n++;
      if (job->out == NULL)
        continue;
      {
        g_autoptr(GBytes) payload = sluice_sqlite__col_bytes(pick, 1);
        g_autofree gchar *handle = g_strdup_printf("%" G_GINT64_FORMAT, mid);

        g_array_append_val(mids, mid);
        g_ptr_array_add(
            job->out,
            sluice_delivery_new(job->queues[q], payload, handle,
                                (guint)sqlite3_column_int64(pick, 2) + 1));
      }
    }
    sqlite3_reset(pick);
    if (rc != SQLITE_DONE) {
      sluice_sqlite__fail(c, rc, "finding deliveries to reclaim", error);
      goto fail;
    }
    for (guint i = 0; i < mids->len; i++) {
      sqlite3_stmt *take = sluice_sqlite__stmt(c, take_sql, error);
      if (take == NULL)
        goto fail;
      sqlite3_bind_int64(take, 1, g_array_index(mids, gint64, i));
      sluice_sqlite__bind_str(take, 2, job->consumer);
      sqlite3_bind_int64(take, 3, now);
      if (!sluice_sqlite__done(c, take, "taking over a delivery", error))
        goto fail;
    }
  }
  return TRUE;

fail:
  if (job->out != NULL)
    g_ptr_array_remove_range(job->out, first, job->out->len - first);
  return FALSE;
}

gboolean
sluice_sqlite__reclaim(SluiceBroker *broker, const gchar *consumer,
                       const gchar *const *queues, guint max, gint64 idle_ms,
                       GPtrArray *out, GError **error)
{
  ReclaimJob job = {consumer, queues, max, idle_ms, out, 0};

  return sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), TRUE, reclaim_step,
                            &job, error);
}

gboolean
sluice_sqlite__count_reclaimable(SluiceBroker *broker, const gchar *consumer,
                                 const gchar *const *queues, guint max,
                                 gint64 idle_ms, guint *out_n, GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  ReclaimJob job = {consumer, queues, max, idle_ms, NULL, 0};
  SluiceSqliteConn *c = sluice_sqlite__conn_get(self, error);
  gboolean ok;

  if (c == NULL)
    return FALSE;
  /* A read: counting takes nothing, so no write lock. */
  ok = sluice_sqlite__begin_read(c, error) &&
       reclaim_step(c, &job, NULL, error) && sluice_sqlite__commit(c, error);
  sluice_sqlite__conn_put(c);
  if (ok)
    *out_n = job.n;
  return ok;
}

static gboolean
leave_step(SluiceSqliteConn *c, gpointer data, gboolean *notify, GError **error)
{
  static const gchar sql[] = "DELETE FROM consumers WHERE name = ?1";
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, data);
  return sluice_sqlite__done(c, stmt, "dropping the consumer's liveness",
                             error);
}

gboolean
sluice_sqlite__leave(SluiceBroker *broker, const gchar *consumer,
                     GError **error)
{
  return sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), TRUE, leave_step,
                            (gpointer)consumer, error);
}

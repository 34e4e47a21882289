/* redis-partitioned.c - one namespace over N partitions: a composite
 * broker that routes every slot to the Redis brokers of its partitions
 * (see redis-partitions.h).
 *
 * It is a client of the contract only, as SQLite's test_multiplex.c is of
 * its VFS: its parts are SluiceBroker objects called through
 * sluice_broker_*() (so each call gets the dispatch point's checks and
 * fallbacks), asked what they can do with sluice_broker_supports(), and
 * what the contract does not say (the periodic gate, the dead-letter
 * trim) is the SluiceRedisPartitionOps that redis.c hands it. It knows no
 * Redis command, key or script.
 *
 * Routing, slot by slot:
 *
 *   by the task id's partition   enqueue (each item), cancel_scheduled,
 *                                records, lookup_task, reschedule; so
 *                                get_result, cancel, inspect and the
 *                                idempotency claim of a caller's id find
 *                                a task without a lookup
 *   by the listing's partition   remove_queued (list_queued's handle is
 *                                "<k>/<the partition's handle>"),
 *                                replace_payloads (that handle, a
 *                                scheduled task's id, a dead letter's
 *                                "<k>/<stream id>")
 *   by the delivery's partition  settle, heartbeat (each held delivery);
 *                                fetch and reclaim mark each delivery with
 *                                its partition (broker_data, which the
 *                                shared layer leaves unused)
 *   every partition              fetch, reclaim, count_reclaimable,
 *                                promote_due, heartbeat and leave (the
 *                                liveness a reclaim reads is per
 *                                partition), purge, stats, list_queued,
 *                                list_scheduled, dlq_list, check, wakeup
 *   partition 0                  revocations (one insertion order, so the
 *                                workers' sync cursor needs no merging),
 *                                the list of pauses, announcements, the
 *                                periodic gate; a pause is stored in
 *                                every partition, whose fetch reads it
 *
 * Fetch. A sweep takes from every partition without blocking, starting at
 * a partition that rotates from call to call, so no partition starves
 * while another has work. When the sweep finds nothing, the fetch blocks
 * on one partition (rotating too) for at most SWEEP_MS, then sweeps
 * again, until its block_ms is over or `wakeup` is called. Strict priority
 * across queues holds within a partition only, and FIFO too: hence no
 * SLUICE_BROKER_CAP_ORDERED.
 *
 * Periodic claims. A claim is atomic with its enqueue only within one
 * partition, and an occurrence's task goes to its id's partition, so a
 * claim is two steps: a gate in partition 0 (ZADD GT: the newest
 * occurrence claimed, so no scheduler dispatches one older than it), then
 * the claim-and-enqueue of the shared layer in the task's partition,
 * which lets one scheduler only through for each occurrence (the task id
 * of an occurrence is the same for every scheduler, so they meet in one
 * partition). A scheduler that dies between the steps leaves the
 * occurrence to the next scheduler that tries it (the gate lets an equal
 * occurrence through); one that comes only after a newer occurrence is
 * lost, as the contract allows (at most once).
 *
 * Promotion asks the partitions in the order of the next due times they
 * reported last, so that a promotion cut short by its max moves the
 * earliest entries across partitions.
 *
 * Dead letters. Each partition caps its own stream at dead_letter_max,
 * and after a settle that buried something the oldest entries of all
 * partitions are dropped until dead_letter_max remain (trim_dead_letters),
 * so the cap is the namespace's.
 *
 * Listing. list_queued lists partition after partition (cursor
 * "<k>|<cursor of partition k>"). list_scheduled and dlq_list merge the
 * partitions by due time (entry id), ties by partition, so their orders
 * hold across partitions; a dead letter's entry id is "<k>/<stream id>".
 */
#include "config.h"

#include <stdatomic.h>
#include <string.h>

#include "brokers/redis/redis-partitions.h"

/* The longest a fetch blocks on one partition before it looks at the
 * others again: what a task waits at most, on an idle worker, when it
 * lands in a partition the fetch is not blocked on. */
#define SWEEP_MS 100

typedef struct {
  SluiceBroker parent;
  guint n;
  SluiceBroker **parts; /* n plain Redis brokers, owned */
  const SluiceRedisPartitionOps *ops;
  SluiceRedisLayout *layout;
  gchar *ns;             /* for messages */
  guint dead_letter_max; /* for the namespace, all partitions together */
  GMutex trim_lock;
  /* The earliest due time each partition reported at its last promotion
   * (0: none or not asked yet), under next_due_lock: a promotion with a
   * small max goes to the partitions in this order, so the earliest
   * entries across partitions go first. */
  GMutex next_due_lock;
  gint64 *next_due;
  atomic_uint fetch_turn;
  atomic_uint reclaim_turn;
  gint wakeups; /* atomic: `wakeup` calls so far */
} Partitioned;

#define SELF(broker) ((Partitioned *)(broker))

/* The composite's gate: the namespace is split as this client is set up
 * for (redis-layout.c), checked before its first step. */
static gboolean
ready(Partitioned *self, GError **error)
{
  return sluice_redis_layout__ensure(self->layout, error);
}

guint
sluice_redis__partition_of(const gchar *id, guint n)
{
  guint32 h = 2166136261u;

  for (const guchar *p = (const guchar *)id; *p != '\0'; p++) {
    h ^= *p;
    h *= 16777619u;
  }
  return n > 0 ? h % n : 0;
}

static SluiceBroker *
part_of_id(Partitioned *self, const gchar *id)
{
  return self->parts[sluice_redis__partition_of(id, self->n)];
}

/* broker_data of a delivery: its partition + 1. */
static void
mark(GPtrArray *out, guint from, guint k)
{
  for (guint i = from; i < out->len; i++) {
    SluiceDelivery *d = out->pdata[i];
    g_warn_if_fail(d->broker_data == NULL && d->broker_data_free == NULL);
    d->broker_data = GUINT_TO_POINTER(k + 1);
  }
}

static gboolean
part_of_delivery(Partitioned *self, const SluiceDelivery *d, guint *out_k,
                 GError **error)
{
  guint k = GPOINTER_TO_UINT(d->broker_data);

  if (k == 0 || k > self->n) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "a delivery of queue “%s” was not fetched through this "
                "partitioned Redis broker: settle a delivery with the broker "
                "that handed it out",
                d->queue);
    return FALSE;
  }
  *out_k = k - 1;
  return TRUE;
}

/* ---- produce and consume ------------------------------------------------- */

static gboolean
part_enqueue(SluiceBroker *broker, SluiceSubmit *items, guint n_items,
             GError **error)
{
  Partitioned *self = SELF(broker);
  g_autofree guint *of = g_new(guint, MAX(n_items, 1));
  g_autofree SluiceSubmit *batch = g_new(SluiceSubmit, MAX(n_items, 1));
  g_autofree guint *where = g_new(guint, MAX(n_items, 1));

  if (!ready(self, error))
    return FALSE;
  for (guint i = 0; i < n_items; i++)
    of[i] = sluice_redis__partition_of(items[i].id, self->n);
  for (guint k = 0; k < self->n; k++) {
    guint m = 0;

    for (guint i = 0; i < n_items; i++)
      if (of[i] == k) {
        batch[m] = items[i];
        where[m++] = i;
      }
    if (m == 0)
      continue;
    if (!sluice_broker_enqueue(self->parts[k], batch, m, error))
      return FALSE;
    for (guint j = 0; j < m; j++)
      items[where[j]].existed = batch[j].existed;
  }
  return TRUE;
}

/* One sweep: up to @max from every partition, none blocking. */
static gboolean
sweep(Partitioned *self, const gchar *consumer, const gchar *const *queues,
      guint max, guint start, GPtrArray *out, GError **error)
{
  for (guint i = 0; i < self->n && out->len < max; i++) {
    guint k = (start + i) % self->n;
    guint before = out->len;

    if (!sluice_broker_fetch(self->parts[k], consumer, queues, max - out->len,
                             0, out, error))
      return FALSE;
    mark(out, before, k);
  }
  return TRUE;
}

static gboolean
part_fetch(SluiceBroker *broker, const gchar *consumer,
           const gchar *const *queues, guint max, gint64 block_ms,
           GPtrArray *out, GError **error)
{
  Partitioned *self = SELF(broker);
  guint turn = atomic_fetch_add(&self->fetch_turn, 1);
  gint wakeups = g_atomic_int_get(&self->wakeups);
  gint64 deadline = g_get_monotonic_time() + MAX(block_ms, 0) * 1000;
  guint before = out->len;
  GPtrArray *got = g_ptr_array_new();
  gboolean ok = FALSE;

  if (!ready(self, error))
    goto out;
  for (guint round = 0;; round++) {
    gint64 left_ms;
    guint k = (turn + round) % self->n;

    if (!sweep(self, consumer, queues, max, turn + round, got, error))
      goto out;
    if (got->len > 0 || block_ms <= 0 ||
        g_atomic_int_get(&self->wakeups) != wakeups)
      break;
    left_ms = (deadline - g_get_monotonic_time()) / 1000;
    if (left_ms <= 0)
      break;
    if (!sluice_broker_fetch(self->parts[k], consumer, queues, max,
                             MIN(left_ms, SWEEP_MS), got, error))
      goto out;
    mark(got, 0, k);
    if (got->len > 0 || g_atomic_int_get(&self->wakeups) != wakeups)
      break;
  }
  ok = TRUE;
out:
  /* What a failed sweep fetched already is handed out all the same: it is
   * delivered, and only the caller can settle it. */
  for (guint i = 0; i < got->len; i++)
    g_ptr_array_add(out, got->pdata[i]);
  g_ptr_array_free(got, TRUE);
  if (!ok && out->len > before) {
    g_clear_error(error);
    ok = TRUE;
  }
  return ok;
}

/* The dead-letter cap is the namespace's: each partition caps its own
 * queue at dead_letter_max too (so none grows past it between two trims),
 * and after a settle that buried something the oldest entries of all
 * partitions go until dead_letter_max remain. The partition's ops read
 * each partition's oldest entry and drop one as its own cap does (counted
 * by reason). The trim reads every partition, so it costs 2 N round trips
 * per settle that buries, and the cap holds once the trim ran (two
 * settlers that bury at once may both trim: the second finds nothing to
 * do). */
static void stream_id_parts(const gchar *sid, guint64 *ms, guint64 *seq);

static gboolean
trim_dead_letters(Partitioned *self, GError **error)
{
  guint64 dropped = 0;
  gboolean ok = TRUE;

  g_mutex_lock(&self->trim_lock);
  while (ok) {
    gint64 total = 0;
    g_autofree gchar *oldest = NULL;
    guint oldest_k = 0;
    guint64 oldest_ms = G_MAXUINT64, oldest_seq = G_MAXUINT64;
    gboolean gone = FALSE;

    for (guint k = 0; k < self->n && ok; k++) {
      g_autofree gchar *sid = NULL;
      gint64 count = 0;
      guint64 ms, seq;

      ok = self->ops->dlq_oldest(self->parts[k], &count, &sid, error);
      total += count;
      if (!ok || sid == NULL)
        continue;
      stream_id_parts(sid, &ms, &seq);
      if (ms < oldest_ms || (ms == oldest_ms && seq < oldest_seq)) {
        g_free(oldest);
        oldest = g_steal_pointer(&sid);
        oldest_k = k;
        oldest_ms = ms;
        oldest_seq = seq;
      }
    }
    if (!ok || total <= (gint64)self->dead_letter_max || oldest == NULL)
      break;
    ok = self->ops->dlq_drop(self->parts[oldest_k], oldest, &gone, error);
    dropped += ok && gone;
  }
  g_mutex_unlock(&self->trim_lock);
  /* The cap doing what it was set to do (a documented way to lose data,
   * counted in the stats): a notice, not a warning, which GLib tests make
   * fatal. */
  if (dropped > 0)
    sluice_broker_log(&self->parent, G_LOG_LEVEL_MESSAGE,
                      "the dead-letter queue of namespace “%s” is full "
                      "(dead_letter_max %u over %u partitions): dropped the "
                      "%" G_GUINT64_FORMAT " oldest dead letters for good",
                      self->ns, self->dead_letter_max, self->n, dropped);
  return ok;
}

static gboolean
part_settle(SluiceBroker *broker, const gchar *consumer,
            SluiceSettlement *items, guint n_items, GError **error)
{
  Partitioned *self = SELF(broker);
  g_autofree guint *of = g_new(guint, MAX(n_items, 1));
  g_autofree SluiceSettlement *batch = g_new(SluiceSettlement, MAX(n_items, 1));
  g_autofree guint *where = g_new(guint, MAX(n_items, 1));

  for (guint i = 0; i < n_items; i++)
    if (!part_of_delivery(self, items[i].delivery, &of[i], error))
      return FALSE;
  for (guint k = 0; k < self->n; k++) {
    guint m = 0;

    for (guint i = 0; i < n_items; i++)
      if (of[i] == k) {
        batch[m] = items[i];
        where[m++] = i;
      }
    if (m == 0)
      continue;
    if (!sluice_broker_settle(self->parts[k], consumer, batch, m, error))
      return FALSE;
    for (guint j = 0; j < m; j++)
      items[where[j]].status = batch[j].status;
  }
  for (guint i = 0; i < n_items; i++)
    if (items[i].action == SLUICE_SETTLE_DEAD_LETTER &&
        items[i].status == SLUICE_SETTLE_DONE) {
      g_autoptr(GError) local = NULL;

      /* The settlements are carried out, so the trim's failure is not
       * theirs (a FALSE would have them repeated): the next burial trims
       * again. */
      if (!trim_dead_letters(self, &local))
        sluice_broker_log(broker, G_LOG_LEVEL_WARNING,
                          "cannot trim the dead letters to dead_letter_max "
                          "%u: %s; the next burial tries again",
                          self->dead_letter_max, local->message);
      break;
    }
  return TRUE;
}

static gboolean
part_heartbeat(SluiceBroker *broker, const gchar *consumer, gint64 lease_ms,
               SluiceDelivery *const *held, guint n_held, GError **error)
{
  Partitioned *self = SELF(broker);
  g_autofree guint *of = g_new(guint, MAX(n_held, 1));
  g_autofree SluiceDelivery **batch = g_new(SluiceDelivery *, MAX(n_held, 1));

  if (!ready(self, error))
    return FALSE;
  for (guint i = 0; i < n_held; i++)
    if (!part_of_delivery(self, held[i], &of[i], error))
      return FALSE;
  /* Every partition, held deliveries or not: a reclaim in partition k
   * reads the consumer's liveness in partition k. */
  for (guint k = 0; k < self->n; k++) {
    guint m = 0;

    for (guint i = 0; i < n_held; i++)
      if (of[i] == k)
        batch[m++] = held[i];
    if (!sluice_broker_heartbeat(self->parts[k], consumer, lease_ms, batch, m,
                                 error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
part_reclaim(SluiceBroker *broker, const gchar *consumer,
             const gchar *const *queues, guint max, gint64 idle_ms,
             GPtrArray *out, GError **error)
{
  Partitioned *self = SELF(broker);
  guint turn = atomic_fetch_add(&self->reclaim_turn, 1);
  guint taken = 0;

  if (!ready(self, error))
    return FALSE;
  for (guint i = 0; i < self->n && taken < max; i++) {
    guint k = (turn + i) % self->n;
    guint before = out->len;

    if (!sluice_broker_reclaim(self->parts[k], consumer, queues, max - taken,
                               idle_ms, out, error))
      return taken > 0 ? (g_clear_error(error), TRUE) : FALSE;
    mark(out, before, k);
    taken += out->len - before;
  }
  return TRUE;
}

static gboolean
part_count_reclaimable(SluiceBroker *broker, const gchar *consumer,
                       const gchar *const *queues, guint max, gint64 idle_ms,
                       guint *out_n, GError **error)
{
  Partitioned *self = SELF(broker);

  *out_n = 0;
  if (!ready(self, error))
    return FALSE;
  for (guint k = 0; k < self->n && *out_n < max; k++) {
    guint n = 0;

    if (!sluice_broker_count_reclaimable(self->parts[k], consumer, queues,
                                         max - *out_n, idle_ms, &n, error))
      return FALSE;
    *out_n += n;
  }
  return TRUE;
}

static gboolean
part_leave(SluiceBroker *broker, const gchar *consumer, GError **error)
{
  Partitioned *self = SELF(broker);
  GError *first = NULL;

  /* Every partition, even after one failed: the others' liveness goes at
   * once. */
  for (guint k = 0; k < self->n; k++) {
    GError *local = NULL;

    if (!sluice_broker_leave(self->parts[k], consumer, &local)) {
      if (first == NULL)
        first = local;
      else
        g_error_free(local);
    }
  }
  if (first != NULL) {
    g_propagate_error(error, first);
    return FALSE;
  }
  return TRUE;
}

static void
part_wakeup(SluiceBroker *broker)
{
  Partitioned *self = SELF(broker);

  g_atomic_int_inc(&self->wakeups);
  for (guint k = 0; k < self->n; k++)
    sluice_broker_wakeup(self->parts[k]);
}

/* ---- schedule, records, revocations -------------------------------------- */

static gint
next_due_cmp(gconstpointer a, gconstpointer b, gpointer data)
{
  const gint64 *due = data;
  gint64 x = due[*(const guint *)a], y = due[*(const guint *)b];

  /* Unknown (0) first: it may hold anything. */
  return x == y ? 0 : x == 0 ? -1 : y == 0 ? 1 : x < y ? -1 : 1;
}

static gboolean
part_promote_due(SluiceBroker *broker, gint64 now_ms, guint max,
                 guint *out_promoted, gint64 *out_next_due, GError **error)
{
  Partitioned *self = SELF(broker);
  g_autofree guint *order = g_new(guint, self->n);
  g_autofree gint64 *seen = g_new(gint64, self->n);

  *out_promoted = 0;
  *out_next_due = 0;
  if (!ready(self, error))
    return FALSE;
  g_mutex_lock(&self->next_due_lock);
  memcpy(seen, self->next_due, sizeof(gint64) * self->n);
  g_mutex_unlock(&self->next_due_lock);
  for (guint k = 0; k < self->n; k++)
    order[k] = k;
  g_qsort_with_data(order, (gint)self->n, sizeof(guint), next_due_cmp, seen);
  for (guint i = 0; i < self->n; i++) {
    guint k = order[i];
    guint promoted = 0;
    gint64 next = 0;

    /* Once max is reached, a partition is only asked its next due time
     * (a promotion up to time 0 moves nothing). */
    if (!sluice_broker_promote_due(
            self->parts[k], *out_promoted < max ? now_ms : 0,
            *out_promoted < max ? max - *out_promoted : 1, &promoted, &next,
            error))
      return FALSE;
    *out_promoted += promoted;
    if (next > 0 && (*out_next_due == 0 || next < *out_next_due))
      *out_next_due = next;
    g_mutex_lock(&self->next_due_lock);
    self->next_due[k] = next;
    g_mutex_unlock(&self->next_due_lock);
  }
  return TRUE;
}

static gboolean
part_cancel_scheduled(SluiceBroker *broker, const gchar *id, GBytes *record,
                      gint64 record_ttl_ms, gboolean *out_removed,
                      GError **error)
{
  Partitioned *self = SELF(broker);

  return ready(self, error) &&
         sluice_broker_cancel_scheduled(part_of_id(self, id), id, record,
                                        record_ttl_ms, out_removed, error);
}

static gboolean
part_get_record(SluiceBroker *broker, const gchar *id, GBytes **out_record,
                GError **error)
{
  Partitioned *self = SELF(broker);

  return ready(self, error) &&
         sluice_broker_get_record(part_of_id(self, id), id, out_record, error);
}

static gboolean
part_put_record(SluiceBroker *broker, const gchar *id, GBytes *record,
                gboolean final, gint64 ttl_ms, GError **error)
{
  Partitioned *self = SELF(broker);

  return ready(self, error) &&
         sluice_broker_put_record(part_of_id(self, id), id, record, final,
                                  ttl_ms, error);
}

static gboolean
part_put_records(SluiceBroker *broker, const SluiceRecordWrite *items, guint n,
                 GError **error)
{
  Partitioned *self = SELF(broker);
  g_autofree SluiceRecordWrite *batch = g_new(SluiceRecordWrite, MAX(n, 1));

  if (!ready(self, error))
    return FALSE;
  for (guint k = 0; k < self->n; k++) {
    guint m = 0;

    for (guint i = 0; i < n; i++)
      if (sluice_redis__partition_of(items[i].id, self->n) == k)
        batch[m++] = items[i];
    if (m > 0 && !sluice_broker_put_records(self->parts[k], batch, m, error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
part_wait_record(SluiceBroker *broker, const gchar *id, gint64 timeout_ms,
                 GBytes **out_record, GError **error)
{
  Partitioned *self = SELF(broker);

  return ready(self, error) &&
         sluice_broker_wait_record(part_of_id(self, id), id, timeout_ms,
                                   out_record, error);
}

static gboolean
part_revoke(SluiceBroker *broker, const gchar *id, gint64 expires_at,
            GError **error)
{
  Partitioned *self = SELF(broker);

  return ready(self, error) &&
         sluice_broker_revoke(self->parts[0], id, expires_at, error);
}

static gboolean
part_list_revocations(SluiceBroker *broker, gint64 cursor, gint64 now_ms,
                      GPtrArray *out, gint64 *out_cursor, GError **error)
{
  Partitioned *self = SELF(broker);

  *out_cursor = cursor;
  return ready(self, error) &&
         sluice_broker_list_revocations(self->parts[0], out_cursor, now_ms, out,
                                        error);
}

/* ---- periodic tasks ------------------------------------------------------ */

static gboolean
part_claim_periodic(SluiceBroker *broker, const gchar *name,
                    gint64 occurrence_at, SluiceSubmit *item,
                    gboolean *out_claimed, GError **error)
{
  Partitioned *self = SELF(broker);
  gint64 newest = 0;

  *out_claimed = FALSE;
  if (!ready(self, error))
    return FALSE;
  if (!self->ops->periodic_gate(self->parts[0], name, occurrence_at, &newest,
                                error))
    return FALSE;
  if (newest > occurrence_at)
    return TRUE; /* a newer occurrence went through: never an older one */
  return sluice_broker_claim_periodic(part_of_id(self, item->id), name,
                                      occurrence_at, item, out_claimed, error);
}

static gboolean
part_last_periodic(SluiceBroker *broker, const gchar *name, gint64 *out_last,
                   GError **error)
{
  Partitioned *self = SELF(broker);

  return ready(self, error) &&
         self->ops->periodic_gate(self->parts[0], name, 0, out_last, error);
}

/* ---- dead letters -------------------------------------------------------- */

/* "<k>/<stream id>" -> k and the stream id; FALSE when it is not one. */
static gboolean
split_entry_id(Partitioned *self, const gchar *entry_id, guint *out_k,
               const gchar **out_sid)
{
  const gchar *slash = entry_id != NULL ? strchr(entry_id, '/') : NULL;
  g_autofree gchar *digits = NULL;
  guint64 k;

  if (slash == NULL || slash == entry_id)
    return FALSE;
  digits = g_strndup(entry_id, (gsize)(slash - entry_id));
  if (!g_ascii_string_to_unsigned(digits, 10, 0, self->n - 1, &k, NULL))
    return FALSE;
  *out_k = (guint)k;
  *out_sid = slash + 1;
  return TRUE;
}

static void
rename_entry(SluiceDeadLetter *dl, guint k)
{
  gchar *id = g_strdup_printf("%u/%s", k, dl->entry_id);

  g_free(dl->entry_id);
  dl->entry_id = id;
}

/* A stream id's (ms, seq), for the merge. */
static void
stream_id_parts(const gchar *sid, guint64 *ms, guint64 *seq)
{
  gchar *end = NULL;

  *ms = g_ascii_strtoull(sid, &end, 10);
  *seq = end != NULL && *end == '-' ? g_ascii_strtoull(end + 1, NULL, 10) : 0;
}

typedef struct {
  SluiceDeadLetter *dl;
  guint k;
  guint64 ms, seq;
} MergedLetter;

static gint
merged_letter_cmp(gconstpointer a, gconstpointer b)
{
  const MergedLetter *x = a, *y = b;

  if (x->ms != y->ms)
    return x->ms < y->ms ? -1 : 1;
  if (x->seq != y->seq)
    return x->seq < y->seq ? -1 : 1;
  return x->k < y->k ? -1 : x->k > y->k;
}

static gboolean
part_dlq_list(SluiceBroker *broker, const gchar *after, guint limit,
              GPtrArray *out, GError **error)
{
  Partitioned *self = SELF(broker);
  g_autoptr(GArray) merged = g_array_new(FALSE, FALSE, sizeof(MergedLetter));
  const gchar *sid = NULL;
  g_autofree gchar *before_sid = NULL;
  guint after_k = 0;
  gboolean ok = TRUE;

  if (after != NULL) {
    guint64 ms, seq;

    if (!split_entry_id(self, after, &after_k, &sid)) {
      g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                  "“%s” is not a dead-letter entry id of a partitioned "
                  "namespace (they look like 3/1700000000000-0): pass an "
                  "entry_id from a previous listing, or NULL to start from "
                  "the oldest",
                  after);
      return FALSE;
    }
    /* Partitions after @after's list from its stream id on, inclusive
     * (ties are ordered by partition): the id just before it. */
    stream_id_parts(sid, &ms, &seq);
    before_sid =
        seq > 0  ? g_strdup_printf("%" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT,
                                   ms, seq - 1)
        : ms > 0 ? g_strdup_printf("%" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT,
                                   ms - 1, G_MAXUINT64)
                 : NULL;
  }
  if (!ready(self, error))
    return FALSE;
  for (guint k = 0; k < self->n && ok; k++) {
    g_autoptr(GPtrArray) got =
        g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);
    const gchar *from = after == NULL ? NULL : k <= after_k ? sid : before_sid;

    ok = sluice_broker_dlq_list(self->parts[k], from, limit, got, error);
    for (guint i = 0; ok && i < got->len; i++) {
      MergedLetter m = {got->pdata[i], k, 0, 0};

      got->pdata[i] = NULL;
      stream_id_parts(m.dl->entry_id, &m.ms, &m.seq);
      g_array_append_val(merged, m);
    }
  }
  g_array_sort(merged, merged_letter_cmp);
  for (guint i = 0; i < merged->len; i++) {
    MergedLetter *m = &g_array_index(merged, MergedLetter, i);

    if (ok && i < limit) {
      rename_entry(m->dl, m->k);
      g_ptr_array_add(out, m->dl);
    } else {
      sluice_dead_letter_free(m->dl);
    }
  }
  return ok;
}

static gboolean
part_dlq_get(SluiceBroker *broker, const gchar *entry_id,
             SluiceDeadLetter **out_entry, GError **error)
{
  Partitioned *self = SELF(broker);
  const gchar *sid;
  guint k;

  if (!ready(self, error))
    return FALSE;
  if (!split_entry_id(self, entry_id, &k, &sid)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_NOT_FOUND,
                "no dead letter “%s”: the entries of a partitioned namespace "
                "look like 3/1700000000000-0",
                entry_id);
    return FALSE;
  }
  if (!sluice_broker_dlq_get(self->parts[k], sid, out_entry, error))
    return FALSE;
  rename_entry(*out_entry, k);
  return TRUE;
}

static gboolean
part_dlq_replay(SluiceBroker *broker, const gchar *entry_id, SluiceSubmit *item,
                gboolean *out_found, GError **error)
{
  Partitioned *self = SELF(broker);
  const gchar *sid;
  guint k;

  *out_found = FALSE;
  if (!ready(self, error))
    return FALSE;
  if (!split_entry_id(self, entry_id, &k, &sid))
    return TRUE;
  /* The entry is in its task's partition (it was settled there), so the
   * replay and the delete are one step there. */
  return sluice_broker_dlq_replay(self->parts[k], sid, item, out_found, error);
}

static gboolean
part_dlq_delete(SluiceBroker *broker, const gchar *entry_id,
                gboolean *out_found, GError **error)
{
  Partitioned *self = SELF(broker);
  const gchar *sid;
  guint k;

  *out_found = FALSE;
  if (!ready(self, error))
    return FALSE;
  if (!split_entry_id(self, entry_id, &k, &sid))
    return TRUE;
  return sluice_broker_dlq_delete(self->parts[k], sid, out_found, error);
}

/* ---- admin --------------------------------------------------------------- */

static void
add_counts(GHashTable *to, GHashTable *from)
{
  GHashTableIter iter;
  gpointer key, value;

  g_hash_table_iter_init(&iter, from);
  while (g_hash_table_iter_next(&iter, &key, &value)) {
    gint64 *sum = g_hash_table_lookup(to, key);

    if (sum != NULL)
      *sum += *(gint64 *)value;
    else
      g_hash_table_insert(to, g_strdup(key), g_memdup2(value, sizeof(gint64)));
  }
}

static gboolean
part_stats(SluiceBroker *broker, const gchar *const *queues,
           SluiceBrokerStats *out, GError **error)
{
  Partitioned *self = SELF(broker);
  g_autoptr(GHashTable) ready_of =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  g_autoptr(GPtrArray) names = g_ptr_array_new();

  if (!ready(self, error))
    return FALSE;
  out->in_flight = 0;
  out->stale_settles = 0;
  out->dead_letters_dropped = 0;
  for (guint k = 0; k < self->n; k++) {
    SluiceBrokerStats s;

    sluice_broker_stats_init(&s);
    if (!sluice_broker_stats(self->parts[k], queues, &s, error)) {
      sluice_broker_stats_clear(&s);
      return FALSE;
    }
    for (guint i = 0; i < s.queues->len; i++) {
      SluiceQueueStats *q = s.queues->pdata[i];
      gint64 *sum = g_hash_table_lookup(ready_of, q->name);

      if (sum == NULL) {
        gchar *name = g_strdup(q->name);
        sum = g_new0(gint64, 1);
        g_hash_table_insert(ready_of, name, sum);
        g_ptr_array_add(names, name);
      }
      *sum += q->ready;
    }
    out->scheduled += s.scheduled;
    out->in_flight = out->in_flight < 0 || s.in_flight < 0
                         ? -1
                         : out->in_flight + s.in_flight;
    out->dead_letters += s.dead_letters;
    add_counts(out->dead_letters_by_reason, s.dead_letters_by_reason);
    out->stale_settles = out->stale_settles < 0 || s.stale_settles < 0
                             ? -1
                             : out->stale_settles + s.stale_settles;
    out->dead_letters_dropped =
        out->dead_letters_dropped < 0 || s.dead_letters_dropped < 0
            ? -1
            : out->dead_letters_dropped + s.dead_letters_dropped;
    add_counts(out->dead_letters_dropped_by_reason,
               s.dead_letters_dropped_by_reason);
    if (k == 0) {
      /* Every worker heartbeats and announces itself in partition 0. */
      GPtrArray *workers = out->workers;
      out->workers = s.workers;
      s.workers = workers;
    }
    sluice_broker_stats_clear(&s);
  }
  for (guint i = 0; i < names->len; i++)
    sluice_broker_stats_add_queue(
        out, names->pdata[i],
        *(gint64 *)g_hash_table_lookup(ready_of, names->pdata[i]));
  return TRUE;
}

static gboolean
part_purge(SluiceBroker *broker, const gchar *queue, guint64 *out_removed,
           GError **error)
{
  Partitioned *self = SELF(broker);

  *out_removed = 0;
  if (!ready(self, error))
    return FALSE;
  for (guint k = 0; k < self->n; k++) {
    guint64 removed = 0;

    if (!sluice_broker_purge(self->parts[k], queue, &removed, error))
      return FALSE;
    *out_removed += removed;
  }
  return TRUE;
}

static gboolean
part_check(SluiceBroker *broker, GError **error)
{
  Partitioned *self = SELF(broker);

  if (!ready(self, error))
    return FALSE;
  for (guint k = 0; k < self->n; k++)
    if (!sluice_broker_check(self->parts[k], error))
      return FALSE;
  return TRUE;
}

static gboolean
part_lookup_task(SluiceBroker *broker, const gchar *id, SluiceTaskLocation *out,
                 GError **error)
{
  Partitioned *self = SELF(broker);
  guint k = sluice_redis__partition_of(id, self->n);

  if (!ready(self, error) ||
      !sluice_broker_lookup_task(self->parts[k], id, out, error))
    return FALSE;
  if (out->dead_letter != NULL && out->dead_letter->entry_id != NULL)
    rename_entry(out->dead_letter, k);
  return TRUE;
}

static gboolean
part_announce(SluiceBroker *broker, const gchar *consumer, GBytes *info,
              gint64 ttl_ms, GError **error)
{
  Partitioned *self = SELF(broker);

  return ready(self, error) &&
         sluice_broker_announce(self->parts[0], consumer, info, ttl_ms, error);
}

/* list_queued's cursor: "<k>|<cursor of partition k, or nothing>". */
static gboolean
part_list_queued(SluiceBroker *broker, const gchar *queue, const gchar *cursor,
                 guint limit, GPtrArray *out, gchar **out_cursor,
                 GError **error)
{
  Partitioned *self = SELF(broker);
  g_autofree gchar *inner = NULL;
  guint64 k = 0;
  guint listed = 0;

  *out_cursor = NULL;
  if (cursor != NULL) {
    const gchar *bar = strchr(cursor, '|');
    g_autofree gchar *digits =
        bar != NULL ? g_strndup(cursor, (gsize)(bar - cursor)) : NULL;

    if (digits == NULL ||
        !g_ascii_string_to_unsigned(digits, 10, 0, self->n - 1, &k, NULL)) {
      g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                  "“%s” is not a cursor of a queue listing of a partitioned "
                  "namespace: pass the cursor a previous page returned, or "
                  "none to start at the beginning",
                  cursor);
      return FALSE;
    }
    inner = bar[1] != '\0' ? g_strdup(bar + 1) : NULL;
  }
  if (!ready(self, error))
    return FALSE;
  for (; k < self->n && listed < limit; k++) {
    gchar *next = NULL;
    guint before = out->len;

    if (!sluice_broker_list_queued(self->parts[k], queue, inner, limit - listed,
                                   out, &next, error))
      return FALSE;
    /* The handle says the partition: "<k>/<the partition's handle>". */
    for (guint i = before; i < out->len; i++) {
      SluiceListedMessage *m = out->pdata[i];
      g_autofree gchar *handle = g_strdup_printf(
          "%u/%s", (guint)k, m->handle != NULL ? m->handle : "");
      sluice_listed_message_set_handle(m, handle);
    }
    listed += out->len - before;
    g_clear_pointer(&inner, g_free);
    if (next != NULL) {
      *out_cursor = g_strdup_printf("%u|%s", (guint)k, next);
      g_free(next);
      return TRUE;
    }
  }
  if (k < self->n)
    *out_cursor = g_strdup_printf("%u|", (guint)k);
  return TRUE;
}

/* Each item goes to the partition its handle names (list_queued's
 * "<k>/<handle>"), else to its task id's; one script per partition. */
static gboolean
part_remove_queued(SluiceBroker *broker, SluiceRemoval *items, guint n_items,
                   GError **error)
{
  Partitioned *self = SELF(broker);
  g_autofree guint *part = g_new(guint, n_items);
  g_autofree SluiceRemoval *inner = g_new(SluiceRemoval, n_items);
  g_autofree guint *index = g_new(guint, n_items);
  g_autoptr(GPtrArray) handles = g_ptr_array_new_with_free_func(g_free);

  if (!ready(self, error))
    return FALSE;
  for (guint i = 0; i < n_items; i++) {
    const gchar *h = items[i].handle;
    const gchar *slash = h != NULL ? strchr(h, '/') : NULL;
    g_autofree gchar *digits =
        slash != NULL ? g_strndup(h, (gsize)(slash - h)) : NULL;
    guint64 k = self->n;

    if (digits == NULL ||
        !g_ascii_string_to_unsigned(digits, 10, 0, self->n - 1, &k, NULL))
      k = items[i].id != NULL ? sluice_redis__partition_of(items[i].id, self->n)
                              : self->n;
    part[i] = (guint)k;
    g_ptr_array_add(handles, slash != NULL && slash[1] != '\0'
                                 ? g_strdup(slash + 1)
                                 : NULL);
  }
  for (guint k = 0; k < self->n; k++) {
    guint n = 0;

    for (guint i = 0; i < n_items; i++)
      if (part[i] == k) {
        inner[n] = items[i];
        inner[n].handle = handles->pdata[i];
        index[n++] = i;
      }
    if (n == 0)
      continue;
    if (!sluice_broker_remove_queued(self->parts[k], inner, n, error))
      return FALSE;
    for (guint j = 0; j < n; j++)
      items[index[j]].removed = inner[j].removed;
  }
  return TRUE;
}

/* The partition of a replace_payloads item, with the handle its partition
 * knows it by: a queued message's from its listing's "<k>/<handle>", a
 * scheduled one's from its task id (where every step about it goes), a dead
 * letter's from its "<k>/<stream id>". PART_ANY: a queued message named by
 * its bytes alone (no handle of this broker's): any partition may hold it.
 * PART_NONE: a dead letter's id of no partition, so no dead letter. */
#define PART_ANY G_MAXUINT
#define PART_NONE (G_MAXUINT - 1)

static guint
replacement_part(Partitioned *self, const SluiceReplacement *r,
                 gchar **out_handle)
{
  const gchar *h = r->handle;
  const gchar *slash = h != NULL ? strchr(h, '/') : NULL;
  g_autofree gchar *digits = NULL;
  const gchar *sid = NULL;
  guint64 k;
  guint dk;

  *out_handle = NULL;
  switch (r->place) {
  case SLUICE_WAITING_QUEUED:
    digits = slash != NULL ? g_strndup(h, (gsize)(slash - h)) : NULL;
    if (digits == NULL ||
        !g_ascii_string_to_unsigned(digits, 10, 0, self->n - 1, &k, NULL))
      return PART_ANY;
    *out_handle = slash[1] != '\0' ? g_strdup(slash + 1) : NULL;
    return (guint)k;
  case SLUICE_WAITING_SCHEDULED:
    *out_handle = g_strdup(h);
    return sluice_redis__partition_of(h, self->n);
  case SLUICE_WAITING_DEAD:
    if (!split_entry_id(self, h, &dk, &sid))
      return PART_NONE;
    *out_handle = g_strdup(sid);
    return dk;
  default:
    return PART_NONE;
  }
}

/* The items of partition @k (or, with @k PART_ANY, those of PART_ANY not
 * replaced yet, tried in @in) in one call of that partition's: one script
 * there. */
static gboolean
replace_in(SluiceBroker *in, guint k, SluiceReplacement *items, guint n_items,
           const guint *part, GPtrArray *handles, SluiceReplacement *inner,
           guint *index, GError **error)
{
  guint n = 0;

  for (guint i = 0; i < n_items; i++)
    if (part[i] == k && !items[i].replaced) {
      inner[n] = items[i];
      inner[n].handle = handles->pdata[i];
      index[n++] = i;
    }
  if (n == 0)
    return TRUE;
  if (!sluice_broker_replace_payloads(in, inner, n, error))
    return FALSE;
  for (guint j = 0; j < n; j++)
    items[index[j]].replaced = inner[j].replaced;
  return TRUE;
}

/* Each item goes to the partition that holds its message
 * (replacement_part()); one script per partition. A queued message named
 * by its bytes alone is looked for in one partition after another until
 * one replaced it: a task's copies are all in its id's partition. A dead
 * letter's replacement changes its stream id, hence its "<k>/<stream id>",
 * never its partition. */
static gboolean
part_replace_payloads(SluiceBroker *broker, SluiceReplacement *items,
                      guint n_items, GError **error)
{
  Partitioned *self = SELF(broker);
  g_autofree guint *part = g_new(guint, n_items);
  g_autofree SluiceReplacement *inner = g_new(SluiceReplacement, n_items);
  g_autofree guint *index = g_new(guint, n_items);
  g_autoptr(GPtrArray) handles = g_ptr_array_new_with_free_func(g_free);

  if (!ready(self, error))
    return FALSE;
  for (guint i = 0; i < n_items; i++) {
    gchar *handle = NULL;

    part[i] = replacement_part(self, &items[i], &handle);
    g_ptr_array_add(handles, handle);
  }
  for (guint k = 0; k < self->n; k++)
    if (!replace_in(self->parts[k], k, items, n_items, part, handles, inner,
                    index, error))
      return FALSE;
  for (guint k = 0; k < self->n; k++)
    if (!replace_in(self->parts[k], PART_ANY, items, n_items, part, handles,
                    inner, index, error))
      return FALSE;
  return TRUE;
}

/* list_scheduled's cursor: "<due>:<k>:<id>", the last entry listed.
 * Across partitions the order is (due, partition, the partition's own
 * order at one due time). Partition k resumes after the entry itself;
 * those before k after every entry due then; those after k at its due
 * time. A partition's cursor at an id it does not hold resumes at the
 * cursor's due time (lua/list_scheduled.lua), hence NOT_AN_ID: not
 * UTF-8, so never a task id. */
#define NOT_AN_ID "\xff"

typedef struct {
  SluiceListedMessage *m;
  guint k;
  guint rank;
} MergedEntry;

static gint
merged_entry_cmp(gconstpointer a, gconstpointer b)
{
  const MergedEntry *x = a, *y = b;

  if (x->m->due_at != y->m->due_at)
    return x->m->due_at < y->m->due_at ? -1 : 1;
  if (x->k != y->k)
    return x->k < y->k ? -1 : 1;
  return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static gboolean
part_list_scheduled(SluiceBroker *broker, const gchar *cursor, guint limit,
                    GPtrArray *out, gchar **out_cursor, GError **error)
{
  Partitioned *self = SELF(broker);
  g_autoptr(GArray) merged = g_array_new(FALSE, FALSE, sizeof(MergedEntry));
  gint64 due = 0;
  guint64 ck = 0;
  const gchar *cid = NULL;
  gboolean more = FALSE, ok = TRUE;

  *out_cursor = NULL;
  if (cursor != NULL) {
    g_auto(GStrv) parts = g_strsplit(cursor, ":", 3);

    if (g_strv_length(parts) != 3 ||
        !g_ascii_string_to_signed(parts[0], 10, 0, G_MAXINT64, &due, NULL) ||
        !g_ascii_string_to_unsigned(parts[1], 10, 0, self->n - 1, &ck, NULL) ||
        parts[2][0] == '\0') {
      g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                  "“%s” is not a cursor of a schedule listing: pass the "
                  "cursor a previous page returned, or none to start at the "
                  "earliest",
                  cursor);
      return FALSE;
    }
    cid = strchr(strchr(cursor, ':') + 1, ':') + 1;
  }
  if (!ready(self, error))
    return FALSE;
  for (guint k = 0; k < self->n && ok; k++) {
    g_autoptr(GPtrArray) got = g_ptr_array_new_with_free_func(
        (GDestroyNotify)sluice_listed_message_free);
    g_autofree gchar *from = NULL;
    gchar *next = NULL;

    if (cursor != NULL)
      from = k == ck ? g_strdup_printf("%" G_GINT64_FORMAT ":%s", due, cid)
             : k < ck
                 ? g_strdup_printf("%" G_GINT64_FORMAT ":" NOT_AN_ID, due + 1)
                 : g_strdup_printf("%" G_GINT64_FORMAT ":" NOT_AN_ID, due);
    ok = sluice_broker_list_scheduled(self->parts[k], from, limit, got, &next,
                                      error);
    more = more || next != NULL;
    g_free(next);
    for (guint i = 0; ok && i < got->len; i++) {
      MergedEntry e = {got->pdata[i], k, i};
      got->pdata[i] = NULL;
      g_array_append_val(merged, e);
    }
  }
  g_array_sort(merged, merged_entry_cmp);
  for (guint i = 0; i < merged->len; i++) {
    MergedEntry *e = &g_array_index(merged, MergedEntry, i);

    if (ok && i < limit) {
      g_ptr_array_add(out, e->m);
      if (i + 1 == limit && (more || merged->len > limit))
        *out_cursor = g_strdup_printf("%" G_GINT64_FORMAT ":%u:%s",
                                      e->m->due_at, e->k, e->m->id);
    } else {
      sluice_listed_message_free(e->m);
    }
  }
  return ok;
}

/* A pause is stored in every partition, since each partition's fetch
 * reads its own in the step that takes; partition 0's is the one listed.
 * Paused in 0 last and resumed there first, so a pause that failed half
 * way is not listed, nor a resume that failed half way missed. */
static gboolean
part_set_paused(SluiceBroker *broker, const gchar *queue, gboolean paused,
                GError **error)
{
  Partitioned *self = SELF(broker);

  if (!ready(self, error))
    return FALSE;
  for (guint i = 0; i < self->n; i++) {
    guint k = paused ? self->n - 1 - i : i;
    if (!sluice_broker_set_paused(self->parts[k], queue, paused, error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
part_list_paused(SluiceBroker *broker, GPtrArray *out, GError **error)
{
  Partitioned *self = SELF(broker);

  return ready(self, error) &&
         sluice_broker_list_paused(self->parts[0], out, error);
}

/* ---- rates, events and progress (see the class below) ------------------- */

static gboolean
part_rate_acquire(SluiceBroker *broker, SluiceRateAcquire *items, guint n_items,
                  GError **error)
{
  Partitioned *self = SELF(broker);

  return ready(self, error) &&
         sluice_broker_rate_acquire(self->parts[0], items, n_items, error);
}

static gboolean
part_put_progress(SluiceBroker *broker, const gchar *id, GBytes *progress,
                  gint64 ttl_ms, GError **error)
{
  Partitioned *self = SELF(broker);

  return ready(self, error) &&
         sluice_broker_put_progress(part_of_id(self, id), id, progress, ttl_ms,
                                    error);
}

static gboolean
part_get_progress(SluiceBroker *broker, const gchar *id, GBytes **out_progress,
                  GError **error)
{
  Partitioned *self = SELF(broker);

  return ready(self, error) &&
         sluice_broker_get_progress(part_of_id(self, id), id, out_progress,
                                    error);
}

static gboolean
part_append_events(SluiceBroker *broker, GBytes *const *events, guint n,
                   guint max_len, gint64 max_age_ms, gint64 now_ms,
                   GError **error)
{
  Partitioned *self = SELF(broker);

  return ready(self, error) &&
         sluice_broker_append_events(self->parts[0], events, n, max_len,
                                     max_age_ms, now_ms, error);
}

static gboolean
part_read_events(SluiceBroker *broker, const gchar *cursor, guint limit,
                 gint64 block_ms, GPtrArray *out, gchar **out_cursor,
                 GError **error)
{
  Partitioned *self = SELF(broker);

  return ready(self, error) &&
         sluice_broker_read_events(self->parts[0], cursor, limit, block_ms, out,
                                   out_cursor, error);
}

static gboolean
part_reschedule(SluiceBroker *broker, const gchar *id, gint64 due_at,
                gboolean *out_found, GError **error)
{
  Partitioned *self = SELF(broker);

  return ready(self, error) &&
         sluice_broker_reschedule(part_of_id(self, id), id, due_at, out_found,
                                  error);
}

/* ---- lifecycle ----------------------------------------------------------- */

static void
part_close(SluiceBroker *broker)
{
  (void)broker; /* each partition closes when its last reference goes */
}

static void
part_finalize(SluiceBroker *broker)
{
  Partitioned *self = SELF(broker);

  for (guint k = 0; self->parts != NULL && k < self->n; k++)
    g_clear_pointer(&self->parts[k], sluice_broker_unref);
  g_clear_pointer(&self->parts, g_free);
  g_clear_pointer(&self->layout, sluice_redis_layout__free);
  g_clear_pointer(&self->ns, g_free);
  if (self->next_due != NULL) {
    g_mutex_clear(&self->trim_lock);
    g_mutex_clear(&self->next_due_lock);
    g_free(self->next_due);
  }
}

/* ---- the class ----------------------------------------------------------- */

/* The families a namespace of partitions keeps. Rate-limit buckets and the
 * event stream are the namespace's, so they live in partition 0 (one
 * bucket is one key: its step stays atomic); a task's progress lives in
 * its id's partition. Joins (workflows), concurrency slots and uniqueness
 * claims are left out (their tables NULL: UNSUPPORTED): a join's step
 * submits tasks of every partition at once, a slot's release wakes a
 * waiter that may be on another partition's schedule, and a claim's key
 * and its task may fall in two partitions, none of which one script can
 * do. */
static const SluiceBrokerSteering part_steering = {
    .version = SLUICE_BROKER_STEERING_VERSION,
    .list_queued = part_list_queued,
    .remove_queued = part_remove_queued,
    .list_scheduled = part_list_scheduled,
    .set_paused = part_set_paused,
    .list_paused = part_list_paused,
    .reschedule = part_reschedule,
    .purge = part_purge,
    .replace_payloads = part_replace_payloads,
};

static const SluiceBrokerPeriodic part_periodic = {
    .version = SLUICE_BROKER_PERIODIC_VERSION,
    .claim_periodic = part_claim_periodic,
    .last_periodic = part_last_periodic,
};

static const SluiceBrokerEvents part_events = {
    .version = SLUICE_BROKER_EVENTS_VERSION,
    .append_events = part_append_events,
    .read_events = part_read_events,
    .put_progress = part_put_progress,
    .get_progress = part_get_progress,
};

static const SluiceBrokerRates part_rates = {
    .version = SLUICE_BROKER_RATES_VERSION,
    .rate_acquire = part_rate_acquire,
};

/* The capabilities a composite keeps of its parts: all but ORDERED (a
 * fetch sweeps partitions, so priority and FIFO hold within one only). */
static const struct {
  SluiceBrokerFeature feature;
  guint64 cap;
} kept_caps[] = {
    {SLUICE_BROKER_FEATURE_SHARED, SLUICE_BROKER_CAP_SHARED},
    {SLUICE_BROKER_FEATURE_DURABLE, SLUICE_BROKER_CAP_DURABLE},
    {SLUICE_BROKER_FEATURE_LEASES, SLUICE_BROKER_CAP_LEASES},
    {SLUICE_BROKER_FEATURE_FENCING, SLUICE_BROKER_CAP_FENCING},
    {SLUICE_BROKER_FEATURE_CLOCK_TTL, SLUICE_BROKER_CAP_CLOCK_TTL},
    {SLUICE_BROKER_FEATURE_IN_FLIGHT, SLUICE_BROKER_CAP_IN_FLIGHT},
};

static void
part_class_init(SluiceBrokerClass *klass, SluiceBroker *first)
{
  memset(klass, 0, sizeof *klass);
  klass->version = SLUICE_BROKER_CLASS_VERSION;
  klass->name = sluice_broker_get_name(first);
  klass->instance_size = sizeof(Partitioned);
  for (gsize i = 0; i < G_N_ELEMENTS(kept_caps); i++)
    if (sluice_broker_supports(first, kept_caps[i].feature))
      klass->caps |= kept_caps[i].cap;
  /* produce */
  klass->enqueue = part_enqueue;
  /* consume */
  klass->fetch = part_fetch;
  klass->settle = part_settle;
  klass->heartbeat = part_heartbeat;
  if (sluice_broker_supports(first, SLUICE_BROKER_FEATURE_LEASES))
    klass->reclaim = part_reclaim;
  if (sluice_broker_supports(first, SLUICE_BROKER_FEATURE_COUNT_RECLAIMABLE))
    klass->count_reclaimable = part_count_reclaimable;
  klass->leave = part_leave;
  klass->wakeup = part_wakeup;
  /* schedule */
  klass->promote_due = part_promote_due;
  klass->cancel_scheduled = part_cancel_scheduled;
  /* records */
  klass->get_record = part_get_record;
  klass->put_record = part_put_record;
  klass->put_records = part_put_records;
  klass->wait_record = part_wait_record;
  klass->lookup_task = part_lookup_task;
  /* revocations */
  klass->revoke = part_revoke;
  klass->list_revocations = part_list_revocations;
  /* dead letters */
  klass->dlq_list = part_dlq_list;
  klass->dlq_get = part_dlq_get;
  klass->dlq_replay = part_dlq_replay;
  klass->dlq_delete = part_dlq_delete;
  /* stats and workers */
  klass->stats = part_stats;
  klass->announce = part_announce;
  klass->check = part_check;
  /* lifecycle */
  klass->close = part_close;
  klass->finalize = part_finalize;
  /* optional families */
  klass->steering = &part_steering;
  klass->periodic = &part_periodic;
  klass->events = &part_events;
  klass->rates = &part_rates;
}

/* One class per kind of part (a Redis mode: fast, or reliable with
 * leases), built once and kept for the process, so that
 * sluice_broker_is_a() recognises a partitioned broker by its class. */
#define N_KINDS 2
static SluiceBrokerClass part_classes[N_KINDS];
static gsize part_classes_built[N_KINDS];

static guint
kind_of(SluiceBroker *first)
{
  return sluice_broker_supports(first, SLUICE_BROKER_FEATURE_LEASES) ? 1 : 0;
}

gboolean
sluice_redis__is_partitioned(SluiceBroker *broker)
{
  for (guint i = 0; i < N_KINDS; i++)
    if (sluice_broker_is_a(broker, &part_classes[i]))
      return TRUE;
  return FALSE;
}

guint
sluice_redis__partition_count(SluiceBroker *broker)
{
  return sluice_redis__is_partitioned(broker) ? SELF(broker)->n : 1;
}

SluiceBroker *
sluice_redis__partition_at(SluiceBroker *broker, guint index)
{
  g_return_val_if_fail(sluice_redis__is_partitioned(broker), NULL);
  g_return_val_if_fail(index < SELF(broker)->n, NULL);
  return SELF(broker)->parts[index];
}

SluiceBroker *
sluice_redis__partitioned_new(SluiceBroker **parts, guint n,
                              const SluiceRedisPartitionOps *ops,
                              SluiceRedisLayout *layout, const gchar *ns,
                              guint dead_letter_max, SluiceClock *clock,
                              GError **error)
{
  SluiceBroker *broker = NULL;
  Partitioned *self;
  guint kind;

  g_return_val_if_fail(n >= 2 && n <= SLUICE_REDIS_MAX_PARTITIONS, NULL);
  g_return_val_if_fail(parts != NULL && ops != NULL && layout != NULL, NULL);
  kind = kind_of(parts[0]);
  if (g_once_init_enter(&part_classes_built[kind])) {
    part_class_init(&part_classes[kind], parts[0]);
    g_once_init_leave(&part_classes_built[kind], 1);
  }
  broker = sluice_broker_new(&part_classes[kind], clock, error);
  if (broker == NULL) {
    for (guint k = 0; k < n; k++)
      sluice_broker_unref(parts[k]);
    g_free(parts);
    sluice_redis_layout__free(layout);
    return NULL;
  }
  self = SELF(broker);
  self->n = n;
  self->parts = parts;
  self->ops = ops;
  self->layout = layout;
  self->ns = g_strdup(ns);
  self->dead_letter_max = dead_letter_max;
  g_mutex_init(&self->trim_lock);
  g_mutex_init(&self->next_due_lock);
  self->next_due = g_new0(gint64, n);
  return broker;
}

/* trace-broker.c - how to write a broker, by example.
 *
 * OVERVIEW
 *
 * This broker stores nothing itself: it wraps another broker and forwards
 * every operation to it, logging each call (slot, duration, outcome) at
 * debug level and counting calls per slot. Wrap a production broker in it
 * to see what a worker asks of its store; wrap a broker you are writing to
 * watch the conformance suite drive it. It is small enough to read in one
 * sitting and shows every part of the contract in <sluice/sys/broker.h>:
 *
 *   1. The instance struct embeds SluiceBroker first; the core allocates
 *      instance_size bytes, zero-filled, and owns the reference count.
 *   2. A SluiceBrokerClass lists the slots by topic, and one const table
 *      per optional family (steering, periodic, joins, events, rates,
 *      slots, unique) points at that family's slots. The core copies them
 *      and validates them in sluice_broker_new(): a missing required slot,
 *      or a table with a NULL slot, is an error naming the slot.
 *   3. Each slot returns FALSE exactly when it sets its GError.
 *   4. Optional slots and tables may be left NULL; the core then applies
 *      the fallback each documents. Here every slot forwards to the inner
 *      broker's dispatch function (sluice_broker_<slot>), which applies
 *      the inner broker's own fallbacks; the tables and the optional slots
 *      a user can see (lookup_task, announce, count_reclaimable) are set
 *      only when the inner broker has them, as sluice_broker_supports()
 *      says, so the trace broker supports exactly what its inner one
 *      does. It never reads the inner broker's class.
 *   5. finalize frees the broker's own state; it may run on a half-built
 *      instance, so it checks what it frees.
 *
 * What it omits: it adds no durability or capability of its own; its
 * capabilities are the inner broker's, and so are its atomicity guarantees.
 *
 * It is tested the way any broker is: tests/conformance/ runs against
 * trace(memory) in test-trace-broker.c.
 */
#include "trace-broker.h"

typedef struct {
  SluiceBroker parent; /* must be first */
  SluiceBroker *inner;
  GMutex lock;       /* guards calls */
  GHashTable *calls; /* static slot name -> count */
} TraceBroker;

static TraceBroker *
trace(SluiceBroker *broker)
{
  return (TraceBroker *)broker;
}

/* Counts and logs one finished call. */
static gboolean
traced(SluiceBroker *broker, const gchar *slot, gint64 started_us, gboolean ok,
       GError **error)
{
  TraceBroker *self = trace(broker);
  gint64 us = g_get_monotonic_time() - started_us;

  g_mutex_lock(&self->lock);
  g_hash_table_insert(
      self->calls, (gpointer)slot,
      GUINT_TO_POINTER(
          GPOINTER_TO_UINT(g_hash_table_lookup(self->calls, slot)) + 1));
  g_mutex_unlock(&self->lock);
  g_log_structured(
      "sluice-trace", G_LOG_LEVEL_DEBUG, "SLUICE_SLOT", slot, "MESSAGE",
      "%s: %s in %" G_GINT64_FORMAT " us", slot,
      ok ? "ok"
         : (error != NULL && *error != NULL ? (*error)->message : "failed"),
      us);
  return ok;
}

#define NOW() g_get_monotonic_time()

static gboolean
trace_enqueue(SluiceBroker *b, SluiceSubmit *items, guint n, GError **error)
{
  gint64 t = NOW();
  return traced(b, "enqueue", t,
                sluice_broker_enqueue(trace(b)->inner, items, n, error), error);
}

static gboolean
trace_fetch(SluiceBroker *b, const gchar *consumer, const gchar *const *queues,
            guint max, gint64 block_ms, GPtrArray *out, GError **error)
{
  gint64 t = NOW();
  return traced(b, "fetch", t,
                sluice_broker_fetch(trace(b)->inner, consumer, queues, max,
                                    block_ms, out, error),
                error);
}

static gboolean
trace_settle(SluiceBroker *b, const gchar *consumer, SluiceSettlement *items,
             guint n, GError **error)
{
  gint64 t = NOW();
  return traced(
      b, "settle", t,
      sluice_broker_settle(trace(b)->inner, consumer, items, n, error), error);
}

static gboolean
trace_heartbeat(SluiceBroker *b, const gchar *consumer, gint64 lease_ms,
                SluiceDelivery *const *held, guint n, GError **error)
{
  gint64 t = NOW();
  return traced(b, "heartbeat", t,
                sluice_broker_heartbeat(trace(b)->inner, consumer, lease_ms,
                                        held, n, error),
                error);
}

static gboolean
trace_reclaim(SluiceBroker *b, const gchar *consumer,
              const gchar *const *queues, guint max, gint64 idle_ms,
              GPtrArray *out, GError **error)
{
  gint64 t = NOW();
  return traced(b, "reclaim", t,
                sluice_broker_reclaim(trace(b)->inner, consumer, queues, max,
                                      idle_ms, out, error),
                error);
}

static gboolean
trace_leave(SluiceBroker *b, const gchar *consumer, GError **error)
{
  gint64 t = NOW();
  return traced(b, "leave", t,
                sluice_broker_leave(trace(b)->inner, consumer, error), error);
}

static void
trace_wakeup(SluiceBroker *b)
{
  gint64 t = NOW();
  sluice_broker_wakeup(trace(b)->inner);
  traced(b, "wakeup", t, TRUE, NULL);
}

static gboolean
trace_promote_due(SluiceBroker *b, gint64 now_ms, guint max, guint *promoted,
                  gint64 *next_due, GError **error)
{
  gint64 t = NOW();
  return traced(b, "promote_due", t,
                sluice_broker_promote_due(trace(b)->inner, now_ms, max,
                                          promoted, next_due, error),
                error);
}

static gboolean
trace_cancel_scheduled(SluiceBroker *b, const gchar *id, GBytes *record,
                       gint64 ttl_ms, gboolean *removed, GError **error)
{
  gint64 t = NOW();
  return traced(b, "cancel_scheduled", t,
                sluice_broker_cancel_scheduled(trace(b)->inner, id, record,
                                               ttl_ms, removed, error),
                error);
}

static gboolean
trace_get_record(SluiceBroker *b, const gchar *id, GBytes **out, GError **error)
{
  gint64 t = NOW();
  return traced(b, "get_record", t,
                sluice_broker_get_record(trace(b)->inner, id, out, error),
                error);
}

static gboolean
trace_put_record(SluiceBroker *b, const gchar *id, GBytes *record,
                 gboolean final, gint64 ttl_ms, GError **error)
{
  gint64 t = NOW();
  return traced(b, "put_record", t,
                sluice_broker_put_record(trace(b)->inner, id, record, final,
                                         ttl_ms, error),
                error);
}

static gboolean
trace_wait_record(SluiceBroker *b, const gchar *id, gint64 timeout_ms,
                  GBytes **out, GError **error)
{
  gint64 t = NOW();
  return traced(
      b, "wait_record", t,
      sluice_broker_wait_record(trace(b)->inner, id, timeout_ms, out, error),
      error);
}

static gboolean
trace_revoke(SluiceBroker *b, const gchar *id, gint64 expires_at,
             GError **error)
{
  gint64 t = NOW();
  return traced(b, "revoke", t,
                sluice_broker_revoke(trace(b)->inner, id, expires_at, error),
                error);
}

static gboolean
trace_list_revocations(SluiceBroker *b, gint64 cursor, gint64 now_ms,
                       GPtrArray *out, gint64 *out_cursor, GError **error)
{
  gint64 t = NOW();

  *out_cursor = cursor;
  return traced(b, "list_revocations", t,
                sluice_broker_list_revocations(trace(b)->inner, out_cursor,
                                               now_ms, out, error),
                error);
}

static gboolean
trace_check(SluiceBroker *b, GError **error)
{
  gint64 t = NOW();
  return traced(b, "check", t, sluice_broker_check(trace(b)->inner, error),
                error);
}

static gboolean
trace_count_reclaimable(SluiceBroker *b, const gchar *consumer,
                        const gchar *const *queues, guint max, gint64 idle_ms,
                        guint *out_n, GError **error)
{
  gint64 t = NOW();
  return traced(b, "count_reclaimable", t,
                sluice_broker_count_reclaimable(trace(b)->inner, consumer,
                                                queues, max, idle_ms, out_n,
                                                error),
                error);
}

static gboolean
trace_lookup_task(SluiceBroker *b, const gchar *id, SluiceTaskLocation *out,
                  GError **error)
{
  gint64 t = NOW();
  return traced(b, "lookup_task", t,
                sluice_broker_lookup_task(trace(b)->inner, id, out, error),
                error);
}

static gboolean
trace_announce(SluiceBroker *b, const gchar *consumer, GBytes *info,
               gint64 ttl_ms, GError **error)
{
  gint64 t = NOW();
  return traced(
      b, "announce", t,
      sluice_broker_announce(trace(b)->inner, consumer, info, ttl_ms, error),
      error);
}

static gboolean
trace_claim_periodic(SluiceBroker *b, const gchar *name, gint64 at,
                     SluiceSubmit *item, gboolean *claimed, GError **error)
{
  gint64 t = NOW();
  return traced(b, "claim_periodic", t,
                sluice_broker_claim_periodic(trace(b)->inner, name, at, item,
                                             claimed, error),
                error);
}

static gboolean
trace_last_periodic(SluiceBroker *b, const gchar *name, gint64 *last,
                    GError **error)
{
  gint64 t = NOW();
  return traced(b, "last_periodic", t,
                sluice_broker_last_periodic(trace(b)->inner, name, last, error),
                error);
}

static gboolean
trace_dlq_list(SluiceBroker *b, const gchar *after, guint limit, GPtrArray *out,
               GError **error)
{
  gint64 t = NOW();
  return traced(
      b, "dlq_list", t,
      sluice_broker_dlq_list(trace(b)->inner, after, limit, out, error), error);
}

static gboolean
trace_dlq_get(SluiceBroker *b, const gchar *entry_id, SluiceDeadLetter **out,
              GError **error)
{
  gint64 t = NOW();
  return traced(b, "dlq_get", t,
                sluice_broker_dlq_get(trace(b)->inner, entry_id, out, error),
                error);
}

static gboolean
trace_dlq_replay(SluiceBroker *b, const gchar *entry_id, SluiceSubmit *item,
                 gboolean *found, GError **error)
{
  gint64 t = NOW();
  return traced(
      b, "dlq_replay", t,
      sluice_broker_dlq_replay(trace(b)->inner, entry_id, item, found, error),
      error);
}

static gboolean
trace_dlq_delete(SluiceBroker *b, const gchar *entry_id, gboolean *found,
                 GError **error)
{
  gint64 t = NOW();
  return traced(
      b, "dlq_delete", t,
      sluice_broker_dlq_delete(trace(b)->inner, entry_id, found, error), error);
}

static gboolean
trace_stats(SluiceBroker *b, const gchar *const *queues, SluiceBrokerStats *out,
            GError **error)
{
  gint64 t = NOW();
  return traced(b, "stats", t,
                sluice_broker_stats(trace(b)->inner, queues, out, error),
                error);
}

static gboolean
trace_purge(SluiceBroker *b, const gchar *queue, guint64 *removed,
            GError **error)
{
  gint64 t = NOW();
  return traced(b, "purge", t,
                sluice_broker_purge(trace(b)->inner, queue, removed, error),
                error);
}

static gboolean
trace_list_queued(SluiceBroker *b, const gchar *queue, const gchar *cursor,
                  guint limit, GPtrArray *out, gchar **out_cursor,
                  GError **error)
{
  gint64 t = NOW();
  return traced(b, "list_queued", t,
                sluice_broker_list_queued(trace(b)->inner, queue, cursor, limit,
                                          out, out_cursor, error),
                error);
}

static gboolean
trace_list_scheduled(SluiceBroker *b, const gchar *cursor, guint limit,
                     GPtrArray *out, gchar **out_cursor, GError **error)
{
  gint64 t = NOW();
  return traced(b, "list_scheduled", t,
                sluice_broker_list_scheduled(trace(b)->inner, cursor, limit,
                                             out, out_cursor, error),
                error);
}

static gboolean
trace_set_paused(SluiceBroker *b, const gchar *queue, gboolean paused,
                 GError **error)
{
  gint64 t = NOW();
  return traced(b, "set_paused", t,
                sluice_broker_set_paused(trace(b)->inner, queue, paused, error),
                error);
}

static gboolean
trace_list_paused(SluiceBroker *b, GPtrArray *out, GError **error)
{
  gint64 t = NOW();
  return traced(b, "list_paused", t,
                sluice_broker_list_paused(trace(b)->inner, out, error), error);
}

static gboolean
trace_reschedule(SluiceBroker *b, const gchar *id, gint64 due_at,
                 gboolean *out_found, GError **error)
{
  gint64 t = NOW();
  return traced(
      b, "reschedule", t,
      sluice_broker_reschedule(trace(b)->inner, id, due_at, out_found, error),
      error);
}

static gboolean
trace_remove_queued(SluiceBroker *b, SluiceRemoval *items, guint n_items,
                    GError **error)
{
  gint64 t = NOW();
  return traced(
      b, "remove_queued", t,
      sluice_broker_remove_queued(trace(b)->inner, items, n_items, error),
      error);
}

static gboolean
trace_replace_payloads(SluiceBroker *b, SluiceReplacement *items, guint n_items,
                       GError **error)
{
  gint64 t = NOW();
  return traced(
      b, "replace_payloads", t,
      sluice_broker_replace_payloads(trace(b)->inner, items, n_items, error),
      error);
}

/* Version 4: joins (workflows, batches), progress and events. The inner
 * broker's dispatch functions answer UNSUPPORTED where it has no slot;
 * the caps below say which it has. */
static gboolean
trace_join_open(SluiceBroker *b, const SluiceJoinSpec *joins, guint n_joins,
                SluiceSubmit *items, guint n_items, gboolean *out_existed,
                GError **error)
{
  gint64 t = NOW();
  return traced(b, "join_open", t,
                sluice_broker_join_open(trace(b)->inner, joins, n_joins, items,
                                        n_items, out_existed, error),
                error);
}

static gboolean
trace_join_arrive(SluiceBroker *b, SluiceJoinArrival *items, guint n,
                  GError **error)
{
  gint64 t = NOW();
  return traced(b, "join_arrive", t,
                sluice_broker_join_arrive(trace(b)->inner, items, n, error),
                error);
}

static gboolean
trace_join_read(SluiceBroker *b, const gchar *join_id, gboolean with_outcomes,
                SluiceJoinState *out, gboolean *out_found, GError **error)
{
  gint64 t = NOW();
  return traced(b, "join_read", t,
                sluice_broker_join_read(trace(b)->inner, join_id, with_outcomes,
                                        out, out_found, error),
                error);
}

static gboolean
trace_join_grow(SluiceBroker *b, const gchar *join_id, guint expected_total,
                guint by, SluiceSubmit *items, guint n_items, guint *out_total,
                GError **error)
{
  gint64 t = NOW();
  return traced(b, "join_grow", t,
                sluice_broker_join_grow(trace(b)->inner, join_id,
                                        expected_total, by, items, n_items,
                                        out_total, error),
                error);
}

static gboolean
trace_put_progress(SluiceBroker *b, const gchar *id, GBytes *progress,
                   gint64 ttl_ms, GError **error)
{
  gint64 t = NOW();
  return traced(
      b, "put_progress", t,
      sluice_broker_put_progress(trace(b)->inner, id, progress, ttl_ms, error),
      error);
}

static gboolean
trace_get_progress(SluiceBroker *b, const gchar *id, GBytes **out,
                   GError **error)
{
  gint64 t = NOW();
  return traced(b, "get_progress", t,
                sluice_broker_get_progress(trace(b)->inner, id, out, error),
                error);
}

static gboolean
trace_append_events(SluiceBroker *b, GBytes *const *events, guint n,
                    guint max_len, gint64 max_age_ms, gint64 now_ms,
                    GError **error)
{
  gint64 t = NOW();
  return traced(b, "append_events", t,
                sluice_broker_append_events(trace(b)->inner, events, n, max_len,
                                            max_age_ms, now_ms, error),
                error);
}

static gboolean
trace_read_events(SluiceBroker *b, const gchar *cursor, guint limit,
                  gint64 block_ms, GPtrArray *out, gchar **out_cursor,
                  GError **error)
{
  gint64 t = NOW();
  return traced(b, "read_events", t,
                sluice_broker_read_events(trace(b)->inner, cursor, limit,
                                          block_ms, out, out_cursor, error),
                error);
}

static gboolean
trace_rate_acquire(SluiceBroker *b, SluiceRateAcquire *items, guint n,
                   GError **error)
{
  gint64 t = NOW();
  return traced(b, "rate_acquire", t,
                sluice_broker_rate_acquire(trace(b)->inner, items, n, error),
                error);
}

static gboolean
trace_slot_acquire(SluiceBroker *b, SluiceSlotAcquire *items, guint n,
                   GError **error)
{
  gint64 t = NOW();
  return traced(b, "slot_acquire", t,
                sluice_broker_slot_acquire(trace(b)->inner, items, n, error),
                error);
}

static gboolean
trace_slot_release(SluiceBroker *b, SluiceSlotRelease *items, guint n,
                   GError **error)
{
  gint64 t = NOW();
  return traced(b, "slot_release", t,
                sluice_broker_slot_release(trace(b)->inner, items, n, error),
                error);
}

static gboolean
trace_list_slots(SluiceBroker *b, guint limit, GPtrArray *out, GError **error)
{
  gint64 t = NOW();
  return traced(b, "list_slots", t,
                sluice_broker_list_slots(trace(b)->inner, limit, out, error),
                error);
}

static gboolean
trace_unique_enqueue(SluiceBroker *b, SluiceUniqueSubmit *items, guint n,
                     GError **error)
{
  gint64 t = NOW();
  return traced(b, "unique_enqueue", t,
                sluice_broker_unique_enqueue(trace(b)->inner, items, n, error),
                error);
}

static gboolean
trace_unique_update(SluiceBroker *b, SluiceUniqueUpdate *items, guint n,
                    GError **error)
{
  gint64 t = NOW();
  return traced(b, "unique_update", t,
                sluice_broker_unique_update(trace(b)->inner, items, n, error),
                error);
}

static void
trace_finalize(SluiceBroker *b)
{
  TraceBroker *self = trace(b);

  /* May run on a zero-filled instance if construction failed half-way. */
  g_clear_pointer(&self->inner, sluice_broker_unref);
  g_clear_pointer(&self->calls, g_hash_table_unref);
  g_mutex_clear(&self->lock);
}

/* The families, one table each. A table forwards every slot of its family;
 * trace_broker_new() points the class at the tables of the families the
 * inner broker has, so that the trace broker can do exactly what its inner
 * broker can (and the core's fallbacks stay the inner broker's). */
static const SluiceBrokerSteering trace_steering = {
    .version = SLUICE_BROKER_STEERING_VERSION,
    .list_queued = trace_list_queued,
    .remove_queued = trace_remove_queued,
    .list_scheduled = trace_list_scheduled,
    .set_paused = trace_set_paused,
    .list_paused = trace_list_paused,
    .reschedule = trace_reschedule,
    .purge = trace_purge,
    .replace_payloads = trace_replace_payloads,
};

static const SluiceBrokerPeriodic trace_periodic = {
    .version = SLUICE_BROKER_PERIODIC_VERSION,
    .claim_periodic = trace_claim_periodic,
    .last_periodic = trace_last_periodic,
};

static const SluiceBrokerJoins trace_joins = {
    .version = SLUICE_BROKER_JOINS_VERSION,
    .join_open = trace_join_open,
    .join_arrive = trace_join_arrive,
    .join_read = trace_join_read,
    .join_grow = trace_join_grow,
};

static const SluiceBrokerEvents trace_events = {
    .version = SLUICE_BROKER_EVENTS_VERSION,
    .append_events = trace_append_events,
    .read_events = trace_read_events,
    .put_progress = trace_put_progress,
    .get_progress = trace_get_progress,
};

static const SluiceBrokerRates trace_rates = {
    .version = SLUICE_BROKER_RATES_VERSION,
    .rate_acquire = trace_rate_acquire,
};

static const SluiceBrokerSlots trace_slots = {
    .version = SLUICE_BROKER_SLOTS_VERSION,
    .slot_acquire = trace_slot_acquire,
    .slot_release = trace_slot_release,
    .list_slots = trace_list_slots,
};

static const SluiceBrokerUnique trace_unique = {
    .version = SLUICE_BROKER_UNIQUE_VERSION,
    .unique_enqueue = trace_unique_enqueue,
    .unique_update = trace_unique_update,
};

/* The class, by topic. Its caps, its tables and the optional slots whose
 * presence a user can see are filled in per instance below, because they
 * are the inner broker's: the core copies the class, so a broker may build
 * it at run time as long as it is complete when sluice_broker_new() sees
 * it. */
static const SluiceBrokerClass trace_class_template = {
    .version = SLUICE_BROKER_CLASS_VERSION,
    .name = "trace",
    .instance_size = sizeof(TraceBroker),
    /* produce */
    .enqueue = trace_enqueue,
    /* consume */
    .fetch = trace_fetch,
    .settle = trace_settle,
    .heartbeat = trace_heartbeat,
    .reclaim = trace_reclaim,
    .leave = trace_leave,
    .wakeup = trace_wakeup,
    /* schedule */
    .promote_due = trace_promote_due,
    .cancel_scheduled = trace_cancel_scheduled,
    /* records */
    .get_record = trace_get_record,
    .put_record = trace_put_record,
    .wait_record = trace_wait_record,
    /* revocations */
    .revoke = trace_revoke,
    .list_revocations = trace_list_revocations,
    /* dead letters */
    .dlq_list = trace_dlq_list,
    .dlq_get = trace_dlq_get,
    .dlq_replay = trace_dlq_replay,
    .dlq_delete = trace_dlq_delete,
    /* stats and workers */
    .stats = trace_stats,
    .check = trace_check,
    /* lifecycle */
    .finalize = trace_finalize,
};

/* The capabilities, asked of the inner broker one by one. */
static const struct {
  SluiceBrokerFeature feature;
  guint64 cap;
} trace_caps[] = {
    {SLUICE_BROKER_FEATURE_SHARED, SLUICE_BROKER_CAP_SHARED},
    {SLUICE_BROKER_FEATURE_DURABLE, SLUICE_BROKER_CAP_DURABLE},
    {SLUICE_BROKER_FEATURE_LEASES, SLUICE_BROKER_CAP_LEASES},
    {SLUICE_BROKER_FEATURE_FENCING, SLUICE_BROKER_CAP_FENCING},
    {SLUICE_BROKER_FEATURE_CLOCK_TTL, SLUICE_BROKER_CAP_CLOCK_TTL},
    {SLUICE_BROKER_FEATURE_IN_FLIGHT, SLUICE_BROKER_CAP_IN_FLIGHT},
    {SLUICE_BROKER_FEATURE_ORDERED, SLUICE_BROKER_CAP_ORDERED},
};

SluiceBroker *
trace_broker_new(SluiceBroker *inner)
{
  SluiceBrokerClass klass = trace_class_template;
  g_autoptr(GError) error = NULL;
  SluiceBroker *broker;
  TraceBroker *self;

  g_return_val_if_fail(inner != NULL, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS(trace_caps); i++)
    if (sluice_broker_supports(inner, trace_caps[i].feature))
      klass.caps |= trace_caps[i].cap;
#define IF_INNER(feature, field, value)                                        \
  klass.field = sluice_broker_supports(inner, SLUICE_BROKER_FEATURE_##feature) \
                    ? (value)                                                  \
                    : NULL
  IF_INNER(COUNT_RECLAIMABLE, count_reclaimable, trace_count_reclaimable);
  IF_INNER(LOOKUP_TASK, lookup_task, trace_lookup_task);
  IF_INNER(ANNOUNCE, announce, trace_announce);
  IF_INNER(STEERING, steering, &trace_steering);
  IF_INNER(PERIODIC, periodic, &trace_periodic);
  IF_INNER(JOINS, joins, &trace_joins);
  IF_INNER(EVENTS, events, &trace_events);
  IF_INNER(RATES, rates, &trace_rates);
  IF_INNER(SLOTS, slots, &trace_slots);
  IF_INNER(UNIQUE, unique, &trace_unique);
#undef IF_INNER
  broker = sluice_broker_new(&klass, sluice_broker_get_clock(inner), &error);
  if (broker == NULL) {
    g_critical("trace broker: %s", error->message);
    return NULL;
  }
  self = trace(broker);
  g_mutex_init(&self->lock);
  self->calls = g_hash_table_new(g_str_hash, g_str_equal);
  self->inner = sluice_broker_ref(inner);
  return broker;
}

guint
trace_broker_get_calls(SluiceBroker *broker, const gchar *slot)
{
  TraceBroker *self = trace(broker);
  guint n;

  g_mutex_lock(&self->lock);
  n = GPOINTER_TO_UINT(g_hash_table_lookup(self->calls, slot));
  g_mutex_unlock(&self->lock);
  return n;
}

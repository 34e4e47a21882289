/* memory.c - the memory broker: its public API (sluice-brokers.h), its
 * class and tables, and its lifecycle.
 *
 * OVERVIEW
 *
 * This is the broker users unit-test their task code against, so it must
 * produce exactly the semantics of the Redis brokers, minus what only a
 * shared store can give. Everything sits behind one mutex; each slot takes
 * it once, which makes every slot trivially atomic (the contract's "the ack,
 * the record, the retry or dead-letter write happen together"). The state
 * and the operations on it (queues, schedule, records, revocations,
 * periodic claims, idempotency claims, dead letters, workers) are
 * memory-store.{c,h}; the slots are one file per topic of the contract,
 * named after it as in every in-tree broker: memory-queue.c,
 * memory-schedule.c, memory-records.c, memory-revocations.c,
 * memory-dead-letters.c, memory-stats.c, memory-steering.c,
 * memory-periodic.c, memory-joins.c, memory-events.c, memory-flow.c and
 * memory-unique.c.
 *
 * Time: every TTL is measured on the broker's SluiceClock
 * (SLUICE_BROKER_CAP_CLOCK_TTL), so with a fake clock a test sees results,
 * revocations and idempotency claims expire when it advances the clock;
 * rate-limit buckets follow the same clock.
 *
 * What it omits: nothing outlives the process (no DURABLE), other processes
 * see nothing (no SHARED), and there are no leases (memory-queue.c).
 */
#include "config.h"

#include "brokers/memory/memory-store.h"

/* The store (memory-store.c) and the parts that build on it (joins,
 * events, uniqueness) are set up and torn down here, so that the store knows
 * nothing of them. */
static void
memory_finalize(SluiceBroker *broker)
{
  SluiceMemoryBroker *self = SLUICE_MEMORY_BROKER(broker);

  sluice_memory__joins_clear(self);
  sluice_memory__events_clear(self);
  sluice_memory__unique_clear(self);
  sluice_memory__clear(self);
}

/* Every optional family, each a table: the memory broker has them all. */
static const SluiceBrokerSteering memory_steering = {
    .version = SLUICE_BROKER_STEERING_VERSION,
    .list_queued = sluice_memory__list_queued,
    .remove_queued = sluice_memory__remove_queued,
    .list_scheduled = sluice_memory__list_scheduled,
    .set_paused = sluice_memory__set_paused,
    .list_paused = sluice_memory__list_paused,
    .reschedule = sluice_memory__reschedule,
    .purge = sluice_memory__purge,
    .replace_payloads = sluice_memory__replace_payloads,
};

static const SluiceBrokerPeriodic memory_periodic = {
    .version = SLUICE_BROKER_PERIODIC_VERSION,
    .claim_periodic = sluice_memory__claim_periodic,
    .last_periodic = sluice_memory__last_periodic,
};

static const SluiceBrokerJoins memory_joins = {
    .version = SLUICE_BROKER_JOINS_VERSION,
    .join_open = sluice_memory__join_open,
    .join_arrive = sluice_memory__join_arrive,
    .join_read = sluice_memory__join_read,
    .join_grow = sluice_memory__join_grow,
};

static const SluiceBrokerEvents memory_events = {
    .version = SLUICE_BROKER_EVENTS_VERSION,
    .append_events = sluice_memory__append_events,
    .read_events = sluice_memory__read_events,
    .put_progress = sluice_memory__put_progress,
    .get_progress = sluice_memory__get_progress,
};

static const SluiceBrokerRates memory_rates = {
    .version = SLUICE_BROKER_RATES_VERSION,
    .rate_acquire = sluice_memory__rate_acquire,
};

static const SluiceBrokerSlots memory_slots = {
    .version = SLUICE_BROKER_SLOTS_VERSION,
    .slot_acquire = sluice_memory__slot_acquire,
    .slot_release = sluice_memory__slot_release,
    .list_slots = sluice_memory__list_slots,
};

static const SluiceBrokerUnique memory_unique = {
    .version = SLUICE_BROKER_UNIQUE_VERSION,
    .unique_enqueue = sluice_memory__unique_enqueue,
    .unique_update = sluice_memory__unique_update,
};

/* No heartbeat, reclaim or leave: one process, so no lease to keep. */
static const SluiceBrokerClass memory_broker_class = {
    .version = SLUICE_BROKER_CLASS_VERSION,
    .name = "memory",
    .instance_size = sizeof(SluiceMemoryBroker),
    .caps = SLUICE_BROKER_CAP_CLOCK_TTL | SLUICE_BROKER_CAP_IN_FLIGHT |
            SLUICE_BROKER_CAP_ORDERED,
    /* produce */
    .enqueue = sluice_memory__enqueue,
    /* consume */
    .fetch = sluice_memory__fetch,
    .settle = sluice_memory__settle,
    .wakeup = sluice_memory__wakeup,
    /* schedule */
    .promote_due = sluice_memory__promote_due,
    .cancel_scheduled = sluice_memory__cancel_scheduled,
    /* records */
    .get_record = sluice_memory__get_record,
    .put_record = sluice_memory__put_record_slot,
    .wait_record = sluice_memory__wait_record,
    .lookup_task = sluice_memory__lookup_task,
    /* revocations */
    .revoke = sluice_memory__revoke,
    .list_revocations = sluice_memory__list_revocations,
    /* dead letters */
    .dlq_list = sluice_memory__dlq_list,
    .dlq_get = sluice_memory__dlq_get,
    .dlq_replay = sluice_memory__dlq_replay,
    .dlq_delete = sluice_memory__dlq_delete,
    /* stats and workers */
    .stats = sluice_memory__stats,
    .announce = sluice_memory__announce,
    /* lifecycle */
    .finalize = memory_finalize,
    /* optional families */
    .steering = &memory_steering,
    .periodic = &memory_periodic,
    .joins = &memory_joins,
    .events = &memory_events,
    .rates = &memory_rates,
    .slots = &memory_slots,
    .unique = &memory_unique,
};

SluiceBroker *
sluice_memory_broker_new(const SluiceMemoryBrokerOptions *options,
                         SluiceClock *clock)
{
  SluiceBroker *broker;

  /* The class is static and complete, so validation cannot fail. */
  broker = sluice_broker_new(&memory_broker_class, clock, NULL);
  g_return_val_if_fail(broker != NULL, NULL);
  sluice_memory__init(SLUICE_MEMORY_BROKER(broker),
                      options != NULL && options->dead_letter_max > 0
                          ? options->dead_letter_max
                          : SLUICE_DEFAULT_DEAD_LETTER_MAX);
  sluice_memory__joins_init(SLUICE_MEMORY_BROKER(broker));
  sluice_memory__events_init(SLUICE_MEMORY_BROKER(broker));
  sluice_memory__unique_init(SLUICE_MEMORY_BROKER(broker));
  return broker;
}

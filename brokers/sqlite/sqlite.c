/* sqlite.c - the SQLite broker's public API (sluice-sqlite.h), its class
 * and its lifecycle. The slots are in one file per topic of
 * sluice/sys/broker.h, named after it (sqlite-queue.c, sqlite-schedule.c,
 * sqlite-records.c, sqlite-revocations.c, sqlite-dead-letters.c,
 * sqlite-stats.c, sqlite-steering.c, sqlite-periodic.c, sqlite-joins.c,
 * sqlite-events.c, sqlite-flow.c, sqlite-unique.c), the row-level steps
 * they share in sqlite-rows.c, the database and waking in sqlite-conn.c.
 */
#include "config.h"

#include <string.h>

#include "brokers/sqlite/sqlite-broker.h"

static void
sqlite_close(SluiceBroker *broker)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);

  if (self->idle != NULL)
    sluice_sqlite__close(self);
}

static void
sqlite_finalize(SluiceBroker *broker)
{
  sluice_sqlite__clear(SLUICE_SQLITE_BROKER(broker));
}

static gboolean
check_step(SluiceSqliteConn *c, gpointer data, gboolean *notify, GError **error)
{
  return TRUE;
}

gboolean
sluice_sqlite__check(SluiceBroker *broker, GError **error)
{
  /* A write transaction: proves the file is there, ours and writable. */
  return sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), TRUE, check_step,
                            NULL, error);
}

/* Every optional family, each a table: the SQLite broker has them all. */
static const SluiceBrokerSteering sqlite_steering = {
    .version = SLUICE_BROKER_STEERING_VERSION,
    .list_queued = sluice_sqlite__list_queued,
    .remove_queued = sluice_sqlite__remove_queued,
    .list_scheduled = sluice_sqlite__list_scheduled,
    .set_paused = sluice_sqlite__set_paused,
    .list_paused = sluice_sqlite__list_paused,
    .reschedule = sluice_sqlite__reschedule,
    .purge = sluice_sqlite__purge,
    .replace_payloads = sluice_sqlite__replace_payloads,
};

static const SluiceBrokerPeriodic sqlite_periodic = {
    .version = SLUICE_BROKER_PERIODIC_VERSION,
    .claim_periodic = sluice_sqlite__claim_periodic,
    .last_periodic = sluice_sqlite__last_periodic,
};

static const SluiceBrokerJoins sqlite_joins = {
    .version = SLUICE_BROKER_JOINS_VERSION,
    .join_open = sluice_sqlite__join_open,
    .join_arrive = sluice_sqlite__join_arrive,
    .join_read = sluice_sqlite__join_read,
    .join_grow = sluice_sqlite__join_grow,
};

static const SluiceBrokerEvents sqlite_events = {
    .version = SLUICE_BROKER_EVENTS_VERSION,
    .append_events = sluice_sqlite__append_events,
    .read_events = sluice_sqlite__read_events,
    .put_progress = sluice_sqlite__put_progress,
    .get_progress = sluice_sqlite__get_progress,
};

static const SluiceBrokerRates sqlite_rates = {
    .version = SLUICE_BROKER_RATES_VERSION,
    .rate_acquire = sluice_sqlite__rate_acquire,
};

static const SluiceBrokerSlots sqlite_slots = {
    .version = SLUICE_BROKER_SLOTS_VERSION,
    .slot_acquire = sluice_sqlite__slot_acquire,
    .slot_release = sluice_sqlite__slot_release,
    .list_slots = sluice_sqlite__list_slots,
};

static const SluiceBrokerUnique sqlite_unique = {
    .version = SLUICE_BROKER_UNIQUE_VERSION,
    .unique_enqueue = sluice_sqlite__unique_enqueue,
    .unique_update = sluice_sqlite__unique_update,
};

static const SluiceBrokerClass sqlite_broker_class = {
    .version = SLUICE_BROKER_CLASS_VERSION,
    .name = "sqlite",
    .instance_size = sizeof(SluiceSqliteBroker),
    .caps = SLUICE_BROKER_CAP_SHARED | SLUICE_BROKER_CAP_DURABLE |
            SLUICE_BROKER_CAP_LEASES | SLUICE_BROKER_CAP_FENCING |
            SLUICE_BROKER_CAP_CLOCK_TTL | SLUICE_BROKER_CAP_IN_FLIGHT |
            SLUICE_BROKER_CAP_ORDERED,
    /* produce */
    .enqueue = sluice_sqlite__enqueue,
    /* consume */
    .fetch = sluice_sqlite__fetch,
    .settle = sluice_sqlite__settle,
    .heartbeat = sluice_sqlite__heartbeat,
    .reclaim = sluice_sqlite__reclaim,
    .count_reclaimable = sluice_sqlite__count_reclaimable,
    .leave = sluice_sqlite__leave,
    .wakeup = sluice_sqlite__wakeup,
    /* schedule */
    .promote_due = sluice_sqlite__promote_due,
    .cancel_scheduled = sluice_sqlite__cancel_scheduled,
    /* records */
    .get_record = sluice_sqlite__get_record,
    .put_record = sluice_sqlite__put_record_slot,
    .put_records = sluice_sqlite__put_records,
    .wait_record = sluice_sqlite__wait_record,
    .lookup_task = sluice_sqlite__lookup_task,
    /* revocations */
    .revoke = sluice_sqlite__revoke,
    .list_revocations = sluice_sqlite__list_revocations,
    /* dead letters */
    .dlq_list = sluice_sqlite__dlq_list,
    .dlq_get = sluice_sqlite__dlq_get,
    .dlq_replay = sluice_sqlite__dlq_replay,
    .dlq_delete = sluice_sqlite__dlq_delete,
    /* stats and workers */
    .stats = sluice_sqlite__stats,
    .announce = sluice_sqlite__announce,
    .check = sluice_sqlite__check,
    /* lifecycle */
    .close = sqlite_close,
    .finalize = sqlite_finalize,
    /* optional families */
    .steering = &sqlite_steering,
    .periodic = &sqlite_periodic,
    .joins = &sqlite_joins,
    .events = &sqlite_events,
    .rates = &sqlite_rates,
    .slots = &sqlite_slots,
    .unique = &sqlite_unique,
};

void
sluice_sqlite_options_init(SluiceSqliteOptions *options)
{
  g_return_if_fail(options != NULL);
  memset(options, 0, sizeof *options);
  options->synchronous = SLUICE_SQLITE_SYNC_FULL;
}

/* sluice_sqlite_broker_new(), which may also run the migrations that need
 * the processes of the older version stopped when @offline_steps (`sluice
 * migrate`: sqlite-layout.c). */
static SluiceBroker *
broker_new_full(const SluiceSqliteOptions *options, SluiceClock *clock,
                gboolean offline_steps, GError **error)
{
  SluiceSqliteBroker *self;
  SluiceBroker *broker;

  g_return_val_if_fail(options != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  if (options->path == NULL || options->path[0] == '\0') {
    g_set_error_literal(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                        "the SQLite broker needs the path of its database "
                        "file (sqlite:///path/to/file.db)");
    return NULL;
  }
  if (options->synchronous > SLUICE_SQLITE_SYNC_OFF) {
    g_set_error_literal(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                        "unknown synchronous setting: use "
                        "SLUICE_SQLITE_SYNC_FULL, _NORMAL or _OFF");
    return NULL;
  }
  broker = sluice_broker_new(&sqlite_broker_class, clock, error);
  if (broker == NULL)
    return NULL;
  self = SLUICE_SQLITE_BROKER(broker);
  self->wake_fd = self->inotify_fd = self->stop_fd = -1;
  self->path = g_strdup(options->path);
  self->synchronous = options->synchronous;
  self->read_only = options->read_only;
  self->offline_steps = offline_steps;
  self->busy_timeout_ms = options->busy_timeout_ms > 0
                              ? options->busy_timeout_ms
                              : SLUICE_SQLITE_DEFAULT_BUSY_TIMEOUT_MS;
  self->dead_letter_max = options->dead_letter_max > 0
                              ? options->dead_letter_max
                              : SLUICE_DEFAULT_DEAD_LETTER_MAX;
  self->poll_ms = SLUICE_SQLITE_SAFETY_POLL_MS;
  g_mutex_init(&self->pool_lock);
  g_mutex_init(&self->queues_lock);
  g_mutex_init(&self->wake_lock);
  g_cond_init(&self->wake_cond);
  self->queues_known =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  self->idle = g_ptr_array_new();
  if (!sluice_sqlite__open(self, error) ||
      !sluice_sqlite__open_layout(self, error)) {
    sluice_broker_unref(broker);
    return NULL;
  }
  sluice_sqlite__start_waking(self);
  return broker;
}

SluiceBroker *
sluice_sqlite_broker_new(const SluiceSqliteOptions *options, SluiceClock *clock,
                         GError **error)
{
  return broker_new_full(options, clock, FALSE, error);
}

gboolean
sluice_sqlite_migrate(const SluiceSqliteOptions *options, SluiceLayout *out,
                      GError **error)
{
  SluiceSqliteOptions writer;
  SluiceBroker *broker;

  g_return_val_if_fail(options != NULL, FALSE);
  writer = *options;
  writer.read_only = FALSE;
  /* Opening for writing is what migrates; the operator who runs this has
   * stopped what the offline steps would break (docs/upgrading.md). */
  broker = broker_new_full(&writer, NULL, TRUE, error);
  if (broker == NULL)
    return FALSE;
  sluice_broker_unref(broker);
  return out == NULL || sluice_sqlite_get_layout(options, out, error);
}

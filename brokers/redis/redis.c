/* redis.c - the Redis broker's modes: the public API of sluice-redis.h,
 * the table that names a transport for each mode, the broker class and its
 * lifecycle.
 *
 * sluice_redis_broker_new() picks the transport from the mode, builds the
 * broker class from it (the shared slots of redis-queue.c, redis-tasks.c
 * and redis-admin.c; `reclaim` and `count_reclaimable` only when the
 * transport has them) and splices the transport's Lua fragment into the
 * shared scripts. This is the one file that knows the transports by name:
 * they call the shared layer, never each other, and nothing of the shared
 * layer calls them.
 *
 * To add a transport: see redis-transport.h; here it is one line in the
 * transports[] table (its mode, the name the namespace records, its
 * getter).
 */
#include "config.h"

#include <string.h>

#include <sluice/sluice-redis.h>

#include "brokers/redis/redis-broker.h"
#include "brokers/redis/redis-cluster.h"
#include "brokers/redis/redis-partitions.h"

/* ---- The class ----------------------------------------------------------- */

static void
redis_close(SluiceBroker *broker)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);

  if (self->pool != NULL)
    sluice_redis_pool__close(self->pool);
}

static void
redis_finalize(SluiceBroker *broker)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);

  /* May run on a half-built instance: every field may be unset. */
  if (self->transport != NULL && self->transport->finalize != NULL)
    self->transport->finalize(self);
  g_clear_pointer(&self->pool, sluice_redis_pool__free);
  g_clear_pointer(&self->layout, sluice_redis_layout__free);
  sluice_redis_keys__clear(&self->keys);
  g_clear_pointer(&self->token_prefix, g_free);
  if (self->queues_added != NULL) {
    g_hash_table_unref(self->queues_added);
    g_mutex_clear(&self->queues_lock);
  }
  if (self->scripts[0].text != NULL)
    sluice_redis_scripts__clear(self->scripts);
}

static void
redis_class_init(SluiceBrokerClass *klass, const SluiceRedisTransport *t)
{
  memset(klass, 0, sizeof *klass);
  klass->version = SLUICE_BROKER_CLASS_VERSION;
  klass->name = t->name;
  klass->instance_size = sizeof(SluiceRedisBroker);
  klass->caps = t->caps | SLUICE_BROKER_CAP_JOINS;
  klass->enqueue = sluice_redis__enqueue;
  klass->fetch = sluice_redis__fetch;
  klass->settle = sluice_redis__settle;
  klass->heartbeat = sluice_redis__heartbeat;
  klass->reclaim = t->reclaim != NULL ? sluice_redis__reclaim : NULL;
  klass->leave = sluice_redis__leave;
  klass->wakeup = sluice_redis__wakeup;
  klass->promote_due = sluice_redis__promote_due;
  klass->cancel_scheduled = sluice_redis__cancel_scheduled;
  klass->get_record = sluice_redis__get_record;
  klass->put_record = sluice_redis__put_record;
  klass->put_records = sluice_redis__put_records;
  klass->wait_record = sluice_redis__wait_record;
  klass->revoke = sluice_redis__revoke;
  klass->list_revocations = sluice_redis__list_revocations;
  klass->list_revocations_since = sluice_redis__list_revocations_since;
  klass->check = sluice_redis__check;
  klass->count_reclaimable =
      t->count_reclaimable != NULL ? sluice_redis__count_reclaimable : NULL;
  klass->lookup_task = sluice_redis__lookup_task;
  klass->announce = sluice_redis__announce;
  klass->claim_periodic = sluice_redis__claim_periodic;
  klass->last_periodic = sluice_redis__last_periodic;
  klass->dlq_list = sluice_redis__dlq_list;
  klass->dlq_get = sluice_redis__dlq_get;
  klass->dlq_replay = sluice_redis__dlq_replay;
  klass->dlq_delete = sluice_redis__dlq_delete;
  klass->stats = sluice_redis__stats;
  klass->purge = sluice_redis__purge;
  klass->list_queued = sluice_redis__list_queued;
  klass->remove_queued = sluice_redis__remove_queued;
  klass->list_scheduled = sluice_redis__list_scheduled;
  klass->set_paused = sluice_redis__set_paused;
  klass->list_paused = sluice_redis__list_paused;
  klass->reschedule = sluice_redis__reschedule;
  klass->join_open = sluice_redis__join_open;
  klass->join_arrive = sluice_redis__join_arrive;
  klass->join_read = sluice_redis__join_read;
  klass->join_grow = sluice_redis__join_grow;
  klass->put_progress = sluice_redis__put_progress;
  klass->get_progress = sluice_redis__get_progress;
  klass->append_events = sluice_redis__append_events;
  klass->read_events = sluice_redis__read_events;
  klass->rate_acquire = sluice_redis__rate_acquire;
  klass->slot_acquire = sluice_redis__slot_acquire;
  klass->slot_release = sluice_redis__slot_release;
  klass->list_slots = sluice_redis__list_slots;
  klass->unique_enqueue = sluice_redis__unique_enqueue;
  klass->unique_update = sluice_redis__unique_update;
  klass->close = redis_close;
  klass->finalize = redis_finalize;
}

/* ---- Public API ---------------------------------------------------------- */

void
sluice_redis_options_init(SluiceRedisOptions *options)
{
  g_return_if_fail(options != NULL);
  memset(options, 0, sizeof *options);
  /* The safe mode, and the CLI's: a library producer and a CLI worker of
   * one namespace meet without being told. */
  options->mode = SLUICE_REDIS_RELIABLE;
}

/* The transports by mode: the one place that names them. @meta_mode is
 * what a namespace records of its first client ({ns}:meta), so clients of
 * two modes never share one. */
static const struct {
  SluiceRedisMode mode;
  const gchar *meta_mode;
  const SluiceRedisTransport *(*get)(void);
} transports[] = {
    {SLUICE_REDIS_FAST, "fast", sluice_redis__fast_transport},
    {SLUICE_REDIS_RELIABLE, "reliable", sluice_redis__reliable_transport},
};

SluiceBroker *
sluice_redis__partition_new(const SluiceRedisOptions *options,
                            const SluiceRedisUrl *url, SluiceClock *clock,
                            gint index, guint n, SluiceRedisLayout *layout,
                            GError **error)
{
  const SluiceRedisTransport *transport = NULL;
  const gchar *meta_mode = NULL;
  SluiceBrokerClass klass;
  SluiceRedisBroker *self;
  SluiceBroker *broker;
  const gchar *ns = options->namespace_ != NULL
                        ? options->namespace_
                        : SLUICE_REDIS_DEFAULT_NAMESPACE;

  for (gsize i = 0; i < G_N_ELEMENTS(transports) && transport == NULL; i++)
    if (transports[i].mode == options->mode) {
      transport = transports[i].get();
      meta_mode = transports[i].meta_mode;
    }
  if (transport == NULL) {
    sluice_redis_layout__free(layout);
    g_set_error_literal(error, SLUICE_BROKER_ERROR,
                        SLUICE_BROKER_ERROR_UNSUPPORTED,
                        "unknown Redis mode: use SLUICE_REDIS_FAST or "
                        "SLUICE_REDIS_RELIABLE");
    return NULL;
  }

  redis_class_init(&klass, transport);
  broker = sluice_broker_new(&klass, clock, error);
  if (broker == NULL) {
    sluice_redis_layout__free(layout);
    return NULL;
  }
  self = SLUICE_REDIS_BROKER(broker);
  self->transport = transport;
  self->layout = layout;
  self->pool = sluice_redis_pool__new(
      url,
      options->connect_timeout_ms > 0 ? options->connect_timeout_ms
                                      : SLUICE_REDIS_DEFAULT_CONNECT_TIMEOUT_MS,
      options->command_timeout_ms > 0 ? options->command_timeout_ms
                                      : SLUICE_REDIS_DEFAULT_COMMAND_TIMEOUT_MS,
      options->reconnect_max_backoff_ms > 0 ? options->reconnect_max_backoff_ms
                                            : SLUICE_REDIS_DEFAULT_BACKOFF_MS);
  self->min_replicas_ack = options->min_replicas_ack > 0
                               ? options->min_replicas_ack
                               : (guint)MAX(url->min_replicas_ack, 0);
  self->min_replicas_timeout_ms =
      options->min_replicas_timeout_ms > 0 ? options->min_replicas_timeout_ms
      : url->min_replicas_timeout_ms > 0
          ? url->min_replicas_timeout_ms
          : SLUICE_REDIS_DEFAULT_MIN_REPLICAS_TIMEOUT_MS;
  if (index < 0)
    sluice_redis_keys__init(&self->keys, ns);
  else
    sluice_redis_keys__init_partition(&self->keys, ns, (guint)index, n);
  sluice_redis_pool__set_namespace(self->pool, ns);
  {
    g_autofree gchar *meta =
        sluice_redis_keys__make(&self->keys, SLUICE_REDIS_K_META, NULL);
    sluice_redis_pool__set_mode_check(self->pool, meta, meta_mode);
    if (url->is_cluster)
      sluice_redis_pool__set_router(
          self->pool, &sluice_redis_cluster__router,
          sluice_redis_cluster__new(
              url,
              options->connect_timeout_ms > 0
                  ? options->connect_timeout_ms
                  : SLUICE_REDIS_DEFAULT_CONNECT_TIMEOUT_MS,
              sluice_redis_pool__get_command_timeout_ms(self->pool),
              options->reconnect_max_backoff_ms > 0
                  ? options->reconnect_max_backoff_ms
                  : SLUICE_REDIS_DEFAULT_BACKOFF_MS,
              ns, meta, meta_mode));
  }
  sluice_redis_scripts__init(self->scripts, transport->lua);
  self->token_prefix = g_uuid_string_random();
  g_mutex_init(&self->queues_lock);
  self->queues_added =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  self->wait_poll_ms = SLUICE_REDIS_WAIT_POLL_MS;
  self->dead_letter_max = options->dead_letter_max > 0
                              ? options->dead_letter_max
                              : SLUICE_DEFAULT_DEAD_LETTER_MAX;
  if (transport->init != NULL && !transport->init(self, error)) {
    sluice_broker_unref(broker);
    return NULL;
  }
  return broker;
}

void
sluice_redis__skip_policy_check(SluiceBroker *broker)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);

  sluice_redis_pool__skip_policy_check(self->pool);
  if (sluice_redis_pool__get_router_data(self->pool) != NULL)
    sluice_redis_cluster__skip_policy_check(
        sluice_redis_pool__get_router_data(self->pool));
}

SluiceBroker *
sluice_redis_broker_new(const SluiceRedisOptions *options, SluiceClock *clock,
                        GError **error)
{
  SluiceRedisOptions defaults;
  SluiceRedisUrl url = {0};
  SluiceBroker *broker;
  guint n;

  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  if (options == NULL) {
    sluice_redis_options_init(&defaults);
    options = &defaults;
  }
  if (!sluice_redis_keys__valid_namespace(options->namespace_ != NULL
                                              ? options->namespace_
                                              : SLUICE_REDIS_DEFAULT_NAMESPACE,
                                          error))
    return NULL;
  if (!sluice_redis_url__parse(options->url != NULL ? options->url
                                                    : SLUICE_REDIS_DEFAULT_URL,
                               &url, error))
    return NULL;
  if (options->partitions > SLUICE_REDIS_MAX_PARTITIONS ||
      (options->partitions > 0 && url.partitions > 0 &&
       options->partitions != url.partitions)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                options->partitions > SLUICE_REDIS_MAX_PARTITIONS
                    ? "SluiceRedisOptions.partitions is %u (URL: %u): a "
                      "namespace has 1 to " G_STRINGIFY(
                          SLUICE_REDIS_MAX_PARTITIONS) " partitions"
                    : "SluiceRedisOptions.partitions is %u but the URL says "
                      "partitions=%u: give the number in one place only",
                options->partitions, url.partitions);
    sluice_redis_url__clear(&url);
    return NULL;
  }
  n = options->partitions > 0 ? options->partitions
      : url.partitions > 0    ? url.partitions
                              : 1;
  if (n == 1)
    broker = sluice_redis__partition_new(
        options, &url, clock, -1, 1, sluice_redis_layout__new(options, &url, 1),
        error);
  else
    broker = sluice_redis__partitioned_new(options, &url, clock, n, error);
  sluice_redis_url__clear(&url);
  return broker;
}

gboolean
sluice_redis_broker_ping(SluiceBroker *broker, GError **error)
{
  g_return_val_if_fail(broker != NULL, FALSE);
  if (sluice_redis__is_partitioned(broker))
    return sluice_broker_check(broker, error);
  g_return_val_if_fail(broker->klass->finalize == redis_finalize, FALSE);
  return sluice_redis__check(broker, error);
}

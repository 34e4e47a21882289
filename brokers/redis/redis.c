/* redis.c - the Redis broker's modes: the public API of sluice-redis.h,
 * the table that names a transport for each mode, the broker class and its
 * lifecycle.
 *
 * sluice_redis_broker_new() picks the transport from the mode, builds the
 * broker class from it (the shared slots, one file per topic, and a table per
 * family; `reclaim` and `count_reclaimable` only when the transport has them:
 * one class per transport, kept for the process) and splices the transport's
 * Lua fragment into the shared scripts. For a namespace of N > 1 partitions it
 * builds the N brokers, the composite over them (redis-partitioned.c) and the
 * ops the composite needs of them; it installs the layout check
 * (redis-layout.c) as the gate of whichever broker it hands out. This is the
 * one file that knows the transports by name: they call the shared layer, never
 * each other, and nothing of the shared layer calls them.
 *
 * To add a transport: see redis-transport.h; here it is one line in the
 * transports[] table (its mode, the name the namespace records, its
 * getter).
 */
#include "config.h"

#include <string.h>

#include <sluice/sluice-redis.h>

#include "brokers/redis/redis-broker.h"
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
  if (self->gate.free != NULL)
    g_clear_pointer(&self->gate.data, self->gate.free);
  sluice_redis_keys__clear(&self->keys);
  g_clear_pointer(&self->token_prefix, g_free);
  if (self->queues_added != NULL) {
    g_hash_table_unref(self->queues_added);
    g_mutex_clear(&self->queues_lock);
  }
  if (self->scripts[0].text != NULL)
    sluice_redis_scripts__clear(self->scripts);
  g_clear_pointer(&self->meta_key, g_free);
  g_clear_pointer(&self->mode_setting, g_free);
  if (self->policy_checked != NULL) {
    g_hash_table_unref(self->policy_checked);
    g_mutex_clear(&self->policy_lock);
  }
}

/* A PING on a connection of the pool: making the connection checks the
 * credentials and the namespace's mode (see the pool's handshake). */
gboolean
sluice_redis__check(SluiceBroker *broker, GError **error)
{
  return sluice_redis_broker__ping(SLUICE_REDIS_BROKER(broker), "PING", error);
}

/* The families every Redis broker has, whatever its transport. */
static const SluiceBrokerSteering redis_steering = {
    .version = SLUICE_BROKER_STEERING_VERSION,
    .list_queued = sluice_redis__list_queued,
    .remove_queued = sluice_redis__remove_queued,
    .list_scheduled = sluice_redis__list_scheduled,
    .set_paused = sluice_redis__set_paused,
    .list_paused = sluice_redis__list_paused,
    .reschedule = sluice_redis__reschedule,
    .purge = sluice_redis__purge,
    .replace_payloads = sluice_redis__replace_payloads,
};

static const SluiceBrokerPeriodic redis_periodic = {
    .version = SLUICE_BROKER_PERIODIC_VERSION,
    .claim_periodic = sluice_redis__claim_periodic,
    .last_periodic = sluice_redis__last_periodic,
};

static const SluiceBrokerJoins redis_joins = {
    .version = SLUICE_BROKER_JOINS_VERSION,
    .join_open = sluice_redis__join_open,
    .join_arrive = sluice_redis__join_arrive,
    .join_read = sluice_redis__join_read,
    .join_grow = sluice_redis__join_grow,
};

static const SluiceBrokerEvents redis_events = {
    .version = SLUICE_BROKER_EVENTS_VERSION,
    .append_events = sluice_redis__append_events,
    .read_events = sluice_redis__read_events,
    .put_progress = sluice_redis__put_progress,
    .get_progress = sluice_redis__get_progress,
};

static const SluiceBrokerRates redis_rates = {
    .version = SLUICE_BROKER_RATES_VERSION,
    .rate_acquire = sluice_redis__rate_acquire,
};

static const SluiceBrokerSlots redis_slots = {
    .version = SLUICE_BROKER_SLOTS_VERSION,
    .slot_acquire = sluice_redis__slot_acquire,
    .slot_release = sluice_redis__slot_release,
    .list_slots = sluice_redis__list_slots,
};

static const SluiceBrokerUnique redis_unique = {
    .version = SLUICE_BROKER_UNIQUE_VERSION,
    .unique_enqueue = sluice_redis__unique_enqueue,
    .unique_update = sluice_redis__unique_update,
};

/* The class of transport @t: the shared slots, with `reclaim` and
 * `count_reclaimable` only when the transport has them. */
static void
redis_class_init(SluiceBrokerClass *klass, const SluiceRedisTransport *t)
{
  memset(klass, 0, sizeof *klass);
  klass->version = SLUICE_BROKER_CLASS_VERSION;
  klass->name = t->name;
  klass->instance_size = sizeof(SluiceRedisBroker);
  klass->caps = t->caps;
  /* produce */
  klass->enqueue = sluice_redis__enqueue;
  /* consume */
  klass->fetch = sluice_redis__fetch;
  klass->settle = sluice_redis__settle;
  klass->heartbeat = sluice_redis__heartbeat;
  klass->reclaim = t->reclaim != NULL ? sluice_redis__reclaim : NULL;
  klass->count_reclaimable =
      t->count_reclaimable != NULL ? sluice_redis__count_reclaimable : NULL;
  klass->leave = sluice_redis__leave;
  klass->wakeup = sluice_redis__wakeup;
  /* schedule */
  klass->promote_due = sluice_redis__promote_due;
  klass->cancel_scheduled = sluice_redis__cancel_scheduled;
  /* records */
  klass->get_record = sluice_redis__get_record;
  klass->put_record = sluice_redis__put_record;
  klass->put_records = sluice_redis__put_records;
  klass->wait_record = sluice_redis__wait_record;
  klass->lookup_task = sluice_redis__lookup_task;
  /* revocations */
  klass->revoke = sluice_redis__revoke;
  klass->list_revocations = sluice_redis__list_revocations;
  /* dead letters */
  klass->dlq_list = sluice_redis__dlq_list;
  klass->dlq_get = sluice_redis__dlq_get;
  klass->dlq_replay = sluice_redis__dlq_replay;
  klass->dlq_delete = sluice_redis__dlq_delete;
  /* stats and workers */
  klass->stats = sluice_redis__stats;
  klass->announce = sluice_redis__announce;
  klass->check = sluice_redis__check;
  /* lifecycle */
  klass->close = redis_close;
  klass->finalize = redis_finalize;
  /* optional families */
  klass->steering = &redis_steering;
  klass->periodic = &redis_periodic;
  klass->joins = &redis_joins;
  klass->events = &redis_events;
  klass->rates = &redis_rates;
  klass->slots = &redis_slots;
  klass->unique = &redis_unique;
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

/* ---- URLs ----------------------------------------------------------------
 *
 * The network layer parses what a connection needs (net/url.c) and hands
 * back every other query parameter: these are the broker's, refused by
 * name when unknown, as a URL typo must not pass silently.
 */

static const gchar *const url_param_names[] = {"partitions", "min_replicas_ack",
                                               "min_replicas_timeout_ms", NULL};

gboolean
sluice_redis__parse_url(const gchar *text, SluiceRedisUrl *url,
                        SluiceRedisUrlParams *params, GError **error)
{
  SluiceRedisUrl parsed = {0};
  SluiceRedisUrlParams got = {0, -1, -1};

  if (!sluice_redis_url__parse(text, &parsed, error))
    return FALSE;
  for (guint i = 0; i < parsed.n_params; i++) {
    const gchar *name = parsed.params[i].name;
    const gchar *value = parsed.params[i].value;
    const gchar *why = NULL;
    guint64 n;

    if (strcmp(name, "partitions") == 0) {
      if (g_ascii_string_to_unsigned(value, 10, 1, SLUICE_REDIS_MAX_PARTITIONS,
                                     &n, NULL))
        got.partitions = (guint)n;
      else
        why = "partitions=N takes a number from 1 "
              "to " G_STRINGIFY(SLUICE_REDIS_MAX_PARTITIONS);
    } else if (strcmp(name, "min_replicas_ack") == 0) {
      if (g_ascii_string_to_unsigned(value, 10, 0, 100, &n, NULL))
        got.min_replicas_ack = (gint)n;
      else
        why = "min_replicas_ack must be a number of replicas from 0 to 100";
    } else if (strcmp(name, "min_replicas_timeout_ms") == 0) {
      if (g_ascii_string_to_unsigned(value, 10, 1, 3600 * 1000, &n, NULL))
        got.min_replicas_timeout_ms = (gint64)n;
      else
        why = "min_replicas_timeout_ms must be a number of milliseconds "
              "from 1 to 3600000";
    } else {
      sluice_redis_url__refuse_unknown(&parsed, name, url_param_names, error);
      sluice_redis_url__clear(&parsed);
      return FALSE;
    }
    if (why != NULL) {
      sluice_redis_url__refuse(&parsed, why, error);
      sluice_redis_url__clear(&parsed);
      return FALSE;
    }
  }
  *url = parsed;
  *params = got;
  return TRUE;
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

/* The class of each transport, built once and kept for the process, so
 * that sluice_broker_is_a() recognises a Redis broker by its class. */
static SluiceBrokerClass redis_classes[G_N_ELEMENTS(transports)];

static const SluiceBrokerClass *
redis_class(gsize i)
{
  static gsize built[G_N_ELEMENTS(transports)];

  if (g_once_init_enter(&built[i])) {
    redis_class_init(&redis_classes[i], transports[i].get());
    g_once_init_leave(&built[i], 1);
  }
  return &redis_classes[i];
}

static gboolean
sluice_redis__is_redis(SluiceBroker *broker)
{
  for (gsize i = 0; i < G_N_ELEMENTS(transports); i++)
    if (sluice_broker_is_a(broker, redis_class(i)))
      return TRUE;
  return FALSE;
}

/* A plain Redis broker of the namespace of @options: its partition @index
 * of @n, or the whole namespace with @index -1. @layout (transfer full,
 * nullable) becomes its gate: the check made before its first command. */
static SluiceBroker *
sluice_redis__partition_new(const SluiceRedisOptions *options,
                            const SluiceRedisUrl *url, SluiceClock *clock,
                            gint index, guint n, SluiceRedisLayout *layout,
                            GError **error)
{
  const SluiceRedisTransport *transport = NULL;
  const gchar *meta_mode = NULL;
  const SluiceBrokerClass *klass = NULL;
  SluiceRedisBroker *self;
  SluiceBroker *broker;
  const gchar *ns =
      options->ns != NULL ? options->ns : SLUICE_REDIS_DEFAULT_NAMESPACE;

  for (gsize i = 0; i < G_N_ELEMENTS(transports) && transport == NULL; i++)
    if (transports[i].mode == options->mode) {
      transport = transports[i].get();
      meta_mode = transports[i].meta_mode;
      klass = redis_class(i);
    }
  if (transport == NULL) {
    sluice_redis_layout__free(layout);
    g_set_error_literal(error, SLUICE_BROKER_ERROR,
                        SLUICE_BROKER_ERROR_UNSUPPORTED,
                        "unknown Redis mode: use SLUICE_REDIS_FAST or "
                        "SLUICE_REDIS_RELIABLE");
    return NULL;
  }

  broker = sluice_broker_new(klass, clock, error);
  if (broker == NULL) {
    sluice_redis_layout__free(layout);
    return NULL;
  }
  self = SLUICE_REDIS_BROKER(broker);
  self->transport = transport;
  if (layout != NULL)
    self->gate = (SluiceRedisGate){sluice_redis_layout__ensure, layout,
                                   sluice_redis_layout__free};
  {
    /* The pool picks the path to the servers from the URL (one server,
     * Sentinel or Cluster). */
    SluiceRedisPoolOptions pool_options = {
        .connect_timeout_ms = options->connect_timeout_ms > 0
                                  ? options->connect_timeout_ms
                                  : SLUICE_REDIS_DEFAULT_CONNECT_TIMEOUT_MS,
        .command_timeout_ms = options->command_timeout_ms > 0
                                  ? options->command_timeout_ms
                                  : SLUICE_REDIS_DEFAULT_COMMAND_TIMEOUT_MS,
        .max_backoff_ms = options->reconnect_max_backoff_ms > 0
                              ? options->reconnect_max_backoff_ms
                              : SLUICE_REDIS_DEFAULT_BACKOFF_MS,
    };

    self->pool = sluice_redis_pool__new(url, &pool_options);
  }
  /* The URL's min_replicas_* are merged into @options already
   * (sluice_redis_broker_new()). */
  self->min_replicas_ack = options->min_replicas_ack;
  self->min_replicas_timeout_ms =
      options->min_replicas_timeout_ms > 0
          ? options->min_replicas_timeout_ms
          : SLUICE_REDIS_DEFAULT_MIN_REPLICAS_TIMEOUT_MS;
  if (index < 0)
    sluice_redis_keys__init(&self->keys, ns);
  else
    sluice_redis_keys__init_partition(&self->keys, ns, (guint)index, n);
  self->meta_key =
      sluice_redis_keys__make(&self->keys, SLUICE_REDIS_K_META, NULL);
  self->meta_mode = meta_mode;
  self->mode_setting = g_strdup(options->mode_setting);
  g_mutex_init(&self->policy_lock);
  self->policy_checked =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  /* Permission messages name the namespace's keys; every new connection
   * checks the namespace's mode (redis-broker.c). */
  sluice_redis_pool__set_namespace(self->pool, ns);
  sluice_redis_pool__set_setup(self->pool, sluice_redis_broker__setup, self);
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

/* Its connections log nothing about the server's configuration: for a
 * broker whose servers another broker of the client checks already. */
static void
sluice_redis__skip_policy_check(SluiceBroker *broker)
{
  g_atomic_int_set(&SLUICE_REDIS_BROKER(broker)->quiet, 1);
}

/* The SluiceRedisPartBuilder of the layout check. */
static SluiceBroker *
build_part(const SluiceRedisOptions *options, const SluiceRedisUrl *url,
           gint index, guint n, GError **error)
{
  SluiceBroker *part =
      sluice_redis__partition_new(options, url, NULL, index, n, NULL, error);

  /* The client's own broker tells the user about the server. */
  if (part != NULL)
    sluice_redis__skip_policy_check(part);
  return part;
}

/* The SluiceRedisPartBuilder of sluice_redis_get_layout(): its brokers'
 * connections record nothing. */
static SluiceBroker *
build_inspector(const SluiceRedisOptions *options, const SluiceRedisUrl *url,
                gint index, guint n, GError **error)
{
  SluiceBroker *part = build_part(options, url, index, n, error);

  if (part != NULL)
    SLUICE_REDIS_BROKER(part)->inspect = TRUE;
  return part;
}

/* What the composite of a namespace of partitions needs of its parts
 * beyond the contract (redis-partitions.h). */
static const SluiceRedisPartitionOps partition_ops = {
    .periodic_gate = sluice_redis__periodic_gate,
    .dlq_oldest = sluice_redis__dlq_oldest,
    .dlq_drop = sluice_redis__dlq_drop,
};

/* The broker of a namespace of @n > 1 partitions: its parts, then the
 * composite over them, gated by the layout check. */
static SluiceBroker *
partitioned_new(const SluiceRedisOptions *options, const SluiceRedisUrl *url,
                SluiceClock *clock, guint n, GError **error)
{
  SluiceBroker **parts = g_new0(SluiceBroker *, n);
  const gchar *ns =
      options->ns != NULL ? options->ns : SLUICE_REDIS_DEFAULT_NAMESPACE;
  guint dead_letter_max;

  for (guint k = 0; k < n; k++) {
    parts[k] = sluice_redis__partition_new(options, url, clock, (gint)k, n,
                                           NULL, error);
    if (parts[k] == NULL) {
      for (guint j = 0; j < k; j++)
        sluice_broker_unref(parts[j]);
      g_free(parts);
      return NULL;
    }
    /* On one server, partition 0 tells the user about its configuration
     * once; on a cluster each partition's master may differ, so each
     * partition looks at its own. */
    if (k > 0 && !url->is_cluster)
      sluice_redis__skip_policy_check(parts[k]);
  }
  dead_letter_max = SLUICE_REDIS_BROKER(parts[0])->dead_letter_max;
  return sluice_redis__partitioned_new(
      parts, n, &partition_ops,
      sluice_redis_layout__new(options, url, n, build_part), ns,
      dead_letter_max, clock, error);
}

SluiceBroker *
sluice_redis_broker_new(const SluiceRedisOptions *options, SluiceClock *clock,
                        GError **error)
{
  SluiceRedisOptions defaults;
  SluiceRedisOptions merged;
  SluiceRedisUrl url = {0};
  SluiceRedisUrlParams params;
  SluiceBroker *broker;
  guint n;

  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  if (options == NULL) {
    sluice_redis_options_init(&defaults);
    options = &defaults;
  }
  if (!sluice_redis_keys__valid_namespace(
          options->ns != NULL ? options->ns : SLUICE_REDIS_DEFAULT_NAMESPACE,
          error))
    return NULL;
  if (!sluice_redis__parse_url(options->url != NULL ? options->url
                                                    : SLUICE_REDIS_DEFAULT_URL,
                               &url, &params, error))
    return NULL;
  if (options->partitions > SLUICE_REDIS_MAX_PARTITIONS ||
      (options->partitions > 0 && params.partitions > 0 &&
       options->partitions != params.partitions)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                options->partitions > SLUICE_REDIS_MAX_PARTITIONS
                    ? "SluiceRedisOptions.partitions is %u (URL: %u): a "
                      "namespace has 1 to " G_STRINGIFY(
                          SLUICE_REDIS_MAX_PARTITIONS) " partitions"
                    : "SluiceRedisOptions.partitions is %u but the URL says "
                      "partitions=%u: give the number in one place only",
                options->partitions, params.partitions);
    sluice_redis_url__clear(&url);
    return NULL;
  }
  n = options->partitions > 0 ? options->partitions
      : params.partitions > 0 ? params.partitions
                              : 1;
  {
    /* TLS: the options' fields join the URL's parameters, and the files
     * are read now, once for every partition and node: a CA file that
     * cannot be read is a mistake in the options, not an outage. */
    SluiceRedisTlsConfig tls = {
        .ca_file = options->tls_ca_file,
        .ca_dir = options->tls_ca_dir,
        .cert = options->tls_cert,
        .key = options->tls_key,
        .server_name = options->tls_server_name,
        .min_version = options->tls_min_version == SLUICE_REDIS_TLS_1_3   ? 13
                       : options->tls_min_version == SLUICE_REDIS_TLS_1_2 ? 12
                                                                          : 0,
        .insecure = options->tls_insecure,
    };

    if (!sluice_redis_url__merge_tls(&url, &tls, "SluiceRedisOptions", error) ||
        !sluice_redis_url__prepare_tls(&url, error)) {
      sluice_redis_url__clear(&url);
      return NULL;
    }
  }
  /* What the options leave unset, the URL may say: every broker below
   * reads the options alone. */
  merged = *options;
  if (merged.min_replicas_ack == 0 && params.min_replicas_ack > 0)
    merged.min_replicas_ack = (guint)params.min_replicas_ack;
  if (merged.min_replicas_timeout_ms <= 0 && params.min_replicas_timeout_ms > 0)
    merged.min_replicas_timeout_ms = params.min_replicas_timeout_ms;
  if (n == 1)
    broker = sluice_redis__partition_new(
        &merged, &url, clock, -1, 1,
        sluice_redis_layout__new(&merged, &url, 1, build_part), error);
  else
    broker = partitioned_new(&merged, &url, clock, n, error);
  sluice_redis_url__clear(&url);
  return broker;
}

gboolean
sluice_redis_broker_ping(SluiceBroker *broker, GError **error)
{
  g_return_val_if_fail(broker != NULL, FALSE);
  if (sluice_redis__is_partitioned(broker))
    return sluice_broker_check(broker, error);
  g_return_val_if_fail(sluice_redis__is_redis(broker), FALSE);
  return sluice_redis__check(broker, error);
}

gboolean
sluice_redis_get_layout(const SluiceRedisOptions *options, SluiceLayout *out,
                        GError **error)
{
  SluiceRedisUrl url = {0};
  SluiceRedisUrlParams params;
  gboolean ok;

  g_return_val_if_fail(options != NULL && out != NULL, FALSE);
  if (!sluice_redis_keys__valid_namespace(
          options->ns != NULL ? options->ns : SLUICE_REDIS_DEFAULT_NAMESPACE,
          error) ||
      !sluice_redis__parse_url(options->url != NULL ? options->url
                                                    : SLUICE_REDIS_DEFAULT_URL,
                               &url, &params, error))
    return FALSE;
  ok = sluice_redis_layout__read(options, &url, build_inspector, out, error);
  sluice_redis_url__clear(&url);
  return ok;
}

gboolean
sluice_redis_migrate(const SluiceRedisOptions *options, SluiceLayout *out,
                     GError **error)
{
  g_autoptr(SluiceBroker) broker = NULL;

  g_return_val_if_fail(options != NULL, FALSE);
  /* A first connection of each partition's broker, and the partitions'
   * check, record what the namespace lacks. */
  broker = sluice_redis_broker_new(options, NULL, error);
  if (broker == NULL || !sluice_redis_broker_ping(broker, error))
    return FALSE;
  return out == NULL || sluice_redis_get_layout(options, out, error);
}

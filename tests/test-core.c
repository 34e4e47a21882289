/* test-core.c - the core without a real broker: retry policy, registry,
 * broker registration and the dispatch layer's fallbacks, cron.
 *
 * The dispatch layer is tested against a fake broker that implements only
 * the required slots and counts calls, in the manner of libgit2's
 * fake_backend: it proves that a broker without optional slots and tables
 * gets the documented fallbacks, and that registration refuses an
 * incomplete class or table, naming the slot.
 */
#include "config.h"

#include <check.h>
#include <glib/gstdio.h>
#include <langinfo.h>
#include <locale.h>
#include <string.h>

#include "lib/sluice-private.h"

/* ---- Retry policy -------------------------------------------------------- */

START_TEST(default_backoff_sequence_and_cap)
{
  static const gint64 expected[] = {1500,  3000,  6000,  12000,
                                    24000, 30000, 30000, 30000};
  SluiceRetryPolicy p;

  sluice_retry_policy_resolve(&p, NULL, NULL, NULL);
  ck_assert_uint_eq(p.max_attempts, 3);
  ck_assert_int_eq(p.jitter, SLUICE_ON);
  p.jitter = SLUICE_OFF;
  for (guint i = 0; i < G_N_ELEMENTS(expected); i++)
    ck_assert_int_eq(sluice_retry_policy_backoff_ms(&p, i + 1, NULL),
                     expected[i]);
  /* Huge attempt numbers overflow pow() to infinity; the cap holds. */
  ck_assert_int_eq(sluice_retry_policy_backoff_ms(&p, 100000, NULL), 30000);
}
END_TEST

START_TEST(jitter_stays_within_half_to_full_delay)
{
  SluiceRetryPolicy p;
  g_autoptr(GRand) rand = g_rand_new_with_seed(42);
  gint64 lowest = G_MAXINT64, highest = 0;

  sluice_retry_policy_init_default(&p);
  for (guint attempt = 1; attempt <= 8; attempt++) {
    gint64 nominal = MIN(1500 * (1 << (attempt - 1)), 30000);
    for (guint i = 0; i < 2000; i++) {
      gint64 d = sluice_retry_policy_backoff_ms(&p, attempt, rand);
      ck_assert_int_ge(d, nominal / 2);
      ck_assert_int_le(d, nominal);
      if (attempt == 1) {
        lowest = MIN(lowest, d);
        highest = MAX(highest, d);
      }
    }
  }
  /* Jitter spreads: 2000 draws cover most of [750, 1500]. */
  ck_assert_int_lt(lowest, 800);
  ck_assert_int_gt(highest, 1450);
}
END_TEST

START_TEST(policy_resolution_is_per_field)
{
  SluiceRetryPolicy global, task, message, out;

  sluice_retry_policy_init_unset(&global);
  sluice_retry_policy_init_unset(&task);
  sluice_retry_policy_init_unset(&message);
  global.max_attempts = 9;
  global.initial_backoff_ms = 100;
  global.jitter = SLUICE_OFF;
  task.initial_backoff_ms = 0; /* 0 is a value: retry at once */
  task.max_backoff_ms = 5000;
  message.max_attempts = 2;

  sluice_retry_policy_resolve(&out, &global, &task, &message);
  ck_assert_uint_eq(out.max_attempts, 2);      /* message */
  ck_assert_int_eq(out.initial_backoff_ms, 0); /* task */
  ck_assert_int_eq(out.max_backoff_ms, 5000);  /* task */
  ck_assert_int_eq(out.jitter, SLUICE_OFF);    /* global */
  ck_assert(out.multiplier == 2.0);            /* default */

  /* A level that sets nothing changes nothing. */
  sluice_retry_policy_resolve(&out, &global, NULL, &message);
  ck_assert_int_eq(out.initial_backoff_ms, 100);
  ck_assert_int_eq(out.max_backoff_ms, 30000);
}
END_TEST

/* ---- Registry ------------------------------------------------------------ */

static gboolean
noop_task(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  return TRUE;
}

static void
count_destroy(gpointer data)
{
  (*(guint *)data)++;
}

static gboolean
task_nothing(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  return TRUE;
}

/* One "unset": SLUICE_RETRY_UNSET in every numeric field; a set value out
 * of range is refused wherever a policy is given; 0 on the wire stays
 * "unset", as PROTOCOL.md says. */
START_TEST(retry_policy_has_one_unset_and_refuses_zero_attempts)
{
  SluiceRetryPolicy unset, out;
  SluiceTaskOptions to;
  SluiceWorkerOptions wo;
  SluiceEnqueueOptions eo;
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(SluiceBroker) broker = sluice_memory_broker_new(NULL, NULL);
  g_autoptr(SluiceClient) client = sluice_client_new(broker, NULL, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) wire = NULL;
  g_autoptr(SluiceEnvelope) env = NULL;
  static const gchar json[] =
      "{\"v\":1,\"id\":\"a\",\"task\":\"t\",\"queue\":\"q\",\"attempt\":1,"
      "\"opts\":{\"max_attempts\":0,\"multiplier\":0}}";

  sluice_retry_policy_init_unset(&unset);
  ck_assert_int_eq(unset.max_attempts, SLUICE_RETRY_UNSET);
  ck_assert_int_eq(unset.initial_backoff_ms, SLUICE_RETRY_UNSET);
  ck_assert(unset.multiplier == SLUICE_RETRY_UNSET);
  ck_assert_int_eq(unset.max_backoff_ms, SLUICE_RETRY_UNSET);
  sluice_retry_policy_resolve(&out, NULL, NULL, &unset);
  ck_assert_int_eq(out.max_attempts, SLUICE_DEFAULT_MAX_ATTEMPTS);

  sluice_task_options_init(&to);
  to.retry.max_attempts = 0;
  ck_assert(!sluice_registry_add(registry, "t.zero", task_nothing, NULL, NULL,
                                 &to, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "max_attempts"));
  g_clear_error(&error);

  sluice_worker_options_init(&wo);
  wo.retry.max_attempts = 0;
  ck_assert_ptr_null(sluice_worker_new(broker, registry, &wo, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "max_attempts"));
  g_clear_error(&error);

  sluice_enqueue_options_init(&eo);
  eo.options.retry.max_attempts = 0;
  ck_assert_ptr_null(
      sluice_client_enqueue(client, "t.zero", NULL, &eo, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "max_attempts"));
  g_clear_error(&error);

  wire = g_bytes_new_static(json, sizeof json - 1);
  env = sluice_envelope_decode(wire, NULL, &error);
  ck_assert_msg(env != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_int_eq(env->opts.retry.max_attempts, SLUICE_RETRY_UNSET);
  ck_assert(env->opts.retry.multiplier == SLUICE_RETRY_UNSET);
}
END_TEST

/* Ids, task names and queue names are checked by one rule, with one set of
 * limits, wherever they come in: enqueue, registration, worker options and
 * a decoded message. */
START_TEST(names_follow_one_rule_everywhere)
{
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(SluiceBroker) broker = sluice_memory_broker_new(NULL, NULL);
  g_autoptr(SluiceClient) client = sluice_client_new(broker, NULL, NULL);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *long_queue = g_strnfill(SLUICE_MAX_NAME_BYTES + 1, 'q');
  g_autofree gchar *long_id = g_strnfill(SLUICE_MAX_ID_BYTES + 1, 'i');
  const gchar *queues[] = {long_queue, NULL};
  SluiceWorkerOptions wo;
  SluiceEnqueueOptions eo;
  static const gchar spaced[] =
      "{\"v\":1,\"id\":\"a\",\"task\":\"my task\",\"queue\":\"q\","
      "\"attempt\":1}";
  g_autoptr(GBytes) wire = g_bytes_new_static(spaced, sizeof spaced - 1);

  ck_assert_ptr_null(
      sluice_client_enqueue(client, "my task", NULL, NULL, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "task name"));
  g_clear_error(&error);
  ck_assert(!sluice_registry_add(registry, "my task", task_nothing, NULL, NULL,
                                 NULL, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "task name"));
  g_clear_error(&error);
  ck_assert_ptr_null(sluice_envelope_decode(wire, NULL, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "task name"));
  g_clear_error(&error);

  sluice_worker_options_init(&wo);
  wo.queues = queues;
  ck_assert_ptr_null(sluice_worker_new(broker, registry, &wo, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "limit is 200"));
  g_clear_error(&error);
  sluice_enqueue_options_init(&eo);
  eo.queue = long_queue;
  ck_assert_ptr_null(sluice_client_enqueue(client, "ok", NULL, &eo, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "limit is 200"));
  g_clear_error(&error);
  sluice_enqueue_options_init(&eo);
  eo.id = long_id;
  ck_assert_ptr_null(sluice_client_enqueue(client, "ok", NULL, &eo, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "limit is 256"));
}
END_TEST

START_TEST(registry_rejects_duplicates_and_bad_names)
{
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) names = NULL;
  guint destroyed = 0;
  SluiceTaskOptions options, got;

  sluice_task_options_init(&options);
  options.queue = "mail";
  options.timeout_ms = 500;
  ck_assert(sluice_registry_add(registry, "mail.send", noop_task, &destroyed,
                                count_destroy, &options, &error));
  ck_assert(sluice_registry_add(registry, "a.first", noop_task, NULL, NULL,
                                NULL, &error));

  ck_assert(!sluice_registry_add(registry, "mail.send", noop_task, &destroyed,
                                 count_destroy, NULL, &error));
  ck_assert(
      g_error_matches(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_DUPLICATE));
  ck_assert_uint_eq(destroyed, 0); /* the caller keeps its data on failure */
  g_clear_error(&error);

  ck_assert(!sluice_registry_add(registry, "has space", noop_task, NULL, NULL,
                                 NULL, &error));
  ck_assert(
      g_error_matches(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_INVALID));
  g_clear_error(&error);
  ck_assert(
      !sluice_registry_add(registry, "", noop_task, NULL, NULL, NULL, &error));
  g_clear_error(&error);

  ck_assert(sluice_registry_get_options(registry, "mail.send", &got));
  ck_assert_str_eq(got.queue, "mail");
  ck_assert_int_eq(got.timeout_ms, 500);
  ck_assert(!sluice_registry_contains(registry, "nope"));
  names = sluice_registry_list(registry);
  ck_assert_uint_eq(g_strv_length(names), 2);
  ck_assert_str_eq(names[0], "a.first");
  ck_assert_str_eq(names[1], "mail.send");

  g_clear_pointer(&registry, sluice_registry_unref);
  ck_assert_uint_eq(destroyed, 1);
}
END_TEST

/* ---- A fake broker: required slots only, counting calls ------------------ */

typedef struct {
  SluiceBroker parent;
  guint get_record_calls;
  guint final_after;  /* get_record returns a final record from this call */
  gboolean misbehave; /* enqueue returns FALSE without an error */
} FakeBroker;

static gboolean
fake_enqueue(SluiceBroker *b, SluiceSubmit *items, guint n, GError **error)
{
  return !((FakeBroker *)b)->misbehave;
}

static gboolean
fake_fetch(SluiceBroker *b, const gchar *consumer, const gchar *const *queues,
           guint max, gint64 block_ms, GPtrArray *out, GError **error)
{
  return TRUE;
}

static gboolean
fake_settle(SluiceBroker *b, const gchar *consumer, SluiceSettlement *items,
            guint n, GError **error)
{
  return TRUE;
}

static gboolean
fake_promote(SluiceBroker *b, gint64 now, guint max, guint *promoted,
             gint64 *next_due, GError **error)
{
  *promoted = 0;
  *next_due = 0;
  return TRUE;
}

static gboolean
fake_cancel(SluiceBroker *b, const gchar *id, GBytes *record, gint64 ttl,
            gboolean *removed, GError **error)
{
  *removed = FALSE;
  return TRUE;
}

static gboolean
fake_get_record(SluiceBroker *b, const gchar *id, GBytes **out, GError **error)
{
  FakeBroker *self = (FakeBroker *)b;
  g_autoptr(SluiceResult) r = NULL;

  self->get_record_calls++;
  r = sluice_result_new(id, self->get_record_calls >= self->final_after
                                ? SLUICE_STATE_SUCCEEDED
                                : SLUICE_STATE_RUNNING);
  *out = sluice_result_encode(r);
  return TRUE;
}

static gboolean
fake_put_record(SluiceBroker *b, const gchar *id, GBytes *record,
                gboolean final, gint64 ttl, GError **error)
{
  return TRUE;
}

static gboolean
fake_revoke(SluiceBroker *b, const gchar *id, gint64 expires_at, GError **error)
{
  return TRUE;
}

static gboolean
fake_list_revocations(SluiceBroker *b, gint64 cursor, gint64 now,
                      GPtrArray *out, gint64 *out_cursor, GError **error)
{
  *out_cursor = cursor;
  return TRUE;
}

static gboolean
fake_dlq_list(SluiceBroker *b, const gchar *after, guint limit, GPtrArray *out,
              GError **error)
{
  return TRUE;
}

static gboolean
fake_dlq_get(SluiceBroker *b, const gchar *entry_id, SluiceDeadLetter **out,
             GError **error)
{
  g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_NOT_FOUND,
              "none");
  return FALSE;
}

static gboolean
fake_dlq_replay(SluiceBroker *b, const gchar *entry_id, SluiceSubmit *item,
                gboolean *found, GError **error)
{
  *found = FALSE;
  return TRUE;
}

static gboolean
fake_dlq_delete(SluiceBroker *b, const gchar *entry_id, gboolean *found,
                GError **error)
{
  *found = FALSE;
  return TRUE;
}

static gboolean
fake_stats(SluiceBroker *b, const gchar *const *queues, SluiceBrokerStats *out,
           GError **error)
{
  return TRUE;
}

static void
fake_finalize(SluiceBroker *b)
{
}

static const SluiceBrokerClass fake_class = {
    .version = SLUICE_BROKER_CLASS_VERSION,
    .name = "fake",
    .instance_size = sizeof(FakeBroker),
    .enqueue = fake_enqueue,
    .fetch = fake_fetch,
    .settle = fake_settle,
    .promote_due = fake_promote,
    .cancel_scheduled = fake_cancel,
    .get_record = fake_get_record,
    .put_record = fake_put_record,
    .revoke = fake_revoke,
    .list_revocations = fake_list_revocations,
    .dlq_list = fake_dlq_list,
    .dlq_get = fake_dlq_get,
    .dlq_replay = fake_dlq_replay,
    .dlq_delete = fake_dlq_delete,
    .stats = fake_stats,
    .finalize = fake_finalize,
};

static gboolean
fake_unique_enqueue(SluiceBroker *self, SluiceUniqueSubmit *items, guint n,
                    GError **error)
{
  return TRUE;
}

static gboolean
fake_unique_update(SluiceBroker *self, SluiceUniqueUpdate *items, guint n,
                   GError **error)
{
  return TRUE;
}

static gboolean
fake_list_paused(SluiceBroker *self, GPtrArray *out, GError **error)
{
  return TRUE;
}

static gboolean
fake_count_reclaimable(SluiceBroker *b, const gchar *consumer,
                       const gchar *const *queues, guint max, gint64 idle_ms,
                       guint *out_n, GError **error)
{
  *out_n = 0;
  return TRUE;
}

static const struct {
  const gchar *name;
  glong offset;
} required[] = {
#define SLOT(f)                                                                \
  {                                                                            \
    G_STRINGIFY(f), G_STRUCT_OFFSET(SluiceBrokerClass, f)                      \
  }
    SLOT(enqueue),          SLOT(fetch),
    SLOT(settle),           SLOT(promote_due),
    SLOT(cancel_scheduled), SLOT(get_record),
    SLOT(put_record),       SLOT(revoke),
    SLOT(list_revocations), SLOT(dlq_list),
    SLOT(dlq_get),          SLOT(dlq_replay),
    SLOT(dlq_delete),       SLOT(stats),
    SLOT(finalize),
#undef SLOT
};

START_TEST(registration_rejects_each_missing_required_slot)
{
  SluiceBrokerClass klass = fake_class;
  g_autoptr(GError) error = NULL;
  SluiceBroker *broker;

  G_STRUCT_MEMBER(gpointer, &klass, required[_i].offset) = NULL;
  broker = sluice_broker_new(&klass, NULL, &error);
  ck_assert_ptr_null(broker);
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_INCOMPLETE));
  ck_assert_msg(strstr(error->message, required[_i].name) != NULL,
                "the error does not name the slot %s: %s", required[_i].name,
                error->message);
}
END_TEST

START_TEST(registration_rejects_unknown_versions_and_bad_sizes)
{
  SluiceBrokerClass klass = fake_class;
  g_autoptr(GError) error = NULL;

  klass.version = SLUICE_BROKER_CLASS_VERSION + 1;
  ck_assert_ptr_null(sluice_broker_new(&klass, NULL, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_VERSION));
  ck_assert_ptr_nonnull(strstr(error->message, "rebuild"));
  g_clear_error(&error);

  klass.version = 0;
  ck_assert_ptr_null(sluice_broker_new(&klass, NULL, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_VERSION));
  g_clear_error(&error);

  klass = fake_class;
  klass.instance_size = sizeof(SluiceBroker) - 1;
  ck_assert_ptr_null(sluice_broker_new(&klass, NULL, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID));
  g_clear_error(&error);

  klass = fake_class;
  klass.caps = SLUICE_BROKER_CAP_LEASES; /* without heartbeat and reclaim */
  ck_assert_ptr_null(sluice_broker_new(&klass, NULL, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_INCOMPLETE));
  ck_assert_ptr_nonnull(strstr(error->message, "heartbeat"));
  g_clear_error(&error);

  /* A slot the core only calls with LEASES, on a broker without them. */
  klass = fake_class;
  klass.count_reclaimable = fake_count_reclaimable;
  ck_assert_ptr_null(sluice_broker_new(&klass, NULL, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_INCOMPLETE));
  ck_assert_ptr_nonnull(strstr(error->message, "count_reclaimable"));
}
END_TEST

/* A table is absent or complete: a table with a NULL slot is refused, and
 * the error names the slot as "table.slot". */
START_TEST(registration_names_the_missing_slot_of_a_table)
{
  static const SluiceBrokerSteering half_steering = {
      .version = SLUICE_BROKER_STEERING_VERSION,
      .list_paused = fake_list_paused, /* a pause nobody can set */
  };
  static const SluiceBrokerUnique half_unique = {
      .version = SLUICE_BROKER_UNIQUE_VERSION,
      .unique_enqueue = fake_unique_enqueue, /* claims nobody can end */
  };
  SluiceBrokerClass klass = fake_class;
  g_autoptr(GError) error = NULL;

  klass.steering = &half_steering;
  ck_assert_ptr_null(sluice_broker_new(&klass, NULL, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_INCOMPLETE));
  ck_assert_msg(strstr(error->message, "“steering.list_queued”") != NULL, "%s",
                error->message);
  g_clear_error(&error);

  klass = fake_class;
  klass.unique = &half_unique;
  ck_assert_ptr_null(sluice_broker_new(&klass, NULL, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_INCOMPLETE));
  ck_assert_msg(strstr(error->message, "“unique.unique_update”") != NULL, "%s",
                error->message);
}
END_TEST

/* A table's version: 0 (never set) and one newer than this Sluice knows
 * are refused, naming the table. */
START_TEST(registration_refuses_a_table_version_it_does_not_know)
{
  SluiceBrokerUnique unique = {
      .version = SLUICE_BROKER_UNIQUE_VERSION + 1,
      .unique_enqueue = fake_unique_enqueue,
      .unique_update = fake_unique_update,
  };
  SluiceBrokerClass klass = fake_class;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker = NULL;

  klass.unique = &unique;
  ck_assert_ptr_null(sluice_broker_new(&klass, NULL, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_VERSION));
  ck_assert_msg(strstr(error->message, "unique table") != NULL &&
                    strstr(error->message, "rebuild") != NULL,
                "%s", error->message);
  g_clear_error(&error);

  unique.version = 0;
  ck_assert_ptr_null(sluice_broker_new(&klass, NULL, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_VERSION));
  ck_assert_ptr_nonnull(strstr(error->message, "SLUICE_BROKER_"));
  g_clear_error(&error);

  unique.version = SLUICE_BROKER_UNIQUE_VERSION;
  broker = sluice_broker_new(&klass, NULL, &error);
  ck_assert_msg(broker != NULL, "%s", error != NULL ? error->message : "");
  ck_assert(sluice_broker_supports(broker, SLUICE_BROKER_FEATURE_UNIQUE));
  /* The table was copied: scribbling on it afterwards changes nothing. */
  unique.unique_update = NULL;
  {
    SluiceUniqueUpdate u = {
        .key = "k", .id = "a", .action = SLUICE_UNIQUE_CHECK};
    ck_assert(sluice_broker_unique_update(broker, &u, 1, &error));
  }
}
END_TEST

/* supports() answers for capabilities and tables alike, from the class
 * alone; is_a() recognises the class a broker was made with. */
START_TEST(supports_answers_for_caps_and_tables)
{
  static const SluiceBrokerUnique unique = {
      .version = SLUICE_BROKER_UNIQUE_VERSION,
      .unique_enqueue = fake_unique_enqueue,
      .unique_update = fake_unique_update,
  };
  static SluiceBrokerClass klass;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) plain = sluice_broker_new(&fake_class, NULL, &error);
  g_autoptr(SluiceBroker) rich = NULL;

  klass = fake_class;
  klass.caps = SLUICE_BROKER_CAP_DURABLE | SLUICE_BROKER_CAP_ORDERED;
  klass.unique = &unique;
  rich = sluice_broker_new(&klass, NULL, &error);
  ck_assert_ptr_nonnull(rich);
  for (SluiceBrokerFeature f = SLUICE_BROKER_FEATURE_SHARED;
       f <= SLUICE_BROKER_FEATURE_COUNT_RECLAIMABLE; f++)
    ck_assert_msg(!sluice_broker_supports(plain, f), "%s",
                  sluice_broker_feature_name(f));
  ck_assert(sluice_broker_supports(rich, SLUICE_BROKER_FEATURE_DURABLE));
  ck_assert(sluice_broker_supports(rich, SLUICE_BROKER_FEATURE_ORDERED));
  ck_assert(sluice_broker_supports(rich, SLUICE_BROKER_FEATURE_UNIQUE));
  ck_assert(!sluice_broker_supports(rich, SLUICE_BROKER_FEATURE_SHARED));
  ck_assert(!sluice_broker_supports(rich, SLUICE_BROKER_FEATURE_JOINS));
  ck_assert(!sluice_broker_supports(rich, SLUICE_BROKER_FEATURE_STEERING));
  ck_assert(!sluice_broker_supports(rich, (SluiceBrokerFeature)1000));
  ck_assert_str_eq(sluice_broker_feature_name(SLUICE_BROKER_FEATURE_JOINS),
                   "joins");
  ck_assert_str_eq(sluice_broker_feature_name((SluiceBrokerFeature)1000),
                   "unknown");
  ck_assert(sluice_broker_is_a(plain, &fake_class));
  ck_assert(!sluice_broker_is_a(plain, &klass));
  ck_assert(sluice_broker_is_a(rich, &klass));
}
END_TEST

static gboolean
fake_list_queued(SluiceBroker *self, const gchar *queue, const gchar *cursor,
                 guint limit, GPtrArray *out, gchar **out_cursor,
                 GError **error)
{
  return TRUE;
}

static gboolean
fake_remove_queued(SluiceBroker *self, SluiceRemoval *items, guint n,
                   GError **error)
{
  return TRUE;
}

static gboolean
fake_list_scheduled(SluiceBroker *self, const gchar *cursor, guint limit,
                    GPtrArray *out, gchar **out_cursor, GError **error)
{
  return TRUE;
}

static gboolean
fake_set_paused(SluiceBroker *self, const gchar *queue, gboolean paused,
                GError **error)
{
  return TRUE;
}

static gboolean
fake_reschedule(SluiceBroker *self, const gchar *id, gint64 due_at,
                gboolean *out_found, GError **error)
{
  return TRUE;
}

static gboolean
fake_purge(SluiceBroker *self, const gchar *queue, guint64 *out_removed,
           GError **error)
{
  return TRUE;
}

/* A table grows at its end with its version: a broker built against
 * version 1 of the steering table, whose struct ends before
 * replace_payloads (whatever lies past it is not read), is accepted, and
 * the later slot is unsupported; at version 2 the slot is required. */
START_TEST(a_table_of_an_older_version_lacks_the_later_slots)
{
  /* The bytes past a version 1 table are garbage the core must not read. */
  static struct {
    SluiceBrokerSteering table;
  } v1 = {{
      .version = 1,
      .list_queued = fake_list_queued,
      .remove_queued = fake_remove_queued,
      .list_scheduled = fake_list_scheduled,
      .set_paused = fake_set_paused,
      .list_paused = fake_list_paused,
      .reschedule = fake_reschedule,
      .purge = fake_purge,
      .replace_payloads = (gpointer)0x1,
  }};
  SluiceBrokerClass klass = fake_class;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker = NULL;
  g_autoptr(GBytes) bytes = g_bytes_new_static("x", 1);
  SluiceReplacement r = {.place = SLUICE_WAITING_SCHEDULED,
                         .handle = "a",
                         .payload = bytes,
                         .replacement = bytes,
                         .replaced = TRUE};

  klass.steering = &v1.table;
  broker = sluice_broker_new(&klass, NULL, &error);
  ck_assert_msg(broker != NULL, "%s", error != NULL ? error->message : "");
  ck_assert(sluice_broker_supports(broker, SLUICE_BROKER_FEATURE_STEERING));
  ck_assert(!sluice_broker_replace_payloads(broker, &r, 1, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_UNSUPPORTED));
  ck_assert(!r.replaced);
  g_clear_error(&error);
  g_clear_pointer(&broker, sluice_broker_unref);

  v1.table.version = 2;
  v1.table.replace_payloads = NULL;
  ck_assert_ptr_null(sluice_broker_new(&klass, NULL, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_INCOMPLETE));
  ck_assert_msg(strstr(error->message, "“steering.replace_payloads”") != NULL,
                "%s", error->message);
}
END_TEST

START_TEST(registration_copies_the_class)
{
  SluiceBrokerClass klass = fake_class;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker = sluice_broker_new(&klass, NULL, &error);
  g_autoptr(GBytes) payload = g_bytes_new_static("x", 1);
  SluiceSubmit submit = {.id = "a", .queue = "q", .payload = payload};

  ck_assert_ptr_nonnull(broker);
  /* Scribbling on the caller's table afterwards changes nothing. */
  klass.enqueue = NULL;
  klass.name = "changed";
  ck_assert_str_eq(sluice_broker_get_name(broker), "fake");
  ck_assert(sluice_broker_enqueue(broker, &submit, 1, &error));
  ck_assert(!sluice_clock_is_fake(sluice_broker_get_clock(broker)));
}
END_TEST

START_TEST(optional_slots_fall_back_as_documented)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker = sluice_broker_new(&fake_class, NULL, &error);
  FakeBroker *fake = (FakeBroker *)broker;
  g_autoptr(GPtrArray) out = g_ptr_array_new();
  g_autoptr(GBytes) record = NULL;
  g_autoptr(SluiceResult) result = NULL;
  g_autoptr(SluiceWorker) worker = NULL;
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  const gchar *queues[] = {"q", NULL};
  SluicePeriodicOptions po;
  SluiceSubmit submit = {0};
  guint64 removed;

  ck_assert(sluice_broker_heartbeat(broker, "w", 1000, NULL, 0, &error));
  ck_assert(sluice_broker_reclaim(broker, "w", queues, 10, 1000, out, &error));
  ck_assert_uint_eq(out->len, 0);
  ck_assert(sluice_broker_leave(broker, "w", &error));
  sluice_broker_wakeup(broker);

  /* No wait_record: the core reads the record until it is final. */
  fake->final_after = 3;
  ck_assert(sluice_broker_wait_record(broker, "t1", 10000, &record, &error));
  ck_assert_uint_eq(fake->get_record_calls, 3);
  result = sluice_result_decode(record, &error);
  ck_assert_int_eq(sluice_result_get_state(result), SLUICE_STATE_SUCCEEDED);

  ck_assert(!sluice_broker_purge(broker, "q", &removed, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_UNSUPPORTED));
  g_clear_error(&error);
  ck_assert(
      !sluice_broker_claim_periodic(broker, "p", 1, &submit, NULL, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_UNSUPPORTED));
  g_clear_error(&error);

  /* Without the steering table: listings, pauses and moves are
   * unsupported, and no queue is ever paused. */
  ck_assert(
      !sluice_broker_list_queued(broker, "q", NULL, 5, out, NULL, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_UNSUPPORTED));
  ck_assert_ptr_nonnull(strstr(error->message, "“fake”"));
  g_clear_error(&error);
  ck_assert(!sluice_broker_list_scheduled(broker, NULL, 5, out, NULL, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_UNSUPPORTED));
  g_clear_error(&error);
  ck_assert(!sluice_broker_set_paused(broker, "q", TRUE, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_UNSUPPORTED));
  g_clear_error(&error);
  ck_assert(sluice_broker_list_paused(broker, out, &error));
  ck_assert_uint_eq(out->len, 0);
  ck_assert(!sluice_broker_reschedule(broker, "t1", 0, NULL, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_UNSUPPORTED));
  g_clear_error(&error);

  /* Without the unique table an enqueue with a key is refused and
   * nothing is written; without the slots table nobody sees slot holders. */
  {
    g_autoptr(SluiceClient) client = sluice_client_new(broker, NULL, &error);
    SluiceUniqueOptions u = {.key = "k"};
    SluiceEnqueueOptions eo;
    g_autofree gchar *id = NULL;

    sluice_enqueue_options_init(&eo);
    eo.unique = &u;
    id = sluice_client_enqueue(client, "t", NULL, &eo, &error);
    ck_assert_ptr_null(id);
    ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                              SLUICE_BROKER_ERROR_UNSUPPORTED));
    ck_assert_ptr_nonnull(strstr(error->message, "uniqueness key"));
    g_clear_error(&error);
    ck_assert_ptr_null(sluice_client_list_slots(client, 10, &error));
    ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                              SLUICE_BROKER_ERROR_UNSUPPORTED));
    g_clear_error(&error);
  }

  worker = sluice_worker_new(broker, registry, NULL, &error);
  sluice_periodic_options_init(&po);
  po.name = "p";
  po.task = "t";
  po.interval_ms = 1000;
  ck_assert(!sluice_worker_add_periodic(worker, &po, &error));
  ck_assert(g_error_matches(error, SLUICE_WORKER_ERROR,
                            SLUICE_WORKER_ERROR_UNSUPPORTED));
}
END_TEST

static gboolean saw_critical;

static GLogWriterOutput
note_critical(GLogLevelFlags level, const GLogField *fields, gsize n,
              gpointer data)
{
  if (level & G_LOG_LEVEL_CRITICAL)
    saw_critical = TRUE;
  return G_LOG_WRITER_HANDLED;
}

START_TEST(a_slot_breaking_the_gerror_rule_is_reported)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker = sluice_broker_new(&fake_class, NULL, &error);
  g_autoptr(GBytes) payload = g_bytes_new_static("x", 1);
  SluiceSubmit submit = {.id = "a", .queue = "q", .payload = payload};

  g_log_set_writer_func(note_critical, NULL, NULL);
  ((FakeBroker *)broker)->misbehave = TRUE;
  ck_assert(!sluice_broker_enqueue(broker, &submit, 1, &error));
  ck_assert(saw_critical);
  /* The caller still gets an error it can act on. */
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_FAILED));
  ck_assert_ptr_nonnull(strstr(error->message, "fake"));
}
END_TEST

/* ---- Helpers for broker authors ------------------------------------------ */

/* The GCRA step the memory and SQLite brokers share with rate_acquire.lua:
 * an interval of 100 ms and a burst of 2 (tolerance 100 ms). */
START_TEST(gcra_step_follows_the_contract_formula)
{
  SluiceRateAcquire item = {
      .key = "k", .interval_us = 100000, .tolerance_us = 100000};
  gint64 tat = 0, next = 0;

  /* A new bucket admits, and its time moves on by one interval. */
  ck_assert(sluice_broker_gcra_step(&item, 1000, tat, &next));
  ck_assert(item.granted);
  ck_assert_int_eq(item.wait_ms, 0);
  ck_assert_int_eq(item.now_ms, 1000);
  ck_assert_int_eq(next, 1000 * 1000 + 100000);
  tat = next;
  /* The burst: a second admission at the same time. */
  ck_assert(sluice_broker_gcra_step(&item, 1000, tat, &next));
  ck_assert(item.granted);
  tat = next; /* 1.2 s */
  /* The third waits until tat - tolerance: 100 ms, and nothing changes. */
  next = -1;
  ck_assert(!sluice_broker_gcra_step(&item, 1000, tat, &next));
  ck_assert(!item.granted);
  ck_assert_int_eq(item.wait_ms, 100);
  ck_assert_int_eq(next, -1);
  /* Rounded up to whole milliseconds. */
  ck_assert(!sluice_broker_gcra_step(&item, 1000, tat + 1, &next));
  ck_assert_int_eq(item.wait_ms, 101);
  /* A time long past counts as now. */
  ck_assert(sluice_broker_gcra_step(&item, 5000, tat, &next));
  ck_assert_int_eq(next, 5000 * 1000 + 100000);
  /* A block pushes the time past the pause and admits nothing. */
  item.block_ms = 300;
  ck_assert(sluice_broker_gcra_step(&item, 1000, tat, &next));
  ck_assert(!item.granted);
  ck_assert_int_eq(item.wait_ms, 300);
  ck_assert_int_eq(next, 1000 * 1000 + 300 * 1000 + 100000);
}
END_TEST

/* One parser for the events cursors that are sequence numbers, bounded by
 * G_MAXINT64: beyond it a number would wrap negative in a gint64 rowid. */
START_TEST(events_cursor_parse_is_bounded_by_gint64)
{
  g_autoptr(GError) error = NULL;
  gint64 after = -1;

  ck_assert(sluice_broker_parse_events_cursor(NULL, &after, &error));
  ck_assert_int_eq(after, 0);
  ck_assert(sluice_broker_parse_events_cursor("42", &after, &error));
  ck_assert_int_eq(after, 42);
  ck_assert(
      sluice_broker_parse_events_cursor("9223372036854775807", &after, &error));
  ck_assert_int_eq(after, G_MAXINT64);
  ck_assert(!sluice_broker_parse_events_cursor("9223372036854775808", &after,
                                               &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID));
  ck_assert_ptr_nonnull(strstr(error->message, "pass one a read returned"));
  g_clear_error(&error);
  ck_assert(!sluice_broker_parse_events_cursor("18446744073709551615", &after,
                                               &error));
  g_clear_error(&error);
  ck_assert(!sluice_broker_parse_events_cursor("-1", &after, &error));
  g_clear_error(&error);
  ck_assert(!sluice_broker_parse_events_cursor("1-0", &after, &error));
}
END_TEST

/* ---- Cron ---------------------------------------------------------------- */

static gint64
utc_ms(gint year, gint month, gint day, gint hour, gint minute)
{
  g_autoptr(GDateTime) dt =
      g_date_time_new_utc(year, month, day, hour, minute, 0);
  return g_date_time_to_unix(dt) * 1000;
}

static void
expect_next(const gchar *cron, gint64 after, gint64 want)
{
  g_autoptr(GError) error = NULL;
  gint64 got = 0;

  ck_assert_msg(sluice_cron_next(cron, after, &got, &error), "%s: %s", cron,
                error != NULL ? error->message : "");
  ck_assert_msg(got == want,
                "%s after %" G_GINT64_FORMAT ": got %" G_GINT64_FORMAT
                ", want %" G_GINT64_FORMAT,
                cron, after, got, want);
}

/* Whether configure left a part out (SLUICE_WITH_REDIS, ..., set by make
 * check): its constructors then fail, saying so. */
static gboolean
built_without(const gchar *part)
{
  return g_strcmp0(g_getenv(part), "no") == 0;
}

/* sluice_broker_new_for_url() opens every scheme the command takes, each
 * with the options that apply to it, and names every scheme for any other
 * URL, without quoting what follows the scheme (a password may be
 * there). No server is contacted: nothing listens on port 1. */
START_TEST(url_opens_every_broker_and_names_the_schemes)
{
  gboolean no_redis = built_without("SLUICE_WITH_REDIS");
  gboolean no_sqlite = built_without("SLUICE_WITH_SQLITE");

  g_autofree gchar *dir = g_dir_make_tmp("sluice-url-XXXXXX", NULL);
  g_autofree gchar *db = g_build_filename(dir, "q.db", NULL);
  g_autofree gchar *sqlite_url = g_strconcat("SQLite://", db, NULL);
  const struct {
    const gchar *url;
    SluiceRedisMode mode;
    const gchar *name;
    gboolean ordered;
  } good[] = {
      {sqlite_url, SLUICE_REDIS_RELIABLE, "sqlite", TRUE},
      {"memory:", SLUICE_REDIS_RELIABLE, "memory", TRUE},
      {"Memory://", SLUICE_REDIS_RELIABLE, "memory", TRUE},
      {"redis://127.0.0.1:1/0", SLUICE_REDIS_RELIABLE, "redis-reliable", TRUE},
      {"redis://127.0.0.1:1/0", SLUICE_REDIS_FAST, "redis-fast", TRUE},
      {"redis://:pw@127.0.0.1:1/0?partitions=4", SLUICE_REDIS_FAST,
       "redis-fast", FALSE},
      {"redis+sentinel://127.0.0.1:1,127.0.0.1:2/m/0", SLUICE_REDIS_RELIABLE,
       "redis-reliable", TRUE},
      {"redis+cluster://127.0.0.1:1,127.0.0.1:2", SLUICE_REDIS_RELIABLE,
       "redis-reliable", TRUE},
      {"unix:///nowhere/redis.sock?db=1", SLUICE_REDIS_FAST, "redis-fast",
       TRUE},
      /* TLS: the same brokers over another transport. */
      {"rediss://127.0.0.1:1/0", SLUICE_REDIS_RELIABLE, "redis-reliable", TRUE},
      {"rediss+cluster://127.0.0.1:1,127.0.0.1:2", SLUICE_REDIS_FAST,
       "redis-fast", TRUE},
  };
  const struct {
    const gchar *url;
    const gchar *says;
  } bad[] = {
      {"redis+tcp://user:s3cret@host/0",
       "unknown broker URL scheme “redis+tcp:”"},
      {"postgres://s3cret@db", "unknown broker URL scheme “postgres:”"},
      {"/var/lib/s3cret.db", "not a path"},
      {"localhost:6379", "unknown broker URL scheme “localhost:”"},
      {"s3cret", "no scheme"},
      {"", "no scheme"},
      {"memory:s3cret", "memory: alone"},
  };
  static const gchar *const schemes[] = {"sqlite://",
                                         "redis://",
                                         "redis+sentinel://",
                                         "redis+cluster://",
                                         "unix://",
                                         "memory:",
                                         NULL};

  ck_assert_ptr_nonnull(dir);
  for (gsize i = 0; i < G_N_ELEMENTS(good); i++) {
    SluiceBrokerUrlOptions options;
    g_autoptr(GError) error = NULL;
    g_autoptr(SluiceBroker) b = NULL;

    sluice_broker_url_options_init(&options);
    options.mode = good[i].mode;
    options.ns = "url-test";
    options.dead_letter_max = 7;
    b = sluice_broker_new_for_url(good[i].url, &options, NULL, &error);
    if ((no_redis && g_str_has_prefix(good[i].name, "redis")) ||
        (no_sqlite && g_str_equal(good[i].name, "sqlite"))) {
      ck_assert_msg(b == NULL && strstr(error->message, "configure --without-"),
                    "%s: %s", good[i].url,
                    error != NULL ? error->message : "opened");
      continue;
    }
    ck_assert_msg(b != NULL, "%s: %s", good[i].url,
                  error != NULL ? error->message : "");
    ck_assert_str_eq(sluice_broker_get_name(b), good[i].name);
    ck_assert_msg(sluice_broker_supports(b, SLUICE_BROKER_FEATURE_ORDERED) ==
                      good[i].ordered,
                  "%s: partitions", good[i].url);
  }
  if (!no_redis) {
    /* NULL options are the defaults: the reliable mode. */
    g_autoptr(GError) error = NULL;
    g_autoptr(SluiceBroker) b =
        sluice_broker_new_for_url("redis://127.0.0.1:1/0", NULL, NULL, &error);
    ck_assert_msg(b != NULL, "%s", error != NULL ? error->message : "");
    ck_assert_str_eq(sluice_broker_get_name(b), "redis-reliable");
  }
  ck_assert(no_sqlite || g_file_test(db, G_FILE_TEST_IS_REGULAR));
  for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(SluiceBroker) b =
        sluice_broker_new_for_url(bad[i].url, NULL, NULL, &error);

    ck_assert_msg(b == NULL, "%s accepted", bad[i].url);
    ck_assert_msg(g_error_matches(error, SLUICE_BROKER_ERROR,
                                  SLUICE_BROKER_ERROR_INVALID),
                  "%s: %s", bad[i].url, error->message);
    ck_assert_msg(strstr(error->message, bad[i].says) != NULL, "%s: %s",
                  bad[i].url, error->message);
    ck_assert_msg(strstr(error->message, "s3cret") == NULL,
                  "%s: the message shows what followed the scheme: %s",
                  bad[i].url, error->message);
    if (g_str_has_prefix(bad[i].url, "memory:"))
      continue;
    for (guint k = 0; schemes[k] != NULL; k++)
      ck_assert_msg(strstr(error->message, schemes[k]) != NULL,
                    "%s: the message does not name %s: %s", bad[i].url,
                    schemes[k], error->message);
  }
  {
    /* A read-only SQLite broker opens the existing file only to read. */
    SluiceBrokerUrlOptions options;
    g_autoptr(GError) error = NULL;
    g_autofree gchar *missing = g_build_filename(dir, "missing.db", NULL);
    g_autofree gchar *missing_url = g_strconcat("sqlite://", missing, NULL);
    g_autoptr(SluiceBroker) b = NULL;

    sluice_broker_url_options_init(&options);
    options.read_only = TRUE;
    b = sluice_broker_new_for_url(missing_url, &options, NULL, &error);
    ck_assert_msg(b == NULL, "a missing database opened read-only");
    ck_assert(!g_file_test(missing, G_FILE_TEST_EXISTS));
  }
  {
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const gchar *name;

    while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
      g_autofree gchar *path = g_build_filename(dir, name, NULL);
      g_unlink(path);
    }
    g_rmdir(dir);
  }
}
END_TEST

START_TEST(cron_next_occurrences)
{
  /* 2030-01-01 was a Tuesday. */
  gint64 t = utc_ms(2030, 1, 1, 10, 7);

  expect_next("* * * * *", t, utc_ms(2030, 1, 1, 10, 8));
  expect_next("*/15 * * * *", t, utc_ms(2030, 1, 1, 10, 15));
  expect_next("0 9-17 * * mon-fri", t, utc_ms(2030, 1, 1, 11, 0));
  expect_next("30 2 * * *", t, utc_ms(2030, 1, 2, 2, 30));
  expect_next("0 0 1 * *", t, utc_ms(2030, 2, 1, 0, 0));
  expect_next("0 0 * feb *", t, utc_ms(2030, 2, 1, 0, 0));
  expect_next("@daily", t, utc_ms(2030, 1, 2, 0, 0));
  expect_next("0 12 * * 0", t, utc_ms(2030, 1, 6, 12, 0)); /* Sunday */
  expect_next("0 12 * * 7", t, utc_ms(2030, 1, 6, 12, 0)); /* Sunday too */
  /* Day of month OR day of week when both are restricted (Vixie cron). */
  expect_next("0 0 15 * fri", t, utc_ms(2030, 1, 4, 0, 0));
  expect_next("0 0 29 2 *", t, utc_ms(2032, 2, 29, 0, 0)); /* leap day */
  expect_next("5,10 * * * *", utc_ms(2030, 1, 1, 10, 5),
              utc_ms(2030, 1, 1, 10, 10));
}
END_TEST

START_TEST(cron_rejects_bad_expressions)
{
  static const gchar *const bad[] = {
      "",          "* * * *",    "* * * * * *", "60 * * * *",  "* 24 * * *",
      "* * 0 * *", "* * * 13 *", "* * * * 8",   "*/0 * * * *", "5-1 * * * *",
      "x * * * *", "0 0 30 2 *",
  };

  for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autoptr(GError) error = NULL;
    gint64 next;
    ck_assert_msg(!sluice_cron_next(bad[i], 0, &next, &error),
                  "“%s” was accepted", bad[i]);
    ck_assert(g_error_matches(error, SLUICE_WORKER_ERROR,
                              SLUICE_WORKER_ERROR_INVALID));
    ck_assert_ptr_nonnull(strstr(error->message, "five fields"));
  }
}
END_TEST

/* Negative times round down to their minute: the occurrence at 0 is not
 * skipped (division truncating toward zero used to skip it). */
START_TEST(cron_before_the_epoch)
{
  expect_next("* * * * *", -1, 0);
  expect_next("* * * * *", -60000, 0);
  expect_next("* * * * *", -60001, -60000);
  expect_next("0 0 1 1 *", -1, 0);
  expect_next("0 0 1 1 *", utc_ms(1969, 6, 1, 0, 0), 0);
  expect_next("30 12 * * *", utc_ms(1900, 1, 1, 0, 0),
              utc_ms(1900, 1, 1, 12, 30));
}
END_TEST

/* The range is what GDateTime can name: years 1 to 9999. Inside it every
 * answer is right, up to the last minute; outside, a clear error, never a
 * GLib critical. */
START_TEST(cron_range)
{
  const gint64 first = utc_ms(1, 1, 1, 0, 0);
  const gint64 last = utc_ms(9999, 12, 31, 23, 59);
  /* The first minute minus 2 ms, and the first ms of the year 10000. */
  static const gint64 outside[] = {G_MININT64, G_MAXINT64,
                                   G_GINT64_CONSTANT(-62135596800002),
                                   G_GINT64_CONSTANT(253402300800000)};
  g_autoptr(GError) error = NULL;
  gint64 next = 0;

  g_log_set_always_fatal(G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING);
  expect_next("* * * * *", first - 1, first);
  expect_next("* * * * *", last - 1, last);
  expect_next("59 23 31 12 *", utc_ms(9999, 1, 1, 0, 0), last);
  expect_next("0 0 1 1 *", utc_ms(9998, 6, 1, 0, 0), utc_ms(9999, 1, 1, 0, 0));
  /* Nothing after the last minute: an error that says why. */
  ck_assert(!sluice_cron_next("* * * * *", last, &next, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "9999-12-31T23:59Z"));
  g_clear_error(&error);
  ck_assert(
      !sluice_cron_next("0 0 1 1 *", utc_ms(9999, 6, 1, 0, 0), &next, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "9999-12-31T23:59Z"));
  g_clear_error(&error);
  /* A month that never comes again before the end of the range. */
  ck_assert(!sluice_cron_next("0 0 1 feb *", utc_ms(9999, 3, 1, 0, 0), &next,
                              &error));
  ck_assert_ptr_nonnull(strstr(error->message, "9999-12-31T23:59Z"));
  g_clear_error(&error);
  for (gsize i = 0; i < G_N_ELEMENTS(outside); i++) {
    ck_assert_msg(!sluice_cron_next("* * * * *", outside[i], &next, &error),
                  "%" G_GINT64_FORMAT " was accepted", outside[i]);
    ck_assert(g_error_matches(error, SLUICE_WORKER_ERROR,
                              SLUICE_WORKER_ERROR_INVALID));
    ck_assert_ptr_nonnull(strstr(error->message, "0001-01-01"));
    g_clear_error(&error);
  }
  /* An impossible date is still the five-year error, anywhere in range. */
  ck_assert(!sluice_cron_next("0 0 30 2 *", first, &next, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "five years"));
}
END_TEST

/* The expression is quoted in errors; whatever bytes it held, the message
 * is printable UTF-8. */
START_TEST(cron_error_messages_are_utf8)
{
  static const gchar *const bad[] = {"\xff * * * *", "* * * * \x1b[2J",
                                     "\xe2\x82 * * * *", "*/\xc3 * * * *"};

  for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autoptr(GError) error = NULL;
    gint64 next;

    ck_assert(!sluice_cron_next(bad[i], 0, &next, &error));
    ck_assert_msg(g_utf8_validate(error->message, -1, NULL), "%s",
                  error->message);
    ck_assert_ptr_null(strchr(error->message, '\x1b'));
  }
}
END_TEST

/* The next occurrence of @cron in @zone after @after. */
static gint64
next_in_zone(const gchar *cron, const gchar *zone, gint64 after)
{
  g_autoptr(GError) error = NULL;
  SluicePeriodicOptions po;
  gint64 next = 0;

  sluice_periodic_options_init(&po);
  po.name = "tz";
  po.task = "t.x";
  po.cron = cron;
  po.timezone = zone;
  ck_assert_msg(sluice_periodic_next_occurrence(&po, after, &next, &error),
                "%s", error != NULL ? error->message : "");
  return next;
}

#define assert_next_in_zone(cron, zone, after, want)                           \
  do {                                                                         \
    gint64 _got = next_in_zone(cron, zone, after);                             \
    ck_assert_msg(_got == (want),                                              \
                  "%s in %s: got %" G_GINT64_FORMAT                            \
                  ", want %" G_GINT64_FORMAT,                                  \
                  cron, zone, _got, (gint64)(want));                           \
  } while (0)

/* Europe/Berlin goes from 02:00 CET to 03:00 CEST on 2026-03-29 (01:00
 * UTC) and back from 03:00 CEST to 02:00 CET on 2026-10-25 (01:00 UTC). */
START_TEST(cron_in_a_time_zone_runs_dst_times_once)
{
  const gchar *berlin = "Europe/Berlin";

  /* An ordinary day: 02:30 CET is 01:30 UTC. */
  assert_next_in_zone("30 2 * * *", berlin, utc_ms(2026, 3, 27, 12, 0),
                      utc_ms(2026, 3, 28, 1, 30));
  /* In the gap: 02:30 does not exist; it runs at 03:00 CEST, once. */
  assert_next_in_zone("30 2 * * *", berlin, utc_ms(2026, 3, 28, 12, 0),
                      utc_ms(2026, 3, 29, 1, 0));
  assert_next_in_zone("30 2 * * *", berlin, utc_ms(2026, 3, 29, 1, 0),
                      utc_ms(2026, 3, 30, 0, 30));
  /* Every quarter of the skipped hour: all at 03:00, run once. */
  assert_next_in_zone("*/15 2 * * *", berlin, utc_ms(2026, 3, 28, 23, 0),
                      utc_ms(2026, 3, 29, 1, 0));
  assert_next_in_zone("*/15 2 * * *", berlin, utc_ms(2026, 3, 29, 1, 0),
                      utc_ms(2026, 3, 30, 0, 0));
  /* Around the gap, the hours on either side run as usual. */
  assert_next_in_zone("0 * * * *", berlin, utc_ms(2026, 3, 28, 23, 30),
                      utc_ms(2026, 3, 29, 0, 0)); /* 01:00 CET */
  assert_next_in_zone("0 * * * *", berlin, utc_ms(2026, 3, 29, 0, 0),
                      utc_ms(2026, 3, 29, 1, 0)); /* 02:00 -> 03:00 CEST */
  assert_next_in_zone("0 * * * *", berlin, utc_ms(2026, 3, 29, 1, 0),
                      utc_ms(2026, 3, 29, 2, 0)); /* 04:00 CEST */

  /* The repeated hour: 02:30 happens at 00:30 UTC (CEST) and again at
   * 01:30 UTC (CET); it runs at the first only. */
  assert_next_in_zone("30 2 * * *", berlin, utc_ms(2026, 10, 24, 12, 0),
                      utc_ms(2026, 10, 25, 0, 30));
  assert_next_in_zone("30 2 * * *", berlin, utc_ms(2026, 10, 25, 0, 30),
                      utc_ms(2026, 10, 26, 1, 30));
  assert_next_in_zone("30 2 * * *", berlin, utc_ms(2026, 10, 25, 1, 0),
                      utc_ms(2026, 10, 26, 1, 30));
  /* 03:00 CET comes an hour after the repeated one ends. */
  assert_next_in_zone("0 3 * * *", berlin, utc_ms(2026, 10, 24, 12, 0),
                      utc_ms(2026, 10, 25, 2, 0));
  /* Named zones and offsets agree with UTC where they should. */
  assert_next_in_zone("0 12 * * *", "UTC", utc_ms(2026, 6, 1, 0, 0),
                      utc_ms(2026, 6, 1, 12, 0));
  assert_next_in_zone("0 12 * * *", "+02:00", utc_ms(2026, 6, 1, 0, 0),
                      utc_ms(2026, 6, 1, 10, 0));
}
END_TEST

START_TEST(periodic_options_are_checked)
{
  SluicePeriodicOptions po;
  gint64 next = 0;

  sluice_periodic_options_init(&po);
  po.name = "p";
  po.task = "t.x";
  po.cron = "0 * * * *";
  po.timezone = "Mars/Olympus_Mons";
  {
    g_autoptr(GError) error = NULL;
    ck_assert(!sluice_periodic_next_occurrence(&po, 0, &next, &error));
    ck_assert(g_error_matches(error, SLUICE_WORKER_ERROR,
                              SLUICE_WORKER_ERROR_INVALID));
    ck_assert_ptr_nonnull(strstr(error->message, "Mars/Olympus_Mons"));
  }
  po.cron = NULL;
  po.interval_ms = 60000;
  po.timezone = "Europe/Berlin";
  {
    g_autoptr(GError) error = NULL;
    ck_assert(!sluice_periodic_next_occurrence(&po, 0, &next, &error));
    ck_assert_ptr_nonnull(strstr(error->message, "cron expressions only"));
  }
  po.timezone = NULL;
  po.overlap = (SluiceOverlapPolicy)7;
  {
    g_autoptr(GError) error = NULL;
    ck_assert(!sluice_periodic_next_occurrence(&po, 0, &next, &error));
    ck_assert_ptr_nonnull(strstr(error->message, "overlap"));
  }
  po.overlap = SLUICE_OVERLAP_SKIP;
  {
    g_autoptr(GError) error = NULL;
    ck_assert(sluice_periodic_next_occurrence(&po, 60000, &next, &error));
    ck_assert_int_eq(next, 120000);
  }
}
END_TEST

/* ---- Task ids ------------------------------------------------------------ */

static gpointer
make_ids(gpointer table)
{
  g_autoptr(GPtrArray) ids = g_ptr_array_new();

  for (guint i = 0; i < 50000; i++)
    g_ptr_array_add(ids, sluice_client__new_id());
  return g_steal_pointer(&ids);
}

START_TEST(task_ids_are_unique_version_4_uuids)
{
  g_autoptr(GHashTable) seen =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  GThread *threads[4];

  /* Four threads, each with its own generator. */
  for (guint t = 0; t < G_N_ELEMENTS(threads); t++)
    threads[t] = g_thread_new("ids", make_ids, NULL);
  for (guint t = 0; t < G_N_ELEMENTS(threads); t++) {
    GPtrArray *ids = g_thread_join(threads[t]);
    for (guint i = 0; i < ids->len; i++) {
      gchar *id = ids->pdata[i];
      ck_assert_msg(g_uuid_string_is_valid(id), "not a UUID: %s", id);
      ck_assert_int_eq(id[14], '4');
      ck_assert_ptr_nonnull(strchr("89ab", id[19]));
      ck_assert_msg(g_hash_table_add(seen, id), "duplicate id %s", id);
    }
    g_ptr_array_unref(ids);
  }
  ck_assert_uint_eq(g_hash_table_size(seen), 200000);
}
END_TEST

/* ---- Options ------------------------------------------------------------- */

/* A task that reads its arguments by key and answers with fields. */
static gboolean
task_by_key(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  g_autofree gchar *to = NULL;
  g_autoptr(GBytes) blob = NULL;
  gint64 n;
  gdouble ratio;
  gboolean urgent;

  if ((to = sluice_task_context_dup_string_arg(ctx, "to", error)) == NULL ||
      !sluice_task_context_get_int_arg(ctx, "n", &n, error) ||
      !sluice_task_context_get_double_arg(ctx, "ratio", &ratio, error) ||
      !sluice_task_context_get_bool_arg(ctx, "urgent", &urgent, error) ||
      (blob = sluice_task_context_dup_bytes_arg(ctx, "to", error)) == NULL)
    return FALSE;
  return sluice_task_context_set_result_fields(
      ctx, error, "to", SLUICE_FIELD_STRING, to, "twice", SLUICE_FIELD_INT,
      2 * n, "half", SLUICE_FIELD_DOUBLE, ratio / 2, "urgent",
      SLUICE_FIELD_BOOL, urgent, "bytes", SLUICE_FIELD_INT,
      (gint64)g_bytes_get_size(blob), "none", SLUICE_FIELD_NULL, "optional",
      SLUICE_FIELD_BOOL, sluice_task_context_has_arg(ctx, "x"), NULL);
}

static gboolean
task_json_result(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  return sluice_task_context_set_result_json(ctx, data, error);
}

static gchar *
run_by_key(SluiceTaskFunc func, gpointer data, const gchar *args_json,
           SluiceTaskState *out_state, gchar **out_error)
{
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(SluiceTestHarness) h = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) args = sluice_args_from_json(args_json, -1, &error);
  g_autofree gchar *id = NULL;
  g_autoptr(SluiceResult) r = NULL;

  ck_assert(sluice_registry_add(registry, "t.by_key", func, data, NULL, NULL,
                                &error));
  h = sluice_test_harness_new(registry, NULL, &error);
  ck_assert_ptr_nonnull(h);
  id = sluice_client_enqueue(sluice_test_harness_get_client(h), "t.by_key",
                             args, NULL, &error);
  ck_assert_ptr_nonnull(id);
  ck_assert(sluice_test_harness_run_until_idle(h, &error));
  r = sluice_test_harness_get_record(h, id);
  *out_state = sluice_result_get_state(r);
  *out_error = g_strdup(sluice_result_get_error(r));
  return sluice_result_get_value(r) != NULL
             ? sluice_args_to_json(sluice_result_get_value(r), NULL)
             : NULL;
}

START_TEST(arguments_by_key_and_results_by_field)
{
  SluiceTaskState state;
  g_autofree gchar *err = NULL;
  g_autofree gchar *json = NULL;

  json = run_by_key(task_by_key, NULL,
                    "{\"to\": \"bob\", \"n\": 21, \"ratio\": 3, \"urgent\": "
                    "true}",
                    &state, &err);
  ck_assert_int_eq(state, SLUICE_STATE_SUCCEEDED);
  ck_assert_str_eq(json, "{\"to\":\"bob\",\"twice\":42,\"half\":1.5,"
                         "\"urgent\":true,\"bytes\":3,\"none\":null,"
                         "\"optional\":false}");
  g_clear_pointer(&json, g_free);
  g_clear_pointer(&err, g_free);

  /* Missing: buried non_retryable at once, naming the argument. */
  json = run_by_key(task_by_key, NULL, "{\"to\": \"bob\"}", &state, &err);
  ck_assert_int_eq(state, SLUICE_STATE_DEAD_LETTERED);
  ck_assert_msg(strstr(err, "“n”") != NULL && strstr(err, "missing") != NULL,
                "%s", err);
  g_clear_pointer(&json, g_free);
  g_clear_pointer(&err, g_free);

  /* Mistyped. */
  json = run_by_key(task_by_key, NULL, "{\"to\": 7}", &state, &err);
  ck_assert_int_eq(state, SLUICE_STATE_DEAD_LETTERED);
  ck_assert_msg(strstr(err, "“to” must be a string, not an integer") != NULL,
                "%s", err);
  g_clear_pointer(&json, g_free);
  g_clear_pointer(&err, g_free);

  /* Not a map at all. */
  json = run_by_key(task_by_key, NULL, "[1, 2]", &state, &err);
  ck_assert_int_eq(state, SLUICE_STATE_DEAD_LETTERED);
  ck_assert_msg(strstr(err, "they are an array") != NULL, "%s", err);
  g_clear_pointer(&json, g_free);
  g_clear_pointer(&err, g_free);

  /* A result from JSON, and a task's broken JSON. */
  json = run_by_key(task_json_result, "{\"ok\": [1, \"two\"]}", "null", &state,
                    &err);
  ck_assert_int_eq(state, SLUICE_STATE_SUCCEEDED);
  ck_assert_str_eq(json, "{\"ok\":[1,\"two\"]}");
  g_clear_pointer(&json, g_free);
  g_clear_pointer(&err, g_free);
  json = run_by_key(task_json_result, "{\"ok\": ", "null", &state, &err);
  ck_assert_int_eq(state, SLUICE_STATE_DEAD_LETTERED);
  ck_assert_msg(strstr(err, "not valid JSON") != NULL, "%s", err);
}
END_TEST

/* Error domains are named as GLib names them, without the spaces a code
 * formatter once put into the macros that define them. */
START_TEST(error_domains_have_their_names)
{
  ck_assert_str_eq(g_quark_to_string(SLUICE_WORKER_ERROR),
                   "sluice-worker-error-quark");
  ck_assert_str_eq(g_quark_to_string(SLUICE_CLIENT_ERROR),
                   "sluice-client-error-quark");
  ck_assert_str_eq(g_quark_to_string(SLUICE_TASK_ERROR),
                   "sluice-task-error-quark");
  ck_assert_str_eq(g_quark_to_string(SLUICE_BROKER_ERROR),
                   "sluice-broker-error-quark");
}
END_TEST

START_TEST(worker_rejects_bad_options)
{
  g_autoptr(SluiceBroker) broker = sluice_memory_broker_new(NULL, NULL);
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(GError) error = NULL;
  SluiceWorkerOptions o;
  static const gchar *const empty[] = {NULL};

  sluice_worker_options_init(&o);
  o.concurrency = 0;
  ck_assert_ptr_null(sluice_worker_new(broker, registry, &o, &error));
  ck_assert(
      g_error_matches(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID));
  ck_assert_ptr_nonnull(strstr(error->message, "concurrency"));
  g_clear_error(&error);

  sluice_worker_options_init(&o);
  o.queues = empty;
  ck_assert_ptr_null(sluice_worker_new(broker, registry, &o, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "queue"));
  g_clear_error(&error);

  /* The harness says why too, instead of logging and returning NULL. */
  sluice_worker_options_init(&o);
  o.concurrency = 0;
  ck_assert_ptr_null(sluice_test_harness_new(registry, &o, &error));
  ck_assert(
      g_error_matches(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_INVALID));
}
END_TEST

/* ---- Log lines ------------------------------------------------------------ */

/* The child of log_lines_are_utf8_without_setlocale: a program that never
 * calls setlocale() and keeps GLib's default writer logs two lines with
 * curly quotes, then says whether its locale is still the "C" one. */
static int
log_in_the_c_locale(void)
{
  sluice_log__message(G_LOG_LEVEL_MESSAGE, "queue “q” said so");
  sluice_broker_log(NULL, G_LOG_LEVEL_MESSAGE, "broker “b” said so");
  g_print("%s %s\n", setlocale(LC_ALL, NULL), nl_langinfo(CODESET));
  return 0;
}

/* @lang as the environment's only locale variable. */
static void
expect_utf8_lines(const gchar *lang)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new(
      G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE);
  g_autoptr(GSubprocess) child = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *out = NULL;
  g_autofree gchar *err = NULL;
  static const gchar *const unset[] = {"LC_ALL", "LC_CTYPE", "LANGUAGE",
                                       "G_MESSAGES_DEBUG", "CHARSET"};

  for (gsize i = 0; i < G_N_ELEMENTS(unset); i++)
    g_subprocess_launcher_unsetenv(launcher, unset[i]);
  g_subprocess_launcher_setenv(launcher, "LANG", lang, TRUE);
  child = g_subprocess_launcher_spawn(launcher, &error, "/proc/self/exe",
                                      "--log-in-the-c-locale", NULL);
  ck_assert_msg(child != NULL, "%s", error != NULL ? error->message : "");
  ck_assert(
      g_subprocess_communicate_utf8(child, NULL, NULL, &out, &err, &error));
  ck_assert(g_subprocess_get_if_exited(child));
  ck_assert_msg(strstr(err, "queue “q” said so") != NULL, "LANG=%s: %s", lang,
                err);
  ck_assert_msg(strstr(err, "broker “b” said so") != NULL, "LANG=%s: %s", lang,
                err);
  /* The program's own locale is left as it was. */
  ck_assert_str_eq(out, "C ANSI_X3.4-1968\n");
}

/* Library lines reach the terminal as UTF-8, not "?", in a program that
 * never called setlocale(): as the environment says the terminal shows
 * them, whether its locale is installed or not. */
START_TEST(log_lines_are_utf8_without_setlocale)
{
  expect_utf8_lines("C.UTF-8");
  expect_utf8_lines("xx_XX.UTF-8");
}
END_TEST

int
main(int argc, char **argv)
{
  Suite *s = suite_create("core");
  TCase *policy = tcase_create("policy");
  TCase *registry = tcase_create("registry");
  TCase *broker = tcase_create("broker");
  TCase *cron = tcase_create("cron");
  TCase *log = tcase_create("log");
  SRunner *runner;
  int failed;

  if (argc == 2 && strcmp(argv[1], "--log-in-the-c-locale") == 0)
    return log_in_the_c_locale();

  /* Explicit and generous: Check's 4 s default fails on a busy machine
   * (200,000 ids from four threads take seconds when the cores are taken). */
  tcase_set_timeout(policy, 120);
  tcase_set_timeout(registry, 120);
  tcase_set_timeout(broker, 120);
  tcase_set_timeout(cron, 120);
  tcase_set_timeout(log, 120);
  tcase_add_test(policy, default_backoff_sequence_and_cap);
  tcase_add_test(policy, jitter_stays_within_half_to_full_delay);
  tcase_add_test(policy, policy_resolution_is_per_field);
  suite_add_tcase(s, policy);
  tcase_add_test(registry, registry_rejects_duplicates_and_bad_names);
  tcase_add_test(registry, worker_rejects_bad_options);
  tcase_add_test(registry, error_domains_have_their_names);
  tcase_add_test(registry, arguments_by_key_and_results_by_field);
  tcase_add_test(registry,
                 retry_policy_has_one_unset_and_refuses_zero_attempts);
  tcase_add_test(registry, names_follow_one_rule_everywhere);
  tcase_add_test(registry, task_ids_are_unique_version_4_uuids);
  suite_add_tcase(s, registry);
  tcase_add_loop_test(broker, registration_rejects_each_missing_required_slot,
                      0, G_N_ELEMENTS(required));
  tcase_add_test(broker, registration_rejects_unknown_versions_and_bad_sizes);
  tcase_add_test(broker, registration_names_the_missing_slot_of_a_table);
  tcase_add_test(broker, registration_refuses_a_table_version_it_does_not_know);
  tcase_add_test(broker, a_table_of_an_older_version_lacks_the_later_slots);
  tcase_add_test(broker, supports_answers_for_caps_and_tables);
  tcase_add_test(broker, registration_copies_the_class);
  tcase_add_test(broker, optional_slots_fall_back_as_documented);
  tcase_add_test(broker, a_slot_breaking_the_gerror_rule_is_reported);
  tcase_add_test(broker, gcra_step_follows_the_contract_formula);
  tcase_add_test(broker, events_cursor_parse_is_bounded_by_gint64);
  tcase_add_test(broker, url_opens_every_broker_and_names_the_schemes);
  suite_add_tcase(s, broker);
  tcase_add_test(cron, cron_next_occurrences);
  tcase_add_test(cron, cron_rejects_bad_expressions);
  tcase_add_test(cron, cron_before_the_epoch);
  tcase_add_test(cron, cron_range);
  tcase_add_test(cron, cron_error_messages_are_utf8);
  tcase_add_test(cron, cron_in_a_time_zone_runs_dst_times_once);
  tcase_add_test(cron, periodic_options_are_checked);
  suite_add_tcase(s, cron);
  tcase_add_test(log, log_lines_are_utf8_without_setlocale);
  suite_add_tcase(s, log);

  runner = srunner_create(s);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

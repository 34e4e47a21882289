/* unique.c - uniqueness by key on any broker: each scope, replace,
 * debounce, keys derived from the arguments, a race of producers, and a
 * crashed holder's claim lapsing with its lease.
 *
 * Time: claims follow the broker's SluiceClock where its TTLs do
 * (CLOCK_TTL), else the store's own time (Redis): there a scenario moves
 * the fake clock and lets as much real time pass, as flow.c does. The
 * schedule (delays, debounces) follows the fake clock everywhere.
 */
#include "config.h"

#include <string.h>

#include "tests/conformance/conformance.h"
#include "tests/helpers/broker-calls.h"

static const SluiceConformanceFactory *factory;

#define ck_assert_error(err, domain, code)                                     \
  ck_assert_msg(g_error_matches((err), (domain), (code)), "%s",                \
                (err) != NULL ? (err)->message : "no error")

/* ---- What the tasks saw -------------------------------------------------- */

static struct {
  GMutex lock;
  GPtrArray *args; /* gchar*: the JSON arguments of each run, in order */
  GPtrArray *ids;  /* gchar*: the id of each run */
  /* What an enqueue of the same key from inside the task answered. */
  gboolean inner_existed;
  gchar *inner_error;
} seen;

static SluiceClient *inner_client; /* for the tasks that enqueue */

static void
seen_reset(void)
{
  g_mutex_lock(&seen.lock);
  g_clear_pointer(&seen.args, g_ptr_array_unref);
  g_clear_pointer(&seen.ids, g_ptr_array_unref);
  g_clear_pointer(&seen.inner_error, g_free);
  seen.args = g_ptr_array_new_with_free_func(g_free);
  seen.ids = g_ptr_array_new_with_free_func(g_free);
  seen.inner_existed = FALSE;
  g_mutex_unlock(&seen.lock);
}

static guint
n_runs(void)
{
  guint n;

  g_mutex_lock(&seen.lock);
  n = seen.args->len;
  g_mutex_unlock(&seen.lock);
  return n;
}

static gchar *
run_args(guint i)
{
  gchar *s;

  g_mutex_lock(&seen.lock);
  s = g_strdup(g_ptr_array_index(seen.args, i));
  g_mutex_unlock(&seen.lock);
  return s;
}

static gboolean
task_log(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  gchar *json =
      sluice_args_to_json(sluice_task_context_get_args_bytes(ctx), NULL);

  g_mutex_lock(&seen.lock);
  g_ptr_array_add(seen.args, json != NULL ? json : g_strdup("?"));
  g_ptr_array_add(seen.ids, g_strdup(sluice_task_context_get_id(ctx)));
  g_mutex_unlock(&seen.lock);
  return TRUE;
}

/* On its first run, enqueues another message of its own key (the scope
 * is the header "scope") and notes what that answered. */
static gboolean
task_enqueue_same_key(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  SluiceUniqueOptions u = {.key = "inner"};
  SluiceEnqueueOptions o;
  g_autoptr(GError) local = NULL;
  gboolean existed = FALSE;
  g_autofree gchar *id = NULL;
  gboolean first = n_runs() == 0;

  task_log(ctx, data, error);
  if (!first)
    return TRUE;
  u.scope = g_str_equal(sluice_task_context_get_header(ctx, "scope"), "r")
                ? SLUICE_UNIQUE_WHILE_RUNNING
                : SLUICE_UNIQUE_WHILE_QUEUED;
  sluice_enqueue_options_init(&o);
  o.unique = &u;
  id = sluice_client_enqueue_full(inner_client, "u.inner", NULL, &o, &existed,
                                  &local);
  g_mutex_lock(&seen.lock);
  seen.inner_existed = existed;
  if (id == NULL)
    seen.inner_error = g_strdup(local != NULL ? local->message : "?");
  g_mutex_unlock(&seen.lock);
  return TRUE;
}

/* ---- The environment ----------------------------------------------------- */

typedef struct {
  SluiceClock *clock;
  SluiceBroker *broker;
  SluiceRegistry *registry;
  SluiceTestHarness *h;
  SluiceClient *client;
} Env;

/* A running harness on a fresh broker; NULL (the scenario is skipped) when
 * the broker keeps no uniqueness claims. */
static Env *
env_new(void)
{
  Env *e = g_new0(Env, 1);
  g_autoptr(GError) error = NULL;
  SluiceWorkerOptions o;

  seen_reset();
  e->clock = sluice_clock_new_fake(SLUICE_TEST_EPOCH_MS);
  e->broker = factory->create(e->clock, 100, factory->data, &error);
  ck_assert_msg(e->broker != NULL, "%s: cannot create the broker: %s",
                factory->name, error != NULL ? error->message : "?");
  if (!sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_UNIQUE)) {
    sluice_broker_unref(e->broker);
    sluice_clock_unref(e->clock);
    g_free(e);
    return NULL;
  }
  e->registry = sluice_registry_new();
  ck_assert(sluice_registry_add(e->registry, "u.log", task_log, NULL, NULL,
                                NULL, NULL));
  ck_assert(sluice_registry_add(e->registry, "u.inner", task_log, NULL, NULL,
                                NULL, NULL));
  ck_assert(sluice_registry_add(e->registry, "u.enqueue_same_key",
                                task_enqueue_same_key, NULL, NULL, NULL, NULL));
  sluice_worker_options_init(&o);
  o.retry.jitter = SLUICE_OFF;
  o.visibility_timeout_ms = 5000;
  e->h =
      sluice_test_harness_new_with_broker(e->broker, e->registry, &o, &error);
  ck_assert_msg(e->h != NULL, "%s", error != NULL ? error->message : "");
  e->client = sluice_test_harness_get_client(e->h);
  inner_client = e->client;
  return e;
}

static void
env_free(Env *e)
{
  inner_client = NULL;
  sluice_test_harness_free(e->h);
  sluice_registry_unref(e->registry);
  sluice_broker_unref(e->broker);
  sluice_clock_unref(e->clock);
  g_free(e);
}

static void
run_idle(Env *e)
{
  g_autoptr(GError) error = NULL;
  ck_assert_msg(sluice_test_harness_run_until_idle(e->h, &error), "%s",
                error != NULL ? error->message : "");
}

/* Moves the fake clock on by @ms, and real time too where claims follow
 * the store's own clock. */
static void
pass(Env *e, gint64 ms)
{
  sluice_test_harness_advance(e->h, ms);
  if (!sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_CLOCK_TTL))
    g_usleep((gulong)ms * 1000);
}

/* Enqueues @task with @json_args under @u on @queue (NULL: the default
 * one); returns the id it answered (the holder's when @out_existed comes
 * back TRUE). */
static gchar *
enqueue_on(Env *e, const gchar *queue, const gchar *task,
           const gchar *json_args, const SluiceUniqueOptions *u,
           gint64 delay_ms, gboolean *out_existed)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) args = NULL;
  SluiceEnqueueOptions o;
  gchar *id;

  if (json_args != NULL) {
    args = sluice_args_from_json(json_args, -1, &error);
    ck_assert_msg(args != NULL, "%s", error != NULL ? error->message : "");
  }
  sluice_enqueue_options_init(&o);
  o.queue = queue;
  o.unique = u;
  o.delay_ms = delay_ms;
  id = sluice_client_enqueue_full(e->client, task, args, &o, out_existed,
                                  &error);
  ck_assert_msg(id != NULL, "%s: %s", factory->name,
                error != NULL ? error->message : "");
  return id;
}

static gchar *
enqueue_unique(Env *e, const gchar *task, const gchar *json_args,
               const SluiceUniqueOptions *u, gint64 delay_ms,
               gboolean *out_existed)
{
  return enqueue_on(e, NULL, task, json_args, u, delay_ms, out_existed);
}

/* ---- Scopes -------------------------------------------------------------- */

/* While queued: a second message of the key is refused while the first
 * waits, as SLUICE_CLIENT_ERROR_DUPLICATE naming the holder, or as the
 * holder's id with existed; once it started, the key is free. */
START_TEST(unique_while_queued_refuses_a_second_until_it_starts)
{
  Env *e = env_new();
  SluiceUniqueOptions u = {.key = "report:7",
                           .scope = SLUICE_UNIQUE_WHILE_QUEUED};
  SluiceEnqueueOptions o;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *first = NULL, *again = NULL, *refused = NULL, *later = NULL;
  gboolean existed = TRUE;

  if (e == NULL)
    return;
  first = enqueue_unique(e, "u.log", NULL, &u, 0, &existed);
  ck_assert(!existed);
  again = enqueue_unique(e, "u.log", NULL, &u, 0, &existed);
  ck_assert(existed);
  ck_assert_str_eq(again, first);
  sluice_enqueue_options_init(&o);
  o.unique = &u;
  refused = sluice_client_enqueue(e->client, "u.log", NULL, &o, &error);
  ck_assert_ptr_null(refused);
  ck_assert_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_DUPLICATE);
  ck_assert_msg(strstr(error->message, first) != NULL, "%s", error->message);
  run_idle(e);
  ck_assert_uint_eq(n_runs(), 1);
  later = enqueue_unique(e, "u.log", NULL, &u, 0, &existed);
  ck_assert(!existed);
  ck_assert_str_ne(later, first);
  run_idle(e);
  ck_assert_uint_eq(n_runs(), 2);
  env_free(e);
}
END_TEST

/* The same task enqueueing its own key while it runs: allowed while
 * queued (its claim ended when it started), refused while running; after
 * it finished the key is free. */
START_TEST(unique_while_running_refuses_until_it_finished)
{
  for (guint pass_n = 0; pass_n < 2; pass_n++) {
    Env *e = env_new();
    gboolean running = pass_n == 1;
    SluiceUniqueOptions u = {.key = "inner",
                             .scope = running ? SLUICE_UNIQUE_WHILE_RUNNING
                                              : SLUICE_UNIQUE_WHILE_QUEUED};
    g_autoptr(GHashTable) headers = g_hash_table_new(g_str_hash, g_str_equal);
    SluiceEnqueueOptions o;
    g_autoptr(GError) error = NULL;
    g_autofree gchar *id = NULL, *after = NULL;
    gboolean existed = TRUE;

    if (e == NULL)
      return;
    g_hash_table_insert(headers, (gpointer) "scope",
                        (gpointer)(running ? "r" : "q"));
    sluice_enqueue_options_init(&o);
    o.unique = &u;
    o.headers = headers;
    id = sluice_client_enqueue(e->client, "u.enqueue_same_key", NULL, &o,
                               &error);
    ck_assert_msg(id != NULL, "%s", error != NULL ? error->message : "");
    run_idle(e);
    g_mutex_lock(&seen.lock);
    ck_assert_msg(seen.inner_error == NULL, "%s", seen.inner_error);
    ck_assert_msg(seen.inner_existed == running,
                  "%s: scope %s: an enqueue of the key from inside the "
                  "running task was %s",
                  factory->name, running ? "running" : "queued",
                  seen.inner_existed ? "refused" : "allowed");
    g_mutex_unlock(&seen.lock);
    /* Queued: the inner message ran too; running: it was refused. */
    ck_assert_uint_eq(n_runs(), running ? 1 : 2);
    after = enqueue_unique(e, "u.log", NULL, &u, 0, &existed);
    ck_assert_msg(!existed,
                  "%s: the key is still held after its task "
                  "finished",
                  factory->name);
    run_idle(e);
    ck_assert_uint_eq(n_runs(), running ? 2 : 3);
    env_free(e);
  }
}
END_TEST

/* Whether less than @ttl_ms of real time passed since @since_us, so that
 * a claim on the store's own clock is certainly still live: where claims
 * follow the fake clock, always. A busy machine may let a real-time claim
 * lapse; the check is then skipped rather than failed. */
static gboolean
within(Env *e, gint64 since_us, gint64 ttl_ms)
{
  return sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_CLOCK_TTL) ||
         g_get_monotonic_time() - since_us < ttl_ms * 1000;
}

/* For a TTL: refused for the TTL after the first enqueue, even once it
 * ran; free once the TTL lapsed. */
START_TEST(unique_for_ttl_lapses)
{
  Env *e = env_new();
  SluiceUniqueOptions u = {
      .key = "digest", .scope = SLUICE_UNIQUE_FOR_TTL, .ttl_ms = 3000};
  g_autofree gchar *first = NULL, *again = NULL, *later = NULL;
  gboolean existed = TRUE;
  gint64 since_us = g_get_monotonic_time();

  if (e == NULL)
    return;
  first = enqueue_unique(e, "u.log", NULL, &u, 0, &existed);
  ck_assert(!existed);
  run_idle(e);
  ck_assert_uint_eq(n_runs(), 1);
  again = enqueue_unique(e, "u.log", NULL, &u, 0, &existed);
  if (within(e, since_us, u.ttl_ms)) {
    ck_assert_msg(existed, "%s: allowed within the TTL", factory->name);
    ck_assert_str_eq(again, first);
  }
  pass(e, 3100);
  later = enqueue_unique(e, "u.log", NULL, &u, 0, &existed);
  ck_assert_msg(!existed, "%s: still refused after the TTL", factory->name);
  run_idle(e);
  ck_assert_uint_eq(n_runs(), 2);
  env_free(e);
}
END_TEST

/* ---- Replace and debounce ------------------------------------------------ */

/* The new one wins: a delayed holder is taken off the schedule, a ready one
 * is skipped (cancelled) when it starts; exactly one run, with the new
 * arguments, each time. */
START_TEST(unique_replace_the_new_one_wins)
{
  Env *e = env_new();
  SluiceUniqueOptions u = {.key = "sync:acme",
                           .scope = SLUICE_UNIQUE_WHILE_RUNNING,
                           .replace = TRUE};
  g_autofree gchar *a = NULL, *b = NULL, *c = NULL, *d = NULL;
  g_autofree gchar *args0 = NULL, *args1 = NULL;
  static const gchar *const held_queues[] = {"held", NULL};
  SluiceWorkerOptions o;
  SluiceTestHarness *h2;
  g_autoptr(GError) error = NULL;
  gboolean existed = TRUE;

  if (e == NULL)
    return;
  a = enqueue_unique(e, "u.log", "{\"v\":1}", &u, 60000, &existed);
  ck_assert(!existed);
  b = enqueue_unique(e, "u.log", "{\"v\":2}", &u, 60000, &existed);
  ck_assert(!existed);
  ck_assert_str_ne(a, b);
  ck_assert_int_eq(sluice_test_harness_get_state(e->h, a),
                   SLUICE_STATE_CANCELLED);
  sluice_test_harness_advance(e->h, 60000);
  run_idle(e);
  ck_assert_uint_eq(n_runs(), 1);
  args0 = run_args(0);
  ck_assert_str_eq(args0, "{\"v\":2}");

  /* Ready in its queue: it stays there, and is skipped when it starts.
   * The queue is one the running worker does not serve, so that neither
   * starts before the second is enqueued; a second worker runs them. */
  c = enqueue_on(e, "held", "u.log", "{\"v\":3}", &u, 0, &existed);
  ck_assert(!existed);
  d = enqueue_on(e, "held", "u.log", "{\"v\":4}", &u, 0, &existed);
  ck_assert(!existed);
  run_idle(e);
  ck_assert_uint_eq(n_runs(), 1);
  sluice_worker_options_init(&o);
  o.queues = held_queues;
  /* One executor: c starts while d still holds the key (docs/limits.md:
   * a replaced task that starts only after its replacement finished and
   * gave the key back runs after all). */
  o.concurrency = 1;
  h2 = sluice_test_harness_new_with_broker(e->broker, e->registry, &o, &error);
  ck_assert_msg(h2 != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_msg(sluice_test_harness_run_until_idle(h2, &error), "%s",
                error != NULL ? error->message : "");
  ck_assert_uint_eq(n_runs(), 2);
  args1 = run_args(1);
  ck_assert_str_eq(args1, "{\"v\":4}");
  ck_assert_int_eq(sluice_test_harness_get_state(h2, c),
                   SLUICE_STATE_CANCELLED);
  ck_assert_int_eq(sluice_test_harness_get_state(h2, d),
                   SLUICE_STATE_SUCCEEDED);
  sluice_test_harness_free(h2);
  env_free(e);
}
END_TEST

/* A burst of 5 within the debounce time: one run, after the last one's
 * debounce, with the last one's arguments. */
START_TEST(unique_debounce_runs_only_the_last_of_a_burst)
{
  Env *e = env_new();
  SluiceUniqueOptions u = {.key = "reindex",
                           .scope = SLUICE_UNIQUE_WHILE_QUEUED,
                           .debounce_ms = 5000};
  g_autofree gchar *args = NULL;

  if (e == NULL)
    return;
  for (guint i = 1; i <= 5; i++) {
    g_autofree gchar *json = g_strdup_printf("{\"n\":%u}", i);
    gboolean existed = TRUE;
    g_autofree gchar *id = enqueue_unique(e, "u.log", json, &u, 0, &existed);
    ck_assert(!existed);
    run_idle(e);
    ck_assert_uint_eq(n_runs(), 0);
    if (i < 5)
      sluice_test_harness_advance(e->h, 1000);
  }
  sluice_test_harness_advance(e->h, 4999);
  run_idle(e);
  ck_assert_uint_eq(n_runs(), 0); /* pushed on by the last one */
  sluice_test_harness_advance(e->h, 1);
  run_idle(e);
  ck_assert_uint_eq(n_runs(), 1);
  args = run_args(0);
  ck_assert_str_eq(args, "{\"n\":5}");
  sluice_test_harness_advance(e->h, 60000);
  run_idle(e);
  ck_assert_uint_eq(n_runs(), 1);
  env_free(e);
}
END_TEST

/* ---- Keys ---------------------------------------------------------------- */

/* Without a key, the task and its argument bytes are the key. */
START_TEST(unique_key_derived_from_task_and_args)
{
  Env *e = env_new();
  SluiceUniqueOptions u = {.scope = SLUICE_UNIQUE_WHILE_QUEUED};
  g_autofree gchar *a = NULL, *b = NULL, *c = NULL, *d = NULL;
  gboolean existed = TRUE;

  if (e == NULL)
    return;
  a = enqueue_unique(e, "u.log", "{\"user\":1}", &u, 0, &existed);
  ck_assert(!existed);
  b = enqueue_unique(e, "u.log", "{\"user\":1}", &u, 0, &existed);
  ck_assert(existed);
  ck_assert_str_eq(b, a);
  c = enqueue_unique(e, "u.log", "{\"user\":2}", &u, 0, &existed);
  ck_assert(!existed);
  d = enqueue_unique(e, "u.inner", "{\"user\":1}", &u, 0, &existed);
  ck_assert(!existed);
  run_idle(e);
  ck_assert_uint_eq(n_runs(), 3);
  env_free(e);
}
END_TEST

START_TEST(unique_malformed_options_are_refused_naming_the_field)
{
  Env *e = env_new();
  SluiceUniqueOptions no_ttl = {.key = "k", .scope = SLUICE_UNIQUE_FOR_TTL};
  SluiceUniqueOptions bad_scope = {.key = "k", .scope = 9};
  SluiceUniqueOptions empty = {.key = "", .scope = SLUICE_UNIQUE_WHILE_QUEUED};
  const SluiceUniqueOptions *bad[] = {&no_ttl, &bad_scope, &empty};
  const gchar *field[] = {"unique.ttl_ms", "unique.scope", "unique.key"};

  if (e == NULL)
    return;
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autoptr(GError) error = NULL;
    SluiceEnqueueOptions o;
    g_autofree gchar *id = NULL;

    sluice_enqueue_options_init(&o);
    o.unique = bad[i];
    id = sluice_client_enqueue(e->client, "u.log", NULL, &o, &error);
    ck_assert_ptr_null(id);
    ck_assert_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID);
    ck_assert_msg(strstr(error->message, field[i]) != NULL, "%s",
                  error->message);
  }
  run_idle(e);
  ck_assert_uint_eq(n_runs(), 0);
  env_free(e);
}
END_TEST

/* ---- A race -------------------------------------------------------------- */

typedef struct {
  Env *e;
  GMutex *gate;
  gchar *id;
  gboolean existed;
} Racer;

static gpointer
race(gpointer data)
{
  Racer *r = data;
  SluiceUniqueOptions u = {.key = "race", .scope = SLUICE_UNIQUE_WHILE_RUNNING};
  SluiceEnqueueOptions o;
  g_autoptr(GError) error = NULL;

  /* Every racer waits for the gate, so they enqueue at once. */
  g_mutex_lock(r->gate);
  g_mutex_unlock(r->gate);
  sluice_enqueue_options_init(&o);
  o.unique = &u;
  r->id = sluice_client_enqueue_full(r->e->client, "u.log", NULL, &o,
                                     &r->existed, &error);
  if (r->id == NULL)
    g_printerr("racer: %s\n", error != NULL ? error->message : "?");
  return NULL;
}

/* 8 producers enqueue one key at once: exactly one wins, the others are
 * told the winner's id, and one message runs. */
START_TEST(unique_race_of_eight_producers_has_one_winner)
{
  Env *e = env_new();
  Racer racers[8];
  GThread *threads[8];
  GMutex gate;
  const gchar *winner = NULL;
  guint winners = 0;

  if (e == NULL)
    return;
  g_mutex_init(&gate);
  g_mutex_lock(&gate);
  for (guint i = 0; i < 8; i++) {
    racers[i] = (Racer){.e = e, .gate = &gate};
    threads[i] = g_thread_new("racer", race, &racers[i]);
  }
  g_mutex_unlock(&gate);
  for (guint i = 0; i < 8; i++)
    g_thread_join(threads[i]);
  for (guint i = 0; i < 8; i++) {
    ck_assert_ptr_nonnull(racers[i].id);
    if (!racers[i].existed) {
      winners++;
      winner = racers[i].id;
    }
  }
  ck_assert_uint_eq(winners, 1);
  for (guint i = 0; i < 8; i++)
    ck_assert_str_eq(racers[i].id, winner);
  run_idle(e);
  ck_assert_uint_eq(n_runs(), 1);
  for (guint i = 0; i < 8; i++)
    g_free(racers[i].id);
  g_mutex_clear(&gate);
  env_free(e);
}
END_TEST

/* ---- The slots ----------------------------------------------------------- */

static SluiceUniqueSubmit
submit_of(const gchar *key, const gchar *id, gboolean replace)
{
  static GBytes *payload;
  SluiceUniqueSubmit s = {0};

  if (payload == NULL)
    payload = g_bytes_new_static("x", 1);
  s.key = key;
  s.claim_ttl_ms = 3600 * 1000;
  s.replace = replace;
  s.submit.id = id;
  s.submit.queue = "unique-slots";
  s.submit.payload = payload;
  s.submit.due_at = SLUICE_TEST_EPOCH_MS + 3600 * 1000;
  return s;
}

static gboolean
update(Env *e, const gchar *key, const gchar *id, SluiceUniqueAction action,
       gint64 ttl_ms)
{
  g_autoptr(GError) error = NULL;
  SluiceUniqueUpdate u = {
      .key = key, .id = id, .action = action, .ttl_ms = ttl_ms};

  ck_assert_msg(sluice_broker_unique_update(e->broker, &u, 1, &error), "%s",
                error != NULL ? error->message : "");
  return u.superseded;
}

/* The slots themselves: a claim written with its message, refused while
 * held, replaced only while waiting (the replaced holder taken off the
 * schedule), a running claim that is not renewed lapsing after its lease
 * (a crashed worker), and an update by a superseded holder changing
 * nothing. */
START_TEST(unique_slots_claim_replace_and_lapse)
{
  Env *e = env_new();
  g_autoptr(GError) error = NULL;
  SluiceUniqueSubmit s[2];
  SluiceTaskLocation loc = {0};
  gint64 since_us;

  if (e == NULL)
    return;
  s[0] = submit_of("slot", "h1", FALSE);
  s[1] = submit_of("slot", "h2", FALSE);
  ck_assert(sluice_broker_unique_enqueue(e->broker, s, 2, &error));
  ck_assert(!s[0].existed && s[1].existed);
  ck_assert_str_eq(s[1].holder, "h1");
  g_clear_pointer(&s[1].holder, g_free);

  /* Replace: h1 waits on the schedule; h3 takes over and h1 is gone. */
  s[0] = submit_of("slot", "h3", TRUE);
  ck_assert(sluice_broker_unique_enqueue(e->broker, s, 1, &error));
  ck_assert(!s[0].existed && s[0].replaced);
  ck_assert_str_eq(s[0].holder, "h1");
  g_clear_pointer(&s[0].holder, g_free);
  if (sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_LOOKUP_TASK)) {
    ck_assert(sluice_broker_lookup_task(e->broker, "h1", &loc, &error));
    ck_assert_int_eq(loc.place, SLUICE_TASK_PLACE_NONE);
    sluice_task_location_clear(&loc);
  }
  ck_assert(update(e, "slot", "h1", SLUICE_UNIQUE_CHECK, 0));
  ck_assert(!update(e, "slot", "h3", SLUICE_UNIQUE_CHECK, 0));

  /* Running: not replaced; a lease not renewed lapses. */
  since_us = g_get_monotonic_time();
  ck_assert(!update(e, "slot", "h3", SLUICE_UNIQUE_HOLD, 1000));
  s[0] = submit_of("slot", "h4", TRUE);
  ck_assert(sluice_broker_unique_enqueue(e->broker, s, 1, &error));
  if (!within(e, since_us, 1000)) {
    /* Too slow to tell a refusal from a lapse: nothing more to learn. */
    sluice_conformance__skip_now("unique_slots_claim_replace_and_lapse",
                                 "the machine was too slow to tell a refusal "
                                 "from a lapse within 1 s");
    g_clear_pointer(&s[0].holder, g_free);
    env_free(e);
    return;
  }
  ck_assert(s[0].existed && !s[0].replaced);
  ck_assert_str_eq(s[0].holder, "h3");
  g_clear_pointer(&s[0].holder, g_free);
  sluice_clock_advance(e->clock, 1100);
  if (!sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_CLOCK_TTL))
    g_usleep(1100 * 1000);
  s[0] = submit_of("slot", "h4", FALSE);
  ck_assert(sluice_broker_unique_enqueue(e->broker, s, 1, &error));
  ck_assert_msg(!s[0].existed, "%s: a running claim outlived its lease",
                factory->name);
  /* The crashed holder, redelivered, finds itself superseded. */
  ck_assert(update(e, "slot", "h3", SLUICE_UNIQUE_HOLD, 60000));
  ck_assert(update(e, "slot", "h3", SLUICE_UNIQUE_RELEASE, 0));
  ck_assert(!update(e, "slot", "h4", SLUICE_UNIQUE_CHECK, 0));

  /* Release frees the key; WAIT makes it replaceable again, and a renewal
   * after it (a heartbeat crossing the retry) leaves it waiting. */
  ck_assert(!update(e, "slot", "h4", SLUICE_UNIQUE_HOLD, 60000));
  ck_assert(!update(e, "slot", "h4", SLUICE_UNIQUE_RENEW, 60000));
  ck_assert(!update(e, "slot", "h4", SLUICE_UNIQUE_WAIT, 60000));
  ck_assert(!update(e, "slot", "h4", SLUICE_UNIQUE_RENEW, 60000));
  s[0] = submit_of("slot", "h5", TRUE);
  ck_assert(sluice_broker_unique_enqueue(e->broker, s, 1, &error));
  ck_assert(s[0].replaced);
  g_clear_pointer(&s[0].holder, g_free);
  ck_assert(!update(e, "slot", "h5", SLUICE_UNIQUE_RELEASE, 0));
  /* A renewal after the release (a heartbeat crossing the settlement)
   * brings nothing back. */
  ck_assert(!update(e, "slot", "h5", SLUICE_UNIQUE_RENEW, 60000));
  s[0] = submit_of("slot", "h6", FALSE);
  ck_assert(sluice_broker_unique_enqueue(e->broker, s, 1, &error));
  ck_assert(!s[0].existed && !s[0].replaced);
  env_free(e);
}
END_TEST

void
sluice_conformance_add_unique(Suite *s, const SluiceConformanceFactory *f)
{
  TCase *unique = tcase_create("unique");

  factory = f;
  g_mutex_init(&seen.lock);
  tcase_set_timeout(unique, 300);
  sluice_conformance__add(
      unique, unique_while_queued_refuses_a_second_until_it_starts,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_UNIQUE));
  sluice_conformance__add(
      unique, unique_while_running_refuses_until_it_finished,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_UNIQUE));
  sluice_conformance__add(
      unique, unique_for_ttl_lapses,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_UNIQUE));
  sluice_conformance__add(
      unique, unique_replace_the_new_one_wins,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_UNIQUE));
  sluice_conformance__add(
      unique, unique_debounce_runs_only_the_last_of_a_burst,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_UNIQUE));
  sluice_conformance__add(
      unique, unique_key_derived_from_task_and_args,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_UNIQUE));
  sluice_conformance__add(
      unique, unique_malformed_options_are_refused_naming_the_field,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_UNIQUE));
  sluice_conformance__add(
      unique, unique_race_of_eight_producers_has_one_winner,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_UNIQUE));
  sluice_conformance__add(
      unique, unique_slots_claim_replace_and_lapse,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_UNIQUE));
  suite_add_tcase(s, unique);
}

/* seal.c - sealed args and results (sluice-seal.h) on every broker.
 *
 * The broker only stores bytes, but a broker that kept a copy of a
 * message, rewrote one, or handed a worker another message's record would
 * break what sealing promises: so the promises are scenarios here. The
 * task runs on its args in clear; at rest (on the schedule, in a retry,
 * in the record, in a dead letter) nothing holds them in clear; and what
 * cannot be opened is buried with the key it wants, never run.
 */
#include "tests/conformance/scenario.h"
#include "tests/helpers/broker-calls.h"

#include <string.h>

#define MARKER "marker-5f1d-do-not-store-in-clear"

/* Two keys, "k1" current; OTHER holds a key named "k9" only. */
static const gchar KEYRING[] =
    "# test keyring\n"
    "key k0 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n"
    "key k1 ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=\n"
    "current k1\n";
static const gchar OTHER[] =
    "key k9 QEFCQ0RFRkdISUpLTE1OT1BRUlNUVVZXWFlaW1xdXl8=\n"
    "current k9\n";

static SluiceKeyring *
keyring_of(const gchar *text)
{
  g_autoptr(GError) error = NULL;
  SluiceKeyring *k = sluice_keyring_new_from_text(text, -1, "test", &error);

  ck_assert_msg(k != NULL, "%s", error != NULL ? error->message : "");
  return k;
}

static Env *
sealed_env(void)
{
  SluiceWorkerOptions o;
  g_autoptr(SluiceKeyring) keyring = keyring_of(KEYRING);

  default_options(&o);
  o.keyring = keyring;
  return env_new_full(100, &o);
}

static gboolean
holds_marker(GBytes *bytes)
{
  gsize len = 0;
  const gchar *data = bytes != NULL ? g_bytes_get_data(bytes, &len) : NULL;

  return data != NULL && g_strstr_len(data, (gssize)len, MARKER) != NULL;
}

/* Returns its args as its result, and fails its first attempt when they
 * say so: a retry must find them again. */
static gboolean
task_echo(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  gboolean fail_once = FALSE;

  rec_run(ctx);
  if (!holds_marker(sluice_task_context_get_args_bytes(ctx)))
    return sluice_task_context_fail(ctx, error, "the args did not open");
  if (sluice_task_context_has_arg(ctx, "fail_once") &&
      sluice_task_context_get_bool_arg(ctx, "fail_once", &fail_once, NULL) &&
      fail_once && sluice_task_context_get_attempt(ctx) == 1)
    return sluice_task_context_retry(ctx, 1000, error, "once more");
  sluice_task_context_set_result(ctx, sluice_task_context_get_args_bytes(ctx));
  return TRUE;
}

static SluiceEnvelope *
scheduled_envelope(Env *e, const gchar *id, GBytes **out_payload)
{
  SluiceTaskLocation loc = {0};
  g_autoptr(GError) error = NULL;
  SluiceEnvelope *env;

  ck_assert_msg(sluice_broker_lookup_task(e->broker, id, &loc, &error), "%s",
                error != NULL ? error->message : "");
  ck_assert_int_eq(loc.place, SLUICE_TASK_PLACE_SCHEDULED);
  ck_assert_msg(!holds_marker(loc.payload),
                "the scheduled message holds the args in clear");
  env = sluice_envelope_decode(loc.payload, NULL, &error);
  ck_assert_msg(env != NULL, "%s", error != NULL ? error->message : "");
  if (out_payload != NULL)
    *out_payload = g_bytes_ref(loc.payload);
  sluice_task_location_clear(&loc);
  return env;
}

static void
assert_record_sealed(Env *e, const gchar *id)
{
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceResult) raw = NULL;

  ck_assert(sluice_broker_get_record(e->broker, id, &bytes, &error));
  ck_assert_ptr_nonnull(bytes);
  ck_assert_msg(!holds_marker(bytes), "the record holds the result in clear");
  raw = sluice_result_decode(bytes, &error);
  ck_assert_msg(raw != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_str_eq(sluice_result_get_seal(raw), "aes-256-gcm:k1");
}

/* Sealed on the schedule, in a retry and in the record; in clear for the
 * task and for the client that holds the keyring. */
START_TEST(sealed_args_run_in_clear_and_rest_sealed)
{
  Env *e = sealed_env();
  SluiceEnqueueOptions eo;
  g_autofree gchar *id = NULL;
  g_autoptr(SluiceEnvelope) env = NULL;
  g_autoptr(SluiceEnvelope) retry = NULL;
  g_autoptr(SluiceResult) r = NULL;
  g_autoptr(GError) error = NULL;

  add_task(e, "t.echo", task_echo, NULL);
  sluice_enqueue_options_init(&eo);
  eo.delay_ms = 5000;
  id = enqueue(e, "t.echo", "{\"secret\": \"" MARKER "\", \"fail_once\": true}",
               &eo);
  env = scheduled_envelope(e, id, NULL);
  ck_assert_uint_eq(env->version, SLUICE_ENVELOPE_VERSION_SEALED);
  ck_assert_str_eq(env->seal, "aes-256-gcm:k1");
  ck_assert_str_eq(env->task, "t.echo");

  sluice_test_harness_advance(e->h, 5000);
  run_idle(e);
  ck_assert_uint_eq(runs_of(id), 1);
  /* The retry's new message is sealed again. */
  retry = scheduled_envelope(e, id, NULL);
  ck_assert_str_eq(retry->seal, "aes-256-gcm:k1");
  ck_assert_uint_eq(retry->attempt, 2);

  sluice_test_harness_advance(e->h, 1000);
  run_idle(e);
  ck_assert_state(e, id, SLUICE_STATE_SUCCEEDED);
  assert_record_sealed(e, id);
  r = sluice_client_get_result(e->client, id, 0, NULL, &error);
  ck_assert_msg(r != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_ptr_null(sluice_result_get_seal(r));
  ck_assert(holds_marker(sluice_result_get_value(r)));
  env_free(e);
}
END_TEST

/* A client without the keyring reads the state but not the result, and
 * is told which key it lacks. */
START_TEST(a_sealed_result_needs_the_key_to_be_read)
{
  Env *e = sealed_env();
  SluiceClientOptions co;
  g_autoptr(SluiceClient) bare = NULL;
  g_autoptr(SluiceResult) r = NULL;
  g_autoptr(SluiceResult) seen = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *id = NULL;

  add_task(e, "t.echo", task_echo, NULL);
  id = enqueue(e, "t.echo", "[\"" MARKER "\"]", NULL);
  run_idle(e);
  ck_assert_state(e, id, SLUICE_STATE_SUCCEEDED);

  sluice_client_options_init(&co);
  bare = sluice_client_new(e->broker, &co, &error);
  ck_assert_ptr_nonnull(bare);
  r = sluice_client_get_result(bare, id, 0, NULL, &error);
  ck_assert_ptr_null(r);
  ck_assert(
      g_error_matches(error, SLUICE_SEAL_ERROR, SLUICE_SEAL_ERROR_UNKNOWN_KEY));
  ck_assert_msg(strstr(error->message, "key k1 unknown") != NULL, "%s",
                error->message);
  g_clear_error(&error);
  seen = sluice_client_inspect(bare, id, &error);
  ck_assert_ptr_nonnull(seen);
  ck_assert_int_eq(sluice_result_get_state(seen), SLUICE_STATE_SUCCEEDED);
  ck_assert_str_eq(sluice_result_get_seal(seen), "aes-256-gcm:k1");
  env_free(e);
}
END_TEST

/* Sealed with a key the worker lacks: buried `malformed` with the key's
 * name, its bytes kept for a worker that has it; never run. */
START_TEST(an_unknown_key_is_buried_malformed_never_run)
{
  Env *e = sealed_env();
  SluiceClientOptions co;
  g_autoptr(SluiceKeyring) other = keyring_of(OTHER);
  g_autoptr(SluiceClient) stranger = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceDeadLetter) dl = NULL;
  g_autofree gchar *id = NULL;

  add_task(e, "t.echo", task_echo, NULL);
  sluice_client_options_init(&co);
  co.keyring = other;
  stranger = sluice_client_new(e->broker, &co, &error);
  ck_assert_ptr_nonnull(stranger);
  id = sluice_test_client_enqueue(stranger, "t.echo", "[\"" MARKER "\"]", NULL);
  run_idle(e);
  ck_assert_uint_eq(total_runs(), 0);
  dl = only_dead_letter(e);
  ck_assert_str_eq(dl->reason, "malformed");
  ck_assert_msg(strstr(dl->detail, "cannot decrypt: key k9 unknown") != NULL,
                "%s", dl->detail);
  ck_assert(!holds_marker(dl->payload));
  ck_assert_state(e, id, SLUICE_STATE_DEAD_LETTERED);
  /* The producer waiting for the result learns why from its record. */
  {
    g_autoptr(SluiceResult) r =
        sluice_client_get_result(stranger, id, 0, NULL, &error);

    ck_assert_msg(r != NULL, "%s", error != NULL ? error->message : "");
    ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_DEAD_LETTERED);
    ck_assert_msg(strstr(sluice_result_get_error(r), "key k9 unknown") != NULL,
                  "%s", sluice_result_get_error(r));
  }
  env_free(e);
}
END_TEST

/* A ciphertext moved to another task (here: renamed in its envelope) does
 * not open, and is buried as such. */
START_TEST(sealed_args_moved_to_another_task_fail_to_open)
{
  Env *e = sealed_env();
  SluiceEnqueueOptions eo;
  g_autoptr(SluiceEnvelope) env = NULL;
  g_autoptr(GBytes) moved = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceDeadLetter) dl = NULL;
  g_autofree gchar *id = NULL;
  SluiceSubmit submit = {0};

  add_task(e, "t.echo", task_echo, NULL);
  sluice_enqueue_options_init(&eo);
  eo.delay_ms = 60000;
  id = enqueue(e, "t.echo", "[\"" MARKER "\"]", &eo);
  env = scheduled_envelope(e, id, NULL);
  g_free(env->id);
  env->id = g_strdup("someone-else");
  moved = sluice_envelope_encode(NULL, env, &error);
  ck_assert_ptr_nonnull(moved);
  submit.id = env->id;
  submit.queue = SLUICE_DEFAULT_QUEUE;
  submit.payload = moved;
  ck_assert(sluice_broker_enqueue(e->broker, &submit, 1, &error));
  run_idle(e);
  ck_assert_uint_eq(total_runs(), 0);
  dl = only_dead_letter(e);
  ck_assert_str_eq(dl->reason, "malformed");
  ck_assert_msg(strstr(dl->detail, "authentication failed") != NULL, "%s",
                dl->detail);
  env_free(e);
}
END_TEST

/* The version that says `seal`: a v1 reader defers, this one reads. A
 * seal in a version 1 envelope is refused as malformed. */
START_TEST(a_seal_in_version_one_is_malformed)
{
  static const gchar v1[] =
      "{\"v\": 1, \"id\": \"v1-sealed\", \"task\": \"t.ok\", \"queue\": "
      "\"default\", \"attempt\": 1, \"args\": {\"$bin\": "
      "\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\"}, \"seal\": "
      "\"aes-256-gcm:k1\"}";
  Env *e = sealed_env();
  g_autoptr(GBytes) payload = g_bytes_new_static(v1, sizeof v1 - 1);
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceDeadLetter) dl = NULL;
  SluiceSubmit submit = {
      .id = "v1-sealed", .queue = SLUICE_DEFAULT_QUEUE, .payload = payload};

  ck_assert(sluice_broker_enqueue(e->broker, &submit, 1, &error));
  run_idle(e);
  ck_assert_uint_eq(total_runs(), 0);
  dl = only_dead_letter(e);
  ck_assert_str_eq(dl->reason, "malformed");
  ck_assert_msg(strstr(dl->detail, "need envelope format version 2") != NULL,
                "%s", dl->detail);
  env_free(e);
}
END_TEST

/* The same keys, before the rotation: k0 current. */
static const gchar BEFORE[] =
    "key k0 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n"
    "key k1 ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=\n"
    "current k0\n";
/* After the old key is retired: k1 alone. */
static const gchar RETIRED[] =
    "key k1 ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=\n"
    "current k1\n";

static SluiceClient *
client_with(Env *e, const gchar *keyring_text)
{
  g_autoptr(SluiceKeyring) keyring =
      keyring_text != NULL ? keyring_of(keyring_text) : NULL;
  g_autoptr(GError) error = NULL;
  SluiceClientOptions co;
  SluiceClient *c;

  sluice_client_options_init(&co);
  co.keyring = keyring;
  c = sluice_client_new(e->broker, &co, &error);
  ck_assert_msg(c != NULL, "%s", error != NULL ? error->message : "");
  return c;
}

/* A queue no worker of the scenarios serves: what waits there stays put
 * (a live worker's fetch may take a message of a paused queue it was
 * already waiting on, and hand it back at the end of a stream). */
#define PARKED "parked"

/* Lists @state with @client (QUEUED: of PARKED): the tasks, in the
 * listing's order. */
static GPtrArray *
listed(SluiceClient *client, SluiceTaskState state)
{
  SluiceListOptions lo;
  g_autoptr(GError) error = NULL;
  GPtrArray *out;

  sluice_list_options_init(&lo);
  lo.state = state;
  lo.queue = state == SLUICE_STATE_QUEUED ? PARKED : NULL;
  lo.limit = 100;
  out = sluice_client_list(client, &lo, NULL, &error);
  ck_assert_msg(out != NULL, "%s", error != NULL ? error->message : "");
  return out;
}

/* What a client holding only @keyring_text opens of @state: the count of
 * tasks whose args it read (and that hold the marker), the rest sealed. */
static guint
opened_by(Env *e, const gchar *keyring_text, SluiceTaskState state,
          guint *out_sealed)
{
  g_autoptr(SluiceClient) c = client_with(e, keyring_text);
  g_autoptr(GPtrArray) tasks = listed(c, state);
  guint opened = 0;

  *out_sealed = 0;
  for (guint i = 0; i < tasks->len; i++) {
    const SluiceListedTask *t = tasks->pdata[i];
    if (t->seal == NULL && holds_marker(t->args))
      opened++;
    else
      (*out_sealed)++;
  }
  return opened;
}

/* Rotation: what waits under the old key (ready, scheduled, dead), and
 * what waits in clear, is sealed again with the current key, so a keyring
 * without the old key reads all of it; what no key here opens stays as it
 * was; a second run finds everything current; and a resealed task runs. */
START_TEST(reseal_moves_what_waits_to_the_current_key)
{
  Env *e = sealed_env();
  g_autoptr(SluiceClient) before = client_with(e, BEFORE);
  g_autoptr(SluiceClient) bare = client_with(e, NULL);
  g_autoptr(SluiceClient) stranger = client_with(e, OTHER);
  g_autoptr(GPtrArray) ready = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) order = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *bad = NULL;
  g_autofree gchar *later = NULL;
  g_autofree gchar *alien = NULL;
  SluiceEnqueueOptions eo;
  SluiceResealCounts counts;
  guint sealed = 0;

  add_task(e, "t.echo", task_echo, NULL);
  /* A dead letter under the old key: its bytes are kept as enqueued. */
  bad = sluice_test_client_enqueue(before, "t.fatal", "[\"" MARKER "\"]", NULL);
  run_idle(e);
  ck_assert_state(e, bad, SLUICE_STATE_DEAD_LETTERED);
  sluice_enqueue_options_init(&eo);
  eo.queue = PARKED;
  for (guint i = 0; i < 3; i++)
    g_ptr_array_add(ready, sluice_test_client_enqueue(before, "t.echo",
                                                      "[\"" MARKER "\"]", &eo));
  g_ptr_array_add(ready, sluice_test_client_enqueue(bare, "t.echo",
                                                    "[\"" MARKER "\"]", &eo));
  alien =
      sluice_test_client_enqueue(stranger, "t.echo", "[\"" MARKER "\"]", &eo);
  sluice_enqueue_options_init(&eo);
  eo.delay_ms = 60000;
  later = sluice_test_client_enqueue(before, "t.echo", "[\"" MARKER "\"]", &eo);
  ck_assert_uint_eq(opened_by(e, RETIRED, SLUICE_STATE_QUEUED, &sealed), 1);
  ck_assert_uint_eq(sealed, 4);

  ck_assert_msg(sluice_client_reseal(e->client, &counts, &error), "%s",
                error != NULL ? error->message : "");
  ck_assert_uint_eq(counts.resealed, 6); /* 3 + 1 in clear + 1 + 1 */
  ck_assert_uint_eq(counts.current, 0);
  ck_assert_uint_eq(counts.unreadable, 1);
  ck_assert_uint_eq(counts.moved, 0);

  /* The old key is not needed any more; the stranger's is still. */
  ck_assert_uint_eq(opened_by(e, RETIRED, SLUICE_STATE_QUEUED, &sealed), 4);
  ck_assert_uint_eq(sealed, 1);
  ck_assert_uint_eq(opened_by(e, RETIRED, SLUICE_STATE_SCHEDULED, &sealed), 1);
  ck_assert_uint_eq(sealed, 0);
  ck_assert_uint_eq(opened_by(e, RETIRED, SLUICE_STATE_DEAD_LETTERED, &sealed),
                    1);
  ck_assert_uint_eq(sealed, 0);
  {
    g_autoptr(SluiceDeadLetter) dl = only_dead_letter(e);
    ck_assert_str_eq(dl->reason, "non_retryable");
    ck_assert_str_eq(dl->task_id, bad);
    ck_assert(!holds_marker(dl->payload));
  }
  /* The schedule kept its due time; the queue its order among what was
   * rewritten (a stream appends the rewritten at its end, in order). */
  ck_assert_state(e, later, SLUICE_STATE_SCHEDULED);
  order = listed(e->client, SLUICE_STATE_QUEUED);
  if (sluice_broker_supports(e->broker, SLUICE_BROKER_FEATURE_ORDERED)) {
    guint next = 0;
    for (guint i = 0; i < order->len; i++) {
      const SluiceListedTask *t = order->pdata[i];
      if (next < ready->len && strcmp(t->id, ready->pdata[next]) == 0)
        next++;
    }
    ck_assert_uint_eq(next, ready->len);
  }

  ck_assert(sluice_client_reseal(e->client, &counts, &error));
  ck_assert_uint_eq(counts.resealed, 0);
  ck_assert_uint_eq(counts.current, 6);
  ck_assert_uint_eq(counts.unreadable, 1);

  /* Due, the resealed task runs on its args (task_echo checks them). */
  sluice_test_harness_advance(e->h, 60000);
  run_idle(e);
  ck_assert_state(e, later, SLUICE_STATE_SUCCEEDED);
  env_free(e);
}
END_TEST

/* The broker swaps bytes only where they are still the bytes listed: a
 * message removed, fetched, cancelled, deleted or rewritten since is left
 * alone, and a rewrite keeps a dead letter's facts. */
START_TEST(replace_payloads_touches_only_what_is_still_listed)
{
  Env *e = env_new();
  g_autoptr(GBytes) a = sluice_test_text("payload-a");
  g_autoptr(GBytes) b = sluice_test_text("payload-b");
  g_autoptr(GBytes) other = sluice_test_text("payload-other");
  g_autoptr(GPtrArray) page = g_ptr_array_new_with_free_func(
      (GDestroyNotify)sluice_listed_message_free);
  g_autoptr(GPtrArray) dead =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *cursor = NULL;
  SluiceListedMessage *m;
  SluiceReplacement r[2];
  SluiceDeadLetter *dl;
  gboolean found = FALSE;

  /* Queued: a stale payload is refused, the listed one swapped. */
  sluice_test_enqueue(e->broker, "m1", "q", "payload-a", 0);
  ck_assert(sluice_broker_list_queued(e->broker, "q", NULL, 10, page, &cursor,
                                      &error));
  ck_assert_uint_eq(page->len, 1);
  m = page->pdata[0];
  r[0] = (SluiceReplacement){
      SLUICE_WAITING_QUEUED, "q", m->handle, other, b, FALSE};
  r[1] =
      (SluiceReplacement){SLUICE_WAITING_QUEUED, "q", m->handle, a, b, FALSE};
  ck_assert(sluice_broker_replace_payloads(e->broker, r, 2, &error));
  ck_assert(!r[0].replaced);
  ck_assert(r[1].replaced);
  {
    const gchar *queues[] = {"q", NULL};
    g_autoptr(GPtrArray) got =
        sluice_test_fetch(e->broker, "c1", queues, 10, 0);
    ck_assert_uint_eq(got->len, 1);
    ck_assert(sluice_test_bytes_is(sluice_test_delivery_at(got, 0)->payload,
                                   "payload-b"));
    /* Fetched: no longer ready, so a rewrite finds nothing. */
    r[0] =
        (SluiceReplacement){SLUICE_WAITING_QUEUED, "q", m->handle, b, a, FALSE};
    ck_assert(sluice_broker_replace_payloads(e->broker, r, 1, &error));
    ck_assert(!r[0].replaced);
  }

  /* Scheduled: kept on the schedule at its due time; gone, untouched. */
  {
    SluiceSubmit s = {.id = "s1",
                      .queue = "q",
                      .payload = a,
                      .due_at = SLUICE_TEST_EPOCH_MS + 60000};
    SluiceTaskLocation loc = {0};

    ck_assert(sluice_broker_enqueue(e->broker, &s, 1, &error));
    r[0] =
        (SluiceReplacement){SLUICE_WAITING_SCHEDULED, NULL, "s1", a, b, FALSE};
    ck_assert(sluice_broker_replace_payloads(e->broker, r, 1, &error));
    ck_assert(r[0].replaced);
    ck_assert(sluice_broker_lookup_task(e->broker, "s1", &loc, &error));
    ck_assert_int_eq(loc.place, SLUICE_TASK_PLACE_SCHEDULED);
    ck_assert(sluice_test_bytes_is(loc.payload, "payload-b"));
    ck_assert_int_eq(loc.due_at, SLUICE_TEST_EPOCH_MS + 60000);
    ck_assert_str_eq(loc.queue, "q");
    sluice_task_location_clear(&loc);
    ck_assert(sluice_broker_cancel_scheduled(e->broker, "s1", a, 60000, &found,
                                             &error));
    ck_assert(found);
    r[0] =
        (SluiceReplacement){SLUICE_WAITING_SCHEDULED, NULL, "s1", b, a, FALSE};
    ck_assert(sluice_broker_replace_payloads(e->broker, r, 1, &error));
    ck_assert(!r[0].replaced);
  }

  /* Dead: the facts stay, the bytes change; deleted, untouched. */
  sluice_test_bury(e->broker, "d1", "non_retryable");
  ck_assert(sluice_broker_dlq_list(e->broker, NULL, 10, dead, &error));
  ck_assert_uint_eq(dead->len, 1);
  dl = dead->pdata[0];
  r[0] = (SluiceReplacement){
      SLUICE_WAITING_DEAD, NULL, dl->entry_id, other, a, FALSE};
  r[1] = (SluiceReplacement){SLUICE_WAITING_DEAD, NULL, dl->entry_id,
                             dl->payload,         a,    FALSE};
  ck_assert(sluice_broker_replace_payloads(e->broker, r, 2, &error));
  ck_assert(!r[0].replaced);
  ck_assert(r[1].replaced);
  {
    g_autoptr(GPtrArray) now =
        g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);
    SluiceDeadLetter *after;

    ck_assert(sluice_broker_dlq_list(e->broker, NULL, 10, now, &error));
    ck_assert_uint_eq(now->len, 1);
    after = now->pdata[0];
    ck_assert(sluice_test_bytes_is(after->payload, "payload-a"));
    ck_assert_str_eq(after->task_id, "d1");
    ck_assert_str_eq(after->reason, dl->reason);
    ck_assert_str_eq(after->source, dl->source);
    ck_assert_str_eq(after->detail, dl->detail);
    ck_assert_uint_eq(after->deliveries, dl->deliveries);
    ck_assert_int_eq(after->at, dl->at);
    ck_assert(
        sluice_broker_dlq_delete(e->broker, after->entry_id, &found, &error));
    ck_assert(found);
    r[0] = (SluiceReplacement){
        SLUICE_WAITING_DEAD, NULL, after->entry_id, a, b, FALSE};
    ck_assert(sluice_broker_replace_payloads(e->broker, r, 1, &error));
    ck_assert(!r[0].replaced);
  }
  env_free(e);
}
END_TEST

void
sluice_conformance__add_seal(TCase *semantics)
{
  sluice_conformance__add(semantics, sealed_args_run_in_clear_and_rest_sealed,
                          0);
  sluice_conformance__add(semantics, a_sealed_result_needs_the_key_to_be_read,
                          0);
  sluice_conformance__add(semantics,
                          an_unknown_key_is_buried_malformed_never_run, 0);
  sluice_conformance__add(semantics,
                          sealed_args_moved_to_another_task_fail_to_open, 0);
  sluice_conformance__add(semantics, a_seal_in_version_one_is_malformed, 0);
  sluice_conformance__add(semantics, reseal_moves_what_waits_to_the_current_key,
                          0);
  sluice_conformance__add(
      semantics, replace_payloads_touches_only_what_is_still_listed, 0);
}

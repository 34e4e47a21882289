/* test-seal.c - keyrings, the sealed wire format, and what a real store
 * holds of sealed tasks.
 *
 * The semantics (a sealed task runs in clear, rests sealed, is buried when
 * it cannot be opened) are conformance scenarios, run on every broker
 * (tests/conformance/seal.c). Here: the keyring file and its refusals, the
 * byte-exact format the Python and Node clients share (one fixed vector),
 * the codec's rules, and the promise a user relies on: a marker planted in
 * the args of tasks in every state is found nowhere in the SQLite file or
 * in any key of the Redis namespace.
 */
#include "config.h"

#include <check.h>
#include <string.h>
#include <sys/stat.h>

#include <glib/gstdio.h>

#include <sluice/sluice.h>

#include "lib/sluice-private.h"
#include "tests/helpers/broker-calls.h"
#include "tests/helpers/log-capture.h"
#if WITH_REDIS_TESTS
#include "tests/helpers/redis-server.h"
#endif

#define MARKER "marker-83c1-never-at-rest"

static const gchar KEYRING[] =
    "# a test keyring\n"
    "key k0 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n"
    "\n"
    "key\tk1   ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=\n"
    "current k1\n";

static gchar *tmp_dir;

static void
setup(void)
{
  tmp_dir = g_dir_make_tmp("sluice-seal-XXXXXX", NULL);
  ck_assert_ptr_nonnull(tmp_dir);
  g_unsetenv("CREDENTIALS_DIRECTORY");
}

static void
teardown(void)
{
  g_autoptr(GDir) dir = g_dir_open(tmp_dir, 0, NULL);
  const gchar *name;

  while (dir != NULL && (name = g_dir_read_name(dir)) != NULL) {
    g_autofree gchar *path = g_build_filename(tmp_dir, name, NULL);
    g_unlink(path);
  }
  g_rmdir(tmp_dir);
  g_clear_pointer(&tmp_dir, g_free);
}

static SluiceKeyring *
keyring_of(const gchar *text)
{
  g_autoptr(GError) error = NULL;
  SluiceKeyring *k = sluice_keyring_new_from_text(text, -1, "test", &error);

  ck_assert_msg(k != NULL, "%s", error != NULL ? error->message : "");
  return k;
}

static gchar *
write_file(const gchar *name, const gchar *text, int mode)
{
  gchar *path = g_build_filename(tmp_dir, name, NULL);

  ck_assert(g_file_set_contents(path, text, -1, NULL));
  ck_assert_int_eq(g_chmod(path, mode), 0);
  return path;
}

/* ---- The keyring ---------------------------------------------------------- */

START_TEST(a_keyring_reads_its_keys_and_current)
{
  g_autoptr(SluiceKeyring) k = keyring_of(KEYRING);

  ck_assert_str_eq(sluice_keyring_get_current(k), "k1");
  ck_assert(sluice_keyring_has_key(k, "k0"));
  ck_assert(sluice_keyring_has_key(k, "k1"));
  ck_assert(!sluice_keyring_has_key(k, "k2"));
}
END_TEST

START_TEST(a_bad_keyring_is_refused_naming_the_line)
{
  static const struct {
    const gchar *text, *want;
  } cases[] = {
      {"key k1 ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=\nkeys k2\n",
       "line 2: a line is"},
      {"key k/1 ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=\n",
       "line 1: a key id"},
      {"key k1 ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pg==\n",
       "line 1: a key is 32"},
      {"key k1 ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9P*8=\n",
       "line 1: a key is 32"},
      {"key k1 ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=\n"
       "key k1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n",
       "line 2: this key id is given twice"},
      {"key k1 ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=\n",
       "no “current ID”"},
      {"key k1 ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=\ncurrent k2\n",
       "is not among its keys"},
      {"key k1 ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=\ncurrent k1\n"
       "current k1\n",
       "line 3: a second “current”"},
      {"key k1\n", "line 1: a key line is"},
  };

  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(SluiceKeyring) k =
        sluice_keyring_new_from_text(cases[i].text, -1, "ring.txt", &error);

    ck_assert_msg(k == NULL, "case %u loaded", i);
    ck_assert(
        g_error_matches(error, SLUICE_SEAL_ERROR, SLUICE_SEAL_ERROR_KEYRING));
    ck_assert_msg(strstr(error->message, cases[i].want) != NULL &&
                      strstr(error->message, "ring.txt") != NULL,
                  "case %u: %s", i, error->message);
    /* Never a byte of key material in a message. */
    ck_assert_msg(strstr(error->message, "ICEiIyQl") == NULL, "case %u: %s", i,
                  error->message);
  }
}
END_TEST

START_TEST(a_keyring_others_can_read_is_refused)
{
  g_autofree gchar *path = write_file("ring", KEYRING, 0644);
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceKeyring) k = sluice_keyring_load(path, &error);
  g_autoptr(SluiceKeyring) from_credentials = NULL;
  g_autoptr(SluiceKeyring) private = NULL;

  ck_assert_ptr_null(k);
  ck_assert_msg(strstr(error->message, "chmod 600") != NULL &&
                    strstr(error->message, path) != NULL,
                "%s", error->message);
  g_clear_error(&error);
  /* systemd's LoadCredential= directory is the service's own. */
  g_setenv("CREDENTIALS_DIRECTORY", tmp_dir, TRUE);
  from_credentials = sluice_keyring_load(path, &error);
  ck_assert_msg(from_credentials != NULL, "%s",
                error != NULL ? error->message : "");
  g_unsetenv("CREDENTIALS_DIRECTORY");
  ck_assert_int_eq(g_chmod(path, 0600), 0);
  private = sluice_keyring_load(path, &error);
  ck_assert_msg(private != NULL, "%s", error != NULL ? error->message : "");
}
END_TEST

START_TEST(adding_a_key_makes_it_current_and_keeps_the_old)
{
  g_autofree gchar *path = g_build_filename(tmp_dir, "new-ring", NULL);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *first = NULL;
  g_autoptr(SluiceKeyring) one = NULL;
  g_autoptr(SluiceKeyring) two = NULL;
  g_autofree gchar *text = NULL;
  GStatBuf st;

  ck_assert_msg(sluice_keyring_file_add_key(path, NULL, &first, &error), "%s",
                error != NULL ? error->message : "");
  ck_assert_int_eq(g_stat(path, &st), 0);
  ck_assert_int_eq(st.st_mode & 0777, 0600);
  one = sluice_keyring_load(path, &error);
  ck_assert_ptr_nonnull(one);
  ck_assert_str_eq(sluice_keyring_get_current(one), first);

  ck_assert(sluice_keyring_file_add_key(path, "2027-q1", NULL, &error));
  two = sluice_keyring_load(path, &error);
  ck_assert_ptr_nonnull(two);
  ck_assert_str_eq(sluice_keyring_get_current(two), "2027-q1");
  ck_assert(sluice_keyring_has_key(two, first));
  ck_assert(g_file_get_contents(path, &text, NULL, NULL));
  ck_assert_ptr_nonnull(strstr(text, "# Sluice keyring"));

  ck_assert(!sluice_keyring_file_add_key(path, "2027-q1", NULL, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "already has a key"));
  g_clear_error(&error);
  ck_assert(!sluice_keyring_file_add_key(path, "no spaces", NULL, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "is not a key id"));
}
END_TEST

/* ---- The format --------------------------------------------------------- */

static gchar *
hex_of(GBytes *b)
{
  gsize len = 0;
  const guint8 *p = g_bytes_get_data(b, &len);
  GString *s = g_string_new(NULL);

  for (gsize i = 0; i < len; i++)
    g_string_append_printf(s, "%02x", p[i]);
  return g_string_free(s, FALSE);
}

/* The vector the Python and Node clients check too (PROTOCOL.md). */
START_TEST(the_sealed_bytes_match_the_shared_vector)
{
  static const guint8 nonce[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  g_autoptr(SluiceKeyring) k = keyring_of(KEYRING);
  g_autoptr(GBytes) plain = g_bytes_new_static("\x91\xa5hello", 7);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *label = NULL;
  g_autoptr(GBytes) args =
      sluice_seal__close_with_nonce(k, SLUICE_SEAL_ARGS, "t-1", "demo.echo",
                                    "default", plain, nonce, &label, &error);
  g_autoptr(GBytes) result =
      sluice_seal__close_with_nonce(k, SLUICE_SEAL_RESULT, "t-1", "demo.echo",
                                    "default", plain, nonce, NULL, &error);
  g_autofree gchar *args_hex = hex_of(args);
  g_autofree gchar *result_hex = hex_of(result);
  g_autoptr(GBytes) back = NULL;

  ck_assert_str_eq(label, "aes-256-gcm:k1");
  ck_assert_str_eq(args_hex, "c423000102030405060708090a0bcdf735c2265984dedd"
                             "b58164b65068681628ac6802125b");
  ck_assert_str_eq(result_hex, "c423000102030405060708090a0bcdf735c226598408f8"
                               "4295840dabb6a10e72f2b35a2918");
  back = sluice_seal__open(k, SLUICE_SEAL_ARGS, label, "t-1", "demo.echo",
                           "default", args, &error);
  ck_assert_msg(back != NULL, "%s", error != NULL ? error->message : "");
  ck_assert(g_bytes_equal(back, plain));
}
END_TEST

/* Each part of the associated data, and the domain, is bound. */
START_TEST(a_seal_opens_only_for_its_own_task)
{
  static const gchar *const other[][3] = {
      {"t-2", "demo.echo", "default"},
      {"t-1", "demo.other", "default"},
      {"t-1", "demo.echo", "low"},
  };
  g_autoptr(SluiceKeyring) k = keyring_of(KEYRING);
  g_autoptr(GBytes) plain = g_bytes_new_static("\xa3"
                                               "abc",
                                               4);
  g_autofree gchar *label = NULL;
  g_autoptr(GBytes) sealed = sluice_seal__close(
      k, SLUICE_SEAL_ARGS, "t-1", "demo.echo", "default", plain, &label, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) as_result = NULL;
  g_autoptr(GBytes) without = NULL;
  g_autoptr(GBytes) unknown_alg = NULL;

  for (guint i = 0; i < G_N_ELEMENTS(other); i++) {
    g_autoptr(GBytes) got =
        sluice_seal__open(k, SLUICE_SEAL_ARGS, label, other[i][0], other[i][1],
                          other[i][2], sealed, &error);
    ck_assert_ptr_null(got);
    ck_assert(g_error_matches(error, SLUICE_SEAL_ERROR,
                              SLUICE_SEAL_ERROR_AUTHENTICATION));
    ck_assert_ptr_nonnull(strstr(error->message, "authentication failed"));
    g_clear_error(&error);
  }
  as_result = sluice_seal__open(k, SLUICE_SEAL_RESULT, label, "t-1",
                                "demo.echo", "default", sealed, &error);
  ck_assert_ptr_null(as_result);
  g_clear_error(&error);
  without = sluice_seal__open(NULL, SLUICE_SEAL_ARGS, label, "t-1", "demo.echo",
                              "default", sealed, &error);
  ck_assert_ptr_null(without);
  ck_assert_ptr_nonnull(strstr(error->message, "key k1 unknown"));
  g_clear_error(&error);
  unknown_alg = sluice_seal__open(k, SLUICE_SEAL_ARGS, "rot13:k1", "t-1",
                                  "demo.echo", "default", sealed, &error);
  ck_assert_ptr_null(unknown_alg);
  ck_assert_ptr_nonnull(strstr(error->message, "algorithm rot13 unknown"));
}
END_TEST

static SluiceEnvelope *
sealed_envelope(void)
{
  g_autoptr(SluiceKeyring) k = keyring_of(KEYRING);
  SluiceEnvelope *env = sluice_envelope_new();
  g_autoptr(GError) error = NULL;

  env->id = g_strdup("t-1");
  env->task = g_strdup("demo.echo");
  env->queue = g_strdup("default");
  g_bytes_unref(env->args);
  env->args = g_bytes_new_static("\xa5hello", 6);
  ck_assert_msg(sluice_client__seal_args(k, env, &error), "%s",
                error != NULL ? error->message : "");
  return env;
}

/* Version 2 with `seal` last, in both codecs, and back. */
START_TEST(a_sealed_envelope_round_trips_in_both_codecs)
{
  const SluiceCodec *codecs[] = {sluice_codec_msgpack(), sluice_codec_json()};
  g_autoptr(SluiceEnvelope) env = sealed_envelope();

  for (guint i = 0; i < G_N_ELEMENTS(codecs); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) bytes = sluice_envelope_encode(codecs[i], env, &error);
    g_autoptr(SluiceEnvelope) back = NULL;
    g_autoptr(GBytes) again = NULL;
    gsize len = 0;
    const gchar *data = g_bytes_get_data(bytes, &len);

    ck_assert_msg(bytes != NULL, "%s", error != NULL ? error->message : "");
    ck_assert(g_strstr_len(data, (gssize)len, "hello") == NULL);
    back = sluice_envelope_decode(bytes, NULL, &error);
    ck_assert_msg(back != NULL, "%s", error != NULL ? error->message : "");
    ck_assert_uint_eq(back->version, 2);
    ck_assert_str_eq(back->seal, "aes-256-gcm:k1");
    ck_assert(g_bytes_equal(back->args, env->args));
    again = sluice_envelope_encode(codecs[i], back, &error);
    ck_assert(g_bytes_equal(again, bytes));
  }
  {
    /* msgpack: `v` is 2 and `seal` the last key. */
    g_autoptr(GBytes) bytes = sluice_envelope_encode(NULL, env, NULL);
    gsize len = 0;
    const guint8 *b = g_bytes_get_data(bytes, &len);
    static const gchar tail[] = "\xa4seal\xae"
                                "aes-256-gcm:k1";

    ck_assert_uint_eq(b[3], 2);
    ck_assert(len > sizeof tail - 1 &&
              memcmp(b + len - (sizeof tail - 1), tail, sizeof tail - 1) == 0);
  }
}
END_TEST

START_TEST(a_seal_breaking_the_rules_is_invalid)
{
  static const struct {
    const gchar *json, *want;
  } cases[] = {
      {"{\"v\":1,\"id\":\"a\",\"task\":\"t\",\"queue\":\"q\",\"attempt\":1,"
       "\"args\":{\"$bin\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"},"
       "\"seal\":\"aes-256-gcm:k1\"}",
       "need envelope format version 2"},
      {"{\"v\":2,\"id\":\"a\",\"task\":\"t\",\"queue\":\"q\",\"attempt\":1,"
       "\"args\":[1,2],\"seal\":\"aes-256-gcm:k1\"}",
       "args must be one bin"},
      {"{\"v\":2,\"id\":\"a\",\"task\":\"t\",\"queue\":\"q\",\"attempt\":1,"
       "\"args\":{\"$bin\":\"AAAA\"},\"seal\":\"aes-256-gcm:k1\"}",
       "args must be one bin"},
      {"{\"v\":2,\"id\":\"a\",\"task\":\"t\",\"queue\":\"q\",\"attempt\":1,"
       "\"seal\":\"aes-256-gcm\"}",
       "seal: must be"},
      {"{\"v\":2,\"id\":\"a\",\"task\":\"t\",\"queue\":\"q\",\"attempt\":1,"
       "\"seal\":\"aes 256:k1\"}",
       "seal: must be"},
      {"{\"v\":2,\"id\":\"a\",\"task\":\"t\",\"queue\":\"q\",\"attempt\":1,"
       "\"seal\":7}",
       "seal"},
  };

  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(GBytes) bytes =
        g_bytes_new_static(cases[i].json, strlen(cases[i].json));
    g_autoptr(GError) error = NULL;
    g_autoptr(SluiceEnvelope) env = sluice_envelope_decode(bytes, NULL, &error);

    ck_assert_msg(env == NULL, "case %u decoded", i);
    ck_assert_msg(strstr(error->message, cases[i].want) != NULL, "case %u: %s",
                  i, error->message);
  }
  {
    /* One form per message: version 2 is the sealed one. */
    static const gchar v2[] = "{\"v\":2,\"id\":\"a\",\"task\":\"t\","
                              "\"queue\":\"q\",\"attempt\":1}";
    g_autoptr(GBytes) bytes = g_bytes_new_static(v2, sizeof v2 - 1);
    g_autoptr(GError) error = NULL;
    g_autoptr(SluiceEnvelope) env = sluice_envelope_decode(bytes, NULL, &error);

    ck_assert_ptr_null(env);
    ck_assert_ptr_nonnull(strstr(error->message, "has no seal"));
  }
}
END_TEST

/* A result record with `seal` is version 2 and reads back as sealed. */
START_TEST(a_sealed_record_round_trips)
{
  g_autoptr(SluiceResult) r = sluice_result_new("t-1", SLUICE_STATE_SUCCEEDED);
  g_autoptr(GBytes) value = g_bytes_new_static("\xc4\x1c"
                                               "0123456789abcdef"
                                               "0123456789ab",
                                               30);
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(SluiceResult) back = NULL;
  g_autoptr(GError) error = NULL;

  sluice_result_set_value(r, value);
  sluice_result__set_seal(r, "aes-256-gcm:k1");
  bytes = sluice_result_encode(r);
  ck_assert_uint_eq(((const guint8 *)g_bytes_get_data(bytes, NULL))[3], 2);
  back = sluice_result_decode(bytes, &error);
  ck_assert_msg(back != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_str_eq(sluice_result_get_seal(back), "aes-256-gcm:k1");
  ck_assert(g_bytes_equal(sluice_result_get_value(back), value));
}
END_TEST

/* ---- What a real store holds --------------------------------------------- */

static gboolean
echo(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  sluice_task_context_set_result(ctx, sluice_task_context_get_args_bytes(ctx));
  return TRUE;
}

static gboolean
fatal(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  g_set_error(error, SLUICE_TASK_ERROR, SLUICE_TASK_ERROR_FATAL, "never");
  return FALSE;
}

/* Tasks in every state a user's data can rest in: waiting on the
 * schedule, succeeded with a result, buried; each with the marker in its
 * args. */
static void
plant_markers(SluiceBroker *broker)
{
  g_autoptr(SluiceKeyring) k = keyring_of(KEYRING);
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(SluiceTestHarness) h = NULL;
  g_autoptr(GError) error = NULL;
  SluiceWorkerOptions o;
  SluiceEnqueueOptions later;
  const gchar *json = "{\"card\": \"" MARKER "\"}";
  g_autofree gchar *ok = NULL, *bad = NULL, *waiting = NULL;
  g_autoptr(SluiceResult) r = NULL;

  ck_assert(
      sluice_registry_add(registry, "t.echo", echo, NULL, NULL, NULL, &error));
  ck_assert(sluice_registry_add(registry, "t.fatal", fatal, NULL, NULL, NULL,
                                &error));
  sluice_worker_options_init(&o);
  o.track_state = TRUE;
  o.keyring = k;
  h = sluice_test_harness_new_with_broker(broker, registry, &o, &error);
  ck_assert_msg(h != NULL, "%s", error != NULL ? error->message : "");
  ok = sluice_test_client_enqueue(sluice_test_harness_get_client(h), "t.echo",
                                  json, NULL);
  bad = sluice_test_client_enqueue(sluice_test_harness_get_client(h), "t.fatal",
                                   json, NULL);
  sluice_enqueue_options_init(&later);
  later.delay_ms = 3600 * 1000;
  waiting = sluice_test_client_enqueue(sluice_test_harness_get_client(h),
                                       "t.echo", json, &later);
  ck_assert(sluice_test_harness_run_until_idle(h, &error));
  r = sluice_client_get_result(sluice_test_harness_get_client(h), ok, 0, NULL,
                               &error);
  ck_assert_msg(r != NULL, "%s", error != NULL ? error->message : "");
  ck_assert(g_strstr_len(g_bytes_get_data(sluice_result_get_value(r), NULL),
                         (gssize)g_bytes_get_size(sluice_result_get_value(r)),
                         MARKER) != NULL);
  ck_assert_int_eq(sluice_test_harness_get_state(h, bad),
                   SLUICE_STATE_DEAD_LETTERED);
}

static gboolean
file_holds_marker(const gchar *path)
{
  g_autofree gchar *data = NULL;
  gsize len = 0;

  if (!g_file_get_contents(path, &data, &len, NULL))
    return FALSE;
  return g_strstr_len(data, (gssize)len, MARKER) != NULL;
}

START_TEST(no_byte_of_sealed_args_rests_in_the_sqlite_file)
{
  g_autofree gchar *path = g_build_filename(tmp_dir, "store.db", NULL);
  g_autofree gchar *url = g_strdup_printf("sqlite://%s", path);
  g_autofree gchar *wal = g_strdup_printf("%s-wal", path);
  g_autoptr(GError) error = NULL;
  SluiceBroker *broker = sluice_broker_new_for_url(url, NULL, NULL, &error);

  ck_assert_msg(broker != NULL, "%s", error != NULL ? error->message : "");
  plant_markers(broker);
  ck_assert(!file_holds_marker(path));
  ck_assert(!file_holds_marker(wal));
  sluice_broker_unref(broker);
  ck_assert(!file_holds_marker(path));
}
END_TEST

#if WITH_REDIS_TESTS
static gboolean
reply_holds_marker(const redisReply *reply)
{
  if (reply == NULL)
    return FALSE;
  if ((reply->type == REDIS_REPLY_STRING ||
       reply->type == REDIS_REPLY_STATUS) &&
      g_strstr_len(reply->str, (gssize)reply->len, MARKER) != NULL)
    return TRUE;
  for (size_t i = 0; reply->type == REDIS_REPLY_ARRAY && i < reply->elements;
       i++)
    if (reply_holds_marker(reply->element[i]))
      return TRUE;
  return FALSE;
}

/* Every key's value read by its type, not DUMP: a dump may compress a
 * value and hide a marker that is there in clear. */
static guint
scan_redis(SluiceTestRedis *server)
{
  redisReply *keys = sluice_test_redis_command(server, "KEYS *");
  guint n = 0;

  for (size_t i = 0; i < keys->elements; i++) {
    const gchar *key = keys->element[i]->str;
    redisReply *type = sluice_test_redis_command(server, "TYPE %s", key);
    redisReply *value = NULL;

    if (strcmp(type->str, "string") == 0)
      value = sluice_test_redis_command(server, "GET %s", key);
    else if (strcmp(type->str, "list") == 0)
      value = sluice_test_redis_command(server, "LRANGE %s 0 -1", key);
    else if (strcmp(type->str, "hash") == 0)
      value = sluice_test_redis_command(server, "HGETALL %s", key);
    else if (strcmp(type->str, "zset") == 0)
      value = sluice_test_redis_command(server, "ZRANGE %s 0 -1", key);
    else if (strcmp(type->str, "set") == 0)
      value = sluice_test_redis_command(server, "SMEMBERS %s", key);
    else if (strcmp(type->str, "stream") == 0)
      value = sluice_test_redis_command(server, "XRANGE %s - +", key);
    ck_assert_msg(value != NULL, "key %s of type %s not read", key, type->str);
    ck_assert_msg(!reply_holds_marker(value),
                  "key %s (%s) holds the args in "
                  "clear",
                  key, type->str);
    freeReplyObject(value);
    freeReplyObject(type);
    n++;
  }
  freeReplyObject(keys);
  return n;
}

static void
redis_markers(SluiceRedisMode mode)
{
  SluiceBrokerUrlOptions uo;
  g_autoptr(SluiceTestRedis) server = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *url = NULL;
  SluiceBroker *broker;

  server = sluice_test_redis_start(NULL, &error);
  ck_assert_msg(server != NULL, "%s", error != NULL ? error->message : "");
  url = g_strdup(sluice_test_redis_url(server));
  sluice_broker_url_options_init(&uo);
  uo.mode = mode;
  broker = sluice_broker_new_for_url(url, &uo, NULL, &error);
  ck_assert_msg(broker != NULL, "%s", error != NULL ? error->message : "");
  plant_markers(broker);
  sluice_broker_unref(broker);
  /* The records, the schedule, the dead letters and the queues at least. */
  ck_assert_uint_ge(scan_redis(server), 4);
}

START_TEST(no_byte_of_sealed_args_rests_in_redis_fast)
{
  redis_markers(SLUICE_REDIS_FAST);
}
END_TEST

START_TEST(no_byte_of_sealed_args_rests_in_redis_reliable)
{
  redis_markers(SLUICE_REDIS_RELIABLE);
}
END_TEST
#endif

int
main(void)
{
  Suite *s = suite_create("seal");
  TCase *keyring = tcase_create("keyring");
  TCase *format = tcase_create("format");
  TCase *stores = tcase_create("stores");
  SRunner *sr;
  int failed;

  sluice_test_log_capture_install();
#if WITH_REDIS_TESTS
  g_free(sluice_test_redis_require());
#endif
  tcase_add_checked_fixture(keyring, setup, teardown);
  tcase_add_test(keyring, a_keyring_reads_its_keys_and_current);
  tcase_add_test(keyring, a_bad_keyring_is_refused_naming_the_line);
  tcase_add_test(keyring, a_keyring_others_can_read_is_refused);
  tcase_add_test(keyring, adding_a_key_makes_it_current_and_keeps_the_old);
  suite_add_tcase(s, keyring);
  tcase_add_test(format, the_sealed_bytes_match_the_shared_vector);
  tcase_add_test(format, a_seal_opens_only_for_its_own_task);
  tcase_add_test(format, a_sealed_envelope_round_trips_in_both_codecs);
  tcase_add_test(format, a_seal_breaking_the_rules_is_invalid);
  tcase_add_test(format, a_sealed_record_round_trips);
  suite_add_tcase(s, format);
  tcase_add_checked_fixture(stores, setup, teardown);
  tcase_set_timeout(stores, 120);
#if WITH_SQLITE_TESTS
  tcase_add_test(stores, no_byte_of_sealed_args_rests_in_the_sqlite_file);
#endif
#if WITH_REDIS_TESTS
  tcase_add_test(stores, no_byte_of_sealed_args_rests_in_redis_fast);
  tcase_add_test(stores, no_byte_of_sealed_args_rests_in_redis_reliable);
#endif
  suite_add_tcase(s, stores);
  sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}

/* test-hostile.c - what a user or an attacker can put in a message, a
 * URL or a name, and what Sluice must do with it (issue 21).
 *
 * Each case is a finding of an independent fuzzing campaign, kept as a
 * regression test; tests/test-codec.c has the codecs' general rules and
 * fuzz/ keeps looking for new findings. Here:
 *   - depth: arguments nested up to the one limit reach the task intact
 *     (msgpack_unpack()'s 32-level stack turned 33 to 63 into nil), deeper
 *     ones are refused at enqueue, and a bin at the limit goes through both
 *     codecs;
 *   - messages: every error that quotes outside bytes is valid UTF-8
 *     without control characters;
 *   - memory: what one hostile message costs to decode and to unpack is
 *     bounded by its size, measured by counting the process's allocations
 *     (tests/helpers/alloc-counter.c), not by asking the code under test;
 *   - URLs: no input makes GLib complain, and no password reaches a
 *     message, however the URL is malformed.
 */
#include "config.h"

#include "brokers/redis/redis-broker.h"
#include "lib/sluice-private.h"
#include "serializers/codec-private.h"
#include "tests/helpers/alloc-counter.h"

#include <check.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#define assert_no_error(err)                                                   \
  ck_assert_msg((err) == NULL, "unexpected error: %s",                         \
                (err) != NULL ? (err)->message : "")

/* A message fit for a terminal and a JSON log: valid UTF-8 and no C0, DEL
 * or C1 control character. */
static void
assert_printable(const gchar *message)
{
  ck_assert_msg(g_utf8_validate(message, -1, NULL), "not UTF-8: %s", message);
  for (const gchar *p = message; *p != '\0'; p = g_utf8_next_char(p)) {
    gunichar c = g_utf8_get_char(p);
    ck_assert_msg(c >= 0x20 && !(c >= 0x7f && c <= 0x9f),
                  "control character U+%04X in: %s", c, message);
  }
}

static gchar *
nested_json(guint depth, const gchar *inner)
{
  GString *s = g_string_new(NULL);

  for (guint i = 0; i < depth; i++)
    g_string_append_c(s, '[');
  g_string_append(s, inner);
  for (guint i = 0; i < depth; i++)
    g_string_append_c(s, ']');
  return g_string_free(s, FALSE);
}

typedef struct {
  msgpack_sbuffer sb;
  msgpack_packer pk;
} Pk;

static void
pk_init(Pk *p)
{
  msgpack_sbuffer_init(&p->sb);
  msgpack_packer_init(&p->pk, &p->sb, msgpack_sbuffer_write);
}

static GBytes *
pk_finish(Pk *p)
{
  GBytes *b = g_bytes_new(p->sb.data, p->sb.size);

  msgpack_sbuffer_destroy(&p->sb);
  return b;
}

static void
pk_str(Pk *p, const gchar *s)
{
  msgpack_pack_str(&p->pk, strlen(s));
  msgpack_pack_str_body(&p->pk, s, strlen(s));
}

/* The required keys of an envelope: v, id, task, queue, attempt; @extra
 * more pairs follow, packed by the caller. */
static void
pk_envelope_start(Pk *p, guint extra)
{
  msgpack_pack_map(&p->pk, 5 + extra);
  pk_str(p, "v");
  msgpack_pack_int(&p->pk, 1);
  pk_str(p, "id");
  pk_str(p, "id-1");
  pk_str(p, "task");
  pk_str(p, "t.depth");
  pk_str(p, "queue");
  pk_str(p, "default");
  pk_str(p, "attempt");
  msgpack_pack_int(&p->pk, 1);
}

/* ---- Depth --------------------------------------------------------------- */

/* The depth of an unpacked value: containers count, scalars do not. */
static guint
object_depth(const msgpack_object *o)
{
  guint deepest = 0;

  /* MAX() evaluates its arguments twice: no recursive call inside it. */
  if (o->type == MSGPACK_OBJECT_ARRAY) {
    for (guint32 i = 0; i < o->via.array.size; i++) {
      guint d = object_depth(&o->via.array.ptr[i]);
      deepest = MAX(deepest, d);
    }
    return deepest + 1;
  }
  if (o->type == MSGPACK_OBJECT_MAP) {
    for (guint32 i = 0; i < o->via.map.size; i++) {
      guint k = object_depth(&o->via.map.ptr[i].key);
      guint v = object_depth(&o->via.map.ptr[i].val);
      deepest = MAX(deepest, MAX(k, v));
    }
    return deepest + 1;
  }
  return 0;
}

static gboolean
record_depth(SluiceTaskContext *ctx, gpointer user_data, GError **error)
{
  const msgpack_object *args = sluice_task_context_get_args(ctx);
  guint depth = object_depth(args);

  g_array_append_val((GArray *)user_data, depth);
  return TRUE;
}

/* msgpack_unpack() has a 32-level stack: args at depth 33 reached the
 * task as nil and it dead-lettered; every depth up to the limit must now
 * arrive whole. */
START_TEST(test_task_gets_args_up_to_the_limit)
{
  static const guint depths[] = {1, 32, 33, 40, SLUICE_MAX_ARGS_DEPTH};
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(GArray) seen = g_array_new(FALSE, FALSE, sizeof(guint));
  g_autoptr(SluiceTestHarness) h = NULL;
  g_autoptr(GError) error = NULL;

  ck_assert(sluice_registry_add(registry, "t.depth", record_depth, seen, NULL,
                                NULL, &error));
  h = sluice_test_harness_new(registry, NULL, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS(depths); i++) {
    g_autofree gchar *json = nested_json(depths[i], "1");
    g_autoptr(GBytes) args = sluice_args_from_json(json, -1, &error);
    g_autofree gchar *id = NULL;
    g_autoptr(SluiceResult) r = NULL;

    assert_no_error(error);
    id = sluice_client_enqueue(sluice_test_harness_get_client(h), "t.depth",
                               args, NULL, &error);
    assert_no_error(error);
    ck_assert(sluice_test_harness_run_until_idle(h, &error));
    r = sluice_test_harness_get_record(h, id);
    ck_assert_int_eq(sluice_result_get_state(r), SLUICE_STATE_SUCCEEDED);
    ck_assert_uint_eq(seen->len, i + 1);
    ck_assert_uint_eq(g_array_index(seen, guint, i), depths[i]);
  }
}
END_TEST

/* One level more than the limit: refused at enqueue with a clear error,
 * whether the args come as msgpack or through the JSON converter. */
START_TEST(test_enqueue_refuses_args_over_the_limit)
{
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(SluiceTestHarness) h =
      sluice_test_harness_new(registry, NULL, NULL);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *json = nested_json(SLUICE_MAX_ARGS_DEPTH + 1, "1");
  GByteArray *deep = g_byte_array_new();
  g_autoptr(GBytes) args = NULL;
  g_autofree gchar *id = NULL;

  for (guint i = 0; i < SLUICE_MAX_ARGS_DEPTH + 1; i++)
    g_byte_array_append(deep, (const guint8 *)"\x91", 1);
  g_byte_array_append(deep, (const guint8 *)"\x01", 1);
  args = g_byte_array_free_to_bytes(deep);
  id = sluice_client_enqueue(sluice_test_harness_get_client(h), "t.depth", args,
                             NULL, &error);
  ck_assert_ptr_null(id);
  ck_assert(
      g_error_matches(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TOO_DEEP));
  ck_assert_msg(strstr(error->message, "63") != NULL, "%s", error->message);
  ck_assert_msg(strstr(error->message, "t.depth") != NULL, "%s",
                error->message);
  g_clear_error(&error);

  ck_assert_ptr_null(sluice_args_from_json(json, -1, &error));
  ck_assert(
      g_error_matches(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TOO_DEEP));
}
END_TEST

/* A bin at the deepest level: {"$bin"} adds no level, so both codecs carry
 * the same envelope (it used to turn into JSON the JSON decoder refused). */
START_TEST(test_bin_at_the_limit_through_both_codecs)
{
  g_autofree gchar *json =
      nested_json(SLUICE_MAX_ARGS_DEPTH, "{\"$bin\":\"AAEC\"}");
  g_autofree gchar *map_json = nested_json(SLUICE_MAX_ARGS_DEPTH, "{}");
  g_autofree gchar *not_bin =
      nested_json(SLUICE_MAX_ARGS_DEPTH, "{\"$bin\":1}");
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) args = sluice_args_from_json(json, -1, &error);
  g_autoptr(SluiceEnvelope) env = sluice_envelope_new();
  g_autofree gchar *back = NULL;

  assert_no_error(error);
  back = sluice_args_to_json(args, &error);
  assert_no_error(error);
  ck_assert_str_eq(back, json);

  env->id = g_strdup("bin-deep");
  env->task = g_strdup("t.depth");
  env->queue = g_strdup("default");
  g_bytes_unref(env->args);
  env->args = g_bytes_ref(args);
  for (guint c = 0; c < 2; c++) {
    const SluiceCodec *codec =
        c == 0 ? sluice_codec_msgpack() : sluice_codec_json();
    g_autoptr(GBytes) bytes = sluice_envelope_encode(codec, env, &error);
    g_autoptr(SluiceEnvelope) decoded = NULL;

    assert_no_error(error);
    decoded = sluice_envelope_decode(bytes, NULL, &error);
    assert_no_error(error);
    ck_assert(g_bytes_equal(decoded->args, args));
  }

  /* What is not a bin is a map, and a map there is one level too deep. */
  ck_assert_ptr_null(sluice_args_from_json(map_json, -1, &error));
  ck_assert(
      g_error_matches(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TOO_DEEP));
  g_clear_error(&error);
  ck_assert_ptr_null(sluice_args_from_json(not_bin, -1, &error));
  ck_assert(
      g_error_matches(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TOO_DEEP));
}
END_TEST

/* ---- Messages ------------------------------------------------------------ */

/* An unknown key whose bytes are not UTF-8, holding a malformed value: the
 * msgpack codec quoted the key's raw bytes. */
START_TEST(test_unknown_key_is_escaped)
{
  static const gchar key[] = "k\xff\xfe\x1b[2J";
  Pk p;
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(GError) error = NULL;

  pk_init(&p);
  pk_envelope_start(&p, 1);
  msgpack_pack_str(&p.pk, sizeof key - 1);
  msgpack_pack_str_body(&p.pk, key, sizeof key - 1);
  msgpack_pack_array(&p.pk, 1);
  msgpack_sbuffer_write(&p.sb, "\xc1", 1);
  bytes = pk_finish(&p);
  ck_assert_ptr_null(sluice_envelope_decode(bytes, NULL, &error));
  ck_assert_ptr_nonnull(error);
  assert_printable(error->message);
  ck_assert_msg(strstr(error->message, "k\\xff\\xfe\\x1b[2J") != NULL, "%s",
                error->message);
}
END_TEST

/* JSON errors that quote the input, with multi-byte characters next to
 * the error (json-glib cut its token inside one), and {"$bin"} texts cut
 * at 40 bytes inside a character. */
START_TEST(test_json_errors_are_utf8)
{
  static const gchar *const texts[] = {
      "{\"a\" \"ééééééééééééééééééééééééééééééééééééééééé\"}",
      "[\"é\" \"é\"]",
      "{\"é\": 1 \"ü\"}",
      "[1, ééé]",
      "{\"é\":1,\"é\":2}",
      "{\"\\u001b[2J\":1,\"\\u001b[2J\":2}",
      "[\"x\xc3\"]",
      "{\"$bin\": \"xéééééééééééééééééééééééééééééééééééé\"}",
      "{\"$bin\": \"x\\u001bééééééééééééééééééééé\"}",
      "[12345678901234567890123456789012345678901234567890]",
      "[1e99999]",
      "\xef\xbb\xbf[]",
  };

  for (gsize i = 0; i < G_N_ELEMENTS(texts); i++) {
    g_autoptr(GError) error = NULL;
    g_autofree gchar *envelope = g_strdup_printf(
        "{\"v\":1,\"id\":\"i\",\"task\":\"t\",\"queue\":\"q\",\"attempt\":1,"
        "\"args\":%s}",
        texts[i]);
    g_autoptr(GBytes) bytes = g_bytes_new(envelope, strlen(envelope));

    ck_assert_msg(sluice_args_from_json(texts[i], -1, &error) == NULL, "%s",
                  texts[i]);
    assert_printable(error->message);
    g_clear_error(&error);
    ck_assert_ptr_null(sluice_envelope_decode(bytes, NULL, &error));
    assert_printable(error->message);
  }
}
END_TEST

/* A task name is quoted when it is refused: an ESC or a BEL in it must not
 * reach a terminal through the error. */
START_TEST(test_task_name_errors_are_escaped)
{
  static const gchar *const names[] = {
      "mail\x1b]0;pwned\x07", "bad\xff", "é", "a b",
      "éééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééé"
      "é"
      "éééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééé"};
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(SluiceTestHarness) h =
      sluice_test_harness_new(registry, NULL, NULL);

  for (gsize i = 0; i < G_N_ELEMENTS(names); i++) {
    g_autoptr(GError) error = NULL;
    g_autofree gchar *id = NULL;

    ck_assert(!sluice_registry_add(registry, names[i], record_depth, NULL, NULL,
                                   NULL, &error));
    assert_printable(error->message);
    g_clear_error(&error);
    id = sluice_client_enqueue(sluice_test_harness_get_client(h), names[i],
                               NULL, NULL, &error);
    ck_assert_ptr_null(id);
    assert_printable(error->message);
  }
}
END_TEST

START_TEST(test_escape_helper)
{
  static const struct {
    const gchar *in;
    gssize len;
    gsize max;
    const gchar *out;
  } cases[] = {
      {"plain", -1, 0, "plain"},
      {"é✓😀", -1, 0, "é✓😀"},
      {"a\x1b[1mb", -1, 0, "a\\x1b[1mb"},
      {"\x07\x7f\n\t\r", -1, 0, "\\x07\\x7f\\n\\t\\r"},
      {"\xc2\x9b", -1, 0, "\\u009b"},
      {"\xff\xfe", -1, 0, "\\xff\\xfe"},
      {"a\0b", 3, 0, "a\\x00b"},
      {"\xe2\x82", -1, 0, "\\xe2\\x82"},
      {"\xed\xa0\x80", -1, 0, "\\xed\\xa0\\x80"},
      {"abcdef", -1, 3, "abc…"},
      {"aéé", -1, 2, "aé…"},
      {"", -1, 0, ""},
  };

  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree gchar *out =
        sluice_text__escape(cases[i].in, cases[i].len, cases[i].max);
    ck_assert_str_eq(out, cases[i].out);
    assert_printable(out);
  }
}
END_TEST

/* ---- Memory ---------------------------------------------------------------
 *
 * The bounds of PROTOCOL.md ("What a message costs"), measured: decoding a
 * message of n bytes allocates at most 8n + 64 KiB at its peak, and its
 * arguments unpack into at most SLUICE_ARGS_COST_FACTOR times their size
 * plus SLUICE_ARGS_COST_BASE.
 */

#define DECODE_FACTOR 8
#define DECODE_BASE (64 * 1024)
#define HOSTILE_BYTES (1024 * 1024 - 64)

/* Decodes @bytes; returns the peak of what the decode allocated. */
static gint64
decode_cost(GBytes *bytes, SluiceEnvelope **out, GError **error)
{
  gint64 before;
  SluiceEnvelope *env;

  sluice_test_alloc_reset_peak();
  before = sluice_test_alloc_current();
  env = sluice_envelope_decode(bytes, NULL, error);
  if (out != NULL)
    *out = env;
  else
    sluice_envelope_free(env);
  return sluice_test_alloc_peak() - before;
}

static void
assert_decode_bounded(const gchar *what, GBytes *bytes, gboolean accepted)
{
  g_autoptr(GError) error = NULL;
  gsize n = g_bytes_get_size(bytes);
  gint64 cost = decode_cost(bytes, NULL, &error);

  ck_assert_msg(cost <= (gint64)(DECODE_FACTOR * n + DECODE_BASE),
                "%s: decoding %" G_GSIZE_FORMAT " bytes took %" G_GINT64_FORMAT
                " bytes (%.1f times)",
                what, n, cost, (gdouble)cost / (gdouble)n);
  ck_assert_msg((error == NULL) == accepted, "%s: %s", what,
                error != NULL ? error->message : "accepted");
}

/* A JSON envelope of about 1 MiB whose args are @open, many @item, @close. */
static GBytes *
json_envelope(const gchar *open, const gchar *item, const gchar *close)
{
  GString *s = g_string_new("{\"v\":1,\"id\":\"i\",\"task\":\"t\",\"queue\":"
                            "\"q\",\"attempt\":1,\"args\":");
  gsize item_len = strlen(item);

  g_string_append(s, open);
  for (guint i = 0; s->len + item_len + 8 < HOSTILE_BYTES; i++) {
    if (i > 0)
      g_string_append_c(s, ',');
    g_string_append(s, item);
  }
  g_string_append(s, close);
  g_string_append_c(s, '}');
  return g_string_free_to_bytes(s);
}

START_TEST(test_json_envelope_cost_is_bounded)
{
  static const struct {
    const gchar *item;
    gboolean accepted;
  } shapes[] = {
      {"0", FALSE}, /* too many values for their size, refused */
      {"1e1", TRUE},
      {"-1.5", TRUE},
      {"\"ab\"", TRUE},
      {"[]", FALSE},
      {"{}", FALSE},
      {"[0,0]", FALSE},
      {"{\"$bin\":\"\"}", TRUE},
      {"{\"$bin\":\"AAAA\"}", TRUE},
      {"\"\\u00e9\\u00e9\"", TRUE},
  };

  for (gsize i = 0; i < G_N_ELEMENTS(shapes); i++) {
    g_autoptr(GBytes) bytes = json_envelope("[", shapes[i].item, "]");
    assert_decode_bounded(shapes[i].item, bytes, shapes[i].accepted);
  }
  /* An object of many unique keys, an object of many repeats of one. */
  {
    GString *s = g_string_new("{\"v\":1,\"id\":\"i\",\"task\":\"t\",\"queue\":"
                              "\"q\",\"attempt\":1,\"args\":{");
    for (guint i = 0; s->len < HOSTILE_BYTES - 32; i++)
      g_string_append_printf(s, "%s\"%x\":0", i > 0 ? "," : "", i);
    g_string_append(s, "}}");
    {
      g_autoptr(GBytes) bytes = g_string_free_to_bytes(s);
      assert_decode_bounded("unique keys", bytes, TRUE);
    }
  }
  {
    g_autoptr(GBytes) bytes = json_envelope("{", "\"\":0", "}");
    assert_decode_bounded("repeated keys", bytes, FALSE);
  }
  /* Deep nesting up to the limit, repeated: of nothing (refused: too many
   * values), and around a string (accepted). */
  {
    g_autofree gchar *deep = nested_json(60, "{\"a\":{}}");
    g_autoptr(GBytes) bytes = json_envelope("[", deep, "]");
    assert_decode_bounded("deep", bytes, FALSE);
  }
  {
    g_autofree gchar *text = g_strnfill(300, 'x');
    g_autofree gchar *str = g_strdup_printf("{\"k\":\"%s\"}", text);
    g_autofree gchar *deep = nested_json(60, str);
    g_autoptr(GBytes) bytes = json_envelope("[", deep, "]");
    assert_decode_bounded("deep string", bytes, TRUE);
  }
}
END_TEST

/* A 1 MiB msgpack history of tiny lines decoded into as many strings
 * (41 MB); a decoder now keeps the newest SLUICE_HISTORY_MAX_LINES, the
 * ones a worker keeps anyway. */
START_TEST(test_history_cost_is_bounded)
{
  const guint n = 600000;
  Pk p;
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(GError) error = NULL;
  SluiceEnvelope *env = NULL;
  gint64 cost;

  pk_init(&p);
  pk_envelope_start(&p, 1);
  pk_str(&p, "history");
  msgpack_pack_array(&p.pk, n);
  for (guint i = 0; i < n; i++) {
    pk_str(&p, i >= n - 3 ? "last" : (i % 2 ? "" : "7"));
  }
  bytes = pk_finish(&p);
  cost = decode_cost(bytes, &env, &error);
  assert_no_error(error);
  ck_assert_int_le(cost, DECODE_FACTOR * g_bytes_get_size(bytes) / 100);
  ck_assert_uint_eq(env->history->len, SLUICE_HISTORY_MAX_LINES);
  ck_assert_str_eq(g_ptr_array_index(env->history, 9), "last");
  ck_assert_str_eq(g_ptr_array_index(env->history, 5), "");
  ck_assert_str_eq(g_ptr_array_index(env->history, 6), "7");
  sluice_envelope_free(env);
  /* The same through JSON. */
  {
    GString *s = g_string_new("{\"v\":1,\"id\":\"i\",\"task\":\"t\",\"queue\":"
                              "\"q\",\"attempt\":1,\"history\":[");
    for (guint i = 0; s->len < HOSTILE_BYTES - 32; i++)
      g_string_append(s, i > 0 ? ",\"\"" : "\"\"");
    g_string_append(s, ",\"last\"]}");
    {
      g_autoptr(GBytes) json = g_string_free_to_bytes(s);
      cost = decode_cost(json, &env, &error);
      assert_no_error(error);
      ck_assert_int_le(cost, DECODE_FACTOR * g_bytes_get_size(json) / 100);
      ck_assert_uint_eq(env->history->len, SLUICE_HISTORY_MAX_LINES);
      ck_assert_str_eq(g_ptr_array_index(env->history, 9), "last");
      sluice_envelope_free(env);
    }
  }
}
END_TEST

START_TEST(test_header_count_is_bounded)
{
  for (guint round = 0; round < 2; round++) {
    guint n = round == 0 ? SLUICE_MAX_HEADERS : SLUICE_MAX_HEADERS + 1;
    Pk p;
    g_autoptr(GBytes) bytes = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(SluiceEnvelope) env = NULL;
    g_autoptr(GBytes) encoded = NULL;

    pk_init(&p);
    pk_envelope_start(&p, 1);
    pk_str(&p, "headers");
    msgpack_pack_map(&p.pk, n);
    for (guint i = 0; i < n; i++) {
      g_autofree gchar *name = g_strdup_printf("h%u", i);
      pk_str(&p, name);
      pk_str(&p, "");
    }
    bytes = pk_finish(&p);
    env = sluice_envelope_decode(bytes, NULL, &error);
    if (round == 0) {
      assert_no_error(error);
      /* ...and the encoders refuse one header more. */
      sluice_envelope_set_header(env, "one-more", "x");
      for (guint c = 0; c < 2; c++) {
        encoded = sluice_envelope_encode(
            c == 0 ? sluice_codec_msgpack() : sluice_codec_json(), env, &error);
        ck_assert_ptr_null(encoded);
        ck_assert(g_error_matches(error, SLUICE_CODEC_ERROR,
                                  SLUICE_CODEC_ERROR_INVALID));
        ck_assert_ptr_nonnull(strstr(error->message, "256"));
        g_clear_error(&error);
      }
    } else {
      ck_assert_ptr_null(env);
      ck_assert(g_error_matches(error, SLUICE_CODEC_ERROR,
                                SLUICE_CODEC_ERROR_INVALID));
      ck_assert_ptr_nonnull(strstr(error->message, "256"));
    }
  }
}
END_TEST

/* Arguments of many one-byte values cost 24 bytes per value to unpack:
 * refused beyond the bound, at enqueue and at decode; within it, the
 * unpacked tree stays within the bound, measured. */
START_TEST(test_args_unpack_cost_is_bounded)
{
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(SluiceTestHarness) h =
      sluice_test_harness_new(registry, NULL, NULL);
  g_autoptr(GError) error = NULL;
  const guint n_nil = 400000, n_int = 300000;
  Pk p;
  g_autoptr(GBytes) nils = NULL;
  g_autoptr(GBytes) ints = NULL;
  g_autoptr(GBytes) envelope = NULL;
  g_autoptr(SluiceEnvelope) env = NULL;
  g_autofree gchar *id = NULL;
  SluiceTaskContext ctx;
  const msgpack_object *args;
  gint64 before, cost;

  pk_init(&p);
  msgpack_pack_array(&p.pk, n_nil);
  for (guint i = 0; i < n_nil; i++)
    msgpack_pack_nil(&p.pk);
  nils = pk_finish(&p);
  id = sluice_client_enqueue(sluice_test_harness_get_client(h), "t.depth", nils,
                             NULL, &error);
  ck_assert_ptr_null(id);
  /* The client's "too large", as for a message over max_message_bytes. */
  ck_assert(g_error_matches(error, SLUICE_CLIENT_ERROR,
                            SLUICE_CLIENT_ERROR_TOO_LARGE));
  g_clear_error(&error);

  pk_init(&p);
  pk_envelope_start(&p, 1);
  pk_str(&p, "args");
  msgpack_sbuffer_write(&p.sb, g_bytes_get_data(nils, NULL),
                        g_bytes_get_size(nils));
  envelope = pk_finish(&p);
  ck_assert_ptr_null(sluice_envelope_decode(envelope, NULL, &error));
  ck_assert(
      g_error_matches(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TOO_LARGE));
  g_clear_error(&error);
  g_clear_pointer(&envelope, g_bytes_unref);

  /* Three bytes per value (integers 128..65535) are within the bound. */
  pk_init(&p);
  msgpack_pack_array(&p.pk, n_int);
  for (guint i = 0; i < n_int; i++)
    msgpack_pack_uint16(&p.pk, (guint16)(300 + i % 60000));
  ints = pk_finish(&p);
  pk_init(&p);
  pk_envelope_start(&p, 1);
  pk_str(&p, "args");
  msgpack_sbuffer_write(&p.sb, g_bytes_get_data(ints, NULL),
                        g_bytes_get_size(ints));
  envelope = pk_finish(&p);
  env = sluice_envelope_decode(envelope, NULL, &error);
  assert_no_error(error);

  sluice_task_context__init(&ctx, env, 1, 3, NULL, NULL);
  sluice_test_alloc_reset_peak();
  before = sluice_test_alloc_current();
  args = sluice_task_context_get_args(&ctx);
  cost = sluice_test_alloc_peak() - before;
  ck_assert_int_eq(args->type, MSGPACK_OBJECT_ARRAY);
  ck_assert_uint_eq(args->via.array.size, n_int);
  ck_assert_uint_eq(args->via.array.ptr[n_int - 1].via.u64,
                    300 + (n_int - 1) % 60000);
  ck_assert_msg(cost <=
                    (gint64)(SLUICE_ARGS_COST_FACTOR * g_bytes_get_size(ints) +
                             SLUICE_ARGS_COST_BASE),
                "unpacking %" G_GSIZE_FORMAT " bytes took %" G_GINT64_FORMAT,
                g_bytes_get_size(ints), cost);
  /* One zone chunk of exactly what the tree needs. */
  ck_assert_int_le(cost, (gint64)(n_int * sizeof(msgpack_object)) + 1024);
  sluice_task_context__clear(&ctx);
}
END_TEST

/* ---- URLs ---------------------------------------------------------------- */

#define CANARY "Pw/7?q@S#:k"

/* Parses @text (with GLib criticals fatal) and returns the message or the
 * display, checking that neither holds @secret nor a 5-byte piece of it. */
static gchar *
parse_url_safely(const gchar *text, const gchar *secret, gboolean *ok)
{
  g_autoptr(GError) error = NULL;
  SluiceRedisUrl url;
  SluiceRedisUrlParams params;
  gchar *shown;
  gsize n = strlen(secret);

  g_log_set_always_fatal(G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING);
  /* The whole parse: the network layer's, then the broker's parameters. */
  *ok = sluice_redis__parse_url(text, &url, &params, &error);
  if (*ok) {
    shown = g_strdup(url.display);
    sluice_redis_url__clear(&url);
  } else {
    ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                              SLUICE_BROKER_ERROR_INVALID));
    shown = g_strdup(error->message);
  }
  assert_printable(shown);
  for (gsize i = 0; n >= 5 && i + 5 <= n; i++) {
    g_autofree gchar *piece = g_strndup(secret + i, 5);
    ck_assert_msg(strstr(shown, piece) == NULL,
                  "“%s” leaks “%s” of the password: %s", text, piece, shown);
  }
  return shown;
}

START_TEST(test_url_without_host_is_an_error)
{
  static const gchar *const texts[] = {
      "redis:/..//u:p@/0",
      "redis://u:p@/0",
      "redis://",
      "redis:///0",
      "redis://:p@",
      "redis://u:p@:6379/0",
      "unix://",
      "unix:",
      "redis:",
      "",
  };

  for (gsize i = 0; i < G_N_ELEMENTS(texts); i++) {
    gboolean ok;
    g_autofree gchar *shown = parse_url_safely(texts[i], "", &ok);

    ck_assert_msg(!ok, "“%s” was accepted: %s", texts[i], shown);
    ck_assert_msg(strstr(shown, "(null)") == NULL, "%s", shown);
    ck_assert_msg(strstr(shown, ":p@") == NULL, "%s", shown);
  }
}
END_TEST

/* Passwords with unescaped '/', '?', '@' or '#' are the password, up to
 * the last '@', and never shown. */
START_TEST(test_url_password_is_never_shown)
{
  static const struct {
    const gchar *text;
    const gchar *password; /* NULL: must be refused */
    const gchar *host;
  } cases[] = {
      {"redis://u:12/34SECRET@h/0", "12/34SECRET", "h"},
      {"redis://u:p@SECRET@h", "p@SECRET", "h"},
      {"redis://:SE?CRET#x@h:7000/2", "SE?CRET#x", "h"},
      {"redis://u:SE%2FCRET@h", "SE/CRET", "h"},
      {"redis://u:SECRETPW@", NULL, NULL},
      {"redis://SECRETPW@h", NULL, NULL},
      {"rediss://u:SECRETPW@h", "SECRETPW", "h"},
      {"rediss://u:SECRETPW@h/0?tls_bogus=1", NULL, NULL},
      {"http://u:SECRETPW@h", NULL, NULL},
      {"u:SECRETPW@h", NULL, NULL},
      {"redis:/u:SECRETPW@h", NULL, NULL},
      {"redis://u:SEC%zzRETPW@h", NULL, NULL},
      {"redis://u:SECRETPW%00@h", NULL, NULL},
      {"redis://u:SECRETPW@h:99999", NULL, NULL},
      {"redis://u:SECRETPW@h/notadb", NULL, NULL},
      {"redis://u:SECRETPW@h/0?x=1", NULL, NULL},
      {"redis://u:SECRETPW@h/0#frag", NULL, NULL},
      {"redis://u:SECRETPW@[::1", NULL, NULL},
      {"unix://u:SECRETPW@/run/redis.sock", NULL, NULL},
      {"unix:///run/SECRETPW@x.sock", NULL, NULL},
      {"redis://u:SECRETPW@h\xff/0", NULL, NULL},
  };

  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    gboolean ok;
    g_autofree gchar *shown = parse_url_safely(cases[i].text, "SECRETPW", &ok);

    ck_assert_msg(strstr(shown, "SECRET") == NULL, "“%s”: %s", cases[i].text,
                  shown);
    ck_assert_msg(ok == (cases[i].password != NULL), "“%s”: %s", cases[i].text,
                  shown);
    if (ok) {
      SluiceRedisUrl url;
      g_autoptr(GError) error = NULL;

      ck_assert(sluice_redis_url__parse(cases[i].text, &url, &error));
      ck_assert_str_eq(url.password, cases[i].password);
      ck_assert_str_eq(url.host, cases[i].host);
      sluice_redis_url__clear(&url);
    }
  }
}
END_TEST

/* The oracle of fuzz/fuzz-url.c over a few thousand generated URLs: a
 * password between a ':' after "//" and an '@' is never shown. */
START_TEST(test_url_canary_never_leaks)
{
  static const gchar *const before[] = {
      "redis://",  "redis://u",      "redis://u/v", "redis:///",   "unix://",
      "REDIS://a", "redis:/",        "x",           "redis://h:1", "redis://u@",
      "",          "redis://[::1]/",
  };
  static const gchar *const after[] = {
      "h",      "h/0", "h:6379/3", "",        "@h",    "/0",
      "h?db=1", "h#x", "[::1]:1",  "h:x",     "h/0/1", "\xff",
      "h@i/0",  "%zz", "h/%00",    "/run/s",  "?",     "h:99999",
      "[::1",   "::",  "h /0",     "h\x1b/0", "@",     "h/0?x=@",
  };
  static const gchar *const sep[] = {":", "::", ":x:", "/:", "?:"};

  for (gsize a = 0; a < G_N_ELEMENTS(before); a++)
    for (gsize s = 0; s < G_N_ELEMENTS(sep); s++)
      for (gsize c = 0; c < G_N_ELEMENTS(after); c++) {
        g_autofree gchar *text =
            g_strconcat(before[a], sep[s], CANARY, "@", after[c], NULL);
        gboolean ok;
        g_autofree gchar *shown = parse_url_safely(text, CANARY, &ok);
      }
}
END_TEST

/* ---- Dead letters from Redis --------------------------------------------- */

static redisReply *
string_reply(int type, const gchar *s)
{
  redisReply *r = calloc(1, sizeof *r);

  r->type = type;
  r->str = strdup(s);
  r->len = strlen(s);
  return r;
}

/* An entry as XRANGE returns it, with fields the stream should never hold:
 * a payload as a status reply (steal_bytes refused it with a critical) and
 * numbers no gint64 holds (converting "inf" is undefined). */
START_TEST(test_dead_letter_with_odd_fields)
{
  static const gchar *const fields[] = {"payload", "deliveries", "at", "task"};
  static const gchar *const values[] = {"raw", "1e999", "-inf", "t"};
  redisReply *entry = calloc(1, sizeof *entry);
  redisReply *pairs = calloc(1, sizeof *pairs);
  SluiceDeadLetter *dl;

  g_log_set_always_fatal(G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING);
  entry->type = REDIS_REPLY_ARRAY;
  entry->elements = 2;
  entry->element = calloc(2, sizeof *entry->element);
  entry->element[0] = string_reply(REDIS_REPLY_STRING, "1-0");
  entry->element[1] = pairs;
  pairs->type = REDIS_REPLY_ARRAY;
  pairs->elements = 2 * G_N_ELEMENTS(fields);
  pairs->element = calloc(pairs->elements, sizeof *pairs->element);
  for (gsize i = 0; i < G_N_ELEMENTS(fields); i++) {
    pairs->element[2 * i] = string_reply(REDIS_REPLY_STRING, fields[i]);
    pairs->element[2 * i + 1] = string_reply(
        i == 0 ? REDIS_REPLY_STATUS : REDIS_REPLY_STRING, values[i]);
  }
  dl = sluice_redis_broker__dead_letter_from_reply(entry);
  ck_assert_ptr_nonnull(dl);
  ck_assert_uint_eq(g_bytes_get_size(dl->payload), 3);
  ck_assert_uint_eq(dl->deliveries, 0);
  ck_assert_int_eq(dl->at, 0);
  ck_assert_str_eq(dl->task, "t");
  sluice_dead_letter_free(dl);
  freeReplyObject(entry);
}
END_TEST

static Suite *
hostile_suite(void)
{
  Suite *s = suite_create("hostile");
  TCase *tc;

  tc = tcase_create("depth");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_task_gets_args_up_to_the_limit);
  tcase_add_test(tc, test_enqueue_refuses_args_over_the_limit);
  tcase_add_test(tc, test_bin_at_the_limit_through_both_codecs);
  suite_add_tcase(s, tc);

  tc = tcase_create("messages");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_unknown_key_is_escaped);
  tcase_add_test(tc, test_json_errors_are_utf8);
  tcase_add_test(tc, test_task_name_errors_are_escaped);
  tcase_add_test(tc, test_escape_helper);
  suite_add_tcase(s, tc);

  tc = tcase_create("memory");
  /* Megabyte inputs under ASan take a while on a busy machine. */
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_json_envelope_cost_is_bounded);
  tcase_add_test(tc, test_history_cost_is_bounded);
  tcase_add_test(tc, test_header_count_is_bounded);
  tcase_add_test(tc, test_args_unpack_cost_is_bounded);
  suite_add_tcase(s, tc);

  tc = tcase_create("dead-letters");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_dead_letter_with_odd_fields);
  suite_add_tcase(s, tc);

  tc = tcase_create("urls");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_url_without_host_is_an_error);
  tcase_add_test(tc, test_url_password_is_never_shown);
  tcase_add_test(tc, test_url_canary_never_leaks);
  suite_add_tcase(s, tc);
  return s;
}

int
main(int argc, char **argv)
{
  SRunner *sr;
  int failed;

  sluice_test_alloc_require_plain_malloc(argv);
  if (!sluice_test_alloc_start()) {
    fprintf(stderr, "cannot count allocations in this build\n");
    return EXIT_FAILURE;
  }
  sr = srunner_create(hostile_suite());
  srunner_run_all(sr, CK_ENV);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

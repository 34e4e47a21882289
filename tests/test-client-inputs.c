/* test-client-inputs.c - what the C client refuses at enqueue, case by
 * case from tests/data/bad-inputs.json: the file the Python and Node
 * clients' tests read too, so that every producer refuses the same inputs
 * with the same limits. The memory broker only: no server.
 */
#include "config.h"

#include <check.h>
#include <json-glib/json-glib.h>
#include <string.h>

#include "lib/sluice-private.h"

static JsonArray *cases;

/* A string field: a JSON string, or {"repeat": s, "times": n}. NULL when
 * absent. */
static gchar *
string_field(JsonObject *c, const gchar *name)
{
  JsonNode *node = json_object_get_member(c, name);
  JsonObject *spec;
  GString *s;
  gint64 times;

  if (node == NULL)
    return NULL;
  if (JSON_NODE_HOLDS_VALUE(node))
    return g_strdup(json_node_get_string(node));
  spec = json_node_get_object(node);
  times = json_object_get_int_member(spec, "times");
  s = g_string_new(NULL);
  for (gint64 i = 0; i < times; i++)
    g_string_append(s, json_object_get_string_member(spec, "repeat"));
  return g_string_free(s, FALSE);
}

static gint64
int_field(JsonObject *o, const gchar *name, gint64 unset)
{
  return json_object_has_member(o, name) ? json_object_get_int_member(o, name)
                                         : unset;
}

static void
read_options(JsonObject *c, SluiceMessageOptions *o)
{
  JsonObject *opts = json_object_has_member(c, "options")
                         ? json_object_get_object_member(c, "options")
                         : NULL;

  sluice_message_options_init(o);
  if (opts == NULL)
    return;
  o->retry.max_attempts = (gint)int_field(opts, "max_attempts", -1);
  o->retry.initial_backoff_ms = int_field(opts, "initial_backoff_ms", -1);
  o->retry.max_backoff_ms = int_field(opts, "max_backoff_ms", -1);
  if (json_object_has_member(opts, "multiplier"))
    o->retry.multiplier = json_object_get_double_member(opts, "multiplier");
  o->timeout_ms = int_field(opts, "timeout_ms", 0);
  o->expires_at = int_field(opts, "expires_at", 0);
  o->result_ttl_ms = int_field(opts, "result_ttl_ms", 0);
}

/* The args of the case, or NULL; *refused when the C library already
 * refuses to build them (args nested deeper than a worker reads). */
static GBytes *
read_args(JsonObject *c, gboolean *refused)
{
  GString *json = g_string_new(NULL);
  GBytes *args;
  gint64 n;

  if ((n = int_field(c, "args_nesting", 0)) > 0) {
    for (gint64 i = 0; i < n; i++)
      g_string_append_c(json, '[');
    g_string_append_c(json, '0');
    for (gint64 i = 0; i < n; i++)
      g_string_append_c(json, ']');
  } else if ((n = int_field(c, "args_zeros", 0)) > 0) {
    g_string_append_c(json, '[');
    for (gint64 i = 0; i < n; i++)
      g_string_append(json, i > 0 ? ",0" : "0");
    g_string_append_c(json, ']');
  } else if ((n = int_field(c, "args_bytes", 0)) > 0) {
    g_string_append_c(json, '"');
    for (gint64 i = 0; i < n; i++)
      g_string_append_c(json, 'a');
    g_string_append_c(json, '"');
  } else {
    g_string_free(json, TRUE);
    return NULL;
  }
  args = sluice_args_from_json(json->str, (gssize)json->len, NULL);
  g_string_free(json, TRUE);
  *refused = args == NULL;
  return args;
}

static GHashTable *
read_headers(JsonObject *c)
{
  GHashTable *h =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  gint64 n = int_field(c, "header_count", 0);

  for (gint64 i = 0; i < n; i++)
    g_hash_table_insert(h, g_strdup_printf("h%" G_GINT64_FORMAT, i),
                        g_strdup("v"));
  if (json_object_has_member(c, "headers")) {
    JsonObject *o = json_object_get_object_member(c, "headers");
    g_autoptr(GList) names = json_object_get_members(o);

    for (GList *l = names; l != NULL; l = l->next)
      g_hash_table_insert(h, g_strdup(l->data),
                          g_strdup(json_object_get_string_member(o, l->data)));
  }
  return h;
}

START_TEST(test_case_from_the_file)
{
  JsonObject *c = json_array_get_object_element(cases, (guint)_i);
  const gchar *name = json_object_get_string_member(c, "name");
  const gchar *expect = json_object_get_string_member(c, "expect");
  g_autofree gchar *task = string_field(c, "task");
  g_autofree gchar *queue = string_field(c, "queue");
  g_autofree gchar *id = string_field(c, "id");
  g_autoptr(GHashTable) headers = read_headers(c);
  gboolean refused = FALSE;
  g_autoptr(GBytes) args = read_args(c, &refused);
  g_autoptr(SluiceBroker) broker = sluice_memory_broker_new(NULL, NULL);
  g_autoptr(SluiceClient) client = sluice_client_new(broker, NULL, NULL);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *got = NULL;
  SluiceEnqueueOptions eo;
  SluiceBrokerStats stats;
  gint64 depth = 0;

  if (refused) {
    ck_assert_msg(strcmp(expect, "invalid") == 0, "%s: args refused", name);
    return;
  }
  sluice_enqueue_options_init(&eo);
  eo.queue = queue;
  eo.id = id;
  eo.delay_ms = int_field(c, "delay_ms", 0);
  eo.eta_ms = int_field(c, "eta_ms", 0);
  eo.headers = headers;
  read_options(c, &eo.options);

  got = sluice_client_enqueue(client, task, args, &eo, &error);
  ck_assert(sluice_client_get_stats(client, NULL, &stats, NULL));
  for (guint i = 0; i < stats.queues->len; i++)
    depth += ((SluiceQueueStats *)stats.queues->pdata[i])->ready;
  depth += stats.scheduled;
  sluice_broker_stats_clear(&stats);

  if (strcmp(expect, "ok") == 0) {
    ck_assert_msg(got != NULL, "%s: refused: %s", name, error->message);
    ck_assert_int_eq(depth, 1);
    return;
  }
  ck_assert_msg(got == NULL, "%s: accepted", name);
  ck_assert_int_eq(depth, 0);
  if (strcmp(expect, "too_large") == 0)
    /* One kind of refusal, one code: a message over max_message_bytes and
     * arguments over their unpacked-size bound alike. */
    ck_assert_msg(g_error_matches(error, SLUICE_CLIENT_ERROR,
                                  SLUICE_CLIENT_ERROR_TOO_LARGE),
                  "%s: %s", name, error->message);
  else
    ck_assert_msg(g_error_matches(error, SLUICE_CLIENT_ERROR,
                                  SLUICE_CLIENT_ERROR_INVALID) ||
                      g_error_matches(error, SLUICE_CODEC_ERROR,
                                      SLUICE_CODEC_ERROR_INVALID) ||
                      g_error_matches(error, SLUICE_CODEC_ERROR,
                                      SLUICE_CODEC_ERROR_TOO_DEEP),
                  "%s: %s", name, error->message);
}
END_TEST

int
main(void)
{
  g_autofree gchar *path =
      g_build_filename(TEST_SRCDIR, "tests", "data", "bad-inputs.json", NULL);
  g_autoptr(JsonParser) parser = json_parser_new();
  g_autoptr(GError) error = NULL;
  Suite *s = suite_create("client-inputs");
  TCase *tc = tcase_create("inputs");
  SRunner *runner;
  int failed;

  if (!json_parser_load_from_file(parser, path, &error)) {
    g_printerr("%s: %s\n", path, error->message);
    return 1;
  }
  cases = json_object_get_array_member(
      json_node_get_object(json_parser_get_root(parser)), "cases");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_case_from_the_file, 0,
                      (int)json_array_get_length(cases));
  suite_add_tcase(s, tc);
  runner = srunner_create(s);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

/* c-oracle.c - what the C library writes, printed for the tests of the
 * clients in other languages (clients/python, clients/node), which must
 * write the same bytes and run the same scripts:
 *
 *   c-oracle encode FILE   for each case of FILE (tests/data/encodings.json)
 *                          one line "name<TAB>hex": the C encoding of the
 *                          envelope or result record the case describes
 *   c-oracle scripts       one line "mode<TAB>name<TAB>sha1" per script as
 *                          the C broker assembles it for each mode
 *   c-oracle dead-letter-reasons
 *                          the library's one list of dead-letter reasons
 *                          (sluice_dead_letter_reasons()), one a line, in
 *                          its order: each client's copy must be it
 *   c-oracle script-set    one line "version<TAB>sha1<TAB>layout": the
 *                          script set a namespace records ({ns}:meta
 *                          scripts) and the layout version
 */
#include "config.h"

#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>

#include "brokers/redis/redis-lua.h"
#include "brokers/redis/transport-reliable-lua.h"
#include "lib/sluice-private.h"

static gint64
int_member(JsonObject *o, const gchar *name, gint64 unset)
{
  return json_object_has_member(o, name) ? json_object_get_int_member(o, name)
                                         : unset;
}

static const gchar *
str_member(JsonObject *o, const gchar *name)
{
  return json_object_has_member(o, name)
             ? json_object_get_string_member(o, name)
             : NULL;
}

static SluiceTristate
bool_member(JsonObject *o, const gchar *name)
{
  if (!json_object_has_member(o, name))
    return SLUICE_UNSET;
  return json_object_get_boolean_member(o, name) ? SLUICE_ON : SLUICE_OFF;
}

static GBytes *
encode_envelope(JsonObject *c, GError **error)
{
  g_autoptr(SluiceEnvelope) env = sluice_envelope_new();
  JsonObject *opts = json_object_has_member(c, "opts")
                         ? json_object_get_object_member(c, "opts")
                         : NULL;

  env->id = g_strdup(str_member(c, "id"));
  env->task = g_strdup(str_member(c, "task"));
  env->queue = g_strdup(str_member(c, "queue"));
  env->attempt = (guint32)int_member(c, "attempt", 1);
  env->enqueued_at = int_member(c, "enqueued_at", 0);
  env->eta = int_member(c, "eta", 0);
  if (json_object_has_member(c, "args")) {
    g_autofree gchar *json =
        json_to_string(json_object_get_member(c, "args"), FALSE);
    GBytes *args = sluice_args_from_json(json, -1, error);

    if (args == NULL)
      return NULL;
    g_bytes_unref(env->args);
    env->args = args;
  }
  if (opts != NULL) {
    SluiceMessageOptions *o = &env->opts;

    o->retry.max_attempts = (gint)int_member(opts, "max_attempts", -1);
    o->retry.initial_backoff_ms = int_member(opts, "initial_backoff_ms", -1);
    if (json_object_has_member(opts, "multiplier"))
      o->retry.multiplier = json_object_get_double_member(opts, "multiplier");
    o->retry.max_backoff_ms = int_member(opts, "max_backoff_ms", -1);
    o->retry.jitter = bool_member(opts, "jitter");
    o->timeout_ms = int_member(opts, "timeout_ms", 0);
    o->expires_at = int_member(opts, "expires_at", 0);
    o->store_result = bool_member(opts, "store_result");
    o->result_ttl_ms = int_member(opts, "result_ttl_ms", 0);
    o->dead_letter = bool_member(opts, "dead_letter");
  }
  if (json_object_has_member(c, "headers")) {
    JsonObject *h = json_object_get_object_member(c, "headers");
    g_autoptr(GList) names = json_object_get_members(h);

    for (GList *l = names; l != NULL; l = l->next)
      sluice_envelope_set_header(env, l->data,
                                 json_object_get_string_member(h, l->data));
  }
  return sluice_envelope_encode(sluice_codec_msgpack(), env, error);
}

static GBytes *
encode_record(JsonObject *c)
{
  g_autoptr(SluiceResult) r =
      sluice_result_new(str_member(c, "id"),
                        sluice_task_state_from_string(str_member(c, "state")));

  sluice_result_set_task(r, str_member(c, "task"), str_member(c, "queue"));
  sluice_result_set_attempt(r, (guint)int_member(c, "attempt", 0));
  if (str_member(c, "error") != NULL)
    sluice_result_set_error(r, str_member(c, "error"));
  sluice_result_set_times(r, int_member(c, "enqueued_at", 0),
                          int_member(c, "started_at", 0),
                          int_member(c, "finished_at", 0));
  return sluice_result_encode(r);
}

static int
encode(const gchar *path)
{
  g_autoptr(JsonParser) parser = json_parser_new();
  g_autoptr(GError) error = NULL;
  JsonArray *cases;

  if (!json_parser_load_from_file(parser, path, &error)) {
    g_printerr("c-oracle: %s: %s\n", path, error->message);
    return 1;
  }
  cases = json_object_get_array_member(
      json_node_get_object(json_parser_get_root(parser)), "cases");
  for (guint i = 0; i < json_array_get_length(cases); i++) {
    JsonObject *c = json_array_get_object_element(cases, i);
    const gchar *kind = str_member(c, "kind");
    g_autoptr(GBytes) bytes = NULL;
    const guint8 *p;
    gsize len;

    bytes = g_strcmp0(kind, "record") == 0 ? encode_record(c)
                                           : encode_envelope(c, &error);
    if (bytes == NULL) {
      g_printerr("c-oracle: case %s: %s\n", str_member(c, "name"),
                 error->message);
      return 1;
    }
    p = g_bytes_get_data(bytes, &len);
    printf("%s\t", str_member(c, "name"));
    for (gsize k = 0; k < len; k++)
      printf("%02x", p[k]);
    printf("\n");
  }
  return 0;
}

static int
scripts(void)
{
  static const struct {
    const gchar *mode;
    const gchar *lua;
  } modes[] = {{"fast", sluice_redis_lua__transport_fast},
               {"reliable", sluice_redis_lua__transport_reliable}};
  SluiceRedisReliableScripts own;

  for (guint m = 0; m < G_N_ELEMENTS(modes); m++) {
    SluiceRedisScript all[SLUICE_REDIS_SCRIPT_N];

    sluice_redis_scripts__init(all, modes[m].lua);
    for (guint i = 0; i < SLUICE_REDIS_SCRIPT_N; i++)
      printf("%s\t%s\t%s\n", modes[m].mode, all[i].name, all[i].sha);
    sluice_redis_scripts__clear(all);
  }
  sluice_redis__reliable_scripts_init(&own);
  printf("reliable\treliable/%s\t%s\n", own.ensure.name, own.ensure.sha);
  printf("reliable\treliable/%s\t%s\n", own.fetch.name, own.fetch.sha);
  printf("reliable\treliable/%s\t%s\n", own.reclaim.name, own.reclaim.sha);
  printf("reliable\treliable/%s\t%s\n", own.requeue.name, own.requeue.sha);
  printf("reliable\treliable/%s\t%s\n", own.count_reclaimable.name,
         own.count_reclaimable.sha);
  sluice_redis__reliable_scripts_clear(&own);
  return 0;
}

static int
dead_letter_reasons(void)
{
  for (const gchar *const *r = sluice_dead_letter_reasons(); *r != NULL; r++)
    printf("%s\n", *r);
  return 0;
}

static int
script_set(void)
{
  const SluiceRedisScriptSet *set = sluice_redis_scripts__set();

  printf("%u\t%s\t%d\n", set->version, set->sha1, SLUICE_REDIS_LAYOUT_VERSION);
  return 0;
}

int
main(int argc, char **argv)
{
  if (argc == 3 && strcmp(argv[1], "encode") == 0)
    return encode(argv[2]);
  if (argc == 2 && strcmp(argv[1], "scripts") == 0)
    return scripts();
  if (argc == 2 && strcmp(argv[1], "dead-letter-reasons") == 0)
    return dead_letter_reasons();
  if (argc == 2 && strcmp(argv[1], "script-set") == 0)
    return script_set();
  g_printerr("usage: c-oracle encode FILE | c-oracle scripts | c-oracle "
             "dead-letter-reasons | c-oracle script-set\n");
  return 2;
}

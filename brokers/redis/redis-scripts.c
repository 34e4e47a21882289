/* redis-scripts.c - the Lua scripts of the Redis brokers (see
 * redis-scripts.h) and EVALSHA with the NOSCRIPT fallback.
 *
 * Rules every script here follows:
 *
 *  - Checks before writes. Redis does not roll a script back when it fails
 *    half-way, so a step reads everything it decides on before its first
 *    write. Batch scripts (enqueue, settle) apply this per item: each
 *    item is atomic on its own, as the broker contract asks.
 *  - Shebang by effect. Steps that add work (enqueue, promote, periodic
 *    claim, dead-letter replay) use "#!lua", so an out-of-memory Redis
 *    refuses them with an OOM error (SLUICE_BROKER_ERROR_FULL); steps that
 *    drain (settle, cancel, records, deletes, heartbeats) use
 *    "flags=allow-oom", so workers can still empty the queues. Verified on
 *    Redis 7.0 (docs/redis.md, fact 8).
 *  - Times come from the caller (the core's clock), never from the Redis
 *    clock or a worker's wall clock read here; TTLs are PX, so expiry
 *    follows the server.
 *  - Numbers travel as decimal strings and scores stay below 2^53, so Lua's
 *    doubles hold them exactly.
 *
 * The Lua is in brokers/redis/lua/ (compiled in, redis-lua.h): hooks.lua,
 * library.lua, a transport-<mode>.lua per mode, and one file per script,
 * whose first line is its shebang and whose comment documents its ARGV and
 * reply. A transport's fragment defines t_push, t_push_many, t_check,
 * t_ack, t_release, t_depth, t_in_flight, t_purge, t_peek, t_remove,
 * t_replace, t_heartbeat and t_leave, and optionally t_flush and t_gone; the library and bodies call
 * only those to touch a queue.
 *
 * Stored formats:
 *  - record at K_RECORD..id: one flag byte, 'F' (final) or 'P', then the
 *    record bytes; a final write also PUBLISHes "F" on K_DONE..id.
 *  - dead letter: a K_DLQ stream entry with fields payload, reason,
 *    source, deliveries, at and, when known, task_id, task, detail;
 *    K_DLQ_COUNT holds reason -> count, changed in the same script as
 *    every add and removal, so it is exact.
 *
 * To add a script: add its id to SluiceRedisScriptId, its file to lua/
 * (and to REDIS_LUA_FILES in brokers/Makefile.inc, its array to
 * redis-lua.h) with its ARGV documented, and a line in
 * sluice_redis_scripts__init().
 */
#include "config.h"

#include <string.h>

#include "brokers/redis/redis-scripts.h"

#include "brokers/redis/redis-lua.h"

/* ---- Assembly ------------------------------------------------------------ */

/* The second line of a script that calls none of the library's or the
 * transport's functions: it is assembled with the prelude alone. */
#define BARE_MARK "-- bare:"

static void
script_init(SluiceRedisScript *script, const gchar *name,
            const gchar *transport_lua, const gchar *source)
{
  g_autoptr(GChecksum) sum = NULL;
  /* The shebang must open the script: it is the source's first line,
   * and the body the rest. */
  const gchar *body = strchr(source, '\n');
  g_autofree gchar *shebang = NULL;
  gboolean bare;

  g_return_if_fail(g_str_has_prefix(source, "#!lua") && body != NULL);
  body++;
  /* The file says so itself, so that the Python and Node producers
   * assemble the same bytes (and SHA) without a list of their own. */
  bare = g_str_has_prefix(body, BARE_MARK);
  shebang = g_strndup(source, (gsize)(body - source));
  script->name = name;
  script->text =
      bare ? g_strconcat(shebang, sluice_redis_lua__prelude, body, NULL)
           : g_strconcat(shebang, sluice_redis_lua__prelude,
                         sluice_redis_lua__hooks,
                         transport_lua != NULL ? transport_lua : "",
                         sluice_redis_lua__library, body, NULL);
  script->text_len = strlen(script->text);
  sum = g_checksum_new(G_CHECKSUM_SHA1);
  g_checksum_update(sum, (const guchar *)script->text,
                    (gssize)script->text_len);
  g_strlcpy(script->sha, g_checksum_get_string(sum), sizeof script->sha);
}

void
sluice_redis_script__init(SluiceRedisScript *script, const gchar *name,
                          const gchar *transport_lua, const gchar *source)
{
  script_init(script, name, transport_lua, source);
}

void
sluice_redis_script__clear(SluiceRedisScript *script)
{
  g_clear_pointer(&script->text, g_free);
  script->text_len = 0;
  script->sha[0] = '\0';
}

void
sluice_redis_scripts__init(SluiceRedisScript *scripts,
                           const gchar *transport_lua)
{
  static const struct {
    SluiceRedisScriptId id;
    const gchar *name;
    const gchar *source;
  } table[] = {
      {SLUICE_REDIS_SCRIPT_ENQUEUE, "enqueue", sluice_redis_lua__enqueue},
      {SLUICE_REDIS_SCRIPT_PROMOTE, "promote_due",
       sluice_redis_lua__promote_due},
      {SLUICE_REDIS_SCRIPT_SETTLE, "settle", sluice_redis_lua__settle},
      {SLUICE_REDIS_SCRIPT_CANCEL, "cancel_scheduled",
       sluice_redis_lua__cancel_scheduled},
      {SLUICE_REDIS_SCRIPT_RECORD, "put_record", sluice_redis_lua__put_record},
      {SLUICE_REDIS_SCRIPT_CLAIM_PERIODIC, "claim_periodic",
       sluice_redis_lua__claim_periodic},
      {SLUICE_REDIS_SCRIPT_DLQ_REPLAY, "dlq_replay",
       sluice_redis_lua__dlq_replay},
      {SLUICE_REDIS_SCRIPT_DLQ_DELETE, "dlq_delete",
       sluice_redis_lua__dlq_delete},
      {SLUICE_REDIS_SCRIPT_STATS, "stats", sluice_redis_lua__stats},
      {SLUICE_REDIS_SCRIPT_PURGE, "purge", sluice_redis_lua__purge},
      {SLUICE_REDIS_SCRIPT_HEARTBEAT, "heartbeat", sluice_redis_lua__heartbeat},
      {SLUICE_REDIS_SCRIPT_LEAVE, "leave", sluice_redis_lua__leave},
      {SLUICE_REDIS_SCRIPT_ANNOUNCE, "announce", sluice_redis_lua__announce},
      {SLUICE_REDIS_SCRIPT_REVOKE, "revoke", sluice_redis_lua__revoke},
      {SLUICE_REDIS_SCRIPT_REVOCATIONS_SINCE, "list_revocations_since",
       sluice_redis_lua__list_revocations_since},
      {SLUICE_REDIS_SCRIPT_LOOKUP, "lookup_task",
       sluice_redis_lua__lookup_task},
      {SLUICE_REDIS_SCRIPT_LIST_QUEUED, "list_queued",
       sluice_redis_lua__list_queued},
      {SLUICE_REDIS_SCRIPT_REMOVE_QUEUED, "remove_queued",
       sluice_redis_lua__remove_queued},
      {SLUICE_REDIS_SCRIPT_LIST_SCHEDULED, "list_scheduled",
       sluice_redis_lua__list_scheduled},
      {SLUICE_REDIS_SCRIPT_RESCHEDULE, "reschedule",
       sluice_redis_lua__reschedule},
      {SLUICE_REDIS_SCRIPT_JOIN_OPEN, "join_open", sluice_redis_lua__join_open},
      {SLUICE_REDIS_SCRIPT_JOIN_ARRIVE, "join_arrive",
       sluice_redis_lua__join_arrive},
      {SLUICE_REDIS_SCRIPT_JOIN_READ, "join_read", sluice_redis_lua__join_read},
      {SLUICE_REDIS_SCRIPT_EVENTS_APPEND, "events_append",
       sluice_redis_lua__events_append},
      {SLUICE_REDIS_SCRIPT_JOIN_GROW, "join_grow", sluice_redis_lua__join_grow},
      {SLUICE_REDIS_SCRIPT_RATE_ACQUIRE, "rate_acquire",
       sluice_redis_lua__rate_acquire},
      {SLUICE_REDIS_SCRIPT_SLOT_ACQUIRE, "slot_acquire",
       sluice_redis_lua__slot_acquire},
      {SLUICE_REDIS_SCRIPT_SLOT_RELEASE, "slot_release",
       sluice_redis_lua__slot_release},
      {SLUICE_REDIS_SCRIPT_UNIQUE_ENQUEUE, "unique_enqueue",
       sluice_redis_lua__unique_enqueue},
      {SLUICE_REDIS_SCRIPT_UNIQUE_UPDATE, "unique_update",
       sluice_redis_lua__unique_update},
      {SLUICE_REDIS_SCRIPT_LIST_SLOTS, "list_slots",
       sluice_redis_lua__list_slots},
      {SLUICE_REDIS_SCRIPT_REPLACE_PAYLOADS, "replace_payloads",
       sluice_redis_lua__replace_payloads},
  };
  G_STATIC_ASSERT(G_N_ELEMENTS(table) == SLUICE_REDIS_SCRIPT_N);

  for (gsize i = 0; i < G_N_ELEMENTS(table); i++)
    script_init(&scripts[table[i].id], table[i].name, transport_lua,
                table[i].source);
}

void
sluice_redis_scripts__clear(SluiceRedisScript *scripts)
{
  for (guint i = 0; i < SLUICE_REDIS_SCRIPT_N; i++)
    sluice_redis_script__clear(&scripts[i]);
}

/* ---- The set -------------------------------------------------------------- */

static gint
compare_paths(gconstpointer a, gconstpointer b)
{
  return strcmp(*(const gchar *const *)a, *(const gchar *const *)b);
}

/* The value of the line "@key VALUE" of lua/VERSION, or NULL. */
static gchar *
version_field(const gchar *key)
{
  g_auto(GStrv) lines = g_strsplit(sluice_redis_lua__VERSION, "\n", -1);

  for (guint i = 0; lines[i] != NULL; i++)
    if (g_str_has_prefix(lines[i], key) && lines[i][strlen(key)] == ' ')
      return g_strstrip(g_strdup(lines[i] + strlen(key) + 1));
  return NULL;
}

const SluiceRedisScriptSet *
sluice_redis_scripts__set(void)
{
  static SluiceRedisScriptSet set;
  static gsize done;

  if (g_once_init_enter(&done)) {
    g_autoptr(GPtrArray) paths = g_ptr_array_new();
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA1);
    g_autoptr(GHashTable) texts = g_hash_table_new(g_str_hash, g_str_equal);
    g_autofree gchar *version = version_field("version");
    g_autofree gchar *listed = version_field("sha1");
    guint64 n = 0;

    for (guint i = 0; sluice_redis_lua_files[i] != NULL; i += 2)
      if (g_str_has_suffix(sluice_redis_lua_files[i], ".lua")) {
        g_ptr_array_add(paths, (gpointer)sluice_redis_lua_files[i]);
        g_hash_table_insert(texts, (gpointer)sluice_redis_lua_files[i],
                            (gpointer)sluice_redis_lua_files[i + 1]);
      }
    /* Byte order of the paths: every client walks its own copies. */
    g_ptr_array_sort(paths, compare_paths);
    for (guint i = 0; i < paths->len; i++) {
      const gchar *path = paths->pdata[i];
      const gchar *text = g_hash_table_lookup(texts, path);
      g_autofree gchar *len = g_strdup_printf("%zu", strlen(text));

      g_checksum_update(sum, (const guchar *)path, (gssize)strlen(path) + 1);
      g_checksum_update(sum, (const guchar *)len, (gssize)strlen(len) + 1);
      g_checksum_update(sum, (const guchar *)text, (gssize)strlen(text));
    }
    if (version == NULL ||
        !g_ascii_string_to_unsigned(version, 10, 1, G_MAXUINT32, &n, NULL))
      g_error("brokers/redis/lua/VERSION has no line \"version N\"");
    set.version = (guint)n;
    g_strlcpy(set.sha1, g_checksum_get_string(sum), sizeof set.sha1);
    g_strlcpy(set.listed_sha1, listed != NULL ? listed : "",
              sizeof set.listed_sha1);
    g_snprintf(set.recorded, sizeof set.recorded, "%u:%s", set.version,
               set.sha1);
    g_once_init_leave(&done, 1);
  }
  return &set;
}

/* ---- Running ------------------------------------------------------------- */

gboolean
sluice_redis_script__eval(SluiceRedisPool *pool, SluiceRedisConn *conn,
                          const SluiceRedisScript *script,
                          const SluiceRedisKeys *keys, int argc,
                          const char **argv, size_t *lens,
                          redisReply **out_reply, GError **error)
{
  redisReply *replies[2] = {NULL, NULL};
  redisReply *reply;
  const SluiceRedisScriptInfo info = {script->name, script->text};

  g_return_val_if_fail(argc >= SLUICE_REDIS_SCRIPT_ARGV0, FALSE);
  *out_reply = NULL;
  argv[0] = "EVALSHA";
  lens[0] = 7;
  argv[1] = script->sha;
  lens[1] = 40;
  argv[2] = "1";
  lens[2] = 1;
  argv[3] = keys->prefix;
  lens[3] = keys->prefix_len;

  sluice_redis_conn__append(conn, argc, argv, lens);
  if (!sluice_redis_conn__exchange(pool, conn, 1, replies, 0, error))
    return FALSE;
  reply = replies[0];

  if (sluice_redis_reply__is_error_code(reply, "NOSCRIPT")) {
    const char *load[3] = {"SCRIPT", "LOAD", script->text};
    size_t load_lens[3] = {6, 4, script->text_len};

    freeReplyObject(reply);
    /* Load and call again in one round trip. */
    sluice_redis_conn__append(conn, 3, load, load_lens);
    sluice_redis_conn__append(conn, argc, argv, lens);
    if (!sluice_redis_conn__exchange(pool, conn, 2, replies, 0, error))
      return FALSE;
    if (!sluice_redis_reply__check(pool, replies[0], script->name, error)) {
      sluice_redis_replies__free(replies, 2);
      return FALSE;
    }
    freeReplyObject(replies[0]);
    reply = replies[1];
  }
  if (!sluice_redis_reply__check_script(pool, reply, script->name, &info,
                                        error)) {
    freeReplyObject(reply);
    return FALSE;
  }
  *out_reply = reply;
  return TRUE;
}

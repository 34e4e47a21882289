/* redis-scripts.h - the Lua scripts of the Redis brokers and how they are
 * run (internal).
 *
 * Every atomic step that touches more than one key is one script. A
 * script is assembled from the files of brokers/redis/lua/ (compiled in,
 * redis-lua.h), concatenated in this order:
 *
 *   shebang    the first line of the step's file: "#!lua" for steps that
 *              add work (refused when Redis is out of memory, so producers
 *              feel the pressure), "#!lua flags=allow-oom" for steps that
 *              only drain, "#!lua flags=no-writes,allow-oom" for reads
 *   prelude    prelude.lua, the key names
 *   hooks      hooks.lua, defaults of the optional transport hooks
 *   transport  the queue transport's fragment (redis-transport.h), e.g.
 *              transport-fast.lua
 *   library    library.lua: records, the schedule, submits, dead letters
 *   body       the rest of the step's file
 *
 * The clients in other languages assemble the scripts they call the same
 * way, from copies of the same files, so every client runs the same bytes
 * (and EVALSHA finds a script whichever client loaded it).
 *
 * and run with EVALSHA; on NOSCRIPT (a SCRIPT FLUSH, a restarted server)
 * the text is loaded again and the call retried once, in one round trip.
 * KEYS[1] is always the partition prefix "{ns}:" (see redis-keys.c).
 */
#pragma once

#include "brokers/redis/net/redis-net.h"
#include "brokers/redis/redis-keys.h"

G_BEGIN_DECLS

/**
 * SluiceRedisScriptId: the shared scripts; their ARGV are documented with
 * their bodies in redis-scripts.c.
 */
typedef enum {
  SLUICE_REDIS_SCRIPT_ENQUEUE,
  SLUICE_REDIS_SCRIPT_PROMOTE,
  SLUICE_REDIS_SCRIPT_SETTLE,
  SLUICE_REDIS_SCRIPT_CANCEL,
  SLUICE_REDIS_SCRIPT_RECORD,
  SLUICE_REDIS_SCRIPT_CLAIM_PERIODIC,
  SLUICE_REDIS_SCRIPT_DLQ_REPLAY,
  SLUICE_REDIS_SCRIPT_DLQ_DELETE,
  SLUICE_REDIS_SCRIPT_STATS,
  SLUICE_REDIS_SCRIPT_PURGE,
  SLUICE_REDIS_SCRIPT_HEARTBEAT,
  SLUICE_REDIS_SCRIPT_LEAVE,
  SLUICE_REDIS_SCRIPT_ANNOUNCE,
  SLUICE_REDIS_SCRIPT_REVOKE,
  SLUICE_REDIS_SCRIPT_REVOCATIONS_SINCE,
  SLUICE_REDIS_SCRIPT_LOOKUP,
  SLUICE_REDIS_SCRIPT_LIST_QUEUED,
  SLUICE_REDIS_SCRIPT_LIST_SCHEDULED,
  SLUICE_REDIS_SCRIPT_RESCHEDULE,
  SLUICE_REDIS_SCRIPT_JOIN_OPEN,
  SLUICE_REDIS_SCRIPT_JOIN_ARRIVE,
  SLUICE_REDIS_SCRIPT_JOIN_READ,
  SLUICE_REDIS_SCRIPT_EVENTS_APPEND,
  SLUICE_REDIS_SCRIPT_JOIN_GROW,
  SLUICE_REDIS_SCRIPT_RATE_ACQUIRE,
  SLUICE_REDIS_SCRIPT_SLOT_ACQUIRE,
  SLUICE_REDIS_SCRIPT_SLOT_RELEASE,
  SLUICE_REDIS_SCRIPT_UNIQUE_ENQUEUE,
  SLUICE_REDIS_SCRIPT_UNIQUE_UPDATE,
  SLUICE_REDIS_SCRIPT_LIST_SLOTS,
  SLUICE_REDIS_SCRIPT_REMOVE_QUEUED,
  SLUICE_REDIS_SCRIPT_REPLACE_PAYLOADS,
  SLUICE_REDIS_SCRIPT_N
} SluiceRedisScriptId;

/**
 * SluiceRedisScript:
 * @name: for error messages ("settle")
 * @text: the whole script
 * @sha: its SHA1 in hex, as EVALSHA wants it
 */
typedef struct {
  const gchar *name;
  gchar *text;
  gsize text_len;
  gchar sha[41];
} SluiceRedisScript;

/* argv[0..3] of a script call are EVALSHA, sha, "1", KEYS[1]; callers put
 * the script's ARGV from this index on. */
#define SLUICE_REDIS_SCRIPT_ARGV0 4

/**
 * sluice_redis_script__init:
 * @name: (transfer none): static
 * @transport_lua: (nullable): the transport's fragment
 * @source: (transfer none): the step's file (redis-lua.h): its shebang
 *   line, then its body
 *
 * Assembles shebang + prelude + hooks + @transport_lua + library + body and
 * computes its SHA1 (a body whose first line starts "-- bare:", one that
 * calls no function of the others, is shebang + prelude + body). Clear with
 * sluice_redis_script__clear().
 */
void sluice_redis_script__init(SluiceRedisScript *script, const gchar *name,
                               const gchar *transport_lua, const gchar *source);

void sluice_redis_script__clear(SluiceRedisScript *script);

/**
 * sluice_redis_scripts__init:
 * @scripts: (array fixed-size=SLUICE_REDIS_SCRIPT_N): filled
 * @transport_lua: the transport's fragment, spliced into every script
 */
void sluice_redis_scripts__init(SluiceRedisScript *scripts,
                                const gchar *transport_lua);

void sluice_redis_scripts__clear(SluiceRedisScript *scripts);

/**
 * sluice_redis_script__eval:
 * @argv: (array length=argc): slots 0..3 are filled here; the script's
 *   ARGV from SLUICE_REDIS_SCRIPT_ARGV0 on
 * @lens: (array length=argc): likewise
 * @out_reply: (out) (transfer full): the reply, never an error reply
 *
 * Runs @script on @conn in one round trip (two after a NOSCRIPT).
 * Returns: TRUE, or FALSE with an error from sluice_redis_reply__check() or
 * sluice_redis_conn__exchange().
 */
gboolean sluice_redis_script__eval(SluiceRedisPool *pool, SluiceRedisConn *conn,
                                   const SluiceRedisScript *script,
                                   const SluiceRedisKeys *keys, int argc,
                                   const char **argv, size_t *lens,
                                   redisReply **out_reply, GError **error);

/**
 * SluiceRedisScriptSet:
 * @version: the set's version, as lua/VERSION says
 * @sha1: the SHA-1 of the .lua files this library holds, computed as
 *   PROTOCOL.md defines it ("Versions of a namespace")
 * @listed_sha1: the SHA-1 lua/VERSION says they have: @sha1 unless a file
 *   changed without a new version (test-redis-fast fails then)
 * @recorded: "@version:@sha1", as {ns}:meta's field scripts holds it
 *
 * The script set of this library: every client of a namespace compares it
 * with the one the namespace records (redis-broker.c).
 */
typedef struct {
  guint version;
  gchar sha1[41];
  gchar listed_sha1[41];
  gchar recorded[64];
} SluiceRedisScriptSet;

/** sluice_redis_scripts__set: Returns: (transfer none): computed once. */
const SluiceRedisScriptSet *sluice_redis_scripts__set(void);

G_END_DECLS

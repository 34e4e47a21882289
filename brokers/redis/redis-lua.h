/* redis-lua.h - the Lua files of brokers/redis/lua/, compiled in
 * (internal).
 *
 * The scripts live as files so that the C broker and the clients in other
 * languages (clients/python, clients/node, which ship copies) run
 * byte-identical scripts; embed.sh turns each file into one array at build
 * time, and nothing reads a file at run time. How a script is assembled
 * from them is in redis-scripts.h; PROTOCOL.md documents the scripts a
 * producer calls.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The pieces every script is made of. */
extern const gchar sluice_redis_lua__prelude[];
extern const gchar sluice_redis_lua__hooks[];
extern const gchar sluice_redis_lua__library[];
extern const gchar sluice_redis_lua__transport_fast[];
extern const gchar sluice_redis_lua__transport_reliable[];

/* The shared scripts' bodies, each starting with its shebang line. */
extern const gchar sluice_redis_lua__enqueue[];
extern const gchar sluice_redis_lua__promote_due[];
extern const gchar sluice_redis_lua__settle[];
extern const gchar sluice_redis_lua__cancel_scheduled[];
extern const gchar sluice_redis_lua__put_record[];
extern const gchar sluice_redis_lua__claim_periodic[];
extern const gchar sluice_redis_lua__dlq_replay[];
extern const gchar sluice_redis_lua__dlq_delete[];
extern const gchar sluice_redis_lua__stats[];
extern const gchar sluice_redis_lua__purge[];
extern const gchar sluice_redis_lua__heartbeat[];
extern const gchar sluice_redis_lua__leave[];
extern const gchar sluice_redis_lua__announce[];
extern const gchar sluice_redis_lua__revoke[];
extern const gchar sluice_redis_lua__list_revocations_since[];
extern const gchar sluice_redis_lua__lookup_task[];
extern const gchar sluice_redis_lua__list_queued[];
extern const gchar sluice_redis_lua__remove_queued[];
extern const gchar sluice_redis_lua__list_scheduled[];
extern const gchar sluice_redis_lua__reschedule[];
extern const gchar sluice_redis_lua__join_open[];
extern const gchar sluice_redis_lua__join_arrive[];
extern const gchar sluice_redis_lua__join_read[];
extern const gchar sluice_redis_lua__events_append[];
extern const gchar sluice_redis_lua__join_grow[];
extern const gchar sluice_redis_lua__rate_acquire[];
extern const gchar sluice_redis_lua__slot_acquire[];
extern const gchar sluice_redis_lua__slot_release[];
extern const gchar sluice_redis_lua__unique_enqueue[];
extern const gchar sluice_redis_lua__unique_update[];
extern const gchar sluice_redis_lua__list_slots[];
extern const gchar sluice_redis_lua__replace_payloads[];

/* lua/VERSION: the version of the set of files and their SHA-1. */
extern const gchar sluice_redis_lua__VERSION[];

/* Every file above: its path under lua/ and its array, in pairs, then
 * NULL (the set's SHA-1 is of them all). */
extern const gchar *const sluice_redis_lua_files[];

/* The scripts only the reliable transport runs. */
extern const gchar sluice_redis_lua__reliable_ensure_groups[];
extern const gchar sluice_redis_lua__reliable_fetch[];
extern const gchar sluice_redis_lua__fast_fetch[];
extern const gchar sluice_redis_lua__fast_give_back[];
extern const gchar sluice_redis_lua__reliable_reclaim[];
extern const gchar sluice_redis_lua__reliable_requeue[];
extern const gchar sluice_redis_lua__reliable_count_reclaimable[];

G_END_DECLS

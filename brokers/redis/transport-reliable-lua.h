/* transport-reliable-lua.h - the Lua of the redis-reliable transport
 * (internal; see transport-reliable-lua.c).
 */
#pragma once

#include "brokers/redis/redis-scripts.h"

G_BEGIN_DECLS

/* The consumer group of every stream (GROUP in transport-reliable.lua). */
#define SLUICE_REDIS_RELIABLE_GROUP "sluice"

/**
 * SluiceRedisReliableScripts:
 * @ensure: ARGV: the queues; creates each missing group
 * @fetch: ARGV: consumer, max, queues; the non-blocking priority read
 * @reclaim: ARGV: consumer, max, idle_ms, queues; takes over entries of
 *   dead consumers and idle ones
 * @requeue: ARGV: consumer, then queue id payload count quadruples; hands
 *   back what a read took beyond what was asked for
 * @count_reclaimable: ARGV: consumer, max, idle_ms, queues; what @reclaim
 *   would take, without taking it
 *
 * The scripts only this transport runs; each one's ARGV and reply are
 * documented in its file, brokers/redis/lua/reliable/<name>.lua.
 */
typedef struct {
  SluiceRedisScript ensure;
  SluiceRedisScript fetch;
  SluiceRedisScript reclaim;
  SluiceRedisScript requeue;
  SluiceRedisScript count_reclaimable;
} SluiceRedisReliableScripts;

/** Assembles every script of @scripts (the fragment and the shared
 * library spliced in); clear with _clear(). */
void sluice_redis__reliable_scripts_init(SluiceRedisReliableScripts *scripts);
void sluice_redis__reliable_scripts_clear(SluiceRedisReliableScripts *scripts);

G_END_DECLS

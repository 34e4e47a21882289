/* redis-transport.h - how a Redis queue carries messages: the one part that
 * differs between the modes, redis-fast (lists, transport-fast.c) and
 * redis-reliable (streams, transport-reliable.c).
 *
 * Everything else (connections, keys, scripts, records, the schedule,
 * revocations, periodic claims, dead letters, stats) is the shared layer
 * of brokers/redis/ (redis-broker.c gives the tour). A transport is a
 * static SluiceRedisTransport in a file of its own, transport-<name>.c, in
 * two halves:
 *
 * LUA. A fragment spliced into every shared script after the key prelude
 * (so it may use K_QUEUE, K_STREAM, K_ALIVE, ... and redis.call), defining
 * these local functions, which are all the shared scripts use to touch a
 * queue:
 *
 *   t_push(queue, payload)       append a ready message (promotion,
 *                                periodic claims, replays)
 *   t_push_many(queue, payloads) append a Lua array of ready messages, in
 *                                order (an enqueue batch; one command per
 *                                chunk where the structure allows)
 *   t_check(queue, handle, consumer) -> boolean
 *                                may this settlement proceed? (fencing:
 *                                FALSE = another consumer owns the entry;
 *                                the settle reports STALE). Must not write.
 *   t_ack(queue, handle, consumer)
 *                                acknowledge the delivery for good
 *   t_release(queue, handle, consumer, payload, count)
 *                                give it back for the next fetch, so
 *                                that the next delivery reports the same
 *                                delivery count (count, as a string)
 *   t_depth(queue) -> integer    ready messages (stats)
 *   t_in_flight(queues) -> integer
 *                                delivered and unsettled, or -1 if unknown
 *   t_purge(queue) -> integer    delete the ready messages, say how many
 *   t_peek(queue, after, limit) -> {cursor, payload, handle, ...}
 *                                up to limit ready messages after cursor
 *                                `after` ('' = from the next to be
 *                                fetched), in fetch order, without taking
 *                                them, each with its handle for t_remove
 *                                ('' where the bytes name it); cursor ''
 *                                at the end, {false} for a cursor that is
 *                                not one of its own. Must not write, and
 *                                costs O(limit): one range read, never a
 *                                scan
 *   t_remove(queue, handle, payload) -> boolean
 *                                take the ready message t_peek listed
 *                                with handle (or bytes payload) out of
 *                                the queue, if it is still ready (not
 *                                delivered since); TRUE if it did. O(1)
 *                                for messages removed in listing order
 *   t_replace(queue, handle, payload, replacement) -> boolean
 *                                if the ready message t_peek listed with
 *                                handle (or bytes payload) is still ready
 *                                and holds exactly payload, make it hold
 *                                replacement instead, everything else of
 *                                it kept; TRUE if it did. In place where
 *                                the structure allows (its place in fetch
 *                                order kept); otherwise it may go to the
 *                                end of its queue (a stream entry is
 *                                added again and the old one deleted)
 *   t_heartbeat(consumer, lease_ms, argv, first)
 *                                renew leases; argv[first..] are queue,
 *                                handle pairs of the deliveries held.
 *                                Returns nothing, or redis.error_reply()
 *                                to make the heartbeat slot fail after
 *                                its writes (the consumer's lease had
 *                                lapsed before this renewal, so the
 *                                worker logs "lease lost")
 *   t_leave(consumer)            the consumer stops for good
 *   t_gone(queue, handle) -> boolean
 *                                optional (the default says no): when
 *                                t_check refused a settlement, TRUE if no
 *                                consumer holds the entry at all (the
 *                                settle reports GONE instead of STALE)
 *   t_flush()                    optional (the default does nothing):
 *                                called once at the end of every settle
 *                                script, after every item's writes, so a
 *                                transport may defer what t_ack does and
 *                                do it with one command per queue; a
 *                                deferred ack then lands after the item's
 *                                record, retry or dead letter, never
 *                                before (a script failing half-way leaves
 *                                a duplicate, never a loss)
 *
 * `handle` is SluiceDelivery.handle ('' when NULL) and `queue` its queue.
 * The fragment must follow the script rules of redis-scripts.c (checks
 * before writes; per-task keys with PX) and name keys only through the
 * prelude. It runs inside scripts of both kinds: refused when Redis is out
 * of memory (enqueue, promotion) and allowed then (settle, heartbeat,
 * purge), so what t_ack and t_release write must stay small.
 *
 * What the shared layer does for the transport: settle sends an ACK
 * without a record not at all when ack_is_noop is set, and in a compact
 * form without queue and handle when it has a record; heartbeat passes the
 * held deliveries to t_heartbeat only when caps has
 * SLUICE_BROKER_CAP_LEASES; the `reclaim` slot exists only when the
 * transport has a reclaim callback.
 *
 * C. Callbacks for what is not a shared script: fetching (blocking reads
 * differ completely between BLMPOP and XREADGROUP), reclaiming, and the
 * transport's own state. They get the SluiceRedisBroker and use the shared
 * helpers of redis-broker.h (sluice_redis_broker__eval(), __command() and
 * __exchange() on pooled connections, with the one retry rule and
 * wakeup-aware blocking; keys, argument vectors, reply readers). A
 * transport calls the shared layer, never another transport, and the
 * shared layer never calls it by name: only redis.c does.
 *
 * To add a transport: write brokers/redis/transport-<name>.c defining a
 * SluiceRedisTransport and a getter (its Lua may go to a file of its own,
 * as transport-reliable-lua.c), declare the getter below, add a row to
 * transports[] in redis.c (its mode, the name the namespace records, the
 * getter) and add the file to brokers/Makefile.inc.
 */
#pragma once

#include <sluice/sys/broker.h>

#include "brokers/redis/net/redis-net.h"

G_BEGIN_DECLS

typedef struct _SluiceRedisBroker SluiceRedisBroker;

typedef struct {
  /** name: the broker class name ("redis-fast"). */
  const gchar *name;
  /** caps: SluiceBrokerCaps of the class. SHARED | DURABLE at least. */
  guint64 caps;
  /** lua: the fragment described above. */
  const gchar *lua;
  /** ack_is_noop: TRUE when t_ack does nothing, so that an ACK settlement
   * without a record is skipped entirely (fast mode: no round trip). */
  gboolean ack_is_noop;

  /** init: Optional. Sets up self->transport_data. */
  gboolean (*init)(SluiceRedisBroker *self, GError **error);
  /** finalize: Optional. Frees self->transport_data (may be NULL). */
  void (*finalize)(SluiceRedisBroker *self);

  /** fetch: Required. The `fetch` slot of sluice/sys/broker.h, for this
   * transport. */
  gboolean (*fetch)(SluiceRedisBroker *self, const gchar *consumer,
                    const gchar *const *queues, guint max, gint64 block_ms,
                    GPtrArray *out, GError **error);
  /** reclaim: Required with SLUICE_BROKER_CAP_LEASES, else NULL. The
   * `reclaim` slot of sluice/sys/broker.h. */
  gboolean (*reclaim)(SluiceRedisBroker *self, const gchar *consumer,
                      const gchar *const *queues, guint max, gint64 idle_ms,
                      GPtrArray *out, GError **error);
  /** count_reclaimable: Optional (with reclaim). The `count_reclaimable`
   * slot of sluice/sys/broker.h. */
  gboolean (*count_reclaimable)(SluiceRedisBroker *self, const gchar *consumer,
                                const gchar *const *queues, guint max,
                                gint64 idle_ms, guint *out_n, GError **error);

  /** push_native: Optional. Appends to @conn the plain Redis commands that
   * push @n payloads, in this order, onto @queue's ready messages (what
   * t_push_many does), and returns how many commands it appended. Each
   * command must be atomic on its own. The enqueue of a batch whose items
   * need nothing but that push (no idempotency claim, record or due time)
   * then skips Lua: a script argument costs Redis an interned Lua string
   * and a redis.call, several times a plain command's parsing. NULL: such
   * batches go through the enqueue script. */
  guint (*push_native)(SluiceRedisBroker *self, SluiceRedisConn *conn,
                       const gchar *queue, GBytes *const *payloads, guint n);
} SluiceRedisTransport;

/** The list transport (brokers/redis/transport-fast.c). */
const SluiceRedisTransport *sluice_redis__fast_transport(void);

/** The stream transport (brokers/redis/transport-reliable.c). */
const SluiceRedisTransport *sluice_redis__reliable_transport(void);

G_END_DECLS

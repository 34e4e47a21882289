/* conn-private.h - one connection to a Redis server, inside
 * brokers/redis/net/ (conn.c; its users above the layer see only the
 * accessors of redis-net.h).
 */
#pragma once

#include <hiredis/sds.h>

#include "brokers/redis/net/conn-type-private.h"
#include "brokers/redis/net/redis-net.h"

G_BEGIN_DECLS

/* What a connection keeps of a reply's bytes while it waits for the rest,
 * by default: larger than any bulk string Redis sends (proto-max-bulk-len
 * is 512 MB by default), so only a damaged or hostile stream meets it. */
#define SLUICE_REDIS_MAX_REPLY_BYTES ((gsize)512 * 1024 * 1024)

struct _SluiceRedisNode;

/**
 * SluiceRedisConn:
 * @socket: the connection type's socket; the conn owns it
 * @reader: hiredis's RESP parser, fed from @socket
 * @obuf: commands appended and not sent yet (hiredis's formatting)
 * @reply_bytes: bytes fed to @reader since its last complete reply
 * @max_reply_bytes: a reply that grows past this fails the read
 *   (SLUICE_REDIS_MAX_REPLY_BYTES unless the pool's options say less), and
 *   so does an array that declares more elements than could fit in it
 * @refused_elements: > 0: the element count of the array header that was
 *   refused for that (set by @reader's constructor, for the message)
 * @send_timeout_ms: the longest a flush waits for a server that does not
 *   read (the command timeout)
 * @setup_timeout_ms: the round-trip time of the handshake and of the
 *   owner's setup hook (the connect timeout)
 * @client_id: the server's CLIENT ID (for CLIENT UNBLOCK); 0 on a bare
 *   connection
 * @broken: set when the connection can no longer be trusted (I/O error,
 *   timeout, protocol error, left subscribed); released, it is freed
 * @failover: set (with @broken) by the Sentinel router when a reply said
 *   that the server is no longer a writable master (-READONLY, -LOADING,
 *   -MASTERDOWN): nothing of that exchange was written
 * @generation: the node's generation it was made in (node.c): a
 *   connection of an older one is not reused
 * @node: (nullable): the node it belongs to; NULL for a bare connection
 * @server: (nullable): the node's URL as it may be shown (borrowed)
 * @grant_ns: (nullable): the namespace permission messages name (borrowed)
 * @slot: with the Cluster router, the slot it was checked out for
 * @cmd_ends: (nullable): with the Cluster router, where each command
 *   appended since the last exchange ends in @obuf, so that the router can
 *   send one of them again elsewhere
 * @heard: the server sent at least one byte
 * @hung_up: a read met the server's close (an EOF or a reset)
 */
struct _SluiceRedisConn {
  SluiceRedisSocket *socket;
  redisReader *reader;
  sds obuf;
  gsize reply_bytes;
  gsize max_reply_bytes;
  gint64 refused_elements;
  gint64 send_timeout_ms;
  gint64 setup_timeout_ms;
  gint64 client_id;
  gboolean broken;
  gboolean failover;
  guint generation;
  struct _SluiceRedisNode *node;
  const gchar *server;
  const gchar *grant_ns;
  guint slot;
  GArray *cmd_ends;
  gboolean heard;
  gboolean hung_up;
};

typedef enum {
  SLUICE_REDIS_READ_OK,
  SLUICE_REDIS_READ_TIMEOUT,
  SLUICE_REDIS_READ_FAILED,
} SluiceRedisRead;

/** sluice_redis_conn_type__find: Returns: (nullable): the connection type
 * named @name ("tcp", "unix"), from the conn_types[] table of conn.c. */
const SluiceRedisConnType *sluice_redis_conn_type__find(const gchar *name);

/**
 * sluice_redis_conn__open:
 * @reason: (out) (transfer full): why not, on failure
 *
 * A bare connection: the socket of @type to @endpoint within @timeout_ms,
 * with no handshake (no AUTH, no CLIENT ID), for a one-off exchange with
 * sluice_redis_conn__transact() (the sentinels) or for node.c to shake
 * hands on. Returns: (transfer full) (nullable): free with
 * sluice_redis_conn__free().
 */
SluiceRedisConn *sluice_redis_conn__open(const SluiceRedisConnType *type,
                                         const SluiceRedisEndpoint *endpoint,
                                         gint64 timeout_ms, gchar **reason);

/** sluice_redis_conn__free: closes @conn. NULL-safe. */
void sluice_redis_conn__free(SluiceRedisConn *conn);

/**
 * sluice_redis_conn__flush:
 * Sends @conn->obuf whole, waiting at most @conn->send_timeout_ms for a
 * server that does not read. Returns: FALSE with *@reason on failure (the
 * connection is then unusable).
 */
gboolean sluice_redis_conn__flush(SluiceRedisConn *conn, gchar **reason);

/**
 * sluice_redis_conn__read:
 * @deadline_us: monotonic; < 0 waits for ever
 *
 * Reads one reply (transfer full). A timeout leaves @conn as it was: what
 * arrived of a reply stays in its reader, so a caller that only waited (a
 * pub/sub read) may read again; FAILED (*@reason set) leaves it unusable.
 */
SluiceRedisRead sluice_redis_conn__read(SluiceRedisConn *conn,
                                        gint64 deadline_us, redisReply **out,
                                        gchar **reason);

/**
 * sluice_redis_conn__transact:
 * @reason: (out) (transfer full): why not, on failure
 *
 * Sends what was appended and reads @n replies within @timeout_ms.
 * Returns: TRUE, or FALSE with every reply NULL and @conn broken.
 */
gboolean sluice_redis_conn__transact(SluiceRedisConn *conn, guint n,
                                     redisReply **replies, gint64 timeout_ms,
                                     gchar **reason);

/**
 * sluice_redis_conn__alive:
 * Whether an idle @conn may be reused: a zero-timeout poll() finds nothing
 * to read (an idle RESP2 connection receives nothing, so anything readable
 * is an EOF or junk), or what was readable carried no data for Redis (a
 * type's own records, such as a TLS session ticket).
 */
gboolean sluice_redis_conn__alive(SluiceRedisConn *conn);

/**
 * sluice_redis_conn__diagnose:
 * @conn: a connection whose first exchange (the handshake) failed
 * @endpoint: where @conn was made to
 * @reason: (inout) (transfer full): why it failed
 *
 * A plain connection that the server closed before it sent a byte may
 * have met a TLS port: the port is asked (a TLS hello, within
 * MIN(@timeout_ms, 1 s)), and if it answers in TLS *@reason becomes "this
 * port speaks TLS: use rediss://". Nothing for any other failure.
 */
void sluice_redis_conn__diagnose(const SluiceRedisConn *conn,
                                 const SluiceRedisEndpoint *endpoint,
                                 gint64 timeout_ms, gchar **reason);

/**
 * sluice_redis_conn__swap_link:
 * Swaps what ties @a and @b to their servers (socket, reader, buffers,
 * client id, node, generation, broken), keeping each one's @slot and
 * @cmd_ends: the Cluster router moves a checked-out connection to another
 * node this way.
 */
void sluice_redis_conn__swap_link(SluiceRedisConn *a, SluiceRedisConn *b);

G_END_DECLS

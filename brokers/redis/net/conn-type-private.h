/* conn-type-private.h - connection types: how bytes reach a Redis server
 * (internal to brokers/redis/net/).
 *
 * A connection (conn.c) is a socket of a *connection type* plus what every
 * type shares: hiredis's redisReader for parsing replies, an output buffer
 * filled with hiredis's command formatting, and the poll() deadlines. A
 * type is a small const table, as Redis's ConnectionType (src/connection.h)
 * and hiredis's redisContextFuncs are: it connects within a deadline,
 * moves bytes and closes, and knows nothing of RESP, pools or servers.
 *
 *   type           file          endpoint
 *   "tcp"          conn-tcp.c    host + port (getaddrinfo: IPv4 and IPv6)
 *   "unix"         conn-unix.c   path of a socket file
 *   "tls"          conn-tls.c    host + port + the TLS settings (rediss://)
 *
 * Every socket is non-blocking. read() and write() never wait: they move
 * what they can and say what they are waiting for, so a type that has its
 * own framing over the socket (TLS, whose read may need to write during a
 * renegotiation and whose write may need to read) fits without a change
 * to the callers, which poll() the file descriptor for what the type asked
 * and call again, against their own deadline.
 *
 * To add a type: write net/conn-<name>.c with a `const
 * SluiceRedisConnType sluice_redis_conn_type__<name>` (the plain-socket
 * slots of conn-fd.c can be reused), declare it below, and add it to the
 * conn_types[] table of conn.c; the URL parser (url.c) names the type a
 * URL's connections use (SluiceRedisUrl.conn_type). Nothing else changes:
 * the pool, Sentinel and Cluster reach every server through this table.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/**
 * SluiceRedisIo:
 * @SLUICE_REDIS_IO_DONE: bytes were moved (*out_n > 0)
 * @SLUICE_REDIS_IO_WANT_READ: nothing can move until the socket is
 *   readable: poll() for POLLIN, then call again (for a plain socket: a
 *   read found nothing yet)
 * @SLUICE_REDIS_IO_WANT_WRITE: nothing can move until the socket is
 *   writable: poll() for POLLOUT, then call again (a full send buffer)
 * @SLUICE_REDIS_IO_EOF: (read) the server closed the connection
 * @SLUICE_REDIS_IO_ERROR: the socket failed; *reason says why
 *
 * What a read or a write of a connection type did. An interrupted system
 * call is retried inside the type, never reported.
 */
typedef enum {
  SLUICE_REDIS_IO_DONE,
  SLUICE_REDIS_IO_WANT_READ,
  SLUICE_REDIS_IO_WANT_WRITE,
  SLUICE_REDIS_IO_EOF,
  SLUICE_REDIS_IO_ERROR,
} SluiceRedisIo;

typedef struct _SluiceRedisConnType SluiceRedisConnType;

/**
 * SluiceRedisSocket:
 * @type: the type that made it; first
 * @fd: the file descriptor the callers poll(); non-blocking, close-on-exec
 *
 * The base of every type's socket. A type that keeps more (TLS: its
 * session) allocates a larger struct with this one first, as SQLite's
 * backends embed sqlite3_file, and frees it in its close().
 */
typedef struct {
  const SluiceRedisConnType *type;
  int fd;
} SluiceRedisSocket;

/**
 * SluiceRedisEndpoint:
 * @host: (nullable): TCP-based types: a host name or an address
 * @port: TCP-based types: the port
 * @path: (nullable): unix: the socket's path
 * @settings: (nullable): what a type needs beyond the address, owned by
 *   the URL: for "tls" its SluiceRedisTls (tls-private.h: CA, client
 *   certificate, server name, and the shared SSL_CTX); NULL for "tcp" and
 *   "unix"
 *
 * Where a connection goes.
 */
typedef struct {
  const gchar *host;
  gint port;
  const gchar *path;
  gconstpointer settings;
} SluiceRedisEndpoint;

/**
 * SluiceRedisConnType:
 * @name: "tcp", "unix": what SluiceRedisUrl.conn_type names
 * @connect: opens a socket to @endpoint and makes it ready for Redis (for
 *   TLS: the handshake, certificate checks included) by @deadline_us
 *   (monotonic); gives up then. Returns: (transfer full) (nullable): the
 *   socket, or NULL with *@reason (transfer full) saying why in a few
 *   words ("Connection refused", "no answer within 250 ms"); never a
 *   secret in it. A reason that starts with "TLS" is a refusal of the TLS
 *   layer (a certificate, an alert) that says what to do itself.
 * @read: reads up to @len bytes into @buf, without waiting. DONE with
 *   *@out_n > 0, WANT_READ / WANT_WRITE, EOF, or ERROR with *@reason.
 * @write: writes up to @len bytes of @buf, without waiting, and never
 *   raises SIGPIPE (MSG_NOSIGNAL: a library must not kill its host when the
 *   server goes away). DONE with *@out_n > 0, WANT_WRITE / WANT_READ, or
 *   ERROR with *@reason.
 * @pending: bytes the type holds already, read from the socket but not yet
 *   returned by @read (TLS records decrypted ahead), which poll() on the
 *   descriptor cannot see: a caller reads them before it polls. 0 for a
 *   plain socket.
 * @close: closes and frees @socket. Never fails.
 *
 * A connection type. Every slot is required; a caller only calls them
 * through the wrappers of conn.c, so every type is used the same way.
 */
struct _SluiceRedisConnType {
  const gchar *name;
  SluiceRedisSocket *(*connect)(const SluiceRedisEndpoint *endpoint,
                                gint64 deadline_us, gchar **reason);
  SluiceRedisIo (*read)(SluiceRedisSocket *socket, void *buf, gsize len,
                        gsize *out_n, gchar **reason);
  SluiceRedisIo (*write)(SluiceRedisSocket *socket, const void *buf, gsize len,
                         gsize *out_n, gchar **reason);
  gsize (*pending)(SluiceRedisSocket *socket);
  void (*close)(SluiceRedisSocket *socket);
};

/* The types (conn-tcp.c, conn-unix.c, conn-tls.c). */
extern const SluiceRedisConnType sluice_redis_conn_type__tcp;
extern const SluiceRedisConnType sluice_redis_conn_type__unix;
extern const SluiceRedisConnType sluice_redis_conn_type__tls;

G_END_DECLS

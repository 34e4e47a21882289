/* conn-fd-private.h - what the connection types over a plain socket share
 * (conn-fd.c; internal to brokers/redis/net/).
 *
 * The "tcp" and "unix" types differ only in how they connect; once
 * connected, both move bytes with recv() and send(MSG_NOSIGNAL) on a
 * non-blocking descriptor, and their read, write, pending and close slots
 * are these. A type with framing of its own (TLS) reuses
 * sluice_redis_tcp__connect_fd() and sluice_redis_fd__wait() for its
 * transport and brings its own slots.
 */
#pragma once

#include <sys/socket.h>

#include "brokers/redis/net/conn-type-private.h"

G_BEGIN_DECLS

/**
 * sluice_redis_fd__wait:
 * @events: POLLIN, POLLOUT or both
 * @deadline_us: monotonic; < 0 waits for ever
 *
 * poll()s @fd until one of @events (or an error or hang-up, which the
 * next read or write reports) or @deadline_us; EINTR is retried.
 * Returns: 1 when @fd is ready, 0 at the deadline, -1 when poll() itself
 * failed (errno is set).
 */
int sluice_redis_fd__wait(int fd, short events, gint64 deadline_us);

/**
 * sluice_redis_fd__connect:
 * @fd: a non-blocking socket
 *
 * connect()s @fd to @addr and waits for the outcome until @deadline_us.
 * Returns: TRUE, or FALSE with *@reason (transfer full):
 * "Connection refused", "Connection timed out (no answer within N ms)"...
 */
gboolean sluice_redis_fd__connect(int fd, const struct sockaddr *addr,
                                  socklen_t addr_len, gint64 deadline_us,
                                  gchar **reason);

/**
 * sluice_redis_tcp__connect_fd:
 * The "tcp" type's connect (conn-tcp.c), for the types over TCP: resolves
 * @endpoint's host, connects to its addresses in turn (IPv4 first) until
 * @deadline_us, and tunes the socket (TCP_NODELAY, keepalive).
 * Returns: a connected non-blocking descriptor, or -1 with *@reason
 * (transfer full).
 */
int sluice_redis_tcp__connect_fd(const SluiceRedisEndpoint *endpoint,
                                 gint64 deadline_us, gchar **reason);

/** sluice_redis_fd__socket_new: Returns: (transfer full): a socket of
 * @type on @fd (which it then owns). */
SluiceRedisSocket *sluice_redis_fd__socket_new(const SluiceRedisConnType *type,
                                               int fd);

/* The slots of a plain socket (see SluiceRedisConnType). */
SluiceRedisIo sluice_redis_fd__read(SluiceRedisSocket *socket, void *buf,
                                    gsize len, gsize *out_n, gchar **reason);
SluiceRedisIo sluice_redis_fd__write(SluiceRedisSocket *socket, const void *buf,
                                     gsize len, gsize *out_n, gchar **reason);
gsize sluice_redis_fd__pending(SluiceRedisSocket *socket);
void sluice_redis_fd__close(SluiceRedisSocket *socket);

G_END_DECLS

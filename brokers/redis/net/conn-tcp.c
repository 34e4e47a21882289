/* conn-tcp.c - the "tcp" connection type: Redis over TCP, IPv4 or IPv6
 * (see conn-type-private.h for what a type is).
 *
 * connect() resolves the host with getaddrinfo() and tries its addresses
 * in turn, IPv4 first (as hiredis does: a client that tried IPv6 first
 * would pay for a missing IPv6 route on every connection), each with a
 * non-blocking connect() bounded by the one deadline of the call. Name
 * resolution itself is the system's and is not bounded by the deadline
 * (getaddrinfo() has no timeout; a URL with an address needs none).
 *
 * Connected sockets get TCP_NODELAY (a pipelined request must not wait for
 * Nagle's timer) and TCP keepalive after 15 s of silence, probed every
 * 5 s, 3 times (hiredis's REDIS_KEEPALIVE_INTERVAL), so a half-open
 * connection left idle in the pool is found dead within a minute even
 * when nothing is sent on it. Reads, writes and close are those of every
 * plain socket (conn-fd.c). The "tls" type connects its socket the same
 * way (sluice_redis_tcp__connect_fd()) before its handshake.
 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include "brokers/redis/net/conn-fd-private.h"

#define KEEPALIVE_IDLE_S 15
#define KEEPALIVE_INTERVAL_S 5
#define KEEPALIVE_PROBES 3

static void
tune(int fd)
{
  int on = 1;
  int idle = KEEPALIVE_IDLE_S;
  int interval = KEEPALIVE_INTERVAL_S;
  int probes = KEEPALIVE_PROBES;

  /* Best effort: a socket without them still works. */
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
#ifdef TCP_KEEPIDLE
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
#endif
#ifdef TCP_KEEPINTVL
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
#endif
#ifdef TCP_KEEPCNT
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
#endif
}

/* Tries the addresses of @family in @list. Returns a connected descriptor
 * or -1 with *reason replaced by the latest failure. */
static int
try_family(const struct addrinfo *list, int family, gint64 deadline_us,
           gchar **reason)
{
  for (const struct addrinfo *ai = list; ai != NULL; ai = ai->ai_next) {
    int fd;

    if (ai->ai_family != family)
      continue;
    if (*reason != NULL && g_get_monotonic_time() >= deadline_us)
      break; /* the time went to an earlier address: say why that failed */
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                ai->ai_protocol);
    if (fd < 0) {
      g_free(*reason);
      *reason = g_strdup(g_strerror(errno));
      continue;
    }
    g_clear_pointer(reason, g_free);
    if (sluice_redis_fd__connect(fd, ai->ai_addr, ai->ai_addrlen, deadline_us,
                                 reason))
      return fd;
    close(fd);
  }
  return -1;
}

int
sluice_redis_tcp__connect_fd(const SluiceRedisEndpoint *endpoint,
                             gint64 deadline_us, gchar **reason)
{
  struct addrinfo hints = {0};
  struct addrinfo *list = NULL;
  gchar port[16];
  int fd, rc;

  g_return_val_if_fail(endpoint->host != NULL, -1);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  /* No AI_ADDRCONFIG: it hides the loopback addresses of a host with no
   * other address of their family (a container), and IPv4 is tried first
   * anyway. */
  g_snprintf(port, sizeof port, "%d", endpoint->port);
  rc = getaddrinfo(endpoint->host, port, &hints, &list);
  if (rc != 0) {
    *reason = g_strdup(rc == EAI_SYSTEM ? g_strerror(errno) : gai_strerror(rc));
    return -1;
  }
  *reason = NULL;
  fd = try_family(list, AF_INET, deadline_us, reason);
  if (fd < 0)
    fd = try_family(list, AF_INET6, deadline_us, reason);
  freeaddrinfo(list);
  if (fd < 0) {
    if (*reason == NULL)
      *reason = g_strdup("the host has no IPv4 or IPv6 address");
    return -1;
  }
  tune(fd);
  return fd;
}

static SluiceRedisSocket *
tcp_connect(const SluiceRedisEndpoint *endpoint, gint64 deadline_us,
            gchar **reason)
{
  int fd = sluice_redis_tcp__connect_fd(endpoint, deadline_us, reason);

  if (fd < 0)
    return NULL;
  return sluice_redis_fd__socket_new(&sluice_redis_conn_type__tcp, fd);
}

const SluiceRedisConnType sluice_redis_conn_type__tcp = {
    .name = "tcp",
    .connect = tcp_connect,
    .read = sluice_redis_fd__read,
    .write = sluice_redis_fd__write,
    .pending = sluice_redis_fd__pending,
    .close = sluice_redis_fd__close,
};

/* conn-fd.c - the slots every connection type over a plain socket shares
 * (see conn-fd-private.h): a non-blocking connect() that waits for its
 * outcome with poll() until a deadline, recv() and send(MSG_NOSIGNAL) that
 * never wait, close().
 *
 * Why non-blocking descriptors and poll() rather than socket timeouts
 * (SO_RCVTIMEO, SO_SNDTIMEO): each call has a deadline of its own (a
 * command's timeout plus its block time, a connection's connect timeout),
 * and a type that frames its bytes (TLS) must be able to say "I need to
 * read before I can write" instead of blocking in the middle of a record.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include "brokers/redis/net/conn-fd-private.h"

int
sluice_redis_fd__wait(int fd, short events, gint64 deadline_us)
{
  for (;;) {
    struct pollfd pfd = {fd, events, 0};
    int timeout_ms = -1;
    int rc;

    if (deadline_us >= 0) {
      gint64 now = g_get_monotonic_time();

      if (now >= deadline_us)
        return 0;
      timeout_ms = (int)MIN((deadline_us - now + 999) / 1000, G_MAXINT);
    }
    rc = poll(&pfd, 1, timeout_ms);
    if (rc < 0 && errno == EINTR)
      continue;
    if (rc == 0)
      continue; /* the deadline check above ends the loop */
    return rc < 0 ? -1 : 1;
  }
}

gboolean
sluice_redis_fd__connect(int fd, const struct sockaddr *addr,
                         socklen_t addr_len, gint64 deadline_us, gchar **reason)
{
  gint64 started = g_get_monotonic_time();
  int err = 0;
  socklen_t err_len = sizeof err;
  int rc;

  do
    rc = connect(fd, addr, addr_len);
  while (rc < 0 && errno == EINTR);
  if (rc == 0)
    return TRUE;
  if (errno != EINPROGRESS && errno != EAGAIN) {
    *reason = g_strdup(g_strerror(errno));
    return FALSE;
  }
  rc = sluice_redis_fd__wait(fd, POLLOUT, deadline_us);
  if (rc == 0) {
    *reason = g_strdup_printf("Connection timed out (no answer within "
                              "%" G_GINT64_FORMAT " ms)",
                              (MAX(deadline_us - started, 0) + 999) / 1000);
    return FALSE;
  }
  if (rc < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) < 0) {
    *reason = g_strdup(g_strerror(errno));
    return FALSE;
  }
  if (err != 0) {
    *reason = g_strdup(g_strerror(err));
    return FALSE;
  }
  return TRUE;
}

SluiceRedisSocket *
sluice_redis_fd__socket_new(const SluiceRedisConnType *type, int fd)
{
  SluiceRedisSocket *socket = g_new0(SluiceRedisSocket, 1);

  socket->type = type;
  socket->fd = fd;
  return socket;
}

SluiceRedisIo
sluice_redis_fd__read(SluiceRedisSocket *socket, void *buf, gsize len,
                      gsize *out_n, gchar **reason)
{
  ssize_t n;

  do
    n = recv(socket->fd, buf, len, 0);
  while (n < 0 && errno == EINTR);
  if (n > 0) {
    *out_n = (gsize)n;
    return SLUICE_REDIS_IO_DONE;
  }
  if (n == 0)
    return SLUICE_REDIS_IO_EOF;
  if (errno == EAGAIN || errno == EWOULDBLOCK)
    return SLUICE_REDIS_IO_WANT_READ;
  *reason = g_strdup(g_strerror(errno));
  return SLUICE_REDIS_IO_ERROR;
}

SluiceRedisIo
sluice_redis_fd__write(SluiceRedisSocket *socket, const void *buf, gsize len,
                       gsize *out_n, gchar **reason)
{
  ssize_t n;

  do
    n = send(socket->fd, buf, len, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n > 0) {
    *out_n = (gsize)n;
    return SLUICE_REDIS_IO_DONE;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    return SLUICE_REDIS_IO_WANT_WRITE;
  *reason = g_strdup(n == 0 ? "the socket took no byte" : g_strerror(errno));
  return SLUICE_REDIS_IO_ERROR;
}

gsize
sluice_redis_fd__pending(SluiceRedisSocket *socket)
{
  return 0;
}

void
sluice_redis_fd__close(SluiceRedisSocket *socket)
{
  if (socket == NULL)
    return;
  if (socket->fd >= 0)
    close(socket->fd);
  g_free(socket);
}

/* conn-unix.c - the "unix" connection type: Redis over a unix socket
 * (see conn-type-private.h for what a type is).
 *
 * connect() is a non-blocking connect() to the socket's path, bounded by
 * the call's deadline (a server whose listen backlog is full makes it
 * wait); reads, writes and close are those of every plain socket
 * (conn-fd.c). No TCP options: there is no Nagle and no keepalive on a
 * local socket, and a server that dies closes it at once.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "brokers/redis/net/conn-fd-private.h"

static SluiceRedisSocket *
unix_connect(const SluiceRedisEndpoint *endpoint, gint64 deadline_us,
             gchar **reason)
{
  struct sockaddr_un addr = {0};
  int fd;

  g_return_val_if_fail(endpoint->path != NULL, NULL);
  if (strlen(endpoint->path) >= sizeof addr.sun_path) {
    *reason = g_strdup_printf("the socket path is longer than the %zu bytes "
                              "a unix socket's address holds",
                              sizeof addr.sun_path - 1);
    return NULL;
  }
  addr.sun_family = AF_UNIX;
  strcpy(addr.sun_path, endpoint->path);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *reason = g_strdup(g_strerror(errno));
    return NULL;
  }
  if (!sluice_redis_fd__connect(fd, (const struct sockaddr *)&addr, sizeof addr,
                                deadline_us, reason)) {
    close(fd);
    return NULL;
  }
  return sluice_redis_fd__socket_new(&sluice_redis_conn_type__unix, fd);
}

const SluiceRedisConnType sluice_redis_conn_type__unix = {
    .name = "unix",
    .connect = unix_connect,
    .read = sluice_redis_fd__read,
    .write = sluice_redis_fd__write,
    .pending = sluice_redis_fd__pending,
    .close = sluice_redis_fd__close,
};

/* fault-proxy.c - see fault-proxy.h.
 *
 * Plain sockets and poll(): one accept thread, one relay thread per
 * connection. Stopping closes a pipe that every thread polls, so no thread
 * is left blocked, and joins them all.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gio/gio.h>

#include "tests/helpers/fault-proxy.h"

struct _SluiceTestProxy {
  guint16 upstream_port;
  guint16 port;
  int listen_fd;
  int stop_pipe[2]; /* closing [1] wakes every poll() on [0] */
  gint drop_next;   /* atomic */
  gint dropped;     /* atomic */
  GThread *acceptor;
  GMutex lock;
  GPtrArray *relays; /* GThread* */
};

typedef struct {
  SluiceTestProxy *proxy;
  int client;
  int server;
} Relay;

static int
connect_upstream(guint16 port)
{
  struct sockaddr_in addr = {0};
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
    close(fd);
    fd = -1;
  }
  return fd;
}

static gboolean
write_all(int fd, const char *buf, ssize_t n)
{
  while (n > 0) {
    ssize_t w = send(fd, buf, (size_t)n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return FALSE;
    buf += w;
    n -= w;
  }
  return TRUE;
}

static gpointer
relay_main(gpointer data)
{
  Relay *r = data;
  char buf[16384];

  for (;;) {
    struct pollfd fds[3] = {{r->client, POLLIN, 0},
                            {r->server, POLLIN, 0},
                            {r->proxy->stop_pipe[0], POLLIN, 0}};
    ssize_t n;

    if (poll(fds, 3, -1) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    if (fds[2].revents != 0)
      break;
    if (fds[0].revents != 0) {
      n = recv(r->client, buf, sizeof buf, 0);
      if (n <= 0 || !write_all(r->server, buf, n))
        break;
    }
    if (fds[1].revents != 0) {
      n = recv(r->server, buf, sizeof buf, 0);
      if (n <= 0)
        break;
      if (g_atomic_int_compare_and_exchange(&r->proxy->drop_next, 1, 0)) {
        g_atomic_int_inc(&r->proxy->dropped);
        break; /* the reply is lost, and the connection with it */
      }
      if (!write_all(r->client, buf, n))
        break;
    }
  }
  close(r->client);
  close(r->server);
  g_free(r);
  return NULL;
}

static gpointer
accept_main(gpointer data)
{
  SluiceTestProxy *proxy = data;

  for (;;) {
    struct pollfd fds[2] = {{proxy->listen_fd, POLLIN, 0},
                            {proxy->stop_pipe[0], POLLIN, 0}};
    Relay *r;
    int client, server;

    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    if (fds[1].revents != 0)
      break;
    client = accept(proxy->listen_fd, NULL, NULL);
    if (client < 0)
      continue;
    server = connect_upstream(proxy->upstream_port);
    if (server < 0) {
      close(client);
      continue;
    }
    r = g_new0(Relay, 1);
    r->proxy = proxy;
    r->client = client;
    r->server = server;
    g_mutex_lock(&proxy->lock);
    g_ptr_array_add(proxy->relays, g_thread_new("proxy-relay", relay_main, r));
    g_mutex_unlock(&proxy->lock);
  }
  return NULL;
}

SluiceTestProxy *
sluice_test_proxy_start(guint16 upstream_port, GError **error)
{
  SluiceTestProxy *proxy = g_new0(SluiceTestProxy, 1);
  struct sockaddr_in addr = {0};
  socklen_t len = sizeof addr;

  proxy->upstream_port = upstream_port;
  proxy->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (proxy->listen_fd < 0 ||
      bind(proxy->listen_fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
      listen(proxy->listen_fd, 64) != 0 ||
      getsockname(proxy->listen_fd, (struct sockaddr *)&addr, &len) != 0 ||
      pipe(proxy->stop_pipe) != 0) {
    g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno),
                "cannot start the proxy: %s", g_strerror(errno));
    if (proxy->listen_fd >= 0)
      close(proxy->listen_fd);
    g_free(proxy);
    return NULL;
  }
  proxy->port = ntohs(addr.sin_port);
  g_mutex_init(&proxy->lock);
  proxy->relays = g_ptr_array_new();
  proxy->acceptor = g_thread_new("proxy-accept", accept_main, proxy);
  return proxy;
}

guint16
sluice_test_proxy_port(SluiceTestProxy *proxy)
{
  return proxy->port;
}

void
sluice_test_proxy_drop_next_reply(SluiceTestProxy *proxy)
{
  g_atomic_int_set(&proxy->drop_next, 1);
}

guint
sluice_test_proxy_dropped(SluiceTestProxy *proxy)
{
  return (guint)g_atomic_int_get(&proxy->dropped);
}

void
sluice_test_proxy_stop(SluiceTestProxy *proxy)
{
  if (proxy == NULL)
    return;
  close(proxy->stop_pipe[1]);
  g_thread_join(proxy->acceptor);
  g_mutex_lock(&proxy->lock);
  for (guint i = 0; i < proxy->relays->len; i++)
    g_thread_join(proxy->relays->pdata[i]);
  g_mutex_unlock(&proxy->lock);
  g_ptr_array_unref(proxy->relays);
  g_mutex_clear(&proxy->lock);
  close(proxy->stop_pipe[0]);
  close(proxy->listen_fd);
  g_free(proxy);
}

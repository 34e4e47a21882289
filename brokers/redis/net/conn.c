/* conn.c - one connection to a Redis server: a socket of a connection
 * type, hiredis's reply parser and command formatting, and the deadlines
 * (see conn-private.h; the accessors users see are in redis-net.h).
 *
 * hiredis 0.14 has no TLS, so Sluice owns its sockets (conn-tls.c brings
 * TLS as one more type) and keeps of hiredis
 * what it does well: redisFormatSdsCommandArgv() formats each command into
 * the connection's output buffer, and a redisReader parses what the socket
 * gives. The bytes move through the connection type (conn-type-private.h):
 *
 *   connect   the type's connect(), bounded by the connect timeout
 *   send      sluice_redis_conn__flush(): the type's write() until the
 *             buffer is out, poll()ing for what it waits for; a server
 *             that does not read costs at most the command timeout
 *   receive   sluice_redis_conn__read(): parse what the reader holds; when
 *             that is no whole reply, poll() against the caller's deadline
 *             (unless the type holds bytes already: TLS), read, feed
 *   reuse     sluice_redis_conn__alive(): a zero-timeout look before an
 *             idle connection is handed out again
 *
 * The deadline is per call, never a socket option: a command's is the
 * command timeout plus, for a blocking command, its block time, and a
 * timed-out read leaves the connection exactly as it was (the reader
 * keeps what came), so the caller decides: an exchange gives the
 * connection up, a pub/sub wait reads again.
 *
 * Buffers: an output buffer that grew past KEEP_BUF_BYTES (a large batch
 * of payloads) is freed after it was sent, and the reader frees an empty
 * buffer of more than that (maxbuf), so an idle connection holds little
 * whatever it carried before. A reply may not grow past the connection's
 * max_reply_bytes: a stream that never ends a reply is refused rather than
 * buffered until the process runs out of memory. hiredis 0.14 allocates an
 * array's element vector as soon as it reads the array's header (eight
 * bytes an element: a header "*1000000000" asks for 8 GB), so the reader
 * builds arrays through bounded_create_array(), which refuses a header
 * that declares more elements than could fit in max_reply_bytes.
 *
 * To add a connection type: see conn-type-private.h; here it is one line
 * in the conn_types[] table.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>

#include "brokers/redis/net/conn-fd-private.h"
#include "brokers/redis/net/conn-private.h"
#include "brokers/redis/net/errors-private.h"
#include "brokers/redis/net/tls-private.h"

/* A buffer larger than this is given back once idle. */
#define KEEP_BUF_BYTES (256 * 1024)
/* What one read() asks for: hiredis's own chunk. */
#define READ_CHUNK (16 * 1024)

/* ---- The reader --------------------------------------------------------- */

/* hiredis's own reply constructors (static in hiredis.c, so read from a
 * reader once), with createArray bounded. */
static redisReplyObjectFunctions bounded_functions;
static void *(*hiredis_create_array)(const redisReadTask *task, int elements);

/* Every element takes at least 4 bytes on the wire (":0\r\n"): an array
 * whose header declares more cannot fit in the connection's limit, and is
 * refused before hiredis allocates its element vector. Returning NULL
 * makes the reader fail ("Out of memory"); the connection says why. */
static void *
bounded_create_array(const redisReadTask *task, int elements)
{
  SluiceRedisConn *conn = task->privdata;

  if (conn != NULL && elements > 0 &&
      (gsize)elements > conn->max_reply_bytes / 4) {
    conn->refused_elements = elements;
    return NULL;
  }
  return hiredis_create_array(task, elements);
}

static redisReader *
reader_new(SluiceRedisConn *conn)
{
  static gsize once = 0;
  redisReader *reader = redisReaderCreate();

  if (g_once_init_enter(&once)) {
    bounded_functions = *reader->fn;
    hiredis_create_array = reader->fn->createArray;
    bounded_functions.createArray = bounded_create_array;
    g_once_init_leave(&once, 1);
  }
  reader->fn = &bounded_functions;
  reader->privdata = conn;
  /* An empty buffer larger than this is freed rather than kept. */
  reader->maxbuf = KEEP_BUF_BYTES;
  return reader;
}

/* "protocol error: ..." for a reader that failed on @conn's bytes. */
static gchar *
reader_failure(SluiceRedisConn *conn)
{
  if (conn->refused_elements > 0)
    return g_strdup_printf(
        "a reply declared an array of %" G_GINT64_FORMAT " elements, more "
        "than fit in %" G_GSIZE_FORMAT " bytes, the most this client takes "
        "(is a key of the namespace far larger than Sluice writes?)",
        conn->refused_elements, conn->max_reply_bytes);
  return g_strdup_printf("protocol error: %s", conn->reader->errstr);
}

/* ---- Connections --------------------------------------------------------- */

/* The connection types, by the name a URL gives (SluiceRedisUrl.conn_type).
 * A new type is one line here. */
static const SluiceRedisConnType *const conn_types[] = {
    &sluice_redis_conn_type__tcp,
    &sluice_redis_conn_type__unix,
    &sluice_redis_conn_type__tls,
};

const SluiceRedisConnType *
sluice_redis_conn_type__find(const gchar *name)
{
  for (gsize i = 0; i < G_N_ELEMENTS(conn_types); i++)
    if (g_strcmp0(conn_types[i]->name, name) == 0)
      return conn_types[i];
  return NULL;
}

SluiceRedisConn *
sluice_redis_conn__open(const SluiceRedisConnType *type,
                        const SluiceRedisEndpoint *endpoint, gint64 timeout_ms,
                        gchar **reason)
{
  SluiceRedisSocket *socket;
  SluiceRedisConn *conn;

  g_return_val_if_fail(type != NULL && endpoint != NULL, NULL);
  socket = type->connect(
      endpoint, g_get_monotonic_time() + MAX(timeout_ms, 1) * 1000, reason);
  if (socket == NULL)
    return NULL;
  conn = g_new0(SluiceRedisConn, 1);
  conn->socket = socket;
  conn->reader = reader_new(conn);
  conn->obuf = sdsempty();
  conn->max_reply_bytes = SLUICE_REDIS_MAX_REPLY_BYTES;
  conn->send_timeout_ms = MAX(timeout_ms, 1);
  conn->setup_timeout_ms = MAX(timeout_ms, 1);
  return conn;
}

void
sluice_redis_conn__free(SluiceRedisConn *conn)
{
  if (conn == NULL)
    return;
  if (conn->socket != NULL)
    conn->socket->type->close(conn->socket);
  if (conn->reader != NULL)
    redisReaderFree(conn->reader);
  sdsfree(conn->obuf);
  if (conn->cmd_ends != NULL)
    g_array_unref(conn->cmd_ends);
  g_free(conn);
}

/* ---- Sending ------------------------------------------------------------- */

void
sluice_redis_conn__append(SluiceRedisConn *conn, int argc, const char **argv,
                          const size_t *lens)
{
  sds cmd = NULL;
  long long len;

  g_return_if_fail(conn != NULL && conn->obuf != NULL);
  len = redisFormatSdsCommandArgv(&cmd, argc, argv, lens);
  if (len < 0) {
    /* Only when out of memory. */
    conn->broken = TRUE;
    return;
  }
  conn->obuf = sdscatlen(conn->obuf, cmd, (size_t)len);
  sdsfree(cmd);
  if (conn->cmd_ends != NULL) {
    gsize end = sdslen(conn->obuf);
    g_array_append_val(conn->cmd_ends, end);
  }
}

gboolean
sluice_redis_conn__flush(SluiceRedisConn *conn, gchar **reason)
{
  SluiceRedisSocket *socket = conn->socket;
  gsize len = sdslen(conn->obuf);
  gsize off = 0;
  gint64 deadline = g_get_monotonic_time() + conn->send_timeout_ms * 1000;

  while (off < len) {
    g_autofree gchar *why = NULL;
    gsize n = 0;
    SluiceRedisIo io =
        socket->type->write(socket, conn->obuf + off, len - off, &n, &why);
    int rc;

    if (io == SLUICE_REDIS_IO_DONE) {
      off += n;
      continue;
    }
    if (io != SLUICE_REDIS_IO_WANT_WRITE && io != SLUICE_REDIS_IO_WANT_READ) {
      *reason = g_strdup_printf("cannot send: %s",
                                why != NULL ? why : "the connection is closed");
      return FALSE;
    }
    rc = sluice_redis_fd__wait(
        socket->fd, io == SLUICE_REDIS_IO_WANT_WRITE ? POLLOUT : POLLIN,
        deadline);
    if (rc == 0) {
      *reason = g_strdup("cannot send: timed out (the server does not read)");
      return FALSE;
    }
    if (rc < 0) {
      *reason = g_strdup_printf("cannot send: poll: %s", g_strerror(errno));
      return FALSE;
    }
  }
  if (len > KEEP_BUF_BYTES) {
    sdsfree(conn->obuf);
    conn->obuf = sdsempty();
  } else {
    sdsclear(conn->obuf);
  }
  return TRUE;
}

/* ---- Receiving ----------------------------------------------------------- */

SluiceRedisRead
sluice_redis_conn__read(SluiceRedisConn *conn, gint64 deadline_us,
                        redisReply **out, gchar **reason)
{
  SluiceRedisSocket *socket = conn->socket;
  short events = POLLIN;

  *out = NULL;
  for (;;) {
    void *reply = NULL;
    gchar buf[READ_CHUNK];
    gsize n = 0;
    SluiceRedisIo io;

    if (redisReaderGetReply(conn->reader, &reply) != REDIS_OK) {
      *reason = reader_failure(conn);
      return SLUICE_REDIS_READ_FAILED;
    }
    if (reply != NULL) {
      /* What is left in the reader belongs to the next reply. */
      conn->reply_bytes = conn->reader->len - conn->reader->pos;
      *out = reply;
      return SLUICE_REDIS_READ_OK;
    }
    if (conn->reply_bytes > conn->max_reply_bytes) {
      *reason = g_strdup_printf(
          "a reply grew past %" G_GSIZE_FORMAT " bytes, the most this client "
          "takes (is a key of the namespace far larger than Sluice writes?)",
          conn->max_reply_bytes);
      return SLUICE_REDIS_READ_FAILED;
    }
    /* Bytes a type holds already (decrypted ahead) are not on the socket:
     * poll() would not see them. */
    if (socket->type->pending(socket) == 0) {
      int rc = sluice_redis_fd__wait(socket->fd, events, deadline_us);

      if (rc == 0)
        return SLUICE_REDIS_READ_TIMEOUT;
      if (rc < 0) {
        *reason = g_strdup_printf("poll: %s", g_strerror(errno));
        return SLUICE_REDIS_READ_FAILED;
      }
    }
    io = socket->type->read(socket, buf, sizeof buf, &n, reason);
    switch (io) {
    case SLUICE_REDIS_IO_DONE:
      if (redisReaderFeed(conn->reader, buf, n) != REDIS_OK) {
        *reason = reader_failure(conn);
        return SLUICE_REDIS_READ_FAILED;
      }
      conn->reply_bytes += n;
      conn->heard = TRUE;
      events = POLLIN;
      break;
    case SLUICE_REDIS_IO_WANT_READ:
      events = POLLIN;
      break;
    case SLUICE_REDIS_IO_WANT_WRITE:
      events = POLLOUT;
      break;
    case SLUICE_REDIS_IO_EOF:
      *reason = g_strdup("the server closed the connection");
      conn->hung_up = TRUE;
      return SLUICE_REDIS_READ_FAILED;
    case SLUICE_REDIS_IO_ERROR:
    default:
      if (errno == ECONNRESET)
        conn->hung_up = TRUE;
      if (*reason == NULL)
        *reason = g_strdup("the connection failed");
      return SLUICE_REDIS_READ_FAILED;
    }
  }
}

gboolean
sluice_redis_conn__transact(SluiceRedisConn *conn, guint n,
                            redisReply **replies, gint64 timeout_ms,
                            gchar **reason)
{
  gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;

  for (guint i = 0; i < n; i++)
    replies[i] = NULL;
  if (conn->broken) {
    *reason = g_strdup("the connection is unusable");
    return FALSE;
  }
  if (!sluice_redis_conn__flush(conn, reason))
    goto fail;
  for (guint i = 0; i < n; i++) {
    SluiceRedisRead r =
        sluice_redis_conn__read(conn, deadline, &replies[i], reason);

    if (r == SLUICE_REDIS_READ_TIMEOUT)
      *reason = g_strdup_printf("no reply within %" G_GINT64_FORMAT " ms",
                                timeout_ms);
    if (r != SLUICE_REDIS_READ_OK)
      goto fail;
  }
  return TRUE;

fail:
  conn->broken = TRUE;
  sluice_redis_replies__free(replies, n);
  return FALSE;
}

gboolean
sluice_redis_conn__alive(SluiceRedisConn *conn)
{
  SluiceRedisSocket *socket = conn->socket;
  struct pollfd pfd = {socket->fd, POLLIN, 0};
  g_autofree gchar *reason = NULL;
  gchar buf[64];
  gsize n = 0;

  if (socket->type->pending(socket) > 0)
    return FALSE; /* data for Redis nobody asked for */
  if (poll(&pfd, 1, 0) == 0)
    return TRUE;
  return socket->type->read(socket, buf, sizeof buf, &n, &reason) ==
         SLUICE_REDIS_IO_WANT_READ;
}

void
sluice_redis_conn__diagnose(const SluiceRedisConn *conn,
                            const SluiceRedisEndpoint *endpoint,
                            gint64 timeout_ms, gchar **reason)
{
  /* A TLS server closes at once on plain bytes (it reads "*2\r\n$4" as a
   * record header); a plain server that died mid-handshake would too, so
   * the port is asked, once, in TLS. */
  if (conn->socket->type != &sluice_redis_conn_type__tcp || conn->heard ||
      !conn->hung_up || endpoint->host == NULL)
    return;
  if (sluice_redis_tls__port_speaks_tls(
          endpoint, g_get_monotonic_time() + MIN(timeout_ms, 1000) * 1000)) {
    g_free(*reason);
    *reason = g_strdup("this port speaks TLS: use rediss://");
  }
}

void
sluice_redis_conn__swap_link(SluiceRedisConn *a, SluiceRedisConn *b)
{
  SluiceRedisConn t = *a;

  *a = *b;
  *b = t;
  /* What belongs to the checked-out handle, not to its server: back. */
  b->slot = a->slot;
  b->cmd_ends = a->cmd_ends;
  a->slot = t.slot;
  a->cmd_ends = t.cmd_ends;
  /* Each reader reports to the handle that holds it now. */
  a->reader->privdata = a;
  b->reader->privdata = b;
}

/* ---- What users of the layer see (redis-net.h) --------------------------- */

gboolean
sluice_redis_conn__is_broken(const SluiceRedisConn *conn)
{
  return conn->broken;
}

void
sluice_redis_conn__set_broken(SluiceRedisConn *conn)
{
  conn->broken = TRUE;
}

gboolean
sluice_redis_conn__failed_over(const SluiceRedisConn *conn)
{
  return conn->failover;
}

const gchar *
sluice_redis_conn__get_server(const SluiceRedisConn *conn)
{
  return conn->server != NULL ? conn->server : "?";
}

gboolean
sluice_redis_conn__roundtrip(SluiceRedisConn *conn, guint n,
                             redisReply **replies, GError **error)
{
  g_autofree gchar *reason = NULL;

  if (sluice_redis_conn__transact(conn, n, replies, conn->setup_timeout_ms,
                                  &reason))
    return TRUE;
  g_set_error_literal(error, SLUICE_BROKER_ERROR,
                      SLUICE_BROKER_ERROR_UNAVAILABLE, reason);
  return FALSE;
}

gboolean
sluice_redis_conn__check_reply(const SluiceRedisConn *conn,
                               const redisReply *reply, const gchar *what,
                               GError **error)
{
  return sluice_redis_error__check(sluice_redis_conn__get_server(conn),
                                   conn->grant_ns, reply, what, NULL, error);
}

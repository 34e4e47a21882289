/* isolation-frame.c - the frames between a worker and its children (process
 * isolation; the format is in isolation-private.h).
 *
 * Both sides read through a buffer: a frame of a no-op task is a few
 * hundred bytes, and reading its header and its payload apart would cost a
 * second system call per task on each side.
 */
#include "config.h"

#include <errno.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lib/isolation-private.h"

#define READ_CHUNK 65536

gboolean
sluice_frame__write(int fd, guint8 type, gconstpointer a, gsize alen,
                    gconstpointer b, gsize blen)
{
  guint8 head[SLUICE_FRAME_HEAD];
  guint32 len = (guint32)(alen + blen);
  struct iovec iov[3] = {
      {head, SLUICE_FRAME_HEAD}, {(gpointer)a, alen}, {(gpointer)b, blen}};
  gsize total = SLUICE_FRAME_HEAD + alen + blen;
  int n = 3;
  struct iovec *v = iov;

  head[0] = len & 0xff;
  head[1] = (len >> 8) & 0xff;
  head[2] = (len >> 16) & 0xff;
  head[3] = (len >> 24) & 0xff;
  head[4] = type;
  while (total > 0) {
    ssize_t w = writev(fd, v, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return FALSE;
    total -= (gsize)w;
    while (n > 0 && (gsize)w >= v->iov_len) {
      w -= (ssize_t)v->iov_len;
      v++;
      n--;
    }
    if (n > 0) {
      v->iov_base = (guint8 *)v->iov_base + w;
      v->iov_len -= (gsize)w;
    }
  }
  return TRUE;
}

void
sluice_frame_reader__init(SluiceFrameReader *reader, int fd)
{
  reader->fd = fd;
  reader->buf = g_byte_array_new();
  reader->start = 0;
}

void
sluice_frame_reader__clear(SluiceFrameReader *reader)
{
  g_clear_pointer(&reader->buf, g_byte_array_unref);
}

void
sluice_frame_reader__reset(SluiceFrameReader *reader, int fd)
{
  reader->fd = fd;
  g_byte_array_set_size(reader->buf, 0);
  reader->start = 0;
}

gboolean
sluice_frame_reader__next(SluiceFrameReader *reader, guint8 *type,
                          const guint8 **payload, gsize *len)
{
  for (;;) {
    const guint8 *p = reader->buf->data + reader->start;
    gsize have = reader->buf->len - reader->start;
    ssize_t r;

    if (have >= SLUICE_FRAME_HEAD) {
      guint32 flen = (guint32)p[0] | (guint32)p[1] << 8 | (guint32)p[2] << 16 |
                     (guint32)p[3] << 24;
      if (flen > SLUICE_FRAME_MAX)
        return FALSE;
      if (have - SLUICE_FRAME_HEAD >= flen) {
        *type = p[4];
        *payload = p + SLUICE_FRAME_HEAD;
        *len = flen;
        reader->start += SLUICE_FRAME_HEAD + flen;
        return TRUE;
      }
    }
    /* Keep the unread part at the front, then read what the socket has. */
    if (reader->start > 0) {
      g_byte_array_remove_range(reader->buf, 0, (guint)reader->start);
      reader->start = 0;
    }
    have = reader->buf->len;
    g_byte_array_set_size(reader->buf, (guint)(have + READ_CHUNK));
    do
      r = read(reader->fd, reader->buf->data + have, READ_CHUNK);
    while (r < 0 && errno == EINTR);
    g_byte_array_set_size(reader->buf, (guint)(have + MAX(r, 0)));
    if (r <= 0)
      return FALSE;
  }
}

/* slot.c - Redis Cluster hash slots (see redis-net.h): CRC16 (XMODEM) of
 * a key's hash tag modulo 16384, as the Cluster specification defines it.
 *
 * Computed bit by bit rather than from a table: a slot is computed once
 * per partition when the broker is made, never per command.
 */
#include "config.h"

#include <string.h>

#include "brokers/redis/net/redis-net.h"

static guint16
crc16_xmodem(const guint8 *data, gsize len)
{
  guint16 crc = 0;

  for (gsize i = 0; i < len; i++) {
    crc ^= (guint16)(data[i] << 8);
    for (int bit = 0; bit < 8; bit++)
      crc = (crc & 0x8000) != 0 ? (guint16)((crc << 1) ^ 0x1021)
                                : (guint16)(crc << 1);
  }
  return crc;
}

guint
sluice_redis_slot__of_key(const gchar *key, gsize len)
{
  const gchar *open = memchr(key, '{', len);

  if (open != NULL) {
    gsize after = (gsize)(open - key) + 1;
    const gchar *close = memchr(open + 1, '}', len - after);

    if (close != NULL && close > open + 1)
      return crc16_xmodem((const guint8 *)open + 1, (gsize)(close - open - 1)) %
             SLUICE_REDIS_SLOTS;
  }
  return crc16_xmodem((const guint8 *)key, len) % SLUICE_REDIS_SLOTS;
}

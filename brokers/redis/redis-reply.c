/* redis-reply.c - reading the shape of Redis replies (see redis-reply.h).
 */
#include "config.h"

#include <string.h>

#include "brokers/redis/redis-reply.h"

gboolean
sluice_redis_reply__is_string(const redisReply *r)
{
  return r != NULL &&
         (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

gboolean
sluice_redis_reply__to_int(const redisReply *r, gint64 *out)
{
  gchar *end = NULL;
  gdouble d;

  if (r == NULL)
    return FALSE;
  if (r->type == REDIS_REPLY_INTEGER) {
    *out = r->integer;
    return TRUE;
  }
  if (!sluice_redis_reply__is_string(r) || r->len == 0 || r->len > 40)
    return FALSE;
  {
    gchar buf[48];
    memcpy(buf, r->str, r->len);
    buf[r->len] = '\0';
    *out = g_ascii_strtoll(buf, &end, 10);
    if (*end == '\0')
      return TRUE;
    /* A score may come as "1.5e+12": go through a double. */
    d = g_ascii_strtod(buf, &end);
    /* "inf" or 1e300 from a hostile or damaged entry: no gint64 holds it
     * (and converting it would be undefined). */
    if (*end != '\0' || !(d > -9.2e18 && d < 9.2e18))
      return FALSE;
    *out = (gint64)(d < 0 ? d - 0.5 : d + 0.5);
  }
  return TRUE;
}

gchar *
sluice_redis_reply__dup(const redisReply *r)
{
  return g_strndup(r->str, r->len);
}

/* reply.c - reading the shape of Redis replies (see redis-net.h): what
 * every user of the layer needs to take a reply apart, free it, or take
 * over its buffer without a copy. Replies are hiredis's redisReply, made
 * by the redisReader of each connection (conn.c); mapping an error reply
 * to a GError is errors.c.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "brokers/redis/net/redis-net.h"

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

void
sluice_redis_replies__free(redisReply **replies, guint n)
{
  for (guint i = 0; i < n; i++) {
    if (replies[i] != NULL)
      freeReplyObject(replies[i]);
    replies[i] = NULL;
  }
}

GBytes *
sluice_redis_reply__steal_bytes(redisReply *reply, gsize skip)
{
  gchar *str;
  gsize len;

  g_return_val_if_fail(reply != NULL, NULL);
  /* A status reply carries its text the same way; callers that take
   * either (reply_is_string) may hand one over. */
  g_return_val_if_fail(reply->type == REDIS_REPLY_STRING ||
                           reply->type == REDIS_REPLY_STATUS,
                       NULL);
  g_return_val_if_fail(reply->len >= skip, NULL);

  str = reply->str;
  len = reply->len;
  reply->str = NULL;
  reply->len = 0;
  if (str == NULL)
    return g_bytes_new(NULL, 0);
  /* hiredis 0.14 allocates reply strings with malloc(). */
  return g_bytes_new_with_free_func(str + skip, len - skip, free, str);
}

gboolean
sluice_redis_reply__is_error_code(const redisReply *reply, const gchar *code)
{
  gsize n = strlen(code);

  return reply != NULL && reply->type == REDIS_REPLY_ERROR && reply->len >= n &&
         strncmp(reply->str, code, n) == 0 &&
         (reply->len == n || reply->str[n] == ' ');
}

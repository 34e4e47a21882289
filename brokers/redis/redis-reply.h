/* redis-reply.h - reading the shape of Redis replies (internal).
 *
 * What every slot and transport needs to take a reply apart; the error
 * side of a reply (mapping Redis errors to GError, NOSCRIPT, NOGROUP) and
 * stealing a reply's buffer live with the connection, in redis-conn.h.
 */
#pragma once

#include <hiredis/hiredis.h>

#include <sluice/sys/broker.h>

G_BEGIN_DECLS

/** sluice_redis_reply__is_string: Returns: TRUE for a string or status
 * reply (NULL-safe). */
gboolean sluice_redis_reply__is_string(const redisReply *r);

/**
 * sluice_redis_reply__to_int:
 * An integer reply, or a decimal string (scores come as strings, maybe as
 * "1.5e+12", rounded), to @out.
 * Returns: FALSE, @out untouched, for anything else.
 */
gboolean sluice_redis_reply__to_int(const redisReply *r, gint64 *out);

/** sluice_redis_reply__dup: Returns: (transfer full): a string reply's
 * bytes as a NUL-terminated string. */
gchar *sluice_redis_reply__dup(const redisReply *r);

G_END_DECLS

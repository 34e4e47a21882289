/* redis-reply.h - reading the shape of Redis replies (internal).
 *
 * What every slot and transport needs to take a reply apart, free it or
 * take over its buffer; mapping an error reply to a GError is
 * redis-errors.h.
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

/** sluice_redis_reply__is_error_code: Returns: TRUE if @reply is an error
 * reply whose code (first word) is @code ("NOSCRIPT"). */
gboolean sluice_redis_reply__is_error_code(const redisReply *reply,
                                           const gchar *code);

/**
 * sluice_redis_reply__steal_bytes:
 * @reply: a string (or status) reply
 * @skip: bytes to drop from the front (0, or 1 for a record's flag byte)
 *
 * Returns: (transfer full): the reply's bytes from @skip on, as a GBytes
 * that takes over hiredis's buffer (no copy); @reply's string becomes
 * NULL, and freeReplyObject() still frees the rest of @reply.
 */
GBytes *sluice_redis_reply__steal_bytes(redisReply *reply, gsize skip);

/** sluice_redis_replies__free: frees @n replies (NULL entries skipped). */
void sluice_redis_replies__free(redisReply **replies, guint n);

G_END_DECLS

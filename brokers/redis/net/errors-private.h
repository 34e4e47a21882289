/* errors-private.h - Redis error replies as errors that say what to do
 * (errors.c; internal to brokers/redis/net/).
 */
#pragma once

#include "brokers/redis/net/redis-net.h"

G_BEGIN_DECLS

/**
 * sluice_redis_error__check:
 * @url: the server's URL as it may be shown (no password)
 * @ns: (nullable): the namespace, so that a permission error names the key
 *   and channel patterns to grant
 * @reply: (nullable): a reply
 * @what: what was being done, for the message ("enqueue")
 * @script: (nullable): the script that gave @reply: a refused command is
 *   looked up on the line Redis names
 *
 * Returns: TRUE when @reply is not an error reply; otherwise FALSE and the
 * mapped error (see sluice_redis_reply__check() in redis-net.h).
 */
gboolean sluice_redis_error__check(const gchar *url, const gchar *ns,
                                   const redisReply *reply, const gchar *what,
                                   const SluiceRedisScriptInfo *script,
                                   GError **error);

G_END_DECLS

/* handshake-private.h - what every new connection says first
 * (handshake.c; internal to brokers/redis/net/).
 */
#pragma once

#include "brokers/redis/net/conn-private.h"

G_BEGIN_DECLS

/**
 * sluice_redis_handshake__run:
 * @url: whose credentials (AUTH) and database (SELECT) to use; its
 *   display names the server in messages
 * @grant_ns: (nullable): the namespace a permission message names
 * @probe: (nullable): a command without arguments to send after the
 *   handshake in the same round trip ("ROLE"), for the caller to look at
 * @out_probe: (out) (transfer full) (optional): its reply, on success
 * @reason: (out) (transfer full): on failure, why the server could not be
 *   talked to (an outage)
 *
 * [AUTH] [SELECT] CLIENT ID [@probe] in one round trip within
 * @conn->setup_timeout_ms, on a connection made by
 * sluice_redis_conn__open(); @conn->client_id is set.
 * Returns: TRUE, or FALSE with either *@reason (no answer) or @error (the
 * server answered no: _AUTH for credentials, _INVALID for a database it
 * does not have).
 */
gboolean sluice_redis_handshake__run(SluiceRedisConn *conn,
                                     const SluiceRedisUrl *url,
                                     const gchar *grant_ns, const gchar *probe,
                                     redisReply **out_probe, gchar **reason,
                                     GError **error);

G_END_DECLS

/* redis-sentinel.h - finding the master of a redis+sentinel:// URL
 * (internal; the pool of redis-conn.c calls it before each connection it
 * makes while it does not know the master).
 */
#pragma once

#include <glib.h>

#include "brokers/redis/net/redis-net.h"

G_BEGIN_DECLS

/**
 * sluice_redis_sentinel__resolve:
 * @url: a sentinel URL (@url->is_sentinel)
 * @timeout_ms: > 0; the longest connection and reply wait per sentinel
 * @min_epoch: an answer of a lower configuration epoch is passed over
 *   (-1: none is)
 * @out_host: (out) (transfer full): the master's host, as the sentinels
 *   announce it
 * @out_port: (out): its port
 * @out_epoch: (out): the configuration epoch of that answer (the
 *   sentinels bump it at each failover), or -1 when the sentinel would not
 *   say (an ACL without SENTINEL MASTER)
 *
 * Asks the sentinels of @url in their order, each with its own short
 * connection, for `SENTINEL get-master-addr-by-name` and the master's
 * config-epoch (`SENTINEL MASTER`); the first answer of epoch @min_epoch
 * or later wins, so a sentinel that has not heard of a failover the
 * caller knows of is not believed. The address is not checked here: the
 * caller connects to it and asks ROLE.
 *
 * Returns: TRUE, or FALSE and SLUICE_BROKER_ERROR_UNAVAILABLE (no sentinel
 * answered; the message lists why, per sentinel), _AUTH (the sentinels
 * refused or want the sentinel credentials: the message names the query
 * parameters) or _INVALID (every sentinel that answered monitors no
 * master of that name).
 */
gboolean sluice_redis_sentinel__resolve(const SluiceRedisUrl *url,
                                        gint64 timeout_ms, gint64 min_epoch,
                                        gchar **out_host, gint *out_port,
                                        gint64 *out_epoch, GError **error);

G_END_DECLS

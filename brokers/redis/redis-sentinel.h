/* redis-sentinel.h - finding the master of a redis+sentinel:// URL
 * (internal; the pool of redis-conn.c calls it before each connection it
 * makes while it does not know the master).
 */
#pragma once

#include <glib.h>

#include "brokers/redis/redis-url.h"

G_BEGIN_DECLS

/**
 * sluice_redis_sentinel__resolve:
 * @url: a sentinel URL (@url->is_sentinel)
 * @timeout_ms: > 0; the longest connection and reply wait per sentinel
 * @out_host: (out) (transfer full): the master's host, as the sentinels
 *   announce it
 * @out_port: (out): its port
 *
 * Asks the sentinels of @url in their order, each with its own short
 * connection, for `SENTINEL get-master-addr-by-name`; the first answer
 * wins. The address is not checked here: the caller connects to it and
 * asks ROLE (a sentinel may answer before it noticed a failover).
 *
 * Returns: TRUE, or FALSE and SLUICE_BROKER_ERROR_UNAVAILABLE (no sentinel
 * answered; the message lists why, per sentinel), _AUTH (the sentinels
 * refused or want the sentinel credentials: the message names the query
 * parameters) or _INVALID (every sentinel that answered monitors no
 * master of that name).
 */
gboolean sluice_redis_sentinel__resolve(const SluiceRedisUrl *url,
                                        gint64 timeout_ms, gchar **out_host,
                                        gint *out_port, GError **error);

G_END_DECLS

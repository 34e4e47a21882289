/* tls-private.h - the TLS settings of a rediss:// URL and what the
 * connection types share of OpenSSL (conn-tls.c; internal to
 * brokers/redis/net/).
 *
 * A SluiceRedisTls is what SluiceRedisEndpoint.settings points to for the
 * "tls" type: the settings a URL gave (SluiceRedisTlsConfig, copied) and
 * the one SSL_CTX built from them. The URL owns a reference; every copy of
 * the URL (a pool's, each node's, each partition's) takes another, so all
 * the connections of one broker share one context: the CA store and the
 * client certificate are read once, not once per connection.
 */
#pragma once

#include "brokers/redis/net/conn-type-private.h"
#include "brokers/redis/net/redis-net.h"

G_BEGIN_DECLS

typedef struct _SluiceRedisTls SluiceRedisTls;

/** sluice_redis_tls__new: Returns: (transfer full): settings copied from
 * @config, with no context yet. */
SluiceRedisTls *sluice_redis_tls__new(const SluiceRedisTlsConfig *config);

/** sluice_redis_tls__ref: Returns: @tls (NULL-safe). */
SluiceRedisTls *sluice_redis_tls__ref(SluiceRedisTls *tls);

/** sluice_redis_tls__unref: NULL-safe. */
void sluice_redis_tls__unref(SluiceRedisTls *tls);

/** sluice_redis_tls__get_config: Returns: (transfer none): the settings,
 * valid while @tls is. */
const SluiceRedisTlsConfig *sluice_redis_tls__get_config(SluiceRedisTls *tls);

/**
 * sluice_redis_tls__prepare:
 * @shown: the URL as it may be shown, for the warning of tls_insecure
 *
 * Builds the context once (later calls return at once): reads the CA
 * file or directory (else the system's trust store) and the client
 * certificate and key; with tls_insecure, logs once that the server is not
 * verified. Thread-safe.
 * Returns: TRUE, or FALSE and *@reason (transfer full) saying which file
 * could not be used and why (never what a file holds).
 */
gboolean sluice_redis_tls__prepare(SluiceRedisTls *tls, const gchar *shown,
                                   gchar **reason);

/**
 * sluice_redis_tls__port_speaks_tls:
 * @endpoint: a host and port (settings ignored)
 *
 * Whether the server there answers a TLS hello with a TLS record: asked
 * when a plain connection was closed before the server said anything, to
 * tell a TLS port from a server that just hung up. Bounded by
 * @deadline_us.
 */
gboolean sluice_redis_tls__port_speaks_tls(const SluiceRedisEndpoint *endpoint,
                                           gint64 deadline_us);

G_END_DECLS

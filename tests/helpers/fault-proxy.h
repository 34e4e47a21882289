/* fault-proxy.h - a TCP proxy on loopback that a test can make misbehave.
 *
 * Sits between a client and a redis-server (both on 127.0.0.1) and relays
 * bytes both ways until told to fail, as a flaky network or a server that
 * dies mid-reply would: the fault matrix rows "the reply of a write was
 * lost" (the client must retry without writing twice) and others are
 * played with it. One thread accepts; one thread per connection relays.
 * Never listens off loopback, always on a free port.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _SluiceTestProxy SluiceTestProxy;

/**
 * sluice_test_proxy_start:
 * @upstream_port: where the real server listens on 127.0.0.1
 * Returns: (transfer full): a running proxy, or NULL and @error.
 */
SluiceTestProxy *sluice_test_proxy_start(guint16 upstream_port, GError **error);

/** sluice_test_proxy_port: Returns: the port the proxy listens on. */
guint16 sluice_test_proxy_port(SluiceTestProxy *proxy);

/**
 * sluice_test_proxy_drop_next_reply:
 * The next bytes the server sends on any connection are thrown away and
 * that connection is closed on both sides: what the client sent was
 * carried out, and it never learns so.
 */
void sluice_test_proxy_drop_next_reply(SluiceTestProxy *proxy);

/** sluice_test_proxy_dropped: Returns: replies dropped so far. */
guint sluice_test_proxy_dropped(SluiceTestProxy *proxy);

/** sluice_test_proxy_stop: closes every connection and frees @proxy.
 * NULL-safe. */
void sluice_test_proxy_stop(SluiceTestProxy *proxy);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(SluiceTestProxy, sluice_test_proxy_stop)

G_END_DECLS

/* web.h - what the files of `sluice web` share: the dashboard's state
 * (web-api.c answers from it, cmd-web.c builds it) and the rate history
 * (web-rates.c).
 *
 * Everything runs on the main context of the `sluice web` process: the
 * server's handlers and the sampler's timeout take turns, so nothing here
 * is locked.
 */
#pragma once

#include "cli/http.h"

G_BEGIN_DECLS

/* The header a write action carries its token in (not a cookie: a browser
 * never adds it by itself, so another site cannot make one). */
#define WEB_TOKEN_HEADER "X-Sluice-Token"

/* ---- The rate history (web-rates.c) -------------------------------------- */

typedef struct _WebRates WebRates;

/**
 * web_rates_new:
 * @interval_ms: how often web_rates_sample() is called; sets how many
 *   samples make up the last hour
 * Returns: (transfer full): an empty history; free with web_rates_free().
 */
WebRates *web_rates_new(gint64 interval_ms);
void web_rates_free(WebRates *rates);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(WebRates, web_rates_free)

/**
 * web_rates_sample:
 * @stats: one read of the broker's stats
 * @now_ms: when it was read (ms since epoch)
 *
 * Adds one point: the tasks the workers of @stats finished since the
 * previous sample (their announced counts, worker by worker), divided by
 * the time between the two. The first sample only sets the baseline.
 */
void web_rates_sample(WebRates *rates, const SluiceBrokerStats *stats,
                      gint64 now_ms);

/** web_rates_to_json: writes the history as a JSON object into @json. */
void web_rates_to_json(const WebRates *rates, CliJson *json);

/* ---- The dashboard ------------------------------------------------------- */

/**
 * Web:
 * @client: the broker's client (the public API, as every command uses)
 * @settings: the connection settings; @settings->url may hold a password,
 *   so it never reaches a page: @shown_url does
 * @shown_url: the broker's address without user or password
 * @token: (nullable): the write token; NULL = writes are disabled
 * @read_only: --read-only was given
 * @rates: the processed/failed history since the process started
 * @started_at_ms: when it started
 * @loopback: it listens on a loopback address only, so it answers only
 *   requests addressed to one (the Host header), not a name that a site
 *   made resolve to 127.0.0.1 (DNS rebinding)
 * @https: it serves HTTPS (--tls-cert), so its pages' origin is https://
 */
typedef struct {
  SluiceClient *client;
  const CliSettings *settings;
  gchar *shown_url;
  gchar *token;
  gboolean read_only;
  WebRates *rates;
  gint64 started_at_ms;
  gint64 sample_interval_ms;
  gboolean loopback;
  gboolean https;
} Web;

/**
 * web_shown_url:
 * @url: a broker URL, which may carry a user and password
 * Returns: (transfer full): scheme, host, port and path only ("redis://
 * 10.0.0.5:6379/0", "unix:///run/redis.sock"), or "(not shown)" when @url
 * does not parse: never anything of its user information.
 */
gchar *web_shown_url(const gchar *url);

/**
 * web_token_equal:
 * Compares two tokens in time that depends on neither (both are hashed
 * first, and the digests compared without an early exit).
 */
gboolean web_token_equal(const gchar *a, const gchar *b);

/**
 * web_add_handlers:
 * Adds the dashboard's pages (embedded with GResource) and its JSON API
 * under /api/ to @server.
 */
void web_add_handlers(SoupServer *server, Web *web);

G_END_DECLS

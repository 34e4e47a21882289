/* metrics-server.c - `sluice worker --metrics-listen`: /metrics and
 * /healthz, served from the worker's own process.
 *
 * The server runs on a GMainContext of its own, iterated by a thread of
 * its own, so a scrape never waits for the worker's threads and the worker
 * never waits for a scrape: /metrics copies the library's snapshot
 * (sluice_worker_get_metrics(), a copy under the worker's locks) and
 * renders it. It is started after sluice_worker_start(): in process
 * isolation the worker forks its children's parent there, and must do so
 * before this process has threads of its own.
 *
 * /healthz answers 200 while the worker can do its work: the broker is
 * reachable (no outage since the last successful call) and the worker's
 * housekeeping thread, the one that renews leases and promotes due work,
 * is ticking. A tick added with sluice_worker_add_tick() records when it
 * last ran; no tick for HEALTH_STALE_MS means housekeeping is stuck (a
 * stalled broker call, for instance). 503 otherwise, and once the worker
 * has begun to stop, with the reasons in the body.
 */
#include "config.h"

#include "cli/http.h"

#define HEALTH_TICK_MS 1000
#define HEALTH_STALE_MS 5000

/* What the housekeeping tick and the server share; the tick keeps a
 * reference until the worker is freed. */
typedef struct {
  GMutex lock;
  gint64 last_tick_us; /* monotonic */
} Health;

static void
health_clear(gpointer data)
{
  Health *health = data;

  g_mutex_clear(&health->lock);
}

static void
health_release(gpointer data)
{
  g_rc_box_release_full(data, health_clear);
}

static void
health_tick(SluiceWorker *worker, gpointer data)
{
  Health *health = data;

  g_mutex_lock(&health->lock);
  health->last_tick_us = g_get_monotonic_time();
  g_mutex_unlock(&health->lock);
}

struct _CliMetricsServer {
  SluiceWorker *worker;
  Health *health;
  GMainContext *context;
  SoupServer *soup;
  GThread *thread;
  gint quit;     /* atomic */
  gint stopping; /* atomic */
};

static void
serve_metrics(SoupServer *soup, SoupServerMessage *msg, const char *path,
              GHashTable *query, gpointer data)
{
  CliMetricsServer *server = data;
  SluiceWorkerMetrics m;
  gchar *text;

  if (!cli_http_accept(msg, path, "/metrics"))
    return;
  sluice_worker_get_metrics(server->worker, &m);
  text = sluice_worker_metrics_to_prometheus(&m);
  sluice_worker_metrics_clear(&m);
  cli_http_respond(msg, SOUP_STATUS_OK, CLI_HTTP_PROMETHEUS, text);
}

static void
serve_health(SoupServer *soup, SoupServerMessage *msg, const char *path,
             GHashTable *query, gpointer data)
{
  CliMetricsServer *server = data;
  g_autoptr(GString) problems = g_string_new(NULL);
  SluiceWorkerMetrics m;
  gint64 since_tick_ms;

  if (!cli_http_accept(msg, path, "/healthz"))
    return;
  g_mutex_lock(&server->health->lock);
  since_tick_ms =
      (g_get_monotonic_time() - server->health->last_tick_us) / 1000;
  g_mutex_unlock(&server->health->lock);
  sluice_worker_get_metrics(server->worker, &m);
  if (g_atomic_int_get(&server->stopping))
    g_string_append(problems, "the worker is stopping\n");
  if (!m.broker_reachable)
    g_string_append(problems, "the broker is unreachable\n");
  if (since_tick_ms > HEALTH_STALE_MS)
    g_string_append_printf(problems,
                           "housekeeping (lease renewal, promotion) has not "
                           "run for %" G_GINT64_FORMAT " ms\n",
                           since_tick_ms);
  sluice_worker_metrics_clear(&m);
  if (problems->len > 0)
    cli_http_respond(msg, SOUP_STATUS_SERVICE_UNAVAILABLE,
                     "text/plain; charset=utf-8",
                     g_string_free(g_steal_pointer(&problems), FALSE));
  else
    cli_http_respond(msg, SOUP_STATUS_OK, "text/plain; charset=utf-8",
                     g_strdup("ok\n"));
}

static gpointer
serve(gpointer data)
{
  CliMetricsServer *server = data;

  /* Not a GMainLoop: a quit before the loop runs would be lost. */
  g_main_context_push_thread_default(server->context);
  while (!g_atomic_int_get(&server->quit))
    g_main_context_iteration(server->context, TRUE);
  g_main_context_pop_thread_default(server->context);
  return NULL;
}

CliMetricsServer *
cli_metrics_server_start(SluiceWorker *worker, GSocketAddress *address,
                         const CliHttpTls *tls, GError **error)
{
  CliMetricsServer *server = g_new0(CliMetricsServer, 1);
  g_autofree gchar *url = NULL;

  server->context = g_main_context_new();
  server->soup = cli_http_listen(address, tls, server->context, &url, error);
  if (server->soup == NULL) {
    g_main_context_unref(server->context);
    g_free(server);
    return NULL;
  }
  server->worker = sluice_worker_ref(worker);
  server->health = g_rc_box_new0(Health);
  g_mutex_init(&server->health->lock);
  server->health->last_tick_us = g_get_monotonic_time();
  sluice_worker_add_tick(worker, HEALTH_TICK_MS, health_tick,
                         g_rc_box_acquire(server->health), health_release);
  soup_server_add_handler(server->soup, "/metrics", serve_metrics, server,
                          NULL);
  soup_server_add_handler(server->soup, "/healthz", serve_health, server, NULL);
  server->thread = g_thread_new("sluice-metrics", serve, server);
  g_info("serving metrics on %s/metrics and health on %s/healthz", url, url);
  return server;
}

void
cli_metrics_server_stopping(CliMetricsServer *server)
{
  if (server != NULL)
    g_atomic_int_set(&server->stopping, 1);
}

void
cli_metrics_server_free(CliMetricsServer *server)
{
  if (server == NULL)
    return;
  g_atomic_int_set(&server->quit, 1);
  g_main_context_wakeup(server->context);
  g_thread_join(server->thread);
  /* The thread is gone: the server and its context are this thread's. */
  g_main_context_push_thread_default(server->context);
  soup_server_disconnect(server->soup);
  g_object_unref(server->soup);
  while (g_main_context_iteration(server->context, FALSE))
    ;
  g_main_context_pop_thread_default(server->context);
  g_main_context_unref(server->context);
  health_release(server->health);
  sluice_worker_unref(server->worker);
  g_free(server);
}

/* notify.c - `sluice worker` under systemd: the sd_notify protocol.
 *
 * With Type=notify the service manager waits for READY=1 before it counts
 * the worker as started, shows STATUS= in `systemctl status`, restarts a
 * worker that stops sending WATCHDOG=1 within WatchdogSec (the pings come
 * from the worker's housekeeping thread, the one that renews leases, so a
 * worker whose housekeeping is stuck is restarted before its leases lapse
 * unnoticed), and is told STOPPING=1 when a graceful stop begins. Without
 * NOTIFY_SOCKET every call here does nothing.
 *
 * "Ready" means the worker can serve: its broker answered. A worker
 * started while Redis is down waits for it (under systemd, Redis often
 * starts after its workers), and neither logs "ready" nor sends READY=1
 * before it is back.
 */
#include "config.h"

#include <systemd/sd-daemon.h>

#include "cli/cli.h"

/* How often STATUS= is refreshed. */
#define STATUS_INTERVAL_MS 5000
/* How often a worker waiting for its broker looks whether it answered. */
#define READY_POLL_MS 100

static gboolean
under_systemd(void)
{
  return g_getenv("NOTIFY_SOCKET") != NULL;
}

static void
send_status(SluiceWorker *worker, const gchar *state)
{
  SluiceWorkerStats s;

  sluice_worker_get_stats(worker, &s);
  sd_notifyf(0,
             "STATUS=%s: %" G_GUINT64_FORMAT " started, %" G_GUINT64_FORMAT
             " succeeded, %" G_GUINT64_FORMAT
             " failed attempts, %" G_GUINT64_FORMAT
             " retried, %" G_GUINT64_FORMAT " dead-lettered",
             state, s.started, s.succeeded, s.failed_attempts, s.retried,
             s.dead_lettered);
}

static void
status_tick(SluiceWorker *worker, gpointer data)
{
  send_status(worker, "running");
}

static void
watchdog_tick(SluiceWorker *worker, gpointer data)
{
  sd_notify(0, "WATCHDOG=1");
}

static void
notify_ready(SluiceWorker *worker)
{
  guint64 usec = 0;

  if (!under_systemd())
    return;
  sd_notify(0, "READY=1");
  send_status(worker, "running");
  sluice_worker_add_tick(worker, STATUS_INTERVAL_MS, status_tick, NULL, NULL);
  /* Pinged at half the period, as sd_watchdog_enabled(3) advises. */
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0)
    sluice_worker_add_tick(worker, (guint)MAX(usec / 2000, 1), watchdog_tick,
                           NULL, NULL);
}

/* Whether the broker answered: the start's check did, or a call since
 * (an outage lasts from a call that found it unreachable to one that
 * succeeded). */
static gboolean
broker_answered(SluiceWorker *worker)
{
  SluiceWorkerMetrics m;
  gboolean up;

  sluice_worker_get_metrics(worker, &m);
  up = m.broker_reachable;
  sluice_worker_metrics_clear(&m);
  return up;
}

typedef struct {
  gchar *line;
  gboolean done; /* only the housekeeping thread touches it */
} ReadyWait;

static void
ready_wait_free(gpointer data)
{
  ReadyWait *r = data;

  g_free(r->line);
  g_free(r);
}

static void
announce(SluiceWorker *worker, const gchar *line)
{
  g_info("%s", line);
  notify_ready(worker);
}

static void
ready_tick(SluiceWorker *worker, gpointer data)
{
  ReadyWait *r = data;

  if (r->done || !broker_answered(worker))
    return;
  r->done = TRUE;
  announce(worker, r->line);
}

void
cli_notify_ready_when_served(SluiceWorker *worker, gchar *line)
{
  ReadyWait *r;

  if (broker_answered(worker)) {
    announce(worker, line);
    g_free(line);
    return;
  }
  if (under_systemd())
    sd_notify(0, "STATUS=waiting for the broker to answer");
  /* Ticks cannot be removed: this one does nothing once it announced. */
  r = g_new0(ReadyWait, 1);
  r->line = line;
  sluice_worker_add_tick(worker, READY_POLL_MS, ready_tick, r, ready_wait_free);
}

void
cli_notify_stopping(SluiceWorker *worker)
{
  if (!under_systemd())
    return;
  sd_notify(0, "STOPPING=1");
  send_status(worker, "stopping");
}

/* notify.c - `sluice worker` under systemd: the sd_notify protocol.
 *
 * With Type=notify the service manager waits for READY=1 before it counts
 * the worker as started, shows STATUS= in `systemctl status`, restarts a
 * worker that stops sending WATCHDOG=1 within WatchdogSec (the pings come
 * from the worker's housekeeping thread, the one that renews leases, so a
 * worker whose housekeeping is stuck is restarted before its leases lapse
 * unnoticed), and is told STOPPING=1 when a graceful stop begins. Without
 * NOTIFY_SOCKET every call here does nothing.
 */
#include "config.h"

#include <systemd/sd-daemon.h>

#include "cli/cli.h"

/* How often STATUS= is refreshed. */
#define STATUS_INTERVAL_MS 5000

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

void
cli_notify_ready(SluiceWorker *worker)
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

void
cli_notify_stopping(SluiceWorker *worker)
{
  if (!under_systemd())
    return;
  sd_notify(0, "STOPPING=1");
  send_status(worker, "stopping");
}

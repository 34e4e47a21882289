/* trouble.c - what the worker says when its broker fails.
 *
 * Every thread of the worker talks to the broker, and during an outage all
 * of them fail, every tick. The operator wants one line when the broker
 * goes away and one when it is back, with how long it was gone; anything
 * else that goes wrong is logged, but the same operation's failure at most
 * once a minute.
 */
#include "config.h"

#include "lib/worker/worker-private.h"

/* A broker error other than "unavailable" is logged at most this often
 * per operation, and an unknown task name at most this often per name. */
#define REPEAT_LOG_MS (60 * 1000)

/* Notes a failed broker call of operation @what. */
void
sluice_worker__broker_failed(SluiceWorker *worker, const gchar *what,
                             const GError *error)
{
  gint64 now = g_get_monotonic_time();
  gboolean log_it = FALSE;

  if (g_error_matches(error, SLUICE_BROKER_ERROR,
                      SLUICE_BROKER_ERROR_UNAVAILABLE)) {
    g_mutex_lock(&worker->outage_lock);
    worker->broker_errors++;
    if (!g_atomic_int_get(&worker->outage)) {
      g_atomic_int_set(&worker->outage, 1);
      worker->outage_since = now;
      worker->broker_outages++;
      log_it = TRUE;
    }
    g_mutex_unlock(&worker->outage_lock);
    if (log_it)
      sluice_log__message(G_LOG_LEVEL_WARNING,
                          "the broker is unreachable (%s: %s); waiting for it: "
                          "finished tasks are kept and settled once it is "
                          "back",
                          what, error->message);
    return;
  }
  g_mutex_lock(&worker->outage_lock);
  worker->broker_errors++;
  {
    gint64 *last = g_hash_table_lookup(worker->repeated, what);
    if (last == NULL) {
      last = g_new0(gint64, 1);
      g_hash_table_insert(worker->repeated, g_strdup(what), last);
      log_it = TRUE;
    } else {
      log_it = now - *last >= REPEAT_LOG_MS * 1000;
    }
    if (log_it)
      *last = now;
  }
  g_mutex_unlock(&worker->outage_lock);
  if (log_it)
    sluice_log__message(G_LOG_LEVEL_WARNING,
                        "%s failed: %s; will try again (said at most once a "
                        "minute)",
                        what, error->message);
}

/* Notes a successful broker call: ends an outage. */
void
sluice_worker__broker_ok(SluiceWorker *worker)
{
  gint64 since = 0;

  if (G_LIKELY(!g_atomic_int_get(&worker->outage)))
    return;
  g_mutex_lock(&worker->outage_lock);
  if (g_atomic_int_get(&worker->outage)) {
    g_atomic_int_set(&worker->outage, 0);
    since = worker->outage_since;
  }
  g_mutex_unlock(&worker->outage_lock);
  if (since > 0)
    sluice_log__message(G_LOG_LEVEL_MESSAGE,
                        "the broker is reachable again after %.1f s",
                        (g_get_monotonic_time() - since) / 1e6);
}

/* TRUE once per REPEAT_LOG_MS for @key (for notices that would repeat). */
gboolean
sluice_worker__first_in_a_while(SluiceWorker *worker, const gchar *key)
{
  gint64 now = g_get_monotonic_time();
  gboolean yes;
  gint64 *last;

  g_mutex_lock(&worker->outage_lock);
  last = g_hash_table_lookup(worker->repeated, key);
  if (last == NULL) {
    last = g_new0(gint64, 1);
    g_hash_table_insert(worker->repeated, g_strdup(key), last);
    yes = TRUE;
  } else {
    yes = now - *last >= REPEAT_LOG_MS * 1000;
  }
  if (yes)
    *last = now;
  g_mutex_unlock(&worker->outage_lock);
  return yes;
}

/* outage.c - the outage of one server (see outage-private.h).
 *
 * The first failure to reach a server starts an outage and logs exactly
 * one line, "lost connection to <url>: <reason>; retrying". During it, at
 * most one thread attempts a reconnection per backoff period (100 ms
 * doubling up to the pool's maximum); the others fail at once with
 * SLUICE_BROKER_ERROR_UNAVAILABLE (node.c) instead of piling up attempts,
 * and their caller waits that out. The first connection made ends the
 * outage with one more line. An error reply from a server that answers
 * (AUTH, OOM) is not an outage.
 *
 * Both lines are at debug level: a worker says once that its broker is
 * gone and once that it is back (with how long), and a producer gets the
 * error itself; a line per server on top would say it twice.
 */
#include "config.h"

#include "brokers/redis/net/log-private.h"
#include "brokers/redis/net/outage-private.h"

#define INITIAL_BACKOFF_MS 100

void
sluice_redis_outage__init(SluiceRedisOutage *outage, const gchar *display,
                          gint64 max_backoff_ms)
{
  g_mutex_init(&outage->lock);
  outage->display = display;
  outage->max_backoff_ms = MAX(max_backoff_ms, 1);
  outage->active = FALSE;
  outage->since_us = 0;
  outage->next_attempt_us = 0;
  outage->backoff_ms = MIN(INITIAL_BACKOFF_MS, outage->max_backoff_ms);
}

void
sluice_redis_outage__clear(SluiceRedisOutage *outage)
{
  g_mutex_clear(&outage->lock);
}

gboolean
sluice_redis_outage__may_try(SluiceRedisOutage *outage, gint64 *out_wait_ms)
{
  gint64 now;
  gboolean may = TRUE;

  g_mutex_lock(&outage->lock);
  if (outage->active) {
    now = g_get_monotonic_time();
    if (now < outage->next_attempt_us) {
      *out_wait_ms = (outage->next_attempt_us - now + 999) / 1000;
      may = FALSE;
    } else {
      /* This thread makes the attempt of this period; others wait
       * theirs. */
      outage->next_attempt_us = now + outage->backoff_ms * 1000;
    }
  }
  g_mutex_unlock(&outage->lock);
  return may;
}

gboolean
sluice_redis_outage__active(SluiceRedisOutage *outage)
{
  gboolean active;

  g_mutex_lock(&outage->lock);
  active = outage->active;
  g_mutex_unlock(&outage->lock);
  return active;
}

/* Called with the lock held. Returns TRUE when this failure starts an
 * outage: the caller then logs it, after unlocking (a log writer may take
 * locks of its own). */
static gboolean
begin_locked(SluiceRedisOutage *outage)
{
  if (outage->active)
    return FALSE;
  outage->active = TRUE;
  outage->since_us = g_get_monotonic_time();
  outage->backoff_ms = MIN(INITIAL_BACKOFF_MS, outage->max_backoff_ms);
  return TRUE;
}

static void
log_lost(SluiceRedisOutage *outage, const gchar *reason)
{
  sluice_redis_net__log(G_LOG_LEVEL_DEBUG,
                        "lost connection to %s: %s; retrying", outage->display,
                        reason);
}

void
sluice_redis_outage__lost(SluiceRedisOutage *outage, const gchar *reason)
{
  gboolean began;

  g_mutex_lock(&outage->lock);
  began = begin_locked(outage);
  outage->next_attempt_us = g_get_monotonic_time();
  g_mutex_unlock(&outage->lock);
  if (began)
    log_lost(outage, reason);
}

void
sluice_redis_outage__failed(SluiceRedisOutage *outage, const gchar *reason)
{
  gboolean began;

  g_mutex_lock(&outage->lock);
  began = begin_locked(outage);
  outage->next_attempt_us = g_get_monotonic_time() + outage->backoff_ms * 1000;
  outage->backoff_ms = MIN(outage->backoff_ms * 2, outage->max_backoff_ms);
  g_mutex_unlock(&outage->lock);
  if (began)
    log_lost(outage, reason);
}

void
sluice_redis_outage__ended(SluiceRedisOutage *outage)
{
  gint64 since = 0;
  gboolean was_out;

  g_mutex_lock(&outage->lock);
  was_out = outage->active;
  if (was_out)
    since = outage->since_us;
  outage->active = FALSE;
  outage->next_attempt_us = 0;
  outage->backoff_ms = MIN(INITIAL_BACKOFF_MS, outage->max_backoff_ms);
  g_mutex_unlock(&outage->lock);
  if (was_out)
    sluice_redis_net__log(
        G_LOG_LEVEL_DEBUG,
        "connection to %s is back after %" G_GINT64_FORMAT " ms",
        outage->display, (g_get_monotonic_time() - since) / 1000);
}

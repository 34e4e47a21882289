/* web-rates.c - the dashboard's processed/failed history: an in-memory
 * ring of the last hour of samples, kept by the `sluice web` process.
 *
 * The broker keeps no history of its own; what it has is each live
 * worker's counts since that worker started (announced with its
 * heartbeat, read by sluice_client_get_stats()). A sample is the growth
 * of those counts since the previous sample, worker by worker: a worker
 * that stopped meanwhile takes its counts with it (they are not
 * subtracted), and one that started after the first sample brings all of
 * its own (one that started before and is seen only later brings none:
 * they may predate the dashboard). So
 * the history starts when `sluice web` starts, and loses what a worker
 * finished between its last announcement and its end.
 *
 * "Processed" counts every attempt that ran to an end, "failed" the ones
 * that failed (whether a retry followed or not): a worker's announced
 * `failed` is its failed attempts, of which `retried` and most of
 * `dead_lettered` are outcomes, so neither is added again. Dead letters
 * that never ran (expired, unknown task name) are not attempts. A point holds
 * the counts and the time they took, not a rate: the page divides, and
 * the JSON writer needs no floating-point numbers.
 */
#include "config.h"

#include "cli/web.h"

#define HOUR_MS (3600 * 1000)
/* Bounds the ring whatever the interval (--sample-interval 1ms). */
#define MAX_POINTS 36000

typedef struct {
  gint64 at_ms;
  gint64 span_ms;
  guint64 processed;
  guint64 failed;
} Point;

typedef struct {
  guint64 processed;
  guint64 failed;
} Counts;

struct _WebRates {
  Point *ring;
  guint capacity;
  guint start; /* the oldest point */
  guint len;
  GHashTable *last; /* worker id -> Counts at the previous sample */
  gint64 first_ms;  /* the baseline; 0 = none yet */
  gint64 last_ms;
  gint64 interval_ms;
};

WebRates *
web_rates_new(gint64 interval_ms)
{
  WebRates *rates = g_new0(WebRates, 1);
  gint64 wanted = HOUR_MS / MAX(interval_ms, 1) + 1;

  rates->capacity = (guint)CLAMP(wanted, 2, MAX_POINTS);
  rates->ring = g_new0(Point, rates->capacity);
  rates->last = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  rates->interval_ms = interval_ms;
  return rates;
}

void
web_rates_free(WebRates *rates)
{
  if (rates == NULL)
    return;
  g_free(rates->ring);
  g_hash_table_unref(rates->last);
  g_free(rates);
}

static void
push(WebRates *rates, const Point *p)
{
  if (rates->len == rates->capacity) {
    rates->start = (rates->start + 1) % rates->capacity;
    rates->len--;
  }
  rates->ring[(rates->start + rates->len) % rates->capacity] = *p;
  rates->len++;
}

void
web_rates_sample(WebRates *rates, const SluiceBrokerStats *stats, gint64 now_ms)
{
  GHashTable *seen =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  Point p = {now_ms, now_ms - rates->last_ms, 0, 0};

  for (guint i = 0; i < stats->workers->len; i++) {
    const SluiceWorkerInfo *w = stats->workers->pdata[i];
    Counts *now = g_new0(Counts, 1);
    const Counts *before = g_hash_table_lookup(rates->last, w->id);

    now->failed = w->failed;
    now->processed = w->succeeded + w->failed;
    if (before != NULL && now->processed >= before->processed &&
        now->failed >= before->failed) {
      p.processed += now->processed - before->processed;
      p.failed += now->failed - before->failed;
    } else if (before == NULL && rates->first_ms > 0 &&
               w->started_at_ms >= rates->first_ms) {
      /* Started after the baseline (seen only now, as its first
       * announcement may come after a sample): all it did is new. */
      p.processed += now->processed;
      p.failed += now->failed;
    }
    g_hash_table_replace(seen, g_strdup(w->id), now);
  }
  /* Workers gone since the last sample are forgotten with it. */
  g_hash_table_unref(rates->last);
  rates->last = g_steal_pointer(&seen);
  if (rates->first_ms > 0 && p.span_ms > 0)
    push(rates, &p);
  if (rates->first_ms == 0)
    rates->first_ms = now_ms;
  rates->last_ms = now_ms;
  /* Only the last hour is kept, whatever the ring could hold. */
  while (rates->len > 0 && rates->ring[rates->start].at_ms < now_ms - HOUR_MS) {
    rates->start = (rates->start + 1) % rates->capacity;
    rates->len--;
  }
}

void
web_rates_to_json(const WebRates *rates, CliJson *json)
{
  cli_json_begin_object(json);
  cli_json_key(json, "interval_ms");
  cli_json_int(json, rates->interval_ms);
  cli_json_key(json, "points");
  cli_json_begin_array(json);
  for (guint i = 0; i < rates->len; i++) {
    const Point *p = &rates->ring[(rates->start + i) % rates->capacity];
    cli_json_begin_object(json);
    cli_json_key(json, "at");
    cli_json_int(json, p->at_ms);
    cli_json_key(json, "span_ms");
    cli_json_int(json, p->span_ms);
    cli_json_key(json, "processed");
    cli_json_int(json, (gint64)p->processed);
    cli_json_key(json, "failed");
    cli_json_int(json, (gint64)p->failed);
    cli_json_end_object(json);
  }
  cli_json_end_array(json);
  cli_json_end_object(json);
}

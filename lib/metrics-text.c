/* metrics-text.c - the Prometheus text exposition format (version 0.0.4)
 * of a worker's metrics and of a namespace's stats (sluice-metrics.h).
 *
 * Every family is written with its HELP and TYPE lines and then all its
 * samples, together, as the format requires; label values are escaped
 * (backslash, double quote, newline), numbers are written without the
 * locale (a comma as decimal point would break every parser). Families
 * are listed in docs/observability.md: change both together.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "lib/sluice-private.h"

static void
family(GString *out, const gchar *name, const gchar *type, const gchar *help)
{
  g_string_append_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
                         type);
}

static void
append_label(GString *out, const gchar *name, const gchar *value)
{
  if (out->len > 0 && out->str[out->len - 1] != '{')
    g_string_append_c(out, ',');
  /* Names come from the registry and the broker; the format wants UTF-8. */
  g_autofree gchar *valid = g_utf8_make_valid(value, -1);

  g_string_append_printf(out, "%s=\"", name);
  for (const gchar *c = valid; *c != '\0'; c++) {
    if (*c == '\\')
      g_string_append(out, "\\\\");
    else if (*c == '"')
      g_string_append(out, "\\\"");
    else if (*c == '\n')
      g_string_append(out, "\\n");
    else
      g_string_append_c(out, *c);
  }
  g_string_append_c(out, '"');
}

/* "{task=\"...\",queue=\"...\"" without the closing brace, so that a
 * caller can add a label. */
static gchar *open_labels(const gchar *first_name, ...) G_GNUC_NULL_TERMINATED;
static gchar *
open_labels(const gchar *first_name, ...)
{
  GString *out = g_string_new("{");
  va_list ap;

  va_start(ap, first_name);
  for (const gchar *name = first_name; name != NULL;
       name = va_arg(ap, const gchar *))
    append_label(out, name, va_arg(ap, const gchar *));
  va_end(ap);
  return g_string_free(out, FALSE);
}

static void
sample(GString *out, const gchar *name, const gchar *labels, guint64 value)
{
  g_string_append_printf(out, "%s%s%s %" G_GUINT64_FORMAT "\n", name,
                         labels != NULL ? labels : "",
                         labels != NULL ? "}" : "", value);
}

static void
sample_signed(GString *out, const gchar *name, const gchar *labels,
              gint64 value)
{
  g_string_append_printf(out, "%s%s%s %" G_GINT64_FORMAT "\n", name,
                         labels != NULL ? labels : "",
                         labels != NULL ? "}" : "", value);
}

/* The shortest form that reads back as the same number, as Prometheus's
 * own clients write it: 1e-05, not 1.0000000000000001e-05 (which
 * g_ascii_dtostr(), always 17 digits, would write). */
static const gchar *
shortest(gchar text[G_ASCII_DTOSTR_BUF_SIZE], gdouble value)
{
  for (const gchar *const *format =
           (const gchar *const[]){"%.15g", "%.16g", "%.17g", NULL};
       *format != NULL; format++) {
    g_ascii_formatd(text, G_ASCII_DTOSTR_BUF_SIZE, *format, value);
    if (g_ascii_strtod(text, NULL) == value)
      break;
  }
  return text;
}

static void
sample_double(GString *out, const gchar *name, const gchar *labels,
              gdouble value)
{
  gchar text[G_ASCII_DTOSTR_BUF_SIZE];

  g_string_append_printf(out, "%s%s%s %s\n", name, labels != NULL ? labels : "",
                         labels != NULL ? "}" : "", shortest(text, value));
}

/* ---- A worker ------------------------------------------------------------ */

typedef guint64 (*CounterOf)(const SluiceTaskMetrics *t);

#define COUNTER_OF(field)                                                      \
  static guint64 counter_##field(const SluiceTaskMetrics *t)                   \
  {                                                                            \
    return t->field;                                                           \
  }
COUNTER_OF(started)
COUNTER_OF(succeeded)
COUNTER_OF(failed)
COUNTER_OF(retried)
COUNTER_OF(cancelled)
COUNTER_OF(released)
COUNTER_OF(deferred)

static const struct {
  const gchar *name;
  CounterOf of;
  const gchar *help;
} task_counters[] = {
    {"sluice_worker_tasks_started_total", counter_started,
     "Task functions started."},
    {"sluice_worker_tasks_succeeded_total", counter_succeeded,
     "Tasks settled as succeeded."},
    {"sluice_worker_tasks_failed_total", counter_failed,
     "Attempts that failed (an error, a timeout, a lost child process), "
     "retried or not."},
    {"sluice_worker_tasks_retried_total", counter_retried,
     "Failed attempts put back on the schedule for another attempt."},
    {"sluice_worker_tasks_cancelled_total", counter_cancelled,
     "Tasks revoked before or while running."},
    {"sluice_worker_tasks_released_total", counter_released,
     "Deliveries given back by a stop, for another worker to run."},
    {"sluice_worker_tasks_deferred_total", counter_deferred,
     "Deliveries deferred because no task of their name is registered."},
};

static int
compare_names(const void *a, const void *b)
{
  return strcmp(*(const gchar *const *)a, *(const gchar *const *)b);
}

/* Returns: (transfer container): @table's keys, sorted. */
static const gchar **
sorted_keys(GHashTable *table)
{
  guint n = 0;
  const gchar **keys =
      (const gchar **)g_hash_table_get_keys_as_array(table, &n);

  qsort(keys, n, sizeof *keys, compare_names);
  return keys;
}

static void
histogram(GString *out, const gchar *name, const gchar *help,
          gchar *const *labels, const SluiceWorkerMetrics *m, gsize offset)
{
  g_autofree gchar *bucket = g_strconcat(name, "_bucket", NULL);
  g_autofree gchar *sum = g_strconcat(name, "_sum", NULL);
  g_autofree gchar *count = g_strconcat(name, "_count", NULL);

  family(out, name, "histogram", help);
  for (guint i = 0; i < m->tasks->len; i++) {
    const SluiceHistogram *h =
        (const SluiceHistogram *)((const gchar *)m->tasks->pdata[i] + offset);
    guint64 cumulative = 0;

    for (guint b = 0; b <= h->n_bounds; b++) {
      g_autoptr(GString) le = g_string_new(labels[i]);
      gchar bound[G_ASCII_DTOSTR_BUF_SIZE];

      cumulative += h->buckets[b];
      append_label(le, "le",
                   b < h->n_bounds ? shortest(bound, h->bounds[b]) : "+Inf");
      sample(out, bucket, le->str, cumulative);
    }
    sample_double(out, sum, labels[i], h->sum);
    sample(out, count, labels[i], h->count);
  }
}

gchar *
sluice_worker_metrics_to_prometheus(const SluiceWorkerMetrics *m)
{
  GString *out;
  g_auto(GStrv) labels = NULL;
  g_autofree gchar *info = NULL;

  g_return_val_if_fail(m != NULL && m->tasks != NULL, NULL);
  out = g_string_sized_new(4096 + m->tasks->len * 4096);
  labels = g_new0(gchar *, m->tasks->len + 1);
  for (guint i = 0; i < m->tasks->len; i++) {
    const SluiceTaskMetrics *t = m->tasks->pdata[i];
    labels[i] = open_labels("task", t->task, "queue", t->queue, NULL);
  }

  family(out, "sluice_worker_info", "gauge",
         "The worker's id and broker, as labels; always 1.");
  info = open_labels("worker_id", m->worker_id != NULL ? m->worker_id : "",
                     "broker", m->broker != NULL ? m->broker : "", NULL);
  sample(out, "sluice_worker_info", info, 1);
  family(out, "sluice_worker_start_time_seconds", "gauge",
         "When the worker started, in seconds since the epoch (0 before).");
  sample_double(out, "sluice_worker_start_time_seconds", NULL,
                m->started_at_ms / 1000.0);
  family(out, "sluice_worker_slots", "gauge",
         "Executor slots: task functions that may run at once.");
  sample(out, "sluice_worker_slots", NULL, m->concurrency);
  family(out, "sluice_worker_tasks_running", "gauge",
         "Task functions running now.");
  sample(out, "sluice_worker_tasks_running", NULL, m->running);
  family(out, "sluice_worker_tasks_held", "gauge",
         "Deliveries fetched and not yet settled, running ones included.");
  sample(out, "sluice_worker_tasks_held", NULL, m->held);
  family(out, "sluice_worker_tasks_prefetched", "gauge",
         "Deliveries fetched and waiting for an executor.");
  sample(out, "sluice_worker_tasks_prefetched", NULL, m->prefetched);
  family(out, "sluice_worker_broker_up", "gauge",
         "1 while the broker is reachable, 0 during an outage.");
  sample(out, "sluice_worker_broker_up", NULL, m->broker_reachable ? 1 : 0);
  family(out, "sluice_worker_broker_errors_total", "counter",
         "Broker calls that failed, of any kind.");
  sample(out, "sluice_worker_broker_errors_total", NULL, m->broker_errors);
  family(out, "sluice_worker_broker_outages_total", "counter",
         "Times the broker became unreachable.");
  sample(out, "sluice_worker_broker_outages_total", NULL, m->broker_outages);
  family(out, "sluice_worker_lease_renewals_lost_total", "counter",
         "Times the worker's lease could not be renewed in time, so peers "
         "may take over what it held.");
  sample(out, "sluice_worker_lease_renewals_lost_total", NULL,
         m->stats.leases_lost);
  family(out, "sluice_worker_stale_settles_total", "counter",
         "Settlements the broker refused: another worker owned the delivery "
         "by then.");
  sample(out, "sluice_worker_stale_settles_total", NULL,
         m->stats.stale_settles);
  family(out, "sluice_worker_tasks_timed_out_total", "counter",
         "Tasks that overran their timeout.");
  sample(out, "sluice_worker_tasks_timed_out_total", NULL, m->stats.timed_out);
  family(out, "sluice_worker_reclaimed_total", "counter",
         "Deliveries taken over from dead or stalled workers.");
  sample(out, "sluice_worker_reclaimed_total", NULL, m->stats.reclaimed);
  family(out, "sluice_worker_late_results_discarded_total", "counter",
         "Results of tasks that returned after their timeout or their "
         "release.");
  sample(out, "sluice_worker_late_results_discarded_total", NULL,
         m->stats.late_results_discarded);
  family(out, "sluice_worker_children_started_total", "counter",
         "Process isolation: child processes started.");
  sample(out, "sluice_worker_children_started_total", NULL,
         m->stats.children_started);
  family(out, "sluice_worker_children_lost_total", "counter",
         "Process isolation: children that died or were killed under a "
         "task.");
  sample(out, "sluice_worker_children_lost_total", NULL,
         m->stats.children_lost);

  for (guint f = 0; f < G_N_ELEMENTS(task_counters); f++) {
    family(out, task_counters[f].name, "counter", task_counters[f].help);
    for (guint i = 0; i < m->tasks->len; i++)
      sample(out, task_counters[f].name, labels[i],
             task_counters[f].of(m->tasks->pdata[i]));
  }
  family(out, "sluice_worker_tasks_dead_lettered_total", "counter",
         "Deliveries buried in the dead-letter queue, by reason.");
  for (guint i = 0; i < m->tasks->len; i++) {
    const SluiceTaskMetrics *t = m->tasks->pdata[i];
    g_autofree const gchar **reasons = sorted_keys(t->dead_lettered_by_reason);

    for (guint r = 0; reasons[r] != NULL; r++) {
      g_autoptr(GString) l = g_string_new(labels[i]);
      append_label(l, "reason", reasons[r]);
      sample(out, "sluice_worker_tasks_dead_lettered_total", l->str,
             *(const guint64 *)g_hash_table_lookup(t->dead_lettered_by_reason,
                                                   reasons[r]));
    }
  }
  histogram(out, "sluice_worker_task_duration_seconds",
            "How long task functions ran, from their start to their return.",
            labels, m, G_STRUCT_OFFSET(SluiceTaskMetrics, duration));
  histogram(out, "sluice_worker_task_start_latency_seconds",
            "From when a task was ready (enqueued, or due) to its start.",
            labels, m, G_STRUCT_OFFSET(SluiceTaskMetrics, latency));
  return g_string_free(out, FALSE);
}

/* ---- A namespace --------------------------------------------------------- */

/* @table's counts by reason: every reason the core gives, 0 when there
 * are none (a series that exists from the start shows its first
 * increase), then any other the broker reports, then the rest of @total
 * as "(unknown)" (a broker that cannot tell every reason). */
static void
by_reason(GString *out, const gchar *name, GHashTable *table, gint64 total)
{
  /* Every reason of the library's list, in the order of their names. */
  g_autofree const gchar **known =
      g_memdup2(sluice_dead_letter_reasons(),
                (SLUICE_DLQ_N_REASONS + 1) * sizeof(gchar *));
  g_autofree const gchar **reasons = sorted_keys(table);
  gint64 told = 0;

  qsort(known, SLUICE_DLQ_N_REASONS, sizeof *known, compare_names);
  for (guint i = 0; known[i] != NULL; i++) {
    const gint64 *n = g_hash_table_lookup(table, known[i]);
    g_autofree gchar *l = open_labels("reason", known[i], NULL);
    told += n != NULL ? *n : 0;
    sample_signed(out, name, l, n != NULL ? *n : 0);
  }
  for (guint i = 0; reasons[i] != NULL; i++) {
    gint64 n = *(const gint64 *)g_hash_table_lookup(table, reasons[i]);
    g_autofree gchar *l = NULL;
    if (g_strv_contains((const gchar *const *)known, reasons[i]))
      continue;
    l = open_labels("reason", reasons[i], NULL);
    told += n;
    sample_signed(out, name, l, n);
  }
  if (total > told) {
    g_autofree gchar *l = open_labels("reason", "(unknown)", NULL);
    sample_signed(out, name, l, total - told);
  }
}

gchar *
sluice_broker_stats_to_prometheus(const SluiceBrokerStats *stats)
{
  GString *out;
  guint alive = 0;

  g_return_val_if_fail(stats != NULL, NULL);
  out = g_string_sized_new(2048);
  family(out, "sluice_queue_ready", "gauge",
         "Messages ready in a queue, waiting for a worker.");
  for (guint i = 0; i < stats->queues->len; i++) {
    const SluiceQueueStats *q = stats->queues->pdata[i];
    g_autofree gchar *l = open_labels("queue", q->name, NULL);
    sample_signed(out, "sluice_queue_ready", l, q->ready);
  }
  family(out, "sluice_scheduled", "gauge",
         "Messages waiting for a due time: delayed, retrying, deferred.");
  sample_signed(out, "sluice_scheduled", NULL, stats->scheduled);
  if (stats->in_flight >= 0) {
    family(out, "sluice_in_flight", "gauge",
           "Messages delivered to a worker and not yet settled.");
    sample_signed(out, "sluice_in_flight", NULL, stats->in_flight);
  }
  family(out, "sluice_dead_letters", "gauge",
         "Entries in the dead-letter queue, by reason.");
  by_reason(out, "sluice_dead_letters", stats->dead_letters_by_reason,
            stats->dead_letters);
  if (stats->dead_letters_dropped >= 0) {
    family(out, "sluice_dead_letters_dropped_total", "counter",
           "Dead letters dropped by the dead_letter_max cap, by reason.");
    by_reason(out, "sluice_dead_letters_dropped_total",
              stats->dead_letters_dropped_by_reason,
              stats->dead_letters_dropped);
  }
  for (guint i = 0; i < stats->workers->len; i++)
    if (((const SluiceWorkerInfo *)stats->workers->pdata[i])->alive)
      alive++;
  family(out, "sluice_workers_alive", "gauge",
         "Workers whose liveness has not lapsed.");
  sample(out, "sluice_workers_alive", NULL, alive);
  family(out, "sluice_workers_seen", "gauge",
         "Workers listed by the broker: alive, and lapsed ones it still "
         "remembers.");
  sample(out, "sluice_workers_seen", NULL, stats->workers->len);
  if (stats->stale_settles >= 0) {
    family(out, "sluice_stale_settles_total", "counter",
           "Settlements refused because another worker owned the delivery "
           "by then, in the whole namespace.");
    sample_signed(out, "sluice_stale_settles_total", NULL,
                  stats->stale_settles);
  }
  return g_string_free(out, FALSE);
}

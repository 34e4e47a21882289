/* cmd-stats.c - `sluice stats`: what is waiting, running and buried,
 * which queues are paused, and how each worker is doing (host, pid,
 * queues, tasks running, counts since it started, last heartbeat; a
 * worker whose liveness lapsed is shown dead for a while).
 *
 * Everything comes from one sluice_client_get_stats() call (one Lua script
 * on Redis, so the figures are one consistent snapshot; the paused queues
 * are read just after it). The broker
 * reports the scheduled and in-flight counts for the whole namespace, not
 * per queue; redis-fast cannot count in-flight tasks at all (a popped
 * message is no longer in Redis) and says so. The store's layout version
 * is read apart, without a broker (cli_layout_read(), cmd-migrate.c).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static int
compare_names(const void *a, const void *b)
{
  return strcmp(*(const gchar *const *)a, *(const gchar *const *)b);
}

/* Returns: (transfer container): the keys of @table in name order. */
static const gchar **
sorted_reasons(GHashTable *table)
{
  const gchar **keys =
      (const gchar **)g_hash_table_get_keys_as_array(table, NULL);

  qsort(keys, g_strv_length((gchar **)keys), sizeof *keys, compare_names);
  return keys;
}

static void
strv_json(CliJson *json, gchar **v)
{
  cli_json_begin_array(json);
  for (guint i = 0; v != NULL && v[i] != NULL; i++)
    cli_json_string(json, v[i]);
  cli_json_end_array(json);
}

/* How many concurrency keys `stats` lists at most. */
#define STATS_SLOT_KEYS 1000

static gint
compare_slot_keys(gconstpointer a, gconstpointer b)
{
  const SluiceSlotState *x = *(SluiceSlotState *const *)a;
  const SluiceSlotState *y = *(SluiceSlotState *const *)b;
  return strcmp(x->key, y->key);
}

static void
stats_json(const CliSettings *settings, const SluiceBrokerStats *stats,
           const gchar *const *reasons, GPtrArray *slots,
           const SluiceLayout *layout)
{
  g_autoptr(CliJson) json = cli_json_new();

  cli_json_begin_object(json);
  cli_json_key(json, "mode");
  cli_json_string(json, cli_mode_name(settings->mode));
  cli_json_key(json, "namespace");
  cli_json_string(json, settings->namespace_);
  /* null where it could not be read (a warning says why) */
  cli_json_key(json, "layout_version");
  if (layout != NULL)
    cli_json_int(json, layout->version);
  else
    cli_json_null(json);
  cli_json_key(json, "queues");
  cli_json_begin_array(json);
  for (guint i = 0; i < stats->queues->len; i++) {
    const SluiceQueueStats *q = stats->queues->pdata[i];
    cli_json_begin_object(json);
    cli_json_key(json, "name");
    cli_json_string(json, q->name);
    cli_json_key(json, "ready");
    cli_json_int(json, q->ready);
    cli_json_key(json, "paused");
    cli_json_bool(json, q->paused);
    cli_json_end_object(json);
  }
  cli_json_end_array(json);
  cli_json_key(json, "scheduled");
  cli_json_int(json, stats->scheduled);
  cli_json_key(json, "in_flight");
  if (stats->in_flight >= 0)
    cli_json_int(json, stats->in_flight);
  else
    cli_json_null(json);
  cli_json_key(json, "dead_letters");
  cli_json_int(json, stats->dead_letters);
  cli_json_key(json, "dead_letters_by_reason");
  cli_json_begin_object(json);
  for (guint i = 0; reasons[i] != NULL; i++) {
    cli_json_key(json, reasons[i]);
    cli_json_int(json, *(const gint64 *)g_hash_table_lookup(
                           stats->dead_letters_by_reason, reasons[i]));
  }
  cli_json_end_object(json);
  cli_json_key(json, "dead_letters_dropped");
  cli_json_int(json, MAX(stats->dead_letters_dropped, 0));
  cli_json_key(json, "dead_letters_dropped_by_reason");
  cli_json_begin_object(json);
  {
    g_autofree const gchar **dropped =
        sorted_reasons(stats->dead_letters_dropped_by_reason);
    for (guint i = 0; dropped[i] != NULL; i++) {
      cli_json_key(json, dropped[i]);
      cli_json_int(json,
                   *(const gint64 *)g_hash_table_lookup(
                       stats->dead_letters_dropped_by_reason, dropped[i]));
    }
  }
  cli_json_end_object(json);
  cli_json_key(json, "workers");
  cli_json_begin_array(json);
  for (guint i = 0; i < stats->workers->len; i++) {
    const SluiceWorkerInfo *w = stats->workers->pdata[i];
    cli_json_begin_object(json);
    cli_json_key(json, "id");
    cli_json_string(json, w->id);
    cli_json_key(json, "last_seen");
    cli_json_time(json, w->last_seen_ms);
    cli_json_key(json, "alive");
    cli_json_bool(json, w->alive);
    cli_json_key(json, "host");
    cli_json_string(json, w->host);
    cli_json_key(json, "pid");
    if (w->pid > 0)
      cli_json_int(json, w->pid);
    else
      cli_json_null(json);
    cli_json_key(json, "queues");
    strv_json(json, w->queues);
    cli_json_key(json, "tasks");
    strv_json(json, w->tasks);
    cli_json_key(json, "concurrency");
    cli_json_int(json, w->concurrency);
    cli_json_key(json, "running");
    cli_json_int(json, w->running);
    cli_json_key(json, "started_at");
    cli_json_time(json, w->started_at_ms);
    cli_json_key(json, "succeeded");
    cli_json_int(json, (gint64)w->succeeded);
    cli_json_key(json, "failed");
    cli_json_int(json, (gint64)w->failed);
    cli_json_key(json, "retried");
    cli_json_int(json, (gint64)w->retried);
    cli_json_key(json, "dead_lettered");
    cli_json_int(json, (gint64)w->dead_lettered);
    cli_json_key(json, "limits");
    strv_json(json, w->limits);
    cli_json_key(json, "events");
    cli_json_bool(json, w->events);
    cli_json_key(json, "running_tasks");
    cli_json_begin_array(json);
    for (guint k = 0; w->running_tasks != NULL && k < w->running_tasks->len;
         k++) {
      const SluiceRunningTask *t = w->running_tasks->pdata[k];
      cli_json_begin_object(json);
      cli_json_key(json, "id");
      cli_json_string(json, t->id);
      cli_json_key(json, "task");
      cli_json_string(json, t->task);
      cli_json_key(json, "queue");
      cli_json_string(json, t->queue);
      cli_json_key(json, "started_at");
      cli_json_time(json, t->started_at_ms);
      cli_json_end_object(json);
    }
    cli_json_end_array(json);
    cli_json_end_object(json);
  }
  cli_json_end_array(json);
  /* Concurrency keys with a holder or a waiter; null where the broker
   * cannot list them. */
  cli_json_key(json, "slots");
  if (slots == NULL) {
    cli_json_null(json);
  } else {
    cli_json_begin_array(json);
    for (guint i = 0; i < slots->len; i++) {
      const SluiceSlotState *s = slots->pdata[i];
      cli_json_begin_object(json);
      cli_json_key(json, "key");
      cli_json_string(json, s->key);
      cli_json_key(json, "holders");
      cli_json_begin_array(json);
      for (guint k = 0; k < s->holders->len; k++)
        cli_json_string(json, s->holders->pdata[k]);
      cli_json_end_array(json);
      cli_json_key(json, "waiting");
      cli_json_int(json, s->waiting);
      cli_json_end_object(json);
    }
    cli_json_end_array(json);
  }
  cli_json_end_object(json);
  cli_json_print(json);
}

static void
stats_table(const CliSettings *settings, const SluiceBrokerStats *stats,
            const gchar *const *reasons, GPtrArray *slots,
            const SluiceLayout *layout)
{
  gint64 now = g_get_real_time() / 1000;
  g_autofree gchar *scheduled =
      g_strdup_printf("%" G_GINT64_FORMAT, stats->scheduled);
  g_autofree gchar *in_flight =
      stats->in_flight >= 0
          ? g_strdup_printf("%" G_GINT64_FORMAT, stats->in_flight)
          : g_strdup_printf("unknown (%s mode cannot tell)",
                            cli_mode_name(settings->mode));
  g_autofree gchar *dead =
      g_strdup_printf("%" G_GINT64_FORMAT, stats->dead_letters);

  if (stats->queues->len == 0) {
    printf("no queues yet (nothing was enqueued in namespace %s)\n",
           settings->namespace_);
  } else {
    const gchar *header[] = {"QUEUE", "READY", "STATUS", NULL};
    g_autoptr(CliTable) table = cli_table_new(header, 3);
    for (guint i = 0; i < stats->queues->len; i++) {
      const SluiceQueueStats *q = stats->queues->pdata[i];
      g_autofree gchar *ready = g_strdup_printf("%" G_GINT64_FORMAT, q->ready);
      cli_table_add(table, q->name, ready, q->paused ? "paused" : "active");
    }
    cli_table_print(table);
  }
  printf("\n");
  {
    g_autoptr(CliTable) table = cli_table_new(NULL, 2);
    cli_table_add(table, "scheduled", scheduled);
    cli_table_add(table, "in flight", in_flight);
    cli_table_add(table, "dead letters", dead);
    for (guint i = 0; reasons[i] != NULL; i++) {
      g_autofree gchar *label = g_strdup_printf("  %s", reasons[i]);
      g_autofree gchar *n = g_strdup_printf(
          "%" G_GINT64_FORMAT, *(const gint64 *)g_hash_table_lookup(
                                   stats->dead_letters_by_reason, reasons[i]));
      cli_table_add(table, label, n);
    }
    if (stats->dead_letters_dropped > 0) {
      g_autofree const gchar **dropped =
          sorted_reasons(stats->dead_letters_dropped_by_reason);
      g_autofree gchar *n =
          g_strdup_printf("%" G_GINT64_FORMAT, stats->dead_letters_dropped);
      cli_table_add(table, "dropped by the cap", n);
      for (guint i = 0; dropped[i] != NULL; i++) {
        g_autofree gchar *label = g_strdup_printf("  %s", dropped[i]);
        g_autofree gchar *m = g_strdup_printf(
            "%" G_GINT64_FORMAT,
            *(const gint64 *)g_hash_table_lookup(
                stats->dead_letters_dropped_by_reason, dropped[i]));
        cli_table_add(table, label, m);
      }
    }
    if (layout != NULL) {
      g_autofree gchar *version = g_strdup_printf(
          "%u%s", layout->version,
          layout->version > layout->current ? " (newer than this sluice's)"
          : !layout->recorded               ? " (not recorded yet)"
                                            : "");
      cli_table_add(table, "layout version", version);
    }
    cli_table_print(table);
  }
  printf("\n");
  if (stats->workers->len == 0) {
    printf("no workers alive\n");
  } else {
    const gchar *header[] = {"WORKER",  "STATUS",         "HOST",      "PID",
                             "QUEUES",  "RUNNING",        "SUCCEEDED", "FAILED",
                             "RETRIED", "LAST HEARTBEAT", "AGE",       "TASKS",
                             NULL};
    g_autoptr(CliTable) table = cli_table_new(header, 12);
    for (guint i = 0; i < stats->workers->len; i++) {
      const SluiceWorkerInfo *w = stats->workers->pdata[i];
      g_autofree gchar *seen = cli_format_time(w->last_seen_ms);
      g_autofree gchar *age = cli_format_age(w->last_seen_ms, now);
      g_autofree gchar *tasks =
          w->tasks != NULL ? g_strjoinv(",", w->tasks) : g_strdup("-");
      g_autofree gchar *queues =
          w->queues != NULL ? g_strjoinv(",", w->queues) : NULL;
      g_autofree gchar *pid = w->pid > 0 ? g_strdup_printf("%d", w->pid) : NULL;
      /* Without an announcement (a lapsed worker) the counts are unknown. */
      g_autofree gchar *running =
          w->info != NULL ? g_strdup_printf("%u/%u", w->running, w->concurrency)
                          : NULL;
      g_autofree gchar *ok =
          w->info != NULL ? g_strdup_printf("%" G_GUINT64_FORMAT, w->succeeded)
                          : NULL;
      g_autofree gchar *failed =
          w->info != NULL ? g_strdup_printf("%" G_GUINT64_FORMAT, w->failed)
                          : NULL;
      g_autofree gchar *retried =
          w->info != NULL ? g_strdup_printf("%" G_GUINT64_FORMAT, w->retried)
                          : NULL;
      cli_table_add(table, w->id, w->alive ? "alive" : "dead", w->host, pid,
                    queues, running, ok, failed, retried, seen, age, tasks);
    }
    cli_table_print(table);
    /* The limits each live worker runs with: workers of one queue should
     * agree, and this is where an operator sees whether they do. */
    for (guint i = 0; i < stats->workers->len; i++) {
      const SluiceWorkerInfo *w = stats->workers->pdata[i];
      if (!w->alive || w->limits == NULL || w->limits[0] == NULL)
        continue;
      printf("\nLimits of %s:\n", w->id);
      for (guint k = 0; w->limits[k] != NULL; k++)
        printf("  %s\n", w->limits[k]);
    }
  }
  if (slots != NULL && slots->len > 0) {
    const gchar *header[] = {"CONCURRENCY KEY", "HOLDING", "WAITING", "HOLDERS",
                             NULL};
    g_autoptr(CliTable) table = cli_table_new(header, 4);

    printf("\n");
    for (guint i = 0; i < slots->len; i++) {
      const SluiceSlotState *s = slots->pdata[i];
      g_autofree gchar *holding = g_strdup_printf("%u", s->holders->len);
      g_autofree gchar *waiting = g_strdup_printf("%u", s->waiting);
      g_autoptr(GString) holders = g_string_new(NULL);
      for (guint k = 0; k < s->holders->len; k++)
        g_string_append_printf(holders, "%s%s", k > 0 ? "," : "",
                               (const gchar *)s->holders->pdata[k]);
      cli_table_add(table, s->key, holding, waiting,
                    holders->len > 0 ? holders->str : "-");
    }
    cli_table_print(table);
  }
}

int
cli_cmd_stats(int argc, char **argv)
{
  CliCommon common = {.read_only = TRUE}; /* it only reads */
  CliSettings settings = {0};
  g_auto(GStrv) queues = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autofree const gchar **reasons = NULL;
  g_autoptr(GPtrArray) slots = NULL;
  g_autoptr(GError) slots_error = NULL;
  g_autoptr(GError) layout_error = NULL;
  SluiceBrokerStats stats;
  SluiceLayout layout;
  gboolean have_stats = FALSE, have_layout = FALSE;
  int status = CLI_EXIT_OK;
  const GOptionEntry entries[] = {
      {"queue", 'q', 0, G_OPTION_ARG_STRING_ARRAY, &queues,
       "Only this queue (repeat it; default: every queue)", "Q"},
      {NULL}};

  if (!cli_parse_options(
          &common, CLI_OPTIONS_CONNECTION | CLI_OPTIONS_JSON, entries, "",
          "Show queue depths and which queues are paused, scheduled and "
          "in-flight tasks,\ndead letters by reason, and each worker: host, "
          "pid, queues, tasks running,\ncounts since it started and last "
          "heartbeat (dead once its liveness lapsed).",
          NULL, &argc, &argv, &error)) {
    status = cli_report(error);
    goto out;
  }
  if (argc > 1) {
    cli_usage_error(&error,
                    "unexpected argument “%s” (queues are given "
                    "with --queue)",
                    argv[1]);
    status = cli_report(error);
    goto out;
  }
  if ((client = cli_open_client(&common, &settings, &error)) == NULL ||
      !(have_stats = sluice_client_get_stats(
            client, (const gchar *const *)queues, &stats, &error))) {
    status = cli_report(error);
    goto out;
  }

  /* Reasons in a stable order, for tables and JSON alike. */
  reasons = (const gchar **)g_hash_table_get_keys_as_array(
      stats.dead_letters_by_reason, NULL);
  qsort(reasons, g_strv_length((gchar **)reasons), sizeof *reasons,
        compare_names);
  /* A broker that cannot list slots still has stats. */
  slots = sluice_client_list_slots(client, STATS_SLOT_KEYS, &slots_error);
  if (slots != NULL)
    g_ptr_array_sort(slots, compare_slot_keys);
  else if (!g_error_matches(slots_error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_UNSUPPORTED))
    fprintf(stderr, "%s: warning: cannot list concurrency slots: %s\n",
            g_get_prgname(), slots_error->message);
  have_layout = cli_layout_read(&settings, &layout, &layout_error);
  if (!have_layout)
    fprintf(stderr, "%s: warning: cannot read the layout version: %s\n",
            g_get_prgname(), layout_error->message);
  if (common.json)
    stats_json(&settings, &stats, reasons, slots, have_layout ? &layout : NULL);
  else
    stats_table(&settings, &stats, reasons, slots,
                have_layout ? &layout : NULL);
out:
  if (have_layout)
    sluice_layout_clear(&layout);
  if (have_stats)
    sluice_broker_stats_clear(&stats);
  cli_settings_clear(&settings);
  cli_common_clear(&common);
  return status;
}

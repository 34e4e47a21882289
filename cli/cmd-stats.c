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
 *
 * The stats are read and written as JSON by records.c, which writes the
 * dashboard's overview too: `--json` and /api/overview cannot drift.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static void
stats_json(const CliSettings *settings, const CliStats *stats)
{
  g_autoptr(CliJson) json = cli_json_new();

  cli_json_begin_object(json);
  cli_stats_fields_to_json(json, settings, stats, g_get_real_time() / 1000);
  cli_json_end_object(json);
  cli_json_print(json);
}

static void
stats_table(const CliSettings *settings, const CliStats *cs,
            const SluiceLayout *layout)
{
  const SluiceBrokerStats *stats = &cs->stats;
  GPtrArray *slots = cs->slots;
  g_autofree const gchar **reasons =
      cli_sorted_keys(stats->dead_letters_by_reason);
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
          cli_sorted_keys(stats->dead_letters_dropped_by_reason);
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
  g_autoptr(GError) slots_error = NULL;
  g_autoptr(SluiceClient) client = NULL;
  CliStats stats = {0};
  g_autoptr(GError) layout_error = NULL;
  SluiceLayout layout;
  gboolean have_layout = FALSE;
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
      !cli_stats_read(client, (const gchar *const *)queues, &stats,
                      &slots_error, &error)) {
    status = cli_report(error);
    goto out;
  }
  if (slots_error != NULL)
    fprintf(stderr, "%s: warning: cannot list concurrency slots: %s\n",
            g_get_prgname(), slots_error->message);
  have_layout = cli_layout_read(&settings, &layout, &layout_error);
  if (!have_layout)
    fprintf(stderr, "%s: warning: cannot read the layout version: %s\n",
            g_get_prgname(), layout_error->message);
  stats.layout_version = have_layout ? (gint64)layout.version : -1;
  if (common.json)
    stats_json(&settings, &stats);
  else
    stats_table(&settings, &stats, have_layout ? &layout : NULL);
out:
  if (have_layout)
    sluice_layout_clear(&layout);
  cli_stats_clear(&stats);
  cli_settings_clear(&settings);
  cli_common_clear(&common);
  return status;
}

/* periodic-config.c - periodic schedules written in the key file, so that
 * `sluice worker` runs them without any C:
 *
 *   [periodic "nightly-report"]
 *   task = reports.nightly
 *   args = {"format": "pdf"}
 *   queue = reports
 *   cron = 0 3 * * *
 *   timezone = Europe/Berlin
 *   missed = once
 *   overlap = skip
 *
 * One group per schedule, named `periodic "NAME"` (NAME is the schedule's
 * name, the key of its compare-and-set: workers sharing a file, or files
 * naming a schedule alike, dispatch each occurrence once; a key file
 * merges groups of one name, so names are unique). Every value is
 * checked here, and the schedule itself by the library, so that a worker
 * with a mistake in its file refuses to start instead of skipping it.
 */
#include "config.h"

#include <string.h>

#include "cli/cli.h"

#define GROUP_PREFIX "periodic \""

static const gchar *const known_keys[] = {
    "task",     "args",   "queue",      "interval", "cron",
    "timezone", "missed", "missed-max", "overlap",  NULL};

static void
periodic_free(gpointer data)
{
  CliPeriodic *p = data;

  g_free(p->group);
  g_free(p->schedule);
  g_free(p->name);
  g_free(p->task);
  g_free(p->queue);
  g_free(p->cron);
  g_free(p->timezone);
  if (p->args != NULL)
    g_bytes_unref(p->args);
  g_free(p);
}

/* A key of @group, or NULL. */
static gchar *
value_of(const CliSettings *settings, const gchar *group, const gchar *key)
{
  return g_key_file_get_string(settings->keyfile, group, key, NULL);
}

/* The schedule's name from a group name `periodic "NAME"`, or NULL. */
static gchar *
name_of_group(const gchar *group)
{
  gsize len = strlen(group);

  if (!g_str_has_prefix(group, GROUP_PREFIX) ||
      len < strlen(GROUP_PREFIX) + 2 || group[len - 1] != '"')
    return NULL;
  return g_strndup(group + strlen(GROUP_PREFIX),
                   len - strlen(GROUP_PREFIX) - 1);
}

static gboolean
load_one(const CliSettings *settings, const gchar *group, CliPeriodic *p,
         GError **error)
{
  const gchar *where = settings->config_path;
  g_autofree gchar *args = NULL;
  g_autofree gchar *interval = NULL;
  g_autofree gchar *missed = NULL;
  g_autofree gchar *missed_max = NULL;
  g_autofree gchar *overlap = NULL;
  g_autoptr(GError) local = NULL;
  gint64 next = 0;

  if (!cli_keyfile_check_keys(settings, group, known_keys, error))
    return FALSE;
  sluice_periodic_options_init(&p->options);
  p->options.name = p->name;
  p->task = value_of(settings, group, "task");
  if (p->task == NULL)
    return cli_usage_error(error,
                           "%s: [%s] has no task: add task = NAME (the task "
                           "each occurrence enqueues)",
                           where, group);
  p->options.task = p->task;
  p->queue = value_of(settings, group, "queue");
  p->options.queue = p->queue;
  p->cron = value_of(settings, group, "cron");
  p->options.cron = p->cron;
  p->timezone = value_of(settings, group, "timezone");
  p->options.timezone = p->timezone;

  if ((args = value_of(settings, group, "args")) != NULL) {
    p->args = sluice_args_from_json(args, -1, &local);
    if (p->args == NULL)
      return cli_usage_error(error, "%s: [%s] args: %s", where, group,
                             local->message);
    p->options.args = p->args;
  }
  if ((interval = value_of(settings, group, "interval")) != NULL) {
    g_autofree gchar *what = g_strdup_printf("%s: [%s] interval", where, group);
    if (!cli_parse_duration(what, interval, &p->options.interval_ms, error))
      return FALSE;
    if (p->options.interval_ms <= 0)
      return cli_usage_error(error, "%s: an interval must be longer than 0",
                             what);
  }
  if ((interval == NULL) == (p->cron == NULL))
    return cli_usage_error(error,
                           "%s: [%s] needs exactly one of interval = DURATION "
                           "(every that long, aligned to the epoch) or cron = "
                           "EXPRESSION",
                           where, group);
  if ((missed = value_of(settings, group, "missed")) != NULL) {
    if (g_strcmp0(missed, "skip") == 0)
      p->options.missed = SLUICE_MISSED_SKIP;
    else if (g_strcmp0(missed, "once") == 0)
      p->options.missed = SLUICE_MISSED_ONCE;
    else if (g_strcmp0(missed, "all") == 0)
      p->options.missed = SLUICE_MISSED_ALL;
    else
      return cli_usage_error(error,
                             "%s: [%s] missed: “%s” is not a missed-run "
                             "policy: skip (the default), once or all",
                             where, group, missed);
  }
  if ((missed_max = value_of(settings, group, "missed-max")) != NULL) {
    g_autofree gchar *what =
        g_strdup_printf("%s: [%s] missed-max", where, group);
    guint64 n;
    if (!cli_parse_count(what, missed_max, 1, 100000, &n, error))
      return FALSE;
    p->options.missed_max = (guint)n;
  }
  if ((overlap = value_of(settings, group, "overlap")) != NULL) {
    if (g_strcmp0(overlap, "allow") == 0)
      p->options.overlap = SLUICE_OVERLAP_ALLOW;
    else if (g_strcmp0(overlap, "skip") == 0)
      p->options.overlap = SLUICE_OVERLAP_SKIP;
    else
      return cli_usage_error(error,
                             "%s: [%s] overlap: “%s” is not an overlap "
                             "policy: allow (the default) or skip (while the "
                             "previous occurrence is queued or running)",
                             where, group, overlap);
  }
  /* The library's own checks: the cron expression, the zone, ... */
  if (!sluice_periodic_next_occurrence(&p->options, g_get_real_time() / 1000,
                                       &next, &local))
    return cli_usage_error(error, "%s: [%s]: %s", where, group, local->message);
  if (p->cron != NULL) {
    p->schedule = g_strdup_printf("cron %s in %s", p->cron,
                                  p->timezone != NULL ? p->timezone : "UTC");
  } else {
    g_autofree gchar *every = cli_format_duration(p->options.interval_ms);
    p->schedule = g_strdup_printf("every %s", every);
  }
  return TRUE;
}

gboolean
cli_periodic_load(const CliSettings *settings, GPtrArray **out, GError **error)
{
  g_autoptr(GPtrArray) all = g_ptr_array_new_with_free_func(periodic_free);
  g_auto(GStrv) groups = NULL;

  if (settings->keyfile != NULL)
    groups = g_key_file_get_groups(settings->keyfile, NULL);
  for (guint i = 0; groups != NULL && groups[i] != NULL; i++) {
    CliPeriodic *p;
    g_autofree gchar *name = NULL;

    if (!g_str_has_prefix(groups[i], "periodic"))
      continue;
    name = name_of_group(groups[i]);
    if (name == NULL)
      return cli_usage_error(error,
                             "%s: group [%s] is not a periodic schedule: name "
                             "one [periodic \"NAME\"], with the name in "
                             "double quotes",
                             settings->config_path, groups[i]);
    p = g_new0(CliPeriodic, 1);
    p->group = g_strdup(groups[i]);
    p->name = g_steal_pointer(&name);
    g_ptr_array_add(all, p);
    if (!load_one(settings, groups[i], p, error))
      return FALSE;
  }
  *out = g_steal_pointer(&all);
  return TRUE;
}

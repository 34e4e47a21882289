/* cmd-worker.c - `sluice worker` runs the library's worker on the tasks of
 * one or more modules; `sluice run` runs one task in this process.
 *
 * `sluice worker` is sluice_worker_* and nothing more: the same fetcher,
 * executors, settler and housekeeping as any program embedding Sluice.
 * SIGTERM and SIGINT start the graceful stop (sluice_worker_handle_signals):
 * stop fetching, give back what has not started, wait up to
 * --shutdown-timeout for running tasks, cancel and give back the rest, and
 * exit 0. A second signal stops at once: what runs is cancelled and given
 * back without waiting, and the exit status is 1.
 *
 * Every worker setting comes from its option, else from the [worker]
 * group of the configuration file, else the library's default. Periodic
 * schedules come from the file's [periodic "NAME"] groups
 * (periodic-config.c). The backoff
 * options exist so that operators (and the tests) can shorten retries
 * without rebuilding the task module.
 *
 * `sluice run` is the one command the memory broker makes sense for: it
 * loads the modules, runs the task on an in-process worker with its
 * retries, prints the final record and exits. Nothing leaves the process.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "cli/cli.h"

#define GROUP_WORKER "worker"

static const gchar *const worker_keys[] = {"queues",
                                           "concurrency",
                                           "prefetch",
                                           "modules",
                                           "log-format",
                                           "max-attempts",
                                           "backoff",
                                           "backoff-max",
                                           "backoff-multiplier",
                                           "jitter",
                                           "shutdown-timeout",
                                           "visibility-timeout",
                                           "max-deliveries",
                                           "worker-id",
                                           "track-state",
                                           "events",
                                           "dead-letter-max",
                                           "fail-fast",
                                           "isolation",
                                           "hard-timeout",
                                           "cancel-grace",
                                           "max-tasks-per-child",
                                           "max-rss-per-child",
                                           "memory-limit-per-child",
                                           "metrics-listen",
                                           "rate-limit",
                                           "concurrency-limit",
                                           "weight",
                                           NULL};

/* The retry options `worker` and `run` share, as typed. */
typedef struct {
  gchar *max_attempts;
  gchar *backoff;
  gchar *backoff_max;
  gchar *backoff_multiplier;
  gboolean no_jitter;
} RetryArgs;

static void
retry_args_clear(RetryArgs *args)
{
  g_free(args->max_attempts);
  g_free(args->backoff);
  g_free(args->backoff_max);
  g_free(args->backoff_multiplier);
}

/* One setting being resolved: its value and how to name it in a message
 * (the option, or the file and key it came from). */
typedef struct {
  gchar *owned;
  gchar *what;
} Setting;

static void
setting_clear(Setting *s)
{
  g_clear_pointer(&s->owned, g_free);
  g_clear_pointer(&s->what, g_free);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Setting, setting_clear)

/* The value of a setting: @option if given, else the key @key of [worker]
 * in the configuration file, else NULL. Valid until the next call with
 * @s, or setting_clear(). */
static const gchar *
setting(Setting *s, const gchar *option, const CliSettings *settings,
        const gchar *key)
{
  setting_clear(s);
  if (option != NULL) {
    s->what = g_strconcat("--", key, NULL);
    return option;
  }
  if (settings == NULL || settings->keyfile == NULL)
    return NULL;
  s->owned = g_key_file_get_string(settings->keyfile, GROUP_WORKER, key, NULL);
  s->what =
      g_strdup_printf("%s: [%s] %s", settings->config_path, GROUP_WORKER, key);
  return s->owned;
}

/* A boolean of [worker] (absent = @fallback). */
static gboolean
setting_bool(const CliSettings *settings, const gchar *key, gboolean fallback,
             gboolean *out, GError **error)
{
  g_autoptr(GError) local = NULL;

  *out = fallback;
  if (settings == NULL || settings->keyfile == NULL ||
      !g_key_file_has_key(settings->keyfile, GROUP_WORKER, key, NULL))
    return TRUE;
  *out = g_key_file_get_boolean(settings->keyfile, GROUP_WORKER, key, &local);
  if (local != NULL)
    return cli_usage_error(error, "%s: [worker] %s: %s", settings->config_path,
                           key, local->message);
  return TRUE;
}

/* A list of [worker] (for queues and modules), or NULL. */
static gchar **
setting_list(const CliSettings *settings, const gchar *key)
{
  if (settings == NULL || settings->keyfile == NULL)
    return NULL;
  return g_key_file_get_string_list(settings->keyfile, GROUP_WORKER, key, NULL,
                                    NULL);
}

/* Fills @policy from the retry options (or the file). */
static gboolean
resolve_retry(const RetryArgs *args, const CliSettings *settings,
              SluiceRetryPolicy *policy, GError **error)
{
  g_auto(Setting) s = {0};
  const gchar *value;
  gboolean jitter;
  guint64 n;

  if ((value = setting(&s, args->max_attempts, settings, "max-attempts")) !=
      NULL) {
    if (!cli_parse_count(s.what, value, 1, 1000, &n, error))
      return FALSE;
    policy->max_attempts = (gint)n;
  }
  if ((value = setting(&s, args->backoff, settings, "backoff")) != NULL &&
      !cli_parse_duration(s.what, value, &policy->initial_backoff_ms, error))
    return FALSE;
  if ((value = setting(&s, args->backoff_max, settings, "backoff-max")) !=
          NULL &&
      !cli_parse_duration(s.what, value, &policy->max_backoff_ms, error))
    return FALSE;
  if ((value = setting(&s, args->backoff_multiplier, settings,
                       "backoff-multiplier")) != NULL) {
    gchar *end = NULL;
    gdouble x = g_ascii_strtod(value, &end);
    if (end == value || *end != '\0' || !isfinite(x) || x < 1.0 || x > 100.0)
      return cli_usage_error(error,
                             "%s: “%s” is not a number from 1 to 100 (e.g. 2 "
                             "or 1.5)",
                             s.what, value);
    policy->multiplier = x;
  }
  if (!setting_bool(settings, "jitter", TRUE, &jitter, error))
    return FALSE;
  if (args->no_jitter)
    jitter = FALSE;
  policy->jitter = jitter ? SLUICE_ON : SLUICE_OFF;
  return TRUE;
}

/* The retry options' entries, pointing into @args. */
static void
retry_entries(RetryArgs *args, GOptionEntry out[6])
{
  const GOptionEntry entries[] = {
      {"max-attempts", 0, 0, G_OPTION_ARG_STRING, &args->max_attempts,
       "Attempts per task unless the task or message says otherwise "
       "(default 3)",
       "N"},
      {"backoff", 0, 0, G_OPTION_ARG_STRING, &args->backoff,
       "Delay after the first failure (default 1500ms)", "DURATION"},
      {"backoff-max", 0, 0, G_OPTION_ARG_STRING, &args->backoff_max,
       "Longest delay between attempts (default 30s)", "DURATION"},
      {"backoff-multiplier", 0, 0, G_OPTION_ARG_STRING,
       &args->backoff_multiplier, "Growth of the delay per attempt (default 2)",
       "X"},
      {"no-jitter", 0, 0, G_OPTION_ARG_NONE, &args->no_jitter,
       "Exact delays instead of a random draw in [d/2, d]", NULL},
      {NULL}};

  G_STATIC_ASSERT(G_N_ELEMENTS(entries) == 6);
  memcpy(out, entries, sizeof entries);
}

/* Returns: (transfer full): @a's entries, then @b's, NULL-terminated. */
static GOptionEntry *
join_entries(const GOptionEntry *a, const GOptionEntry *b)
{
  GArray *all = g_array_new(TRUE, TRUE, sizeof(GOptionEntry));

  for (; a->long_name != NULL; a++)
    g_array_append_val(all, *a);
  for (; b->long_name != NULL; b++)
    g_array_append_val(all, *b);
  return (GOptionEntry *)(void *)g_array_free(all, FALSE);
}

/* Logs what the registry holds, so an operator sees which tasks a worker
 * serves. */
static gchar *
task_list(SluiceRegistry *registry)
{
  g_auto(GStrv) names = sluice_registry_list(registry);

  return g_strjoinv(", ", names);
}

/* ---- sluice worker ------------------------------------------------------- */

typedef struct {
  gchar **queues;
  gchar **modules;
  gchar *concurrency;
  gchar *prefetch;
  gchar *log_format;
  gboolean verbose;
  RetryArgs retry;
  gchar *shutdown_timeout;
  gchar *visibility_timeout;
  gchar *max_deliveries;
  gchar *worker_id;
  gboolean no_track_state;
  gboolean events;
  gchar *dead_letter_max;
  gboolean fail_fast;
  gboolean no_task_log;
  gchar *isolation;
  gchar *hard_timeout;
  gchar *cancel_grace;
  gchar *max_tasks_per_child;
  gchar *max_rss_per_child;
  gchar *memory_limit_per_child;
  gchar *metrics_listen;
  gchar **rate_limits;
  gchar **concurrency_limits;
  gchar **weights;
} WorkerArgs;

static void
worker_args_clear(WorkerArgs *args)
{
  g_strfreev(args->queues);
  g_strfreev(args->modules);
  g_free(args->concurrency);
  g_free(args->prefetch);
  g_free(args->log_format);
  retry_args_clear(&args->retry);
  g_free(args->shutdown_timeout);
  g_free(args->visibility_timeout);
  g_free(args->max_deliveries);
  g_free(args->worker_id);
  g_free(args->dead_letter_max);
  g_free(args->isolation);
  g_free(args->hard_timeout);
  g_free(args->cancel_grace);
  g_free(args->max_tasks_per_child);
  g_free(args->max_rss_per_child);
  g_free(args->memory_limit_per_child);
  g_free(args->metrics_listen);
  g_strfreev(args->rate_limits);
  g_strfreev(args->concurrency_limits);
  g_strfreev(args->weights);
}

/* The process-isolation settings: --isolation and the child limits. */
static gboolean
resolve_isolation(const WorkerArgs *args, const CliSettings *settings,
                  SluiceWorkerOptions *o, GError **error)
{
  g_auto(Setting) s = {0};
  const gchar *value;
  guint64 n;

  if ((value = setting(&s, args->isolation, settings, "isolation")) != NULL) {
    if (g_strcmp0(value, "thread") == 0)
      o->isolation = SLUICE_ISOLATION_THREAD;
    else if (g_strcmp0(value, "process") == 0)
      o->isolation = SLUICE_ISOLATION_PROCESS;
    else
      return cli_usage_error(error,
                             "%s: “%s” is not an isolation: thread (tasks "
                             "run on the worker's threads) or process "
                             "(each in a child process)",
                             s.what, value);
  }
  if ((value = setting(&s, args->hard_timeout, settings, "hard-timeout")) !=
          NULL &&
      !cli_parse_duration(s.what, value, &o->hard_timeout_ms, error))
    return FALSE;
  if ((value = setting(&s, args->cancel_grace, settings, "cancel-grace")) !=
          NULL &&
      !cli_parse_duration(s.what, value, &o->cancel_grace_ms, error))
    return FALSE;
  if ((value = setting(&s, args->max_tasks_per_child, settings,
                       "max-tasks-per-child")) != NULL) {
    if (!cli_parse_count(s.what, value, 0, G_MAXUINT32, &n, error))
      return FALSE;
    o->max_tasks_per_child = (guint)n;
  }
  if ((value = setting(&s, args->max_rss_per_child, settings,
                       "max-rss-per-child")) != NULL &&
      !cli_parse_size(s.what, value, &o->max_rss_per_child, error))
    return FALSE;
  if ((value = setting(&s, args->memory_limit_per_child, settings,
                       "memory-limit-per-child")) != NULL &&
      !cli_parse_size(s.what, value, &o->memory_limit_per_child, error))
    return FALSE;
  return TRUE;
}

/* Everything `sluice worker` resolved from its options and the file. */
typedef struct {
  SluiceWorkerOptions options;
  gchar **queues;   /* owned; options.queues points here */
  gchar **modules;  /* owned */
  gchar *worker_id; /* owned; options.worker_id points here */
  CliLogFormat log_format;
  guint dead_letter_max;
  gboolean fail_fast;
  GPtrArray *periodics; /* CliPeriodic*: the [periodic "NAME"] groups */
  GSocketAddress *metrics_listen; /* owned; NULL = no metrics endpoint */
  /* --rate-limit and --concurrency-limit: the arrays the options point
   * at, and the queue names they borrow. */
  GArray *rate_limits;        /* SluiceQueueRateLimit */
  GArray *concurrency_limits; /* SluiceQueueConcurrencyLimit */
  GPtrArray *limit_queues;    /* gchar*, owned */
  guint *weights;             /* --weight: one per queue, or NULL */
} WorkerPlan;

static void
worker_plan_clear(WorkerPlan *plan)
{
  g_strfreev(plan->queues);
  g_strfreev(plan->modules);
  g_free(plan->worker_id);
  g_clear_pointer(&plan->periodics, g_ptr_array_unref);
  g_clear_object(&plan->metrics_listen);
  g_clear_pointer(&plan->rate_limits, g_array_unref);
  g_clear_pointer(&plan->concurrency_limits, g_array_unref);
  g_clear_pointer(&plan->limit_queues, g_ptr_array_unref);
  g_clear_pointer(&plan->weights, g_free);
}

/* --weight QUEUE=W (repeatable): weighted fair queues over the worker's
 * queues; a queue named by none has weight 1. */
static gboolean
resolve_weights(WorkerArgs *args, const CliSettings *settings, WorkerPlan *plan,
                GError **error)
{
  g_auto(GStrv) from_file = setting_list(settings, "weight");
  gchar **given = args->weights != NULL ? args->weights : from_file;
  const gchar *what =
      args->weights != NULL ? "--weight" : "weight (from --config)";
  const gchar *const default_queues[] = {SLUICE_DEFAULT_QUEUE, NULL};
  const gchar *const *queues = plan->queues != NULL
                                   ? (const gchar *const *)plan->queues
                                   : default_queues;
  guint n = g_strv_length((gchar **)queues);

  if (given == NULL || given[0] == NULL)
    return TRUE;
  plan->weights = g_new(guint, n);
  for (guint q = 0; q < n; q++)
    plan->weights[q] = 1;
  for (guint i = 0; given[i] != NULL; i++) {
    const gchar *eq = strrchr(given[i], '=');
    g_autofree gchar *queue =
        eq != NULL ? g_strndup(given[i], eq - given[i]) : NULL;
    guint64 w;
    guint q;

    if (queue == NULL)
      return cli_usage_error(error,
                             "%s: “%s” is not QUEUE=WEIGHT (e.g. "
                             "interactive=3)",
                             what, given[i]);
    for (q = 0; q < n && g_strcmp0(queues[q], queue) != 0; q++)
      ;
    if (q == n)
      return cli_usage_error(error,
                             "%s: “%s” is not one of the worker's queues "
                             "(give it with --queue)",
                             what, queue);
    if (!cli_parse_count(what, eq + 1, 1, 1000000, &w, error))
      return FALSE;
    plan->weights[q] = (guint)w;
  }
  plan->options.queue_weights = plan->weights;
  return TRUE;
}

/* "QUEUE=COUNT/PERIOD[:BURST]" (--rate-limit) or "QUEUE=N"
 * (--concurrency-limit) into @plan's arrays, checked as the library checks
 * them. */
static gboolean
parse_queue_limit(WorkerPlan *plan, const gchar *what, const gchar *text,
                  gboolean rate, GError **error)
{
  const gchar *eq = strrchr(text, '=');
  g_autofree gchar *queue = eq != NULL ? g_strndup(text, eq - text) : NULL;
  g_auto(GStrv) spec = NULL;
  g_autoptr(GError) bad = NULL;
  guint64 n;

  if (queue == NULL || queue[0] == '\0')
    return cli_usage_error(error, "%s: “%s” names no queue: write %s", what,
                           text,
                           rate ? "QUEUE=COUNT/PERIOD[:BURST], e.g. "
                                  "emails=10/s or emails=10/1s:20"
                                : "QUEUE=N, e.g. renders=3");
  g_ptr_array_add(plan->limit_queues, queue);
  if (!rate) {
    SluiceQueueConcurrencyLimit limit = {.queue = g_steal_pointer(&queue)};

    if (!cli_parse_count(what, eq + 1, 1, G_MAXUINT32, &n, error))
      return FALSE;
    limit.limit.max = (guint)n;
    g_array_append_val(plan->concurrency_limits, limit);
    return TRUE;
  }
  {
    SluiceQueueRateLimit limit = {.queue = g_steal_pointer(&queue)};
    g_auto(GStrv) burst = g_strsplit(eq + 1, ":", 2);

    sluice_rate_limit_init(&limit.rate);
    spec = g_strsplit(burst[0], "/", 2);
    if (spec[0] == NULL || spec[1] == NULL)
      return cli_usage_error(error,
                             "%s: “%s” is not QUEUE=COUNT/PERIOD[:BURST] "
                             "(e.g. emails=10/s or emails=10/1s:20)",
                             what, text);
    if (!cli_parse_count(what, spec[0], 1, 1000000000, &n, error) ||
        !cli_parse_rate_period(what, spec[1], &limit.rate.period_ms, error))
      return FALSE;
    limit.rate.count = (gint64)n;
    if (burst[1] != NULL) {
      if (!cli_parse_count(what, burst[1], 1, 1000000, &n, error))
        return FALSE;
      limit.rate.burst = (gint64)n;
    }
    /* Checked here, so that the message names the option. */
    if (!sluice_rate_limit_validate(&limit.rate, &bad))
      return cli_usage_error(error, "%s: “%s”: %s", what, text, bad->message);
    g_array_append_val(plan->rate_limits, limit);
  }
  return TRUE;
}

/* --rate-limit and --concurrency-limit, each repeatable (the options
 * replace the file's lists of the same name). */
static gboolean
resolve_limits(WorkerArgs *args, const CliSettings *settings, WorkerPlan *plan,
               GError **error)
{
  g_auto(GStrv) rate_file = setting_list(settings, "rate-limit");
  g_auto(GStrv) conc_file = setting_list(settings, "concurrency-limit");
  gchar **rate = args->rate_limits != NULL ? args->rate_limits : rate_file;
  gchar **conc =
      args->concurrency_limits != NULL ? args->concurrency_limits : conc_file;
  const gchar *rate_what =
      args->rate_limits != NULL ? "--rate-limit" : "rate-limit (from --config)";
  const gchar *conc_what = args->concurrency_limits != NULL
                               ? "--concurrency-limit"
                               : "concurrency-limit (from --config)";

  plan->rate_limits = g_array_new(FALSE, TRUE, sizeof(SluiceQueueRateLimit));
  plan->concurrency_limits =
      g_array_new(FALSE, TRUE, sizeof(SluiceQueueConcurrencyLimit));
  plan->limit_queues = g_ptr_array_new_with_free_func(g_free);
  for (guint i = 0; rate != NULL && rate[i] != NULL; i++)
    if (!parse_queue_limit(plan, rate_what, rate[i], TRUE, error))
      return FALSE;
  for (guint i = 0; conc != NULL && conc[i] != NULL; i++)
    if (!parse_queue_limit(plan, conc_what, conc[i], FALSE, error))
      return FALSE;
  plan->options.queue_rate_limits =
      (const SluiceQueueRateLimit *)plan->rate_limits->data;
  plan->options.n_queue_rate_limits = plan->rate_limits->len;
  plan->options.queue_concurrency_limits =
      (const SluiceQueueConcurrencyLimit *)plan->concurrency_limits->data;
  plan->options.n_queue_concurrency_limits = plan->concurrency_limits->len;
  return TRUE;
}

static gboolean
resolve_worker(WorkerArgs *args, const CliSettings *settings, WorkerPlan *plan,
               GError **error)
{
  g_auto(Setting) s = {0};
  const gchar *value;
  guint64 n;
  gboolean track_state;

  memset(plan, 0, sizeof *plan);
  sluice_worker_options_init(&plan->options);
  if (!cli_keyfile_check_keys(settings, GROUP_WORKER, worker_keys, error))
    return FALSE;

  plan->queues = args->queues != NULL ? g_steal_pointer(&args->queues)
                                      : setting_list(settings, "queues");
  plan->options.queues = (const gchar *const *)plan->queues;
  plan->modules = args->modules != NULL ? g_steal_pointer(&args->modules)
                                        : setting_list(settings, "modules");
  if (plan->modules == NULL || plan->modules[0] == NULL)
    return cli_usage_error(error,
                           "no task module: give one with --module PATH.so "
                           "(a shared object exporting sluice_module_init), "
                           "or modules= in the [worker] group of --config");

  if ((value = setting(&s, args->concurrency, settings, "concurrency")) !=
      NULL) {
    if (!cli_parse_count(s.what, value, 1, 1024, &n, error))
      return FALSE;
    plan->options.concurrency = (guint)n;
  }
  if ((value = setting(&s, args->prefetch, settings, "prefetch")) != NULL) {
    if (!cli_parse_count(s.what, value, 0, 1024, &n, error))
      return FALSE;
    plan->options.prefetch = (guint)n;
  }
  if (!cli_parse_log_format(
          setting(&s, args->log_format, settings, "log-format"),
          &plan->log_format, error))
    return FALSE;
  if (!resolve_retry(&args->retry, settings, &plan->options.retry, error))
    return FALSE;
  if ((value = setting(&s, args->shutdown_timeout, settings,
                       "shutdown-timeout")) != NULL &&
      !cli_parse_duration(s.what, value, &plan->options.shutdown_timeout_ms,
                          error))
    return FALSE;
  if ((value = setting(&s, args->visibility_timeout, settings,
                       "visibility-timeout")) != NULL) {
    if (!cli_parse_duration(s.what, value, &plan->options.visibility_timeout_ms,
                            error))
      return FALSE;
    if (plan->options.visibility_timeout_ms < 300)
      return cli_usage_error(error,
                             "%s: %s is too short; the shortest lease is "
                             "300ms",
                             s.what, value);
  }
  if ((value = setting(&s, args->max_deliveries, settings, "max-deliveries")) !=
      NULL) {
    if (!cli_parse_count(s.what, value, 1, 1000, &n, error))
      return FALSE;
    plan->options.max_deliveries = (guint)n;
  }
  if ((value = setting(&s, args->dead_letter_max, settings,
                       "dead-letter-max")) != NULL) {
    if (!cli_parse_count(s.what, value, 1, G_MAXUINT32, &n, error))
      return FALSE;
    plan->dead_letter_max = (guint)n;
  }
  if ((value = setting(&s, args->worker_id, settings, "worker-id")) != NULL) {
    plan->worker_id = g_strdup(value);
    plan->options.worker_id = plan->worker_id;
  }
  if (!setting_bool(settings, "track-state", TRUE, &track_state, error))
    return FALSE;
  plan->options.track_state = track_state && !args->no_track_state;
  if (!cli_events_setting(args->events, settings, GROUP_WORKER,
                          &plan->options.events, error))
    return FALSE;
  if (!setting_bool(settings, "fail-fast", FALSE, &plan->fail_fast, error))
    return FALSE;
  plan->fail_fast = plan->fail_fast || args->fail_fast;
  if (!setting_bool(settings, "task-log", TRUE, &plan->options.log_each_task,
                    error))
    return FALSE;
  plan->options.log_each_task =
      plan->options.log_each_task && !args->no_task_log;
  if (!cli_periodic_load(settings, &plan->periodics, error))
    return FALSE;
  if ((value = setting(&s, args->metrics_listen, settings, "metrics-listen")) !=
          NULL &&
      !cli_parse_listen(s.what, value, &plan->metrics_listen, error))
    return FALSE;
  if (!resolve_limits(args, settings, plan, error) ||
      !resolve_weights(args, settings, plan, error))
    return FALSE;
  return resolve_isolation(args, settings, &plan->options, error);
}

static int
worker_run(WorkerPlan *plan, const CliSettings *settings)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(SluiceBroker) broker = NULL;
  g_autoptr(SluiceWorker) worker = NULL;
  CliMetricsServer *metrics = NULL;
  g_autofree gchar *tasks = NULL;
  g_autofree gchar *queues = NULL;
  gchar *ready = NULL;
  g_autoptr(GString) schedules = NULL;

  /* With --fail-fast, Redis first, so that a worker that cannot reach it
   * says so in one line and exits. Otherwise an unreachable Redis is
   * waited out like any outage (under systemd, Redis often starts after
   * its workers), while a refused password or a namespace of the other
   * mode still fails the start (sluice_worker_start checks). */
  broker =
      cli_connect(settings, plan->dead_letter_max, plan->fail_fast, &error);
  if (broker == NULL ||
      !cli_modules_load((const gchar *const *)plan->modules, registry, &error))
    return cli_report(error);
  worker = sluice_worker_new(broker, registry, &plan->options, &error);
  if (worker == NULL)
    return cli_report(error);
  schedules = g_string_new(NULL);
  for (guint i = 0; i < plan->periodics->len; i++) {
    const CliPeriodic *p = plan->periodics->pdata[i];
    if (!sluice_worker_add_periodic(worker, &p->options, &error)) {
      g_prefix_error(&error, "%s: [%s]: ", settings->config_path, p->group);
      return cli_report(error);
    }
    g_string_append_printf(schedules, "%s%s (%s)", i > 0 ? ", " : "",
                           p->options.name, p->schedule);
  }
  if (!sluice_worker_handle_signals(worker, &error) ||
      !sluice_worker_start(worker, &error))
    return cli_report(error);
  /* After the start: process isolation forks before this has threads. */
  if (plan->metrics_listen != NULL &&
      (metrics = cli_metrics_server_start(worker, plan->metrics_listen,
                                          &error)) == NULL) {
    sluice_worker_stop(worker);
    return cli_report(error);
  }

  tasks = task_list(registry);
  queues = plan->queues != NULL ? g_strjoinv(", ", plan->queues)
                                : g_strdup(SLUICE_DEFAULT_QUEUE);
  /* "Ready" once it can serve: a broker still down at the start is
   * waited for, and the line and READY=1 come when it answers. */
  if (settings->mode == CLI_MODE_SQLITE)
    ready = g_strdup_printf("worker %s ready: SQLite, queues %s; tasks %s%s%s",
                            sluice_worker_get_id(worker), queues, tasks,
                            schedules->len > 0 ? "; periodic " : "",
                            schedules->str);
  else
    ready = g_strdup_printf(
        "worker %s ready: %s mode, namespace %s, queues %s; tasks %s%s%s",
        sluice_worker_get_id(worker), cli_mode_name(settings->mode),
        settings->namespace_, queues, tasks,
        schedules->len > 0 ? "; periodic " : "", schedules->str);
  cli_notify_ready_when_served(worker, ready);

  /* A signal makes the worker stop itself (and log it); wait returns once
   * a stop was asked for, and stop returns when it is complete. */
  sluice_worker_wait(worker);
  cli_notify_stopping(worker);
  cli_metrics_server_stopping(metrics);
  sluice_worker_stop(worker);
  cli_metrics_server_free(metrics);
  if (sluice_worker_stopped_forcibly(worker)) {
    g_warning("worker %s exits at once, as asked by a second signal; what "
              "it was running was given back for redelivery",
              sluice_worker_get_id(worker));
    return CLI_EXIT_FAILURE;
  }
  g_info("worker %s exits", sluice_worker_get_id(worker));
  return CLI_EXIT_OK;
}

int
cli_cmd_worker(int argc, char **argv)
{
  WorkerArgs args = {0};
  CliCommon common = {0};
  CliSettings settings = {0};
  WorkerPlan plan = {0};
  GOptionEntry retry[6];
  g_autofree GOptionEntry *all = NULL;
  g_autoptr(GError) error = NULL;
  int status;
  const GOptionEntry entries[] = {
      {"queue", 'q', 0, G_OPTION_ARG_STRING_ARRAY, &args.queues,
       "A queue to take tasks from, highest priority first (repeat it; "
       "default: default)",
       "Q"},
      {"concurrency", 'c', 0, G_OPTION_ARG_STRING, &args.concurrency,
       "Tasks run at once (default 4)", "N"},
      {"module", 'm', 0, G_OPTION_ARG_FILENAME_ARRAY, &args.modules,
       "A task module to load (repeat it)", "PATH.so"},
      {"prefetch", 0, 0, G_OPTION_ARG_STRING, &args.prefetch,
       "The most tasks held ready beyond --concurrency (default 256; about "
       "100 ms of work is held)",
       "N"},
      {"log-format", 0, 0, G_OPTION_ARG_STRING, &args.log_format,
       "Log lines on stderr as text (default) or json; the journal when "
       "stderr is connected to it",
       "text|json"},
      {"verbose", 'v', 0, G_OPTION_ARG_NONE, &args.verbose,
       "Log debug lines too", NULL},
      {"shutdown-timeout", 0, 0, G_OPTION_ARG_STRING, &args.shutdown_timeout,
       "On SIGTERM, how long running tasks may take (default 30s)", "DURATION"},
      {"visibility-timeout", 0, 0, G_OPTION_ARG_STRING,
       &args.visibility_timeout,
       "Reliable mode: the lease, renewed every third of it (default 30s)",
       "DURATION"},
      {"max-deliveries", 0, 0, G_OPTION_ARG_STRING, &args.max_deliveries,
       "Reliable mode: bury a task taken from dead workers this often "
       "(default 5)",
       "N"},
      {"dead-letter-max", 0, 0, G_OPTION_ARG_STRING, &args.dead_letter_max,
       "Keep at most N dead letters, dropping the oldest (default 10000)", "N"},
      {"worker-id", 0, 0, G_OPTION_ARG_STRING, &args.worker_id,
       "This worker's unique name (default HOST-PID-RANDOM)", "ID"},
      {"no-track-state", 0, 0, G_OPTION_ARG_NONE, &args.no_track_state,
       "Do not write running/retrying records", NULL},
      {"events", 0, 0, G_OPTION_ARG_NONE, &args.events,
       "Write task lifecycle events to the namespace's event stream "
       "(sluice events)",
       NULL},
      {"fail-fast", 0, 0, G_OPTION_ARG_NONE, &args.fail_fast,
       "Exit at once (status 1) if Redis cannot be reached at start, "
       "instead of waiting for it",
       NULL},
      {"no-task-log", 0, 0, G_OPTION_ARG_NONE, &args.no_task_log,
       "Do not log a line per finished task (id, task, queue, attempt, "
       "outcome, duration)",
       NULL},
      {"isolation", 0, 0, G_OPTION_ARG_STRING, &args.isolation,
       "Where tasks run: thread (default) or process (each executor in a "
       "child process: a crash costs one attempt)",
       "thread|process"},
      {"hard-timeout", 0, 0, G_OPTION_ARG_STRING, &args.hard_timeout,
       "Process isolation: kill a task's child this long after it started "
       "(default: none)",
       "DURATION"},
      {"cancel-grace", 0, 0, G_OPTION_ARG_STRING, &args.cancel_grace,
       "How long a cancelled task may take to return before its child is "
       "killed (default 2s)",
       "DURATION"},
      {"max-tasks-per-child", 0, 0, G_OPTION_ARG_STRING,
       &args.max_tasks_per_child,
       "Process isolation: replace a child after N tasks (default: never)",
       "N"},
      {"max-rss-per-child", 0, 0, G_OPTION_ARG_STRING, &args.max_rss_per_child,
       "Process isolation: replace a child left above SIZE resident after a "
       "task",
       "SIZE"},
      {"memory-limit-per-child", 0, 0, G_OPTION_ARG_STRING,
       &args.memory_limit_per_child,
       "Process isolation: kill a child using more than SIZE while it runs a "
       "task; its attempt fails",
       "SIZE"},
      {"metrics-listen", 0, 0, G_OPTION_ARG_STRING, &args.metrics_listen,
       "Serve /metrics (Prometheus) and /healthz on ADDR:PORT (a bare port "
       "is 127.0.0.1)",
       "ADDR:PORT"},
      {"rate-limit", 0, 0, G_OPTION_ARG_STRING_ARRAY, &args.rate_limits,
       "At most COUNT tasks of QUEUE per PERIOD across every worker, bursts "
       "of BURST (default 1); repeatable",
       "QUEUE=COUNT/PERIOD[:BURST]"},
      {"weight", 0, 0, G_OPTION_ARG_STRING_ARRAY, &args.weights,
       "Share fetches among the queues by weight instead of strict order "
       "(a queue not named weighs 1); repeatable",
       "QUEUE=WEIGHT"},
      {"concurrency-limit", 0, 0, G_OPTION_ARG_STRING_ARRAY,
       &args.concurrency_limits,
       "At most N tasks of QUEUE running at once across every worker; "
       "repeatable",
       "QUEUE=N"},
      {NULL}};

  retry_entries(&args.retry, retry);
  all = join_entries(entries, retry);
  if (!cli_parse_options(
          &common, CLI_OPTIONS_CONNECTION, all, "",
          "Run a worker: load task modules and run their tasks from the "
          "queues.\nSIGTERM or SIGINT stops it gracefully (exit status 0); "
          "a second one stops it at once (exit status 1).",
          "Example:\n  sluice worker --mode fast --module "
          "./examples/demo-module/.libs/demo.so -q default -c 8",
          &argc, &argv, &error)) {
    status = cli_report(error);
    goto out;
  }
  if (argc > 1) {
    cli_usage_error(&error,
                    "unexpected argument “%s”: queues are given with "
                    "--queue and modules with --module",
                    argv[1]);
    status = cli_report(error);
    goto out;
  }
  if (!cli_settings_load(&common, &settings, &error) ||
      !resolve_worker(&args, &settings, &plan, &error)) {
    status = cli_report(error);
    goto out;
  }
  cli_log_init(plan.log_format,
               args.verbose ? G_LOG_LEVEL_DEBUG : G_LOG_LEVEL_INFO);
  status = worker_run(&plan, &settings);
out:
  worker_plan_clear(&plan);
  cli_settings_clear(&settings);
  cli_common_clear(&common);
  worker_args_clear(&args);
  return status;
}

/* ---- sluice run ---------------------------------------------------------- */

typedef struct {
  gchar **modules;
  RetryArgs retry;
  gchar *timeout;
  gchar *wait;
  gchar *log_format;
  gboolean verbose;
} RunArgs;

static void
run_args_clear(RunArgs *args)
{
  g_strfreev(args->modules);
  retry_args_clear(&args->retry);
  g_free(args->timeout);
  g_free(args->wait);
  g_free(args->log_format);
}

/* Exit status for a final record, as `sluice result` decides it. */
static int
status_of(const SluiceResult *result)
{
  return sluice_result_get_state(result) == SLUICE_STATE_SUCCEEDED
             ? CLI_EXIT_OK
             : CLI_EXIT_TASK_FAILED;
}

static int
run_task(const RunArgs *args, const gchar *task, GBytes *task_args,
         gboolean json)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(SluiceBroker) broker = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(SluiceWorker) worker = NULL;
  g_autoptr(SluiceResult) result = NULL;
  g_autofree gchar *id = NULL;
  SluiceWorkerOptions options;
  SluiceEnqueueOptions enqueue;
  gint64 wait_ms = -1;

  sluice_worker_options_init(&options);
  options.concurrency = 1;
  options.prefetch = 0;
  options.track_state = TRUE;
  sluice_enqueue_options_init(&enqueue);
  if (!resolve_retry(&args->retry, NULL, &options.retry, &error) ||
      (args->timeout != NULL &&
       !cli_parse_duration("--timeout", args->timeout,
                           &enqueue.options.timeout_ms, &error)) ||
      (args->wait != NULL &&
       !cli_parse_duration("--wait", args->wait, &wait_ms, &error)))
    return cli_report(error);
  if (args->modules == NULL) {
    cli_usage_error(&error, "no task module: give one with --module PATH.so");
    return cli_report(error);
  }
  if (!cli_modules_load((const gchar *const *)args->modules, registry, &error))
    return cli_report(error);
  if (!sluice_registry_contains(registry, task)) {
    g_autofree gchar *tasks = task_list(registry);
    g_set_error(&error, CLI_ERROR, CLI_ERROR_FAILED,
                "no task named “%s” in the modules given; they register: %s",
                task, tasks);
    return cli_report(error);
  }

  broker = sluice_memory_broker_new(NULL, NULL);
  client = cli_client_new(broker, &error);
  if (client == NULL)
    return cli_report(error);
  /* No signal handling here: a stopped worker would leave the wait below
   * hanging, and Ctrl-C ending the process at once is what `run` wants. */
  worker = sluice_worker_new(broker, registry, &options, &error);
  if (worker == NULL)
    return cli_report(error);
  id = sluice_client_enqueue(client, task, task_args, &enqueue, &error);
  if (id == NULL || !sluice_worker_start(worker, &error))
    return cli_report(error);
  result = sluice_client_get_result(client, id, wait_ms, NULL, &error);
  sluice_worker_stop(worker);
  if (result == NULL) {
    int status = cli_report(error);
    return g_error_matches(error, SLUICE_CLIENT_ERROR,
                           SLUICE_CLIENT_ERROR_TIMEOUT)
               ? CLI_EXIT_NOT_FINISHED
               : status;
  }
  cli_result_print(result, json);
  return status_of(result);
}

int
cli_cmd_run(int argc, char **argv)
{
  RunArgs args = {0};
  CliCommon common = {0};
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) task_args = NULL;
  CliLogFormat format = CLI_LOG_TEXT;
  GOptionEntry retry[6];
  g_autofree GOptionEntry *all = NULL;
  int status;
  const GOptionEntry entries[] = {
      {"module", 'm', 0, G_OPTION_ARG_FILENAME_ARRAY, &args.modules,
       "A task module to load (repeat it)", "PATH.so"},
      {"timeout", 0, 0, G_OPTION_ARG_STRING, &args.timeout,
       "Fail an attempt that runs longer than this", "DURATION"},
      {"wait", 0, 0, G_OPTION_ARG_STRING, &args.wait,
       "Give up after this long (exit status 4; default: wait)", "DURATION"},
      {"log-format", 0, 0, G_OPTION_ARG_STRING, &args.log_format,
       "Log lines as text (default) or json", "text|json"},
      {"verbose", 'v', 0, G_OPTION_ARG_NONE, &args.verbose,
       "Log every attempt, not only warnings", NULL},
      {NULL}};

  retry_entries(&args.retry, retry);
  all = join_entries(entries, retry);
  if (!cli_parse_options(
          &common, CLI_OPTIONS_JSON, all, "TASK [ARGS_JSON]",
          "Run one task in this process, with its retries, and print its "
          "final record.\nNo Redis is involved: the task runs on an "
          "in-process memory broker, so this is the way to try a module.",
          "Exit status: 0 succeeded; 3 failed, dead-lettered or cancelled; "
          "4 still running after --wait.\nExample:\n  sluice run demo.echo "
          "'{\"hello\": 1}' --module ./examples/demo-module/.libs/demo.so",
          &argc, &argv, &error) ||
      !cli_parse_log_format(args.log_format, &format, &error)) {
    status = cli_report(error);
    goto out;
  }
  if (argc < 2 || argc > 3) {
    cli_usage_error(&error,
                    argc < 2 ? "which task? give its name: %s"
                             : "too many arguments: %s",
                    "sluice run TASK [ARGS_JSON]");
    status = cli_report(error);
    goto out;
  }
  if (argc == 3 && (task_args = cli_read_args(argv[2], &error)) == NULL) {
    status = cli_report(error);
    goto out;
  }
  cli_log_init(format, args.verbose ? G_LOG_LEVEL_INFO : G_LOG_LEVEL_WARNING);
  status = run_task(&args, argv[1], task_args, common.json);
out:
  cli_common_clear(&common);
  run_args_clear(&args);
  return status;
}

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

/* Which command takes a row of the table. */
#define WORKER (1u << 0)
#define RUN (1u << 1)

/* ---- What the settings resolve to ----------------------------------------- */

/* Everything `sluice worker` (or `sluice run`) resolved from its options,
 * the environment and the file: what the rows of the table store into. */
typedef struct {
  SluiceWorkerOptions options;
  gchar **queues;   /* owned; options.queues points here */
  gchar **modules;  /* owned */
  gchar *worker_id; /* owned; options.worker_id points here */
  CliLogFormat log_format;
  gboolean verbose;
  guint dead_letter_max;
  gboolean fail_fast;
  gboolean jitter;      /* into options.retry.jitter */
  gboolean track_state; /* into options.track_state */
  GPtrArray *periodics; /* CliPeriodic*: the [periodic "NAME"] groups */
  GSocketAddress *metrics_listen; /* owned; NULL = no metrics endpoint */
  CliHttpTls metrics_tls;         /* the endpoint's HTTPS */
  /* --rate-limit and --concurrency-limit: the arrays the options point
   * at, and the queue names they borrow. */
  GArray *rate_limits;        /* SluiceQueueRateLimit */
  GArray *concurrency_limits; /* SluiceQueueConcurrencyLimit */
  GPtrArray *limit_queues;    /* gchar*, owned */
  guint *weights;             /* --weight: one per queue, or NULL */
  /* `sluice run` */
  gint64 timeout_ms; /* 0 = none */
  gint64 wait_ms;    /* -1 = as long as it takes */
} WorkerPlan;

/* The defaults: the library's (sluice_worker_options_init()), and the
 * command's own where it has one. @retry_defaults fills the retry policy
 * with the library's defaults, to show them; a plan that runs leaves it
 * unset, so that a task's or a message's own policy wins. */
static void
worker_plan_init(WorkerPlan *plan, gboolean retry_defaults)
{
  memset(plan, 0, sizeof *plan);
  sluice_worker_options_init(&plan->options);
  if (retry_defaults)
    sluice_retry_policy_init_default(&plan->options.retry);
  plan->log_format = CLI_LOG_TEXT;
  plan->dead_letter_max = SLUICE_DEFAULT_DEAD_LETTER_MAX;
  plan->jitter = TRUE;
  plan->track_state = TRUE;
  plan->options.log_each_task = TRUE;
  plan->wait_ms = -1;
  plan->rate_limits = g_array_new(FALSE, TRUE, sizeof(SluiceQueueRateLimit));
  plan->concurrency_limits =
      g_array_new(FALSE, TRUE, sizeof(SluiceQueueConcurrencyLimit));
  plan->limit_queues = g_ptr_array_new_with_free_func(g_free);
  plan->metrics_tls.cert_option = "metrics-tls-cert";
  plan->metrics_tls.key_option = "metrics-tls-key";
  plan->metrics_tls.client_ca_option = "metrics-tls-client-ca";
}

static void
worker_plan_clear(WorkerPlan *plan)
{
  g_strfreev(plan->queues);
  g_strfreev(plan->modules);
  g_free(plan->worker_id);
  g_clear_pointer(&plan->periodics, g_ptr_array_unref);
  g_clear_object(&plan->metrics_listen);
  cli_http_tls_clear(&plan->metrics_tls);
  g_clear_pointer(&plan->rate_limits, g_array_unref);
  g_clear_pointer(&plan->concurrency_limits, g_array_unref);
  g_clear_pointer(&plan->limit_queues, g_ptr_array_unref);
  g_clear_pointer(&plan->weights, g_free);
}

/* ---- The command's own types of values ------------------------------------ */

static gboolean
parse_multiplier(const CliSetting *row, const CliSettingValue *v, gpointer base,
                 GError **error)
{
  gchar *end = NULL;
  gdouble x = g_ascii_strtod(v->text, &end);

  if (end == v->text || *end != '\0' || !isfinite(x) || x < 1.0 || x > 100.0)
    return cli_usage_error(error,
                           "%s: “%s” is not a number from 1 to 100 (e.g. 2 "
                           "or 1.5)",
                           v->what, v->text);
  G_STRUCT_MEMBER(gdouble, base, row->offset) = x;
  return TRUE;
}

static gchar *
show_multiplier(const CliSetting *row, gconstpointer base)
{
  gchar buf[G_ASCII_DTOSTR_BUF_SIZE];

  return g_strdup(
      cli_format_number(buf, G_STRUCT_MEMBER(gdouble, base, row->offset)));
}

static const CliSettingType multiplier = {parse_multiplier, show_multiplier};

static gboolean
parse_log_format(const CliSetting *row, const CliSettingValue *v, gpointer base,
                 GError **error)
{
  return cli_parse_log_format(
      v->text, &G_STRUCT_MEMBER(CliLogFormat, base, row->offset), error);
}

static gchar *
show_log_format(const CliSetting *row, gconstpointer base)
{
  return g_strdup(G_STRUCT_MEMBER(CliLogFormat, base, row->offset) ==
                          CLI_LOG_JSON
                      ? "json"
                      : "text");
}

static const CliSettingType log_format = {parse_log_format, show_log_format};

static gboolean
parse_isolation(const CliSetting *row, const CliSettingValue *v, gpointer base,
                GError **error)
{
  SluiceIsolation *out = &G_STRUCT_MEMBER(SluiceIsolation, base, row->offset);

  if (g_strcmp0(v->text, "thread") == 0)
    *out = SLUICE_ISOLATION_THREAD;
  else if (g_strcmp0(v->text, "process") == 0)
    *out = SLUICE_ISOLATION_PROCESS;
  else
    return cli_usage_error(error,
                           "%s: “%s” is not an isolation: thread (tasks run "
                           "on the worker's threads) or process (each in a "
                           "child process)",
                           v->what, v->text);
  return TRUE;
}

static gchar *
show_isolation(const CliSetting *row, gconstpointer base)
{
  return g_strdup(G_STRUCT_MEMBER(SluiceIsolation, base, row->offset) ==
                          SLUICE_ISOLATION_PROCESS
                      ? "process"
                      : "thread");
}

static const CliSettingType isolation = {parse_isolation, show_isolation};

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
parse_rate_limits(const CliSetting *row, const CliSettingValue *v,
                  gpointer base, GError **error)
{
  for (guint i = 0; v->list != NULL && v->list[i] != NULL; i++)
    if (!parse_queue_limit(base, v->what, v->list[i], TRUE, error))
      return FALSE;
  return TRUE;
}

static const CliSettingType rate_limits = {parse_rate_limits, NULL};

static gboolean
parse_concurrency_limits(const CliSetting *row, const CliSettingValue *v,
                         gpointer base, GError **error)
{
  for (guint i = 0; v->list != NULL && v->list[i] != NULL; i++)
    if (!parse_queue_limit(base, v->what, v->list[i], FALSE, error))
      return FALSE;
  return TRUE;
}

static const CliSettingType concurrency_limits = {parse_concurrency_limits,
                                                  NULL};

/* --weight QUEUE=W (repeatable): weighted fair queues over the worker's
 * queues (read before it: the table's order); a queue named by none has
 * weight 1. */
static gboolean
parse_weights(const CliSetting *row, const CliSettingValue *v, gpointer base,
              GError **error)
{
  WorkerPlan *plan = base;
  const gchar *const default_queues[] = {SLUICE_DEFAULT_QUEUE, NULL};
  const gchar *const *queues = plan->queues != NULL
                                   ? (const gchar *const *)plan->queues
                                   : default_queues;
  guint n = g_strv_length((gchar **)queues);

  if (v->list == NULL || v->list[0] == NULL)
    return TRUE;
  g_free(plan->weights);
  plan->weights = g_new(guint, n);
  for (guint q = 0; q < n; q++)
    plan->weights[q] = 1;
  for (guint i = 0; v->list[i] != NULL; i++) {
    const gchar *eq = strrchr(v->list[i], '=');
    g_autofree gchar *queue =
        eq != NULL ? g_strndup(v->list[i], eq - v->list[i]) : NULL;
    guint64 w;
    guint q;

    if (queue == NULL)
      return cli_usage_error(error,
                             "%s: “%s” is not QUEUE=WEIGHT (e.g. "
                             "interactive=3)",
                             v->what, v->list[i]);
    for (q = 0; q < n && g_strcmp0(queues[q], queue) != 0; q++)
      ;
    if (q == n)
      return cli_usage_error(error,
                             "%s: “%s” is not one of the worker's queues "
                             "(give it with --queue)",
                             v->what, queue);
    if (!cli_parse_count(v->what, eq + 1, 1, 1000000, &w, error))
      return FALSE;
    plan->weights[q] = (guint)w;
  }
  return TRUE;
}

static const CliSettingType weights = {parse_weights, NULL};

/* ---- The table ------------------------------------------------------------ */

#define PLAN(field) G_STRUCT_OFFSET(WorkerPlan, field)

/* Every setting of `sluice worker` (and of `sluice run`, which shares the
 * retry options): its option, key of [worker], type, default and help, in
 * the order --help lists them. A key is the option's name (a list's is
 * plural for queue and module; an off flag's is what it turns off), so
 * that the file reads like the command line. The defaults --help shows are
 * those of worker_plan_init(): the library's. sluice(1) says the same
 * (tests/test-cli.c checks it). */
static const CliSetting worker_settings[] = {
    {.option = "queue",
     .short_name = 'q',
     .key = "queues",
     .kind = CLI_SETTING_LIST,
     .type = &cli_setting_strv,
     .offset = PLAN(queues),
     .arg = "Q",
     .help = "A queue to take tasks from, highest priority first (repeat it)",
     .default_text = SLUICE_DEFAULT_QUEUE,
     .commands = WORKER},
    {.option = "concurrency",
     .short_name = 'c',
     .key = "concurrency",
     .kind = CLI_SETTING_TEXT,
     .type = &cli_setting_count,
     .offset = PLAN(options.concurrency),
     .min = 1,
     .max = 1024,
     .arg = "N",
     .help = "Tasks run at once",
     .commands = WORKER},
    {.option = "module",
     .short_name = 'm',
     .key = "modules",
     .kind = CLI_SETTING_FILENAME_LIST,
     .type = &cli_setting_strv,
     .offset = PLAN(modules),
     .arg = "PATH.so",
     .help = "A task module to load (repeat it)",
     .commands = WORKER | RUN},
    {.option = "prefetch",
     .key = "prefetch",
     .kind = CLI_SETTING_TEXT,
     .type = &cli_setting_count,
     .offset = PLAN(options.prefetch),
     .min = 0,
     .max = 1024,
     .arg = "N",
     .help = "The most tasks held ready beyond --concurrency; about 100 ms "
             "of work is held",
     .commands = WORKER},
    {.option = "log-format",
     .key = "log-format",
     .kind = CLI_SETTING_TEXT,
     .type = &log_format,
     .offset = PLAN(log_format),
     .arg = "text|json",
     .help = "Log lines on stderr as text or json; the journal when stderr "
             "is connected to it",
     .commands = WORKER | RUN},
    {.option = "verbose",
     .short_name = 'v',
     .kind = CLI_SETTING_FLAG,
     .type = &cli_setting_boolean,
     .offset = PLAN(verbose),
     .help = "Log debug lines too",
     .commands = WORKER},
    {.option = "verbose",
     .short_name = 'v',
     .kind = CLI_SETTING_FLAG,
     .type = &cli_setting_boolean,
     .offset = PLAN(verbose),
     .help = "Log every attempt, not only warnings",
     .commands = RUN},
    {.option = "shutdown-timeout",
     .key = "shutdown-timeout",
     .kind = CLI_SETTING_TEXT,
     .type = &cli_setting_duration,
     .offset = PLAN(options.shutdown_timeout_ms),
     .arg = "DURATION",
     .help = "On SIGTERM, how long running tasks may take",
     .commands = WORKER},
    {.option = "visibility-timeout",
     .key = "visibility-timeout",
     .kind = CLI_SETTING_TEXT,
     .type = &cli_setting_duration,
     .offset = PLAN(options.visibility_timeout_ms),
     .min = 300,
     .arg = "DURATION",
     .help = "Reliable mode: the lease, renewed every third of it",
     .commands = WORKER},
    {.option = "max-deliveries",
     .key = "max-deliveries",
     .kind = CLI_SETTING_TEXT,
     .type = &cli_setting_count,
     .offset = PLAN(options.max_deliveries),
     .min = 1,
     .max = 1000,
     .arg = "N",
     .help = "Reliable mode: bury a task taken from dead workers this often",
     .commands = WORKER},
    {.option = "dead-letter-max",
     .key = "dead-letter-max",
     .kind = CLI_SETTING_TEXT,
     .type = &cli_setting_count,
     .offset = PLAN(dead_letter_max),
     .min = 1,
     .max = G_MAXUINT32,
     .arg = "N",
     .help = "Keep at most N dead letters, dropping the oldest",
     .commands = WORKER},
    {.option = "worker-id",
     .key = "worker-id",
     .kind = CLI_SETTING_TEXT,
     .type = &cli_setting_string,
     .offset = PLAN(worker_id),
     .arg = "ID",
     .help = "This worker's unique name",
     .default_text = "HOST-PID-RANDOM",
     .commands = WORKER},
    {.option = "no-track-state",
     .key = "track-state",
     .kind = CLI_SETTING_OFF_FLAG,
     .type = &cli_setting_boolean,
     .offset = PLAN(track_state),
     .help = "Do not write running/retrying records",
     .commands = WORKER},
    {.option = "events",
     .env = "SLUICE_EVENTS",
     .key = "events",
     .kind = CLI_SETTING_FLAG,
     .type = &cli_setting_boolean,
     .offset = PLAN(options.events),
     .help = "Write task lifecycle events to the namespace's event stream "
             "(sluice events)",
     .commands = WORKER},
    {.option = "fail-fast",
     .key = "fail-fast",
     .kind = CLI_SETTING_FLAG,
     .type = &cli_setting_boolean,
     .offset = PLAN(fail_fast),
     .help = "Exit at once (status 1) if Redis cannot be reached at start, "
             "instead of waiting for it",
     .commands = WORKER},
    {.option = "no-task-log",
     .key = "task-log",
     .kind = CLI_SETTING_OFF_FLAG,
     .type = &cli_setting_boolean,
     .offset = PLAN(options.log_each_task),
     .help = "Do not log a line per finished task (id, task, queue, attempt, "
             "outcome, duration)",
     .commands = WORKER},
    {.option = "isolation",
     .key = "isolation",
     .kind = CLI_SETTING_TEXT,
     .type = &isolation,
     .offset = PLAN(options.isolation),
     .arg = "thread|process",
     .help = "Where tasks run: thread or process (each executor in a child "
             "process: a crash costs one attempt)",
     .commands = WORKER},
    {.option = "hard-timeout",
     .key = "hard-timeout",
     .kind = CLI_SETTING_TEXT,
     .type = &cli_setting_duration,
     .offset = PLAN(options.hard_timeout_ms),
     .arg = "DURATION",
     .help = "Process isolation: kill a task's child this long after it "
             "started",
     .default_text = "none",
     .commands = WORKER},
    {.option = "cancel-grace",
     .key = "cancel-grace",
     .kind = CLI_SETTING_TEXT,
     .type = &cli_setting_duration,
     .offset = PLAN(options.cancel_grace_ms),
     .arg = "DURATION",
     .help = "How long a cancelled task may take to return before its child "
             "is killed",
     .commands = WORKER},
    {.option = "max-tasks-per-child",
     .key = "max-tasks-per-child",
     .kind = CLI_SETTING_TEXT,
     .type = &cli_setting_count,
     .offset = PLAN(options.max_tasks_per_child),
     .min = 0,
     .max = G_MAXUINT32,
     .arg = "N",
     .help = "Process isolation: replace a child after N tasks",
     .default_text = "never",
     .commands = WORKER},
    {.option = "max-rss-per-child",
     .key = "max-rss-per-child",
     .kind = CLI_SETTING_TEXT,
     .type = &cli_setting_size,
     .offset = PLAN(options.max_rss_per_child),
     .arg = "SIZE",
     .help = "Process isolation: replace a child left above SIZE resident "
             "after a task",
     .commands = WORKER},
    {.option = "memory-limit-per-child",
     .key = "memory-limit-per-child",
     .kind = CLI_SETTING_TEXT,
     .type = &cli_setting_size,
     .offset = PLAN(options.memory_limit_per_child),
     .arg = "SIZE",
     .help = "Process isolation: kill a child using more than SIZE while it "
             "runs a task; its attempt fails",
     .commands = WORKER},
    {.option = "metrics-listen",
     .key = "metrics-listen",
     .kind = CLI_SETTING_TEXT,
     .type = &cli_setting_listen,
     .offset = PLAN(metrics_listen),
     .arg = "ADDR:PORT",
     .help = "Serve /metrics (Prometheus) and /healthz on ADDR:PORT (a bare "
             "port is 127.0.0.1)",
     .commands = WORKER},
    {.option = "metrics-tls-cert",
     .key = "metrics-tls-cert",
     .kind = CLI_SETTING_FILENAME,
     .type = &cli_setting_sourced_path,
     .offset = PLAN(metrics_tls.cert),
     .arg = "FILE",
     .help = "Serve the metrics endpoint over HTTPS with this certificate "
             "(PEM; needs --metrics-tls-key)",
     .default_text = "clear text HTTP",
     .commands = WORKER},
    {.option = "metrics-tls-key",
     .key = "metrics-tls-key",
     .kind = CLI_SETTING_FILENAME,
     .type = &cli_setting_sourced_path,
     .offset = PLAN(metrics_tls.key),
     .arg = "FILE",
     .help = "The private key of --metrics-tls-cert (PEM, readable by its "
             "owner only)",
     .commands = WORKER},
    {.option = "metrics-tls-client-ca",
     .key = "metrics-tls-client-ca",
     .kind = CLI_SETTING_FILENAME,
     .type = &cli_setting_sourced_path,
     .offset = PLAN(metrics_tls.client_ca),
     .arg = "FILE",
     .help = "With HTTPS, refuse scrapers without a client certificate "
             "signed by a CA of this PEM file",
     .default_text = "no client certificate asked",
     .commands = WORKER},
    {.option = "rate-limit",
     .key = "rate-limit",
     .kind = CLI_SETTING_LIST,
     .type = &rate_limits,
     .arg = "QUEUE=COUNT/PERIOD[:BURST]",
     .help = "At most COUNT tasks of QUEUE per PERIOD across every worker, "
             "bursts of BURST (default 1); repeatable",
     .commands = WORKER},
    {.option = "weight",
     .key = "weight",
     .kind = CLI_SETTING_LIST,
     .type = &weights,
     .arg = "QUEUE=WEIGHT",
     .help = "Share fetches among the queues by weight instead of strict "
             "order (a queue not named weighs 1); repeatable",
     .commands = WORKER},
    {.option = "concurrency-limit",
     .key = "concurrency-limit",
     .kind = CLI_SETTING_LIST,
     .type = &concurrency_limits,
     .arg = "QUEUE=N",
     .help = "At most N tasks of QUEUE running at once across every worker; "
             "repeatable",
     .commands = WORKER},
    {.option = "timeout",
     .kind = CLI_SETTING_TEXT,
     .type = &cli_setting_duration,
     .offset = PLAN(timeout_ms),
     .arg = "DURATION",
     .help = "Fail an attempt that runs longer than this",
     .default_text = "none",
     .commands = RUN},
    {.option = "wait",
     .kind = CLI_SETTING_TEXT,
     .type = &cli_setting_duration,
     .offset = PLAN(wait_ms),
     .arg = "DURATION",
     .help = "Give up after this long (exit status 4)",
     .default_text = "no limit",
     .commands = RUN},
    {.option = "max-attempts",
     .key = "max-attempts",
     .kind = CLI_SETTING_TEXT,
     .type = &cli_setting_int,
     .offset = PLAN(options.retry.max_attempts),
     .min = 1,
     .max = 1000,
     .arg = "N",
     .help = "Attempts per task unless the task or message says otherwise",
     .commands = WORKER | RUN},
    {.option = "backoff",
     .key = "backoff",
     .kind = CLI_SETTING_TEXT,
     .type = &cli_setting_duration,
     .offset = PLAN(options.retry.initial_backoff_ms),
     .arg = "DURATION",
     .help = "Delay after the first failure",
     .commands = WORKER | RUN},
    {.option = "backoff-max",
     .key = "backoff-max",
     .kind = CLI_SETTING_TEXT,
     .type = &cli_setting_duration,
     .offset = PLAN(options.retry.max_backoff_ms),
     .arg = "DURATION",
     .help = "Longest delay between attempts",
     .commands = WORKER | RUN},
    {.option = "backoff-multiplier",
     .key = "backoff-multiplier",
     .kind = CLI_SETTING_TEXT,
     .type = &multiplier,
     .offset = PLAN(options.retry.multiplier),
     .arg = "X",
     .help = "Growth of the delay per attempt",
     .commands = WORKER | RUN},
    {.option = "no-jitter",
     .key = "jitter",
     .kind = CLI_SETTING_OFF_FLAG,
     .type = &cli_setting_boolean,
     .offset = PLAN(jitter),
     .help = "Exact delays instead of a random draw in [d/2, d]",
     .commands = WORKER | RUN},
};

/* Resolves every row @command takes into @plan (worker_plan_init()
 * first): the option, else the environment, else [worker] of the file
 * (none for `run`), else the default. */
static gboolean
resolve_plan(const CliSettingArgs *args, guint command,
             const CliSettings *settings, WorkerPlan *plan, GError **error)
{
  if (settings != NULL) {
    g_autofree const gchar **keys =
        cli_setting_keys(worker_settings, G_N_ELEMENTS(worker_settings));
    if (!cli_keyfile_check_keys(settings, GROUP_WORKER, keys, error))
      return FALSE;
  }
  if (!cli_settings_apply(args, command, settings, GROUP_WORKER, plan, error))
    return FALSE;
  plan->options.queues = (const gchar *const *)plan->queues;
  plan->options.worker_id = plan->worker_id;
  plan->options.retry.jitter = plan->jitter ? SLUICE_ON : SLUICE_OFF;
  plan->options.track_state = plan->track_state;
  plan->options.queue_weights = plan->weights;
  plan->options.queue_rate_limits =
      (const SluiceQueueRateLimit *)(void *)plan->rate_limits->data;
  plan->options.n_queue_rate_limits = plan->rate_limits->len;
  plan->options.queue_concurrency_limits =
      (const SluiceQueueConcurrencyLimit *)(void *)
          plan->concurrency_limits->data;
  plan->options.n_queue_concurrency_limits = plan->concurrency_limits->len;
  return TRUE;
}

/* The entries of @command's rows, their defaults shown from the library's
 * (transfer full). */
static GOptionEntry *
worker_entries(CliSettingArgs *args, guint command)
{
  WorkerPlan defaults;
  GOptionEntry *entries;

  worker_plan_init(&defaults, TRUE);
  entries = cli_setting_entries(
      args, worker_settings, G_N_ELEMENTS(worker_settings), command, &defaults);
  worker_plan_clear(&defaults);
  return entries;
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

static gboolean
resolve_worker(const CliSettingArgs *args, const CliSettings *settings,
               WorkerPlan *plan, GError **error)
{
  worker_plan_init(plan, FALSE);
  if (!resolve_plan(args, WORKER, settings, plan, error))
    return FALSE;
  if (plan->modules == NULL || plan->modules[0] == NULL)
    return cli_usage_error(error,
                           "no task module: give one with --module PATH.so "
                           "(a shared object exporting sluice_module_init), "
                           "or modules= in the [worker] group of --config");
  /* Read before the worker starts, so that a wrong file fails the start
   * in one line rather than after the worker took tasks. */
  if (!cli_http_tls_load(&plan->metrics_tls, error))
    return FALSE;
  if (cli_http_tls_enabled(&plan->metrics_tls) && plan->metrics_listen == NULL)
    return cli_usage_error(error,
                           "%s is for the metrics endpoint, which needs "
                           "--metrics-listen ADDR:PORT too",
                           plan->metrics_tls.cert.what);
  return cli_periodic_load(settings, &plan->periodics, error);
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
  plan->options.keyring = settings->keyring;
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
      (metrics = cli_metrics_server_start(
           worker, plan->metrics_listen, &plan->metrics_tls, &error)) == NULL) {
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
  CliSettingArgs args = {0};
  CliCommon common = {0};
  CliSettings settings = {0};
  WorkerPlan plan = {0};
  g_autofree GOptionEntry *entries = worker_entries(&args, WORKER);
  g_autoptr(GError) error = NULL;
  int status;

  if (!cli_parse_options(
          &common, CLI_OPTIONS_CONNECTION, entries, "",
          "Run a worker: load task modules and run their tasks from the "
          "queues.\nSIGTERM or SIGINT stops it gracefully (exit status 0); "
          "a second one stops it at once (exit status 1).",
          "The options above --url but --verbose are keys of [worker] in the "
          "--config file\ntoo (--queue is queues=, --module modules=, "
          "--no-X X=false).\n"
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
               plan.verbose ? G_LOG_LEVEL_DEBUG : G_LOG_LEVEL_INFO);
  status = worker_run(&plan, &settings);
out:
  worker_plan_clear(&plan);
  cli_settings_clear(&settings);
  cli_common_clear(&common);
  cli_setting_args_clear(&args);
  return status;
}

/* ---- sluice run ---------------------------------------------------------- */

/* Exit status for a final record, as `sluice result` decides it. */
static int
status_of(const SluiceResult *result)
{
  return sluice_result_get_state(result) == SLUICE_STATE_SUCCEEDED
             ? CLI_EXIT_OK
             : CLI_EXIT_TASK_FAILED;
}

static int
run_task(WorkerPlan *plan, const gchar *task, GBytes *task_args, gboolean json)
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

  sluice_worker_options_init(&options);
  options.concurrency = 1;
  options.prefetch = 0;
  options.track_state = TRUE;
  options.retry = plan->options.retry;
  sluice_enqueue_options_init(&enqueue);
  enqueue.options.timeout_ms = plan->timeout_ms;
  if (plan->modules == NULL) {
    cli_usage_error(&error, "no task module: give one with --module PATH.so");
    return cli_report(error);
  }
  if (!cli_modules_load((const gchar *const *)plan->modules, registry, &error))
    return cli_report(error);
  if (!sluice_registry_contains(registry, task)) {
    g_autofree gchar *tasks = task_list(registry);
    g_set_error(&error, CLI_ERROR, CLI_ERROR_FAILED,
                "no task named “%s” in the modules given; they register: %s",
                task, tasks);
    return cli_report(error);
  }

  broker = sluice_memory_broker_new(NULL, NULL);
  client = cli_client_new(broker, NULL, &error);
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
  result = sluice_client_get_result(client, id, plan->wait_ms, NULL, &error);
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
  CliSettingArgs args = {0};
  CliCommon common = {0};
  WorkerPlan plan = {0};
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) task_args = NULL;
  g_autofree GOptionEntry *entries = worker_entries(&args, RUN);
  int status;

  worker_plan_init(&plan, FALSE);
  if (!cli_parse_options(
          &common, CLI_OPTIONS_JSON, entries, "TASK [ARGS_JSON]",
          "Run one task in this process, with its retries, and print its "
          "final record.\nNo Redis is involved: the task runs on an "
          "in-process memory broker, so this is the way to try a module.",
          "Exit status: 0 succeeded; 3 failed, dead-lettered or cancelled; "
          "4 still running after --wait.\nExample:\n  sluice run demo.echo "
          "'{\"hello\": 1}' --module ./examples/demo-module/.libs/demo.so",
          &argc, &argv, &error) ||
      !resolve_plan(&args, RUN, NULL, &plan, &error)) {
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
  cli_log_init(plan.log_format,
               plan.verbose ? G_LOG_LEVEL_INFO : G_LOG_LEVEL_WARNING);
  status = run_task(&plan, argv[1], task_args, common.json);
out:
  worker_plan_clear(&plan);
  cli_common_clear(&common);
  cli_setting_args_clear(&args);
  return status;
}

/* cmd-enqueue.c - `sluice enqueue TASK [ARGS_JSON]`: put one task on a
 * queue (or on the schedule) and print its id.
 *
 * The arguments are JSON on the command line (or "-" for standard input),
 * converted to msgpack by sluice_args_from_json(): integers stay integers,
 * other numbers become float64. The producer needs no task module: the
 * name is only checked for its form, and a name no worker knows is
 * deferred by the workers and buried `unknown_task` after 10 minutes.
 *
 * The client tracks state, so the task has a `queued` (or `scheduled`)
 * record from the start and `sluice inspect` finds it at once. With
 * --events ($SLUICE_EVENTS, `events` of [enqueue]) it also writes the
 * task's "enqueued" event, the first of those `sluice events` shows.
 */
#include "config.h"

#include <string.h>

#include "cli/cli.h"

typedef struct {
  gchar *queue;
  gchar *delay;
  gchar *at;
  gchar *max_attempts;
  gchar *timeout;
  gchar *hard_timeout;
  gchar *expires;
  gchar *id;
  gchar **headers;
  gchar *unique_key;
  gchar *unique_scope;
  gboolean replace;
  gchar *debounce;
  gboolean events;
} EnqueueArgs;

static void
enqueue_args_clear(EnqueueArgs *args)
{
  g_free(args->queue);
  g_free(args->delay);
  g_free(args->at);
  g_free(args->max_attempts);
  g_free(args->timeout);
  g_free(args->hard_timeout);
  g_free(args->expires);
  g_free(args->id);
  g_strfreev(args->headers);
  g_free(args->unique_key);
  g_free(args->unique_scope);
  g_free(args->debounce);
}

/* The --unique-* options into @unique (pointed at by @out), if any. */
static gboolean
resolve_unique(const EnqueueArgs *args, SluiceEnqueueOptions *out,
               SluiceUniqueOptions *unique, GError **error)
{
  const gchar *scope = args->unique_scope;

  if (args->unique_key == NULL && scope == NULL) {
    if (args->replace || args->debounce != NULL)
      return cli_usage_error(error, "--replace and --debounce need "
                                    "--unique-key or --unique-scope");
    return TRUE;
  }
  memset(unique, 0, sizeof *unique);
  unique->key = args->unique_key;
  unique->replace = args->replace;
  if (scope == NULL || g_str_equal(scope, "queued")) {
    unique->scope = SLUICE_UNIQUE_WHILE_QUEUED;
  } else if (g_str_equal(scope, "running")) {
    unique->scope = SLUICE_UNIQUE_WHILE_RUNNING;
  } else if (g_str_has_prefix(scope, "ttl:")) {
    unique->scope = SLUICE_UNIQUE_FOR_TTL;
    if (!cli_parse_duration("--unique-scope ttl", scope + 4, &unique->ttl_ms,
                            error))
      return FALSE;
    if (unique->ttl_ms <= 0)
      return cli_usage_error(error, "--unique-scope ttl: give a duration "
                                    "above 0, e.g. ttl:30s");
  } else {
    return cli_usage_error(error,
                           "--unique-scope: “%s” is not queued, running or "
                           "ttl:DURATION (e.g. ttl:30s)",
                           scope);
  }
  if (args->debounce != NULL) {
    if (!cli_parse_duration("--debounce", args->debounce, &unique->debounce_ms,
                            error))
      return FALSE;
    if (unique->debounce_ms <= 0)
      return cli_usage_error(error, "--debounce: give a duration above 0");
  }
  out->unique = unique;
  return TRUE;
}

/* Turns the options into @out; @headers receives the --header pairs. */
static gboolean
resolve(const EnqueueArgs *args, SluiceEnqueueOptions *out, GHashTable *headers,
        SluiceUniqueOptions *unique, GError **error)
{
  guint64 n;
  gint64 ms;

  sluice_enqueue_options_init(out);
  out->queue = args->queue;
  out->id = args->id;
  if (args->delay != NULL && args->at != NULL)
    return cli_usage_error(error, "--delay and --at cannot be combined: "
                                  "give one of them");
  if (args->delay != NULL &&
      !cli_parse_duration("--delay", args->delay, &out->delay_ms, error))
    return FALSE;
  if (args->at != NULL &&
      !cli_parse_time("--at", args->at, &out->eta_ms, error))
    return FALSE;
  if (args->max_attempts != NULL) {
    if (!cli_parse_count("--max-attempts", args->max_attempts, 1, 1000, &n,
                         error))
      return FALSE;
    out->options.retry.max_attempts = (gint)n;
  }
  if (args->timeout != NULL) {
    if (!cli_parse_duration("--timeout", args->timeout,
                            &out->options.timeout_ms, error))
      return FALSE;
    if (out->options.timeout_ms == 0)
      return cli_usage_error(error, "--timeout: give a duration above 0 "
                                    "(no --timeout means no limit)");
  }
  if (args->hard_timeout != NULL) {
    if (!cli_parse_duration("--hard-timeout", args->hard_timeout,
                            &out->options.hard_timeout_ms, error))
      return FALSE;
    if (out->options.hard_timeout_ms == 0)
      return cli_usage_error(error,
                             "--hard-timeout: give a duration above 0 (no "
                             "--hard-timeout means the task's or the "
                             "worker's)");
  }
  if (args->expires != NULL) {
    if (!cli_parse_duration("--expires", args->expires, &ms, error))
      return FALSE;
    out->options.expires_at = g_get_real_time() / 1000 + ms;
  }
  for (guint i = 0; args->headers != NULL && args->headers[i] != NULL; i++) {
    const gchar *eq = strchr(args->headers[i], '=');
    if (eq == NULL || eq == args->headers[i])
      return cli_usage_error(error,
                             "--header: “%s” is not NAME=VALUE (e.g. "
                             "--header tenant=acme)",
                             args->headers[i]);
    g_hash_table_insert(
        headers, g_strndup(args->headers[i], (gsize)(eq - args->headers[i])),
        g_strdup(eq + 1));
  }
  if (g_hash_table_size(headers) > 0)
    out->headers = headers;
  return resolve_unique(args, out, unique, error);
}

/* A typo in a task name, or a rollout that has not reached any worker, is
 * silent otherwise: the message waits, deferred, for ten minutes, then is
 * buried. Say so now (the task is enqueued anyway: a worker may be on its
 * way). Only workers that announce what they serve count. */
static void
warn_if_unserved(SluiceClient *client, const gchar *ns, const gchar *task)
{
  g_autoptr(GError) error = NULL;
  guint serving = 0, announced = 0;

  if (!sluice_client_count_servers(client, task, &serving, &announced,
                                   &error) ||
      serving > 0)
    return;
  if (announced == 0)
    fprintf(stderr,
            "%s: warning: no worker of namespace %s is alive now; the task "
            "waits until one that serves “%s” starts\n",
            g_get_prgname(), ns, task);
  else
    fprintf(stderr,
            "%s: warning: none of the %u live workers of namespace %s serves "
            "a task named “%s” (a typo? a rollout not done yet?); it is "
            "deferred until one does, and buried unknown_task after "
            "unknown_task_timeout (see `sluice stats` for what each worker "
            "serves)\n",
            g_get_prgname(), announced, ns, task);
}

/* The keys of [enqueue] in the key file. */
#define GROUP_ENQUEUE "enqueue"
static const gchar *const enqueue_keys[] = {"events", NULL};

/* cli_open_client(), with the client's events as the settings say. */
static SluiceClient *
open_client(const CliCommon *common, gboolean events_flag,
            CliSettings *settings, GError **error)
{
  g_autoptr(SluiceBroker) broker = NULL;
  SluiceClientOptions options;

  cli_log_init(CLI_LOG_TEXT, G_LOG_LEVEL_WARNING);
  sluice_client_options_init(&options);
  options.track_state = TRUE;
  if (!cli_settings_load(common, settings, error) ||
      !cli_keyfile_check_keys(settings, GROUP_ENQUEUE, enqueue_keys, error) ||
      !cli_events_setting(events_flag, settings, GROUP_ENQUEUE, &options.events,
                          error) ||
      (broker = cli_connect(settings, 0, TRUE, error)) == NULL)
    return NULL;
  options.keyring = settings->keyring;
  return sluice_client_new(broker, &options, error);
}

static int
enqueue(const CliCommon *common, const EnqueueArgs *args, const gchar *task,
        GBytes *task_args, const SluiceEnqueueOptions *options)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autofree gchar *id = NULL;
  g_auto(CliSettings) settings = {0};
  gboolean existed = FALSE;
  int status = CLI_EXIT_OK;

  if ((client = open_client(common, args->events, &settings, &error)) == NULL ||
      (id = sluice_client_enqueue_full(client, task, task_args, options,
                                       &existed, &error)) == NULL)
    return cli_report(error);
  if (common->json) {
    g_autoptr(CliJson) json = cli_json_new();
    cli_json_begin_object(json);
    cli_json_key(json, "id");
    cli_json_string(json, id);
    cli_json_key(json, "existed");
    cli_json_bool(json, existed);
    if (options->unique != NULL) {
      cli_json_key(json, "unique_held");
      cli_json_bool(json, existed);
    }
    cli_json_end_object(json);
    cli_json_print(json);
  } else {
    printf("%s\n", id);
  }
  if (existed && options->unique != NULL)
    fprintf(stderr,
            "%s: the uniqueness key is held by task %s: nothing new was "
            "written\n",
            g_get_prgname(), id);
  else if (existed)
    fprintf(stderr,
            "%s: task %s was enqueued before (within 24 h): nothing new was "
            "written\n",
            g_get_prgname(), id);
  warn_if_unserved(client, settings.namespace_, task);
  return status;
}

int
cli_cmd_enqueue(int argc, char **argv)
{
  EnqueueArgs args = {0};
  CliCommon common = {0};
  SluiceEnqueueOptions options;
  SluiceUniqueOptions unique;
  g_autoptr(GHashTable) headers =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) task_args = NULL;
  int status;
  const GOptionEntry entries[] = {
      {"queue", 'q', 0, G_OPTION_ARG_STRING, &args.queue,
       "The queue (default: default)", "Q"},
      {"delay", 0, 0, G_OPTION_ARG_STRING, &args.delay,
       "Run no earlier than this long from now", "DURATION"},
      {"at", 0, 0, G_OPTION_ARG_STRING, &args.at,
       "Run no earlier than this time (local time without an offset)",
       "ISO8601"},
      {"max-attempts", 0, 0, G_OPTION_ARG_STRING, &args.max_attempts,
       "Attempts in all, the first included (default: the task's, else 3)",
       "N"},
      {"timeout", 0, 0, G_OPTION_ARG_STRING, &args.timeout,
       "Fail an attempt that runs longer than this", "DURATION"},
      {"hard-timeout", 0, 0, G_OPTION_ARG_STRING, &args.hard_timeout,
       "Kill the process running it after this long (workers with "
       "--isolation process)",
       "DURATION"},
      {"expires", 0, 0, G_OPTION_ARG_STRING, &args.expires,
       "Bury it (reason expired) if it has not started within this long",
       "DURATION"},
      {"id", 0, 0, G_OPTION_ARG_STRING, &args.id,
       "Use this task id; enqueueing the same id again within 24 h writes "
       "nothing",
       "ID"},
      {"header", 0, 0, G_OPTION_ARG_STRING_ARRAY, &args.headers,
       "A message header (repeat it)", "NAME=VALUE"},
      {"unique-key", 0, 0, G_OPTION_ARG_STRING, &args.unique_key,
       "Enqueue only if no task holds this uniqueness key (without it, "
       "--unique-scope derives the key from the task and its arguments)",
       "KEY"},
      {"unique-scope", 0, 0, G_OPTION_ARG_STRING, &args.unique_scope,
       "How long the key is held: queued (default), running, or ttl:DURATION",
       "SCOPE"},
      {"replace", 0, 0, G_OPTION_ARG_NONE, &args.replace,
       "Replace the holder of the key if it has not started", NULL},
      {"debounce", 0, 0, G_OPTION_ARG_STRING, &args.debounce,
       "Run only the last of a burst: delay it this long, each new one "
       "replacing it and pushing it on",
       "DURATION"},
      {"events", 0, 0, G_OPTION_ARG_NONE, &args.events,
       "Write the task's \"enqueued\" event to the namespace's event stream "
       "(sluice events), as workers with --events write the rest",
       NULL},
      {NULL}};

  if (!cli_parse_options(
          &common, CLI_OPTIONS_CONNECTION | CLI_OPTIONS_JSON, entries,
          "TASK [ARGS_JSON]",
          "Enqueue a task and print its id.\nARGS_JSON is one JSON value "
          "(\"-\" reads it from standard input); it is converted to "
          "msgpack.",
          "Arguments that begin with \"-\" go after \"--\":  sluice enqueue "
          "math.neg -- -5\nExample:\n  sluice enqueue demo.echo '{\"to\": "
          "\"world\"}' --queue default --delay 30s",
          &argc, &argv, &error) ||
      !resolve(&args, &options, headers, &unique, &error)) {
    status = cli_report(error);
    goto out;
  }
  if (argc < 2 || argc > 3) {
    cli_usage_error(&error,
                    argc < 2 ? "which task? give its name, e.g. sluice "
                               "enqueue demo.echo '{\"a\": 1}'"
                             : "too many arguments: the task's arguments are "
                               "one JSON value (quote it)");
    status = cli_report(error);
    goto out;
  }
  if (argc == 3 && (task_args = cli_read_args(argv[2], &error)) == NULL) {
    status = cli_report(error);
    goto out;
  }
  status = enqueue(&common, &args, argv[1], task_args, &options);
out:
  cli_common_clear(&common);
  enqueue_args_clear(&args);
  return status;
}

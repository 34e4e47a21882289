/* cli.h - what the files of the `sluice` command share.
 *
 * The command is one program with a subcommand per file:
 *
 *   main.c         dispatch, `sluice --help`, `sluice --version`
 *   cmd-worker.c   `sluice worker`, and `sluice run` (one task, in process)
 *   cmd-enqueue.c  `sluice enqueue`
 *   cmd-task.c     `sluice result`, `sluice inspect`, `sluice cancel`
 *   cmd-dlq.c      `sluice dlq list|show|replay|purge`
 *   cmd-stats.c    `sluice stats`
 *   cmd-ls.c       `sluice ls`
 *   cmd-queue.c    `sluice pause|resume|purge|delete|run-now`
 *   cmd-periodic.c `sluice periodic ls`
 *   cmd-exporter.c `sluice exporter` (the namespace's gauges over HTTP)
 *   cmd-web.c      `sluice web` (the dashboard; web-api.c serves its pages
 *                  and JSON API, web-rates.c keeps its chart's history;
 *                  web.h)
 *
 * and helpers:
 *
 *   errors.c       one-line errors, exit statuses
 *   common.c       option parsing
 *   settings.c     settings tables (option, environment, key file), the
 *                  connection's, and the broker they describe
 *   parse.c        durations, ISO 8601 times, numbers
 *   output.c       tables, the JSON writer, times, terminal-safe text
 *   records.c      each record as JSON, written once for the command and
 *                  the dashboard alike (stats, workers, dead letters, ...)
 *   log.c          the log writer (journald, text or JSON lines)
 *   modules.c      task modules (GModule)
 *   progress.c     progress bars of bulk commands, the --yes rule
 *   periodic-config.c  periodic schedules of the key file
 *   http.c         HTTP endpoints: listen addresses, the server (http.h)
 *   metrics-server.c  the worker's /metrics and /healthz
 *
 * The command uses only the public API (it links libsluice.la, which
 * exports nothing else). It keeps no global state of its own: each
 * subcommand builds what it needs on its stack and frees it before it
 * returns. The only process-wide things are GLib's: the program name
 * (g_set_prgname, set once per process from the subcommand) and the log
 * writer (g_log_set_writer_func, installed once).
 */
#pragma once

#include <stdio.h>

#include <sluice/sluice.h>

G_BEGIN_DECLS

/* ---- Exit statuses (documented in sluice(1), EXIT STATUS) ---------------- */

enum {
  CLI_EXIT_OK = 0,
  CLI_EXIT_FAILURE = 1,      /* a runtime failure: Redis, not found, ... */
  CLI_EXIT_USAGE = 2,        /* the command line or configuration is wrong */
  CLI_EXIT_TASK_FAILED = 3,  /* result: failed, dead_lettered or cancelled */
  CLI_EXIT_NOT_FINISHED = 4, /* result: not final (yet, or within --wait) */
};

/* Errors of the command itself. USAGE maps to exit status 2, FAILED to 1. */
#define CLI_ERROR (cli_error_quark())
GQuark cli_error_quark(void);
typedef enum {
  CLI_ERROR_FAILED,
  CLI_ERROR_USAGE,
} CliError;

/**
 * cli_report:
 * @error: (transfer none): what went wrong
 *
 * Prints "<prgname>: <message>" on one line to stderr (newlines in the
 * message become spaces, so a caller can rely on one line per error).
 * Returns: the exit status for @error: 2 for usage errors (CLI_ERROR_USAGE,
 * G_OPTION_ERROR, SLUICE_BROKER_ERROR_INVALID, SLUICE_CLIENT_ERROR_INVALID
 * and _TOO_LARGE), 1 for anything else.
 */
int cli_report(const GError *error);

/** cli_exit_status_for: Returns: the exit status cli_report() would. */
int cli_exit_status_for(const GError *error);

/**
 * cli_usage_error:
 * Sets @error to CLI_ERROR_USAGE with a printf-style message.
 * Returns: FALSE, always, so `return cli_usage_error (...)` reads well.
 */
gboolean cli_usage_error(GError **error, const gchar *format, ...)
    G_GNUC_PRINTF(2, 3);

/* The process's log writer settings (see log.c). */
typedef struct _CliLog CliLog;

/* ---- Settings tables (settings.c) ---------------------------------------- */

/* A command's settings are rows of a table, one per setting: its option,
 * its environment variable, its key in the command's group of the key
 * file, how its value is parsed and where it goes, its default and its
 * help. --help, the known keys of the group and the reading of each value
 * all come from the rows, so that no setting is offered one way and
 * missed another (cli_connection_settings[] here, `sluice worker`'s in
 * cmd-worker.c). First match wins: the option, else the environment, else
 * the key file, else the default. */

typedef enum {
  CLI_SETTING_TEXT,          /* --opt VALUE; a string key */
  CLI_SETTING_FILENAME,      /* the same, a path (--opt takes the locale's
                                encoding) */
  CLI_SETTING_LIST,          /* --opt VALUE, repeatable; a list key (a;b;) */
  CLI_SETTING_FILENAME_LIST, /* the same, of paths */
  CLI_SETTING_FLAG,          /* --opt turns it on; a boolean key */
  CLI_SETTING_OFF_FLAG,      /* --opt turns it off; a boolean key */
} CliSettingKind;

typedef struct _CliSetting CliSetting;
typedef struct _CliSettings CliSettings;

/**
 * CliSettingValue:
 * @given: the option, the environment or the key file had it (else the
 *   default applies and the rest is empty)
 * @text: (nullable): TEXT and FILENAME kinds: the value
 * @list: (nullable): the LIST kinds: the values
 * @on: the FLAG kinds: on or off
 * @what: (nullable): where it came from, for messages: "--concurrency",
 *   "SLUICE_EVENTS", "FILE: [worker] concurrency"
 *
 * One setting, as found. Owns what it points to: clear with
 * cli_setting_value_clear().
 */
typedef struct {
  gboolean given;
  const gchar *text;
  gchar *const *list;
  gboolean on;
  gchar *what;
  /*< private >*/
  gchar *owned;
  gchar **owned_list;
} CliSettingValue;

void cli_setting_value_clear(CliSettingValue *value);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(CliSettingValue, cli_setting_value_clear)

/**
 * CliSettingType:
 * @parse: checks @value (given) and stores it in @base at @row->offset;
 *   FALSE and a usage error naming @value->what
 * @show: (nullable): the value stored in @base at @row->offset, as --help
 *   shows a default ("4", "30s")
 *
 * How the values of a row are read. cli_setting_count and the others
 * below are the common ones; a command adds its own.
 */
typedef struct {
  gboolean (*parse)(const CliSetting *row, const CliSettingValue *value,
                    gpointer base, GError **error);
  gchar *(*show)(const CliSetting *row, gconstpointer base);
} CliSettingType;

/* A whole number in [min, max], into a guint. */
extern const CliSettingType cli_setting_count;
/* The same, into a gint. */
extern const CliSettingType cli_setting_int;
/* A duration (cli_parse_duration()), in ms into a gint64; at least @min. */
extern const CliSettingType cli_setting_duration;
/* A size in bytes (cli_parse_size()), into a guint64. */
extern const CliSettingType cli_setting_size;
/* A string, into a gchar* the struct owns. */
extern const CliSettingType cli_setting_string;
/* A list, into a gchar** the struct owns. */
extern const CliSettingType cli_setting_strv;
/* On or off (the FLAG kinds), into a gboolean. */
extern const CliSettingType cli_setting_boolean;

/**
 * CliSetting:
 * @option: (nullable): the long option, without "--"; NULL: none
 * @short_name: its one-letter form, or 0
 * @env: (nullable): the environment variable; NULL: none
 * @key: (nullable): the key in the command's group; NULL: none
 * @kind: what the option takes (and the key holds)
 * @type: (nullable): how the value is read; NULL: the command reads it by
 *   code (cli_setting_get())
 * @offset: where @type stores it, in the command's struct
 * @min, @max: the range of cli_setting_count and cli_setting_int; the
 *   least of cli_setting_duration
 * @arg: (nullable): --help's name of the value ("N", "DURATION")
 * @help: one line for --help, without the default
 * @default_text: (nullable): the default as --help shows it, where
 *   @type->show cannot say it from the defaults ("none", "HOST-PID-RANDOM")
 * @commands: which commands take it, as the table's owner numbers them
 *   (bits); 0 = every one
 */
struct _CliSetting {
  const gchar *option;
  gchar short_name;
  const gchar *env;
  const gchar *key;
  CliSettingKind kind;
  const CliSettingType *type;
  gsize offset;
  guint64 min, max;
  const gchar *arg;
  const gchar *help;
  const gchar *default_text;
  guint commands;
};

/**
 * CliSettingArgs:
 * What a command line gave for the rows of a table: a value slot per row,
 * which GOption fills (cli_setting_entries()). A zero-filled one is an
 * empty command line. Clear with cli_setting_args_clear().
 */
typedef struct _CliSettingArgs {
  const CliSetting *rows;
  gsize n_rows;
  /*< private >*/
  gchar **text;    /* TEXT and FILENAME rows */
  gchar ***lists;  /* LIST rows */
  gboolean *flags; /* FLAG rows */
  GPtrArray *help; /* the composed help lines GOption points to */
} CliSettingArgs;

void cli_setting_args_clear(CliSettingArgs *args);

/**
 * cli_setting_entries:
 * @args: (out caller-allocates): zero-filled, or filled by an earlier call
 *   with the same rows
 * @commands: the command's bit: only its rows (and those of every command)
 * @defaults: (nullable): a struct holding the defaults, for the rows'
 *   @type->show; NULL: show only @default_text
 * Returns: (transfer full): GOption entries (NULL-terminated) that store
 * into @args, each help line ending with its default, "(default 4)";
 * g_free() them once parsed.
 */
GOptionEntry *cli_setting_entries(CliSettingArgs *args, const CliSetting *rows,
                                  gsize n_rows, guint commands,
                                  gconstpointer defaults);

/**
 * cli_setting_get:
 * @i: the row
 * @settings: (nullable): the loaded settings, for the key file (NULL: none)
 * @group: the command's group of the key file
 * @out: (out caller-allocates): where it was found, if anywhere
 * Returns: FALSE and a usage error for a boolean of the environment or the
 * key file that is not one.
 */
gboolean cli_setting_get(const CliSettingArgs *args, gsize i,
                         const CliSettings *settings, const gchar *group,
                         CliSettingValue *out, GError **error);

/**
 * cli_settings_apply:
 * Reads every row of @args's table that @commands takes and that has a
 * @type, in the table's order, and stores what was given into @base (a
 * row not given keeps what @base holds: the default).
 * Returns: FALSE and the first row's usage error.
 */
gboolean cli_settings_apply(const CliSettingArgs *args, guint commands,
                            const CliSettings *settings, const gchar *group,
                            gpointer base, GError **error);

/**
 * cli_setting_keys:
 * Returns: (transfer container): the keys of @rows (those with one),
 * NULL-terminated, for cli_keyfile_check_keys().
 */
const gchar **cli_setting_keys(const CliSetting *rows, gsize n_rows);

/**
 * cli_parse_boolean:
 * @text: 1 or 0, true or false, yes or no, on or off (any case)
 * Returns: FALSE and a usage error naming @what for anything else.
 */
gboolean cli_parse_boolean(const gchar *what, const gchar *text, gboolean *out,
                           GError **error);

/* ---- Option parsing ------------------------------------------------------ */

/* What a subcommand's options may include besides its own. */
typedef enum {
  CLI_OPTIONS_CONNECTION = 1 << 0, /* --url --mode --namespace --config */
  CLI_OPTIONS_JSON = 1 << 1,       /* --json */
} CliOptionSets;

/**
 * CliCommon:
 * The options every subcommand shares, as given on its command line (NULL
 * or FALSE when not given): the connection's, whose table is
 * cli_connection_settings[] (settings.c), and --json. Owns its strings:
 * clear with cli_common_clear().
 */
typedef struct {
  CliSettingArgs connection; /* the rows of cli_connection_settings[] */
  gboolean json;
  /* Not an option: set by a command that only reads (stats, ls, inspect,
   * ...) before it connects, so that a user who may not write a SQLite
   * database can still read it (cli_connect()). */
  gboolean read_only;
} CliCommon;

void cli_common_clear(CliCommon *common);

/**
 * cli_connection_entries:
 * Returns: (transfer full): the GOption entries of the connection's
 * settings (--url, --mode, ...: cli_connection_settings[] of settings.c),
 * storing into @common; g_free() them once parsed.
 */
GOptionEntry *cli_connection_entries(CliCommon *common);

/**
 * cli_parse_options:
 * @common: (out caller-allocates): zero-filled; receives the shared options
 * @sets: which shared options the subcommand takes
 * @entries: (nullable): the subcommand's own options (NULL-terminated)
 * @parameters: e.g. "TASK [ARGS_JSON]", for the usage line
 * @summary: one paragraph shown by --help above the options
 * @description: (nullable): shown by --help below the options
 * @argc, @argv: the subcommand's arguments (argv[0] = its name); on
 *   return they hold only the positional arguments after argv[0], with a
 *   "--" separator removed
 *
 * Builds a GOptionContext for one subcommand (with its own --help) and
 * parses. Returns: TRUE, or FALSE and a usage error naming the problem.
 */
gboolean cli_parse_options(CliCommon *common, CliOptionSets sets,
                           const GOptionEntry *entries, const gchar *parameters,
                           const gchar *summary, const gchar *description,
                           int *argc, char ***argv, GError **error);

/* ---- Settings and the broker (settings.c) -------------------------------- */

typedef enum {
  CLI_MODE_FAST,
  CLI_MODE_RELIABLE,
  CLI_MODE_MEMORY,
  CLI_MODE_SQLITE, /* a sqlite:// URL: Redis's mode does not apply */
} CliMode;

/**
 * CliSettings:
 * @url: the broker's URL: Redis, or sqlite:///path (never NULL once loaded)
 * @url_is_default: no URL was given anywhere: @url is the SQLite database
 *   in the user's state directory (cli_default_sqlite_path())
 * @mode: fast, reliable or memory; sqlite for a sqlite:// URL
 * @namespace_: the key namespace (never NULL once loaded)
 * @keyfile: (nullable): the configuration file, when one was given; other
 *   sections ([worker]) are read from it by the subcommands
 * @config_path: (nullable): its path, for messages
 * @min_replicas_ack: Redis: replicas each enqueue and settle waits for
 *   (--min-replicas-ack, SLUICE_MIN_REPLICAS_ACK, min_replicas_ack in
 *   [connection]; 0 = the URL's min_replicas_ack parameter, else none)
 *
 * Resolved, each setting on its own, from: the command line, else the
 * environment (SLUICE_URL, SLUICE_MODE, SLUICE_NAMESPACE), else the
 * [connection] group of the key file (--config, else SLUICE_CONFIG), else
 * the defaults. A password file (--password-file, SLUICE_PASSWORD_FILE or
 * password_file in [connection]) puts its password into @url, which then
 * holds it: show url only through the broker's messages, which hide it.
 * Owns everything; clear with cli_settings_clear().
 */
struct _CliSettings {
  gchar *url;
  gboolean url_is_default;
  CliMode mode;
  gchar *namespace_;
  GKeyFile *keyfile;
  gchar *config_path;
  guint min_replicas_ack;
  gboolean read_only;     /* CliCommon.read_only */
  SluiceKeyring *keyring; /* --keyring, SLUICE_KEYRING, keyring; or NULL */
};

/**
 * cli_check_private_file:
 * @path: (transfer none): a file that holds a secret (a password, a token)
 * @what: (transfer none): what it is, for the message ("the password file")
 * @source: (transfer none): where the path came from ("--password-file")
 *
 * Refuses a secret that other users of the machine can read (any group or
 * other permission bit), naming the path and the fix, unless it lies under
 * $CREDENTIALS_DIRECTORY, where systemd keeps the service's private copies.
 * Returns: TRUE if the file may be used; FALSE with @error set (usage).
 */
gboolean cli_check_private_file(const gchar *path, const gchar *what,
                                const gchar *source, GError **error);

gboolean cli_settings_load(const CliCommon *common, CliSettings *out,
                           GError **error);
void cli_settings_clear(CliSettings *settings);

/* Returns: (transfer full): the database the command uses when no URL is
 * given anywhere: $STATE_DIRECTORY/sluice.db under systemd (a system
 * service with StateDirectory=sluice: /var/lib/sluice/sluice.db), else
 * $XDG_STATE_HOME/sluice/sluice.db, else ~/.local/state/sluice/sluice.db. */
gchar *cli_default_sqlite_path(void);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(CliSettings, cli_settings_clear)

/** cli_mode_name: Returns: (transfer none): "fast", "reliable", "memory". */
const gchar *cli_mode_name(CliMode mode);

/**
 * cli_connect:
 * @settings: loaded settings
 * @dead_letter_max: the broker's cap on dead letters (0 = the default)
 * @check_now: contact the broker now (sluice_broker_check), so that an
 *   unreachable server, a refused password or a namespace of the other
 *   mode is reported before anything else happens; a worker that waits
 *   out an unreachable Redis passes FALSE (its start checks the rest)
 *
 * Makes the broker the settings describe. The memory mode is refused: its
 * messages live inside one process, so no other `sluice` process (nor a
 * worker) could see them. A SQLite database this user may not write is
 * opened read-only when @settings->read_only is set (a command that only
 * reads), and refused otherwise with a message that says so.
 * Returns: (transfer full): the broker, or NULL and @error.
 */
SluiceBroker *cli_connect(const CliSettings *settings, guint dead_letter_max,
                          gboolean check_now, GError **error);

/**
 * cli_client_new:
 * Returns: (transfer full): a client of @broker with state tracking on, so
 * that `sluice inspect` shows queued and scheduled tasks, sealing and
 * opening with @settings' keyring (@settings may be NULL: none); or NULL
 * and @error.
 */
SluiceClient *cli_client_new(SluiceBroker *broker, const CliSettings *settings,
                             GError **error);

/**
 * cli_open_client:
 * @out_settings: (out caller-allocates) (optional): the settings used, set
 *   only on success; clear them with cli_settings_clear()
 *
 * What a one-shot command (enqueue, result, dlq, stats, ...) does first:
 * installs the log writer (text lines, warnings and worse), loads the
 * settings, connects and pings (cli_connect()) and makes a client
 * (cli_client_new()).
 * Returns: (transfer full): the client, or NULL and @error.
 */
SluiceClient *cli_open_client(const CliCommon *common,
                              CliSettings *out_settings, GError **error);

/**
 * cli_events_setting:
 * @flag: the command's --events was given
 * @group: the key file group whose `events` key applies ("worker",
 *   "enqueue")
 * @out: (out): whether the command writes lifecycle events
 *
 * The one rule for `sluice worker` and `sluice enqueue`: --events, else
 * $SLUICE_EVENTS (true/false, yes/no, on/off, 1/0), else `events` of
 * [@group] in the key file, else off.
 * Returns: FALSE with a usage error for a value that is not a boolean.
 */
gboolean cli_events_setting(gboolean flag, const CliSettings *settings,
                            const gchar *group, gboolean *out, GError **error);

/**
 * cli_keyfile_check_keys:
 * @settings: the settings, with the configuration file if any
 * @group: a group name
 * @known: (array zero-terminated=1): the keys the command understands
 *
 * A misspelled key would otherwise be silently ignored.
 * Returns: FALSE and a usage error naming the first unknown key.
 */
gboolean cli_keyfile_check_keys(const CliSettings *settings, const gchar *group,
                                const gchar *const *known, GError **error);

/* ---- Parsing values (parse.c) -------------------------------------------- */

/**
 * cli_parse_duration:
 * @what: the option's name, for the message ("--delay")
 * @text: "0", or a whole number followed by ms, s, m or h
 * @out_ms: (out): the duration in milliseconds
 * Returns: FALSE and a usage error explaining the format.
 */
gboolean cli_parse_duration(const gchar *what, const gchar *text,
                            gint64 *out_ms, GError **error);

/**
 * cli_parse_rate_period:
 * @text: a duration (see cli_parse_duration(), not 0), or a bare unit
 *   meaning one of it, as in Celery's rate strings (10/s, 100/m, 1000/h)
 * Returns: FALSE and a usage error explaining the format.
 */
gboolean cli_parse_rate_period(const gchar *what, const gchar *text,
                               gint64 *out_ms, GError **error);

/**
 * cli_parse_time:
 * @text: an ISO 8601 date and time; without an offset it is local time
 * @out_ms: (out): milliseconds since the epoch
 * Returns: FALSE and a usage error with an example.
 */
gboolean cli_parse_time(const gchar *what, const gchar *text, gint64 *out_ms,
                        GError **error);

/**
 * cli_parse_since:
 * @text: an ISO 8601 date and time (as cli_parse_time()), or a duration
 *   (as cli_parse_duration()) meaning that long before now
 * @out_ms: (out): milliseconds since the epoch
 * Returns: FALSE and a usage error with both forms.
 */
gboolean cli_parse_since(const gchar *what, const gchar *text, gint64 *out_ms,
                         GError **error);

/**
 * cli_parse_count:
 * Parses a whole number in [@min, @max]. Returns: FALSE and a usage error.
 */
gboolean cli_parse_count(const gchar *what, const gchar *text, guint64 min,
                         guint64 max, guint64 *out, GError **error);

/**
 * cli_parse_size:
 * @text: a whole number of bytes, or one followed by K, M or G (powers of
 *   1024; KiB, MiB, GiB too)
 * Returns: FALSE and a usage error explaining the format.
 */
gboolean cli_parse_size(const gchar *what, const gchar *text,
                        guint64 *out_bytes, GError **error);

/**
 * cli_check_reason:
 * @what: the option or parameter, for the message ("--reason")
 * @reason: (nullable): a dead-letter reason given with it
 * Returns: TRUE if NULL or one of sluice_dead_letter_reasons(); else FALSE
 * and a usage error listing them.
 */
gboolean cli_check_reason(const gchar *what, const gchar *reason,
                          GError **error);

/**
 * cli_parse_list_state:
 * @what: the option or parameter, for the message ("--state")
 * @text: (nullable): queued, scheduled, retrying, running, or (with
 *   @dead_too) dead or dead_lettered
 * @out: (out): the state, for SluiceListOptions.state
 * The one list of the states `sluice ls` and /api/tasks page through.
 * Returns: FALSE and a usage error naming the states taken.
 */
gboolean cli_parse_list_state(const gchar *what, const gchar *text,
                              gboolean dead_too, SluiceTaskState *out,
                              GError **error);

/**
 * cli_read_args:
 * @text: JSON text, or "-" to read it from standard input
 * Returns: (transfer full): the arguments as msgpack, or NULL and a usage
 * error naming the line and column of a JSON syntax error.
 */
GBytes *cli_read_args(const gchar *text, GError **error);

/* ---- Output (output.c) --------------------------------------------------- */

/**
 * CliJson:
 * A small JSON writer into a GString: objects, arrays, strings, integers,
 * booleans, null and pre-rendered JSON values (the task's arguments and
 * results, already converted by sluice_args_to_json()), pretty-printed
 * with two-space indentation. It never renders a floating-point number
 * itself. Nesting is limited to 32 levels.
 */
typedef struct {
  GString *out;
  guint depth;
  gboolean first[32]; /* whether the container at each depth is empty */
  gboolean after_key;
} CliJson;

/** cli_json_new: Returns: (transfer full): free with cli_json_free(). */
CliJson *cli_json_new(void);
void cli_json_free(CliJson *json);
void cli_json_begin_object(CliJson *json);
void cli_json_end_object(CliJson *json);
void cli_json_begin_array(CliJson *json);
void cli_json_end_array(CliJson *json);
void cli_json_key(CliJson *json, const gchar *key);
/** cli_json_string: writes @value, or null when it is NULL. */
void cli_json_string(CliJson *json, const gchar *value);
void cli_json_int(CliJson *json, gint64 value);
void cli_json_bool(CliJson *json, gboolean value);
void cli_json_null(CliJson *json);
/** cli_json_raw: writes @text, which must be one valid JSON value. */
void cli_json_raw(CliJson *json, const gchar *text);
/** cli_json_time: writes @ms, or null when it is 0 (not reached). */
void cli_json_time(CliJson *json, gint64 ms);
/**
 * cli_json_append_string:
 * @length: bytes of @text, or -1 if NUL-terminated
 * Appends @text to @out as a quoted JSON string (made valid UTF-8 first).
 */
void cli_json_append_string(GString *out, const gchar *text, gssize length);
/** cli_json_print: writes the document and a newline to stdout. */
void cli_json_print(CliJson *json);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(CliJson, cli_json_free)

/**
 * CliTable:
 * Rows of text cells printed in aligned columns. Cells are copied.
 */
typedef struct {
  GPtrArray *rows; /* GPtrArray of gchar* per row; row 0 is the header */
  guint columns;
} CliTable;

/**
 * cli_table_new:
 * @header: (nullable) (array zero-terminated=1): column titles; NULL for a
 *   table without a header line (key/value views)
 * @columns: the number of columns
 */
CliTable *cli_table_new(const gchar *const *header, guint columns);
void cli_table_free(CliTable *table);
/** cli_table_add: adds a row of @table->columns cells (NULL prints "-"). */
void cli_table_add(CliTable *table, ...);
/** cli_table_print: prints the table to stdout. */
void cli_table_print(CliTable *table);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(CliTable, cli_table_free)

/**
 * cli_terminal_text:
 * @length: bytes of @text, or -1 if NUL-terminated
 *
 * What text output (tables, text log lines) prints of a string from
 * outside: tabs and line breaks become spaces, other control characters
 * (C0, DEL and C1: ESC, BEL, CSI...) become \xNN or \uNNNN, and bytes that
 * are not UTF-8 become \xNN, so that nothing a message holds can drive
 * the terminal.
 * Returns: (transfer full): printable UTF-8 on one line.
 */
gchar *cli_terminal_text(const gchar *text, gssize length);

/** cli_append_terminal_text: cli_terminal_text() appended to @out. */
void cli_append_terminal_text(GString *out, const gchar *text, gssize length);

/**
 * cli_format_number:
 * @buf: G_ASCII_DTOSTR_BUF_SIZE bytes
 *
 * Writes finite @value in the shortest form that reads back as the same
 * double ("0.002997", not g_ascii_dtostr()'s 17 digits
 * "0.0029970000000000001"), as Prometheus's clients and the library's
 * metrics write numbers.
 * Returns: (transfer none): @buf
 */
const gchar *cli_format_number(gchar *buf, gdouble value);

/**
 * cli_format_time:
 * Returns: (transfer full): @ms as "2025-06-01T12:00:00.123Z" (UTC), or
 * NULL when @ms is 0 (not reached).
 */
gchar *cli_format_time(gint64 ms);

/** cli_append_time: appends @ms as cli_format_time() writes it (0 too). */
void cli_append_time(GString *out, gint64 ms);

/** cli_format_age: Returns: (transfer full): "3s ago", "2m ago", ... */
gchar *cli_format_age(gint64 then_ms, gint64 now_ms);

/** cli_format_duration: Returns: (transfer full): "1500ms", "30s", ... */
gchar *cli_format_duration(gint64 ms);

/**
 * cli_msgpack_to_json:
 * @value: (nullable): msgpack bytes
 * Returns: (transfer full) (nullable): compact JSON text; NULL when @value
 * is NULL; an object {"$msgpack": "<base64>"} when the value has no JSON
 * form (msgpack ext types).
 */
gchar *cli_msgpack_to_json(GBytes *value);

/**
 * cli_shorten:
 * @text: (nullable): a string from outside
 * @width: the most characters to keep (at least 2)
 * Returns: (transfer full) (nullable): @text made valid UTF-8 and cut to
 * @width characters, its last one an ellipsis when cut; NULL for NULL.
 * For a table's cell: --json shows the whole text.
 */
gchar *cli_shorten(const gchar *text, glong width);

/* ---- Records (records.c) ------------------------------------------------- */

/* Each record the command and its dashboard show, written once: the CLI's
 * --json and the web API's answers call the same function for the same
 * record (sluice(1), JSON OUTPUT; docs/observability.md). */

/**
 * cli_result_print:
 * @result: a task's record
 * @json: print JSON (see sluice(1), JSON OUTPUT) instead of a table
 */
void cli_result_print(const SluiceResult *result, gboolean json);

/** cli_result_to_json: writes the record's JSON object into @json: what
 * `sluice inspect --json` prints and /api/task holds as `record`. */
void cli_result_to_json(CliJson *json, const SluiceResult *result);

/**
 * cli_listed_task_to_json:
 * Writes one task of a listing (sluice_client_list()) as a JSON object:
 * what `sluice ls --json` prints for it and /api/tasks lists.
 */
void cli_listed_task_to_json(CliJson *json, const SluiceListedTask *task);

/**
 * cli_event_to_json:
 * Writes one lifecycle event as a JSON object (its cursor included): what
 * `sluice events --json` prints for it and /api/events lists.
 */
void cli_event_to_json(CliJson *json, const SluiceEvent *event);

/** cli_chord_policy_name: Returns: (transfer none): "fail fast", ... */
const gchar *cli_chord_policy_name(SluiceChordPolicy policy);

/**
 * cli_workflow_to_json:
 * Writes a workflow's counts and tree (id, tasks, results, finished,
 * failed, tree): what `sluice workflow show --json` prints and
 * /api/workflows/ID answers.
 */
void cli_workflow_to_json(CliJson *json, const gchar *id,
                          const SluiceWorkflowStatus *st,
                          const SluiceWorkflowNode *root);

/**
 * cli_dead_letter_fields_to_json:
 * Writes the fields of a dead-letter entry (entry_id, task_id, task,
 * reason, detail, source, deliveries, at) as keys and values into the
 * object @json is in.
 */
void cli_dead_letter_fields_to_json(CliJson *json,
                                    const SluiceDeadLetter *entry);

/**
 * cli_dead_letter_page_to_json:
 * @entries: (element-type SluiceDeadLetter): one page, as listed
 * @limit: the page size asked for: a full page has a next one
 * Writes {entries, next_after}: what `sluice dlq list --json` prints and
 * /api/dead answers.
 */
void cli_dead_letter_page_to_json(CliJson *json, GPtrArray *entries,
                                  guint limit);

/**
 * cli_dead_letter_snapshot:
 * Returns: (transfer full) (element-type SluiceDeadLetter): every dead
 * letter matching the filters (each nullable), oldest first, read a page
 * at a time; or NULL and @error. What a bulk action (`sluice dlq replay
 * --all`, `purge`, the dashboard's replay-all) counts and acts on: acting
 * on a live listing would meet its own replays again.
 */
GPtrArray *cli_dead_letter_snapshot(SluiceClient *client, const gchar *reason,
                                    const gchar *task, GError **error);

/** cli_envelope_to_json: writes a message as a JSON object: what /api/task
 * holds as `envelope` (a dead letter's whole message). */
void cli_envelope_to_json(CliJson *json, const SluiceEnvelope *env);

/**
 * cli_dead_letter_show_to_json:
 * @env: (nullable): the entry's message, decoded; NULL when malformed
 * Writes what `sluice dlq show --json` prints: the entry's fields, its
 * message's (queue, attempt, enqueued_at, args, history, headers) and the
 * raw payload in base64.
 */
void cli_dead_letter_show_to_json(CliJson *json, const SluiceDeadLetter *entry,
                                  const SluiceEnvelope *env);

/**
 * CliStats:
 * @stats: the broker's stats (sluice_client_get_stats())
 * @slots: (nullable) (element-type SluiceSlotState): the concurrency keys
 *   with a holder or a waiter, by key; NULL when the broker cannot list
 *   them
 * @layout_version: the store's layout version, -1 where it could not be
 *   read (cli_stats_read_layout())
 *
 * What `sluice stats` and the dashboard's overview show. Clear with
 * cli_stats_clear().
 */
typedef struct {
  SluiceBrokerStats stats;
  GPtrArray *slots;
  gint64 layout_version;
  /*< private >*/
  gboolean have_stats;
} CliStats;

/**
 * cli_stats_read_layout:
 * @error: (optional): why the layout version could not be read
 *
 * Sets @stats->layout_version from the store @settings name
 * (cli_layout_read()), or -1 with @error set.
 */
void cli_stats_read_layout(const CliSettings *settings, CliStats *stats,
                           GError **error);

/**
 * cli_stats_read:
 * @queues: (nullable) (array zero-terminated=1): only these queues
 * @out: (out caller-allocates): filled on success; clear it either way
 * @slots_error: (optional): why the slots could not be listed, when the
 *   broker can list them and failed to (the stats are still read)
 * Returns: FALSE and @error when the stats cannot be read.
 */
gboolean cli_stats_read(SluiceClient *client, const gchar *const *queues,
                        CliStats *out, GError **slots_error, GError **error);
void cli_stats_clear(CliStats *stats);

/**
 * cli_stats_fields_to_json:
 * @now_ms: the time the workers' health is judged at
 * Writes the stats as keys and values into the object @json is in (mode,
 * namespace, queues, scheduled, in_flight, dead letters by reason and
 * dropped, workers, slots): what `sluice stats --json` prints and
 * /api/overview holds besides the dashboard's own fields.
 */
void cli_stats_fields_to_json(CliJson *json, const CliSettings *settings,
                              const CliStats *stats, gint64 now_ms);

/** cli_worker_to_json: writes one worker as a JSON object (its `health`
 * judged at @now_ms). */
void cli_worker_to_json(CliJson *json, const SluiceWorkerInfo *w,
                        gint64 now_ms);

/**
 * cli_worker_health:
 * Returns: (transfer none): "healthy"; "late" when it is alive but its last
 * heartbeat is older than three announcements at @now_ms; "dead" once its
 * liveness lapsed.
 */
const gchar *cli_worker_health(const SluiceWorkerInfo *w, gint64 now_ms);

/** cli_sorted_keys: Returns: (transfer container): @table's string keys in
 * name order, NULL-terminated. */
const gchar **cli_sorted_keys(GHashTable *table);

/* ---- Logging (log.c) ----------------------------------------------------- */

typedef enum {
  CLI_LOG_TEXT,
  CLI_LOG_JSON,
} CliLogFormat;

/**
 * cli_parse_log_format:
 * @text: (nullable): "text" or "json"; NULL = text
 * Returns: FALSE and a usage error for anything else.
 */
gboolean cli_parse_log_format(const gchar *text, CliLogFormat *out,
                              GError **error);

/**
 * cli_log_init:
 * @format: text or JSON lines on stderr (unused when stderr is the journal)
 * @threshold: the least severe level shown: G_LOG_LEVEL_INFO shows info,
 *   notices (G_LOG_LEVEL_MESSAGE), warnings, criticals and errors. Debug
 *   lines are also shown for the domains listed in G_MESSAGES_DEBUG.
 *
 * Installs the process's log writer (once per process: GLib allows one).
 * When stderr is connected to the systemd journal, records go to the
 * journal with their structured fields (SLUICE_TASK_ID, ...); otherwise
 * one line per record on stderr.
 * Returns: (transfer none): the writer's settings, which live as long as
 * the process (GLib keeps them with the writer).
 */
CliLog *cli_log_init(CliLogFormat format, GLogLevelFlags threshold);

/* ---- Task modules (modules.c) -------------------------------------------- */

/**
 * cli_modules_load:
 * @paths: (array zero-terminated=1): shared objects to load
 * @registry: (transfer none): where their tasks are registered
 *
 * Opens each module with G_MODULE_BIND_LOCAL, finds its
 * `sluice_module_init` and calls it with @registry. Modules are made
 * resident (never unloaded): a task that ignored its cancellable may still
 * run module code on an executor thread after the worker has stopped.
 * Returns: FALSE and an error naming the module and what went wrong.
 */
gboolean cli_modules_load(const gchar *const *paths, SluiceRegistry *registry,
                          GError **error);

/* ---- Bulk commands (progress.c) ------------------------------------------ */

typedef struct _CliProgress CliProgress;

/**
 * cli_progress_new:
 * @what: what is being done ("replaying dead letters")
 * @total: how many steps
 * Returns: (transfer full): a progress bar on stderr if stderr is a
 * terminal, else one that draws nothing; free with cli_progress_free(),
 * which erases it.
 */
CliProgress *cli_progress_new(const gchar *what, guint64 total);
/** cli_progress_step: one step done. */
void cli_progress_step(CliProgress *progress);
void cli_progress_free(CliProgress *progress);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CliProgress, cli_progress_free)

/**
 * cli_confirm_many:
 * @n: how many tasks the command would touch
 * @yes: --yes was given
 * @dry_run: --dry-run was given (nothing will be touched)
 * @doing: the action, for the message ("purging queue “q”")
 * @what: what @n counts ("dead letters")
 *
 * The rule of every destructive command: more than one task takes --yes.
 * Returns: TRUE, or FALSE and a usage error naming --yes and --dry-run.
 */
gboolean cli_confirm_many(guint64 n, gboolean yes, gboolean dry_run,
                          const gchar *doing, const gchar *what,
                          GError **error);

/* ---- Periodic schedules of the key file (periodic-config.c) -------------- */

/**
 * CliPeriodic:
 * @options: the schedule, ready for sluice_worker_add_periodic(); its
 *   strings and arguments are owned by this struct
 * @group: the key file group it came from, for messages
 * @schedule: how it repeats, in words ("every 30s", "cron 0 3 * * * in
 *   Europe/Berlin")
 */
typedef struct {
  SluicePeriodicOptions options;
  gchar *group;
  gchar *schedule;
  /*< private >*/
  gchar *name;
  gchar *task;
  gchar *queue;
  gchar *cron;
  gchar *timezone;
  GBytes *args;
} CliPeriodic;

/**
 * cli_periodic_load:
 * @settings: loaded settings (the key file, if any)
 * @out: (out) (transfer full) (element-type CliPeriodic): every
 *   `[periodic "NAME"]` group of the key file, in file order (empty
 *   without a file)
 *
 * Reads and checks each schedule (its keys, their values, the schedule
 * itself), so a mistake is reported before a worker starts.
 * Returns: FALSE and a usage error naming the file, group and key.
 */
gboolean cli_periodic_load(const CliSettings *settings, GPtrArray **out,
                           GError **error);

/* ---- Subcommands --------------------------------------------------------- */

/* Each takes its own arguments (argv[0] = its name) and returns the exit
 * status. */
int cli_cmd_worker(int argc, char **argv);
int cli_cmd_run(int argc, char **argv);
int cli_cmd_enqueue(int argc, char **argv);
int cli_cmd_result(int argc, char **argv);
int cli_cmd_events(int argc, char **argv);
int cli_cmd_workflow(int argc, char **argv);
int cli_cmd_inspect(int argc, char **argv);
int cli_cmd_cancel(int argc, char **argv);
int cli_cmd_dlq(int argc, char **argv);
int cli_cmd_stats(int argc, char **argv);
int cli_cmd_ls(int argc, char **argv);
int cli_cmd_pause(int argc, char **argv);
int cli_cmd_resume(int argc, char **argv);
int cli_cmd_purge(int argc, char **argv);
int cli_cmd_delete(int argc, char **argv);
int cli_cmd_run_now(int argc, char **argv);
int cli_cmd_periodic(int argc, char **argv);
int cli_cmd_exporter(int argc, char **argv);
int cli_cmd_web(int argc, char **argv);
int cli_cmd_migrate(int argc, char **argv);
int cli_cmd_keys(int argc, char **argv);

/**
 * CliSubcommand:
 * @name: its word ("list")
 * @run: what runs it, with argv[0] its name
 * @summary: one line for the group's --help
 *
 * One command of a group (sluice dlq, sluice keys, sluice periodic).
 */
typedef struct {
  const gchar *name;
  int (*run)(int argc, char **argv);
  const gchar *summary;
} CliSubcommand;

/**
 * cli_run_subcommand:
 * @group: the group's word ("dlq")
 * @commands: (array length=n_commands): its commands
 *
 * Runs the command argv[1] names, as "sluice GROUP NAME" in messages; with
 * no command or --help prints the group's usage (to stderr, exit status 2,
 * or stdout, 0), and an unknown one is a usage error listing the commands.
 */
int cli_run_subcommand(const gchar *group, const CliSubcommand *commands,
                       gsize n_commands, int argc, char **argv);

/**
 * cli_layout_read:
 * @out: (out caller-allocates): filled; clear it with sluice_layout_clear()
 *
 * The layout of the store @settings name, read without a broker (which
 * would migrate it): `sluice migrate` and `sluice stats` show it.
 * Returns: FALSE and @error when the store cannot be read.
 */
gboolean cli_layout_read(const CliSettings *settings, SluiceLayout *out,
                         GError **error);

/* The texts --help shows at the bottom of every subcommand. */
#define CLI_HELP_CONNECTION                                                    \
  "Connection: --url, --mode and --namespace, else SLUICE_URL, SLUICE_MODE\n"  \
  "and SLUICE_NAMESPACE, else the [connection] group of the --config file\n"   \
  "(or $SLUICE_CONFIG), else the SQLite database\n"                            \
  "$XDG_STATE_HOME/sluice/sluice.db (Redis: --url redis://HOST; reliable,\n"   \
  "namespace sluice).\n"                                                       \
  "Keep a password off the command line: --password-file, or\n"                \
  "SLUICE_PASSWORD_FILE, or password_file in [connection].\n"                  \
  "Redis Sentinel: --url redis+sentinel://HOST:PORT[,HOST:PORT...]/MASTER.\n"  \
  "Durations: 500ms, 30s, 5m, 1h. See sluice(1)."

/* ---- HTTP endpoints (http.c, metrics-server.c) --------------------------- */

/**
 * cli_parse_listen:
 * @what: the option or key, for the message
 * @text: HOST:PORT with an IP address (an IPv6 one in brackets), or a
 *   bare PORT for 127.0.0.1; port 0 takes any free port
 * @out: (out) (transfer full): the address
 * Returns: FALSE and a usage error with examples.
 */
gboolean cli_parse_listen(const gchar *what, const gchar *text,
                          GSocketAddress **out, GError **error);

/* A settings table's type (settings.c) for cli_parse_listen(): into a
 * GSocketAddress* the struct owns. */
extern const CliSettingType cli_setting_listen;

/* A file a setting names, with where the name came from ("--tls-key",
 * "FILE: [web] tls-key"), which the messages about the file quote. */
typedef struct {
  gchar *path;
  gchar *what;
} CliSourcedPath;

/* A settings table's type (http.c) for a path: into a CliSourcedPath the
 * struct owns. */
extern const CliSettingType cli_setting_sourced_path;

/**
 * CliHttpTls:
 * @cert_option, @key_option, @client_ca_option: the options that give the
 *   files, without "--" ("tls-cert"), for the messages: set them first
 * @cert, @key, @client_ca: the files, as the settings gave them (unset: no
 *   path); cli_http_tls_load() reads them
 *
 * HTTPS for one server. Clear with cli_http_tls_clear().
 */
typedef struct {
  const gchar *cert_option;
  const gchar *key_option;
  const gchar *client_ca_option;
  CliSourcedPath cert;
  CliSourcedPath key;
  CliSourcedPath client_ca;
  /*< private >*/
  GTlsCertificate *certificate;  /* NULL: clear text */
  GTlsDatabase *client_database; /* NULL: no client certificate asked */
} CliHttpTls;

/**
 * cli_http_tls_load:
 * Reads the certificate and its key (both or neither), the key only if
 * its owner alone may read it (cli_check_private_file()), and the CA of
 * the client certificates, which needs the other two. Refuses TLS when
 * GIO has no TLS backend (the glib-networking package).
 * Returns: FALSE and an error naming the option and what to do.
 */
gboolean cli_http_tls_load(CliHttpTls *tls, GError **error);
/* TRUE once cli_http_tls_load() read a certificate. */
gboolean cli_http_tls_enabled(const CliHttpTls *tls);
void cli_http_tls_clear(CliHttpTls *tls);

typedef struct _CliMetricsServer CliMetricsServer;

/**
 * cli_metrics_server_start:
 * @worker: a started worker; referenced
 * @tls: (nullable): HTTPS, loaded (cli_http_tls_load()); NULL: clear text
 *
 * Serves /metrics and /healthz on @address from a thread of its own, and
 * logs the URL (with the port bound).
 * Returns: (transfer full): the server, or NULL and an error (the address
 * is in use, ...).
 */
CliMetricsServer *cli_metrics_server_start(SluiceWorker *worker,
                                           GSocketAddress *address,
                                           const CliHttpTls *tls,
                                           GError **error);
/* /healthz answers 503 from now on: the worker is stopping. */
void cli_metrics_server_stopping(CliMetricsServer *server);
/* Stops serving and frees @server. NULL-safe. */
void cli_metrics_server_free(CliMetricsServer *server);

/* ---- systemd (notify.c) ------------------------------------------------- */

/* Once the started worker's broker has answered (at once if it did while
 * the worker started): logs @line (info; "worker ... ready: ...", taken)
 * and sends READY=1, then STATUS= every few seconds and, with WatchdogSec,
 * WATCHDOG=1 from the worker's housekeeping thread. Until then STATUS=
 * says it waits for the broker. Nothing is sent without NOTIFY_SOCKET. */
void cli_notify_ready_when_served(SluiceWorker *worker, gchar *line);
/* STOPPING=1, when a graceful stop begins. */
void cli_notify_stopping(SluiceWorker *worker);

G_END_DECLS

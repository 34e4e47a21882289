/* sluice-brokers.h - brokers as users see them: the handle, the built-in
 * brokers, statistics and dead-letter entries.
 *
 * A broker is where messages live. Users pick one per deployment, hand it to
 * a client (to enqueue) and to a worker (to consume), and never call its
 * operations directly. Writing a broker of your own is done against
 * <sluice/sys/broker.h>, the contract.
 *
 *   memory          in-process, thread-safe; for unit tests of task code and
 *                   one-process tools. Everything is lost with the process.
 *   sqlite          one database file, durable, shared by the processes of
 *                   one machine (see sluice-sqlite.h).
 *   redis-fast      Redis lists (see sluice-redis.h once built).
 *   redis-reliable  Redis streams and consumer groups.
 */
#pragma once

#include <sluice/sluice-clock.h>
#include <sluice/sluice-macros.h>

G_BEGIN_DECLS

#define SLUICE_BROKER_ERROR (sluice_broker_error_quark())
SLUICE_AVAILABLE_IN_0_1
GQuark sluice_broker_error_quark(void);

/**
 * SluiceBrokerError:
 * @SLUICE_BROKER_ERROR_FAILED: anything else (also any unknown code)
 * @SLUICE_BROKER_ERROR_UNAVAILABLE: the store cannot be reached now
 *   (connection refused or lost, timeout); the operation may be retried
 * @SLUICE_BROKER_ERROR_INCOMPLETE: a broker class lacks a required slot
 * @SLUICE_BROKER_ERROR_VERSION: a broker class of an unknown version
 * @SLUICE_BROKER_ERROR_NOT_FOUND: no such entry (dead letter, record)
 * @SLUICE_BROKER_ERROR_UNSUPPORTED: this broker cannot do that
 * @SLUICE_BROKER_ERROR_AUTH: the store refused our credentials
 * @SLUICE_BROKER_ERROR_FULL: the store is out of memory and refuses writes
 *   that add work; draining still works
 * @SLUICE_BROKER_ERROR_INVALID: bad configuration (URL, option)
 * @SLUICE_BROKER_ERROR_CLOSED: the broker was closed
 */
typedef enum {
  SLUICE_BROKER_ERROR_FAILED,
  SLUICE_BROKER_ERROR_UNAVAILABLE,
  SLUICE_BROKER_ERROR_INCOMPLETE,
  SLUICE_BROKER_ERROR_VERSION,
  SLUICE_BROKER_ERROR_NOT_FOUND,
  SLUICE_BROKER_ERROR_UNSUPPORTED,
  SLUICE_BROKER_ERROR_AUTH,
  SLUICE_BROKER_ERROR_FULL,
  SLUICE_BROKER_ERROR_INVALID,
  SLUICE_BROKER_ERROR_CLOSED,
} SluiceBrokerError;

typedef struct _SluiceBroker SluiceBroker;

/** sluice_broker_ref: Returns: (transfer full): @broker, one ref more. */
SLUICE_AVAILABLE_IN_0_1
SluiceBroker *sluice_broker_ref(SluiceBroker *broker);

/**
 * sluice_broker_unref:
 * Drops one reference. The last one closes the broker and frees it. Clients
 * and workers hold their own reference, so the broker lives as long as they
 * do. NULL-safe.
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_broker_unref(SluiceBroker *broker);

/** sluice_broker_get_name: Returns: (transfer none): "memory", ... */
SLUICE_AVAILABLE_IN_0_1
const gchar *sluice_broker_get_name(SluiceBroker *broker);

/**
 * sluice_broker_get_clock:
 * Returns: (transfer none): the clock every user of @broker reads; valid
 * while @broker is.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceClock *sluice_broker_get_clock(SluiceBroker *broker);

/**
 * SluiceBrokerFeature:
 * @SLUICE_BROKER_FEATURE_SHARED: other processes see the same queues
 *   (capability SLUICE_BROKER_CAP_SHARED)
 * @SLUICE_BROKER_FEATURE_DURABLE: messages outlive the process
 * @SLUICE_BROKER_FEATURE_LEASES: deliveries are held under leases and a
 *   dead consumer's are redelivered (at-least-once)
 * @SLUICE_BROKER_FEATURE_FENCING: a settle of a delivery another consumer
 *   owns by now is refused
 * @SLUICE_BROKER_FEATURE_CLOCK_TTL: TTLs follow the broker's SluiceClock
 * @SLUICE_BROKER_FEATURE_IN_FLIGHT: stats count deliveries not yet settled
 * @SLUICE_BROKER_FEATURE_ORDERED: FIFO within a queue and strict priority
 *   across queues
 * @SLUICE_BROKER_FEATURE_STEERING: queued and scheduled tasks can be
 *   listed, paused, moved and purged
 * @SLUICE_BROKER_FEATURE_PERIODIC: periodic tasks can run
 * @SLUICE_BROKER_FEATURE_JOINS: workflows and batches can run
 * @SLUICE_BROKER_FEATURE_EVENTS: the event stream and task progress are
 *   kept
 * @SLUICE_BROKER_FEATURE_RATES: rate limits can be kept
 * @SLUICE_BROKER_FEATURE_SLOTS: concurrency limits can be kept
 * @SLUICE_BROKER_FEATURE_UNIQUE: tasks can be enqueued with a uniqueness
 *   key
 * @SLUICE_BROKER_FEATURE_LOOKUP_TASK: a task without a record is found on
 *   the schedule or among the dead letters by its id (`inspect`)
 * @SLUICE_BROKER_FEATURE_ANNOUNCE: workers announce what they serve, and
 *   stats report it
 * @SLUICE_BROKER_FEATURE_COUNT_RECLAIMABLE: a busy worker learns what it
 *   could reclaim without taking it (it then drains before it reclaims)
 *
 * What a broker can do: its capabilities (properties of the whole store),
 * its optional families (sluice/sys/broker.h: each a table of slots), and
 * the three optional slots of the core that change what a user sees.
 * Ask with sluice_broker_supports().
 */
typedef enum {
  SLUICE_BROKER_FEATURE_SHARED,
  SLUICE_BROKER_FEATURE_DURABLE,
  SLUICE_BROKER_FEATURE_LEASES,
  SLUICE_BROKER_FEATURE_FENCING,
  SLUICE_BROKER_FEATURE_CLOCK_TTL,
  SLUICE_BROKER_FEATURE_IN_FLIGHT,
  SLUICE_BROKER_FEATURE_ORDERED,
  SLUICE_BROKER_FEATURE_STEERING,
  SLUICE_BROKER_FEATURE_PERIODIC,
  SLUICE_BROKER_FEATURE_JOINS,
  SLUICE_BROKER_FEATURE_EVENTS,
  SLUICE_BROKER_FEATURE_RATES,
  SLUICE_BROKER_FEATURE_SLOTS,
  SLUICE_BROKER_FEATURE_UNIQUE,
  SLUICE_BROKER_FEATURE_LOOKUP_TASK,
  SLUICE_BROKER_FEATURE_ANNOUNCE,
  SLUICE_BROKER_FEATURE_COUNT_RECLAIMABLE,
} SluiceBrokerFeature;

/**
 * sluice_broker_supports:
 * @feature: what to ask about
 *
 * The one way to ask what a broker can do: the core, the CLI, the
 * conformance kit and users all ask here, never by reading a broker's
 * class. Cheap (no call into the broker, no lock): fit for a task's path.
 * Returns: TRUE when @broker declares the capability or has the family's
 * table (or the optional slot); FALSE for a @feature this Sluice does not
 * know.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_broker_supports(SluiceBroker *broker,
                                SluiceBrokerFeature feature);

/**
 * sluice_broker_feature_name:
 * Returns: (transfer none): a short name of @feature for messages
 * ("leases", "joins"), or "unknown".
 */
SLUICE_AVAILABLE_IN_0_1
const gchar *sluice_broker_feature_name(SluiceBrokerFeature feature);

/* ---- The memory broker ------------------------------------------------ */

#define SLUICE_DEFAULT_DEAD_LETTER_MAX 10000

/**
 * SluiceMemoryBrokerOptions:
 * @dead_letter_max: keep at most this many dead letters; the oldest are
 *   dropped beyond it (0 = SLUICE_DEFAULT_DEAD_LETTER_MAX)
 */
typedef struct {
  guint dead_letter_max;
} SluiceMemoryBrokerOptions;

/**
 * sluice_memory_broker_new:
 * @options: (nullable): NULL means the defaults
 * @clock: (nullable) (transfer none): the clock for due times and TTLs;
 *   NULL means a real clock. The broker takes its own reference.
 *
 * Every operation of the broker contract, in one process, under one mutex.
 * Every TTL (results, revocations, idempotency claims) follows @clock, so a
 * test with a fake clock sees records expire when it advances the clock.
 *
 * Every broker's constructor takes its arguments in this order: the
 * broker's options (or URL), then the clock, then (for those that can
 * fail) the GError: sluice_sqlite_broker_new(), sluice_redis_broker_new()
 * and sluice_broker_new_for_url() (the URL and its options) too. This one
 * cannot fail.
 *
 * Returns: (transfer full): the broker.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceBroker *sluice_memory_broker_new(const SluiceMemoryBrokerOptions *options,
                                       SluiceClock *clock);

/* ---- Any broker, from a URL -------------------------------------------- */

/**
 * SluiceRedisMode:
 * @SLUICE_REDIS_FAST: a Redis list per queue: quick, at-most-once
 * @SLUICE_REDIS_RELIABLE: a stream and consumer group per queue:
 *   at-least-once (the default)
 *
 * How the Redis brokers carry a queue (sluice-redis.h tells the whole
 * story). Declared here because SluiceBrokerUrlOptions names it.
 */
typedef enum {
  SLUICE_REDIS_FAST,
  SLUICE_REDIS_RELIABLE,
} SluiceRedisMode;

/**
 * SluiceBrokerUrlOptions:
 * @ns: (nullable): Redis: the namespace (NULL = "sluice"); see
 *   SluiceRedisOptions.ns
 * @mode: Redis: fast or reliable (the default)
 * @dead_letter_max: keep at most this many dead letters, for every broker
 *   (0 = SLUICE_DEFAULT_DEAD_LETTER_MAX)
 * @min_replicas_ack: Redis: replicas each enqueue and settle waits for
 *   (0 = the URL's min_replicas_ack, else none); see
 *   SluiceRedisOptions.min_replicas_ack
 * @read_only: SQLite: open an existing database only to read it; see
 *   SluiceSqliteOptions.read_only
 * @mode_setting: (nullable): Redis: where the user sets @mode, for the
 *   message that refuses a namespace of the other mode; see
 *   SluiceRedisOptions.mode_setting
 *
 * What sluice_broker_new_for_url() gives the broker its URL names, besides
 * the URL. A setting applies to the brokers it names and is ignored by the
 * others, so that one set of options serves whatever URL a user gives (a
 * SQLite file or a memory broker is one namespace of its own, and has no
 * mode). Initialise with sluice_broker_url_options_init().
 */
typedef struct {
  const gchar *ns;
  SluiceRedisMode mode;
  guint dead_letter_max;
  guint min_replicas_ack;
  gboolean read_only;
  const gchar *mode_setting;
} SluiceBrokerUrlOptions;

/** sluice_broker_url_options_init: the defaults: reliable, the default
 * namespace, no cap of our own, read and write. */
SLUICE_AVAILABLE_IN_0_1
void sluice_broker_url_options_init(SluiceBrokerUrlOptions *options);

/**
 * sluice_broker_new_for_url:
 * @url: (transfer none): the broker, as the `sluice` command takes it
 *   (--url, SLUICE_URL, url= in its key file; sluice(1), CONNECTION):
 *   - `sqlite:///path/to/file.db[?synchronous=full|normal|off]`: the
 *     SQLite broker (an absolute path, so three slashes; see
 *     sluice_sqlite_url_parse());
 *   - `redis://[[user]:password@]host[:port][/db]`,
 *     `redis+sentinel://[[user]:password@]host:port[,host:port...]/MASTER[/db]`,
 *     `redis+cluster://[[user]:password@]host:port[,host:port...]` and
 *     `unix:///path/to/socket[?db=N]`: the Redis broker of @options->mode
 *     (see SluiceRedisOptions.url); any of them may end with
 *     `?partitions=N` (a socket URL: `&partitions=N`);
 *   - `memory:`: a new memory broker, its messages in this process only.
 *   The scheme is matched without regard to case.
 * @options: (nullable) (transfer none): NULL = the defaults
 *   (sluice_broker_url_options_init())
 * @clock: (nullable) (transfer none): as for the brokers' constructors
 *
 * The one place that maps a URL to a broker, for programs and the `sluice`
 * command alike: a program that takes a broker URL from its user opens
 * exactly what the command would.
 * Returns: (transfer full): the broker, or NULL and @error:
 * SLUICE_BROKER_ERROR_INVALID for a URL of no known scheme (the message
 * lists them, and never shows what follows the scheme, which may hold a
 * password) or a malformed one, or the broker's own error. No broker
 * connects here: a Redis server is first contacted when the broker is
 * used (sluice_redis_broker_ping() contacts it at once).
 */
SLUICE_AVAILABLE_IN_0_1
SluiceBroker *sluice_broker_new_for_url(const gchar *url,
                                        const SluiceBrokerUrlOptions *options,
                                        SluiceClock *clock, GError **error);

/* ---- Statistics --------------------------------------------------------- */

/**
 * SluiceQueueStats:
 * @name: the queue
 * @ready: messages waiting to be fetched
 * @paused: workers take nothing from it (sluice_client_pause());
 *   set by sluice_client_get_stats(), never by a broker
 *
 * Allocated by the library (sluice_broker_stats_add_queue()).
 */
typedef struct {
  gchar *name;
  gint64 ready;
  gboolean paused;
} SluiceQueueStats;

/* The most running tasks a worker lists in its announcement. */
#define SLUICE_ANNOUNCED_RUNNING_MAX 100

/**
 * SluiceRunningTask:
 * @id: the task id
 * @task: the task's name
 * @queue: the queue it came from
 * @started_at_ms: when this attempt started (ms since epoch, the worker's
 *   clock)
 *
 * A task a worker said it was running when it last announced itself.
 * Owned by the SluiceWorkerInfo that holds it.
 */
typedef struct {
  gchar *id;
  gchar *task;
  gchar *queue;
  gint64 started_at_ms;
} SluiceRunningTask;

/**
 * SluiceWorkerInfo:
 * @id: a worker's id
 * @last_seen_ms: its last heartbeat (ms since epoch)
 * @alive: FALSE once its liveness lapsed (it died or lost the store); such
 *   a worker is listed for a grace period, then dropped
 * @info: (nullable): what the worker announced, encoded by the core;
 *   brokers store and return it untouched (see the `announce` slot)
 * @host: (nullable): the host it runs on
 * @pid: its process id (0 if unknown)
 * @queues: (nullable): the queues it takes from, highest priority first
 * @tasks: (nullable): the task names it serves
 * @concurrency: its executor slots
 * @running: tasks running when it last announced itself
 * @started_at_ms: when it started (ms since epoch)
 * @succeeded, @failed, @retried, @dead_lettered: its counts since it
 *   started, as of its last announcement
 * @running_tasks: (nullable) (element-type SluiceRunningTask):
 *   the tasks it was running then, oldest first, at most
 *   SLUICE_ANNOUNCED_RUNNING_MAX of them (@running says how many ran in
 *   all). A worker announces itself every 2 seconds (or every third of its
 *   lease, if that is shorter), so the list is that old at most while the
 *   worker lives.
 * @limits: (nullable) (array zero-terminated=1): the flow
 *   limits it runs with, one line each, as an operator reads them ("rate
 *   task mail.send: 10 per 1000 ms, burst 1, per header tenant",
 *   "concurrency queue renders: 3 at once", "weight queue batch: 1")
 * @events: whether it writes the lifecycle events of its tasks to the
 *   namespace's event stream (SluiceWorkerOptions.events); FALSE for a
 *   worker that does not say (one of an older Sluice)
 *
 * The fields after @info are decoded from @info by the client
 * (sluice_client_get_stats()); they are empty when a worker announced
 * nothing. Owned by the SluiceBrokerStats that holds it.
 */
typedef struct {
  gchar *id;
  gint64 last_seen_ms;
  gboolean alive;
  GBytes *info;
  gchar *host;
  gint pid;
  gchar **queues;
  gchar **tasks;
  guint concurrency;
  guint running;
  gint64 started_at_ms;
  guint64 succeeded;
  guint64 failed;
  guint64 retried;
  guint64 dead_lettered;
  GPtrArray *running_tasks;
  gchar **limits;
  gboolean events;
} SluiceWorkerInfo;

/**
 * SluiceBrokerStats:
 * @queues: (element-type SluiceQueueStats): per queue, by name
 * @scheduled: messages waiting for a due time (delays, retries, deferrals)
 * @in_flight: delivered and not yet settled; -1 when the broker cannot tell
 *   (redis-fast cannot: a popped message is no longer in Redis)
 * @dead_letters: entries in the dead-letter queue
 * @dead_letters_by_reason: (element-type utf8 gint64): reason -> count,
 *   values are gint64 pointers
 * @workers: (element-type SluiceWorkerInfo): workers seen lately, alive
 *   or not (see SluiceWorkerInfo.alive)
 * @stale_settles: settles refused because another consumer owned the
 *   delivery by then (fencing): on Redis, counted for the whole namespace
 *   by every process; -1 if the broker cannot tell
 * @dead_letters_dropped: dead letters dropped by the dead_letter_max cap
 *   (oldest first) since the namespace began; -1 if the broker cannot tell
 * @dead_letters_dropped_by_reason: (element-type utf8 gint64): the same,
 *   by reason of the dropped entries
 *
 * Filled by sluice_client_get_stats(); free with sluice_broker_stats_clear().
 */
typedef struct {
  GPtrArray *queues;
  gint64 scheduled;
  gint64 in_flight;
  gint64 dead_letters;
  GHashTable *dead_letters_by_reason;
  GPtrArray *workers;
  gint64 stale_settles;
  gint64 dead_letters_dropped;
  GHashTable *dead_letters_dropped_by_reason;
} SluiceBrokerStats;

/**
 * SluiceSlotState:
 * @key: a set of concurrency slots (owned)
 * @holders: (element-type utf8): the holders whose lease has not lapsed
 *   (owned, with their strings)
 * @waiting: how many task ids are on the key's waiting list
 *
 * One key of concurrency slots: what sluice_client_list_slots() returns, and
 * the broker's `list_slots` slot finds. Made with sluice_slot_state_new(),
 * freed with sluice_slot_state_free().
 */
typedef struct {
  gchar *key;
  GPtrArray *holders;
  guint waiting;
} SluiceSlotState;

/**
 * sluice_slot_state_new:
 * @key: (transfer none): copied
 * Returns: (transfer full): a SluiceSlotState with no holders
 */
SLUICE_AVAILABLE_IN_0_1
SluiceSlotState *sluice_slot_state_new(const gchar *key);
/** sluice_slot_state_free: NULL-safe. */
SLUICE_AVAILABLE_IN_0_1
void sluice_slot_state_free(SluiceSlotState *state);

/** sluice_broker_stats_init: empty containers, counts 0. */
SLUICE_AVAILABLE_IN_0_1
void sluice_broker_stats_init(SluiceBrokerStats *stats);

/** sluice_broker_stats_clear: frees what @stats holds (not @stats). */
SLUICE_AVAILABLE_IN_0_1
void sluice_broker_stats_clear(SluiceBrokerStats *stats);

/**
 * sluice_broker_stats_add_queue:
 * Appends a queue's figures (copies @name). For broker authors and tests.
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_broker_stats_add_queue(SluiceBrokerStats *stats, const gchar *name,
                                   gint64 ready);

/** sluice_broker_stats_add_dead_letters: adds @n to @reason's count. */
SLUICE_AVAILABLE_IN_0_1
void sluice_broker_stats_add_dead_letters(SluiceBrokerStats *stats,
                                          const gchar *reason, gint64 n);

/**
 * sluice_broker_stats_add_worker_info:
 * @info: (nullable) (transfer none): what the worker announced; referenced
 *
 * Appends a worker (copies @id). For broker authors.
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_broker_stats_add_worker_info(SluiceBrokerStats *stats,
                                         const gchar *id, gint64 last_seen_ms,
                                         gboolean alive, GBytes *info);

/** sluice_broker_stats_add_dropped: adds @n to the dead letters dropped by
 * the cap, for @reason. */
SLUICE_AVAILABLE_IN_0_1
void sluice_broker_stats_add_dropped(SluiceBrokerStats *stats,
                                     const gchar *reason, gint64 n);

/* ---- Storage layouts ---------------------------------------------------- */

/**
 * SluiceLayoutStep:
 * @version: the layout version the step brings a store to
 * @name: the step's name, its file's without the extension
 *   ("002-migrations")
 * @summary: what it does, in a sentence
 * @applied_at_ms: when the store recorded it as applied (ms since epoch);
 *   0 when it is not applied, or was applied before the store recorded
 *   its steps
 * @applied_by: (nullable): what applied it ("sluice 0.1.0"), where the
 *   store records it
 *
 * One migration of a store's layout. Owns its strings; freed with the
 * SluiceLayout that holds it.
 */
typedef struct {
  guint version;
  gchar *name;
  gchar *summary;
  gint64 applied_at_ms;
  gchar *applied_by;
} SluiceLayoutStep;

/**
 * SluiceLayout:
 * @store: the store, for people ("the SQLite database /var/lib/x.db",
 *   "the namespace “jobs” on Redis at redis://h:6379/0")
 * @version: the layout version the store is at; 0 for a store that holds
 *   nothing yet (a file or namespace no client has opened for writing)
 * @recorded: the store records @version (FALSE for a store made before
 *   layouts were versioned, which is at version 1, and for an empty one):
 *   the next client that may write records it
 * @current: the version this Sluice reads and writes
 * @applied: (element-type SluiceLayoutStep): the steps the store records
 *   as applied, oldest first (empty for a store that records none)
 * @pending: (element-type SluiceLayoutStep): the steps from @version to
 *   @current, in order; empty when the store is at @current or newer
 * @notes: (element-type utf8): what else there is to say about the
 *   store's layout, a line each (Redis: the script set it records, a
 *   partition at another version)
 *
 * A store's layout version and how to bring it to this Sluice's: what
 * sluice_sqlite_get_layout() and sluice_redis_get_layout() fill, and
 * `sluice migrate` shows. A store whose @version is newer than @current
 * is refused by this Sluice (docs/upgrading.md). Clear with
 * sluice_layout_clear().
 */
typedef struct {
  gchar *store;
  guint version;
  gboolean recorded;
  guint current;
  GPtrArray *applied;
  GPtrArray *pending;
  GPtrArray *notes;
} SluiceLayout;

/** sluice_layout_init: empty lists, versions 0. */
SLUICE_AVAILABLE_IN_0_1
void sluice_layout_init(SluiceLayout *layout);

/** sluice_layout_clear: frees what @layout holds (not @layout). */
SLUICE_AVAILABLE_IN_0_1
void sluice_layout_clear(SluiceLayout *layout);

/**
 * sluice_layout_add_step:
 * @list: SluiceLayout.applied or .pending
 * @name, @summary, @applied_by: (transfer none) (nullable): copied
 *
 * Appends a step. For broker authors.
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_layout_add_step(GPtrArray *list, guint version, const gchar *name,
                            const gchar *summary, gint64 applied_at_ms,
                            const gchar *applied_by);

/* ---- Dead letters ------------------------------------------------------- */

/* The reasons a message is buried (docs/semantics.md, "Dead letters").
 * The list of them is sluice_dead_letter_reasons(): add a reason there
 * too. */
#define SLUICE_DLQ_MAX_ATTEMPTS "max_attempts"
#define SLUICE_DLQ_MAX_DELIVERIES "max_deliveries"
#define SLUICE_DLQ_UNKNOWN_TASK "unknown_task"
#define SLUICE_DLQ_MALFORMED "malformed"
#define SLUICE_DLQ_NON_RETRYABLE "non_retryable"
#define SLUICE_DLQ_EXPIRED "expired"
/** The reason of a task that snoozed more than its max_snoozes. */
#define SLUICE_DLQ_SNOOZED_TOO_OFTEN "snoozed_too_often"

/**
 * sluice_dead_letter_reasons:
 *
 * Every reason the core buries a message for: each SLUICE_DLQ_* string,
 * once, in a fixed order. This is the one list: the command's --reason,
 * the dashboard's filter and its API, the metrics and the tests of
 * sluice(1) all take it from here, so a new reason reaches every tool.
 * Returns: (transfer none) (array zero-terminated=1): static strings
 */
SLUICE_AVAILABLE_IN_0_1
const gchar *const *sluice_dead_letter_reasons(void);

/**
 * sluice_dead_letter_reason_describe:
 * @reason: (nullable): a dead-letter reason
 * Returns: (transfer none) (nullable): when a message is buried for
 * @reason, in a few words ("it failed on its last attempt"), or NULL when
 * @reason is none of sluice_dead_letter_reasons().
 */
SLUICE_AVAILABLE_IN_0_1
const gchar *sluice_dead_letter_reason_describe(const gchar *reason);

/**
 * SluiceDeadLetter:
 * @entry_id: the broker's id for this entry (NULL until it is stored)
 * @task_id: (nullable): the task's id; NULL for a malformed message
 * @task: (nullable): the task's name; NULL for a malformed message
 * @reason: one of the SLUICE_DLQ_* reasons
 * @detail: (nullable): the final error, in words
 * @source: the queue it was taken from
 * @deliveries: how many times it had been delivered
 * @at: when it was buried (ms since epoch)
 * @payload: the original message bytes, untouched
 *
 * Owns every field; free with sluice_dead_letter_free().
 */
typedef struct {
  gchar *entry_id;
  gchar *task_id;
  gchar *task;
  gchar *reason;
  gchar *detail;
  gchar *source;
  guint deliveries;
  gint64 at;
  GBytes *payload;
} SluiceDeadLetter;

/** sluice_dead_letter_new: Returns: (transfer full): an all-empty entry. */
SLUICE_AVAILABLE_IN_0_1
SluiceDeadLetter *sluice_dead_letter_new(void);

/** sluice_dead_letter_copy: Returns: (transfer full): a deep copy. */
SLUICE_AVAILABLE_IN_0_1
SluiceDeadLetter *sluice_dead_letter_copy(const SluiceDeadLetter *entry);

/** sluice_dead_letter_free: NULL-safe. */
SLUICE_AVAILABLE_IN_0_1
void sluice_dead_letter_free(SluiceDeadLetter *entry);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(SluiceBroker, sluice_broker_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SluiceDeadLetter, sluice_dead_letter_free)

G_END_DECLS

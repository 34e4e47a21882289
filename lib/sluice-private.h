/* sluice-private.h - internals shared by the core, the serializers and the
 * brokers. Never installed.
 *
 * Semi-private functions are named sluice_<module>__<verb> (two
 * underscores): callable across files of the library, not by users.
 */
#pragma once

#ifndef SLUICE_COMPILATION
#error "sluice-private.h is internal to libsluice"
#endif

#include <sluice/sys/broker.h>
#include <sluice/sluice.h>

/* sluice_text__escape(): quoting outside bytes in messages;
 * sluice_name__problem(): the one rule for names. */
#include "serializers/codec-private.h"
#include "serializers/text.h"

G_BEGIN_DECLS

/* ---- Structured logging --------------------------------------------------
 *
 * Every log line goes through g_log_structured_array() with the log domain
 * "sluice" and, where a task is concerned, the fields SLUICE_TASK_ID,
 * SLUICE_TASK, SLUICE_QUEUE and SLUICE_ATTEMPT, so journald (or a JSON log
 * writer) can filter by task, and SLUICE_TRACEPARENT and SLUICE_TRACE_ID
 * when its message carries a trace context. NULL fields are left out.
 */
void sluice_log__message(GLogLevelFlags level, const gchar *format, ...)
    G_GNUC_PRINTF(2, 3);
/* The one line per finished task: "<task> <what> in <run time>; <then> in
 * <delay> ms". Fields SLUICE_OUTCOME (@outcome, one word),
 * SLUICE_DURATION_US (left out when @duration_us < 0: it never ran) and
 * SLUICE_DELAY_MS (with @then, when @delay_ms >= 0: how long until it is
 * due again). @env is NULL for a message that did not decode. */
void sluice_log__finished(const SluiceEnvelope *env, const gchar *queue,
                          const gchar *outcome, const gchar *what,
                          gint64 duration_us, const gchar *then,
                          gint64 delay_ms);
/* A line about a task without its envelope at hand. */
void sluice_log__task(GLogLevelFlags level, const gchar *task_id,
                      const gchar *task, const gchar *queue, guint attempt,
                      const gchar *format, ...) G_GNUC_PRINTF(6, 7);
/* A line about the task of @env (nullable: a message that did not decode),
 * taken from @queue: its id, name, attempt and trace context. */
void sluice_log__envelope(GLogLevelFlags level, const SluiceEnvelope *env,
                          const gchar *queue, const gchar *format, ...)
    G_GNUC_PRINTF(4, 5);
/* A broker's line (sluice_broker_log()): @message with the field
 * SLUICE_BROKER, @broker_name, when that is not NULL. */
void sluice_log__broker(GLogLevelFlags level, const gchar *broker_name,
                        const gchar *message);

/* ---- Trace context (trace-context.c) ------------------------------------- */

/* sluice_trace_context_check() on @env's headers. */
gboolean sluice_trace__check_envelope(const SluiceEnvelope *env,
                                      GError **error);
/* Returns: (transfer none) (nullable): @env's traceparent when it is a
 * valid one, its trace id copied into @trace_id; NULL otherwise. */
const gchar *sluice_trace__traceparent(const SluiceEnvelope *env,
                                       gchar trace_id[33]);

/* ---- Tasks --------------------------------------------------------------- */

typedef struct {
  gchar *name;
  SluiceTaskFunc func;
  gpointer user_data;
  GDestroyNotify destroy;
  SluiceTaskOptions options; /* options.queue points at @queue,
                                options.rate_limit at @rate_limit */
  gchar *queue;
  SluiceRateLimit *rate_limit;               /* owned (flow.c); NULL = none */
  SluiceConcurrencyLimit *concurrency_limit; /* owned; NULL = none */
} SluiceTaskEntry;

/* ---- Flow control (flow.c) ----------------------------------------------- */

/* What is wrong with @limit, for an error message that @field (the
 * option's name, "rate_limit") prefixes; NULL when it is well formed. */
gchar *sluice_rate_limit__problem(const SluiceRateLimit *limit,
                                  const gchar *field);
/* Returns: (transfer full): a deep copy; free with sluice_rate_limit__free. */
SluiceRateLimit *sluice_rate_limit__copy(const SluiceRateLimit *limit);
void sluice_rate_limit__free(SluiceRateLimit *limit);
/* Returns: (transfer full): the bucket of @env under a limit split by
 * @key (@key_name), which is the limit of @scope ("t" for a task's, "q"
 * for a queue's, "ct"/"cq" for concurrency) named @name. */
gchar *sluice_flow__bucket(SluiceLimitKey key, const gchar *key_name,
                           const gchar *scope, const gchar *name,
                           const SluiceEnvelope *env);
gchar *sluice_concurrency_limit__problem(const SluiceConcurrencyLimit *limit,
                                         const gchar *field);
SluiceConcurrencyLimit *
sluice_concurrency_limit__copy(const SluiceConcurrencyLimit *limit);
void sluice_concurrency_limit__free(SluiceConcurrencyLimit *limit);
/* The generic cell rate algorithm's two figures of @limit, in us. */
/* One line an operator reads: "rate task mail.send: 10 per 1000 ms, burst
 * 1, per header tenant", "concurrency queue renders: 3 at once". @scope is
 * "task" or "queue". Returns: (transfer full). */
gchar *sluice_rate_limit__describe(const SluiceRateLimit *limit,
                                   const gchar *scope, const gchar *name);
gchar *sluice_concurrency_limit__describe(const SluiceConcurrencyLimit *limit,
                                          const gchar *scope,
                                          const gchar *name);
gint64 sluice_rate_limit__interval_us(const SluiceRateLimit *limit);
gint64 sluice_rate_limit__tolerance_us(const SluiceRateLimit *limit);

/* The task context lives on the executor's stack for one run. */
struct _SluiceTaskContext {
  const SluiceEnvelope *envelope; /* borrowed from the job */
  guint delivery_count;
  guint max_attempts;
  /* The job it runs for owns the cancellable: the context asks it, through
   * the worker's hook, so tasks need not know workers. */
  GCancellable *(*cancellable_of)(gpointer job);
  gpointer job;
  GBytes *result;        /* owned */
  gint64 retry_delay_ms; /* >= 0 after sluice_task_context_retry(), and
                            the delay of a snooze */
  gint64 admitted_at;    /* broker ms of the rate limit's admission; 0 */
  gboolean args_unpacked;
  msgpack_zone zone;
  msgpack_object args;
  /* The worker's hook for sluice_task_context_progress() (progress.c);
   * NULL where no broker is at hand (a child process). */
  void (*progress_of)(gpointer job, gdouble fraction, const gchar *message);
};

gboolean sluice_task__name_is_valid(const gchar *name, GError **error);

/* Returns: (transfer none) (nullable): valid while @registry is. */
const SluiceTaskEntry *sluice_registry__lookup(SluiceRegistry *registry,
                                               const gchar *name);

/* @cancellable_of: returns (transfer none) @job's cancellable, made on
 * first use */
void sluice_task_context__init(SluiceTaskContext *ctx,
                               const SluiceEnvelope *env, guint delivery_count,
                               guint max_attempts,
                               GCancellable *(*cancellable_of)(gpointer job),
                               gpointer job);
void sluice_task_context__clear(SluiceTaskContext *ctx);

/* ---- Client -------------------------------------------------------------- */

/* Returns: (transfer full): a new random task id (a version 4 UUID). */
gchar *sluice_client__new_id(void);

/* Checks a name by the one rule (sluice_name__problem()), as a
 * SLUICE_CLIENT_ERROR_INVALID. */
gboolean sluice_client__check_name(SluiceNameKind kind, const gchar *value,
                                   GError **error);

/* Returns: (transfer none): @client's options, defaults filled in. */
const SluiceClientOptions *sluice_client__options(SluiceClient *client);

/* The final `cancelled` record of task @id, saying @why, with what is
 * known of the task: its name, queue, attempt and enqueue time, from
 * @payload (its message, when the caller holds it) or else from the
 * record stored for it (a tracked task's queued, scheduled or retrying
 * record). Returns: (transfer full): the encoded record. */
GBytes *sluice_client__cancelled_record(SluiceClient *client, const gchar *id,
                                        GBytes *payload, const gchar *why);
/* The same from the task's decoded message (nullable). */
GBytes *sluice_client__cancelled_record_of(SluiceClient *client,
                                           const gchar *id,
                                           const SluiceEnvelope *env,
                                           const gchar *why);

/* The message of task @id if it is on the schedule, else NULL, in
 * @out_payload (transfer full); FALSE and @error if the broker failed. */
gboolean sluice_client__scheduled_payload(SluiceClient *client, const gchar *id,
                                          GBytes **out_payload, GError **error);

/* One request, prepared: the envelope's bytes plus what the broker needs. */
typedef struct {
  SluiceEnvelope *env;
  GBytes *payload;
  GBytes *record;
  gint64 due_at;
  gboolean dedup;
  gchar *unique_key;    /* NULL: no uniqueness */
  gint64 unique_ttl_ms; /* the claim's lifetime at enqueue */
  gboolean unique_replace;
} SluicePrepared;

/* ---- Uniqueness (unique.c) ---- */

/* Checks @unique and fills @p's uniqueness (its key, the claim's lifetime
 * and @env->unique); a debounce moves @p's due time. FALSE and
 * SLUICE_CLIENT_ERROR_INVALID naming the field otherwise. */
gboolean sluice_unique__prepare(const SluiceUniqueOptions *unique,
                                gint64 default_ttl_ms, gint64 now,
                                SluicePrepared *p, GError **error);
/* Reads @env->unique: its scope and (transfer none, into @env) key. FALSE
 * for a message without one or with a malformed one. */
gboolean sluice_unique__parse(const SluiceEnvelope *env,
                              SluiceUniqueScope *out_scope,
                              const gchar **out_key);

/* Checks and encodes one request into @out (cleared first). @id
 * (nullable) wins over @options->id; @wf (nullable) is the envelope's
 * workflow reference. */
gboolean sluice_client__prepare(SluiceClient *client, const gchar *task,
                                GBytes *args,
                                const SluiceEnqueueOptions *options,
                                const gchar *id, const gchar *wf, gint64 now,
                                SluicePrepared *out, GError **error);
void sluice_client__prepared_clear(SluicePrepared *p);
/* Returns: (transfer none) (nullable): the client's keyring. */
SluiceKeyring *sluice_client__get_keyring(SluiceClient *client);
/* Seals @env's args (in clear) with @keyring's current key, checking them
 * first as a worker will once it opens them. */
gboolean sluice_client__seal_args(SluiceKeyring *keyring, SluiceEnvelope *env,
                                  GError **error);
/* The submit of @p (borrowing from it). */
void sluice_client__fill_submit(SluiceClient *client, SluicePrepared *p,
                                SluiceSubmit *s);
/* Returns: (transfer none): @client's broker and clock. */
SluiceClock *sluice_client__clock(SluiceClient *client);

/* Producer hooks (middleware.c): added at any time, run in order. */
typedef struct _SluiceHooks SluiceHooks;
SluiceHooks *sluice_hooks__new(void);
void sluice_hooks__free(SluiceHooks *hooks);
void sluice_hooks__add(SluiceHooks *hooks, SluiceProducerHook hook,
                       gpointer user_data, GDestroyNotify destroy);
gboolean sluice_hooks__run_producer(SluiceHooks *hooks, SluiceEnvelope *env,
                                    GError **error);

/* The longest queue name and task id a client accepts. */
#define SLUICE_CLIENT_QUEUE_MAX 200
#define SLUICE_CLIENT_ID_MAX 256

/* ---- Workflows (workflow.c builds them, workflow-run.c runs them) ---------
 *
 * A workflow is compiled into tasks and joins (sluice/sys/broker.h). Each
 * task's envelope carries a reference, SluiceEnvelope.wf, in the text form
 * "W|to|index|policy|from|mode" (PROTOCOL.md, "Workflows"):
 *   W       the workflow id (a client-made UUID: no '|')
 *   to      the join the task reports its final outcome to, as member
 *           `index`; `policy` is that join's:
 *             'f' fail fast, 'a' wait for all, 'i' ignore failures (chords
 *             and the workflow's end join), 's' stop (a chain step), 'k'
 *             continue (a chain step marked to continue)
 *   from    (may be empty) the join whose outcomes become the task's
 *           arguments; `mode` says how: 'v' the one member's result, 'm'
 *           the map of results and errors, 'o' the map of successes, 's'
 *           the map, and only if every member succeeded (a batch's
 *           on_success: otherwise the task is cancelled unrun)
 * Join ids are "W" (the end join, which every last task reports to) and
 * "W/<n>"; task ids "W.<n>". A batch B is one join "B" (kind "batch");
 * with "lo" 1 its member 0 holds it open until it is closed.
 *
 * A join's meta (msgpack map, the core's): "k" its kind ("end", "chord",
 * "chain"), "p" its policy, "lo".."hi" the task numbers a fail-fast
 * release cancels, "n" the workflow's task count (end join), "up" (chain
 * joins) [join, base, width, policy]: where the completions of the steps it
 * would release are counted, so that a stopped chain still reports them as
 * failures there. */
typedef struct {
  gchar *workflow;
  gchar *to;
  guint index;
  gchar policy;
  gchar *from; /* NULL when none */
  gchar mode;
} SluiceWfRef;

gchar *sluice_wf__format(const SluiceWfRef *ref);
/* FALSE if @text is not a reference (@out is then cleared). */
gboolean sluice_wf__parse(const gchar *text, SluiceWfRef *out);
void sluice_wf__clear(SluiceWfRef *ref);
/* What a member's final outcome asks of its join under @policy. */
SluiceJoinStep sluice_wf__step(gchar policy, gboolean failed);
/* The member outcome a join stores (msgpack): @state is a
 * sluice_task_state_to_string() name; @value (nullable) a result. */
GBytes *sluice_wf__outcome(const gchar *id, const gchar *state, GBytes *value,
                           const gchar *error);
/* TRUE when @outcome (sluice_wf__outcome()) is a success. */
gboolean sluice_wf__outcome_succeeded(GBytes *outcome);
/* After `join_arrive`: cancels what a fail-fast release left running and
 * reports the steps a stopped chain will never run. Errors are logged. */
void sluice_wf__after_arrivals(SluiceBroker *broker, gint64 now_ms,
                               const SluiceJoinArrival *items, guint n);
/* Before a task with a `from` join runs: replaces @env's args with what
 * the join gathered, and drops `from` from @env->wf (a retry keeps the
 * arguments it ran with). FALSE and @error when the join cannot be read. */
gboolean sluice_wf__gather_args(SluiceBroker *broker, SluiceEnvelope *env,
                                gboolean *out_gathered, GError **error);
/* For batches (workflow-batch.c): the task nodes of @node (a task, or a
 * group of tasks; borrowed into @out), or FALSE and @error for anything
 * else. */
gboolean sluice_workflow__flat_tasks(SluiceWorkflow *node, GPtrArray *out,
                                     GError **error);
/* Prepares task node @node as task @id with reference @ref. */
gboolean sluice_workflow__prepare_task(SluiceClient *client,
                                       SluiceWorkflow *node, const gchar *id,
                                       const SluiceWfRef *ref, gint64 now,
                                       SluicePrepared *out, GError **error);
/* The meta of a join, decoded: FALSE when it is not the core's. */
typedef struct {
  gchar kind[8];
  gchar policy;
  guint lo, hi, n_tasks;
  gchar *up_join; /* NULL when none */
  guint up_base, up_width;
  gchar up_policy;
  /* The end join's: the workflow's shape (workflow.c), one msgpack value:
   * a task [0, n, name], a group [1, [...]], a chain [2, [...]], a chord
   * [3, policy, group, callback]; NULL elsewhere. Owned. */
  GBytes *tree;
} SluiceWfMeta;
GBytes *sluice_wf__meta_encode(const SluiceWfMeta *meta);
gboolean sluice_wf__meta_decode(GBytes *bytes, SluiceWfMeta *out);
void sluice_wf__meta_clear(SluiceWfMeta *meta);

/* ---- Events (events.c) ---------------------------------------------------
 *
 * An event's bytes (msgpack map): "k" kind name, "id", "task", "queue",
 * "attempt", "at", and when set "detail", "progress", "worker". */
GBytes *sluice_events__encode(SluiceEventKind kind, const SluiceEnvelope *env,
                              gint64 at, const gchar *detail, gdouble progress,
                              const gchar *worker);
/* The "enqueued" events of @n envelopes, appended (a failure is logged:
 * events never fail an enqueue). */
void sluice_events__enqueued(SluiceBroker *broker, SluiceEnvelope *const *envs,
                             guint n, gint64 now);
/* sluice_client_read_events() on @broker: Returns: (transfer full) the
 * decoded events (SluiceEvent*), or NULL and @error. */
GPtrArray *sluice_events__read(SluiceBroker *broker, const gchar *cursor,
                               guint limit, gint64 block_ms, gchar **out_cursor,
                               GError **error);

/* ---- Periodic schedules (periodic.c), driven by the worker --------------- */

typedef struct _SluicePeriodic SluicePeriodic;

/* Returns: (transfer full): a schedule, or NULL and SLUICE_WORKER_ERROR. */
SluicePeriodic *sluice_periodic__new(const SluicePeriodicOptions *options,
                                     SluiceRegistry *registry, GError **error);
void sluice_periodic__free(SluicePeriodic *periodic);
/* The worker's keyring (nullable; referenced): occurrences are sealed. */
void sluice_periodic__set_keyring(SluicePeriodic *periodic,
                                  SluiceKeyring *keyring);
const gchar *sluice_periodic__get_name(SluicePeriodic *periodic);
/* Reads the last dispatched occurrence and applies the missed-run policy. */
gboolean sluice_periodic__start(SluicePeriodic *periodic, SluiceBroker *broker,
                                gint64 now_ms, GError **error);
/* Dispatches the occurrences due by @now_ms (starting first if needed). */
gboolean sluice_periodic__tick(SluicePeriodic *periodic, SluiceBroker *broker,
                               gint64 now_ms, GError **error);
/* Returns: the next occurrence, or 0 before a successful start. */
gint64 sluice_periodic__get_next_due(SluicePeriodic *periodic);

/* ---- Worker announcements (worker/info.c) -------------------------------- */

/* Returns: (transfer full): @w's fields (not id, info, last_seen, alive) as
 * the bytes a worker announces. */
GBytes *sluice_worker_info__encode(const SluiceWorkerInfo *w);
/* Fills @w's fields from @w->info; leaves what it cannot read unset. */
void sluice_worker_info__decode(SluiceWorkerInfo *w);
/* Returns: (transfer full): a SluiceRunningTask (copies the strings). */
SluiceRunningTask *sluice_running_task__new(const gchar *id, const gchar *task,
                                            const gchar *queue,
                                            gint64 started_at_ms);
void sluice_running_task__free(gpointer task);

/* How many sluice_dead_letter_reasons() there are (broker-values.c checks
 * it at build time), for the tables counted by reason. */
#define SLUICE_DLQ_N_REASONS 7

/* ---- Sealing (seal.c) ----------------------------------------------------
 *
 * PROTOCOL.md, "Sealed arguments and results". The domain is bound into the
 * associated data with the task's id, name and queue, so sealed args cannot
 * pass for a result nor either for another task's. */
typedef enum {
  SLUICE_SEAL_ARGS,
  SLUICE_SEAL_RESULT,
} SluiceSealDomain;

/* Seals @plain (msgpack bytes) with @keyring's current key. Returns:
 * (transfer full): one msgpack bin holding nonce, ciphertext and tag, and
 * @out_label (transfer full) the `seal` value; or NULL and @error. */
GBytes *sluice_seal__close(SluiceKeyring *keyring, SluiceSealDomain domain,
                           const gchar *id, const gchar *task,
                           const gchar *queue, GBytes *plain, gchar **out_label,
                           GError **error);
/* The same with a given 12-byte @nonce: for the tests' fixed vectors only
 * (a nonce must never repeat under one key). */
GBytes *sluice_seal__close_with_nonce(SluiceKeyring *keyring,
                                      SluiceSealDomain domain, const gchar *id,
                                      const gchar *task, const gchar *queue,
                                      GBytes *plain, const guint8 *nonce,
                                      gchar **out_label, GError **error);
/* Opens what sluice_seal__close() made. @keyring may be NULL (the message
 * then names the key wanted). Returns: (transfer full): the msgpack bytes,
 * or NULL and a SLUICE_SEAL_ERROR whose message starts "cannot decrypt:". */
GBytes *sluice_seal__open(SluiceKeyring *keyring, SluiceSealDomain domain,
                          const gchar *label, const gchar *id,
                          const gchar *task, const gchar *queue, GBytes *sealed,
                          GError **error);

G_END_DECLS

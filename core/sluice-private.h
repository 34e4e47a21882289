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
/* The one line per finished task (SLUICE_OUTCOME, SLUICE_DURATION_US;
 * @duration_us < 0 when it never ran). @env is NULL for a message that did
 * not decode. */
void sluice_log__finished(const SluiceEnvelope *env, const gchar *queue,
                          const gchar *outcome, gint64 duration_us);
/* A line about a task without its envelope at hand. */
void sluice_log__task(GLogLevelFlags level, const gchar *task_id,
                      const gchar *task, const gchar *queue, guint attempt,
                      const gchar *format, ...) G_GNUC_PRINTF(6, 7);
/* A line about the task of @env (nullable: a message that did not decode),
 * taken from @queue: its id, name, attempt and trace context. */
void sluice_log__envelope(GLogLevelFlags level, const SluiceEnvelope *env,
                          const gchar *queue, const gchar *format, ...)
    G_GNUC_PRINTF(4, 5);

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

/* The longest queue name and task id a client accepts. */
#define SLUICE_CLIENT_QUEUE_MAX 200
#define SLUICE_CLIENT_ID_MAX 256

/* ---- Periodic schedules (periodic.c), driven by the worker --------------- */

typedef struct _SluicePeriodic SluicePeriodic;

/* Returns: (transfer full): a schedule, or NULL and SLUICE_WORKER_ERROR. */
SluicePeriodic *sluice_periodic__new(const SluicePeriodicOptions *options,
                                     SluiceRegistry *registry, GError **error);
void sluice_periodic__free(SluicePeriodic *periodic);
const gchar *sluice_periodic__get_name(SluicePeriodic *periodic);
/* Reads the last dispatched occurrence and applies the missed-run policy. */
gboolean sluice_periodic__start(SluicePeriodic *periodic, SluiceBroker *broker,
                                gint64 now_ms, GError **error);
/* Dispatches the occurrences due by @now_ms (starting first if needed). */
gboolean sluice_periodic__tick(SluicePeriodic *periodic, SluiceBroker *broker,
                               gint64 now_ms, GError **error);
/* Returns: the next occurrence, or 0 before a successful start. */
gint64 sluice_periodic__get_next_due(SluicePeriodic *periodic);

/* ---- Worker announcements (worker-info.c) -------------------------------- */

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

/* ---- Brokers ------------------------------------------------------------- */

/* The class a broker instance was validated against (the core's copy). */
const SluiceBrokerClass *sluice_broker__get_class(SluiceBroker *broker);

G_END_DECLS

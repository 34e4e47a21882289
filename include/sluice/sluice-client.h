/* sluice-client.h - the producer side: enqueue, await, inspect, cancel, and
 * the dead-letter queue.
 *
 * A client is cheap and thread-safe: any number of threads may enqueue
 * through one client at once.
 *
 *     g_autoptr(SluiceClient) client = sluice_client_new (broker, NULL,
 *                                                         &error);
 *     g_autoptr(GBytes) args = sluice_args_from_json ("{\"n\": 3}", -1,
 *                                                     &error);
 *     g_autofree gchar *id = sluice_client_enqueue (client, "math.square",
 *                                                   args, NULL, &error);
 *     g_autoptr(SluiceResult) r = sluice_client_get_result (client, id, 5000,
 *                                                            NULL, &error);
 */
#pragma once

#include <sluice/sluice-brokers.h>
#include <sluice/sluice-envelope.h>
#include <sluice/sluice-macros.h>
#include <sluice/sluice-result.h>
#include <sluice/sluice-task.h>

G_BEGIN_DECLS

#define SLUICE_CLIENT_ERROR (sluice_client_error_quark())
SLUICE_AVAILABLE_IN_0_1
GQuark sluice_client_error_quark(void);

/**
 * SluiceClientError:
 * @SLUICE_CLIENT_ERROR_FAILED: anything else (also any unknown code)
 * @SLUICE_CLIENT_ERROR_TIMEOUT: get_result gave up waiting
 * @SLUICE_CLIENT_ERROR_NOT_FOUND: no record / no dead letter with that id
 * @SLUICE_CLIENT_ERROR_TOO_LARGE: the message is over max_message_bytes
 * @SLUICE_CLIENT_ERROR_INVALID: a bad argument (task name, queue, id, ...)
 */
typedef enum {
  SLUICE_CLIENT_ERROR_FAILED,
  SLUICE_CLIENT_ERROR_TIMEOUT,
  SLUICE_CLIENT_ERROR_NOT_FOUND,
  SLUICE_CLIENT_ERROR_TOO_LARGE,
  SLUICE_CLIENT_ERROR_INVALID,
} SluiceClientError;

#define SLUICE_DEFAULT_RESULT_TTL_MS (24 * 3600 * 1000)
#define SLUICE_DEFAULT_REVOKE_TTL_MS (3600 * 1000)
#define SLUICE_DEFAULT_DEDUP_TTL_MS (24 * 3600 * 1000)
#define SLUICE_DEFAULT_QUEUE "default"

/**
 * SluiceHeadersHook:
 * @env: the message being enqueued; the hook may only set headers on it,
 *   with sluice_envelope_set_header(); its id, task and queue are set
 * @user_data: SluiceClientOptions.headers_hook_data
 *
 * Adds headers from the enqueuing thread's context. A trace context it
 * sets is checked like any other (sluice_trace_context_check()): a
 * malformed one fails the enqueue.
 */
typedef void (*SluiceHeadersHook)(SluiceEnvelope *env, gpointer user_data);

/**
 * SluiceClientOptions:
 * @track_state: write queued/scheduled records when enqueueing
 * @result_ttl_ms: lifetime of those records (0 = 24 h)
 * @revoke_ttl_ms: how long a revocation is kept (0 = 1 h)
 * @dedup_ttl_ms: how long a caller-chosen id stays claimed (0 = 24 h)
 * @max_message_bytes: refuse larger messages (0 = 1 MiB)
 * @codec: (nullable): the codec messages are written with (NULL = msgpack)
 * @result_poll_interval_ms: get_result re-reads the record at least this
 *   often in case a notification was lost (0 = 5000)
 * @registry: (nullable): when set, an enqueue that names no queue uses the
 *   task's registered queue (SluiceTaskOptions.queue); the client takes a
 *   reference
 * @headers_hook: (nullable): called for every message, on the thread that
 *   enqueues it, before the headers of its SluiceEnqueueOptions are set
 *   (so those win); for headers taken from the caller's context, such as
 *   the current span's traceparent (sluice-trace.h)
 * @headers_hook_data: passed to @headers_hook; the client does not own it
 */
typedef struct {
  gboolean track_state;
  gint64 result_ttl_ms;
  gint64 revoke_ttl_ms;
  gint64 dedup_ttl_ms;
  gsize max_message_bytes;
  const SluiceCodec *codec;
  gint64 result_poll_interval_ms;
  SluiceRegistry *registry;
  SluiceHeadersHook headers_hook;
  gpointer headers_hook_data;
} SluiceClientOptions;

SLUICE_AVAILABLE_IN_0_1
void sluice_client_options_init(SluiceClientOptions *options);

/**
 * SluiceEnqueueOptions:
 * @queue: (nullable): NULL = "default"
 * @id: (nullable): a caller-chosen task id. With one, the enqueue is
 *   idempotent: enqueueing the same id again within dedup_ttl_ms writes
 *   nothing (see sluice_client_enqueue_full()). NULL = a new random id.
 * @delay_ms: run no earlier than this long from now (0 = now)
 * @eta_ms: run no earlier than this time (ms since epoch); wins over
 *   @delay_ms when both are set
 * @options: per-message options (retry policy, timeout, expiry, ...)
 * @headers: (nullable) (element-type utf8 utf8): copied into the message;
 *   "traceparent" and "tracestate" must be a W3C trace context
 *   (sluice-trace.h), or the enqueue fails with SLUICE_CLIENT_ERROR_INVALID
 *
 * Initialise with sluice_enqueue_options_init().
 */
typedef struct {
  const gchar *queue;
  const gchar *id;
  gint64 delay_ms;
  gint64 eta_ms;
  SluiceMessageOptions options;
  GHashTable *headers;
} SluiceEnqueueOptions;

SLUICE_AVAILABLE_IN_0_1
void sluice_enqueue_options_init(SluiceEnqueueOptions *options);

typedef struct _SluiceClient SluiceClient;

/**
 * sluice_client_new:
 * @broker: (transfer none): the client takes its own reference
 * @options: (nullable): copied; NULL = defaults
 * Returns: (transfer full): the client, or NULL and @error.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceClient *sluice_client_new(SluiceBroker *broker,
                                const SluiceClientOptions *options,
                                GError **error);
SLUICE_AVAILABLE_IN_0_1
SluiceClient *sluice_client_ref(SluiceClient *client);
SLUICE_AVAILABLE_IN_0_1
void sluice_client_unref(SluiceClient *client);

/** sluice_client_get_broker: Returns: (transfer none) */
SLUICE_AVAILABLE_IN_0_1
SluiceBroker *sluice_client_get_broker(SluiceClient *client);

/**
 * sluice_client_enqueue:
 * @task: (transfer none): the task's name
 * @args: (nullable) (transfer none): msgpack bytes of one value; NULL = nil
 * @options: (nullable): NULL = defaults
 *
 * Returns: (transfer full): the task id, or NULL and @error (the message
 * was then not enqueued, unless the error is SLUICE_BROKER_ERROR_UNAVAILABLE
 * after the request was sent, when it may have been: retry with the same
 * @options->id to be safe).
 */
SLUICE_AVAILABLE_IN_0_1
gchar *sluice_client_enqueue(SluiceClient *client, const gchar *task,
                             GBytes *args, const SluiceEnqueueOptions *options,
                             GError **error);

/**
 * sluice_client_enqueue_full:
 * @out_existed: (out) (optional): TRUE when @options->id was enqueued
 *   before (within dedup_ttl_ms) and nothing was written now
 *
 * As sluice_client_enqueue().
 */
SLUICE_AVAILABLE_IN_0_1
gchar *sluice_client_enqueue_full(SluiceClient *client, const gchar *task,
                                  GBytes *args,
                                  const SluiceEnqueueOptions *options,
                                  gboolean *out_existed, GError **error);

/**
 * SluiceEnqueueRequest:
 * @task: the task's name
 * @args: (nullable): msgpack bytes
 * @options: (nullable)
 */
typedef struct {
  const gchar *task;
  GBytes *args;
  const SluiceEnqueueOptions *options;
} SluiceEnqueueRequest;

/**
 * sluice_client_enqueue_batch:
 * @requests: (array length=n_requests): what to enqueue
 *
 * Enqueues many messages in one broker call (one round trip on Redis).
 * Every request is checked before anything is sent: one bad request fails
 * the whole batch and nothing is enqueued.
 * Returns: (transfer full) (element-type utf8): the ids, in order, or NULL
 * and @error.
 */
SLUICE_AVAILABLE_IN_0_1
GPtrArray *sluice_client_enqueue_batch(SluiceClient *client,
                                       const SluiceEnqueueRequest *requests,
                                       guint n_requests, GError **error);

/**
 * sluice_client_get_result:
 * @timeout_ms: how long to wait; 0 = do not wait; < 0 = forever
 * @cancellable: (nullable): stops the wait (within 200 ms) with
 *   G_IO_ERROR_CANCELLED
 *
 * Waits until the task's record is final. Wakes on the notification written
 * with the final record (not on a poll tick), re-reads the record after
 * every wake-up and re-reads it every result_poll_interval_ms (5 s by default)
 * in case a notification was lost. Needs result storage for the task. Returns:
 * (transfer full): the final record, or NULL and SLUICE_CLIENT_ERROR_TIMEOUT,
 * or a broker error.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceResult *sluice_client_get_result(SluiceClient *client, const gchar *id,
                                       gint64 timeout_ms,
                                       GCancellable *cancellable,
                                       GError **error);

/**
 * sluice_client_inspect:
 * Returns: (transfer full): the task's current record (any state); without
 * a record (track_state off), what the broker holds of it: a task on the
 * schedule is reported scheduled or retrying (with its due time,
 * sluice_result_get_due_at(), and for a deferral of an unknown task name
 * a note saying so), a buried one dead_lettered with its reason. NULL and
 * SLUICE_CLIENT_ERROR_NOT_FOUND when there is nothing (never enqueued,
 * queued or running with track_state off, or expired).
 */
SLUICE_AVAILABLE_IN_0_1
SluiceResult *sluice_client_inspect(SluiceClient *client, const gchar *id,
                                    GError **error);

/**
 * SluiceCancelOutcome:
 * @SLUICE_CANCEL_FAILED: an error occurred (@error is set)
 * @SLUICE_CANCEL_REMOVED: the task was scheduled and is removed: it will
 *   certainly never run, and its record says `cancelled`
 * @SLUICE_CANCEL_REVOKED: the task was not on the schedule (queued,
 *   running, finished or unknown): a revocation was recorded for
 *   revoke_ttl_ms. A worker that meets it queued skips it and records it
 *   `cancelled`; a running one has its cancellable cancelled; a task that
 *   already finished is unaffected.
 */
typedef enum {
  SLUICE_CANCEL_FAILED = 0,
  SLUICE_CANCEL_REMOVED,
  SLUICE_CANCEL_REVOKED,
} SluiceCancelOutcome;

/**
 * sluice_client_cancel:
 * Returns: what happened (see SluiceCancelOutcome).
 */
SLUICE_AVAILABLE_IN_0_1
SluiceCancelOutcome sluice_client_cancel(SluiceClient *client, const gchar *id,
                                         GError **error);

/**
 * sluice_client_get_stats:
 * @queues: (nullable): NULL = every queue the broker knows
 * @out: (out caller-allocates): clear with sluice_broker_stats_clear()
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_client_get_stats(SluiceClient *client,
                                 const gchar *const *queues,
                                 SluiceBrokerStats *out, GError **error);

/**
 * sluice_client_count_servers:
 * @task: a task name
 * @out_serving: (out) (optional): live workers that announced they serve
 *   @task
 * @out_announced: (out) (optional): live workers that announced anything
 *
 * Tells a producer whether anyone will run @task now: 0 serving out of a
 * non-zero number announced means no live worker of the namespace knows
 * the name (a typo, or a rollout not done yet). One stats read.
 */
SLUICE_AVAILABLE_IN_0_2
gboolean sluice_client_count_servers(SluiceClient *client, const gchar *task,
                                     guint *out_serving, guint *out_announced,
                                     GError **error);

/**
 * sluice_client_check:
 * Contacts the broker and checks it can serve this client as configured
 * (for Redis: reachable, credentials accepted, the namespace used in the
 * same mode). For producers that want to fail at start, not at the first
 * enqueue.
 */
SLUICE_AVAILABLE_IN_0_2
gboolean sluice_client_check(SluiceClient *client, GError **error);

/* ---- Dead letters -------------------------------------------------------- */

/**
 * sluice_client_dlq_list:
 * @after: (nullable): list entries after this one (paging); NULL = oldest
 * @limit: at most this many (0 = 100)
 * @reason: (nullable): only this reason
 * @task: (nullable): only this task name
 * Returns: (transfer full) (element-type SluiceDeadLetter): oldest first, or
 * NULL and @error.
 */
SLUICE_AVAILABLE_IN_0_1
GPtrArray *sluice_client_dlq_list(SluiceClient *client, const gchar *after,
                                  guint limit, const gchar *reason,
                                  const gchar *task, GError **error);

/**
 * sluice_client_dlq_get:
 * Returns: (transfer full): the entry, or NULL and NOT_FOUND.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceDeadLetter *sluice_client_dlq_get(SluiceClient *client,
                                        const gchar *entry_id, GError **error);

/**
 * sluice_client_dlq_replay:
 * @keep_attempt: FALSE (the usual) starts again at attempt 1; TRUE keeps the
 *   attempt the message had, so it has only what is left of its budget
 * @out_task_id: (out) (optional) (transfer full): the replayed task's id
 *
 * Deletes the entry and re-enqueues its original message (same task id,
 * same arguments, history kept) in one atomic step. A malformed message is
 * re-enqueued byte for byte.
 * Returns: TRUE, or FALSE and SLUICE_CLIENT_ERROR_NOT_FOUND / a broker error.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_client_dlq_replay(SluiceClient *client, const gchar *entry_id,
                                  gboolean keep_attempt, gchar **out_task_id,
                                  GError **error);

/** sluice_client_dlq_delete: Returns: FALSE and NOT_FOUND if absent. */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_client_dlq_delete(SluiceClient *client, const gchar *entry_id,
                                  GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(SluiceClient, sluice_client_unref)

G_END_DECLS

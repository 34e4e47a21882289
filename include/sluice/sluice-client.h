/* sluice-client.h - the producer side: enqueue, await, inspect, cancel,
 * list, pause, purge and move tasks, and the dead-letter queue.
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
#include <sluice/sluice-seal.h>
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
 * @SLUICE_CLIENT_ERROR_TOO_LARGE: the message is over max_message_bytes, or
 *   its arguments would take more than SLUICE_ARGS_COST_FACTOR times their
 *   size once unpacked (sluice-envelope.h): one kind of refusal, "too large"
 * @SLUICE_CLIENT_ERROR_INVALID: a bad argument (task name, queue, id, ...)
 * @SLUICE_CLIENT_ERROR_DUPLICATE: the uniqueness key is held by
 *   another task (SluiceUniqueOptions); nothing was enqueued
 */
typedef enum {
  SLUICE_CLIENT_ERROR_FAILED,
  SLUICE_CLIENT_ERROR_TIMEOUT,
  SLUICE_CLIENT_ERROR_NOT_FOUND,
  SLUICE_CLIENT_ERROR_TOO_LARGE,
  SLUICE_CLIENT_ERROR_INVALID,
  SLUICE_CLIENT_ERROR_DUPLICATE,
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
 * @events: write an "enqueued" event for each task it
 *   enqueues to the namespace's event stream (sluice-events.h); default
 *   FALSE
 * @keyring: (nullable): seal the args of every message with its current
 *   key (sluice-seal.h), and open sealed results with it; the client takes
 *   a reference. NULL = args in clear, and a sealed result cannot be read
 *   (SLUICE_SEAL_ERROR_UNKNOWN_KEY)
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
  gboolean events;
  SluiceKeyring *keyring;
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
 * @unique: (nullable): enqueue only if no task holds its
 *   uniqueness key (sluice-flow.h, docs/flow-control.md)
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
  const SluiceUniqueOptions *unique;
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
 *   before (within dedup_ttl_ms) and nothing was written now; or, with
 *   @options->unique, when its key is held by another task: the id
 *   returned is then the holder's, and nothing was written
 *
 * As sluice_client_enqueue(), except that a key held by another task is
 * not an error when @out_existed is given.
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
 * in case a notification was lost. Needs result storage for the task. A
 * sealed result is opened with the client's keyring. Returns:
 * (transfer full): the final record, or NULL and SLUICE_CLIENT_ERROR_TIMEOUT,
 * a SLUICE_SEAL_ERROR (a sealed result without the key that opens it, or
 * one that fails to authenticate), or a broker error.
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
 * sluice_result_get_due_at(), and for a deferral of an unknown task name,
 * or of a message in an envelope version newer than this build reads, a
 * note saying so), a buried one dead_lettered with its reason. NULL and
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
 * sluice_client_list_slots:
 * @limit: at most this many keys
 *
 * Who holds the concurrency slots now, and how many messages wait for
 * them, per key (docs/flow-control.md). For operators: it may scan the
 * store's keys.
 * Returns: (transfer full) (element-type SluiceSlotState): the keys with a
 * holder or a waiter, in no particular order; or NULL and @error
 * (SLUICE_BROKER_ERROR_UNSUPPORTED for a broker without the slot).
 */
SLUICE_AVAILABLE_IN_0_1
GPtrArray *sluice_client_list_slots(SluiceClient *client, guint limit,
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
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_client_count_servers(SluiceClient *client, const gchar *task,
                                     guint *out_serving, guint *out_announced,
                                     GError **error);

/* ---- Seeing and steering ------------------------------------------------ */

#define SLUICE_LIST_DEFAULT_LIMIT 100
#define SLUICE_LIST_MAX_LIMIT 10000

/**
 * SluiceListedTask:
 * @id: the task id (NULL only for a malformed message)
 * @state: QUEUED, SCHEDULED, RETRYING, RUNNING or DEAD_LETTERED
 * @task: (nullable): its name (NULL when its message cannot be decoded)
 * @queue: the queue it waits in, goes to when due, runs from, or was
 *   buried from
 * @attempt: the attempt it is at (the next one for a retrying task; 0 if
 *   unknown)
 * @enqueued_at_ms: when it was first enqueued (0 if unknown)
 * @due_at_ms: SCHEDULED and RETRYING: when it is due (the next attempt)
 * @started_at_ms: RUNNING: when this attempt started
 * @worker: (nullable): RUNNING: the worker that runs it
 * @error: (nullable): RETRYING: the last failure (from its history);
 *   DEAD_LETTERED: the final error; SCHEDULED: why an unknown task name is
 *   deferred; a note when its message cannot be decoded
 * @dead_letter_reason: (nullable): DEAD_LETTERED: why it was buried
 * @entry_id: (nullable): DEAD_LETTERED: its dead-letter entry (for
 *   sluice_client_dlq_replay() and friends)
 * @args: (nullable): its arguments (msgpack), when its message was read
 * @seal: (nullable): "ALGORITHM:KEY-ID" when its args are sealed and the
 *   client's keyring could not open them (@args then hold the sealed bin);
 *   NULL when @args are in clear (sealed args the keyring opened included)
 *
 * One task a listing found. Owns every field; free with
 * sluice_listed_task_free().
 */
typedef struct {
  gchar *id;
  SluiceTaskState state;
  gchar *task;
  gchar *queue;
  guint attempt;
  gint64 enqueued_at_ms;
  gint64 due_at_ms;
  gint64 started_at_ms;
  gchar *worker;
  gchar *error;
  gchar *dead_letter_reason;
  gchar *entry_id;
  GBytes *args;
  gchar *seal;
} SluiceListedTask;

/** sluice_listed_task_free: NULL-safe. */
SLUICE_AVAILABLE_IN_0_1
void sluice_listed_task_free(SluiceListedTask *task);

/**
 * SluiceListOptions:
 * @state: which tasks: SLUICE_STATE_QUEUED (the default), _SCHEDULED (a
 *   delay or an ETA, or an unknown task name deferred), _RETRYING
 *   (waiting for their next attempt), _RUNNING or _DEAD_LETTERED
 * @queue: (nullable): QUEUED: the queue to list (required); otherwise only
 *   tasks of this queue (NULL = every queue)
 * @task: (nullable): only tasks of this name
 * @cursor: (nullable): where to go on: the @out_next_cursor of the
 *   previous page; NULL = from the start
 * @limit: at most this many (0 = SLUICE_LIST_DEFAULT_LIMIT; at most
 *   SLUICE_LIST_MAX_LIMIT)
 *
 * Initialise with sluice_list_options_init().
 */
typedef struct {
  SluiceTaskState state;
  const gchar *queue;
  const gchar *task;
  const gchar *cursor;
  guint limit;
} SluiceListOptions;

SLUICE_AVAILABLE_IN_0_1
void sluice_list_options_init(SluiceListOptions *options);

/**
 * sluice_client_list:
 * @options: (nullable): what to list; NULL = the defaults (which fail: a
 *   queued listing needs a queue)
 * @out_next_cursor: (out) (optional) (transfer full): where the next page
 *   starts, or NULL when this page reached the end
 *
 * Pages through tasks of one state without taking or changing anything,
 * and without blocking workers:
 *
 * - QUEUED: the queue's ready messages, in the order workers take them
 *   (the broker's `list_queued`: one range read per page);
 * - SCHEDULED and RETRYING: the schedule, earliest due first (a retry is a
 *   scheduled message past its first attempt; its error is the last line
 *   of its history);
 * - RUNNING: what the live workers announced they run, oldest first (at
 *   most SLUICE_ANNOUNCED_RUNNING_MAX per worker, and up to 2 s old);
 * - DEAD_LETTERED: the dead letters, oldest first.
 *
 * A page costs O(@limit) broker work. With a filter (@task, a @queue for
 * the schedule or the dead letters, and always for SCHEDULED versus
 * RETRYING) the client reads pages and keeps what matches, reading at
 * most 10 x @limit entries (at least 1000) per call: a filtered page may
 * then hold fewer than @limit tasks, even none, with a cursor to go on.
 * Pages from no cursor to none list every task exactly once while nothing
 * changes meanwhile.
 *
 * Returns: (transfer full) (element-type SluiceListedTask): the page, or
 * NULL and @error: SLUICE_CLIENT_ERROR_INVALID for a bad option or a
 * cursor of another listing; SLUICE_BROKER_ERROR_UNSUPPORTED when the
 * broker cannot list.
 */
SLUICE_AVAILABLE_IN_0_1
GPtrArray *sluice_client_list(SluiceClient *client,
                              const SluiceListOptions *options,
                              gchar **out_next_cursor, GError **error);

/**
 * sluice_client_pause:
 * @queue: a queue name
 *
 * Pauses @queue in the broker, for every worker, until
 * sluice_client_resume(): producers still enqueue, and once this returns
 * no worker takes a task of the queue in a new fetch (every broker reads
 * the pause in the step that takes). What a worker fetched before and has
 * not started it gives back when it re-reads the paused queues with its
 * revocations (every revocation_interval_ms, 1 s); what runs runs on.
 * Pausing a paused queue changes nothing.
 * Returns: FALSE with SLUICE_BROKER_ERROR_UNSUPPORTED when the broker
 * cannot pause, or another error.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_client_pause(SluiceClient *client, const gchar *queue,
                             GError **error);

/** sluice_client_resume: undoes sluice_client_pause(); see there. */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_client_resume(SluiceClient *client, const gchar *queue,
                              GError **error);

/**
 * sluice_client_list_paused:
 * Returns: (transfer full) (array zero-terminated=1): the paused queues,
 * sorted (empty when none, or the broker cannot pause), or NULL and
 * @error.
 */
SLUICE_AVAILABLE_IN_0_1
gchar **sluice_client_list_paused(SluiceClient *client, GError **error);

/**
 * sluice_client_open_args:
 * @env: (inout): a decoded envelope (a dead letter's, a listed message's)
 *
 * Opens @env's sealed args with the client's keyring: on success they are
 * the args in clear, @env->seal is NULL and @env->version 1, as if the
 * message had never been sealed (what an operator's tool shows). Args in
 * clear are left as they are.
 * Returns: FALSE with a SLUICE_SEAL_ERROR ("cannot decrypt: ...", naming
 * the key it needs) when they do not open; @env is then unchanged.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_client_open_args(SluiceClient *client, SluiceEnvelope *env,
                                 GError **error);

/**
 * SluiceResealCounts:
 * @resealed: messages sealed again with the keyring's current key (sealed
 *   with an older key before, or in clear)
 * @current: messages sealed with the current key already, left as they are
 * @unreadable: messages that could not be opened (a key the keyring lacks,
 *   a ciphertext that fails authentication, an envelope that does not
 *   decode), left as they are: a worker buries them `malformed` when it
 *   meets them
 * @moved: messages taken by a worker, promoted or replayed between their
 *   listing and their rewrite, left to whoever holds them now (a worker
 *   seals a retry with its own current key)
 *
 * What sluice_client_reseal() did.
 */
typedef struct {
  guint64 resealed;
  guint64 current;
  guint64 unreadable;
  guint64 moved;
} SluiceResealCounts;

/**
 * sluice_client_reseal:
 * @client: a client with a keyring (SluiceClientOptions.keyring)
 * @out_counts: (out) (optional): what was done
 *
 * Seals every task that waits (ready in a queue, on the schedule, in the
 * dead-letter queue) with the client's current key: after `sluice keys
 * rotate`, this is what lets an old key be retired. A message in clear is
 * sealed too. Each message is opened with the keyring, sealed again and
 * swapped in by the broker only if it is still the bytes listed, so a
 * message fetched meanwhile is never overwritten and nothing is lost.
 * Tasks running meanwhile are not touched (a retry is sealed with the
 * worker's current key, so give the workers the new keyring first). On a
 * Redis stream (reliable mode) a rewritten ready message goes to the end
 * of its queue, and a rewritten dead letter gets a new entry id. Safe to
 * run again: what is current is left alone. Costs one listing and one
 * rewrite per page of 100 messages.
 * Returns: FALSE with SLUICE_SEAL_ERROR_KEYRING without a keyring,
 * SLUICE_BROKER_ERROR_UNSUPPORTED when the broker cannot list or rewrite
 * waiting messages, or another error (what was rewritten before it stays
 * rewritten, and @out_counts says how much).
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_client_reseal(SluiceClient *client,
                              SluiceResealCounts *out_counts, GError **error);

/**
 * sluice_client_purge:
 * @out_removed: (out) (optional): how many messages were deleted
 *
 * Deletes the ready messages of @queue, as many as were ready when it
 * started: tasks running or on the schedule are not touched. Where the
 * broker can take a queued message out (`remove_queued`: every built-in
 * broker), it goes page by page from the head of the queue, and each task
 * is taken out together with its record, which says `cancelled` ("purged
 * from queue Q before it ran"); a task a worker fetched meanwhile is the
 * worker's, and is left alone. Otherwise the broker's `purge` deletes
 * them in one step and their records stay as they were.
 * Returns: FALSE with SLUICE_BROKER_ERROR_UNSUPPORTED when the broker
 * cannot purge, or another error.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_client_purge(SluiceClient *client, const gchar *queue,
                             guint64 *out_removed, GError **error);

/**
 * SluiceDeleteOutcome:
 * @SLUICE_DELETE_FAILED: an error occurred (@error is set)
 * @SLUICE_DELETE_UNSCHEDULED: it was on the schedule (delayed or waiting
 *   for a retry) and is removed: it will certainly not run, and its record
 *   says `cancelled`
 * @SLUICE_DELETE_DEAD_LETTER: it was a dead letter, and its newest dead
 *   letter is deleted for good
 * @SLUICE_DELETE_REVOKED: it was running, or a worker had just fetched it:
 *   a revocation was recorded, as sluice_client_cancel() does, so the
 *   worker cancels it running or skips it before it starts (and then
 *   records it `cancelled`); a task that finishes first is unaffected.
 *   Also what a queued task gets on a broker that cannot take a message
 *   out of its queue (no `remove_queued`)
 * @SLUICE_DELETE_REMOVED: it was queued and is taken out of its queue,
 *   together with its record, which says `cancelled`: it will certainly
 *   not run
 */
typedef enum {
  SLUICE_DELETE_FAILED = 0,
  SLUICE_DELETE_UNSCHEDULED,
  SLUICE_DELETE_DEAD_LETTER,
  SLUICE_DELETE_REVOKED,
  SLUICE_DELETE_REMOVED,
} SluiceDeleteOutcome;

/**
 * sluice_client_delete:
 * @id: a task id
 *
 * Deletes one task wherever it is: off the schedule (atomically), out of
 * the dead letters, out of its queue (atomically with its record, where
 * the broker can: the record names the queue; without one every queue is
 * read, page by page), or, running, by a revocation.
 * Returns: what happened (see SluiceDeleteOutcome); FAILED with
 * SLUICE_CLIENT_ERROR_NOT_FOUND when the task is in none of those places:
 * it already finished (its record says so), or nothing knows of it.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceDeleteOutcome sluice_client_delete(SluiceClient *client, const gchar *id,
                                         GError **error);

/**
 * sluice_client_run_now:
 * @id: the id of a task on the schedule (delayed, or waiting for a retry)
 *
 * Moves the task from the schedule to the end of its queue in one atomic
 * step, so the next free worker runs it; its attempt and history stay as
 * they are.
 * Returns: TRUE, or FALSE and SLUICE_CLIENT_ERROR_NOT_FOUND (saying where
 * the task is instead, when the broker can tell), or a broker error.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_client_run_now(SluiceClient *client, const gchar *id,
                               GError **error);

/**
 * sluice_client_get_last_periodic:
 * @name: a periodic schedule's name
 * @out_last: (out): its last dispatched occurrence (ms since epoch), or 0
 *   if it never dispatched one
 * Returns: FALSE with SLUICE_BROKER_ERROR_UNSUPPORTED when the broker has
 * no periodic schedules, or another error.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_client_get_last_periodic(SluiceClient *client,
                                         const gchar *name, gint64 *out_last,
                                         GError **error);

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
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SluiceListedTask, sluice_listed_task_free)

G_END_DECLS

/* sluice-task.h - task functions, their registry and their context.
 *
 * A task is a C function registered under a name:
 *
 *     static gboolean
 *     resize_image (SluiceTaskContext *ctx, gpointer user_data, GError **error)
 *     {
 *       const msgpack_object *args = sluice_task_context_get_args (ctx);
 *       ...
 *       if (g_cancellable_set_error_if_cancelled (
 *               sluice_task_context_get_cancellable (ctx), error))
 *         return FALSE;                       // timed out or revoked
 *       if (rate_limited)
 *         return sluice_task_context_retry (ctx, 10000, error, "rate limited");
 *       if (bad_input)
 *         return sluice_task_context_fail (ctx, error, "no such image %s", p);
 *       sluice_task_context_set_result (ctx, result_msgpack);
 *       return TRUE;
 *     }
 *
 *     sluice_registry_add (registry, "images.resize", resize_image, NULL, NULL,
 *                          NULL, &error);
 *
 * A task succeeds by returning TRUE. It fails by returning FALSE with @error
 * set; what happens next depends on the error:
 *   - SLUICE_TASK_ERROR_RETRY (sluice_task_context_retry()): retried after
 *     the delay the task asked for; it still counts toward max_attempts;
 *   - SLUICE_TASK_ERROR_FATAL (sluice_task_context_fail()): not retried,
 *     dead-lettered `non_retryable` at once;
 *   - SLUICE_TASK_ERROR_SNOOZE (sluice_task_context_snooze()) and
 *     SLUICE_TASK_ERROR_RATE_LIMITED (sluice_task_context_rate_limited()):
 *     not a failure: run again after the delay with the same attempt, at
 *     most max_snoozes times (then dead-lettered `snoozed_too_often`);
 *   - G_IO_ERROR_CANCELLED after the task was revoked: recorded `cancelled`;
 *   - anything else: retried with the backoff of the retry policy while
 *     attempts remain, then dead-lettered `max_attempts`.
 *
 * A task function runs on one of the worker's executor threads. It must
 * honour its cancellable: C threads cannot be killed, so a task that
 * ignores it keeps its thread (and its concurrency slot) until it returns,
 * and its late result is discarded.
 */
#pragma once

#include <gio/gio.h>
#include <msgpack.h>
#include <sluice/sluice-envelope.h>
#include <sluice/sluice-flow.h>
#include <sluice/sluice-macros.h>
#include <sluice/sluice-policy.h>

G_BEGIN_DECLS

#define SLUICE_TASK_ERROR (sluice_task_error_quark())
SLUICE_AVAILABLE_IN_0_1
GQuark sluice_task_error_quark(void);

/**
 * SluiceTaskError:
 * @SLUICE_TASK_ERROR_FAILED: a failure that the retry policy handles
 * @SLUICE_TASK_ERROR_RETRY: retry after the task's own delay
 * @SLUICE_TASK_ERROR_FATAL: fail without retry
 * @SLUICE_TASK_ERROR_TIMEOUT: the task overran its timeout (set by the
 *   worker, never by a task)
 * @SLUICE_TASK_ERROR_DUPLICATE: a task of that name is registered already
 * @SLUICE_TASK_ERROR_INVALID: a bad name or option at registration
 * @SLUICE_TASK_ERROR_SNOOZE: set by sluice_task_context_snooze(): run
 *   again later without using an attempt
 * @SLUICE_TASK_ERROR_RATE_LIMITED: set by
 *   sluice_task_context_rate_limited(): the task's rate-limit key is
 *   paused, and the task runs again later without using an attempt
 */
typedef enum {
  SLUICE_TASK_ERROR_FAILED,
  SLUICE_TASK_ERROR_RETRY,
  SLUICE_TASK_ERROR_FATAL,
  SLUICE_TASK_ERROR_TIMEOUT,
  SLUICE_TASK_ERROR_DUPLICATE,
  SLUICE_TASK_ERROR_INVALID,
  SLUICE_TASK_ERROR_SNOOZE,
  SLUICE_TASK_ERROR_RATE_LIMITED,
} SluiceTaskError;

typedef struct _SluiceTaskContext SluiceTaskContext;

/**
 * SluiceTaskFunc:
 * @ctx: (transfer none): valid until the function returns
 * @user_data: as registered
 * @error: set it when returning FALSE
 *
 * Returns: TRUE on success, FALSE with @error set on failure.
 */
typedef gboolean (*SluiceTaskFunc)(SluiceTaskContext *ctx, gpointer user_data,
                                   GError **error);

/**
 * SluiceTaskOptions:
 * @retry: the task's level of the retry policy (unset fields fall through
 *   to the worker's)
 * @timeout_ms: run time limit; 0 = none (messages may set their own)
 * @store_result: keep the final record (UNSET = on)
 * @result_ttl_ms: lifetime of records; 0 = the client's/worker's default
 * @dead_letter: bury after the last attempt (UNSET = on) or record `failed`
 * @queue: (nullable): default queue for enqueues of this task; NULL =
 *   "default"
 * @hard_timeout_ms: with process isolation, kill the task's child this
 *   long after the task started; 0 = the worker's
 * @rate_limit: (nullable): the task's rate limit (copied; it replaces the
 *   limit of the queue the task comes from); NULL = none
 * @max_snoozes: how many times a message of the task may snooze before it
 *   is dead-lettered "snoozed_too_often"; 0 = SLUICE_DEFAULT_MAX_SNOOZES
 * @concurrency_limit: (nullable): how many messages of the task may run at
 *   once across every worker (copied; replaces its queue's); NULL = none
 *
 * Initialise with sluice_task_options_init(); the registry copies it.
 */
typedef struct {
  SluiceRetryPolicy retry;
  gint64 timeout_ms;
  SluiceTristate store_result;
  gint64 result_ttl_ms;
  SluiceTristate dead_letter;
  const gchar *queue;
  gint64 hard_timeout_ms;
  const SluiceRateLimit *rate_limit;
  guint max_snoozes;
  const SluiceConcurrencyLimit *concurrency_limit;
} SluiceTaskOptions;

SLUICE_AVAILABLE_IN_0_1
void sluice_task_options_init(SluiceTaskOptions *options);

/* ---- The registry -------------------------------------------------------- */

typedef struct _SluiceRegistry SluiceRegistry;

/** sluice_registry_new: Returns: (transfer full): an empty registry. */
SLUICE_AVAILABLE_IN_0_1
SluiceRegistry *sluice_registry_new(void);
SLUICE_AVAILABLE_IN_0_1
SluiceRegistry *sluice_registry_ref(SluiceRegistry *registry);
SLUICE_AVAILABLE_IN_0_1
void sluice_registry_unref(SluiceRegistry *registry);

/**
 * sluice_registry_add:
 * @name: (transfer none): the task's name: 1 to 200 bytes of printable
 *   ASCII without spaces; copied
 * @func: the function
 * @user_data: (nullable): passed to @func
 * @destroy: (nullable): frees @user_data when the registry is freed
 * @options: (nullable): copied; NULL = every option unset
 *
 * Registers a task. May be called while workers use the registry.
 * Returns: TRUE, or FALSE with SLUICE_TASK_ERROR_DUPLICATE / _INVALID (in
 * which case @destroy is not called: @user_data is still the caller's).
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_registry_add(SluiceRegistry *registry, const gchar *name,
                             SluiceTaskFunc func, gpointer user_data,
                             GDestroyNotify destroy,
                             const SluiceTaskOptions *options, GError **error);

/** sluice_registry_contains: Returns: TRUE if @name is registered. */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_registry_contains(SluiceRegistry *registry, const gchar *name);

/**
 * sluice_registry_get_options:
 * @out: (out caller-allocates): the task's options; its @queue is valid
 *   while the registry is
 * Returns: FALSE if @name is not registered.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_registry_get_options(SluiceRegistry *registry,
                                     const gchar *name, SluiceTaskOptions *out);

/**
 * sluice_registry_list:
 * Returns: (transfer full): the registered names, sorted, NULL-terminated.
 */
SLUICE_AVAILABLE_IN_0_1
gchar **sluice_registry_list(SluiceRegistry *registry);

/* ---- The task context ----------------------------------------------------
 * Getters return (transfer none) values valid until the task function
 * returns. The context may be used from the task's thread only.
 */

SLUICE_AVAILABLE_IN_0_1
const gchar *sluice_task_context_get_id(SluiceTaskContext *ctx);
SLUICE_AVAILABLE_IN_0_1
const gchar *sluice_task_context_get_name(SluiceTaskContext *ctx);
SLUICE_AVAILABLE_IN_0_1
const gchar *sluice_task_context_get_queue(SluiceTaskContext *ctx);
/** Returns: the 1-based attempt. */
SLUICE_AVAILABLE_IN_0_1
guint sluice_task_context_get_attempt(SluiceTaskContext *ctx);
/** Returns: attempt - 1. */
SLUICE_AVAILABLE_IN_0_1
guint sluice_task_context_get_retries(SluiceTaskContext *ctx);
/** Returns: the resolved max_attempts for this message. */
SLUICE_AVAILABLE_IN_0_1
guint sluice_task_context_get_max_attempts(SluiceTaskContext *ctx);
/** Returns: how many times the broker has delivered this message (>= 1). */
SLUICE_AVAILABLE_IN_0_1
guint sluice_task_context_get_delivery_count(SluiceTaskContext *ctx);
/**
 * sluice_task_context_get_args:
 * Returns: the arguments, unpacked on the first call: at any depth the
 * decoders accept (SLUICE_MAX_ARGS_DEPTH), into 24 bytes per value, which
 * the decoders bounded (SLUICE_ARGS_COST_FACTOR); a nil object only when
 * the message carries none.
 */
SLUICE_AVAILABLE_IN_0_1
const msgpack_object *sluice_task_context_get_args(SluiceTaskContext *ctx);
/** Returns: the arguments' msgpack bytes. */
SLUICE_AVAILABLE_IN_0_1
GBytes *sluice_task_context_get_args_bytes(SluiceTaskContext *ctx);
/**
 * sluice_task_context_get_header:
 * Returns: (nullable): a header of the message, as its producer set it;
 * retries, releases and replays keep them. "traceparent" and "tracestate"
 * are the producer's trace context (sluice-trace.h).
 */
SLUICE_AVAILABLE_IN_0_1
const gchar *sluice_task_context_get_header(SluiceTaskContext *ctx,
                                            const gchar *name);
/**
 * sluice_task_context_log:
 * @level: a GLib log level other than G_LOG_LEVEL_ERROR
 *
 * Logs a structured line (g_log_structured_array(), domain "sluice") with
 * the fields the worker's own lines about this task carry: SLUICE_TASK_ID,
 * SLUICE_TASK, SLUICE_QUEUE, SLUICE_ATTEMPT and, when the message carries
 * a valid trace context, SLUICE_TRACEPARENT and SLUICE_TRACE_ID, so a log
 * collector can file every line of the task under its trace.
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_task_context_log(SluiceTaskContext *ctx, GLogLevelFlags level,
                             const gchar *format, ...) G_GNUC_PRINTF(3, 4);
/**
 * sluice_task_context_get_cancellable:
 * Returns: cancelled when the task overruns its timeout, is revoked, or the
 * worker stops past its shutdown timeout.
 */
SLUICE_AVAILABLE_IN_0_1
GCancellable *sluice_task_context_get_cancellable(SluiceTaskContext *ctx);

/**
 * sluice_task_context_set_result:
 * @value: (transfer none) (nullable): msgpack bytes of one value; the
 *   context takes a reference. A later call replaces an earlier one.
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_task_context_set_result(SluiceTaskContext *ctx, GBytes *value);

/* ---- Arguments by key, results without msgpack ---------------------------
 * For tasks whose arguments are a map (a JSON object). A missing or
 * mistyped argument fails with SLUICE_TASK_ERROR_FATAL and a message that
 * names it: return FALSE with that error and the message is dead-lettered
 * `non_retryable` at once (retrying cannot fix its arguments).
 */

/** Returns: whether the arguments are a map holding @key. */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_task_context_has_arg(SluiceTaskContext *ctx, const gchar *key);
/**
 * sluice_task_context_dup_string_arg:
 * Returns: (transfer full): the string argument @key (NUL-terminated; one
 * holding a NUL is refused), or NULL and @error.
 */
SLUICE_AVAILABLE_IN_0_1
gchar *sluice_task_context_dup_string_arg(SluiceTaskContext *ctx,
                                          const gchar *key, GError **error);
/** Sets @out to the integer argument @key; FALSE and @error otherwise. */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_task_context_get_int_arg(SluiceTaskContext *ctx,
                                         const gchar *key, gint64 *out,
                                         GError **error);
/** Sets @out to the number argument @key (an integer is a number too). */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_task_context_get_double_arg(SluiceTaskContext *ctx,
                                            const gchar *key, gdouble *out,
                                            GError **error);
/** Sets @out to the boolean argument @key. */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_task_context_get_bool_arg(SluiceTaskContext *ctx,
                                          const gchar *key, gboolean *out,
                                          GError **error);
/**
 * sluice_task_context_dup_bytes_arg:
 * Returns: (transfer full): the bytes (msgpack bin) or string argument @key,
 * or NULL and @error.
 */
SLUICE_AVAILABLE_IN_0_1
GBytes *sluice_task_context_dup_bytes_arg(SluiceTaskContext *ctx,
                                          const gchar *key, GError **error);

/**
 * sluice_task_context_set_result_json:
 * Sets the result from @json (converted as sluice_args_from_json() does).
 * Returns: FALSE and SLUICE_TASK_ERROR_FATAL if @json is not valid.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_task_context_set_result_json(SluiceTaskContext *ctx,
                                             const gchar *json, GError **error);

/**
 * SluiceFieldKind:
 * The kind of the value that follows a key in
 * sluice_task_context_set_result_fields(): SLUICE_FIELD_INT (a gint64:
 * cast literals, `(gint64) 3`), SLUICE_FIELD_DOUBLE (a gdouble),
 * SLUICE_FIELD_BOOL (a gboolean), SLUICE_FIELD_STRING (a UTF-8 const
 * gchar *, NULL for null), SLUICE_FIELD_NULL (no value follows).
 */
typedef enum {
  SLUICE_FIELD_INT = 1,
  SLUICE_FIELD_DOUBLE,
  SLUICE_FIELD_BOOL,
  SLUICE_FIELD_STRING,
  SLUICE_FIELD_NULL,
} SluiceFieldKind;

/**
 * sluice_task_context_set_result_fields:
 * @first_key: the first key, then its SluiceFieldKind and value, then the
 *   next key..., ending with NULL
 *
 * Sets the result to a map of the given fields, e.g.
 *
 *     sluice_task_context_set_result_fields (ctx, error,
 *         "sent", SLUICE_FIELD_BOOL, TRUE,
 *         "id", SLUICE_FIELD_STRING, message_id,
 *         "bytes", SLUICE_FIELD_INT, (gint64) n, NULL);
 *
 * Returns: FALSE and SLUICE_TASK_ERROR_FATAL on an unknown kind or a string
 * that is not UTF-8 (the result is then unchanged).
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_task_context_set_result_fields(SluiceTaskContext *ctx,
                                               GError **error,
                                               const gchar *first_key,
                                               ...) G_GNUC_NULL_TERMINATED;

/**
 * sluice_task_context_retry:
 * @delay_ms: how long to wait before the next attempt (>= 0)
 * @error: the task's error argument
 * @format: printf-style message
 *
 * Sets @error to SLUICE_TASK_ERROR_RETRY and records @delay_ms. Use as
 * `return sluice_task_context_retry (ctx, 5000, error, "busy");`. The retry
 * counts toward max_attempts: past it, the task is dead-lettered.
 * Returns: FALSE, always.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_task_context_retry(SluiceTaskContext *ctx, gint64 delay_ms,
                                   GError **error, const gchar *format, ...)
    G_GNUC_PRINTF(4, 5);

/**
 * sluice_task_context_fail:
 * Sets @error to SLUICE_TASK_ERROR_FATAL: no retry; the message is
 * dead-lettered `non_retryable` (or recorded `failed` if the task does not
 * dead-letter).
 * Returns: FALSE, always.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_task_context_fail(SluiceTaskContext *ctx, GError **error,
                                  const gchar *format, ...) G_GNUC_PRINTF(3, 4);

/**
 * sluice_task_context_snooze:
 * @delay_ms: run again this long from now (>= 0)
 *
 * Sets @error to SLUICE_TASK_ERROR_SNOOZE; return FALSE with it. The
 * message goes back on the schedule, due after @delay_ms, with its attempt
 * unchanged (a snooze is not a failure: it neither counts toward
 * max_attempts nor adds a history line). Each snooze is counted in the
 * message; past the task's max_snoozes the message is dead-lettered
 * `snoozed_too_often` instead, so a task cannot snooze forever.
 * Returns: FALSE, always.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_task_context_snooze(SluiceTaskContext *ctx, gint64 delay_ms,
                                    GError **error);

/**
 * sluice_task_context_rate_limited:
 * @delay_ms: how long the downstream asked to wait (a 429's Retry-After)
 *
 * Like sluice_task_context_snooze() (SLUICE_TASK_ERROR_RATE_LIMITED), and
 * besides pauses the task's rate-limit key for @delay_ms on the broker's
 * clock, so that no worker starts another message of that key before then.
 * Without a rate limit on the task or its queue it is a snooze.
 * Returns: FALSE, always.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_task_context_rate_limited(SluiceTaskContext *ctx,
                                          gint64 delay_ms, GError **error);

/**
 * sluice_task_context_get_admitted_at:
 * Returns: when the task's rate limit admitted this run, on the broker's
 * clock (ms since the epoch); 0 when no rate limit applies, and under
 * process isolation (the child is not told).
 */
SLUICE_AVAILABLE_IN_0_1
gint64 sluice_task_context_get_admitted_at(SluiceTaskContext *ctx);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(SluiceRegistry, sluice_registry_unref)

G_END_DECLS

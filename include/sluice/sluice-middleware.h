/* sluice-middleware.h - hooks around enqueueing and around each task.
 *
 * Producer hooks run on the enqueuing thread for every message a client
 * enqueues (plain, batch or workflow), in the order they were added, after
 * the client's headers hook and the message's own headers: each may add
 * or change headers (sluice_envelope_set_header()), or reject the message
 * by returning FALSE with an error, and nothing of the call is enqueued
 * (a batch or a workflow is refused whole). A hook must change nothing but
 * headers; the message is checked again after the hooks.
 *
 * Worker hooks wrap each task run, in the order they were added: the first
 * is outermost. A hook calls @next to run what is inside it (the later
 * hooks, then the task) and may do anything around it: time it, open a span,
 * set a tenant's context from a header, map errors (replace *@error: a
 * G_IO_ERROR_PERMISSION_DENIED becoming SLUICE_TASK_ERROR_FATAL buries the
 * task at once instead of retrying it), or not call @next at all and fail
 * (or succeed) in the task's place. What a hook returns is the task's
 * outcome.
 *
 *     static gboolean
 *     timed (SluiceTaskContext *ctx, SluiceTaskNext next, gpointer next_data,
 *            gpointer user_data, GError **error)
 *     {
 *       gint64 t0 = g_get_monotonic_time ();
 *       gboolean ok = next (ctx, next_data, error);
 *       g_message ("%s took %" G_GINT64_FORMAT " us",
 *                  sluice_task_context_get_name (ctx),
 *                  g_get_monotonic_time () - t0);
 *       return ok;
 *     }
 *
 * examples/middleware/ is a complete program with both kinds.
 */
#pragma once

#include <sluice/sluice-client.h>
#include <sluice/sluice-envelope.h>
#include <sluice/sluice-macros.h>
#include <sluice/sluice-task.h>
#include <sluice/sluice-worker.h>

G_BEGIN_DECLS

/**
 * SluiceProducerHook:
 * @env: the message about to be enqueued; only its headers may change
 * @user_data: as added
 * @error: set it to reject the message
 * Returns: TRUE to enqueue it, FALSE (with @error) to refuse it.
 */
typedef gboolean (*SluiceProducerHook)(SluiceEnvelope *env, gpointer user_data,
                                       GError **error);

/**
 * sluice_client_add_producer_hook:
 * @hook: called for every message, after those added before it
 * @user_data: (nullable): passed to @hook
 * @destroy: (nullable): frees @user_data when the client goes
 *
 * Safe while other threads enqueue: an enqueue already running keeps the
 * hooks it started with.
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_client_add_producer_hook(SluiceClient *client,
                                     SluiceProducerHook hook,
                                     gpointer user_data,
                                     GDestroyNotify destroy);

/**
 * SluiceTaskNext:
 * Runs the rest of the chain (later hooks, then the task) for @ctx.
 * Call it at most once.
 */
typedef gboolean (*SluiceTaskNext)(SluiceTaskContext *ctx, gpointer next_data,
                                   GError **error);

/**
 * SluiceWorkerHook:
 * @ctx: the task's context
 * @next: what runs inside this hook; call next (ctx, next_data, error)
 * @next_data: pass it to @next as it is
 * @user_data: as added
 * @error: the task's error when it returns FALSE
 * Returns: the task's outcome, as a task function's.
 */
typedef gboolean (*SluiceWorkerHook)(SluiceTaskContext *ctx,
                                     SluiceTaskNext next, gpointer next_data,
                                     gpointer user_data, GError **error);

/**
 * sluice_worker_add_hook:
 * @hook: wraps every task run, inside the hooks added before it
 * @user_data: (nullable): passed to @hook, from any executor thread
 * @destroy: (nullable): frees @user_data when the worker goes
 *
 * Only before sluice_worker_start(), and only in thread isolation (a
 * child process runs its tasks without the worker's hooks).
 * Returns: FALSE with SLUICE_WORKER_ERROR_STATE when the worker has
 * started, SLUICE_WORKER_ERROR_INVALID when it isolates tasks in
 * processes.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_worker_add_hook(SluiceWorker *worker, SluiceWorkerHook hook,
                                gpointer user_data, GDestroyNotify destroy,
                                GError **error);

G_END_DECLS

/* sluice-batch.h - batches: tasks enqueued together, with callbacks when
 * they have all finished, and a status readable at any time.
 *
 *     SluiceWorkflow *tasks = sluice_workflow_group ();
 *     for (guint i = 0; i < n; i++)
 *       sluice_workflow_add (tasks, sluice_workflow_task ("mail.send",
 *                                                         args[i], NULL));
 *     g_autofree gchar *id = sluice_client_start_batch (
 *         client, tasks, sluice_workflow_task ("mail.report", NULL, NULL),
 *         NULL, TRUE, &error);                  // open: more may come
 *     sluice_client_add_to_batch (client, id, more, &error);
 *     sluice_client_close_batch (client, id, &error);
 *
 * on_complete runs once every task of the batch has finished, however
 * each ended; on_success only if every one succeeded (otherwise it is
 * recorded cancelled, unrun). Both get the map a chord's callback gets
 * (sluice-workflow.h), one result per task in the order they were added.
 * An open batch (keep_open) cannot complete before it is closed, so tasks
 * can be added to it meanwhile; a closed one completes when its last task
 * finishes, and takes no more. Task ids are "<batch id>.<n>". The count is
 * kept by the broker's joins, so a task counts once however often it is
 * retried, redelivered or replayed.
 */
#pragma once

#include <sluice/sluice-client.h>
#include <sluice/sluice-macros.h>
#include <sluice/sluice-workflow.h>

G_BEGIN_DECLS

/**
 * sluice_client_start_batch:
 * @tasks: (nullable) (transfer none): a task, or a group of tasks (no
 *   nesting); NULL for an empty open batch
 * @on_complete: (nullable) (transfer none): a task node
 * @on_success: (nullable) (transfer none): a task node
 * @keep_open: TRUE: tasks may be added until sluice_client_close_batch()
 *
 * Enqueues the tasks and opens the batch in one atomic step.
 * Returns: (transfer full): the batch id, or NULL and @error (as
 * sluice_client_enqueue_workflow(); an empty closed batch is INVALID).
 */
SLUICE_AVAILABLE_IN_0_1
gchar *sluice_client_start_batch(SluiceClient *client, SluiceWorkflow *tasks,
                                 SluiceWorkflow *on_complete,
                                 SluiceWorkflow *on_success, gboolean keep_open,
                                 GError **error);

/**
 * sluice_client_add_to_batch:
 * @tasks: (transfer none): a task or a group of tasks
 *
 * Adds them to an open batch, atomically (all or none). Safe from several
 * producers at once: each add is a compare-and-set on the batch's size,
 * retried when another add came first.
 * Returns: FALSE and @error: SLUICE_CLIENT_ERROR_NOT_FOUND for an unknown
 * batch, SLUICE_CLIENT_ERROR_INVALID for a closed or finished one.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_client_add_to_batch(SluiceClient *client, const gchar *batch_id,
                                    SluiceWorkflow *tasks, GError **error);

/**
 * sluice_client_close_batch:
 *
 * Lets an open batch complete: it takes no more tasks, and its callbacks
 * run once its last task finishes (at once if all have). Closing a closed
 * batch changes nothing.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_client_close_batch(SluiceClient *client, const gchar *batch_id,
                                   GError **error);

/**
 * SluiceBatchStatus:
 * @total: tasks in the batch
 * @pending: not finished yet
 * @succeeded: finished and succeeded
 * @failed: finished otherwise (failed, dead_lettered, cancelled)
 * @open: tasks may still be added
 * @complete: every task finished and the batch is closed: its callbacks
 *   were enqueued
 */
typedef struct {
  guint total;
  guint pending;
  guint succeeded;
  guint failed;
  gboolean open;
  gboolean complete;
} SluiceBatchStatus;

SLUICE_AVAILABLE_IN_0_1
gboolean sluice_client_get_batch(SluiceClient *client, const gchar *batch_id,
                                 SluiceBatchStatus *out, GError **error);

G_END_DECLS

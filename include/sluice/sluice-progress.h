/* sluice-progress.h - a running task says how far it is; anyone reads it.
 *
 *     for (guint i = 0; i < n; i++) {
 *       resize (images[i]);
 *       sluice_task_context_progress (ctx, (i + 1.0) / n, "resizing");
 *     }
 *
 * Reports are throttled per task (at most one write to the broker every
 * SLUICE_PROGRESS_INTERVAL_MS; the others are dropped, except one that
 * reaches 1.0), stored by the broker for the task's result TTL, and read
 * with sluice_client_get_progress() or `sluice result --follow`. A task
 * that never reports has no progress; the final record says how it ended.
 */
#pragma once

#include <sluice/sluice-client.h>
#include <sluice/sluice-macros.h>
#include <sluice/sluice-task.h>

G_BEGIN_DECLS

/* The least time between two progress writes of one task. */
#define SLUICE_PROGRESS_INTERVAL_MS 250
/* A progress message is cut to this many bytes (at a character). */
#define SLUICE_PROGRESS_MESSAGE_MAX 200

/**
 * sluice_task_context_progress:
 * @fraction: how far the task is, 0 to 1 (clamped; NaN counts as 0)
 * @message: (nullable) (transfer none): what it is doing, copied
 *
 * Reports progress from inside a task function. Never fails the task: a
 * broker that cannot store it now is logged (once a minute) and the report
 * dropped. Under process isolation the child cannot reach the broker, and
 * reports are dropped (docs/limits.md, "Process isolation").
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_task_context_progress(SluiceTaskContext *ctx, gdouble fraction,
                                  const gchar *message);

/**
 * SluiceProgress:
 * @fraction: 0 to 1
 * @message: (nullable): the last message
 * @updated_at: when it was reported (ms since epoch, the worker's clock)
 */
typedef struct {
  gdouble fraction;
  gchar *message;
  gint64 updated_at;
} SluiceProgress;

SLUICE_AVAILABLE_IN_0_1
void sluice_progress_free(SluiceProgress *progress);

/**
 * sluice_client_get_progress:
 * @id: a task id
 * Returns: (transfer full): the task's last progress report, or NULL and
 * SLUICE_CLIENT_ERROR_NOT_FOUND when it reported none (or it lapsed), or
 * the broker's error (UNSUPPORTED for a broker without progress).
 */
SLUICE_AVAILABLE_IN_0_1
SluiceProgress *sluice_client_get_progress(SluiceClient *client,
                                           const gchar *id, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(SluiceProgress, sluice_progress_free)

G_END_DECLS

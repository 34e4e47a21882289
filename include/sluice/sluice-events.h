/* sluice-events.h - the namespace's stream of task lifecycle events.
 *
 * With events on (SluiceClientOptions.events for producers,
 * SluiceWorkerOptions.events for workers, `sluice worker --events`), every
 * task leaves a trail in one bounded stream per namespace: enqueued,
 * started, progress, retried, succeeded, failed, dead_lettered,
 * cancelled. Anyone follows it from a cursor (sluice_client_read_events(),
 * `sluice events --follow`). The stream keeps at most
 * SLUICE_EVENTS_MAX_LEN events, none older than SLUICE_EVENTS_MAX_AGE_MS.
 *
 * Events are a log of what happened, written just after it (a producer
 * writes "enqueued" just before its message, so that it precedes the
 * message's other events): a crash between the two loses the event, and
 * an enqueue that fails may leave an "enqueued" event of a task that does
 * not exist. A task's events are in the order they happened; events of
 * different tasks interleave as their writers' batches reach the broker.
 * A worker writes its events with its settlements, in batches, so
 * turning them on costs about one more broker call per batch.
 */
#pragma once

#include <sluice/sluice-client.h>
#include <sluice/sluice-macros.h>

G_BEGIN_DECLS

#define SLUICE_EVENTS_MAX_LEN 100000
#define SLUICE_EVENTS_MAX_AGE_MS (24 * 3600 * G_GINT64_CONSTANT(1000))

/**
 * SluiceEventKind:
 * @SLUICE_EVENT_ENQUEUED: a producer enqueued it (a workflow's tasks that
 *   start at once; those its joins release later have none)
 * @SLUICE_EVENT_STARTED: an attempt started
 * @SLUICE_EVENT_PROGRESS: the task reported progress
 * @SLUICE_EVENT_RETRIED: an attempt failed; a retry is scheduled
 * @SLUICE_EVENT_SUCCEEDED: final: it succeeded
 * @SLUICE_EVENT_FAILED: final: failed for good, not dead-lettered
 * @SLUICE_EVENT_DEAD_LETTERED: final: buried (@detail says why)
 * @SLUICE_EVENT_CANCELLED: final: cancelled
 * @SLUICE_EVENT_UNKNOWN: an event this build does not know
 */
typedef enum {
  SLUICE_EVENT_ENQUEUED,
  SLUICE_EVENT_STARTED,
  SLUICE_EVENT_PROGRESS,
  SLUICE_EVENT_RETRIED,
  SLUICE_EVENT_SUCCEEDED,
  SLUICE_EVENT_FAILED,
  SLUICE_EVENT_DEAD_LETTERED,
  SLUICE_EVENT_CANCELLED,
  SLUICE_EVENT_UNKNOWN,
} SluiceEventKind;

/** sluice_event_kind_to_string: Returns: (transfer none): "enqueued", ... */
SLUICE_AVAILABLE_IN_0_1
const gchar *sluice_event_kind_to_string(SluiceEventKind kind);

/**
 * SluiceEvent:
 * @cursor: where it is in the stream: pass it to read what follows
 * @kind: what happened
 * @task_id: the task's id
 * @task: (nullable): its name
 * @queue: (nullable): its queue
 * @attempt: the attempt it concerns (0 when none)
 * @at: when (ms since epoch, the writer's clock)
 * @detail: (nullable): the progress message, a dead letter's reason and
 *   detail, a retry's error
 * @progress: PROGRESS: the fraction, 0 to 1
 * @worker: (nullable): the worker that wrote it
 *
 * Owns every field; free with sluice_event_free().
 */
typedef struct {
  gchar *cursor;
  SluiceEventKind kind;
  gchar *task_id;
  gchar *task;
  gchar *queue;
  guint attempt;
  gint64 at;
  gchar *detail;
  gdouble progress;
  gchar *worker;
} SluiceEvent;

SLUICE_AVAILABLE_IN_0_1
void sluice_event_free(SluiceEvent *event);

/**
 * sluice_client_read_events:
 * @cursor: (nullable): read what follows it; NULL: from the oldest kept
 * @limit: at most this many (>= 1)
 * @block_ms: while there are none, wait up to this long for one (0: no)
 * @out_cursor: (out) (transfer full): where to read next; never NULL
 *
 * Returns: (transfer full) (element-type SluiceEvent): the events, oldest
 * first (possibly none), or NULL and @error (UNSUPPORTED for a broker
 * without events). Events that cannot be read (written by a newer Sluice)
 * come as SLUICE_EVENT_UNKNOWN.
 */
SLUICE_AVAILABLE_IN_0_1
GPtrArray *sluice_client_read_events(SluiceClient *client, const gchar *cursor,
                                     guint limit, gint64 block_ms,
                                     gchar **out_cursor, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(SluiceEvent, sluice_event_free)

G_END_DECLS

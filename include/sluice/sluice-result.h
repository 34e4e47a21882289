/* sluice-result.h - task state and the result record.
 *
 * A task's record says where it is and, once it ended, how: its state, its
 * result (msgpack bytes) or its final error, the attempt that wrote it and
 * when. Workers write the final record in the same atomic step that
 * acknowledges the message, so a reader that sees a final state knows the
 * message was acknowledged. Records expire after the message's result TTL
 * (24 h by default). When a task runs twice (a redelivery), the record of the
 * execution that finished last wins.
 *
 * With track_state on, producers also write `queued`/`scheduled` and workers
 * `running`/`retrying`; without it only final states are written.
 */
#pragma once

#include <sluice/sluice-macros.h>

G_BEGIN_DECLS

/**
 * SluiceTaskState:
 * @SLUICE_STATE_UNKNOWN: no record (or one this build cannot read)
 * @SLUICE_STATE_QUEUED: waiting in a queue (track_state)
 * @SLUICE_STATE_SCHEDULED: waiting for its due time (track_state)
 * @SLUICE_STATE_RUNNING: a worker runs it (track_state)
 * @SLUICE_STATE_RETRYING: failed, and a retry is scheduled (track_state)
 * @SLUICE_STATE_SUCCEEDED: final: returned TRUE
 * @SLUICE_STATE_FAILED: final: failed for good, not dead-lettered
 * @SLUICE_STATE_DEAD_LETTERED: final: buried in the dead-letter queue
 * @SLUICE_STATE_CANCELLED: final: cancelled before or while running
 */
typedef enum {
  SLUICE_STATE_UNKNOWN = 0,
  SLUICE_STATE_QUEUED,
  SLUICE_STATE_SCHEDULED,
  SLUICE_STATE_RUNNING,
  SLUICE_STATE_RETRYING,
  SLUICE_STATE_SUCCEEDED,
  SLUICE_STATE_FAILED,
  SLUICE_STATE_DEAD_LETTERED,
  SLUICE_STATE_CANCELLED,
} SluiceTaskState;

/** sluice_task_state_to_string: Returns: (transfer none): "queued", ... */
SLUICE_AVAILABLE_IN_0_1
const gchar *sluice_task_state_to_string(SluiceTaskState state);

/**
 * sluice_task_state_from_string:
 * Returns: the state named @name, or SLUICE_STATE_UNKNOWN.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceTaskState sluice_task_state_from_string(const gchar *name);

/** sluice_task_state_is_final: Returns: TRUE for the four final states. */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_task_state_is_final(SluiceTaskState state);

typedef struct _SluiceResult SluiceResult;

/**
 * sluice_result_new:
 * @id: (transfer none): the task id
 * @state: its state
 *
 * Workers and tests build records with this; users read them.
 * Returns: (transfer full): a record with every other field empty.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceResult *sluice_result_new(const gchar *id, SluiceTaskState state);

SLUICE_AVAILABLE_IN_0_1
SluiceResult *sluice_result_ref(SluiceResult *result);
SLUICE_AVAILABLE_IN_0_1
void sluice_result_unref(SluiceResult *result);

/* Getters: strings and bytes are (transfer none), valid while @result is. */
SLUICE_AVAILABLE_IN_0_1
const gchar *sluice_result_get_id(const SluiceResult *result);
SLUICE_AVAILABLE_IN_0_1
SluiceTaskState sluice_result_get_state(const SluiceResult *result);
/** Returns: (nullable): the task name, if the writer knew it. */
SLUICE_AVAILABLE_IN_0_1
const gchar *sluice_result_get_task(const SluiceResult *result);
SLUICE_AVAILABLE_IN_0_1
const gchar *sluice_result_get_queue(const SluiceResult *result);
/** Returns: the attempt that wrote the record (0 if not run yet). */
SLUICE_AVAILABLE_IN_0_1
guint sluice_result_get_attempt(const SluiceResult *result);
/** Returns: (nullable): the result value (msgpack) of a succeeded task. */
SLUICE_AVAILABLE_IN_0_1
GBytes *sluice_result_get_value(const SluiceResult *result);
/** Returns: (nullable): the final error message, or the last one. */
SLUICE_AVAILABLE_IN_0_1
const gchar *sluice_result_get_error(const SluiceResult *result);
/** Returns: (nullable): for dead_lettered: the dead-letter reason. */
SLUICE_AVAILABLE_IN_0_1
const gchar *sluice_result_get_dead_letter_reason(const SluiceResult *result);
/** Returns: (nullable): the id of the worker that wrote the record. */
SLUICE_AVAILABLE_IN_0_1
const gchar *sluice_result_get_worker(const SluiceResult *result);
/** Timestamps in ms since the epoch; 0 where not reached. */
SLUICE_AVAILABLE_IN_0_1
gint64 sluice_result_get_enqueued_at(const SluiceResult *result);
SLUICE_AVAILABLE_IN_0_1
gint64 sluice_result_get_started_at(const SluiceResult *result);
SLUICE_AVAILABLE_IN_0_1
gint64 sluice_result_get_finished_at(const SluiceResult *result);
/**
 * sluice_result_get_due_at:
 * Returns: when a task found on the schedule is due (ms since epoch), as
 * sluice_client_inspect() reports it; 0 otherwise. Not part of the stored
 * record.
 */
SLUICE_AVAILABLE_IN_0_1
gint64 sluice_result_get_due_at(const SluiceResult *result);
/** sluice_result_set_due_at: see sluice_result_get_due_at(). */
SLUICE_AVAILABLE_IN_0_1
void sluice_result_set_due_at(SluiceResult *result, gint64 due_at);

/* Setters, for record writers. Each copies what it is given. */
SLUICE_AVAILABLE_IN_0_1
void sluice_result_set_task(SluiceResult *result, const gchar *task,
                            const gchar *queue);
SLUICE_AVAILABLE_IN_0_1
void sluice_result_set_attempt(SluiceResult *result, guint attempt);
/* @value must hold exactly one msgpack value nested at most 63 deep (what
 * a task's result must be); anything else is a programming error, reported
 * with g_critical() and ignored. */
SLUICE_AVAILABLE_IN_0_1
void sluice_result_set_value(SluiceResult *result, GBytes *value);

/**
 * sluice_result_get_seal:
 * Returns: (transfer none) (nullable): "ALGORITHM:KEY-ID" when the value
 * is sealed (sluice-seal.h) and was not opened: the value is then one
 * msgpack bin, not the task's result. NULL for a value in clear.
 * sluice_client_get_result() opens a sealed value with the client's
 * keyring, or fails; sluice_client_inspect() leaves it sealed without one.
 */
SLUICE_AVAILABLE_IN_0_1
const gchar *sluice_result_get_seal(const SluiceResult *result);
SLUICE_AVAILABLE_IN_0_1
void sluice_result_set_error(SluiceResult *result, const gchar *error);
SLUICE_AVAILABLE_IN_0_1
void sluice_result_set_dead_letter_reason(SluiceResult *result,
                                          const gchar *reason);
SLUICE_AVAILABLE_IN_0_1
void sluice_result_set_worker(SluiceResult *result, const gchar *worker);
SLUICE_AVAILABLE_IN_0_1
void sluice_result_set_times(SluiceResult *result, gint64 enqueued_at,
                             gint64 started_at, gint64 finished_at);

/**
 * sluice_result_encode:
 * Returns: (transfer full): the record's bytes as stored by brokers (a
 * msgpack map, see PROTOCOL.md).
 */
SLUICE_AVAILABLE_IN_0_1
GBytes *sluice_result_encode(const SluiceResult *result);

/**
 * sluice_result_decode:
 * @bytes: (transfer none): a stored record
 * Returns: (transfer full): the record, or NULL and a SLUICE_CODEC_ERROR.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceResult *sluice_result_decode(GBytes *bytes, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(SluiceResult, sluice_result_unref)

G_END_DECLS

/* sluice/sys/broker-values.h - the values a broker's slots take and give:
 * capabilities, submits, deliveries, settlements, record writes,
 * revocations, task locations and listed messages.
 *
 * Part of the broker author's contract; include <sluice/sys/broker.h>,
 * which includes this file.
 */
#pragma once

#include <glib.h>

#include <sluice/sluice-brokers.h>
#include <sluice/sluice-macros.h>

G_BEGIN_DECLS

/**
 * SluiceBrokerCaps:
 * @SLUICE_BROKER_CAP_SHARED: other processes see the same queues
 * @SLUICE_BROKER_CAP_DURABLE: messages outlive the process
 * @SLUICE_BROKER_CAP_LEASES: deliveries are held under a lease;
 *   `heartbeat` and `reclaim` are implemented and a dead consumer's
 *   deliveries are redelivered (at-least-once)
 * @SLUICE_BROKER_CAP_FENCING: `settle` refuses (status STALE) a delivery
 *   that another consumer owns by now
 * @SLUICE_BROKER_CAP_CLOCK_TTL: every TTL follows the broker's SluiceClock
 *   (a fake clock makes records expire); without it TTLs follow the store's
 *   own time
 * @SLUICE_BROKER_CAP_IN_FLIGHT: stats report in-flight counts
 * @SLUICE_BROKER_CAP_ORDERED: (since 0.2) `fetch` hands out the messages
 *   of a queue in the order they became ready (FIFO within a queue) and
 *   never a message of queues[i+1] while queues[i] has one ready (strict
 *   priority across queues); `list_queued` lists in that order, and
 *   `dlq_list` in the order of burial. A broker spread over independent
 *   stores (Redis partitions) cannot promise it: it still hands out every
 *   message, in an order of its own
 *
 * The core and the conformance suite branch on capabilities, never on a
 * broker's name.
 */
typedef enum {
  SLUICE_BROKER_CAP_SHARED = 1 << 0,
  SLUICE_BROKER_CAP_DURABLE = 1 << 1,
  SLUICE_BROKER_CAP_LEASES = 1 << 2,
  SLUICE_BROKER_CAP_FENCING = 1 << 3,
  SLUICE_BROKER_CAP_CLOCK_TTL = 1 << 4,
  SLUICE_BROKER_CAP_IN_FLIGHT = 1 << 5,
  /* 6 ... 13 are taken by capabilities of other releases in progress. */
  SLUICE_BROKER_CAP_ORDERED = 1 << 14,
} SluiceBrokerCaps;

/**
 * SluiceSubmit:
 * @id: the task id (unique; the key of the schedule and of records)
 * @queue: the queue it goes to
 * @payload: the encoded envelope; the broker stores exactly these bytes
 * @due_at: 0 = ready now (goes to @queue); otherwise a time in ms since the
 *   epoch: the message goes to the schedule and `promote_due` moves it to
 *   @queue once the time is reached
 * @dedup_ttl_ms: > 0 makes the submit idempotent: the broker claims @id for
 *   this long, in the same atomic step as the write; if @id is claimed
 *   already, nothing is written and @existed is set
 * @record: (nullable): a non-final record to write for @id in the same step
 *   (queued/scheduled, when track_state is on)
 * @record_ttl_ms: lifetime of @record
 * @existed: out: TRUE when @dedup_ttl_ms found @id claimed
 */
typedef struct {
  const gchar *id;
  const gchar *queue;
  GBytes *payload;
  gint64 due_at;
  gint64 dedup_ttl_ms;
  GBytes *record;
  gint64 record_ttl_ms;
  gboolean existed;
} SluiceSubmit;

/**
 * SluiceDelivery:
 * @payload: the bytes as submitted (owned by the delivery)
 * @queue: the queue it came from (owned)
 * @handle: (nullable): the broker's reference to the delivered entry (a
 *   stream entry id, ...), owned
 * @delivery_count: 1 on the first delivery; a broker with LEASES reports
 *   how many times the entry has been delivered in all, takeovers included
 * @broker_data: (nullable): anything else the broker needs to settle it
 * @broker_data_free: (nullable): frees @broker_data
 *
 * Made by a broker with sluice_delivery_new(), owned by the core from the
 * moment `fetch` or `reclaim` returns it, freed with sluice_delivery_free()
 * after it was settled.
 */
typedef struct {
  GBytes *payload;
  gchar *queue;
  gchar *handle;
  guint delivery_count;
  gpointer broker_data;
  GDestroyNotify broker_data_free;
} SluiceDelivery;

/**
 * SluiceSettleAction:
 * @SLUICE_SETTLE_ACK: the delivery is finished: acknowledge it (remove it
 *   for good) and write @record. Used for succeeded, failed (not buried)
 *   and cancelled.
 * @SLUICE_SETTLE_RETRY: acknowledge it and put @reschedule_payload on the
 *   schedule under @id, due at @reschedule_at. Used for retries and for
 *   deferrals of unknown tasks.
 * @SLUICE_SETTLE_DEAD_LETTER: acknowledge it and append @dead_letter to the
 *   dead-letter queue, dropping the oldest entries beyond the broker's
 *   dead_letter_max.
 * @SLUICE_SETTLE_RELEASE: do not acknowledge: give the delivery back so
 *   that any live consumer (this one included) can fetch it at once
 *   (graceful shutdown). A release is not a failed delivery: the next
 *   delivery of the message reports the same delivery_count as this one.
 *   The message may go to the end of its queue. With LEASES, leaving it
 *   pending for a peer's next reclaim is not enough (that waits for a
 *   reclaim tick and counts as a delivery): requeue it.
 *   With @record set (a `queued` record, when track_state is on), the
 *   record is written in the same step.
 */
typedef enum {
  SLUICE_SETTLE_ACK,
  SLUICE_SETTLE_RETRY,
  SLUICE_SETTLE_DEAD_LETTER,
  SLUICE_SETTLE_RELEASE,
} SluiceSettleAction;

/**
 * SluiceSettleStatus:
 * @SLUICE_SETTLE_DONE: carried out
 * @SLUICE_SETTLE_STALE: refused by fencing: another consumer owns the
 *   delivery now. Nothing was acknowledged, scheduled or buried; the record
 *   may still have been written (the last to finish wins).
 * @SLUICE_SETTLE_GONE: (since version 2) refused by fencing: no consumer
 *   holds the delivery any more: it was settled already (a settle repeated
 *   after its reply was lost), or the store lost it (a Redis restarted
 *   without its latest writes, an entry deleted by hand). As for STALE,
 *   nothing but the record was written. A version-1 broker reports STALE
 *   for both.
 */
typedef enum {
  SLUICE_SETTLE_DONE,
  SLUICE_SETTLE_STALE,
  SLUICE_SETTLE_GONE,
} SluiceSettleStatus;

/**
 * SluiceSettlement:
 * @delivery: what is being settled
 * @action: what to do, decided by the core
 * @id: (nullable): the task id; NULL only for a malformed message, which
 *   has no record and is never rescheduled
 * @record: (nullable): the record to write under @id in the same step
 * @record_final: TRUE when @record holds a final state (wakes waiters)
 * @record_ttl_ms: lifetime of @record
 * @reschedule_payload: RETRY only: the new envelope bytes
 * @reschedule_at: RETRY only: when it is due (ms since epoch)
 * @dead_letter: DEAD_LETTER only: the entry to append; its @entry_id is
 *   NULL and the broker assigns one
 * @status: out: what happened, when `settle` returned TRUE
 *
 * Atomicity: per settlement, the acknowledgement, the record, the
 * notification of waiters and the retry or dead-letter write happen
 * together or not at all. A retry is never both lost and acknowledged.
 */
typedef struct {
  SluiceDelivery *delivery;
  SluiceSettleAction action;
  const gchar *id;
  GBytes *record;
  gboolean record_final;
  gint64 record_ttl_ms;
  GBytes *reschedule_payload;
  gint64 reschedule_at;
  const SluiceDeadLetter *dead_letter;
  SluiceSettleStatus status;
} SluiceSettlement;

/**
 * SluiceRecordWrite:
 * @id: the task id
 * @record: the record, never a final one
 * @ttl_ms: its lifetime
 *
 * One record of `put_records`.
 */
typedef struct {
  const gchar *id;
  GBytes *record;
  gint64 ttl_ms;
} SluiceRecordWrite;

/**
 * SluiceRevocation:
 * @id: a revoked task id
 * @expires_at: when the revocation lapses (ms since epoch)
 */
typedef struct {
  gchar *id;
  gint64 expires_at;
} SluiceRevocation;

/**
 * SluiceTaskPlace:
 * @SLUICE_TASK_PLACE_NONE: neither on the schedule nor buried
 * @SLUICE_TASK_PLACE_SCHEDULED: waiting on the schedule (a delay, an ETA,
 *   a retry or a deferral)
 * @SLUICE_TASK_PLACE_DEAD: in the dead-letter queue
 */
typedef enum {
  SLUICE_TASK_PLACE_NONE,
  SLUICE_TASK_PLACE_SCHEDULED,
  SLUICE_TASK_PLACE_DEAD,
} SluiceTaskPlace;

/**
 * SluiceTaskLocation:
 * @place: where the task was found
 * @payload: (nullable): SCHEDULED: the envelope bytes as stored (owned)
 * @queue: (nullable): SCHEDULED: the queue it goes to when due (owned)
 * @due_at: SCHEDULED: when it is due (ms since epoch)
 * @dead_letter: (nullable): DEAD: the newest dead letter of the task
 *   (owned)
 *
 * What `lookup_task` found. Clear with sluice_task_location_clear().
 */
typedef struct {
  SluiceTaskPlace place;
  GBytes *payload;
  gchar *queue;
  gint64 due_at;
  SluiceDeadLetter *dead_letter;
} SluiceTaskLocation;

/**
 * SluiceListedMessage:
 * @id: (nullable): `list_scheduled`: the task id the schedule keys the
 *   entry by; NULL from `list_queued` (the id is in the payload)
 * @queue: the queue it waits in, or goes to when due
 * @payload: the envelope bytes as stored
 * @due_at: `list_scheduled`: when it is due (ms since epoch); 0 for a
 *   ready message
 *
 * One message a listing slot found, left where it was. Made by a broker
 * with sluice_listed_message_new(), owned by the caller of the slot, freed
 * with sluice_listed_message_free(). Owns every field.
 */
typedef struct {
  gchar *id;
  gchar *queue;
  GBytes *payload;
  gint64 due_at;
} SluiceListedMessage;

G_END_DECLS

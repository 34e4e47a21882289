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
 * @SLUICE_BROKER_CAP_ORDERED: `fetch` hands out the messages
 *   of a queue in the order they became ready (FIFO within a queue) and
 *   never a message of queues[i+1] while queues[i] has one ready (strict
 *   priority across queues); `list_queued` lists in that order, and
 *   `dlq_list` in the order of burial. A broker spread over independent
 *   stores (Redis partitions) cannot promise it: it still hands out every
 *   message, in an order of its own
 *
 * Capabilities are the properties of a broker that are not a family of
 * slots: whether a broker has a family is said by its table alone (see
 * sys/broker.h), never by a bit. The core and the conformance suite branch
 * on them through sluice_broker_supports(), never on a broker's name.
 */
typedef enum {
  SLUICE_BROKER_CAP_SHARED = 1 << 0,
  SLUICE_BROKER_CAP_DURABLE = 1 << 1,
  SLUICE_BROKER_CAP_LEASES = 1 << 2,
  SLUICE_BROKER_CAP_FENCING = 1 << 3,
  SLUICE_BROKER_CAP_CLOCK_TTL = 1 << 4,
  SLUICE_BROKER_CAP_IN_FLIGHT = 1 << 5,
  SLUICE_BROKER_CAP_ORDERED = 1 << 6,
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
 * @SLUICE_SETTLE_GONE: refused by fencing: no consumer
 *   holds the delivery any more: it was settled already (a settle repeated
 *   after its reply was lost), or the store lost it (a Redis restarted
 *   without its latest writes, an entry deleted by hand). As for STALE,
 *   nothing but the record was written.
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
 * @handle: (nullable): `list_queued`: the broker's own name for this
 *   ready message (a row, an entry id), which `remove_queued` is given
 *   back; NULL where the bytes themselves name it (set with
 *   sluice_listed_message_set_handle())
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
  gchar *handle;
} SluiceListedMessage;

/**
 * SluiceRemoval:
 * @queue: the queue the message was listed in
 * @payload: its bytes, as `list_queued` listed them
 * @handle: (nullable): its handle, as `list_queued` listed it
 * @id: (nullable): the task's id (NULL: the core could not read one)
 * @record: (nullable): a final record to write under @id in the step
 *   that removes the message (the core's `cancelled` record)
 * @record_ttl_ms: how long the record lives
 * @removed: (out): set by the broker: whether the message was still ready
 *   and is removed now (and @record written)
 *
 * One item of `remove_queued`: a ready message the core found with
 * `list_queued` and decided to take out of its queue before it runs (an
 * operator deleted the task, or purged its queue).
 */
typedef struct {
  const gchar *queue;
  GBytes *payload;
  const gchar *handle;
  const gchar *id;
  GBytes *record;
  gint64 record_ttl_ms;
  gboolean removed;
} SluiceRemoval;

/**
 * SluiceWaitingPlace:
 * @SLUICE_WAITING_QUEUED: ready in its queue (`list_queued`)
 * @SLUICE_WAITING_SCHEDULED: on the schedule (`list_scheduled`)
 * @SLUICE_WAITING_DEAD: in the dead-letter queue (`dlq_list`)
 *
 * Where a message waits that a listing found.
 */
typedef enum {
  SLUICE_WAITING_QUEUED,
  SLUICE_WAITING_SCHEDULED,
  SLUICE_WAITING_DEAD,
} SluiceWaitingPlace;

/**
 * SluiceReplacement:
 * @place: which listing found the message
 * @queue: QUEUED: the queue it was listed in; else ignored (nullable)
 * @handle: (nullable): QUEUED: its handle as `list_queued` listed it (NULL
 *   where the broker's listings have none: the bytes name it); SCHEDULED:
 *   the task id `list_scheduled` keyed it by; DEAD: the dead letter's entry
 *   id
 * @payload: its bytes as listed
 * @replacement: the bytes it is to hold instead
 * @replaced: (out): set by the broker: whether the message was still there
 *   with @payload and holds @replacement now
 *
 * One item of `replace_payloads`. The caller owns every field.
 */
typedef struct {
  SluiceWaitingPlace place;
  const gchar *queue;
  const gchar *handle;
  GBytes *payload;
  GBytes *replacement;
  gboolean replaced;
} SluiceReplacement;

/**
 * SluiceJoinSpec:
 * @id: the join's id (unique in the namespace; the core makes it from the
 *   workflow's id)
 * @total: how many distinct members must arrive, >= 1
 * @release: (array length=n_release): what the join submits, in the step
 *   that completes it: ready messages (their @due_at and @dedup_ttl_ms are
 *   0; each may carry a non-final @record)
 * @n_release: how many; 0 for a join that only counts
 * @meta: (nullable): the core's opaque description of the join, stored as
 *   it is and returned by `join_read`
 * @ttl_ms: how long the join lives after it was opened; it is deleted
 *   after that, released or not
 *
 * One join of `join_open`: a counter of members that, once every member
 * arrived (or when an arrival says so), submits its release items. Workflows
 * are built of them; the broker knows nothing of workflows.
 */
typedef struct {
  const gchar *id;
  guint total;
  SluiceSubmit *release;
  guint n_release;
  GBytes *meta;
  gint64 ttl_ms;
} SluiceJoinSpec;

/**
 * SluiceJoinStep:
 * @SLUICE_JOIN_COUNT: count the member; release the join once every member
 *   has arrived
 * @SLUICE_JOIN_RELEASE_NOW: count it and release the join now, whatever
 *   is still missing (a chord's fail-fast policy)
 * @SLUICE_JOIN_ABANDON: count it and mark the join abandoned: it is never
 *   released (a chain stopped by a failure)
 *
 * What an arrival asks of a join that is still open. Once released or
 * abandoned, a join only stores the outcomes of late members.
 */
typedef enum {
  SLUICE_JOIN_COUNT,
  SLUICE_JOIN_RELEASE_NOW,
  SLUICE_JOIN_ABANDON,
} SluiceJoinStep;

/**
 * SluiceJoinArrival:
 * @join_id: the join
 * @member: the member's index, < the join's total
 * @outcome: the core's bytes for the member's outcome (opaque)
 * @step: what to do if the join is open
 * @counted: out: TRUE when this arrival was the member's first (the
 *   outcome was stored); FALSE for a repeat, or when the join does not
 *   exist (never opened, or expired)
 * @released: out: TRUE for the one arrival whose step released the join
 *   (its release items were submitted)
 */
typedef struct {
  const gchar *join_id;
  guint member;
  GBytes *outcome;
  SluiceJoinStep step;
  gboolean counted;
  gboolean released;
} SluiceJoinArrival;

/**
 * SluiceJoinStatus:
 * @SLUICE_JOIN_OPEN: waiting for members
 * @SLUICE_JOIN_RELEASED: released (its items were submitted)
 * @SLUICE_JOIN_ABANDONED: abandoned; never released
 */
typedef enum {
  SLUICE_JOIN_OPEN,
  SLUICE_JOIN_RELEASED,
  SLUICE_JOIN_ABANDONED,
} SluiceJoinStatus;

/**
 * SluiceJoinState:
 * @total: the members expected
 * @arrived: the distinct members arrived
 * @status: where it is
 * @meta: (nullable): the join's @meta as opened (owned)
 * @outcomes: (element-type GBytes) (nullable): with outcomes asked for,
 *   @total elements in member order, NULL where a member has not arrived
 *   (owned; elements freed with the array)
 *
 * What `join_read` found. Clear with sluice_join_state_clear().
 */
typedef struct {
  guint total;
  guint arrived;
  SluiceJoinStatus status;
  GBytes *meta;
  GPtrArray *outcomes;
} SluiceJoinState;

/**
 * SluiceEventEntry:
 * @cursor: where the event is in the stream (the broker's string; owned)
 * @event: the event's bytes as appended (owned)
 *
 * One event `read_events` found. Made with sluice_event_entry_new(), freed
 * with sluice_event_entry_free().
 */
typedef struct {
  gchar *cursor;
  GBytes *event;
} SluiceEventEntry;

/**
 * sluice_broker_parse_events_cursor:
 * @cursor: (nullable): a cursor of `read_events`; NULL means "from the
 *   oldest event kept"
 * @out_after: (out): the sequence number of the last event read: 0 for
 *   NULL
 *
 * For a broker whose events cursor is the decimal sequence number of an
 * event (the memory and SQLite brokers): parses it, as `read_events`
 * must, refusing what is not a number from 0 to G_MAXINT64. The bound is
 * G_MAXINT64, not G_MAXUINT64, because a sequence number is an SQLite
 * rowid or a counter kept as gint64: a larger number would wrap negative
 * and read as "from the start". The broker still refuses, itself, a
 * cursor ahead of every event it appended.
 * Returns: FALSE and SLUICE_BROKER_ERROR_INVALID, saying what to pass,
 * when @cursor is not one.
 */
SLUICE_BROKER_API
gboolean sluice_broker_parse_events_cursor(const gchar *cursor,
                                           gint64 *out_after, GError **error);

/**
 * SluiceRateAcquire:
 * @key: the bucket (the core's name for it; any bytes but NUL)
 * @interval_us: the generic cell rate algorithm's emission interval: the
 *   time one admission uses up (period / count), > 0
 * @tolerance_us: how far ahead of the store's time the bucket's
 *   theoretical arrival time may run and still admit: (burst - 1) *
 *   interval, >= 0
 * @block_ms: 0 to ask for an admission; > 0 to admit nothing on @key for
 *   this long from now instead (a downstream's 429), whatever was due
 * @granted: out: TRUE when the bucket admitted one run (never with
 *   @block_ms)
 * @wait_ms: out: when not granted, how long from now until the bucket
 *   can admit again (>= 1); 0 when granted
 * @now_ms: out: the store's time of the decision (ms since the epoch)
 *
 * One item of `rate_acquire`.
 */
typedef struct {
  const gchar *key;
  gint64 interval_us;
  gint64 tolerance_us;
  gint64 block_ms;
  gboolean granted;
  gint64 wait_ms;
  gint64 now_ms;
} SluiceRateAcquire;

/**
 * sluice_broker_gcra_step:
 * @item: one item of `rate_acquire`: its @interval_us, @tolerance_us and
 *   @block_ms are read; its @granted, @wait_ms and @now_ms are set
 * @now_ms: the store's time of the decision (ms since the epoch): the
 *   broker's SluiceClock with CLOCK_TTL, else the store's own
 * @tat_us: the bucket's stored theoretical arrival time (microseconds), or
 *   0 for a bucket that has none (an absent bucket admits as a new one)
 * @out_tat_us: (out): the time to store for the bucket, when this returns
 *   TRUE
 *
 * One step of the generic cell rate algorithm, exactly as `rate_acquire`
 * specifies it (and as brokers/redis/lua/rate_acquire.lua computes it on
 * the server): with now = @now_ms * 1000 and tat = MAX (@tat_us, now):
 *  - @block_ms 0: if tat - tolerance <= now, grant, and the bucket's new
 *    time is tat + interval; otherwise nothing changes, and @wait_ms is
 *    tat - tolerance - now rounded up to whole ms;
 *  - @block_ms > 0: grant nothing, @wait_ms is @block_ms, and the new
 *    time is MAX (tat, now + @block_ms * 1000 + tolerance).
 * A broker reads the bucket, calls this, and writes @out_tat_us when it
 * returns TRUE, all in one atomic step. Pure: it touches nothing else.
 * Returns: TRUE when the bucket must be written, FALSE when it stays as it
 * was (a refusal changes nothing).
 */
SLUICE_BROKER_API
gboolean sluice_broker_gcra_step(SluiceRateAcquire *item, gint64 now_ms,
                                 gint64 tat_us, gint64 *out_tat_us);

/**
 * SluiceSlotAcquire:
 * @key: the set of slots (the core's name for it; any bytes but NUL)
 * @max: how many holders it may have at once, > 0
 * @holder: who asks (the core's name for one running message)
 * @lease_ms: how long the slot is held unless asked for again, > 0
 * @waiter: (nullable): a task id to wake when a slot of @key frees, if
 *   none is free now
 * @granted: out: TRUE when @holder holds a slot of @key now
 *
 * One item of `slot_acquire`.
 */
typedef struct {
  const gchar *key;
  guint max;
  const gchar *holder;
  gint64 lease_ms;
  const gchar *waiter;
  gboolean granted;
} SluiceSlotAcquire;

/**
 * SluiceSlotRelease:
 * @key: the set of slots
 * @holder: who gives its slot back
 * @woke: out: TRUE when a waiting message was moved to its queue
 *
 * One item of `slot_release`.
 */
typedef struct {
  const gchar *key;
  const gchar *holder;
  gboolean woke;
} SluiceSlotRelease;

/**
 * SluiceUniqueSubmit:
 * @submit: the message, as `enqueue` takes it
 * @key: the uniqueness key (the core's name for it; any bytes but NUL)
 * @claim_ttl_ms: how long the claim on @key lives from now unless the core
 *   changes it (`unique_update`), > 0
 * @replace: when @key is held by a message that has not started (a
 *   waiting claim), take the claim over instead of refusing
 * @existed: out: TRUE when @key was held and nothing was written
 * @replaced: out: TRUE when @replace took the claim over from @holder
 * @holder: out: (nullable) (transfer full): with @existed or @replaced, the
 *   id of the message that held @key; free it with g_free()
 *
 * One item of `unique_enqueue`.
 */
typedef struct {
  SluiceSubmit submit;
  const gchar *key;
  gint64 claim_ttl_ms;
  gboolean replace;
  gboolean existed;
  gboolean replaced;
  gchar *holder;
} SluiceUniqueSubmit;

/**
 * SluiceUniqueAction:
 * @SLUICE_UNIQUE_CHECK: change nothing; only answer @superseded
 * @SLUICE_UNIQUE_START: the message starts and its claim ends (scope
 *   "while queued"): delete the claim if @id holds it
 * @SLUICE_UNIQUE_HOLD: the message runs (scope "while running"): unless
 *   another id holds @key, make @id hold it as running for @ttl_ms from now
 *   (a lease, renewed with the heartbeat; a claim that lapsed is taken
 *   again)
 * @SLUICE_UNIQUE_WAIT: the message waits again (a retry): if @id holds @key
 *   or nobody does, make @id hold it as waiting for @ttl_ms
 * @SLUICE_UNIQUE_RELEASE: the message finished: delete the claim if @id
 *   holds it
 * @SLUICE_UNIQUE_RENEW: the heartbeat of a running message: if @id holds
 *   @key as running, extend it to @ttl_ms from now; nothing otherwise (a
 *   renewal that crosses the release or the retry of its message must not
 *   bring the claim back)
 *
 * What `unique_update` does with one claim.
 */
typedef enum {
  SLUICE_UNIQUE_CHECK,
  SLUICE_UNIQUE_START,
  SLUICE_UNIQUE_HOLD,
  SLUICE_UNIQUE_WAIT,
  SLUICE_UNIQUE_RELEASE,
  SLUICE_UNIQUE_RENEW,
} SluiceUniqueAction;

/**
 * SluiceUniqueUpdate:
 * @key: the uniqueness key
 * @id: the task id of the message the core is about
 * @action: what to do
 * @ttl_ms: HOLD, WAIT and RENEW: the claim's new lifetime, > 0
 * @superseded: out: TRUE when a live claim on @key names another id (the
 *   message was replaced, or its claim lapsed and was taken): the action
 *   then changed nothing
 *
 * One item of `unique_update`.
 */
typedef struct {
  const gchar *key;
  const gchar *id;
  SluiceUniqueAction action;
  gint64 ttl_ms;
  gboolean superseded;
} SluiceUniqueUpdate;

G_END_DECLS

/* sluice/sys/broker.h - the broker contract: everything a broker author needs.
 *
 * OVERVIEW
 *
 * The core decides *what* happens to a message (retry it at T, bury it for
 * reason R, record its result); a broker makes it happen *atomically*, and
 * decides nothing. A broker never computes a backoff, never compares an
 * attempt with a limit and never picks a dead-letter reason: every such
 * value arrives ready-made in the arguments below.
 *
 * A broker is a SluiceBrokerClass (a static table of function pointers, its
 * "slots", in the order of the contract's topics: produce, consume,
 * schedule, records, revocations, dead letters, stats and workers,
 * lifecycle), one const table per optional family it has (steering,
 * periodic, joins, events, rates, slots, unique), and an instance struct
 * whose first member is a SluiceBroker:
 *
 *     typedef struct {
 *       SluiceBroker parent;    // must be first
 *       GMutex lock;
 *       ...
 *     } MyBroker;
 *
 *     static const SluiceBrokerSteering my_broker_steering = {
 *       .version = SLUICE_BROKER_STEERING_VERSION,
 *       .list_queued = my_broker_list_queued,
 *       ...                                 // every slot of the table
 *     };
 *
 *     static const SluiceBrokerClass my_broker_class = {
 *       .version = SLUICE_BROKER_CLASS_VERSION,
 *       .name = "my-broker",
 *       .instance_size = sizeof (MyBroker),
 *       .caps = SLUICE_BROKER_CAP_DURABLE,
 *       .enqueue = my_broker_enqueue,
 *       ...                                 // the required core
 *       .steering = &my_broker_steering,    // a family it has
 *       .joins = NULL,                      // one it has not
 *     };
 *
 *     SluiceBroker *my_broker_new (GError **error) {
 *       SluiceBroker *b = sluice_broker_new (&my_broker_class, NULL, error);
 *       if (b == NULL)            // incomplete: the error says which slot
 *         return NULL;
 *       MyBroker *self = (MyBroker *) b;  // zero-filled, instance_size bytes
 *       g_mutex_init (&self->lock);
 *       return b;
 *     }
 *
 * sluice_broker_new() validates the class and every table it points at
 * (versions, the instance size, every required slot, and the slots a
 * capability needs) and rejects an incomplete one with
 * SLUICE_BROKER_ERROR_INCOMPLETE naming the slot ("enqueue",
 * "steering.purge"). It copies the class and each table, so slots that a
 * later version adds read as NULL for a broker built before them. The
 * core owns the reference count and calls `finalize` for the broker's
 * private state when the last reference goes. Whether a broker has a
 * capability or a family is asked with sluice_broker_supports(), the one
 * way the core, the CLI and users ask.
 *
 * VERSIONING. A contract version is cut at a release, never per feature:
 * what changes between two releases is one version. Before 1.0 the
 * contract may still change shape (versions 1 to 4 of the development
 * series were folded into this version 1). After 1.0 the class and each
 * table only grow at their end, never reorder or drop a slot, and a
 * table's version (SLUICE_BROKER_<FAMILY>_VERSION) is bumped in the release
 * that grows it; the class's version is bumped when the class grows. A
 * broker built against version N sets .version = N; the core reads a
 * class or table of an older version as that version's prefix, the later
 * slots NULL, with their documented fallbacks. A new family is a new
 * table, pointed at from the end of the class.
 *
 * THREADS. Every slot may be called from any thread, concurrently with
 * every other slot, except `finalize` (called once, when no other call runs).
 * A worker calls `fetch` from its fetcher thread, `settle` from its settler
 * thread, housekeeping slots from its housekeeping thread, and producers call
 * `enqueue` from theirs. A broker with per-thread resources (a hiredis
 * context is not thread-safe) keeps a pool and never uses one from two
 * threads at once.
 *
 * ERRORS. A slot returns FALSE and sets @error (never one without the
 * other). Use SLUICE_BROKER_ERROR_UNAVAILABLE for "store unreachable now":
 * the worker waits that out and calls again; anything else is reported. A
 * slot that fails has changed nothing that matters: either the whole atomic
 * step happened or none of it did. Where a store cannot promise that (a
 * network error after the command was sent), the slot must still report the
 * error, and the operation must be safe to repeat (see each slot).
 *
 * OWNERSHIP. Arguments are borrowed for the duration of the call unless a
 * slot says otherwise; a broker that keeps a GBytes takes a reference.
 * What a slot adds to an out array is owned by the caller.
 *
 * CONFORMANCE. tests/conformance/ runs the same scenarios against every
 * broker; a broker is done when that suite passes for it. Scenarios that
 * need a capability or a family the broker lacks are not run, and the kit
 * prints each of them with the reason and counts them at the end. It is
 * installed as a kit for brokers written outside the tree
 * (<sluice/sluice-conformance.h>, pkg-config sluice-conformance), and
 * docs/writing-a-broker.md walks through the contract slot by slot.
 */
#pragma once

#define SLUICE_BROKER_INSIDE
#include <sluice/sluice-brokers.h>
#include <sluice/sluice-clock.h>
#include <sluice/sluice-macros.h>
#include <sluice/sys/broker-values.h>
#undef SLUICE_BROKER_INSIDE

G_BEGIN_DECLS

typedef struct _SluiceBrokerClass SluiceBrokerClass;
typedef struct _SluiceBrokerPrivate SluiceBrokerPrivate;

/**
 * SluiceBroker:
 *
 * The base of every broker instance. Brokers embed it first. Its fields
 * are the core's: a broker's own slots and everyone else ask what a
 * broker is through sluice_broker_supports(), sluice_broker_get_name()
 * and sluice_broker_is_a(), never by reading its class.
 */
struct _SluiceBroker {
  /*< private >*/
  SluiceBrokerPrivate *priv;
};

#define SLUICE_BROKER_CLASS_VERSION 1

typedef struct _SluiceBrokerSteering SluiceBrokerSteering;
typedef struct _SluiceBrokerPeriodic SluiceBrokerPeriodic;
typedef struct _SluiceBrokerJoins SluiceBrokerJoins;
typedef struct _SluiceBrokerEvents SluiceBrokerEvents;
typedef struct _SluiceBrokerRates SluiceBrokerRates;
typedef struct _SluiceBrokerSlots SluiceBrokerSlots;
typedef struct _SluiceBrokerUnique SluiceBrokerUnique;

/**
 * SluiceBrokerClass:
 *
 * The required core of the contract and its optional slots, by topic (as
 * docs/writing-a-broker.md walks through them), then one pointer per
 * optional family. Each slot says whether a broker must provide it, and if
 * not, what the core does instead.
 */
struct _SluiceBrokerClass {
  /** version: SLUICE_BROKER_CLASS_VERSION at the time the broker was built. */
  guint32 version;
  /** name: short, stable, lower-case ("memory", "redis-fast"). Required. */
  const gchar *name;
  /** instance_size: sizeof the broker's instance struct; >= sizeof
   * (SluiceBroker). The core allocates it zero-filled. */
  gsize instance_size;
  /** caps: SluiceBrokerCaps bits: the properties that are not a family of
   * slots (a family is there when its table is). */
  guint64 caps;

  /* ---- produce ---------------------------------------------------------- */

  /**
   * enqueue: Required.
   * Writes @n_items messages, each to its queue (@due_at == 0) or to the
   * schedule (@due_at > 0), with its optional record and idempotency claim.
   * Each item is atomic on its own; the batch as a whole need not be, but
   * on FALSE the caller assumes any item may or may not have been written,
   * and may submit the same items again: items with @dedup_ttl_ms are then
   * not written twice. Sets each item's @existed.
   */
  gboolean (*enqueue)(SluiceBroker *self, SluiceSubmit *items, guint n_items,
                      GError **error);

  /* ---- consume ---------------------------------------------------------- */

  /**
   * fetch: Required.
   * Takes up to @max ready messages from @queues, which are in priority
   * order: with SLUICE_BROKER_CAP_ORDERED, a message of queues[i] is always
   * taken before one of queues[i+1], and a queue's messages in the order
   * they became ready; without it, in an order of the broker's, every
   * ready message eventually (no queue or part of the store starves).
   * Blocks up to @block_ms while all are empty (0 = do not block), and may
   * return early with nothing (after `wakeup`, or spuriously). Appends
   * SluiceDelivery pointers to @out (transfer full). A message handed out
   * is not handed out again unless it is released, or (LEASES) reclaimed
   * after its consumer died. @consumer names the calling worker; brokers
   * without LEASES may ignore it.
   * A queue paused with `set_paused` is skipped, and the pause is read in
   * the same atomic step that takes a message: once `set_paused` returned,
   * no fetch hands out a message of that queue, including one that was
   * blocked when the message arrived (it leaves the message where it was:
   * a broker whose blocking read takes before it can look puts it back,
   * uncounted). While every queue asked for is paused, the fetch waits as
   * an idle one does (no busy loop).
   */
  gboolean (*fetch)(SluiceBroker *self, const gchar *consumer,
                    const gchar *const *queues, guint max, gint64 block_ms,
                    GPtrArray *out, GError **error);
  /**
   * settle: Required.
   * Carries out each settlement (see SluiceSettlement for the atomicity
   * owed per item) and sets its @status. Returns FALSE only when the
   * store failed; the caller then calls again with the same settlements,
   * so a broker must make a repeated settlement harmless (an acknowledged
   * delivery acknowledged again changes nothing; a record or a schedule
   * entry written again is overwritten). Two repeats cannot always be made
   * harmless, and are documented as possible duplicates: a dead letter may
   * be appended twice, and a RELEASE repeated after another consumer
   * fetched the released message may deliver it once more. With LEASES, a
   * settlement repeated after its first reply was lost finds the entry
   * gone and may report STALE: the work was done, only the report is
   * conservative.
   */
  gboolean (*settle)(SluiceBroker *self, const gchar *consumer,
                     SluiceSettlement *items, guint n_items, GError **error);
  /**
   * heartbeat: Optional; required with LEASES. If NULL, nothing is done.
   * Marks @consumer alive for @lease_ms and extends the lease of every
   * delivery it still holds (@held), so that a long task held by a live
   * consumer is never reclaimed.
   */
  gboolean (*heartbeat)(SluiceBroker *self, const gchar *consumer,
                        gint64 lease_ms, SluiceDelivery *const *held,
                        guint n_held, GError **error);
  /**
   * reclaim: Optional; required with LEASES. If NULL, nothing is reclaimed.
   * Takes over, for @consumer, up to @max deliveries of @queues whose
   * owner is no longer alive or which sat unacknowledged longer than
   * @idle_ms, and appends them to @out with their total delivery count.
   * Never changes the payload (the attempt inside it stays as it was).
   */
  gboolean (*reclaim)(SluiceBroker *self, const gchar *consumer,
                      const gchar *const *queues, guint max, gint64 idle_ms,
                      GPtrArray *out, GError **error);
  /**
   * count_reclaimable: Optional, and only with LEASES (sluice_broker_new()
   * refuses it without). If NULL, a worker that holds deliveries reclaims
   * only once it is idle.
   * Sets @out_n to how many deliveries `reclaim` would take over now for
   * @consumer (at most @max), without taking any. Lets a busy worker stop
   * fetching and drain before it reclaims: the core runs reclaimed
   * deliveries alone (quarantine), so that a crash is charged to the one
   * delivery that caused it.
   */
  gboolean (*count_reclaimable)(SluiceBroker *self, const gchar *consumer,
                                const gchar *const *queues, guint max,
                                gint64 idle_ms, guint *out_n, GError **error);
  /**
   * leave: Optional. If NULL, nothing is done.
   * @consumer stops for good: drop its liveness so that what it still
   * holds (released at shutdown) can be reclaimed at once.
   */
  gboolean (*leave)(SluiceBroker *self, const gchar *consumer, GError **error);
  /**
   * wakeup: Optional. If NULL, a stopping worker waits for its fetch to
   * time out (the worker never blocks longer than one second at a time).
   * Makes every `fetch` blocked now return soon. Must not block.
   */
  void (*wakeup)(SluiceBroker *self);

  /* ---- schedule --------------------------------------------------------- */

  /**
   * promote_due: Required.
   * Moves up to @max scheduled messages whose due time is <= @now_ms to
   * their queues, earliest first, atomically per message, safe to run from
   * every worker at once (no message is promoted twice). Sets
   * @out_promoted, and @out_next_due to the earliest due time still on the
   * schedule (0 if it is empty).
   */
  gboolean (*promote_due)(SluiceBroker *self, gint64 now_ms, guint max,
                          guint *out_promoted, gint64 *out_next_due,
                          GError **error);
  /**
   * cancel_scheduled: Required.
   * Removes @id from the schedule if it is there and, in the same step,
   * writes @record (a final `cancelled` record) under @id. Sets
   * @out_removed. If @id is not scheduled, writes nothing.
   */
  gboolean (*cancel_scheduled)(SluiceBroker *self, const gchar *id,
                               GBytes *record, gint64 record_ttl_ms,
                               gboolean *out_removed, GError **error);

  /* ---- records ---------------------------------------------------------- */

  /**
   * get_record: Required.
   * Sets @out_record to the record stored for @id (transfer full), or to
   * NULL when there is none or it expired.
   */
  gboolean (*get_record)(SluiceBroker *self, const gchar *id,
                         GBytes **out_record, GError **error);
  /**
   * put_record: Required.
   * Writes @record under @id for @ttl_ms, replacing any record; if
   * @final, wakes every `wait_record` for @id.
   */
  gboolean (*put_record)(SluiceBroker *self, const gchar *id, GBytes *record,
                         gboolean final, gint64 ttl_ms, GError **error);
  /**
   * put_records: Optional. If NULL, the core calls `put_record` for each.
   * Writes @n records that are not final (a worker's `running` records,
   * sent in batches by its settler), each replacing any record under its
   * id, in as few round trips as the store allows. Each write is atomic;
   * the batch need not be. FALSE if any write failed (those before it may
   * have happened).
   */
  gboolean (*put_records)(SluiceBroker *self, const SluiceRecordWrite *items,
                          guint n, GError **error);
  /**
   * wait_record: Optional. If NULL, the core reads the record every 50 ms.
   * Returns as soon as a final record exists for @id, or after @timeout_ms,
   * with @out_record set to the record then stored (transfer full, or NULL).
   * Must be driven by the notification written with the final record, not
   * by a poll tick, and must not miss a record written before it started.
   */
  gboolean (*wait_record)(SluiceBroker *self, const gchar *id,
                          gint64 timeout_ms, GBytes **out_record,
                          GError **error);
  /**
   * lookup_task: Optional. If NULL, `inspect` finds only tasks that have a
   * record.
   * Fills @out (zeroed by the caller) with where task @id is now: on the
   * schedule (its payload, queue and due time) or in the dead-letter queue
   * (its newest dead letter), or SLUICE_TASK_PLACE_NONE. Costs one lookup
   * by id, never a scan.
   */
  gboolean (*lookup_task)(SluiceBroker *self, const gchar *id,
                          SluiceTaskLocation *out, GError **error);

  /* ---- revocations ------------------------------------------------------ */

  /**
   * revoke: Required.
   * Records that @id is revoked until @expires_at (ms since epoch).
   */
  gboolean (*revoke)(SluiceBroker *self, const gchar *id, gint64 expires_at,
                     GError **error);
  /**
   * list_revocations: Required.
   * Appends to @out (SluiceRevocation, transfer full) the revocations
   * recorded after @cursor, in the order they were recorded, that have not
   * lapsed at @now_ms, and sets @out_cursor to a cursor past the last one
   * (or to @cursor when there were none). @cursor 0 means "from the
   * beginning": every live revocation. A revocation recorded again (a
   * second cancel of the same id) is recorded anew, after the cursor.
   * Cursors only grow, and never skip a revocation recorded in the same
   * millisecond as another. (An expiry is no cursor: clients may use
   * different TTLs, and two revocations may share a millisecond.)
   */
  gboolean (*list_revocations)(SluiceBroker *self, gint64 cursor, gint64 now_ms,
                               GPtrArray *out, gint64 *out_cursor,
                               GError **error);

  /* ---- dead letters ----------------------------------------------------- */

  /**
   * dlq_list: Required.
   * Appends to @out (SluiceDeadLetter, transfer full) up to @limit entries,
   * oldest first (entries buried in the same millisecond in an order of
   * the broker's without SLUICE_BROKER_CAP_ORDERED), starting after entry
   * @after (NULL = from the oldest).
   */
  gboolean (*dlq_list)(SluiceBroker *self, const gchar *after, guint limit,
                       GPtrArray *out, GError **error);
  /**
   * dlq_get: Required.
   * Sets @out_entry (transfer full) to entry @entry_id, or fails with
   * SLUICE_BROKER_ERROR_NOT_FOUND.
   */
  gboolean (*dlq_get)(SluiceBroker *self, const gchar *entry_id,
                      SluiceDeadLetter **out_entry, GError **error);
  /**
   * dlq_replay: Required.
   * In one atomic step: if entry @entry_id exists, delete it and submit
   * @item (the core prepared its payload: attempt reset or kept), and set
   * @out_found; otherwise write nothing and clear @out_found.
   */
  gboolean (*dlq_replay)(SluiceBroker *self, const gchar *entry_id,
                         SluiceSubmit *item, gboolean *out_found,
                         GError **error);
  /**
   * dlq_delete: Required.
   * Deletes entry @entry_id; sets @out_found.
   */
  gboolean (*dlq_delete)(SluiceBroker *self, const gchar *entry_id,
                         gboolean *out_found, GError **error);

  /* ---- stats and workers ------------------------------------------------ */

  /**
   * stats: Required.
   * Fills @out (initialised by the caller) for @queues (NULL = every queue
   * the broker knows), including every figure it can tell.
   */
  gboolean (*stats)(SluiceBroker *self, const gchar *const *queues,
                    SluiceBrokerStats *out, GError **error);
  /**
   * announce: Optional. If NULL, stats list workers by heartbeat only, and
   * nobody can tell which task names are served.
   * Stores @info (opaque bytes, encoded by the core: host, pid, queues,
   * tasks served, counters) as @consumer's description for @ttl_ms,
   * replacing the previous one. `stats` reports each announced worker
   * with SluiceWorkerInfo.info set, and alive while its description has
   * not lapsed; a worker whose description lapsed may still be listed, as
   * not alive, for a grace period.
   */
  gboolean (*announce)(SluiceBroker *self, const gchar *consumer, GBytes *info,
                       gint64 ttl_ms, GError **error);
  /**
   * check: Optional. If NULL, nothing is checked.
   * Contacts the store and checks that it can serve this broker as
   * configured: reachable, credentials accepted, and the namespace used in
   * the same way by everyone (a Redis namespace records its mode on first
   * use; a client of the other mode is refused with
   * SLUICE_BROKER_ERROR_INVALID naming both). A worker calls it when it
   * starts (UNAVAILABLE is waited out there, any other error fails the
   * start); a producer that wants to fail at start, not at the first
   * enqueue, calls sluice_broker_check().
   */
  gboolean (*check)(SluiceBroker *self, GError **error);

  /* ---- lifecycle -------------------------------------------------------- */

  /**
   * close: Optional. If NULL, nothing is done.
   * Called once, before `finalize`, when the last reference is dropped.
   * Releases connections; after it no slot is called again.
   */
  void (*close)(SluiceBroker *self);
  /**
   * finalize: Required.
   * Frees the broker's private state (not the instance memory, which the
   * core frees). Called on a zero-filled instance too, if the broker's
   * constructor failed half-way, so it must cope with unset fields.
   */
  void (*finalize)(SluiceBroker *self);

  /* ---- optional families ------------------------------------------------ */

  /**
   * steering: (nullable): listing, pausing, moving and purging queued and
   * scheduled tasks (SluiceBrokerSteering).
   */
  const SluiceBrokerSteering *steering;
  /** periodic: (nullable): periodic-task claims (SluiceBrokerPeriodic). */
  const SluiceBrokerPeriodic *periodic;
  /** joins: (nullable): workflows and batches (SluiceBrokerJoins). */
  const SluiceBrokerJoins *joins;
  /** events: (nullable): the event stream and task progress
   * (SluiceBrokerEvents). */
  const SluiceBrokerEvents *events;
  /** rates: (nullable): rate-limit buckets (SluiceBrokerRates). */
  const SluiceBrokerRates *rates;
  /** slots: (nullable): concurrency slots (SluiceBrokerSlots). */
  const SluiceBrokerSlots *slots;
  /** unique: (nullable): uniqueness claims (SluiceBrokerUnique). */
  const SluiceBrokerUnique *unique;

  /* Fields above are valid for version 1 */
};

/* ---- Optional families -------------------------------------------------
 *
 * A family a broker may leave out is a table of its own: a const struct
 * (usually static) whose first field is its version, pointed at by the
 * class or NULL. A table is absent or complete: every slot of it is
 * required, and sluice_broker_new() refuses a table with a NULL slot
 * (SLUICE_BROKER_ERROR_INCOMPLETE, naming "table.slot") and one whose
 * version is 0 or newer than this Sluice knows (_VERSION). Each table says
 * below what the core does when the class holds NULL. The core and users
 * ask whether a broker has a family with sluice_broker_supports(), never
 * by reading the class.
 */

/**
 * SluiceBrokerSteering:
 *
 * Seeing and steering queued and scheduled tasks (SLUICE_BROKER_FEATURE_STEERING):
 * what `sluice ls`, `sluice queue pause` and the dashboard use. If NULL:
 * listing, pausing, moving a scheduled task and purging fail with
 * SLUICE_BROKER_ERROR_UNSUPPORTED, and no queue is ever paused (workers
 * read an empty list of pauses).
 */
#define SLUICE_BROKER_STEERING_VERSION 2

struct _SluiceBrokerSteering {
  /** version: SLUICE_BROKER_STEERING_VERSION at the time the broker was built; > 0. */
  guint32 version;

  /**
   * list_queued:
   * Appends to @out (SluiceListedMessage, transfer full) up to @limit
   * ready messages of @queue, in the order `fetch` would take them (with
   * SLUICE_BROKER_CAP_ORDERED; else in an order of the broker's),
   * without taking them: a delivered message not settled yet is not
   * listed, a released one is (where its release put it). Starts after
   * @cursor (NULL: at the next message a fetch takes) and sets
   * @out_cursor (transfer full) to where the next page starts, or to NULL
   * when the queue was listed to its end. Cursors are the broker's own
   * strings. When nothing changes meanwhile, pages from NULL to NULL list
   * every ready message exactly once; while messages are fetched or
   * released meanwhile, a broker whose cursor is a position may skip or
   * repeat some (it says so where it documents its cursor). Costs
   * O(@limit) (plus what finding @cursor costs the store), never a scan of
   * the queue, and never blocks a consumer. Changes nothing.
   */
  gboolean (*list_queued)(SluiceBroker *self, const gchar *queue,
                          const gchar *cursor, guint limit, GPtrArray *out,
                          gchar **out_cursor, GError **error);
  /**
   * remove_queued:
   * For each item (SluiceRemoval), atomically per item: if the message
   * that `list_queued` listed in @queue with @handle (or, for a broker
   * whose listings have no handle, the first ready message of @queue
   * with exactly @payload, counted from where `fetch` takes) is still
   * ready there, removes it from the queue and, with @record, writes
   * @record under @id as a final record (waking `wait_record`, as
   * `put_record` does), and sets @removed. A message handed out by a
   * fetch since it was listed (running, prefetched, released as a new
   * copy) is not ready: nothing is changed for it and @removed is
   * cleared; the core then revokes it instead. The core decides which
   * messages go (it reads their ids from the payloads); the broker only
   * carries the removal out. Items in the order `list_queued` listed
   * them cost O(1) each (a purge removes page after page from the head);
   * one item costs at most what finding its message costs the store.
   * Safe to repeat: a removed message is not ready any more.
   */
  gboolean (*remove_queued)(SluiceBroker *self, SluiceRemoval *items,
                            guint n_items, GError **error);
  /**
   * list_scheduled:
   * Appends to @out (SluiceListedMessage, transfer full, @id and @due_at
   * set) up to @limit entries of the schedule, earliest due first (entries
   * due at the same time in a stable order of the broker's), starting after
   * @cursor (NULL: the earliest), and sets @out_cursor as `list_queued`
   * does. Every queue's entries are listed: the core filters by queue and
   * tells a delay from a retry by the envelope's attempt. Costs O(log n +
   * @limit). Changes nothing.
   */
  gboolean (*list_scheduled)(SluiceBroker *self, const gchar *cursor,
                             guint limit, GPtrArray *out, gchar **out_cursor,
                             GError **error);
  /**
   * set_paused:
   * Records that @queue is paused (@paused) or not, where every client and
   * worker of the store sees it, for good (it outlives the workers).
   * Pausing a paused queue, or resuming one that is not, changes nothing.
   * Producers still enqueue. Once it returns, `fetch` takes nothing of a
   * paused queue (see there), on every consumer of the store; the workers
   * also read `list_paused`, to leave the queue out of their fetches and
   * give back what they fetched before and have not started. A resume
   * wakes a blocked `fetch` where the store can (the queue's messages are
   * ready again); otherwise its next fetch takes them.
   */
  gboolean (*set_paused)(SluiceBroker *self, const gchar *queue,
                         gboolean paused, GError **error);
  /**
   * list_paused:
   * Appends to @out (gchar *, transfer full) the name of every paused
   * queue. Workers call it about once a second.
   */
  gboolean (*list_paused)(SluiceBroker *self, GPtrArray *out, GError **error);
  /**
   * reschedule:
   * If @id is on the schedule, in one atomic step: with @due_at 0, takes it
   * off and appends its message to its queue, ready at once (as
   * `promote_due` would, so a blocked `fetch` takes it); with @due_at > 0,
   * makes it due then instead. Sets @out_found; if @id is not scheduled,
   * changes nothing. The message's bytes are untouched.
   */
  gboolean (*reschedule)(SluiceBroker *self, const gchar *id, gint64 due_at,
                         gboolean *out_found, GError **error);
  /**
   * purge:
   * Deletes every ready message of @queue; sets @out_removed.
   */
  gboolean (*purge)(SluiceBroker *self, const gchar *queue,
                    guint64 *out_removed, GError **error);

  /* Slots above are valid for version 1 */

  /**
   * replace_payloads: (since version 2)
   * For each item (SluiceReplacement), atomically per item: if the message
   * the item names is still where it was listed, with exactly @payload,
   * replaces its bytes by @replacement and sets @replaced; otherwise (it
   * was fetched, promoted, replayed, deleted or changed since) changes
   * nothing and clears @replaced. Everything else about the message stays:
   * its queue, its due time, a dead letter's reason, detail, deliveries and
   * time, and its place in the order `fetch` takes (a store whose entries
   * cannot change in place, such as a Redis stream, may add the message
   * again at the end of its queue; it says so where it documents its
   * layout). A broker never reads the bytes: the core decided them (it
   * seals waiting messages again under a keyring's new key,
   * sluice_client_reseal()), and @replacement keeps @payload's task id,
   * name and queue. Safe to repeat. A broker built against version 1 of
   * this table has no such slot: the core then reports the operation
   * unsupported.
   */
  gboolean (*replace_payloads)(SluiceBroker *self, SluiceReplacement *items,
                               guint n_items, GError **error);

  /* Slots above are valid for version 2 */
};

/**
 * SluiceBrokerPeriodic:
 *
 * Periodic-task claims (SLUICE_BROKER_FEATURE_PERIODIC). If NULL, periodic
 * tasks cannot run on the broker: sluice_worker_add_periodic() fails with
 * SLUICE_WORKER_ERROR_UNSUPPORTED, and the slots with UNSUPPORTED.
 */
#define SLUICE_BROKER_PERIODIC_VERSION 1

struct _SluiceBrokerPeriodic {
  /** version: SLUICE_BROKER_PERIODIC_VERSION at the time the broker was built; > 0. */
  guint32 version;

  /**
   * claim_periodic:
   * A compare-and-set plus an enqueue, in one atomic step: if the last
   * occurrence recorded for @name is older than @occurrence_at (or there is
   * none), record @occurrence_at and submit @item, and set @out_claimed;
   * otherwise write nothing and clear @out_claimed. So any number of
   * schedulers dispatch each occurrence at most once, and never one older
   * than the newest dispatched.
   */
  gboolean (*claim_periodic)(SluiceBroker *self, const gchar *name,
                             gint64 occurrence_at, SluiceSubmit *item,
                             gboolean *out_claimed, GError **error);
  /**
   * last_periodic:
   * Sets @out_last to the last occurrence recorded for @name, or 0.
   */
  gboolean (*last_periodic)(SluiceBroker *self, const gchar *name,
                            gint64 *out_last, GError **error);

  /* Slots above are valid for version 1 */
};

/**
 * SluiceBrokerJoins:
 *
 * The joins that workflows (groups, chains, chords) and batches are built
 * of (SLUICE_BROKER_FEATURE_JOINS). If NULL, enqueueing a workflow or a
 * batch fails with SLUICE_BROKER_ERROR_UNSUPPORTED; everything else works.
 */
#define SLUICE_BROKER_JOINS_VERSION 1

struct _SluiceBrokerJoins {
  /** version: SLUICE_BROKER_JOINS_VERSION at the time the broker was built; > 0. */
  guint32 version;

  /**
   * join_open:
   * In ONE atomic step, for the whole call: opens every join of @joins
   * (storing its total, release items and meta, for its @ttl_ms) and
   * submits every item of @items as `enqueue` would (ready or scheduled,
   * with its record; @dedup_ttl_ms is 0). Either all of it is written or
   * nothing is, so a workflow never starts half-enqueued. If the join
   * @joins[0].id exists already, the call is a repeat of one whose reply
   * was lost: it writes nothing and sets @out_existed.
   */
  gboolean (*join_open)(SluiceBroker *self, const SluiceJoinSpec *joins,
                        guint n_joins, SluiceSubmit *items, guint n_items,
                        gboolean *out_existed, GError **error);
  /**
   * join_arrive:
   * Carries out each arrival (SluiceJoinArrival), each in one atomic step:
   * if its join exists and its member has not arrived, store the outcome
   * and count the member (@counted); then, if the join is still open: with
   * SLUICE_JOIN_ABANDON mark it abandoned; otherwise, if every member has
   * arrived or the step is SLUICE_JOIN_RELEASE_NOW, submit its release
   * items and mark it released (@released), in the same step. A member
   * that arrived already changes nothing, whatever its step: a retried,
   * redelivered or replayed member is counted once, and a join is
   * released at most once. The core calls it before it settles the
   * member's delivery, so a crash between the two is harmless: the
   * redelivered member arrives again and is not counted twice. Returns
   * FALSE only when the store failed; the caller repeats the same
   * arrivals.
   */
  gboolean (*join_arrive)(SluiceBroker *self, SluiceJoinArrival *items,
                          guint n_items, GError **error);
  /**
   * join_read:
   * Fills @out (zeroed by the caller): the join's total, arrived count,
   * status and meta, and with @with_outcomes its outcomes in member order
   * (see SluiceJoinState). Sets @out_found; a join that does not exist
   * (never opened, or expired) leaves @out zeroed. Changes nothing.
   */
  gboolean (*join_read)(SluiceBroker *self, const gchar *join_id,
                        gboolean with_outcomes, SluiceJoinState *out,
                        gboolean *out_found, GError **error);
  /**
   * join_grow:
   * In one atomic step, a compare-and-set: if join @join_id exists, is
   * still open and expects exactly @expected_total members, it expects
   * @by more (members @expected_total .. @expected_total + @by - 1) and
   * @items are submitted (as join_open submits); *@out_total is then the
   * new total. Otherwise nothing is written and *@out_total is its total
   * now (so the caller rebuilds its items for it and tries again), or 0
   * when the join does not exist or is no longer open.
   */
  gboolean (*join_grow)(SluiceBroker *self, const gchar *join_id,
                        guint expected_total, guint by, SluiceSubmit *items,
                        guint n_items, guint *out_total, GError **error);

  /* Slots above are valid for version 1 */
};

/**
 * SluiceBrokerEvents:
 *
 * The namespace's event stream and each task's last progress report
 * (SLUICE_BROKER_FEATURE_EVENTS). If NULL, events and progress reports are
 * dropped where they are written (append_events and put_progress succeed
 * and keep nothing), and reading them fails with UNSUPPORTED.
 */
#define SLUICE_BROKER_EVENTS_VERSION 1

struct _SluiceBrokerEvents {
  /** version: SLUICE_BROKER_EVENTS_VERSION at the time the broker was built; > 0. */
  guint32 version;

  /**
   * append_events:
   * Appends @n events (opaque bytes, the core's) to the namespace's one
   * event stream, in this order, each after every event appended before
   * it; then drops the oldest events beyond @max_len, and those appended
   * more than @max_age_ms before @now_ms (the caller's clock; a broker
   * whose stream is stamped by its store's own time compares with that,
   * and says so). The trim may be approximate (a few more may stay) but
   * never drops an event younger or newer than both bounds. Not atomic
   * with anything else: events are a log of what happened, written after
   * it, and may be lost with a crash between the two. Wakes every
   * blocked `read_events`.
   */
  gboolean (*append_events)(SluiceBroker *self, GBytes *const *events, guint n,
                            guint max_len, gint64 max_age_ms, gint64 now_ms,
                            GError **error);
  /**
   * read_events:
   * Appends to @out (SluiceEventEntry, transfer full) up to @limit events
   * appended after @cursor (NULL: from the oldest one kept), oldest first,
   * and sets @out_cursor (transfer full) to the last one's cursor, or to a
   * copy of @cursor when there were none. Cursors are the broker's own
   * strings and only grow. A @cursor that is not in the broker's cursor
   * syntax fails with SLUICE_BROKER_ERROR_INVALID, as should one ahead of
   * every event appended, where the broker can tell (a Redis stream
   * trimmed empty cannot; sluice_broker_parse_events_cursor() parses a
   * cursor that is a sequence number). While there are none, blocks up to
   * @block_ms (0 = do not block) for one to be appended; it may return
   * early with none. Changes nothing.
   */
  gboolean (*read_events)(SluiceBroker *self, const gchar *cursor, guint limit,
                          gint64 block_ms, GPtrArray *out, gchar **out_cursor,
                          GError **error);
  /**
   * put_progress:
   * Stores @progress (opaque bytes, the core's) as task @id's progress
   * for @ttl_ms, replacing what was there. Not atomic with anything else;
   * safe to repeat. Called from a task's thread, at most a few times a
   * second per task (the core throttles).
   */
  gboolean (*put_progress)(SluiceBroker *self, const gchar *id,
                           GBytes *progress, gint64 ttl_ms, GError **error);
  /**
   * get_progress:
   * Sets @out_progress (transfer full) to task @id's progress, or NULL
   * when there is none or it lapsed. Changes nothing.
   */
  gboolean (*get_progress)(SluiceBroker *self, const gchar *id,
                           GBytes **out_progress, GError **error);

  /* Slots above are valid for version 1 */
};

/**
 * SluiceBrokerRates:
 *
 * Rate-limit buckets (SLUICE_BROKER_FEATURE_RATES), a table apart from
 * concurrency slots because a broker may keep one and not the other (a
 * partitioned Redis namespace keeps buckets, not slots). If NULL, rate
 * limits cannot be used on the broker: a worker whose tasks or queues have
 * one refuses to start (SLUICE_WORKER_ERROR_UNSUPPORTED), and nothing else
 * changes.
 */
#define SLUICE_BROKER_RATES_VERSION 1

struct _SluiceBrokerRates {
  /** version: SLUICE_BROKER_RATES_VERSION at the time the broker was built; > 0. */
  guint32 version;

  /**
   * rate_acquire:
   * For each item, atomically per item, runs the generic cell rate
   * algorithm on the bucket @key, whose only state is its theoretical
   * arrival time TAT (microseconds; none = long past), on the store's
   * clock: the SluiceClock of a broker with CLOCK_TTL, else the store's
   * own time (Redis TIME inside the script), and never a worker's. With
   * now = that time and tat = MAX (TAT, now):
   *  - @block_ms 0: if tat - @tolerance_us <= now, store TAT = tat +
   *    @interval_us and grant; otherwise store nothing, and set @wait_ms
   *    to tat - @tolerance_us - now, rounded up to whole ms;
   *  - @block_ms > 0: store TAT = MAX (tat, now + @block_ms * 1000 +
   *    @tolerance_us), grant nothing, set @wait_ms to @block_ms.
   * Sets @now_ms in every case. A bucket's state may be dropped once its
   * TAT is past (it then admits as a new one would). The core decides
   * what to do with a message that was not granted (it reschedules it,
   * unchanged but for its due time): the broker only keeps the buckets.
   * Repeating a call after a lost reply may use up one admission more;
   * that errs toward fewer runs, never more. sluice_broker_gcra_step()
   * computes one item's step, for a broker that reads and writes the
   * bucket itself.
   */
  gboolean (*rate_acquire)(SluiceBroker *self, SluiceRateAcquire *items,
                           guint n_items, GError **error);

  /* Slots above are valid for version 1 */
};

/**
 * SluiceBrokerSlots:
 *
 * Concurrency slots (SLUICE_BROKER_FEATURE_SLOTS). If NULL, concurrency
 * limits cannot be used on the broker: a worker whose tasks or queues have
 * one refuses to start (SLUICE_WORKER_ERROR_UNSUPPORTED), and nobody can
 * list slot holders (UNSUPPORTED).
 */
#define SLUICE_BROKER_SLOTS_VERSION 1

struct _SluiceBrokerSlots {
  /** version: SLUICE_BROKER_SLOTS_VERSION at the time the broker was built; > 0. */
  guint32 version;

  /**
   * slot_acquire:
   * For each item, atomically per item: forgets the holders of @key whose
   * lease has lapsed (on a time every process shares: the server's, or the
   * real time; the broker's SluiceClock for a broker without SHARED); if
   * @holder holds a slot of @key already, extends its lease to @lease_ms
   * from now and grants; else if fewer than @max hold one, adds @holder
   * with that lease and grants; else grants nothing and, with @waiter set,
   * adds @waiter to the key's waiting list (oldest first; once). A granted
   * @waiter is taken off the list. The core renews what its running
   * messages hold with this slot, once a third of a lease.
   */
  gboolean (*slot_acquire)(SluiceBroker *self, SluiceSlotAcquire *items,
                           guint n_items, GError **error);
  /**
   * slot_release:
   * For each item, atomically per item: removes @holder from @key (nothing
   * if it holds none), then wakes the oldest waiter of @key that is on the
   * schedule: takes it off the schedule and appends its message to its
   * queue, ready at once (as `reschedule` to 0 does), off the list. A
   * waiter not on the schedule (its settlement not written yet) stays on
   * the list for the next release, unless it was added a minute ago or
   * more (it ran, or was deleted). Sets @woke.
   */
  gboolean (*slot_release)(SluiceBroker *self, SluiceSlotRelease *items,
                           guint n_items, GError **error);
  /**
   * list_slots:
   * Appends to @out (SluiceSlotState, transfer full) up to @limit keys
   * that have a live holder or a waiter, each with its live holders and
   * how many wait, in no particular order. For operators: it may scan the
   * store's keys (never blocking a consumer for long), and changes nothing.
   */
  gboolean (*list_slots)(SluiceBroker *self, guint limit, GPtrArray *out,
                         GError **error);

  /* Slots above are valid for version 1 */
};

/**
 * SluiceBrokerUnique:
 *
 * Uniqueness claims (SLUICE_BROKER_FEATURE_UNIQUE). If NULL, enqueueing
 * with a uniqueness key fails with SLUICE_BROKER_ERROR_UNSUPPORTED and
 * writes nothing; everything else works.
 */
#define SLUICE_BROKER_UNIQUE_VERSION 1

struct _SluiceBrokerUnique {
  /** version: SLUICE_BROKER_UNIQUE_VERSION at the time the broker was built; > 0. */
  guint32 version;

  /**
   * unique_enqueue:
   * For each item, in ONE atomic step per item, with the claim on @key
   * (a holder id, waiting or running, and an expiry on the store's clock:
   * the SluiceClock of a broker with CLOCK_TTL, else the store's time):
   *  - no live claim: make @submit.id hold @key, waiting, for
   *    @claim_ttl_ms, and submit @submit as `enqueue` does;
   *  - a live waiting claim and @replace: if its holder is on the schedule,
   *    take it off (its message is gone); make @submit.id hold @key as
   *    above, submit @submit, set @replaced and @holder. A holder that is
   *    already in its queue stays there: the core skips it when it starts
   *    (its `unique_update` answers @superseded);
   *  - otherwise: write nothing, set @existed and @holder.
   * A submit whose @dedup_ttl_ms finds its id claimed writes nothing and
   * sets @submit.existed, as `enqueue` does. Safe to repeat after a lost
   * reply: the repeat finds its own id holding the key and answers
   * @existed with @holder = its own id, which the core reads as done.
   */
  gboolean (*unique_enqueue)(SluiceBroker *self, SluiceUniqueSubmit *items,
                             guint n_items, GError **error);
  /**
   * unique_update:
   * Carries out each item (see SluiceUniqueAction), atomically per item,
   * on the same clock, and sets @superseded. The core calls it when a
   * unique message starts (CHECK, START or HOLD), with its heartbeat
   * (HOLD, so a crashed worker's "while running" claim lapses after one
   * lease), and after its settlement (WAIT for a retry, RELEASE when it
   * finished). Safe to repeat.
   */
  gboolean (*unique_update)(SluiceBroker *self, SluiceUniqueUpdate *items,
                            guint n_items, GError **error);

  /* Slots above are valid for version 1 */
};

/* ---- For broker authors: construction ----------------------------------- */

/**
 * sluice_broker_new:
 * @klass: (transfer none): the class; the core copies it and every table
 *   it points at, so they may be built at run time and need outlive
 *   nothing, unless the broker is to be recognised by sluice_broker_is_a()
 * @clock: (nullable) (transfer none): the clock; NULL means a real clock
 *
 * Validates @klass and its tables, in one loop over a description of the
 * contract (lib/broker.c): the class's and each table's version, the
 * instance size, every required slot, every slot of each table present,
 * and the slots a capability needs (`heartbeat` and `reclaim` with
 * LEASES; `count_reclaimable` only with LEASES). Then allocates an
 * instance of klass->instance_size zeroed bytes with the base initialised.
 * Returns: (transfer full): the instance, or NULL and
 * SLUICE_BROKER_ERROR_VERSION / _INCOMPLETE (naming the slot, as
 * "steering.purge") / _INVALID.
 */
SLUICE_BROKER_API
SluiceBroker *sluice_broker_new(const SluiceBrokerClass *klass,
                                SluiceClock *clock, GError **error);

/**
 * sluice_broker_is_a:
 * @klass: (transfer none): a class as passed to sluice_broker_new()
 *
 * How a broker (or a composite over brokers) recognises instances of its
 * own class: compares the class pointer @broker was made with, never its
 * contents or a slot. For it to work the class must live as long as its
 * brokers (a static one, or one kept for the process).
 * Returns: TRUE when @broker was made by sluice_broker_new (@klass, ...).
 */
SLUICE_BROKER_API
gboolean sluice_broker_is_a(SluiceBroker *broker,
                            const SluiceBrokerClass *klass);

/**
 * sluice_delivery_new:
 * @queue: (transfer none): copied
 * @payload: (transfer none): referenced
 * @handle: (nullable) (transfer none): copied
 * @delivery_count: >= 1
 * Returns: (transfer full)
 */
SLUICE_BROKER_API
SluiceDelivery *sluice_delivery_new(const gchar *queue, GBytes *payload,
                                    const gchar *handle, guint delivery_count);

/** sluice_delivery_free: frees @delivery and its broker data. NULL-safe. */
SLUICE_BROKER_API
void sluice_delivery_free(SluiceDelivery *delivery);

/** sluice_revocation_new: Returns: (transfer full); copies @id. */
SLUICE_BROKER_API
SluiceRevocation *sluice_revocation_new(const gchar *id, gint64 expires_at);

/** sluice_revocation_free: NULL-safe. */
SLUICE_BROKER_API
void sluice_revocation_free(SluiceRevocation *revocation);

/** sluice_task_location_clear: frees what @location holds and zeroes it. */
SLUICE_BROKER_API
void sluice_task_location_clear(SluiceTaskLocation *location);

/**
 * sluice_listed_message_new:
 * @id: (nullable) (transfer none): copied
 * @queue: (transfer none): copied
 * @payload: (transfer none): referenced
 * @due_at: 0 for a ready message
 * Returns: (transfer full)
 */
SLUICE_BROKER_API
SluiceListedMessage *sluice_listed_message_new(const gchar *id,
                                               const gchar *queue,
                                               GBytes *payload, gint64 due_at);

/**
 * sluice_listed_message_set_handle:
 * @handle: (nullable) (transfer none): copied; replaces the message's
 *   handle (see SluiceListedMessage)
 */
SLUICE_BROKER_API
void sluice_listed_message_set_handle(SluiceListedMessage *message,
                                      const gchar *handle);

/** sluice_listed_message_free: NULL-safe. */
SLUICE_BROKER_API
void sluice_listed_message_free(SluiceListedMessage *message);

/**
 * sluice_event_entry_new:
 * @cursor: (transfer none): copied
 * @event: (transfer none): referenced
 * Returns: (transfer full): one entry of `read_events`
 */
SLUICE_BROKER_API
SluiceEventEntry *sluice_event_entry_new(const gchar *cursor, GBytes *event);
/** sluice_event_entry_free: NULL-safe. */
SLUICE_BROKER_API
void sluice_event_entry_free(SluiceEventEntry *entry);

/** sluice_join_state_clear: frees what @state holds and zeroes it. */
SLUICE_BROKER_API
void sluice_join_state_clear(SluiceJoinState *state);

/* ---- For broker authors: logging ---------------------------------------- */

/**
 * sluice_broker_log:
 * @broker: (nullable) (transfer none): the broker the line is about; NULL
 *   where none is at hand (a connection pool shared by a broker's slots)
 * @level: one GLogLevelFlags level; G_LOG_LEVEL_ERROR is not allowed (it
 *   aborts, and a broker never aborts on what it meets outside)
 * @format: printf() format of the message, then its arguments
 *
 * Logs one structured line, as the core's own lines are: through
 * g_log_structured_array() in the log domain "sluice", with the fields
 * MESSAGE, PRIORITY (syslog's number for @level) and, when @broker is
 * given, SLUICE_BROKER (its class name), so a journal can be filtered by
 * broker (`journalctl SLUICE_BROKER=redis-reliable`). It goes to whatever
 * writer the application installed (g_log_set_writer_func()).
 *
 * Use it for what only the broker can see and the user must hear about (a
 * store configured to lose data, entries found deleted); report failures of
 * a slot through its GError instead. Safe from any thread.
 */
SLUICE_BROKER_API
void sluice_broker_log(SluiceBroker *broker, GLogLevelFlags level,
                       const gchar *format, ...) G_GNUC_PRINTF(3, 4);

/**
 * sluice_broker_escape_text:
 * @bytes: (nullable): outside bytes (a key, a server's reply, a URL)
 * @length: their length, or -1 if NUL-terminated
 * @max_bytes: show at most this many bytes (cut at a character, then
 *   "…"); 0 = all
 *
 * What a broker quotes in an error message or a log line: printable UTF-8
 * is kept; control characters become \n, \t, \xNN or \uNNNN, and every
 * byte that is not part of valid UTF-8 becomes \xNN, so a message is safe
 * on a terminal and in JSON whatever the store sent.
 * Returns: (transfer full): valid UTF-8 without control characters.
 */
SLUICE_BROKER_API
gchar *sluice_broker_escape_text(const gchar *bytes, gssize length,
                                 gsize max_bytes);

/* ---- The one dispatch point per slot ------------------------------------
 *
 * The core calls a broker only through these, and so does a broker made
 * of other brokers (a composite: examples/custom-broker/trace-broker.c, the
 * partitioned Redis broker). Each checks its arguments
 * (g_return_val_if_fail), applies the slot's fallback when the slot or its
 * table is NULL (UNSUPPORTED where a table says so), and checks the GError
 * rule: FALSE exactly when @error is set. A broker that breaks the rule is
 * reported with g_critical(). Tests of a broker may call them directly.
 */

SLUICE_BROKER_API
gboolean sluice_broker_enqueue(SluiceBroker *broker, SluiceSubmit *items,
                               guint n_items, GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_fetch(SluiceBroker *broker, const gchar *consumer,
                             const gchar *const *queues, guint max,
                             gint64 block_ms, GPtrArray *out, GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_settle(SluiceBroker *broker, const gchar *consumer,
                              SluiceSettlement *items, guint n_items,
                              GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_heartbeat(SluiceBroker *broker, const gchar *consumer,
                                 gint64 lease_ms, SluiceDelivery *const *held,
                                 guint n_held, GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_reclaim(SluiceBroker *broker, const gchar *consumer,
                               const gchar *const *queues, guint max,
                               gint64 idle_ms, GPtrArray *out, GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_leave(SluiceBroker *broker, const gchar *consumer,
                             GError **error);
SLUICE_BROKER_API
void sluice_broker_wakeup(SluiceBroker *broker);
SLUICE_BROKER_API
gboolean sluice_broker_promote_due(SluiceBroker *broker, gint64 now_ms,
                                   guint max, guint *out_promoted,
                                   gint64 *out_next_due, GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_cancel_scheduled(SluiceBroker *broker, const gchar *id,
                                        GBytes *record, gint64 record_ttl_ms,
                                        gboolean *out_removed, GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_get_record(SluiceBroker *broker, const gchar *id,
                                  GBytes **out_record, GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_put_record(SluiceBroker *broker, const gchar *id,
                                  GBytes *record, gboolean final, gint64 ttl_ms,
                                  GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_put_records(SluiceBroker *broker,
                                   const SluiceRecordWrite *items, guint n,
                                   GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_wait_record(SluiceBroker *broker, const gchar *id,
                                   gint64 timeout_ms, GBytes **out_record,
                                   GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_revoke(SluiceBroker *broker, const gchar *id,
                              gint64 expires_at, GError **error);
/* @inout_cursor: in, the caller's cursor (0 at first); out, the next one. */
SLUICE_BROKER_API
gboolean sluice_broker_list_revocations(SluiceBroker *broker,
                                        gint64 *inout_cursor, gint64 now_ms,
                                        GPtrArray *out, GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_claim_periodic(SluiceBroker *broker, const gchar *name,
                                      gint64 occurrence_at, SluiceSubmit *item,
                                      gboolean *out_claimed, GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_last_periodic(SluiceBroker *broker, const gchar *name,
                                     gint64 *out_last, GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_dlq_list(SluiceBroker *broker, const gchar *after,
                                guint limit, GPtrArray *out, GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_dlq_get(SluiceBroker *broker, const gchar *entry_id,
                               SluiceDeadLetter **out_entry, GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_dlq_replay(SluiceBroker *broker, const gchar *entry_id,
                                  SluiceSubmit *item, gboolean *out_found,
                                  GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_dlq_delete(SluiceBroker *broker, const gchar *entry_id,
                                  gboolean *out_found, GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_stats(SluiceBroker *broker, const gchar *const *queues,
                             SluiceBrokerStats *out, GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_purge(SluiceBroker *broker, const gchar *queue,
                             guint64 *out_removed, GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_check(SluiceBroker *broker, GError **error);
/* Returns FALSE with UNSUPPORTED when the slot is NULL. */
SLUICE_BROKER_API
gboolean sluice_broker_count_reclaimable(SluiceBroker *broker,
                                         const gchar *consumer,
                                         const gchar *const *queues, guint max,
                                         gint64 idle_ms, guint *out_n,
                                         GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_lookup_task(SluiceBroker *broker, const gchar *id,
                                   SluiceTaskLocation *out, GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_announce(SluiceBroker *broker, const gchar *consumer,
                                GBytes *info, gint64 ttl_ms, GError **error);
/* The listing slots: @out_cursor (transfer full) is set to NULL at the
 * end; UNSUPPORTED when its table is NULL. */
SLUICE_BROKER_API
gboolean sluice_broker_list_queued(SluiceBroker *broker, const gchar *queue,
                                   const gchar *cursor, guint limit,
                                   GPtrArray *out, gchar **out_cursor,
                                   GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_list_scheduled(SluiceBroker *broker, const gchar *cursor,
                                      guint limit, GPtrArray *out,
                                      gchar **out_cursor, GError **error);
/* UNSUPPORTED when its table is NULL. */
SLUICE_BROKER_API
gboolean sluice_broker_set_paused(SluiceBroker *broker, const gchar *queue,
                                  gboolean paused, GError **error);
/* Without its table: TRUE, nothing added (no queue is paused). */
SLUICE_BROKER_API
gboolean sluice_broker_list_paused(SluiceBroker *broker, GPtrArray *out,
                                   GError **error);
/* UNSUPPORTED when its table is NULL. */
SLUICE_BROKER_API
gboolean sluice_broker_slot_acquire(SluiceBroker *broker,
                                    SluiceSlotAcquire *items, guint n_items,
                                    GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_slot_release(SluiceBroker *broker,
                                    SluiceSlotRelease *items, guint n_items,
                                    GError **error);
/* UNSUPPORTED when its table is NULL. */
SLUICE_BROKER_API
gboolean sluice_broker_list_slots(SluiceBroker *broker, guint limit,
                                  GPtrArray *out, GError **error);
/* UNSUPPORTED when its table is NULL; the out fields are reset first. */
SLUICE_BROKER_API
gboolean sluice_broker_unique_enqueue(SluiceBroker *broker,
                                      SluiceUniqueSubmit *items, guint n_items,
                                      GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_unique_update(SluiceBroker *broker,
                                     SluiceUniqueUpdate *items, guint n_items,
                                     GError **error);
/* UNSUPPORTED when its table is NULL; checks each item's figures. */
SLUICE_BROKER_API
gboolean sluice_broker_rate_acquire(SluiceBroker *broker,
                                    SluiceRateAcquire *items, guint n_items,
                                    GError **error);
/* UNSUPPORTED when its table is NULL. */
SLUICE_BROKER_API
gboolean sluice_broker_reschedule(SluiceBroker *broker, const gchar *id,
                                  gint64 due_at, gboolean *out_found,
                                  GError **error);
/* UNSUPPORTED when the slot is NULL; each item's @removed is cleared
 * first. */
SLUICE_BROKER_API
gboolean sluice_broker_remove_queued(SluiceBroker *broker, SluiceRemoval *items,
                                     guint n_items, GError **error);
/* UNSUPPORTED when the slot is NULL (a steering table of version 1);
 * each item's @replaced is cleared first. */
SLUICE_BROKER_API
gboolean sluice_broker_replace_payloads(SluiceBroker *broker,
                                        SluiceReplacement *items, guint n_items,
                                        GError **error);

/* UNSUPPORTED when its table is NULL. */
SLUICE_BROKER_API
gboolean sluice_broker_join_grow(SluiceBroker *broker, const gchar *join_id,
                                 guint expected_total, guint by,
                                 SluiceSubmit *items, guint n_items,
                                 guint *out_total, GError **error);
/* Without its table: TRUE, nothing stored. */
SLUICE_BROKER_API
gboolean sluice_broker_put_progress(SluiceBroker *broker, const gchar *id,
                                    GBytes *progress, gint64 ttl_ms,
                                    GError **error);
/* UNSUPPORTED when its table is NULL. */
SLUICE_BROKER_API
gboolean sluice_broker_get_progress(SluiceBroker *broker, const gchar *id,
                                    GBytes **out_progress, GError **error);
/* Without its table: TRUE, nothing kept. */
SLUICE_BROKER_API
gboolean sluice_broker_append_events(SluiceBroker *broker,
                                     GBytes *const *events, guint n,
                                     guint max_len, gint64 max_age_ms,
                                     gint64 now_ms, GError **error);
/* UNSUPPORTED when its table is NULL; @out_cursor (transfer full). */
SLUICE_BROKER_API
gboolean sluice_broker_read_events(SluiceBroker *broker, const gchar *cursor,
                                   guint limit, gint64 block_ms, GPtrArray *out,
                                   gchar **out_cursor, GError **error);
/* The join slots: UNSUPPORTED without the joins table. */
SLUICE_BROKER_API
gboolean sluice_broker_join_open(SluiceBroker *broker,
                                 const SluiceJoinSpec *joins, guint n_joins,
                                 SluiceSubmit *items, guint n_items,
                                 gboolean *out_existed, GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_join_arrive(SluiceBroker *broker,
                                   SluiceJoinArrival *items, guint n_items,
                                   GError **error);
SLUICE_BROKER_API
gboolean sluice_broker_join_read(SluiceBroker *broker, const gchar *join_id,
                                 gboolean with_outcomes, SluiceJoinState *out,
                                 gboolean *out_found, GError **error);

G_END_DECLS

/* memory-store.h - the memory broker's state and the operations on it
 * (internal; the slots, one file per topic of the contract, are built
 * from these).
 *
 *   queues       name -> GQueue of SluiceMemoryMessage, FIFO; a released
 *                delivery goes back to the head so it is fetched next
 *   schedule     a GSequence ordered by (due time, insertion order) plus an
 *                index by task id, so cancel_scheduled is O(log n)
 *   records      id -> SluiceMemoryRecord (bytes, final flag, expiry on the
 *                clock)
 *   revocations  id -> (expiry, sequence number), listed by sequence so
 *                that a sync cursor never misses one (TTLs differ, and two
 *                revocations may share a millisecond)
 *   periodic     name -> last occurrence
 *   dedup        id -> expiry of the idempotency claim
 *   dead letters a GQueue, oldest first, capped at dead_letter_max (the
 *                drops counted by reason), indexed by task id
 *   workers      id -> what the worker announced, until it lapses
 *   paused       the names of the paused queues
 *   joins        id -> a workflow join (memory-joins.c): total, outcomes
 *                by member, release messages, status, expiry
 *   progress     id -> a task's last progress report, until it lapses
 *   events       the event stream: (seq, at, bytes), oldest first; the
 *                cursor is seq in decimal
 *   rates        rate-limit bucket -> its theoretical arrival time (us on
 *                the broker's clock); a bucket whose time is past is
 *                dropped when met and by the sweep
 *   slots        concurrency key -> holder -> lease expiry (ms of the
 *                broker's clock: one process shares it)
 *   waiters      concurrency key -> GQueue of SluiceMemoryWaiter, oldest
 *                first: task ids a release of the key wakes
 *
 * Expired entries are dropped when met and swept every few thousand
 * writes, so memory stays bounded by what is alive.
 *
 * Every function below is called with self->lock held, and keeps the
 * indexes true; a slot takes the lock once and calls as many as its one
 * atomic step needs.
 */
#pragma once

#include <sluice/sys/broker.h>

G_BEGIN_DECLS

typedef struct {
  GBytes *payload;
  guint delivery_count;
  guint64 seq; /* which ready message this is: its listing handle */
} SluiceMemoryMessage;

typedef struct {
  gchar *id;
  gchar *queue;
  GBytes *payload;
  gint64 due_at;
  guint64 seq;
} SluiceMemoryScheduled;

typedef struct {
  GBytes *bytes;
  gboolean final;
  gint64 expires_at;
} SluiceMemoryRecord;

typedef struct {
  gint64 expires_at;
  gint64 seq;
} SluiceMemoryRevocation;

typedef struct {
  GBytes *info;
  gint64 last_seen;
  gint64 expires_at;
} SluiceMemoryAnnounced;

typedef struct {
  SluiceBroker parent;

  GMutex lock;
  GCond ready;           /* a queue got a message, or wakeup() */
  GCond records_changed; /* a final record was written */
  guint dead_letter_max;
  guint64 wakeups; /* generation counter for wakeup() */

  GHashTable *queues;          /* gchar* -> GQueue* of SluiceMemoryMessage* */
  GSequence *schedule;         /* SluiceMemoryScheduled*, by (due_at, seq) */
  GHashTable *scheduled_by_id; /* borrowed id -> GSequenceIter* */
  guint64 schedule_seq;
  GHashTable *records;     /* gchar* -> SluiceMemoryRecord* */
  GHashTable *revocations; /* gchar* -> SluiceMemoryRevocation* */
  gint64 revocation_seq;
  GHashTable *periodic;     /* gchar* -> gint64* */
  GHashTable *dedup;        /* gchar* -> gint64* */
  GQueue *dead_letters;     /* SluiceDeadLetter*, oldest first */
  GHashTable *dead_by_task; /* borrowed task id -> GList* (newest entry) */
  guint64 dead_letter_seq;
  GHashTable *dropped; /* reason -> gint64*: dropped by the cap */
  GHashTable *workers; /* gchar* -> SluiceMemoryAnnounced* */
  GHashTable *paused;  /* gchar* set: the paused queues */
  GHashTable *rates;   /* gchar* bucket -> gint64* TAT (us) */
  GHashTable *slots;   /* gchar* key -> GHashTable* (holder -> gint64*) */
  GHashTable *waiters; /* gchar* key -> GQueue* of SluiceMemoryWaiter* */
  GHashTable *unique;  /* gchar* key -> its claim (memory-unique.c) */
  GHashTable *out;     /* handles of the deliveries not settled yet */
  guint64 delivery_seq;
  guint64 message_seq; /* the last ready message's seq */
  gint64 in_flight;
  guint writes_since_sweep;
  GHashTable *joins;    /* gchar* -> a join (memory-joins.c) */
  GHashTable *progress; /* gchar* -> SluiceMemoryRecord* (memory-events.c) */
  guint progress_sweep_at;
  GQueue *events;    /* (seq, at, bytes), oldest first (memory-events.c) */
  guint64 event_seq; /* the last event's */
  GCond events_appended;
} SluiceMemoryBroker;

/* The instance behind a slot's SluiceBroker. */
#define SLUICE_MEMORY_BROKER(broker) ((SluiceMemoryBroker *)(broker))

/** sluice_memory__init: sets up @self's lock, conditions and containers
 * (on the zero-filled instance sluice_broker_new() made). */
void sluice_memory__init(SluiceMemoryBroker *self, guint dead_letter_max);
/** sluice_memory__slot_acquire_one, sluice_memory__slot_release_one: one
 * item of `slot_acquire` or `slot_release` at @now (ms of the broker's
 * clock). */
void sluice_memory__slot_acquire_one(SluiceMemoryBroker *self,
                                     SluiceSlotAcquire *item, gint64 now);
void sluice_memory__slot_release_one(SluiceMemoryBroker *self,
                                     SluiceSlotRelease *item, gint64 now);
/** sluice_memory__rate_acquire_one: one item of `rate_acquire` at @now
 * (ms of the broker's clock). */
void sluice_memory__rate_acquire_one(SluiceMemoryBroker *self,
                                     SluiceRateAcquire *item, gint64 now);
/** sluice_memory__clear: frees what _init() made; copes with a
 * zero-filled instance. Not under the lock: nothing else runs. */
void sluice_memory__clear(SluiceMemoryBroker *self);

/** The broker clock's now (ms): every TTL and due time is on it. */
gint64 sluice_memory__now(SluiceMemoryBroker *self);
/** The schedule's order: (due time, insertion number). */
gint sluice_memory__scheduled_compare(gconstpointer a, gconstpointer b,
                                      gpointer user_data);
/** Returns: (transfer full): a gint64 holding @value, for the tables. */
gint64 *sluice_memory__new_time(gint64 value);
void sluice_memory__message_free(gpointer message);

/** Returns: (transfer none): queue @name, made empty if it is new. */
GQueue *sluice_memory__queue(SluiceMemoryBroker *self, const gchar *name);
/** Appends a ready message (delivery count 0, a new seq) and wakes a
 * fetcher. */
void sluice_memory__push_ready(SluiceMemoryBroker *self, const gchar *queue,
                               GBytes *payload);
/** Puts task @id on the schedule, replacing an entry it had (as ZADD
 * does on Redis). */
void sluice_memory__schedule(SluiceMemoryBroker *self, const gchar *id,
                             const gchar *queue, GBytes *payload,
                             gint64 due_at);
void sluice_memory__unschedule(SluiceMemoryBroker *self, const gchar *id);
/** Stores a record until @now + @ttl_ms; a final one wakes waiters. */
void sluice_memory__put_record(SluiceMemoryBroker *self, const gchar *id,
                               GBytes *bytes, gboolean final, gint64 ttl_ms,
                               gint64 now);
/** Returns: (transfer none) (nullable): @id's record unless it lapsed. */
SluiceMemoryRecord *sluice_memory__live_record(SluiceMemoryBroker *self,
                                               const gchar *id, gint64 now);
/** One submit, atomically: the idempotency claim, the write, the record
 * (sets item->existed when the claim was there). */
void sluice_memory__submit(SluiceMemoryBroker *self, SluiceSubmit *item,
                           gint64 now);
/** Adds a copy of @entry with a new entry id; Returns: how many old
 * entries the cap dropped to make room. */
guint sluice_memory__bury(SluiceMemoryBroker *self,
                          const SluiceDeadLetter *entry);
/** Unlinks and frees dead letter @l, keeping the task-id index true. */
void sluice_memory__unbury(SluiceMemoryBroker *self, GList *l);
/** Returns: (transfer none) (nullable): the link of entry @entry_id. */
GList *sluice_memory__find_dead_letter(SluiceMemoryBroker *self,
                                       const gchar *entry_id);

/* The slots, one file per topic of the contract; each takes the lock
 * itself. */

/* memory-queue.c */
gboolean sluice_memory__enqueue(SluiceBroker *broker, SluiceSubmit *items,
                                guint n_items, GError **error);
gboolean sluice_memory__fetch(SluiceBroker *broker, const gchar *consumer,
                              const gchar *const *queues, guint max,
                              gint64 block_ms, GPtrArray *out, GError **error);
gboolean sluice_memory__settle(SluiceBroker *broker, const gchar *consumer,
                               SluiceSettlement *items, guint n_items,
                               GError **error);
void sluice_memory__wakeup(SluiceBroker *broker);

/* memory-schedule.c */
gboolean sluice_memory__promote_due(SluiceBroker *broker, gint64 now, guint max,
                                    guint *out_promoted, gint64 *out_next_due,
                                    GError **error);
gboolean sluice_memory__cancel_scheduled(SluiceBroker *broker, const gchar *id,
                                         GBytes *record, gint64 record_ttl_ms,
                                         gboolean *out_removed, GError **error);

/* memory-records.c */
gboolean sluice_memory__get_record(SluiceBroker *broker, const gchar *id,
                                   GBytes **out_record, GError **error);
gboolean sluice_memory__put_record_slot(SluiceBroker *broker, const gchar *id,
                                        GBytes *record, gboolean final,
                                        gint64 ttl_ms, GError **error);
gboolean sluice_memory__wait_record(SluiceBroker *broker, const gchar *id,
                                    gint64 timeout_ms, GBytes **out_record,
                                    GError **error);
gboolean sluice_memory__lookup_task(SluiceBroker *broker, const gchar *id,
                                    SluiceTaskLocation *out, GError **error);

/* memory-revocations.c */
gboolean sluice_memory__revoke(SluiceBroker *broker, const gchar *id,
                               gint64 expires_at, GError **error);
gboolean sluice_memory__list_revocations(SluiceBroker *broker, gint64 cursor,
                                         gint64 now, GPtrArray *out,
                                         gint64 *out_cursor, GError **error);

/* memory-dead-letters.c */
gboolean sluice_memory__dlq_list(SluiceBroker *broker, const gchar *after,
                                 guint limit, GPtrArray *out, GError **error);
gboolean sluice_memory__dlq_get(SluiceBroker *broker, const gchar *entry_id,
                                SluiceDeadLetter **out_entry, GError **error);
gboolean sluice_memory__dlq_replay(SluiceBroker *broker, const gchar *entry_id,
                                   SluiceSubmit *item, gboolean *out_found,
                                   GError **error);
gboolean sluice_memory__dlq_delete(SluiceBroker *broker, const gchar *entry_id,
                                   gboolean *out_found, GError **error);

/* memory-stats.c */
gboolean sluice_memory__stats(SluiceBroker *broker, const gchar *const *queues,
                              SluiceBrokerStats *out, GError **error);
gboolean sluice_memory__announce(SluiceBroker *broker, const gchar *consumer,
                                 GBytes *info, gint64 ttl_ms, GError **error);

/* memory-steering.c */
gboolean sluice_memory__purge(SluiceBroker *broker, const gchar *queue,
                              guint64 *out_removed, GError **error);
gboolean sluice_memory__list_queued(SluiceBroker *broker, const gchar *queue,
                                    const gchar *cursor, guint limit,
                                    GPtrArray *out, gchar **out_cursor,
                                    GError **error);
gboolean sluice_memory__remove_queued(SluiceBroker *broker,
                                      SluiceRemoval *items, guint n_items,
                                      GError **error);
gboolean sluice_memory__list_scheduled(SluiceBroker *broker,
                                       const gchar *cursor, guint limit,
                                       GPtrArray *out, gchar **out_cursor,
                                       GError **error);
gboolean sluice_memory__set_paused(SluiceBroker *broker, const gchar *queue,
                                   gboolean paused, GError **error);
gboolean sluice_memory__list_paused(SluiceBroker *broker, GPtrArray *out,
                                    GError **error);
gboolean sluice_memory__replace_payloads(SluiceBroker *broker,
                                         SluiceReplacement *items,
                                         guint n_items, GError **error);
gboolean sluice_memory__reschedule(SluiceBroker *broker, const gchar *id,
                                   gint64 due_at, gboolean *out_found,
                                   GError **error);

/* memory-periodic.c */
gboolean sluice_memory__claim_periodic(SluiceBroker *broker, const gchar *name,
                                       gint64 occurrence_at, SluiceSubmit *item,
                                       gboolean *out_claimed, GError **error);
gboolean sluice_memory__last_periodic(SluiceBroker *broker, const gchar *name,
                                      gint64 *out_last, GError **error);

/* memory-flow.c */
gboolean sluice_memory__rate_acquire(SluiceBroker *broker,
                                     SluiceRateAcquire *items, guint n_items,
                                     GError **error);
gboolean sluice_memory__slot_acquire(SluiceBroker *broker,
                                     SluiceSlotAcquire *items, guint n_items,
                                     GError **error);
gboolean sluice_memory__list_slots(SluiceBroker *broker, guint limit,
                                   GPtrArray *out, GError **error);
gboolean sluice_memory__slot_release(SluiceBroker *broker,
                                     SluiceSlotRelease *items, guint n_items,
                                     GError **error);

/* The uniqueness slots (memory-unique.c); each takes the lock itself. */
void sluice_memory__unique_init(SluiceMemoryBroker *self);
void sluice_memory__unique_clear(SluiceMemoryBroker *self);
gboolean sluice_memory__unique_enqueue(SluiceBroker *broker,
                                       SluiceUniqueSubmit *items, guint n_items,
                                       GError **error);
gboolean sluice_memory__unique_update(SluiceBroker *broker,
                                      SluiceUniqueUpdate *items, guint n_items,
                                      GError **error);

/* The join slots (memory-joins.c); each takes the lock itself. */
void sluice_memory__joins_init(SluiceMemoryBroker *self);
void sluice_memory__joins_clear(SluiceMemoryBroker *self);
gboolean sluice_memory__join_open(SluiceBroker *broker,
                                  const SluiceJoinSpec *joins, guint n_joins,
                                  SluiceSubmit *items, guint n_items,
                                  gboolean *out_existed, GError **error);
gboolean sluice_memory__join_arrive(SluiceBroker *broker,
                                    SluiceJoinArrival *items, guint n_items,
                                    GError **error);
gboolean sluice_memory__join_grow(SluiceBroker *broker, const gchar *join_id,
                                  guint expected_total, guint by,
                                  SluiceSubmit *items, guint n_items,
                                  guint *out_total, GError **error);
gboolean sluice_memory__join_read(SluiceBroker *broker, const gchar *join_id,
                                  gboolean with_outcomes, SluiceJoinState *out,
                                  gboolean *out_found, GError **error);

/* The events and progress slots (memory-events.c); each takes the lock
 * itself. */
void sluice_memory__events_init(SluiceMemoryBroker *self);
void sluice_memory__events_clear(SluiceMemoryBroker *self);
gboolean sluice_memory__put_progress(SluiceBroker *broker, const gchar *id,
                                     GBytes *progress, gint64 ttl_ms,
                                     GError **error);
gboolean sluice_memory__get_progress(SluiceBroker *broker, const gchar *id,
                                     GBytes **out_progress, GError **error);
gboolean sluice_memory__append_events(SluiceBroker *broker,
                                      GBytes *const *events, guint n,
                                      guint max_len, gint64 max_age_ms,
                                      gint64 now_ms, GError **error);
gboolean sluice_memory__read_events(SluiceBroker *broker, const gchar *cursor,
                                    guint limit, gint64 block_ms,
                                    GPtrArray *out, gchar **out_cursor,
                                    GError **error);

G_END_DECLS

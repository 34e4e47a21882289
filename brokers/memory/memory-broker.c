/* memory-broker.c - every slot of the broker contract, in one process.
 *
 * OVERVIEW
 *
 * This is the broker users unit-test their task code against, so it must
 * produce exactly the semantics of the Redis brokers, minus what only a
 * shared store can give. Everything sits behind one mutex; each slot takes
 * it once, which makes every slot trivially atomic (the contract's "the ack,
 * the record, the retry or dead-letter write happen together").
 *
 *   queues       name -> GQueue of Message, FIFO; a released delivery goes
 *                back to the head so it is fetched next
 *   schedule     a GSequence ordered by (due time, insertion order) plus an
 *                index by task id, so cancel_scheduled is O(log n)
 *   records      id -> Record (bytes, final flag, expiry on the clock)
 *   revocations  id -> (expiry, sequence number), listed by sequence so
 *                that a sync cursor never misses one (TTLs differ, and two
 *                revocations may share a millisecond)
 *   periodic     name -> last occurrence
 *   dedup        id -> expiry of the idempotency claim
 *   dead letters a GQueue, oldest first, capped at dead_letter_max (the
 *                drops counted by reason), indexed by task id
 *   workers      id -> what the worker announced, until it lapses
 *
 * Waiting: `fetch` sleeps on `ready` (signalled by every push and by
 * `wakeup`); `wait_record` sleeps on `records_changed` (broadcast by every
 * final record). Neither polls.
 *
 * Time: every TTL is measured on the broker's SluiceClock
 * (SLUICE_BROKER_CAP_CLOCK_TTL), so with a fake clock a test sees results,
 * revocations and idempotency claims expire when it advances the clock.
 * Expired entries are dropped when met and swept every SWEEP_EVERY writes,
 * so memory stays bounded by what is alive.
 *
 * What it omits: nothing outlives the process (no DURABLE), other processes
 * see nothing (no SHARED), and there are no leases: a delivery belongs to
 * the process that fetched it, so `heartbeat`, `reclaim` and `leave` are not
 * provided and the core skips them.
 */
#include "config.h"

#include <string.h>

#include <sluice/sys/broker.h>

#define SWEEP_EVERY 4096

typedef struct {
  GBytes *payload;
  guint delivery_count;
} Message;

typedef struct {
  gchar *id;
  gchar *queue;
  GBytes *payload;
  gint64 due_at;
  guint64 seq;
} Scheduled;

typedef struct {
  GBytes *bytes;
  gboolean final;
  gint64 expires_at;
} Record;

typedef struct {
  gint64 expires_at;
  gint64 seq;
} Revocation;

typedef struct {
  GBytes *info;
  gint64 last_seen;
  gint64 expires_at;
} Announced;

typedef struct {
  SluiceBroker parent;

  GMutex lock;
  GCond ready;           /* a queue got a message, or wakeup() */
  GCond records_changed; /* a final record was written */
  guint dead_letter_max;
  guint64 wakeups; /* generation counter for wakeup() */

  GHashTable *queues;          /* gchar* -> GQueue* of Message* */
  GSequence *schedule;         /* Scheduled*, by (due_at, seq) */
  GHashTable *scheduled_by_id; /* borrowed id -> GSequenceIter* */
  guint64 schedule_seq;
  GHashTable *records;     /* gchar* -> Record* */
  GHashTable *revocations; /* gchar* -> Revocation* */
  gint64 revocation_seq;
  GHashTable *periodic;     /* gchar* -> gint64* */
  GHashTable *dedup;        /* gchar* -> gint64* */
  GQueue *dead_letters;     /* SluiceDeadLetter*, oldest first */
  GHashTable *dead_by_task; /* borrowed task id -> GList* (newest entry) */
  guint64 dead_letter_seq;
  GHashTable *dropped; /* reason -> gint64*: dropped by the cap */
  GHashTable *workers; /* gchar* -> Announced* */
  gint64 in_flight;
  guint writes_since_sweep;
} MemoryBroker;

static MemoryBroker *
memory(SluiceBroker *broker)
{
  return (MemoryBroker *)broker;
}

static gint64
now_ms(MemoryBroker *self)
{
  return sluice_clock_now_ms(sluice_broker_get_clock(&self->parent));
}

static gint64 *
new_time(gint64 value)
{
  gint64 *p = g_new(gint64, 1);
  *p = value;
  return p;
}

static void
message_free(gpointer data)
{
  Message *m = data;
  g_bytes_unref(m->payload);
  g_free(m);
}

static void
queue_free(gpointer data)
{
  g_queue_free_full(data, message_free);
}

static void
scheduled_free(gpointer data)
{
  Scheduled *s = data;
  g_free(s->id);
  g_free(s->queue);
  g_bytes_unref(s->payload);
  g_free(s);
}

static void
record_free(gpointer data)
{
  Record *r = data;
  g_bytes_unref(r->bytes);
  g_free(r);
}

static void
announced_free(gpointer data)
{
  Announced *a = data;
  g_bytes_unref(a->info);
  g_free(a);
}

static gint
scheduled_compare(gconstpointer a, gconstpointer b, gpointer user_data)
{
  const Scheduled *x = a, *y = b;

  if (x->due_at != y->due_at)
    return x->due_at < y->due_at ? -1 : 1;
  return x->seq < y->seq ? -1 : (x->seq > y->seq ? 1 : 0);
}

/* ---- Helpers; all called with the lock held --------------------------------
 */

static GQueue *
get_queue(MemoryBroker *self, const gchar *name)
{
  GQueue *q = g_hash_table_lookup(self->queues, name);

  if (q == NULL) {
    q = g_queue_new();
    g_hash_table_insert(self->queues, g_strdup(name), q);
  }
  return q;
}

static void
push_ready(MemoryBroker *self, const gchar *queue, GBytes *payload)
{
  Message *m = g_new0(Message, 1);

  m->payload = g_bytes_ref(payload);
  m->delivery_count = 0;
  g_queue_push_tail(get_queue(self, queue), m);
  g_cond_signal(&self->ready);
}

static void
unschedule(MemoryBroker *self, const gchar *id)
{
  GSequenceIter *iter = g_hash_table_lookup(self->scheduled_by_id, id);

  if (iter != NULL) {
    g_hash_table_remove(self->scheduled_by_id, id);
    g_sequence_remove(iter);
  }
}

/* A task id is on the schedule at most once: a new entry replaces an old
 * one, as ZADD does on Redis. */
static void
schedule(MemoryBroker *self, const gchar *id, const gchar *queue,
         GBytes *payload, gint64 due_at)
{
  Scheduled *s = g_new0(Scheduled, 1);
  GSequenceIter *iter;

  unschedule(self, id);
  s->id = g_strdup(id);
  s->queue = g_strdup(queue);
  s->payload = g_bytes_ref(payload);
  s->due_at = due_at;
  s->seq = self->schedule_seq++;
  iter = g_sequence_insert_sorted(self->schedule, s, scheduled_compare, NULL);
  g_hash_table_insert(self->scheduled_by_id, s->id, iter);
}

static void
sweep_expired(MemoryBroker *self, gint64 now)
{
  GHashTableIter iter;
  gpointer key, value;

  g_hash_table_iter_init(&iter, self->records);
  while (g_hash_table_iter_next(&iter, &key, &value))
    if (((Record *)value)->expires_at <= now)
      g_hash_table_iter_remove(&iter);
  g_hash_table_iter_init(&iter, self->revocations);
  while (g_hash_table_iter_next(&iter, &key, &value))
    if (((Revocation *)value)->expires_at <= now)
      g_hash_table_iter_remove(&iter);
  g_hash_table_iter_init(&iter, self->dedup);
  while (g_hash_table_iter_next(&iter, &key, &value))
    if (*(gint64 *)value <= now)
      g_hash_table_iter_remove(&iter);
}

static void
count_write(MemoryBroker *self, gint64 now)
{
  if (++self->writes_since_sweep >= SWEEP_EVERY) {
    self->writes_since_sweep = 0;
    sweep_expired(self, now);
  }
}

static void
put_record_locked(MemoryBroker *self, const gchar *id, GBytes *bytes,
                  gboolean final, gint64 ttl_ms, gint64 now)
{
  Record *r = g_new0(Record, 1);

  r->bytes = g_bytes_ref(bytes);
  r->final = final;
  r->expires_at = now + MAX(ttl_ms, 1);
  g_hash_table_replace(self->records, g_strdup(id), r);
  if (final)
    g_cond_broadcast(&self->records_changed);
  count_write(self, now);
}

static Record *
live_record(MemoryBroker *self, const gchar *id, gint64 now)
{
  Record *r = g_hash_table_lookup(self->records, id);

  if (r != NULL && r->expires_at <= now) {
    g_hash_table_remove(self->records, id);
    r = NULL;
  }
  return r;
}

/* One submit, atomically: the idempotency claim, the write, the record. */
static void
submit_locked(MemoryBroker *self, SluiceSubmit *item, gint64 now)
{
  if (item->dedup_ttl_ms > 0) {
    gint64 *claim = g_hash_table_lookup(self->dedup, item->id);
    if (claim != NULL && *claim > now) {
      item->existed = TRUE;
      return;
    }
    g_hash_table_replace(self->dedup, g_strdup(item->id),
                         new_time(now + item->dedup_ttl_ms));
  }
  if (item->due_at > 0)
    schedule(self, item->id, item->queue, item->payload, item->due_at);
  else
    push_ready(self, item->queue, item->payload);
  if (item->record != NULL)
    put_record_locked(self, item->id, item->record, FALSE, item->record_ttl_ms,
                      now);
  count_write(self, now);
}

/* Unlinks and frees dead letter @l, keeping the task-id index right: if
 * @l was its task's newest entry, an older entry of the task (rare: a task
 * buried, replayed and buried again) takes its place. */
static void
unbury_locked(MemoryBroker *self, GList *l)
{
  SluiceDeadLetter *dl = l->data;

  if (dl->task_id != NULL &&
      g_hash_table_lookup(self->dead_by_task, dl->task_id) == l) {
    GList *older = l->prev;
    while (older != NULL &&
           g_strcmp0(((SluiceDeadLetter *)older->data)->task_id, dl->task_id))
      older = older->prev;
    if (older != NULL)
      g_hash_table_replace(self->dead_by_task,
                           ((SluiceDeadLetter *)older->data)->task_id, older);
    else
      g_hash_table_remove(self->dead_by_task, dl->task_id);
  }
  g_queue_delete_link(self->dead_letters, l);
  sluice_dead_letter_free(dl);
}

/* Returns how many old entries the cap dropped to make room. */
static guint
bury_locked(MemoryBroker *self, const SluiceDeadLetter *entry)
{
  SluiceDeadLetter *copy = sluice_dead_letter_copy(entry);
  guint dropped = 0;

  g_free(copy->entry_id);
  /* Zero-padded so entry ids sort as they were buried, like stream ids. */
  copy->entry_id =
      g_strdup_printf("%020" G_GUINT64_FORMAT, ++self->dead_letter_seq);
  g_queue_push_tail(self->dead_letters, copy);
  if (copy->task_id != NULL)
    g_hash_table_replace(self->dead_by_task, copy->task_id,
                         self->dead_letters->tail);
  while (g_queue_get_length(self->dead_letters) > self->dead_letter_max) {
    SluiceDeadLetter *oldest = self->dead_letters->head->data;
    const gchar *reason = oldest->reason != NULL ? oldest->reason : "unknown";
    gint64 *count = g_hash_table_lookup(self->dropped, reason);

    if (count == NULL) {
      count = g_new0(gint64, 1);
      g_hash_table_insert(self->dropped, g_strdup(reason), count);
    }
    (*count)++;
    unbury_locked(self, self->dead_letters->head);
    dropped++;
  }
  return dropped;
}

static GList *
find_dead_letter(MemoryBroker *self, const gchar *entry_id)
{
  for (GList *l = self->dead_letters->head; l != NULL; l = l->next)
    if (g_strcmp0(((SluiceDeadLetter *)l->data)->entry_id, entry_id) == 0)
      return l;
  return NULL;
}

/* ---- Slots ------------------------------------------------------------------
 */

static gboolean
memory_enqueue(SluiceBroker *broker, SluiceSubmit *items, guint n_items,
               GError **error)
{
  MemoryBroker *self = memory(broker);
  gint64 now = now_ms(self);

  g_mutex_lock(&self->lock);
  for (guint i = 0; i < n_items; i++)
    submit_locked(self, &items[i], now);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_fetch(SluiceBroker *broker, const gchar *consumer,
             const gchar *const *queues, guint max, gint64 block_ms,
             GPtrArray *out, GError **error)
{
  MemoryBroker *self = memory(broker);
  gint64 deadline = g_get_monotonic_time() + block_ms * 1000;
  guint64 wakeups;
  guint taken = 0;

  g_mutex_lock(&self->lock);
  wakeups = self->wakeups;
  for (;;) {
    for (guint i = 0; queues[i] != NULL && taken < max; i++) {
      GQueue *q = g_hash_table_lookup(self->queues, queues[i]);
      while (q != NULL && taken < max && !g_queue_is_empty(q)) {
        Message *m = g_queue_pop_head(q);
        m->delivery_count++;
        g_ptr_array_add(out, sluice_delivery_new(queues[i], m->payload, NULL,
                                                 m->delivery_count));
        message_free(m);
        taken++;
      }
    }
    if (taken > 0 || block_ms <= 0 || self->wakeups != wakeups)
      break;
    if (!g_cond_wait_until(&self->ready, &self->lock, deadline))
      break;
  }
  self->in_flight += taken;
  /* Another fetcher may be waiting for what we left. */
  if (taken == max)
    g_cond_signal(&self->ready);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_settle(SluiceBroker *broker, const gchar *consumer,
              SluiceSettlement *items, guint n_items, GError **error)
{
  MemoryBroker *self = memory(broker);
  gint64 now = now_ms(self);
  guint dropped = 0;

  g_mutex_lock(&self->lock);
  for (guint i = 0; i < n_items; i++) {
    SluiceSettlement *s = &items[i];

    switch (s->action) {
    case SLUICE_SETTLE_RELEASE: {
      Message *m = g_new0(Message, 1);
      m->payload = g_bytes_ref(s->delivery->payload);
      /* Not a failed delivery: the next fetch reports the same count. */
      m->delivery_count = s->delivery->delivery_count - 1;
      g_queue_push_head(get_queue(self, s->delivery->queue), m);
      g_cond_signal(&self->ready);
      break;
    }
    case SLUICE_SETTLE_RETRY:
      schedule(self, s->id, s->delivery->queue, s->reschedule_payload,
               s->reschedule_at);
      break;
    case SLUICE_SETTLE_DEAD_LETTER:
      dropped += bury_locked(self, s->dead_letter);
      break;
    case SLUICE_SETTLE_ACK:
      break;
    }
    if (s->record != NULL)
      put_record_locked(self, s->id, s->record, s->record_final,
                        s->record_ttl_ms, now);
    self->in_flight--;
    s->status = SLUICE_SETTLE_DONE;
  }
  g_mutex_unlock(&self->lock);
  if (dropped > 0)
    sluice_broker_log(&self->parent, G_LOG_LEVEL_WARNING,
                      "the dead-letter queue is full (dead_letter_max %u): "
                      "dropped the %u oldest dead letters for good",
                      self->dead_letter_max, dropped);
  return TRUE;
}

static void
memory_wakeup(SluiceBroker *broker)
{
  MemoryBroker *self = memory(broker);

  g_mutex_lock(&self->lock);
  self->wakeups++;
  g_cond_broadcast(&self->ready);
  g_mutex_unlock(&self->lock);
}

static gboolean
memory_promote_due(SluiceBroker *broker, gint64 now, guint max,
                   guint *out_promoted, gint64 *out_next_due, GError **error)
{
  MemoryBroker *self = memory(broker);
  guint promoted = 0;
  GSequenceIter *first;

  g_mutex_lock(&self->lock);
  while (promoted < max) {
    Scheduled *s;
    first = g_sequence_get_begin_iter(self->schedule);
    if (g_sequence_iter_is_end(first))
      break;
    s = g_sequence_get(first);
    if (s->due_at > now)
      break;
    push_ready(self, s->queue, s->payload);
    g_hash_table_remove(self->scheduled_by_id, s->id);
    g_sequence_remove(first);
    promoted++;
  }
  first = g_sequence_get_begin_iter(self->schedule);
  *out_next_due = g_sequence_iter_is_end(first)
                      ? 0
                      : ((Scheduled *)g_sequence_get(first))->due_at;
  *out_promoted = promoted;
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_cancel_scheduled(SluiceBroker *broker, const gchar *id, GBytes *record,
                        gint64 record_ttl_ms, gboolean *out_removed,
                        GError **error)
{
  MemoryBroker *self = memory(broker);

  g_mutex_lock(&self->lock);
  *out_removed = g_hash_table_contains(self->scheduled_by_id, id);
  if (*out_removed) {
    unschedule(self, id);
    if (record != NULL)
      put_record_locked(self, id, record, TRUE, record_ttl_ms, now_ms(self));
  }
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_get_record(SluiceBroker *broker, const gchar *id, GBytes **out_record,
                  GError **error)
{
  MemoryBroker *self = memory(broker);
  Record *r;

  g_mutex_lock(&self->lock);
  r = live_record(self, id, now_ms(self));
  *out_record = r != NULL ? g_bytes_ref(r->bytes) : NULL;
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_put_record(SluiceBroker *broker, const gchar *id, GBytes *record,
                  gboolean final, gint64 ttl_ms, GError **error)
{
  MemoryBroker *self = memory(broker);

  g_mutex_lock(&self->lock);
  put_record_locked(self, id, record, final, ttl_ms, now_ms(self));
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_wait_record(SluiceBroker *broker, const gchar *id, gint64 timeout_ms,
                   GBytes **out_record, GError **error)
{
  MemoryBroker *self = memory(broker);
  gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;
  Record *r;

  g_mutex_lock(&self->lock);
  for (;;) {
    r = live_record(self, id, now_ms(self));
    if (r != NULL && r->final)
      break;
    if (!g_cond_wait_until(&self->records_changed, &self->lock, deadline)) {
      r = live_record(self, id, now_ms(self));
      break;
    }
  }
  *out_record = r != NULL ? g_bytes_ref(r->bytes) : NULL;
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_revoke(SluiceBroker *broker, const gchar *id, gint64 expires_at,
              GError **error)
{
  MemoryBroker *self = memory(broker);
  Revocation *r;

  g_mutex_lock(&self->lock);
  r = g_hash_table_lookup(self->revocations, id);
  if (r == NULL) {
    r = g_new0(Revocation, 1);
    g_hash_table_insert(self->revocations, g_strdup(id), r);
  }
  /* Revoking again never shortens a revocation, and is recorded anew. */
  r->expires_at = MAX(r->expires_at, expires_at);
  r->seq = ++self->revocation_seq;
  g_mutex_unlock(&self->lock);
  return TRUE;
}

/* Lists live revocations recorded after @cursor (0: all) and sets
 * @out_cursor past the newest; drops lapsed ones on the way. */
static void
list_revocations_locked(MemoryBroker *self, gint64 cursor, gint64 now,
                        GPtrArray *out, gint64 *out_cursor)
{
  GHashTableIter iter;
  gpointer key, value;
  gint64 newest = cursor;

  g_hash_table_iter_init(&iter, self->revocations);
  while (g_hash_table_iter_next(&iter, &key, &value)) {
    Revocation *r = value;
    if (r->expires_at <= now) {
      g_hash_table_iter_remove(&iter);
    } else if (r->seq > cursor) {
      g_ptr_array_add(out, sluice_revocation_new(key, r->expires_at));
      newest = MAX(newest, r->seq);
    }
  }
  /* Everything recorded so far was seen, listed or lapsed. */
  *out_cursor = MAX(newest, self->revocation_seq);
}

static gboolean
memory_list_revocations(SluiceBroker *broker, gint64 after, gint64 now,
                        GPtrArray *out, GError **error)
{
  MemoryBroker *self = memory(broker);
  g_autoptr(GPtrArray) live =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_revocation_free);
  gint64 cursor;

  g_mutex_lock(&self->lock);
  list_revocations_locked(self, 0, now, live, &cursor);
  g_mutex_unlock(&self->lock);
  for (guint i = 0; i < live->len; i++) {
    SluiceRevocation *r = live->pdata[i];
    if (r->expires_at > after)
      g_ptr_array_add(out, g_steal_pointer(&live->pdata[i]));
  }
  return TRUE;
}

static gboolean
memory_list_revocations_since(SluiceBroker *broker, gint64 cursor, gint64 now,
                              GPtrArray *out, gint64 *out_cursor,
                              GError **error)
{
  MemoryBroker *self = memory(broker);

  g_mutex_lock(&self->lock);
  list_revocations_locked(self, cursor, now, out, out_cursor);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_claim_periodic(SluiceBroker *broker, const gchar *name,
                      gint64 occurrence_at, SluiceSubmit *item,
                      gboolean *out_claimed, GError **error)
{
  MemoryBroker *self = memory(broker);
  gint64 *last;

  g_mutex_lock(&self->lock);
  last = g_hash_table_lookup(self->periodic, name);
  *out_claimed = last == NULL || *last < occurrence_at;
  if (*out_claimed) {
    g_hash_table_replace(self->periodic, g_strdup(name),
                         new_time(occurrence_at));
    submit_locked(self, item, now_ms(self));
  }
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_last_periodic(SluiceBroker *broker, const gchar *name, gint64 *out_last,
                     GError **error)
{
  MemoryBroker *self = memory(broker);
  gint64 *last;

  g_mutex_lock(&self->lock);
  last = g_hash_table_lookup(self->periodic, name);
  *out_last = last != NULL ? *last : 0;
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_dlq_list(SluiceBroker *broker, const gchar *after, guint limit,
                GPtrArray *out, GError **error)
{
  MemoryBroker *self = memory(broker);
  GList *l;

  g_mutex_lock(&self->lock);
  l = self->dead_letters->head;
  /* Entry ids sort in burial order, so "after" works even for an entry
   * that was deleted or dropped meanwhile. */
  if (after != NULL)
    while (l != NULL &&
           g_strcmp0(((SluiceDeadLetter *)l->data)->entry_id, after) <= 0)
      l = l->next;
  for (; l != NULL && out->len < limit; l = l->next)
    g_ptr_array_add(out, sluice_dead_letter_copy(l->data));
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_dlq_get(SluiceBroker *broker, const gchar *entry_id,
               SluiceDeadLetter **out_entry, GError **error)
{
  MemoryBroker *self = memory(broker);
  GList *l;

  g_mutex_lock(&self->lock);
  l = find_dead_letter(self, entry_id);
  *out_entry = l != NULL ? sluice_dead_letter_copy(l->data) : NULL;
  g_mutex_unlock(&self->lock);
  if (*out_entry == NULL) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_NOT_FOUND,
                "no dead letter with entry id %s", entry_id);
    return FALSE;
  }
  return TRUE;
}

static gboolean
memory_dlq_replay(SluiceBroker *broker, const gchar *entry_id,
                  SluiceSubmit *item, gboolean *out_found, GError **error)
{
  MemoryBroker *self = memory(broker);
  GList *l;

  g_mutex_lock(&self->lock);
  l = find_dead_letter(self, entry_id);
  *out_found = l != NULL;
  if (l != NULL) {
    unbury_locked(self, l);
    submit_locked(self, item, now_ms(self));
  }
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_dlq_delete(SluiceBroker *broker, const gchar *entry_id,
                  gboolean *out_found, GError **error)
{
  MemoryBroker *self = memory(broker);
  GList *l;

  g_mutex_lock(&self->lock);
  l = find_dead_letter(self, entry_id);
  *out_found = l != NULL;
  if (l != NULL)
    unbury_locked(self, l);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_stats(SluiceBroker *broker, const gchar *const *queues,
             SluiceBrokerStats *out, GError **error)
{
  MemoryBroker *self = memory(broker);

  g_mutex_lock(&self->lock);
  if (queues != NULL) {
    for (guint i = 0; queues[i] != NULL; i++) {
      GQueue *q = g_hash_table_lookup(self->queues, queues[i]);
      sluice_broker_stats_add_queue(out, queues[i],
                                    q != NULL ? g_queue_get_length(q) : 0);
    }
  } else {
    g_autoptr(GList) names = g_hash_table_get_keys(self->queues);
    names = g_list_sort(names, (GCompareFunc)g_strcmp0);
    for (GList *l = names; l != NULL; l = l->next)
      sluice_broker_stats_add_queue(
          out, l->data,
          g_queue_get_length(g_hash_table_lookup(self->queues, l->data)));
  }
  out->scheduled = g_sequence_get_length(self->schedule);
  out->in_flight = self->in_flight;
  out->dead_letters = g_queue_get_length(self->dead_letters);
  for (GList *l = self->dead_letters->head; l != NULL; l = l->next)
    sluice_broker_stats_add_dead_letters(
        out, ((SluiceDeadLetter *)l->data)->reason, 1);
  out->stale_settles = 0;
  {
    GHashTableIter iter;
    gpointer key, value;
    gint64 now = now_ms(self);

    g_hash_table_iter_init(&iter, self->dropped);
    while (g_hash_table_iter_next(&iter, &key, &value))
      sluice_broker_stats_add_dropped(out, key, *(gint64 *)value);
    g_hash_table_iter_init(&iter, self->workers);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
      Announced *a = value;
      gint64 ttl = a->expires_at - a->last_seen;
      /* A lapsed worker is shown dead for two more of its periods. */
      if (now >= a->expires_at + 2 * ttl)
        g_hash_table_iter_remove(&iter);
      else
        sluice_broker_stats_add_worker_info(out, key, a->last_seen,
                                            now < a->expires_at, a->info);
    }
  }
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_lookup_task(SluiceBroker *broker, const gchar *id,
                   SluiceTaskLocation *out, GError **error)
{
  MemoryBroker *self = memory(broker);
  GSequenceIter *iter;
  GList *dead;

  g_mutex_lock(&self->lock);
  iter = g_hash_table_lookup(self->scheduled_by_id, id);
  dead = g_hash_table_lookup(self->dead_by_task, id);
  if (iter != NULL) {
    Scheduled *s = g_sequence_get(iter);
    out->place = SLUICE_TASK_PLACE_SCHEDULED;
    out->payload = g_bytes_ref(s->payload);
    out->queue = g_strdup(s->queue);
    out->due_at = s->due_at;
  } else if (dead != NULL) {
    out->place = SLUICE_TASK_PLACE_DEAD;
    out->dead_letter = sluice_dead_letter_copy(dead->data);
  }
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_announce(SluiceBroker *broker, const gchar *consumer, GBytes *info,
                gint64 ttl_ms, GError **error)
{
  MemoryBroker *self = memory(broker);
  Announced *a = g_new0(Announced, 1);

  a->info = g_bytes_ref(info);
  a->last_seen = now_ms(self);
  a->expires_at = a->last_seen + ttl_ms;
  g_mutex_lock(&self->lock);
  g_hash_table_replace(self->workers, g_strdup(consumer), a);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static gboolean
memory_purge(SluiceBroker *broker, const gchar *queue, guint64 *out_removed,
             GError **error)
{
  MemoryBroker *self = memory(broker);
  GQueue *q;

  g_mutex_lock(&self->lock);
  q = g_hash_table_lookup(self->queues, queue);
  *out_removed = q != NULL ? g_queue_get_length(q) : 0;
  if (q != NULL)
    g_hash_table_remove(self->queues, queue);
  g_mutex_unlock(&self->lock);
  return TRUE;
}

static void
memory_finalize(SluiceBroker *broker)
{
  MemoryBroker *self = memory(broker);

  /* Each container may be NULL if construction stopped half-way. */
  g_clear_pointer(&self->queues, g_hash_table_unref);
  g_clear_pointer(&self->scheduled_by_id, g_hash_table_unref);
  g_clear_pointer(&self->schedule, g_sequence_free);
  g_clear_pointer(&self->records, g_hash_table_unref);
  g_clear_pointer(&self->revocations, g_hash_table_unref);
  g_clear_pointer(&self->periodic, g_hash_table_unref);
  g_clear_pointer(&self->dedup, g_hash_table_unref);
  g_clear_pointer(&self->dead_by_task, g_hash_table_unref);
  g_clear_pointer(&self->dropped, g_hash_table_unref);
  g_clear_pointer(&self->workers, g_hash_table_unref);
  if (self->dead_letters != NULL)
    g_queue_free_full(self->dead_letters,
                      (GDestroyNotify)sluice_dead_letter_free);
  g_cond_clear(&self->records_changed);
  g_cond_clear(&self->ready);
  g_mutex_clear(&self->lock);
}

static const SluiceBrokerClass memory_broker_class = {
    .version = SLUICE_BROKER_CLASS_VERSION,
    .name = "memory",
    .instance_size = sizeof(MemoryBroker),
    .caps = SLUICE_BROKER_CAP_CLOCK_TTL | SLUICE_BROKER_CAP_IN_FLIGHT,
    .enqueue = memory_enqueue,
    .fetch = memory_fetch,
    .settle = memory_settle,
    .wakeup = memory_wakeup,
    .promote_due = memory_promote_due,
    .cancel_scheduled = memory_cancel_scheduled,
    .get_record = memory_get_record,
    .put_record = memory_put_record,
    .wait_record = memory_wait_record,
    .revoke = memory_revoke,
    .list_revocations = memory_list_revocations,
    .list_revocations_since = memory_list_revocations_since,
    .lookup_task = memory_lookup_task,
    .announce = memory_announce,
    .claim_periodic = memory_claim_periodic,
    .last_periodic = memory_last_periodic,
    .dlq_list = memory_dlq_list,
    .dlq_get = memory_dlq_get,
    .dlq_replay = memory_dlq_replay,
    .dlq_delete = memory_dlq_delete,
    .stats = memory_stats,
    .purge = memory_purge,
    .finalize = memory_finalize,
};

SluiceBroker *
sluice_memory_broker_new(SluiceClock *clock,
                         const SluiceMemoryBrokerOptions *options)
{
  SluiceBroker *broker;
  MemoryBroker *self;

  /* The class is static and complete, so validation cannot fail. */
  broker = sluice_broker_new(&memory_broker_class, clock, NULL);
  g_return_val_if_fail(broker != NULL, NULL);
  self = memory(broker);
  g_mutex_init(&self->lock);
  g_cond_init(&self->ready);
  g_cond_init(&self->records_changed);
  self->dead_letter_max = options != NULL && options->dead_letter_max > 0
                              ? options->dead_letter_max
                              : SLUICE_DEFAULT_DEAD_LETTER_MAX;
  self->queues =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, queue_free);
  self->schedule = g_sequence_new(scheduled_free);
  self->scheduled_by_id = g_hash_table_new(g_str_hash, g_str_equal);
  self->records =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, record_free);
  self->revocations =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  self->dead_by_task = g_hash_table_new(g_str_hash, g_str_equal);
  self->dropped =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  self->workers =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, announced_free);
  self->periodic =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  self->dedup = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  self->dead_letters = g_queue_new();
  return broker;
}

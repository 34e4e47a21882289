/* memory-store.c - the memory broker's state and the operations on it
 * (see memory-store.h). Every function but _init() and _clear() runs with
 * the lock held.
 */
#include "config.h"

#include "brokers/memory/memory-store.h"

/* Expired entries are swept every this many writes. */
#define SWEEP_EVERY 4096

gint64
sluice_memory__now(SluiceMemoryBroker *self)
{
  return sluice_clock_now_ms(sluice_broker_get_clock(&self->parent));
}

gint64 *
sluice_memory__new_time(gint64 value)
{
  gint64 *p = g_new(gint64, 1);
  *p = value;
  return p;
}

void
sluice_memory__message_free(gpointer data)
{
  SluiceMemoryMessage *m = data;
  g_bytes_unref(m->payload);
  g_free(m);
}

static void
queue_free(gpointer data)
{
  g_queue_free_full(data, sluice_memory__message_free);
}

static void
scheduled_free(gpointer data)
{
  SluiceMemoryScheduled *s = data;
  g_free(s->id);
  g_free(s->queue);
  g_bytes_unref(s->payload);
  g_free(s);
}

static void
record_free(gpointer data)
{
  SluiceMemoryRecord *r = data;
  g_bytes_unref(r->bytes);
  g_free(r);
}

static void
announced_free(gpointer data)
{
  SluiceMemoryAnnounced *a = data;
  g_bytes_unref(a->info);
  g_free(a);
}

gint
sluice_memory__scheduled_compare(gconstpointer a, gconstpointer b,
                                 gpointer user_data)
{
  const SluiceMemoryScheduled *x = a, *y = b;

  if (x->due_at != y->due_at)
    return x->due_at < y->due_at ? -1 : 1;
  return x->seq < y->seq ? -1 : (x->seq > y->seq ? 1 : 0);
}

typedef struct {
  gchar *id;
  gint64 added_at;
} SluiceMemoryWaiter;

static void
waiter_free(gpointer data)
{
  SluiceMemoryWaiter *w = data;
  g_free(w->id);
  g_free(w);
}

static void
waiters_free(gpointer data)
{
  g_queue_free_full(data, waiter_free);
}

void
sluice_memory__init(SluiceMemoryBroker *self, guint dead_letter_max)
{
  g_mutex_init(&self->lock);
  g_cond_init(&self->ready);
  g_cond_init(&self->records_changed);
  self->dead_letter_max = dead_letter_max;
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
  self->out = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  self->paused = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  self->rates = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  self->slots = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                      (GDestroyNotify)g_hash_table_unref);
  self->waiters =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, waiters_free);
  self->periodic =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  self->dedup = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  self->dead_letters = g_queue_new();
}

void
sluice_memory__clear(SluiceMemoryBroker *self)
{
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
  g_clear_pointer(&self->out, g_hash_table_unref);
  g_clear_pointer(&self->paused, g_hash_table_unref);
  g_clear_pointer(&self->rates, g_hash_table_unref);
  g_clear_pointer(&self->slots, g_hash_table_unref);
  g_clear_pointer(&self->waiters, g_hash_table_unref);
  if (self->dead_letters != NULL)
    g_queue_free_full(self->dead_letters,
                      (GDestroyNotify)sluice_dead_letter_free);
  g_cond_clear(&self->records_changed);
  g_cond_clear(&self->ready);
  g_mutex_clear(&self->lock);
}

GQueue *
sluice_memory__queue(SluiceMemoryBroker *self, const gchar *name)
{
  GQueue *q = g_hash_table_lookup(self->queues, name);

  if (q == NULL) {
    q = g_queue_new();
    g_hash_table_insert(self->queues, g_strdup(name), q);
  }
  return q;
}

void
sluice_memory__push_ready(SluiceMemoryBroker *self, const gchar *queue,
                          GBytes *payload)
{
  SluiceMemoryMessage *m = g_new0(SluiceMemoryMessage, 1);

  m->payload = g_bytes_ref(payload);
  m->delivery_count = 0;
  m->seq = ++self->message_seq;
  g_queue_push_tail(sluice_memory__queue(self, queue), m);
  g_cond_signal(&self->ready);
}

void
sluice_memory__unschedule(SluiceMemoryBroker *self, const gchar *id)
{
  GSequenceIter *iter = g_hash_table_lookup(self->scheduled_by_id, id);

  if (iter != NULL) {
    g_hash_table_remove(self->scheduled_by_id, id);
    g_sequence_remove(iter);
  }
}

void
sluice_memory__schedule(SluiceMemoryBroker *self, const gchar *id,
                        const gchar *queue, GBytes *payload, gint64 due_at)
{
  SluiceMemoryScheduled *s = g_new0(SluiceMemoryScheduled, 1);
  GSequenceIter *iter;

  sluice_memory__unschedule(self, id);
  s->id = g_strdup(id);
  s->queue = g_strdup(queue);
  s->payload = g_bytes_ref(payload);
  s->due_at = due_at;
  s->seq = self->schedule_seq++;
  iter = g_sequence_insert_sorted(self->schedule, s,
                                  sluice_memory__scheduled_compare, NULL);
  g_hash_table_insert(self->scheduled_by_id, s->id, iter);
}

static void
sweep_expired(SluiceMemoryBroker *self, gint64 now)
{
  GHashTableIter iter;
  gpointer key, value;

  g_hash_table_iter_init(&iter, self->records);
  while (g_hash_table_iter_next(&iter, &key, &value))
    if (((SluiceMemoryRecord *)value)->expires_at <= now)
      g_hash_table_iter_remove(&iter);
  g_hash_table_iter_init(&iter, self->revocations);
  while (g_hash_table_iter_next(&iter, &key, &value))
    if (((SluiceMemoryRevocation *)value)->expires_at <= now)
      g_hash_table_iter_remove(&iter);
  g_hash_table_iter_init(&iter, self->dedup);
  while (g_hash_table_iter_next(&iter, &key, &value))
    if (*(gint64 *)value <= now)
      g_hash_table_iter_remove(&iter);
  g_hash_table_iter_init(&iter, self->rates);
  while (g_hash_table_iter_next(&iter, &key, &value))
    if (*(gint64 *)value <= now * 1000)
      g_hash_table_iter_remove(&iter);
}

static void
count_write(SluiceMemoryBroker *self, gint64 now)
{
  if (++self->writes_since_sweep >= SWEEP_EVERY) {
    self->writes_since_sweep = 0;
    sweep_expired(self, now);
  }
}

void
sluice_memory__put_record(SluiceMemoryBroker *self, const gchar *id,
                          GBytes *bytes, gboolean final, gint64 ttl_ms,
                          gint64 now)
{
  SluiceMemoryRecord *r = g_new0(SluiceMemoryRecord, 1);

  r->bytes = g_bytes_ref(bytes);
  r->final = final;
  r->expires_at = now + MAX(ttl_ms, 1);
  g_hash_table_replace(self->records, g_strdup(id), r);
  if (final)
    g_cond_broadcast(&self->records_changed);
  count_write(self, now);
}

SluiceMemoryRecord *
sluice_memory__live_record(SluiceMemoryBroker *self, const gchar *id,
                           gint64 now)
{
  SluiceMemoryRecord *r = g_hash_table_lookup(self->records, id);

  if (r != NULL && r->expires_at <= now) {
    g_hash_table_remove(self->records, id);
    r = NULL;
  }
  return r;
}

void
sluice_memory__submit(SluiceMemoryBroker *self, SluiceSubmit *item, gint64 now)
{
  if (item->dedup_ttl_ms > 0) {
    gint64 *claim = g_hash_table_lookup(self->dedup, item->id);
    if (claim != NULL && *claim > now) {
      item->existed = TRUE;
      return;
    }
    g_hash_table_replace(self->dedup, g_strdup(item->id),
                         sluice_memory__new_time(now + item->dedup_ttl_ms));
  }
  if (item->due_at > 0)
    sluice_memory__schedule(self, item->id, item->queue, item->payload,
                            item->due_at);
  else
    sluice_memory__push_ready(self, item->queue, item->payload);
  if (item->record != NULL)
    sluice_memory__put_record(self, item->id, item->record, FALSE,
                              item->record_ttl_ms, now);
  count_write(self, now);
}

/* Unlinks and frees dead letter @l, keeping the task-id index right: if
 * @l was its task's newest entry, an older entry of the task (rare: a task
 * buried, replayed and buried again) takes its place. */
void
sluice_memory__unbury(SluiceMemoryBroker *self, GList *l)
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

guint
sluice_memory__bury(SluiceMemoryBroker *self, const SluiceDeadLetter *entry)
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
    sluice_memory__unbury(self, self->dead_letters->head);
    dropped++;
  }
  return dropped;
}

GList *
sluice_memory__find_dead_letter(SluiceMemoryBroker *self, const gchar *entry_id)
{
  for (GList *l = self->dead_letters->head; l != NULL; l = l->next)
    if (g_strcmp0(((SluiceDeadLetter *)l->data)->entry_id, entry_id) == 0)
      return l;
  return NULL;
}

void
sluice_memory__rate_acquire_one(SluiceMemoryBroker *self,
                                SluiceRateAcquire *item, gint64 now)
{
  gint64 *stored = g_hash_table_lookup(self->rates, item->key);
  gint64 next;

  if (!sluice_broker_gcra_step(item, now, stored != NULL ? *stored : 0, &next))
    return;
  if (stored == NULL) {
    stored = g_new(gint64, 1);
    g_hash_table_insert(self->rates, g_strdup(item->key), stored);
  }
  *stored = next;
  count_write(self, now);
}

/* A waiter older than this and not on the schedule is forgotten: it ran,
 * or was deleted (a younger one may only not be settled yet). */
#define WAITER_GRACE_MS 60000

static GList *
find_waiter(GQueue *q, const gchar *id)
{
  for (GList *l = q->head; l != NULL; l = l->next)
    if (g_str_equal(((SluiceMemoryWaiter *)l->data)->id, id))
      return l;
  return NULL;
}

void
sluice_memory__slot_acquire_one(SluiceMemoryBroker *self,
                                SluiceSlotAcquire *item, gint64 now)
{
  GHashTable *holders = g_hash_table_lookup(self->slots, item->key);
  GQueue *waiting = g_hash_table_lookup(self->waiters, item->key);
  GHashTableIter iter;
  gpointer value;
  gint64 *expiry;

  if (holders == NULL) {
    holders = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_hash_table_insert(self->slots, g_strdup(item->key), holders);
  }
  g_hash_table_iter_init(&iter, holders);
  while (g_hash_table_iter_next(&iter, NULL, &value))
    if (*(gint64 *)value <= now)
      g_hash_table_iter_remove(&iter);
  expiry = g_hash_table_lookup(holders, item->holder);
  if (expiry == NULL && g_hash_table_size(holders) < item->max) {
    expiry = g_new(gint64, 1);
    g_hash_table_insert(holders, g_strdup(item->holder), expiry);
  }
  if (expiry != NULL) {
    *expiry = now + item->lease_ms;
    item->granted = TRUE;
    if (item->waiter != NULL && waiting != NULL) {
      GList *l = find_waiter(waiting, item->waiter);
      if (l != NULL) {
        waiter_free(l->data);
        g_queue_delete_link(waiting, l);
      }
    }
    return;
  }
  if (item->waiter == NULL)
    return;
  if (waiting == NULL) {
    waiting = g_queue_new();
    g_hash_table_insert(self->waiters, g_strdup(item->key), waiting);
  }
  if (find_waiter(waiting, item->waiter) == NULL) {
    SluiceMemoryWaiter *w = g_new(SluiceMemoryWaiter, 1);
    w->id = g_strdup(item->waiter);
    w->added_at = now;
    g_queue_push_tail(waiting, w);
  }
}

void
sluice_memory__slot_release_one(SluiceMemoryBroker *self,
                                SluiceSlotRelease *item, gint64 now)
{
  GHashTable *holders = g_hash_table_lookup(self->slots, item->key);
  GQueue *waiting = g_hash_table_lookup(self->waiters, item->key);
  GList *l;

  if (holders != NULL) {
    g_hash_table_remove(holders, item->holder);
    if (g_hash_table_size(holders) == 0)
      g_hash_table_remove(self->slots, item->key);
  }
  for (l = waiting != NULL ? waiting->head : NULL; l != NULL;) {
    SluiceMemoryWaiter *w = l->data;
    GList *next = l->next;
    GSequenceIter *iter = g_hash_table_lookup(self->scheduled_by_id, w->id);

    if (iter != NULL) {
      SluiceMemoryScheduled *s = g_sequence_get(iter);
      g_autoptr(GBytes) payload = g_bytes_ref(s->payload);
      g_autofree gchar *queue = g_strdup(s->queue);

      sluice_memory__unschedule(self, w->id);
      sluice_memory__push_ready(self, queue, payload);
      waiter_free(w);
      g_queue_delete_link(waiting, l);
      item->woke = TRUE;
      break;
    }
    if (now - w->added_at >= WAITER_GRACE_MS) {
      waiter_free(w);
      g_queue_delete_link(waiting, l);
    }
    l = next;
  }
  if (waiting != NULL && g_queue_is_empty(waiting))
    g_hash_table_remove(self->waiters, item->key);
}

/* broker-values.c - the value types that cross the broker contract
 * (deliveries, revocations, task locations, listed messages, dead
 * letters), the statistics a broker fills in and the layouts it reports:
 * constructors, copies, and the helpers of sys/broker.h that add to a
 * SluiceBrokerStats.
 */
#include "config.h"

#include <string.h>

#include "lib/sluice-private.h"
#include "serializers/text.h"

/* ---- Value types that cross the contract --------------------------------- */

SluiceDelivery *
sluice_delivery_new(const gchar *queue, GBytes *payload, const gchar *handle,
                    guint delivery_count)
{
  SluiceDelivery *delivery;

  g_return_val_if_fail(queue != NULL && payload != NULL, NULL);
  delivery = g_new0(SluiceDelivery, 1);
  delivery->queue = g_strdup(queue);
  delivery->payload = g_bytes_ref(payload);
  delivery->handle = g_strdup(handle);
  delivery->delivery_count = MAX(delivery_count, 1);
  return delivery;
}

void
sluice_delivery_free(SluiceDelivery *delivery)
{
  if (delivery == NULL)
    return;
  if (delivery->broker_data_free != NULL)
    delivery->broker_data_free(delivery->broker_data);
  g_bytes_unref(delivery->payload);
  g_free(delivery->queue);
  g_free(delivery->handle);
  g_free(delivery);
}

SluiceRevocation *
sluice_revocation_new(const gchar *id, gint64 expires_at)
{
  SluiceRevocation *revocation;

  g_return_val_if_fail(id != NULL, NULL);
  revocation = g_new0(SluiceRevocation, 1);
  revocation->id = g_strdup(id);
  revocation->expires_at = expires_at;
  return revocation;
}

void
sluice_revocation_free(SluiceRevocation *revocation)
{
  if (revocation == NULL)
    return;
  g_free(revocation->id);
  g_free(revocation);
}

void
sluice_task_location_clear(SluiceTaskLocation *location)
{
  if (location == NULL)
    return;
  g_clear_pointer(&location->payload, g_bytes_unref);
  g_clear_pointer(&location->queue, g_free);
  g_clear_pointer(&location->dead_letter, sluice_dead_letter_free);
  location->place = SLUICE_TASK_PLACE_NONE;
  location->due_at = 0;
}

SluiceEventEntry *
sluice_event_entry_new(const gchar *cursor, GBytes *event)
{
  SluiceEventEntry *e = g_new0(SluiceEventEntry, 1);

  g_return_val_if_fail(cursor != NULL && event != NULL, e);
  e->cursor = g_strdup(cursor);
  e->event = g_bytes_ref(event);
  return e;
}

void
sluice_event_entry_free(SluiceEventEntry *entry)
{
  if (entry == NULL)
    return;
  g_free(entry->cursor);
  g_clear_pointer(&entry->event, g_bytes_unref);
  g_free(entry);
}

/* ---- Pure helpers brokers share ------------------------------------------ */

gboolean
sluice_broker_gcra_step(SluiceRateAcquire *item, gint64 now_ms, gint64 tat_us,
                        gint64 *out_tat_us)
{
  gint64 now_us = now_ms * 1000;
  gint64 tat = MAX(tat_us, now_us);

  g_return_val_if_fail(item != NULL && out_tat_us != NULL, FALSE);
  item->now_ms = now_ms;
  item->granted = FALSE;
  item->wait_ms = 0;
  if (item->block_ms > 0) {
    *out_tat_us = MAX(tat, now_us + item->block_ms * 1000 + item->tolerance_us);
    item->wait_ms = item->block_ms;
    return TRUE;
  }
  if (tat - item->tolerance_us <= now_us) {
    *out_tat_us = tat + item->interval_us;
    item->granted = TRUE;
    return TRUE;
  }
  item->wait_ms = (tat - item->tolerance_us - now_us + 999) / 1000;
  return FALSE;
}

gboolean
sluice_broker_parse_events_cursor(const gchar *cursor, gint64 *out_after,
                                  GError **error)
{
  guint64 after = 0;

  g_return_val_if_fail(out_after != NULL, FALSE);
  *out_after = 0;
  if (cursor == NULL)
    return TRUE;
  if (!g_ascii_string_to_unsigned(cursor, 10, 0, G_MAXINT64, &after, NULL)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "“%s” is not an events cursor of this broker (a number): "
                "pass one a read returned, or none to start from the oldest",
                cursor);
    return FALSE;
  }
  *out_after = (gint64)after;
  return TRUE;
}

SluiceSlotState *
sluice_slot_state_new(const gchar *key)
{
  SluiceSlotState *s = g_new0(SluiceSlotState, 1);

  g_return_val_if_fail(key != NULL, NULL);
  s->key = g_strdup(key);
  s->holders = g_ptr_array_new_with_free_func(g_free);
  return s;
}

void
sluice_slot_state_free(SluiceSlotState *state)
{
  if (state == NULL)
    return;
  g_free(state->key);
  g_ptr_array_unref(state->holders);
  g_free(state);
}

void
sluice_join_state_clear(SluiceJoinState *state)
{
  if (state == NULL)
    return;
  g_clear_pointer(&state->meta, g_bytes_unref);
  g_clear_pointer(&state->outcomes, g_ptr_array_unref);
  memset(state, 0, sizeof *state);
}

SluiceListedMessage *
sluice_listed_message_new(const gchar *id, const gchar *queue, GBytes *payload,
                          gint64 due_at)
{
  SluiceListedMessage *message;

  g_return_val_if_fail(queue != NULL && payload != NULL, NULL);
  message = g_new0(SluiceListedMessage, 1);
  message->id = g_strdup(id);
  message->queue = g_strdup(queue);
  message->payload = g_bytes_ref(payload);
  message->due_at = due_at;
  return message;
}

void
sluice_listed_message_set_handle(SluiceListedMessage *message,
                                 const gchar *handle)
{
  g_return_if_fail(message != NULL);
  g_free(message->handle);
  message->handle = g_strdup(handle);
}

void
sluice_listed_message_free(SluiceListedMessage *message)
{
  if (message == NULL)
    return;
  g_free(message->id);
  g_free(message->queue);
  g_free(message->handle);
  g_bytes_unref(message->payload);
  g_free(message);
}

/* ---- Dead-letter reasons ------------------------------------------------- */

/* The one list of reasons (sluice-brokers.h), in docs/semantics.md's
 * order, and what each means, index by index. */
static const gchar *const dead_letter_reasons[] = {
    SLUICE_DLQ_MAX_ATTEMPTS,      SLUICE_DLQ_NON_RETRYABLE,
    SLUICE_DLQ_MALFORMED,         SLUICE_DLQ_UNKNOWN_TASK,
    SLUICE_DLQ_EXPIRED,           SLUICE_DLQ_MAX_DELIVERIES,
    SLUICE_DLQ_SNOOZED_TOO_OFTEN, NULL};
static const gchar *const dead_letter_reasons_when[] = {
    "it failed on its last attempt",
    "the task failed with sluice_task_context_fail (retrying cannot help)",
    "its message cannot be decoded (raw bytes kept; never retried)",
    "no worker had its task name registered for unknown_task_timeout_ms of "
    "time",
    "it was still waiting at its expires_at",
    "it was taken from dead workers max_deliveries times (reliable mode)",
    "it snoozed more than its max_snoozes times",
};
G_STATIC_ASSERT(G_N_ELEMENTS(dead_letter_reasons) ==
                G_N_ELEMENTS(dead_letter_reasons_when) + 1);
G_STATIC_ASSERT(G_N_ELEMENTS(dead_letter_reasons) == SLUICE_DLQ_N_REASONS + 1);

const gchar *const *
sluice_dead_letter_reasons(void)
{
  return dead_letter_reasons;
}

const gchar *
sluice_dead_letter_reason_describe(const gchar *reason)
{
  for (guint i = 0; reason != NULL && dead_letter_reasons[i] != NULL; i++)
    if (strcmp(reason, dead_letter_reasons[i]) == 0)
      return dead_letter_reasons_when[i];
  return NULL;
}

SluiceDeadLetter *
sluice_dead_letter_new(void)
{
  return g_new0(SluiceDeadLetter, 1);
}

SluiceDeadLetter *
sluice_dead_letter_copy(const SluiceDeadLetter *entry)
{
  SluiceDeadLetter *copy;

  g_return_val_if_fail(entry != NULL, NULL);
  copy = g_new0(SluiceDeadLetter, 1);
  copy->entry_id = g_strdup(entry->entry_id);
  copy->task_id = g_strdup(entry->task_id);
  copy->task = g_strdup(entry->task);
  copy->reason = g_strdup(entry->reason);
  copy->detail = g_strdup(entry->detail);
  copy->source = g_strdup(entry->source);
  copy->deliveries = entry->deliveries;
  copy->at = entry->at;
  copy->payload = entry->payload != NULL ? g_bytes_ref(entry->payload) : NULL;
  return copy;
}

void
sluice_dead_letter_free(SluiceDeadLetter *entry)
{
  if (entry == NULL)
    return;
  g_free(entry->entry_id);
  g_free(entry->task_id);
  g_free(entry->task);
  g_free(entry->reason);
  g_free(entry->detail);
  g_free(entry->source);
  if (entry->payload != NULL)
    g_bytes_unref(entry->payload);
  g_free(entry);
}

/* ---- Statistics ---------------------------------------------------------- */

static void
queue_stats_free(gpointer data)
{
  SluiceQueueStats *q = data;
  g_free(q->name);
  g_free(q);
}

static void
worker_info_free(gpointer data)
{
  SluiceWorkerInfo *w = data;
  g_free(w->id);
  if (w->info != NULL)
    g_bytes_unref(w->info);
  g_free(w->host);
  g_strfreev(w->queues);
  g_strfreev(w->tasks);
  if (w->running_tasks != NULL)
    g_ptr_array_unref(w->running_tasks);
  g_strfreev(w->limits);
  g_free(w);
}

void
sluice_broker_stats_init(SluiceBrokerStats *stats)
{
  g_return_if_fail(stats != NULL);
  memset(stats, 0, sizeof *stats);
  stats->queues = g_ptr_array_new_with_free_func(queue_stats_free);
  stats->dead_letters_by_reason =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  stats->workers = g_ptr_array_new_with_free_func(worker_info_free);
  stats->dead_letters_dropped_by_reason =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
}

void
sluice_broker_stats_clear(SluiceBrokerStats *stats)
{
  g_return_if_fail(stats != NULL);
  g_clear_pointer(&stats->queues, g_ptr_array_unref);
  g_clear_pointer(&stats->dead_letters_by_reason, g_hash_table_unref);
  g_clear_pointer(&stats->workers, g_ptr_array_unref);
  g_clear_pointer(&stats->dead_letters_dropped_by_reason, g_hash_table_unref);
}

/* ---- Storage layouts ------------------------------------------------------ */

static void
layout_step_free(gpointer data)
{
  SluiceLayoutStep *step = data;

  g_free(step->name);
  g_free(step->summary);
  g_free(step->applied_by);
  g_free(step);
}

void
sluice_layout_init(SluiceLayout *layout)
{
  g_return_if_fail(layout != NULL);
  memset(layout, 0, sizeof *layout);
  layout->applied = g_ptr_array_new_with_free_func(layout_step_free);
  layout->pending = g_ptr_array_new_with_free_func(layout_step_free);
  layout->notes = g_ptr_array_new_with_free_func(g_free);
}

void
sluice_layout_clear(SluiceLayout *layout)
{
  g_return_if_fail(layout != NULL);
  g_clear_pointer(&layout->store, g_free);
  g_clear_pointer(&layout->applied, g_ptr_array_unref);
  g_clear_pointer(&layout->pending, g_ptr_array_unref);
  g_clear_pointer(&layout->notes, g_ptr_array_unref);
}

void
sluice_layout_add_step(GPtrArray *list, guint version, const gchar *name,
                       const gchar *summary, gint64 applied_at_ms,
                       const gchar *applied_by)
{
  SluiceLayoutStep *step;

  g_return_if_fail(list != NULL);
  step = g_new0(SluiceLayoutStep, 1);
  step->version = version;
  step->name = g_strdup(name);
  step->summary = g_strdup(summary);
  step->applied_at_ms = applied_at_ms;
  step->applied_by = g_strdup(applied_by);
  g_ptr_array_add(list, step);
}

void
sluice_broker_stats_add_queue(SluiceBrokerStats *stats, const gchar *name,
                              gint64 ready)
{
  SluiceQueueStats *q;

  g_return_if_fail(stats != NULL && name != NULL);
  q = g_new0(SluiceQueueStats, 1);
  q->name = g_strdup(name);
  q->ready = ready;
  g_ptr_array_add(stats->queues, q);
}

static void
count_by_reason(GHashTable *table, const gchar *reason, gint64 n)
{
  gint64 *count = g_hash_table_lookup(table, reason);

  if (count == NULL) {
    count = g_new0(gint64, 1);
    g_hash_table_insert(table, g_strdup(reason), count);
  }
  *count += n;
}

void
sluice_broker_stats_add_dead_letters(SluiceBrokerStats *stats,
                                     const gchar *reason, gint64 n)
{
  g_return_if_fail(stats != NULL && reason != NULL);
  count_by_reason(stats->dead_letters_by_reason, reason, n);
}

void
sluice_broker_stats_add_dropped(SluiceBrokerStats *stats, const gchar *reason,
                                gint64 n)
{
  g_return_if_fail(stats != NULL && reason != NULL);
  count_by_reason(stats->dead_letters_dropped_by_reason, reason, n);
  stats->dead_letters_dropped = MAX(stats->dead_letters_dropped, 0) + n;
}

void
sluice_broker_stats_add_worker_info(SluiceBrokerStats *stats, const gchar *id,
                                    gint64 last_seen_ms, gboolean alive,
                                    GBytes *info)
{
  SluiceWorkerInfo *w;

  g_return_if_fail(stats != NULL && id != NULL);
  w = g_new0(SluiceWorkerInfo, 1);
  w->id = g_strdup(id);
  w->last_seen_ms = last_seen_ms;
  w->alive = alive;
  w->info = info != NULL ? g_bytes_ref(info) : NULL;
  g_ptr_array_add(stats->workers, w);
}

gchar *
sluice_broker_escape_text(const gchar *bytes, gssize length, gsize max_bytes)
{
  return sluice_text__escape(bytes, length, max_bytes);
}

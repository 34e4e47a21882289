/* redis-replace.c - see redis-replace.h. */
#include "config.h"

#include <string.h>

#include <sluice/sluice.h>

#include "tests/helpers/broker-calls.h"
#include "tests/helpers/redis-replace.h"

GBytes *
sluice_test_raw(const gchar *data, gsize len)
{
  return g_bytes_new(data, len);
}

gboolean
sluice_test_replace(SluiceBroker *b, SluiceWaitingPlace place,
                    const gchar *queue, const gchar *handle, GBytes *payload,
                    GBytes *replacement)
{
  g_autoptr(GError) error = NULL;
  SluiceReplacement r = {.place = place,
                         .queue = queue,
                         .handle = handle,
                         .payload = payload,
                         .replacement = replacement,
                         .replaced = TRUE};

  ck_assert_msg(sluice_broker_replace_payloads(b, &r, 1, &error),
                "replace_payloads: %s", error != NULL ? error->message : "?");
  return r.replaced;
}

GPtrArray *
sluice_test_list_queued_all(SluiceBroker *b, const gchar *queue)
{
  GPtrArray *all = g_ptr_array_new_with_free_func(
      (GDestroyNotify)sluice_listed_message_free);
  g_autofree gchar *cursor = NULL;

  /* Small pages, so that a listing of a few messages crosses pages (and,
   * partitioned, partitions). */
  do {
    g_autoptr(GError) error = NULL;
    gchar *next = NULL;

    ck_assert_msg(
        sluice_broker_list_queued(b, queue, cursor, 2, all, &next, &error),
        "list_queued: %s", error != NULL ? error->message : "?");
    g_free(cursor);
    cursor = next;
  } while (cursor != NULL);
  return all;
}

static GPtrArray *
list_scheduled_all(SluiceBroker *b)
{
  GPtrArray *all = g_ptr_array_new_with_free_func(
      (GDestroyNotify)sluice_listed_message_free);
  g_autofree gchar *cursor = NULL;

  do {
    g_autoptr(GError) error = NULL;
    gchar *next = NULL;

    ck_assert_msg(
        sluice_broker_list_scheduled(b, cursor, 2, all, &next, &error),
        "list_scheduled: %s", error != NULL ? error->message : "?");
    g_free(cursor);
    cursor = next;
  } while (cursor != NULL);
  return all;
}

GPtrArray *
sluice_test_dlq_all(SluiceBroker *b)
{
  g_autoptr(GError) error = NULL;
  GPtrArray *all =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);

  ck_assert_msg(sluice_broker_dlq_list(b, NULL, 100, all, &error),
                "dlq_list: %s", error != NULL ? error->message : "?");
  return all;
}

static SluiceListedMessage *
scheduled(GPtrArray *list, const gchar *id)
{
  for (guint i = 0; i < list->len; i++) {
    SluiceListedMessage *m = list->pdata[i];
    if (g_strcmp0(m->id, id) == 0)
      return m;
  }
  ck_abort_msg("“%s” is not on the schedule", id);
  return NULL;
}

static SluiceDeadLetter *
dead(GPtrArray *list, const gchar *task_id, guint *out_index)
{
  for (guint i = 0; i < list->len; i++) {
    SluiceDeadLetter *dl = list->pdata[i];
    if (g_strcmp0(dl->task_id, task_id) == 0) {
      if (out_index != NULL)
        *out_index = i;
      return dl;
    }
  }
  ck_abort_msg("no dead letter of “%s”", task_id);
  return NULL;
}

static void
check_scheduled(SluiceBroker *b)
{
  static const gchar sealed[] = "S1\0sealed\xff";
  g_autoptr(GBytes) s1 = sluice_test_text("S1");
  g_autoptr(GBytes) s2 = sluice_test_text("S2");
  g_autoptr(GBytes) new1 = sluice_test_raw(sealed, sizeof sealed - 1);
  g_autoptr(GBytes) other = sluice_test_text("S2 again");
  g_autoptr(GPtrArray) before = NULL;
  g_autoptr(GPtrArray) after = NULL;
  g_autoptr(GError) error = NULL;
  SluiceTaskLocation loc = {0};
  SluiceListedMessage *m;
  guint promoted = 0;
  gint64 next_due = 0;

  sluice_test_enqueue(b, "s1", "later", "S1", 5000);
  sluice_test_enqueue(b, "s2", "later", "S2", 6000);
  before = list_scheduled_all(b);
  ck_assert_uint_eq(before->len, 2);
  m = scheduled(before, "s1");
  ck_assert(sluice_test_bytes_is(m->payload, "S1"));

  ck_assert(
      sluice_test_replace(b, SLUICE_WAITING_SCHEDULED, NULL, "s1", s1, new1));
  /* Stale: other bytes than s2's, a task not on the schedule, s1's bytes
   * as they were before the replacement. */
  ck_assert(!sluice_test_replace(b, SLUICE_WAITING_SCHEDULED, NULL, "s2", other,
                                 new1));
  ck_assert(!sluice_test_replace(b, SLUICE_WAITING_SCHEDULED, NULL, "gone", s2,
                                 new1));
  ck_assert(
      !sluice_test_replace(b, SLUICE_WAITING_SCHEDULED, NULL, "s1", s1, other));

  after = list_scheduled_all(b);
  ck_assert_uint_eq(after->len, 2);
  m = scheduled(after, "s1");
  ck_assert(g_bytes_equal(m->payload, new1));
  ck_assert_int_eq(m->due_at, 5000);
  ck_assert_str_eq(m->queue, "later");
  m = scheduled(after, "s2");
  ck_assert(sluice_test_bytes_is(m->payload, "S2"));
  ck_assert_int_eq(m->due_at, 6000);
  ck_assert(sluice_broker_lookup_task(b, "s1", &loc, &error));
  ck_assert_int_eq(loc.place, SLUICE_TASK_PLACE_SCHEDULED);
  ck_assert(g_bytes_equal(loc.payload, new1));
  ck_assert_int_eq(loc.due_at, 5000);
  sluice_task_location_clear(&loc);

  /* Promoted since it was listed: in its queue now, with the new bytes,
   * and no longer on the schedule to be replaced. */
  ck_assert(
      sluice_broker_promote_due(b, 5500, 10, &promoted, &next_due, &error));
  ck_assert_uint_eq(promoted, 1);
  ck_assert(!sluice_test_replace(b, SLUICE_WAITING_SCHEDULED, NULL, "s1", new1,
                                 other));
  {
    g_autoptr(GPtrArray) q = sluice_test_list_queued_all(b, "later");
    ck_assert_uint_eq(q->len, 1);
    ck_assert(
        g_bytes_equal(((SluiceListedMessage *)q->pdata[0])->payload, new1));
  }
}

static void
check_dead(SluiceBroker *b, gboolean ordered)
{
  static const gchar sealed[] = "\x00d1 sealed\xfe";
  g_autoptr(GBytes) d1 = sluice_test_text("d1");
  g_autoptr(GBytes) d2 = sluice_test_text("d2");
  g_autoptr(GBytes) new1 = sluice_test_raw(sealed, sizeof sealed - 1);
  g_autoptr(GBytes) other = sluice_test_text("other");
  g_autoptr(GPtrArray) before = NULL;
  g_autoptr(GPtrArray) after = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceDeadLetter) gone = NULL;
  g_autofree gchar *old_id = NULL;
  g_autofree gchar *d2_id = NULL;
  SluiceTaskLocation loc = {0};
  SluiceDeadLetter *was, *now;
  SluiceBrokerStats stats;
  gboolean found = FALSE;
  guint at_index = 0;

  sluice_test_bury(b, "d1", SLUICE_DLQ_MAX_ATTEMPTS);
  sluice_test_bury(b, "d2", SLUICE_DLQ_MAX_ATTEMPTS);
  before = sluice_test_dlq_all(b);
  ck_assert_uint_eq(before->len, 2);
  was = dead(before, "d1", NULL);
  old_id = g_strdup(was->entry_id);
  d2_id = g_strdup(dead(before, "d2", NULL)->entry_id);

  ck_assert(
      sluice_test_replace(b, SLUICE_WAITING_DEAD, NULL, old_id, d1, new1));
  /* Stale: other bytes than d2's, an entry id that names nothing, the old
   * entry of d1 (gone with the replacement). */
  ck_assert(
      !sluice_test_replace(b, SLUICE_WAITING_DEAD, NULL, d2_id, other, new1));
  ck_assert(
      !sluice_test_replace(b, SLUICE_WAITING_DEAD, NULL, "1-1", d2, new1));
  ck_assert(!sluice_test_replace(b, SLUICE_WAITING_DEAD, NULL, "not an id", d2,
                                 new1));
  ck_assert(
      !sluice_test_replace(b, SLUICE_WAITING_DEAD, NULL, old_id, d1, other));

  after = sluice_test_dlq_all(b);
  ck_assert_uint_eq(after->len, 2);
  now = dead(after, "d1", &at_index);
  ck_assert(g_bytes_equal(now->payload, new1));
  ck_assert_str_ne(now->entry_id, old_id);
  ck_assert_str_eq(now->reason, was->reason);
  ck_assert_str_eq(now->detail, was->detail);
  ck_assert_str_eq(now->source, was->source);
  ck_assert_str_eq(now->task, was->task);
  ck_assert_uint_eq(now->deliveries, was->deliveries);
  ck_assert_int_eq(now->at, was->at);
  ck_assert_int_eq(now->at, 1700000000000);
  if (ordered)
    ck_assert_uint_eq(at_index, 1); /* a new entry, after d2's */
  ck_assert_str_eq(dead(after, "d2", NULL)->entry_id, d2_id);
  ck_assert(sluice_test_bytes_is(dead(after, "d2", NULL)->payload, "d2"));

  /* The old entry id names nothing; the task's newest dead letter is the
   * new entry; the counts by reason are those of before. */
  ck_assert(!sluice_broker_dlq_get(b, old_id, &gone, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_NOT_FOUND));
  g_clear_error(&error);
  ck_assert(sluice_broker_lookup_task(b, "d1", &loc, &error));
  ck_assert_int_eq(loc.place, SLUICE_TASK_PLACE_DEAD);
  ck_assert_str_eq(loc.dead_letter->entry_id, now->entry_id);
  ck_assert(g_bytes_equal(loc.dead_letter->payload, new1));
  sluice_task_location_clear(&loc);
  stats = sluice_test_stats(b, NULL);
  ck_assert_int_eq(stats.dead_letters, 2);
  ck_assert_int_eq(sluice_test_reason_count(&stats, SLUICE_DLQ_MAX_ATTEMPTS),
                   2);
  sluice_broker_stats_clear(&stats);

  /* Deleted since it was listed: nothing to replace. */
  ck_assert(sluice_broker_dlq_delete(b, d2_id, &found, &error));
  ck_assert(found);
  ck_assert(
      !sluice_test_replace(b, SLUICE_WAITING_DEAD, NULL, d2_id, d2, new1));
  g_clear_pointer(&after, g_ptr_array_unref);
  after = sluice_test_dlq_all(b);
  ck_assert_uint_eq(after->len, 1);
}

void
sluice_test_redis_replace_scheduled_and_dead(SluiceBroker *b, gboolean ordered)
{
  check_dead(b, ordered);
  check_scheduled(b);
}

/* test-redis-reliable-broker.c - the redis-reliable broker against a real
 * redis-server, at the broker level: what only Redis shows.
 *
 * What every broker owes, slot by slot, is the contract part of the
 * conformance suite (tests/conformance/contract.c), which
 * test-redis-reliable-conformance runs on this broker, leases and fencing
 * included. Here, what those slots do to the streams, the consumer group
 * and its pending entries list (PEL): entries deleted once acknowledged,
 * fetches over several streams (priority, blocking, never more than
 * asked), fencing that leaves refused entries pending, leases as keys,
 * releases as requeues, the exact trim, trimmed or vanished entries,
 * consumers cleaned up, the group re-created after a restart, purges, a
 * full Redis. One shared server (tests/helpers/redis-fixture.h); each test
 * runs in its own process (CK_FORK) and namespace ("t<pid>"); tests that
 * change the server start their own.
 *
 * The fault rows with worker processes are test-redis-reliable-faults.c;
 * the run of 100,000 tasks (R25) is test-redis-reliable-load.c.
 *
 * No assertion depends on timing: every wait is for a condition, bounded
 * generously; where a lease must lapse, the test sleeps past it.
 *
 * To add a test: write START_TEST and add it to reliable_suite();
 * test_broker() gives a broker in the test's namespace. A test of what any
 * broker should do belongs in the contract suite.
 */
#include "config.h"

#include "lib/sluice-private.h"

#include <check.h>

#include "brokers/redis/transport-reliable.h"
#include "brokers/redis/redis-broker.h"
#include "tests/helpers/broker-calls.h"
#include "tests/helpers/fault-proxy.h"
#include "tests/helpers/log-capture.h"
#include "tests/helpers/redis-fixture.h"
#include "tests/helpers/redis-replace.h"

#define GROUP "sluice"

static const gchar *const q_default[] = {"default", NULL};

static SluiceBroker *
reliable_broker(const gchar *url, const gchar *ns)
{
  return sluice_test_redis_broker(SLUICE_REDIS_RELIABLE, url, ns, 0);
}

static SluiceBroker *
test_broker(void)
{
  return sluice_test_redis_shared_broker(SLUICE_REDIS_RELIABLE);
}

/* ---- looking ------------------------------------------------------------- */

/* Enqueues @n plain messages "m000000".. on @queue, in batches. */
static void
enqueue_many(SluiceBroker *b, const gchar *queue, guint n)
{
  for (guint start = 0; start < n; start += 1000) {
    guint k = MIN(1000, n - start);
    g_autofree SluiceSubmit *items = g_new0(SluiceSubmit, k);
    g_autoptr(GPtrArray) keep = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GPtrArray) payloads =
        g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
    g_autoptr(GError) error = NULL;

    for (guint i = 0; i < k; i++) {
      gchar *id = g_strdup_printf("m%06u", start + i);
      g_ptr_array_add(keep, id);
      g_ptr_array_add(payloads, sluice_test_text(id));
      items[i] = (SluiceSubmit){
          .id = id, .queue = queue, .payload = payloads->pdata[i]};
    }
    ck_assert_msg(sluice_broker_enqueue(b, items, k, &error), "%s",
                  error != NULL ? error->message : "");
  }
}

/* One page of @queue; fails the test on an error. */
static GPtrArray *
list_page(SluiceBroker *b, const gchar *queue, const gchar *cursor, guint limit,
          gchar **out_cursor)
{
  g_autoptr(GError) error = NULL;
  GPtrArray *page = g_ptr_array_new_with_free_func(
      (GDestroyNotify)sluice_listed_message_free);

  ck_assert_msg(sluice_broker_list_queued(b, queue, cursor, limit, page,
                                          out_cursor, &error),
                "%s", error != NULL ? error->message : "");
  return page;
}

static gboolean
listed_is(GPtrArray *page, guint i, const gchar *payload)
{
  return i < page->len &&
         sluice_test_bytes_is(((SluiceListedMessage *)page->pdata[i])->payload,
                              payload);
}

/* A page of 10 from a stream of 100,000 is one script: one XINFO GROUPS
 * (where the group's reads are) and one XRANGE COUNT after it; what a
 * consumer holds is not listed, and nothing is taken. */
START_TEST(test_list_queued_is_one_xrange_after_the_group)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = sluice_test_namespace();
  g_autoptr(GPtrArray) page = NULL;
  g_autoptr(GPtrArray) held = NULL;
  g_autofree gchar *cursor = NULL;
  g_autofree gchar *next = NULL;
  gint64 evals, ranges, infos, lens, scans;

  enqueue_many(b, "default", 100000);
  held = sluice_test_fetch(b, "c1", q_default, 5, 0);
  ck_assert_uint_eq(held->len, 5);
  g_ptr_array_unref(list_page(b, "default", NULL, 1, &cursor)); /* loads it */
  g_clear_pointer(&cursor, g_free);
  evals = sluice_test_redis_calls(shared, "evalsha");
  ranges = sluice_test_redis_calls(shared, "xrange");
  infos = sluice_test_redis_calls(shared, "xinfo|groups");
  lens = sluice_test_redis_calls(shared, "xlen");
  scans = sluice_test_redis_calls(shared, "scan");
  page = list_page(b, "default", NULL, 10, &cursor);
  ck_assert_uint_eq(page->len, 10);
  ck_assert(listed_is(page, 0, "m000005") && listed_is(page, 9, "m000014"));
  ck_assert_ptr_nonnull(cursor);
  ck_assert_int_eq(sluice_test_redis_calls(shared, "evalsha") - evals, 1);
  ck_assert_int_eq(sluice_test_redis_calls(shared, "xrange") - ranges, 1);
  ck_assert_int_eq(sluice_test_redis_calls(shared, "xinfo|groups") - infos, 1);
  g_clear_pointer(&page, g_ptr_array_unref);
  page = list_page(b, "default", cursor, 10, &next);
  ck_assert(listed_is(page, 0, "m000015"));
  ck_assert_int_eq(sluice_test_redis_calls(shared, "xrange") - ranges, 2);
  ck_assert_int_eq(sluice_test_redis_calls(shared, "xlen") - lens, 0);
  ck_assert_int_eq(sluice_test_redis_calls(shared, "scan") - scans, 0);
  ck_assert_int_eq(sluice_test_redis_xlen(shared, ns, "default"), 100000);
  ck_assert_int_eq(sluice_test_redis_pending(shared, ns, "default"), 5);

  /* A cursor the group's reads passed meanwhile resumes at the first entry
   * still ready, never at a delivered one. */
  g_clear_pointer(&held, g_ptr_array_unref);
  held = sluice_test_fetch(b, "c1", q_default, 100, 0);
  g_clear_pointer(&page, g_ptr_array_unref);
  page = list_page(b, "default", cursor, 1, NULL);
  ck_assert(listed_is(page, 0, "m000105"));
}
END_TEST

/* ---- rewriting ----------------------------------------------------------- */

/* replace_payloads: a stream entry cannot change in place, so a ready one
 * whose bytes are still those listed is added again at the end of its
 * stream, its other fields kept (a released message's prior deliveries),
 * and deleted: it moves to the end of its queue, and its handle changes.
 * One delivered since it was listed (pending) or gone is left alone, and
 * so is everything else. The schedule and the dead letters are the shared
 * layer's (redis-replace.c). */
START_TEST(test_replace_payloads_moves_an_entry_to_the_end)
{
  static const gchar sealed[] = "B\0sealed\xff";
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = sluice_test_namespace();
  g_autoptr(GBytes) a = sluice_test_text("A");
  g_autoptr(GBytes) bb = sluice_test_text("B");
  g_autoptr(GBytes) cc = sluice_test_text("C");
  g_autoptr(GBytes) b2 = sluice_test_raw(sealed, sizeof sealed - 1);
  g_autoptr(GBytes) a2 = sluice_test_text("A2");
  g_autoptr(GBytes) c2 = sluice_test_text("C2");
  g_autoptr(GPtrArray) page = NULL;
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *b_handle = NULL;
  SluiceReplacement items[3];
  SluiceSettlement s = {0};
  const gchar *const q_work[] = {"work", NULL};

  sluice_test_redis_replace_scheduled_and_dead(b, TRUE);

  sluice_test_enqueue(b, "a", "work", "A", 0);
  sluice_test_enqueue(b, "b", "work", "B", 0);
  sluice_test_enqueue(b, "c", "work", "C", 0);
  /* Each is delivered to c0, which has no lease, taken over by c1 (a
   * second delivery) and released: each copy carries, in a field of its
   * entry, that two deliveries came before. */
  got = sluice_test_fetch(b, "c0", q_work, 3, 0);
  ck_assert_uint_eq(got->len, 3);
  g_clear_pointer(&got, g_ptr_array_unref);
  sluice_test_heartbeat(b, "c1", 60000, NULL);
  got = sluice_test_reclaim(b, "c1", q_work, 3, 60000);
  ck_assert_uint_eq(got->len, 3);
  for (guint i = 0; i < 3; i++) {
    ck_assert_uint_eq(sluice_test_delivery_at(got, i)->delivery_count, 2);
    s.delivery = sluice_test_delivery_at(got, i);
    s.action = SLUICE_SETTLE_RELEASE;
    ck_assert_int_eq(sluice_test_settle_one(b, "c1", &s), SLUICE_SETTLE_DONE);
  }
  g_clear_pointer(&got, g_ptr_array_unref);
  page = sluice_test_list_queued_all(b, "work");
  ck_assert_uint_eq(page->len, 3);
  ck_assert(listed_is(page, 0, "A") && listed_is(page, 1, "B") &&
            listed_is(page, 2, "C"));
  b_handle = g_strdup(((SluiceListedMessage *)page->pdata[1])->handle);
  ck_assert_ptr_nonnull(b_handle);

  /* One batch: B as listed; C with other bytes than its own; A under B's
   * handle (the handle names the entry, the bytes must be its own). */
  items[0] = (SluiceReplacement){.place = SLUICE_WAITING_QUEUED,
                                 .queue = "work",
                                 .handle = b_handle,
                                 .payload = bb,
                                 .replacement = b2};
  items[1] = (SluiceReplacement){
      .place = SLUICE_WAITING_QUEUED,
      .queue = "work",
      .handle = ((SluiceListedMessage *)page->pdata[2])->handle,
      .payload = a,
      .replacement = c2};
  items[2] = (SluiceReplacement){.place = SLUICE_WAITING_QUEUED,
                                 .queue = "work",
                                 .handle = b_handle,
                                 .payload = a,
                                 .replacement = a2};
  ck_assert_msg(sluice_broker_replace_payloads(b, items, 3, &error), "%s",
                error != NULL ? error->message : "");
  ck_assert(items[0].replaced);
  ck_assert(!items[1].replaced);
  ck_assert(!items[2].replaced);
  g_clear_pointer(&page, g_ptr_array_unref);
  page = sluice_test_list_queued_all(b, "work");
  ck_assert_uint_eq(page->len, 3);
  ck_assert(listed_is(page, 0, "A") && listed_is(page, 1, "C"));
  ck_assert(
      g_bytes_equal(((SluiceListedMessage *)page->pdata[2])->payload, b2));
  ck_assert_str_ne(((SluiceListedMessage *)page->pdata[2])->handle, b_handle);
  ck_assert_int_eq(sluice_test_redis_xlen(shared, ns, "work"), 3);
  /* B's old entry is gone: the same item again replaces nothing. */
  ck_assert(
      !sluice_test_replace(b, SLUICE_WAITING_QUEUED, "work", b_handle, bb, a2));

  /* A, listed, is delivered before its replacement arrives: pending, not
   * ready, so it keeps its bytes. */
  got = sluice_test_fetch(b, "c1", q_work, 1, 0);
  ck_assert(
      sluice_test_bytes_is(sluice_test_delivery_at(got, 0)->payload, "A"));
  ck_assert(!sluice_test_replace(
      b, SLUICE_WAITING_QUEUED, "work",
      ((SluiceListedMessage *)page->pdata[0])->handle, a, a2));
  ck_assert_int_eq(sluice_test_redis_pending(shared, ns, "work"), 1);
  ck_assert_int_eq(sluice_test_ack(b, "c1", sluice_test_delivery_at(got, 0)),
                   SLUICE_SETTLE_DONE);
  g_clear_pointer(&got, g_ptr_array_unref);

  /* C still replaces under its listed handle; the prior deliveries of the
   * released messages travel with the copies: the next delivery of each
   * reports 2, as it would have without the replacement (a copy without
   * the field would report 1). */
  ck_assert(sluice_test_replace(b, SLUICE_WAITING_QUEUED, "work",
                                ((SluiceListedMessage *)page->pdata[1])->handle,
                                cc, c2));
  got = sluice_test_fetch(b, "c1", q_work, 10, 0);
  ck_assert_uint_eq(got->len, 2);
  ck_assert(g_bytes_equal(sluice_test_delivery_at(got, 0)->payload, b2));
  ck_assert(g_bytes_equal(sluice_test_delivery_at(got, 1)->payload, c2));
  ck_assert_uint_eq(sluice_test_delivery_at(got, 0)->delivery_count, 2);
  ck_assert_uint_eq(sluice_test_delivery_at(got, 1)->delivery_count, 2);
}
END_TEST

/* ---- fetch and settle ---------------------------------------------------- */

/* An acknowledged entry leaves the stream and the PEL; a bare dead letter
 * is completed from the delivery (its bytes, its count). */
START_TEST(test_settled_entries_leave_the_stream_and_the_pel)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = sluice_test_namespace();
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GBytes) rec = sluice_test_text("done");
  g_autoptr(GBytes) again = sluice_test_text("again");
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) dead =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);
  SluiceDeadLetter dl = {0};
  SluiceSettlement s[4] = {{0}};

  ck_assert_str_eq(sluice_broker_get_name(b), "redis-reliable");
  ck_assert(sluice_broker_supports(b, SLUICE_BROKER_FEATURE_SHARED));
  ck_assert(sluice_broker_supports(b, SLUICE_BROKER_FEATURE_DURABLE));
  ck_assert(sluice_broker_supports(b, SLUICE_BROKER_FEATURE_LEASES));
  ck_assert(sluice_broker_supports(b, SLUICE_BROKER_FEATURE_FENCING));
  ck_assert(sluice_broker_supports(b, SLUICE_BROKER_FEATURE_IN_FLIGHT));
  ck_assert(sluice_broker_supports(b, SLUICE_BROKER_FEATURE_JOINS));
  ck_assert(sluice_broker_supports(b, SLUICE_BROKER_FEATURE_ORDERED));
  ck_assert(!sluice_broker_supports(b, SLUICE_BROKER_FEATURE_CLOCK_TTL));
  for (guint i = 1; i <= 4; i++) {
    g_autofree gchar *id = g_strdup_printf("m%u", i);
    g_autofree gchar *payload = g_strdup_printf("p%u", i);
    sluice_test_enqueue(b, id, "default", payload, 0);
  }
  got = sluice_test_fetch(b, "c1", q_default, 10, 0);
  ck_assert_uint_eq(got->len, 4);
  for (guint i = 0; i < 4; i++)
    ck_assert_ptr_nonnull(sluice_test_delivery_at(got, i)->handle);
  ck_assert_int_eq(sluice_test_redis_xlen(shared, ns, "default"), 4);
  ck_assert_int_eq(sluice_test_redis_pending(shared, ns, "default"), 4);
  /* R15: the test server keeps nothing on disk, and the first fetch says
   * what that means for reliable mode. */
  ck_assert(sluice_test_log_capture_contains("runs with appendonly no"));

  dl.task_id = "m4";
  dl.task = "t.x";
  dl.reason = "max_attempts";
  dl.detail = "it failed";
  s[0] = (SluiceSettlement){.delivery = sluice_test_delivery_at(got, 0),
                            .action = SLUICE_SETTLE_ACK,
                            .id = "m1",
                            .record = rec,
                            .record_final = TRUE,
                            .record_ttl_ms = 60000};
  s[1] = (SluiceSettlement){.delivery = sluice_test_delivery_at(got, 1),
                            .action = SLUICE_SETTLE_ACK};
  s[2] = (SluiceSettlement){.delivery = sluice_test_delivery_at(got, 2),
                            .action = SLUICE_SETTLE_RETRY,
                            .id = "m3",
                            .reschedule_payload = again,
                            .reschedule_at = 5000};
  s[3] = (SluiceSettlement){.delivery = sluice_test_delivery_at(got, 3),
                            .action = SLUICE_SETTLE_DEAD_LETTER,
                            .id = "m4",
                            .dead_letter = &dl};
  ck_assert(sluice_broker_settle(b, "c1", s, 4, &error));
  for (guint i = 0; i < 4; i++)
    ck_assert_int_eq(s[i].status, SLUICE_SETTLE_DONE);

  ck_assert_int_eq(sluice_test_redis_xlen(shared, ns, "default"), 0);
  ck_assert_int_eq(sluice_test_redis_pending(shared, ns, "default"), 0);
  ck_assert_int_eq(sluice_test_redis_integer(shared, "ZCARD {%s}:schedule", ns),
                   1);
  ck_assert(sluice_broker_dlq_list(b, NULL, 10, dead, &error));
  ck_assert_uint_eq(dead->len, 1);
  ck_assert(sluice_test_bytes_is(((SluiceDeadLetter *)dead->pdata[0])->payload,
                                 "p4"));
  ck_assert_uint_eq(((SluiceDeadLetter *)dead->pdata[0])->deliveries, 1);
}
END_TEST

START_TEST(test_fetch_keeps_strict_priority)
{
  g_autoptr(SluiceBroker) b = test_broker();
  const gchar *const queues[] = {"hi", "lo", NULL};
  g_autoptr(GPtrArray) first = NULL;
  g_autoptr(GPtrArray) second = NULL;
  g_autoptr(GPtrArray) third = NULL;

  sluice_test_enqueue(b, "l1", "lo", "l1", 0);
  sluice_test_enqueue(b, "l2", "lo", "l2", 0);
  sluice_test_enqueue(b, "h1", "hi", "h1", 0);
  sluice_test_enqueue(b, "h2", "hi", "h2", 0);
  first = sluice_test_fetch(b, "c1", queues, 3, 0);
  ck_assert_uint_eq(first->len, 3);
  ck_assert(
      sluice_test_bytes_is(sluice_test_delivery_at(first, 0)->payload, "h1"));
  ck_assert(
      sluice_test_bytes_is(sluice_test_delivery_at(first, 1)->payload, "h2"));
  ck_assert(
      sluice_test_bytes_is(sluice_test_delivery_at(first, 2)->payload, "l1"));
  ck_assert_str_eq(sluice_test_delivery_at(first, 2)->queue, "lo");

  sluice_test_enqueue(b, "h3", "hi", "h3", 0);
  second = sluice_test_fetch(b, "c1", queues, 1, 1000);
  ck_assert_uint_eq(second->len, 1);
  ck_assert(
      sluice_test_bytes_is(sluice_test_delivery_at(second, 0)->payload, "h3"));
  third = sluice_test_fetch(b, "c1", queues, 10, 1000);
  ck_assert_uint_eq(third->len, 1);
  ck_assert(
      sluice_test_bytes_is(sluice_test_delivery_at(third, 0)->payload, "l2"));
}
END_TEST

/* The blocking read over several queues answers up to COUNT per queue when
 * they all have data at once: the transport keeps what was asked for and
 * hands the rest back, never losing or holding it. */
START_TEST(test_blocking_fetch_never_returns_more_than_asked)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = sluice_test_namespace();
  const gchar *const queues[] = {"a", "b", NULL};
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GPtrArray) rest = NULL;
  g_autoptr(GHashTable) seen =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);

  for (guint i = 1; i <= 3; i++) {
    g_autofree gchar *a = g_strdup_printf("a%u", i);
    g_autofree gchar *bb = g_strdup_printf("b%u", i);
    sluice_test_enqueue(b, a, "a", a, 0);
    sluice_test_enqueue(b, bb, "b", bb, 0);
  }
  sluice_redis__reliable_test_skip_priority_read(b, TRUE);
  got = sluice_test_fetch(b, "c1", queues, 2, 1000);
  ck_assert_uint_eq(got->len, 2);
  ck_assert(
      sluice_test_bytes_is(sluice_test_delivery_at(got, 0)->payload, "a1"));
  ck_assert(
      sluice_test_bytes_is(sluice_test_delivery_at(got, 1)->payload, "a2"));
  /* Only what was handed out is pending; b1 and b2 are ready again. */
  ck_assert_int_eq(sluice_test_redis_pending(shared, ns, "a"), 2);
  ck_assert_int_eq(sluice_test_redis_pending(shared, ns, "b"), 0);
  ck_assert_int_eq(sluice_test_redis_xlen(shared, ns, "b"), 3);

  sluice_redis__reliable_test_skip_priority_read(b, FALSE);
  rest = sluice_test_fetch(b, "c1", queues, 10, 0);
  ck_assert_uint_eq(rest->len, 4);
  ck_assert(
      sluice_test_bytes_is(sluice_test_delivery_at(rest, 0)->payload, "a3"));
  for (guint i = 0; i < rest->len; i++) {
    ck_assert_uint_eq(sluice_test_delivery_at(rest, i)->delivery_count, 1);
    g_hash_table_add(
        seen, sluice_test_bytes_str(sluice_test_delivery_at(rest, i)->payload));
  }
  ck_assert(g_hash_table_contains(seen, "b1"));
  ck_assert(g_hash_table_contains(seen, "b2"));
  ck_assert(g_hash_table_contains(seen, "b3"));
}
END_TEST

START_TEST(test_blocking_fetch_wakes_on_data_and_on_wakeup)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  const gchar *const queues[] = {"a", "b", NULL};
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GError) error = NULL;
  SluiceTestFetch *f;

  /* Blocked on both queues, woken by an entry on the second. */
  f = sluice_test_fetch_start(b, queues, 5, 20000);
  sluice_test_redis_wait_blocked(shared, 1);
  sluice_test_enqueue(b, "b1", "b", "b1", 0);
  got = sluice_test_fetch_join(f, &error);
  ck_assert_msg(got != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_uint_eq(got->len, 1);
  ck_assert_str_eq(sluice_test_delivery_at(got, 0)->queue, "b");
  g_clear_pointer(&got, g_ptr_array_unref);

  /* One queue, woken by `wakeup` with nothing. */
  f = sluice_test_fetch_start(b, q_default, 5, 20000);
  sluice_test_redis_wait_blocked(shared, 1);
  sluice_broker_wakeup(b);
  got = sluice_test_fetch_join(f, &error);
  ck_assert_msg(got != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_uint_eq(got->len, 0);
}
END_TEST

/* A pause stored while a XREADGROUP waits: what it reads of the paused
 * queue is handed back (ready again, not pending, its delivery count
 * untouched) and nothing is handed out; with every queue paused the fetch
 * waits without reading, and `wakeup` ends the wait. */
START_TEST(test_pause_reaches_a_blocked_fetch)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(SluiceBroker) other = test_broker();
  g_autofree gchar *ns = sluice_test_namespace();
  const gchar *const both[] = {"a", "b", NULL};
  const gchar *const only_a[] = {"a", NULL};
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GError) error = NULL;
  SluiceTestFetch *f;

  f = sluice_test_fetch_start(b, both, 10, 60000);
  sluice_test_redis_wait_blocked(shared, 1);
  ck_assert(sluice_broker_set_paused(other, "a", TRUE, &error));
  sluice_test_enqueue(other, "a1", "a", "a1", 0);
  got = sluice_test_fetch_join(f, &error);
  ck_assert_msg(got != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_uint_eq(got->len, 0);
  ck_assert_int_eq(sluice_test_redis_pending(shared, ns, "a"), 0);
  ck_assert_int_eq(sluice_test_redis_xlen(shared, ns, "a"), 1);
  g_clear_pointer(&got, g_ptr_array_unref);

  f = sluice_test_fetch_start(b, only_a, 10, 60000);
  sluice_test_redis_wait_blocked(shared, 1);
  sluice_broker_wakeup(b);
  got = sluice_test_fetch_join(f, &error);
  ck_assert_msg(got != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_uint_eq(got->len, 0);
  ck_assert_int_eq(sluice_test_redis_pending(shared, ns, "a"), 0);
  g_clear_pointer(&got, g_ptr_array_unref);

  ck_assert(sluice_broker_set_paused(other, "a", FALSE, &error));
  got = sluice_test_fetch(b, "c1", both, 10, 0);
  ck_assert_uint_eq(got->len, 1);
  ck_assert(
      sluice_test_bytes_is(sluice_test_delivery_at(got, 0)->payload, "a1"));
  ck_assert_uint_eq(sluice_test_delivery_at(got, 0)->delivery_count, 1);
}
END_TEST

/* ---- fencing, leases, releases ------------------------------------------- */

/* A consumer that never heartbeated holds no lease: a peer takes its
 * entries over at once. Its late settles are refused and leave them
 * pending, not scheduled, not buried; the record is written all the same
 * (the last to finish wins), and the refusals are counted in Redis, for
 * every process to see. */
START_TEST(test_refused_settles_leave_the_entries_pending)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(SluiceBroker) other = test_broker();
  g_autofree gchar *ns = sluice_test_namespace();
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GPtrArray) taken = NULL;
  g_autoptr(GBytes) late = sluice_test_text("late");
  g_autoptr(GBytes) retry = sluice_test_text("retry");
  g_autoptr(GBytes) read = NULL;
  g_autoptr(GError) error = NULL;
  SluiceDeadLetter dl = {.reason = "max_attempts"};
  SluiceSettlement s[3] = {{0}};

  for (guint i = 1; i <= 3; i++) {
    g_autofree gchar *id = g_strdup_printf("x%u", i);
    sluice_test_enqueue(b, id, "default", id, 0);
  }
  got = sluice_test_fetch(b, "c1", q_default, 3, 0);
  ck_assert_uint_eq(got->len, 3);
  sluice_test_heartbeat(b, "c2", 60000, NULL);
  taken = sluice_test_reclaim(b, "c2", q_default, 10, 60000);
  ck_assert_uint_eq(taken->len, 3);

  s[0] = (SluiceSettlement){.delivery = sluice_test_delivery_at(got, 0),
                            .action = SLUICE_SETTLE_ACK,
                            .id = "x1",
                            .record = late,
                            .record_final = TRUE,
                            .record_ttl_ms = 60000};
  s[1] = (SluiceSettlement){.delivery = sluice_test_delivery_at(got, 1),
                            .action = SLUICE_SETTLE_RETRY,
                            .id = "x2",
                            .reschedule_payload = retry,
                            .reschedule_at = 1};
  s[2] = (SluiceSettlement){.delivery = sluice_test_delivery_at(got, 2),
                            .action = SLUICE_SETTLE_DEAD_LETTER,
                            .id = "x3",
                            .dead_letter = &dl};
  ck_assert(sluice_broker_settle(b, "c1", s, 3, &error));
  for (guint i = 0; i < 3; i++)
    ck_assert_int_eq(s[i].status, SLUICE_SETTLE_STALE);
  ck_assert_int_eq(sluice_test_redis_pending(shared, ns, "default"), 3);
  ck_assert_int_eq(sluice_test_redis_integer(shared, "ZCARD {%s}:schedule", ns),
                   0);
  ck_assert_int_eq(sluice_test_redis_integer(shared, "XLEN {%s}:dlq", ns), 0);
  ck_assert(sluice_broker_get_record(b, "x1", &read, &error));
  ck_assert(sluice_test_bytes_is(read, "late"));
  ck_assert_int_eq(sluice_test_stale_settles(b), 3);
  ck_assert_int_eq(sluice_test_stale_settles(other), 3);

  for (guint i = 0; i < 3; i++)
    ck_assert_int_eq(
        sluice_test_ack(b, "c2", sluice_test_delivery_at(taken, i)),
        SLUICE_SETTLE_DONE);
  ck_assert_int_eq(sluice_test_redis_pending(shared, ns, "default"), 0);
  ck_assert_int_eq(sluice_test_redis_xlen(shared, ns, "default"), 0);
}
END_TEST

/* A reclaimer without a lease of its own takes nothing, and says so: it
 * may be back from a stall in which every key lapsed. */
START_TEST(test_reclaimer_without_a_lease_takes_nothing)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(GPtrArray) dead = NULL;
  g_autoptr(GPtrArray) r0 = NULL;
  g_autoptr(GPtrArray) r1 = NULL;

  sluice_test_enqueue(b, "e0", "default", "e0", 0);
  dead = sluice_test_fetch(b, "gone", q_default, 1, 0);
  ck_assert_uint_eq(dead->len, 1);
  r0 = sluice_test_reclaim(b, "r0", q_default, 10, 60000);
  ck_assert_uint_eq(r0->len, 0);
  ck_assert(sluice_test_log_capture_contains("consumer r0 holds no lease"));
  sluice_test_heartbeat(b, "r1", 60000, NULL);
  r1 = sluice_test_reclaim(b, "r1", q_default, 10, 60000);
  ck_assert_uint_eq(r1->len, 1);
}
END_TEST

typedef struct {
  SluiceBroker *broker;
  const gchar *consumer;
  gint64 idle_ms;
  GPtrArray *taken;
} TakeOver;

static gboolean
taken_over(gpointer data)
{
  TakeOver *t = data;

  t->taken =
      sluice_test_reclaim(t->broker, t->consumer, q_default, 10, t->idle_ms);
  if (t->taken->len > 0)
    return TRUE;
  g_clear_pointer(&t->taken, g_ptr_array_unref);
  return FALSE;
}

/* Renewals are self-claims that keep the owner and do not count as
 * deliveries. A renewal after the lease lapsed and a peer took the entry
 * fails (so that the worker logs "lease lost") and takes nothing back. The
 * lease is long beside the renewal interval: on a busy machine a thread
 * may be held up for a second or more. */
START_TEST(test_late_heartbeat_fails_and_takes_nothing_back)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = sluice_test_namespace();
  g_autoptr(GPtrArray) held = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *owner = NULL;
  g_autofree gchar *owner2 = NULL;
  TakeOver c3 = {b, "c3", 5000, NULL};
  gint64 count = 0;

  sluice_test_enqueue(b, "long", "default", "long", 0);
  sluice_test_heartbeat(b, "c1", 5000, NULL);
  held = sluice_test_fetch(b, "c1", q_default, 1, 0);
  ck_assert_uint_eq(held->len, 1);
  for (guint i = 0; i < 6; i++) {
    g_usleep(1000 * 1000);
    sluice_test_heartbeat(b, "c1", 5000, held);
  }
  owner = sluice_test_redis_owner(
      shared, ns, "default", sluice_test_delivery_at(held, 0)->handle, &count);
  ck_assert_str_eq(owner, "c1");
  ck_assert_int_eq(count, 1);

  /* Renewals stop; once the lease lapsed, c3 takes the entry over. */
  sluice_test_heartbeat(b, "c3", 60000, NULL);
  ck_assert(sluice_test_wait_for(taken_over, &c3, 60000));
  ck_assert_uint_eq(c3.taken->len, 1);
  g_ptr_array_unref(c3.taken);
  ck_assert(!sluice_broker_heartbeat(
      b, "c1", 5000, (SluiceDelivery *const *)held->pdata, 1, &error));
  ck_assert_msg(strstr(error->message, "LEASE") != NULL &&
                    strstr(error->message, "1 of them") != NULL,
                "%s", error->message);
  g_clear_error(&error);
  sluice_test_heartbeat(b, "c1", 5000, held);
  owner2 = sluice_test_redis_owner(
      shared, ns, "default", sluice_test_delivery_at(held, 0)->handle, &count);
  ck_assert_str_eq(owner2, "c3");
  ck_assert_int_eq(count, 2);
}
END_TEST

/* A release is a requeue in the settle script: the entry leaves the PEL at
 * once and a copy waits at the end of the stream, for any consumer's next
 * fetch (no reclaim, no lease to wait for). Repeated after a lost reply,
 * it finds the entry gone and requeues nothing more. */
START_TEST(test_release_requeues_at_the_end_of_the_stream)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = sluice_test_namespace();
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GPtrArray) again = NULL;
  SluiceSettlement s = {0};

  sluice_test_enqueue(b, "r1", "default", "r1", 0);
  sluice_test_heartbeat(b, "c1", 60000, NULL);
  got = sluice_test_fetch(b, "c1", q_default, 1, 0);
  s.delivery = sluice_test_delivery_at(got, 0);
  s.action = SLUICE_SETTLE_RELEASE;
  s.id = "r1";
  ck_assert_int_eq(sluice_test_settle_one(b, "c1", &s), SLUICE_SETTLE_DONE);
  ck_assert_int_eq(sluice_test_redis_pending(shared, ns, "default"), 0);
  ck_assert_int_eq(sluice_test_redis_xlen(shared, ns, "default"), 1);
  ck_assert_int_eq(sluice_test_settle_one(b, "c1", &s), SLUICE_SETTLE_GONE);
  ck_assert_int_eq(sluice_test_redis_xlen(shared, ns, "default"), 1);
  again = sluice_test_fetch(b, "c2", q_default, 10, 0);
  ck_assert_uint_eq(again->len, 1);
  ck_assert_int_eq(sluice_test_ack(b, "c2", sluice_test_delivery_at(again, 0)),
                   SLUICE_SETTLE_DONE);
  ck_assert_int_eq(sluice_test_redis_xlen(shared, ns, "default"), 0);
}
END_TEST

/* ---- Redis specifics ----------------------------------------------------- */

/* R12: an enqueue whose reply was lost is sent once more on a fresh
 * connection; the replay finds the claim it made itself, writes nothing
 * twice and reports the task as new, not as "existed". */
START_TEST(test_replayed_enqueue_recognises_its_own_write)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceTestProxy) proxy =
      sluice_test_proxy_start(sluice_test_redis_port(shared), &error);
  g_autofree gchar *ns = sluice_test_namespace();
  g_autofree gchar *url = NULL;
  g_autoptr(SluiceBroker) b = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autofree gchar *id = NULL;
  g_autofree gchar *again = NULL;
  SluiceEnqueueOptions eo;
  gboolean existed = TRUE;

  ck_assert_msg(proxy != NULL, "%s", error != NULL ? error->message : "");
  url =
      g_strdup_printf("redis://127.0.0.1:%u/0", sluice_test_proxy_port(proxy));
  b = reliable_broker(url, ns);
  ck_assert(sluice_redis_broker_ping(b, &error));
  client = sluice_client_new(b, NULL, &error);
  sluice_enqueue_options_init(&eo);
  eo.id = "replayed";
  sluice_test_proxy_drop_next_reply(proxy);
  id = sluice_client_enqueue_full(client, "t.x", NULL, &eo, &existed, &error);
  ck_assert_msg(id != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_uint_eq(sluice_test_proxy_dropped(proxy), 1);
  ck_assert(!existed);
  ck_assert_int_eq(sluice_test_redis_xlen(shared, ns, "default"), 1);
  /* A second enqueue of the id, by another call, did exist. */
  again =
      sluice_client_enqueue_full(client, "t.x", NULL, &eo, &existed, &error);
  ck_assert_ptr_nonnull(again);
  ck_assert(existed);
  ck_assert_int_eq(sluice_test_redis_xlen(shared, ns, "default"), 1);
}
END_TEST

/* R26: entries trimmed while pending are reported and dropped, never
 * looped on. */
START_TEST(test_reclaim_reports_trimmed_entries)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = sluice_test_namespace();
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GPtrArray) r1 = NULL;
  g_autoptr(GPtrArray) r2 = NULL;

  for (guint i = 0; i < 3; i++) {
    g_autofree gchar *id = g_strdup_printf("t%u", i);
    sluice_test_enqueue(b, id, "default", id, 0);
  }
  got = sluice_test_fetch(b, "c1", q_default, 3, 0);
  ck_assert_int_eq(
      sluice_test_redis_integer(shared, "XTRIM {%s}:s:default MAXLEN 0", ns),
      3);
  ck_assert_int_eq(sluice_test_redis_pending(shared, ns, "default"), 3);
  sluice_test_heartbeat(b, "c2", 60000, NULL);
  r1 = sluice_test_reclaim(b, "c2", q_default, 10, 60000);
  ck_assert_uint_eq(r1->len, 0);
  ck_assert(sluice_test_log_capture_contains(
      "3 pending messages of queue “default” had been "
      "deleted"));
  ck_assert_int_eq(sluice_test_redis_pending(shared, ns, "default"), 0);
  r2 = sluice_test_reclaim(b, "c2", q_default, 10, 60000);
  ck_assert_uint_eq(r2->len, 0);
  /* Lost with the trim: the settle says the delivery is gone, not that a
   * peer owns it. */
  ck_assert_int_eq(sluice_test_ack(b, "c1", sluice_test_delivery_at(got, 0)),
                   SLUICE_SETTLE_GONE);
}
END_TEST

/* Acknowledged entries are removed by trimming where that provably keeps
 * every unacknowledged one, and one by one above a still-pending entry;
 * ids with different numbers of digits (written by hand here) must not
 * fool the comparison. */
START_TEST(test_trim_removes_only_acknowledged_entries)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = sluice_test_namespace();
  static const gchar *const ids[] = {"9-9", "10-0", "10-10", "100-1", "100-2"};
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GError) error = NULL;
  SluiceSettlement s[3] = {{0}};

  for (guint i = 0; i < G_N_ELEMENTS(ids); i++) {
    redisReply *r = sluice_test_redis_command(
        shared, "XADD {%s}:s:default %s p %s", ns, ids[i], ids[i]);
    ck_assert(r != NULL && r->type == REDIS_REPLY_STRING);
    freeReplyObject(r);
  }
  got = sluice_test_fetch(b, "c1", q_default, 10, 0);
  ck_assert_uint_eq(got->len, 5);
  ck_assert_str_eq(sluice_test_delivery_at(got, 2)->handle, "10-10");

  /* 9-9 stays pending: 10-0, 100-1 and 100-2 go, 10-10 stays pending. */
  s[0] = (SluiceSettlement){.delivery = sluice_test_delivery_at(got, 4),
                            .action = SLUICE_SETTLE_ACK};
  s[1] = (SluiceSettlement){.delivery = sluice_test_delivery_at(got, 1),
                            .action = SLUICE_SETTLE_ACK};
  s[2] = (SluiceSettlement){.delivery = sluice_test_delivery_at(got, 3),
                            .action = SLUICE_SETTLE_ACK};
  ck_assert(sluice_broker_settle(b, "c1", s, 3, &error));
  ck_assert_int_eq(sluice_test_redis_xlen(shared, ns, "default"), 2);
  ck_assert_int_eq(sluice_test_redis_pending(shared, ns, "default"), 2);
  {
    g_autofree gchar *o1 =
        sluice_test_redis_owner(shared, ns, "default", "9-9", NULL);
    g_autofree gchar *o2 =
        sluice_test_redis_owner(shared, ns, "default", "10-10", NULL);
    redisReply *r =
        sluice_test_redis_command(shared, "XRANGE {%s}:s:default - +", ns);
    ck_assert_str_eq(o1, "c1");
    ck_assert_str_eq(o2, "c1");
    ck_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ck_assert_str_eq(r->element[0]->element[0]->str, "9-9");
    ck_assert_str_eq(r->element[1]->element[0]->str, "10-10");
    freeReplyObject(r);
  }

  /* The oldest goes: the trim may now reach up to the newest acked. */
  ck_assert_int_eq(sluice_test_ack(b, "c1", sluice_test_delivery_at(got, 0)),
                   SLUICE_SETTLE_DONE);
  ck_assert_int_eq(sluice_test_redis_xlen(shared, ns, "default"), 1);
  ck_assert_int_eq(sluice_test_ack(b, "c1", sluice_test_delivery_at(got, 2)),
                   SLUICE_SETTLE_DONE);
  ck_assert_int_eq(sluice_test_redis_xlen(shared, ns, "default"), 0);
  ck_assert_int_eq(sluice_test_redis_pending(shared, ns, "default"), 0);
}
END_TEST

/* The trimming proof, checked: consumers fetch, take over each other's
 * entries and settle random subsets in random order, over ids of several
 * milliseconds with sequence numbers of one to three digits; after every
 * settle the stream holds exactly the entries not acknowledged. */
START_TEST(test_trim_is_exact_under_random_settles)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  enum { BATCHES = 6, PER_BATCH = 150, ENTRIES = BATCHES * PER_BATCH };
  static const gchar *const names[] = {"A", "B", "C"};
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = sluice_test_namespace();
  g_autoptr(GRand) rand = g_rand_new_with_seed(20240607);
  GPtrArray *held[3] = {NULL, NULL, NULL};
  g_autoptr(GHashTable) acked =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GBytes) p = sluice_test_text("p");
  g_autoptr(GError) error = NULL;
  guint fetched = 0;

  for (guint k = 0; k < BATCHES; k++) {
    SluiceSubmit items[PER_BATCH];
    for (guint i = 0; i < PER_BATCH; i++)
      items[i] = (SluiceSubmit){.id = "x", .queue = "default", .payload = p};
    ck_assert(sluice_broker_enqueue(b, items, PER_BATCH, &error));
    g_usleep(3000); /* the next batch gets ids of a later millisecond */
  }
  for (guint i = 0; i < 3; i++)
    held[i] =
        g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free);

  for (guint round = 0; round < 400; round++) {
    guint who = (guint)g_rand_int_range(rand, 0, 3);
    gint op = g_rand_int_range(rand, 0, 3);

    if (op == 0) {
      g_autoptr(GPtrArray) got = sluice_test_fetch(
          b, names[who], q_default, (guint)g_rand_int_range(rand, 1, 40), 0);
      fetched += got->len;
      while (got->len > 0)
        g_ptr_array_add(held[who], g_ptr_array_steal_index(got, 0));
    } else if (op == 1) {
      /* Take some of another consumer's entries over (as reclaim does). */
      guint from = (who + 1) % 3;
      for (guint i = 0; i < held[from]->len;) {
        SluiceDelivery *d = held[from]->pdata[i];
        if (g_rand_int_range(rand, 0, 8) != 0) {
          i++;
          continue;
        }
        freeReplyObject(sluice_test_redis_command(
            shared, "XCLAIM {%s}:s:default " GROUP " %s 0 %s JUSTID", ns,
            names[who], d->handle));
        g_ptr_array_add(held[who], g_ptr_array_steal_index(held[from], i));
      }
    } else if (held[who]->len > 0) {
      guint n = 0;
      g_autofree SluiceSettlement *s = g_new0(SluiceSettlement, held[who]->len);
      g_autoptr(GPtrArray) done =
          g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free);
      redisReply *r;

      /* A random subset, in random order. */
      for (guint i = 0; i < held[who]->len;) {
        if (g_rand_boolean(rand)) {
          guint at = n > 0 ? (guint)g_rand_int_range(rand, 0, (gint)n + 1) : 0;
          g_ptr_array_insert(done, (gint)at,
                             g_ptr_array_steal_index(held[who], i));
          n++;
        } else {
          i++;
        }
      }
      for (guint i = 0; i < n; i++)
        s[i] = (SluiceSettlement){.delivery = done->pdata[i],
                                  .action = SLUICE_SETTLE_ACK};
      ck_assert(sluice_broker_settle(b, names[who], s, n, &error));
      for (guint i = 0; i < n; i++) {
        ck_assert_int_eq(s[i].status, SLUICE_SETTLE_DONE);
        g_hash_table_add(acked,
                         g_strdup(((SluiceDelivery *)done->pdata[i])->handle));
      }
      r = sluice_test_redis_command(shared, "XRANGE {%s}:s:default - +", ns);
      ck_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
      ck_assert_msg(r->elements == ENTRIES - g_hash_table_size(acked),
                    "round %u: %zu entries in the stream, %u expected", round,
                    r->elements, ENTRIES - g_hash_table_size(acked));
      for (size_t i = 0; i < r->elements; i++)
        ck_assert_msg(
            !g_hash_table_contains(acked, r->element[i]->element[0]->str),
            "round %u: acknowledged %s still in the stream", round,
            r->element[i]->element[0]->str);
      freeReplyObject(r);
    }
  }
  ck_assert_uint_gt(fetched, ENTRIES / 2);
  ck_assert_uint_gt(g_hash_table_size(acked), ENTRIES / 4);
  for (guint i = 0; i < 3; i++)
    g_ptr_array_unref(held[i]);
}
END_TEST

/* R27: consumers of departed workers do not pile up in the group, and one
 * that still holds entries is never deleted with them. */
START_TEST(test_consumers_do_not_pile_up)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = sluice_test_namespace();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) held = NULL;
  g_autoptr(GPtrArray) taken = NULL;

  for (guint i = 0; i < 50; i++) {
    g_autofree gchar *c = g_strdup_printf("left-%u", i);
    g_autoptr(GPtrArray) got = NULL;
    sluice_test_heartbeat(b, c, 60000, NULL);
    sluice_test_enqueue(b, c, "default", c, 0);
    got = sluice_test_fetch(b, c, q_default, 1, 0);
    ck_assert_int_eq(sluice_test_ack(b, c, sluice_test_delivery_at(got, 0)),
                     SLUICE_SETTLE_DONE);
    ck_assert(sluice_broker_leave(b, c, &error));
  }
  ck_assert_int_eq(sluice_test_redis_consumers(shared, ns, "default"), 0);

  /* Crashed with nothing held, and one crashed holding an entry. */
  for (guint i = 0; i < 50; i++) {
    g_autofree gchar *c = g_strdup_printf("crashed-%u", i);
    g_autoptr(GPtrArray) got = NULL;
    sluice_test_enqueue(b, c, "default", c, 0);
    got = sluice_test_fetch(b, c, q_default, 1, 0);
    ck_assert_int_eq(sluice_test_ack(b, c, sluice_test_delivery_at(got, 0)),
                     SLUICE_SETTLE_DONE);
  }
  sluice_test_enqueue(b, "h", "default", "h", 0);
  held = sluice_test_fetch(b, "holder", q_default, 1, 0);
  ck_assert_int_eq(sluice_test_redis_consumers(shared, ns, "default"), 51);

  g_usleep(400 * 1000);
  sluice_test_heartbeat(b, "reclaimer", 60000, NULL);
  taken = sluice_test_reclaim(b, "reclaimer", q_default, 10, 300);
  ck_assert_uint_eq(taken->len, 1);
  /* Every dead one is gone, the holder too once its entry was taken; the
   * reclaimer remains (it holds the entry now). */
  ck_assert_int_eq(sluice_test_redis_consumers(shared, ns, "default"), 1);
}
END_TEST

/* ---- groups, purges, OOM ------------------------------------------------- */

/* R16: a restart without persistence loses the group; fetch re-creates it
 * and carries on, with one warning. */
START_TEST(test_group_recreated_after_restart_without_persistence)
{
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(NULL);
  g_autoptr(SluiceBroker) b =
      reliable_broker(sluice_test_redis_url(server), "r16");
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) first = NULL;
  g_autoptr(GPtrArray) second = NULL;
  gboolean back = FALSE;

  sluice_test_enqueue(b, "before", "default", "before", 0);
  first = sluice_test_fetch(b, "c1", q_default, 10, 0);
  ck_assert_uint_eq(first->len, 1);
  ck_assert(!sluice_test_log_capture_contains("was missing"));

  ck_assert(sluice_test_redis_restart(server, &error));
  for (guint i = 0; i < 200 && !back; i++) {
    back = sluice_redis_broker_ping(b, NULL);
    if (!back)
      g_usleep(50 * 1000);
  }
  ck_assert(back);
  sluice_test_enqueue(b, "after", "default", "after", 0);
  second = sluice_test_fetch(b, "c1", q_default, 10, 1000);
  ck_assert_uint_eq(second->len, 1);
  ck_assert(sluice_test_bytes_is(sluice_test_delivery_at(second, 0)->payload,
                                 "after"));
  ck_assert(sluice_test_log_capture_contains(
      "the consumer group of queue “default” was missing"));
  /* The old delivery is gone with the data: its settle is refused as
   * gone, not as owned by a peer. */
  ck_assert_int_eq(sluice_test_ack(b, "c1", sluice_test_delivery_at(first, 0)),
                   SLUICE_SETTLE_GONE);
  ck_assert_int_eq(sluice_test_ack(b, "c1", sluice_test_delivery_at(second, 0)),
                   SLUICE_SETTLE_DONE);
}
END_TEST

/* Purge deletes what is ready, never what is pending. */
START_TEST(test_purge_never_touches_the_pel)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = sluice_test_namespace();
  const gchar *const only_a[] = {"a", NULL};
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GError) error = NULL;
  guint64 removed = 0;

  for (guint i = 0; i < 5; i++) {
    g_autofree gchar *id = g_strdup_printf("a%u", i);
    sluice_test_enqueue(b, id, "a", id, 0);
  }
  got = sluice_test_fetch(b, "c1", only_a, 2, 0);
  ck_assert(sluice_broker_purge(b, "a", &removed, &error));
  ck_assert_uint_eq(removed, 3);
  ck_assert_int_eq(sluice_test_redis_pending(shared, ns, "a"), 2);
  ck_assert_int_eq(sluice_test_ack(b, "c1", sluice_test_delivery_at(got, 0)),
                   SLUICE_SETTLE_DONE);
  ck_assert_int_eq(sluice_test_ack(b, "c1", sluice_test_delivery_at(got, 1)),
                   SLUICE_SETTLE_DONE);
  ck_assert_int_eq(sluice_test_redis_xlen(shared, ns, "a"), 0);
}
END_TEST

/* R29: a full Redis refuses new work, and workers still fetch, renew,
 * reclaim and settle. */
START_TEST(test_oom_refuses_work_but_drains)
{
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(NULL);
  g_autoptr(SluiceBroker) b =
      reliable_broker(sluice_test_redis_url(server), "oom");
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) p = sluice_test_text("p");
  g_autoptr(GPtrArray) dead = NULL;
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GPtrArray) fresh = NULL;
  g_autoptr(GPtrArray) taken = NULL;
  const gchar *const new_queue[] = {"new", NULL};
  SluiceSubmit item = {.id = "new", .queue = "default", .payload = p};

  for (guint i = 0; i < 3; i++) {
    g_autofree gchar *id = g_strdup_printf("o%u", i);
    sluice_test_enqueue(b, id, "default", id, 0);
  }
  dead = sluice_test_fetch(b, "gone", q_default, 1, 0);
  sluice_test_redis_fill(server);

  ck_assert(!sluice_broker_enqueue(b, &item, 1, &error));
  ck_assert_msg(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_FULL),
      "%s", error->message);
  g_clear_error(&error);

  sluice_test_heartbeat(b, "c1", 60000, NULL);
  got = sluice_test_fetch(b, "c1", q_default, 5, 0);
  ck_assert_uint_eq(got->len, 2);
  sluice_test_heartbeat(b, "c1", 60000, got);
  fresh =
      sluice_test_fetch(b, "c1", new_queue, 5, 0); /* makes a group: allowed */
  ck_assert_uint_eq(fresh->len, 0);
  sluice_test_heartbeat(b, "c2", 60000, NULL);
  taken = sluice_test_reclaim(b, "c2", q_default, 5, 60000);
  ck_assert_uint_eq(taken->len, 1);
  ck_assert_int_eq(sluice_test_ack(b, "c1", sluice_test_delivery_at(got, 0)),
                   SLUICE_SETTLE_DONE);
  ck_assert_int_eq(sluice_test_ack(b, "c1", sluice_test_delivery_at(got, 1)),
                   SLUICE_SETTLE_DONE);
  ck_assert_int_eq(sluice_test_ack(b, "c2", sluice_test_delivery_at(taken, 0)),
                   SLUICE_SETTLE_DONE);
  ck_assert(sluice_broker_leave(b, "c1", &error));

  sluice_test_redis_unfill(server);
  ck_assert(sluice_broker_enqueue(b, &item, 1, &error));
}
END_TEST

/* ---- Suite --------------------------------------------------------------- */

static Suite *
reliable_suite(void)
{
  Suite *s = suite_create("redis-reliable-broker");
  TCase *broker = tcase_create("broker");

  tcase_add_unchecked_fixture(broker, sluice_test_redis_shared_setup,
                              sluice_test_redis_shared_teardown);
  tcase_set_timeout(broker, 60);
  tcase_add_test(broker, test_settled_entries_leave_the_stream_and_the_pel);
  tcase_add_test(broker, test_fetch_keeps_strict_priority);
  tcase_add_test(broker, test_blocking_fetch_never_returns_more_than_asked);
  tcase_add_test(broker, test_blocking_fetch_wakes_on_data_and_on_wakeup);
  tcase_add_test(broker, test_pause_reaches_a_blocked_fetch);
  tcase_add_test(broker, test_refused_settles_leave_the_entries_pending);
  tcase_add_test(broker, test_reclaimer_without_a_lease_takes_nothing);
  tcase_add_test(broker, test_late_heartbeat_fails_and_takes_nothing_back);
  tcase_add_test(broker, test_release_requeues_at_the_end_of_the_stream);
  tcase_add_test(broker, test_replayed_enqueue_recognises_its_own_write);
  tcase_add_test(broker, test_reclaim_reports_trimmed_entries);
  tcase_add_test(broker, test_trim_removes_only_acknowledged_entries);
  tcase_add_test(broker, test_trim_is_exact_under_random_settles);
  tcase_add_test(broker, test_consumers_do_not_pile_up);
  tcase_add_test(broker,
                 test_group_recreated_after_restart_without_persistence);
  tcase_add_test(broker, test_purge_never_touches_the_pel);
  tcase_add_test(broker, test_list_queued_is_one_xrange_after_the_group);
  tcase_add_test(broker, test_replace_payloads_moves_an_entry_to_the_end);
  tcase_add_test(broker, test_oom_refuses_work_but_drains);
  suite_add_tcase(s, broker);
  return s;
}

int
main(void)
{
  g_autofree gchar *binary = sluice_test_redis_require();
  SRunner *runner;
  int failed;

  /* Tests check warnings the broker logs. */
  sluice_test_log_capture_install();
  runner = srunner_create(reliable_suite());
  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

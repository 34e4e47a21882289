/* test-redis-fast.c - the redis-fast broker against a real redis-server:
 * what only Redis shows.
 *
 * What every broker owes, slot by slot, is the contract part of the
 * conformance suite (tests/conformance/contract.c), which
 * test-redis-fast-conformance runs on this broker. Here, two test cases:
 *  - "slots": how the slots use Redis (one list per queue, key TTLs,
 *    commands per round trip, Lua only where it is needed, the stream of
 *    dead letters), on one shared server (tests/helpers/redis-fixture.h);
 *    each test runs in its own process (CK_FORK) and namespace ("t<pid>").
 *  - "redis": what a real Redis does to the broker (reconnection,
 *    restarts, NOSCRIPT, AUTH, URLs, key layout, namespaces, OOM); tests
 *    that change the server start their own.
 *
 * Round trips are counted with INFO commandstats / total_commands_processed
 * of the server, never with timers: no assertion here depends on how fast
 * the machine is.
 *
 * To add a test: write START_TEST and add it to the right TCase in
 * redis_suite(); test_broker() gives a broker in the test's namespace. A
 * test of what any broker should do belongs in the contract suite.
 */
#include "config.h"

#include "lib/sluice-private.h"

#include <check.h>
#include <signal.h>

#include "brokers/redis/redis-broker.h"
#include "brokers/redis/redis-lua.h"
#include "brokers/redis/transport-reliable-lua.h"
#include "tests/helpers/broker-calls.h"
#include "tests/helpers/log-capture.h"
#include "tests/helpers/redis-fixture.h"
#include "tests/helpers/redis-replace.h"

static const gchar *const q_default[] = {"default", NULL};

static SluiceBroker *
fast_broker(const gchar *url, const gchar *ns, guint dead_letter_max)
{
  return sluice_test_redis_broker(SLUICE_REDIS_FAST, url, ns, dead_letter_max);
}

static SluiceBroker *
test_broker(void)
{
  return sluice_test_redis_shared_broker(SLUICE_REDIS_FAST);
}

/* ---- slots: looking ------------------------------------------------------ */

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

/* A page of 10 from a queue of 100,000 is one script running one LRANGE,
 * at its head and at its far end alike, and takes nothing. */
START_TEST(test_list_queued_is_one_lrange_per_page)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = sluice_test_namespace();
  g_autoptr(GPtrArray) page = NULL;
  g_autofree gchar *cursor = NULL;
  g_autofree gchar *last = NULL;
  gint64 evals, ranges, lens, scans, keys;

  enqueue_many(b, "default", 100000);
  g_ptr_array_unref(list_page(b, "default", NULL, 1, &cursor)); /* loads it */
  g_clear_pointer(&cursor, g_free);
  evals = sluice_test_redis_calls(shared, "evalsha");
  ranges = sluice_test_redis_calls(shared, "lrange");
  lens = sluice_test_redis_calls(shared, "llen");
  scans = sluice_test_redis_calls(shared, "scan");
  keys = sluice_test_redis_calls(shared, "keys");
  page = list_page(b, "default", NULL, 10, &cursor);
  ck_assert_uint_eq(page->len, 10);
  ck_assert(listed_is(page, 0, "m000000") && listed_is(page, 9, "m000009"));
  ck_assert_str_eq(cursor, "10");
  ck_assert_int_eq(sluice_test_redis_calls(shared, "evalsha") - evals, 1);
  ck_assert_int_eq(sluice_test_redis_calls(shared, "lrange") - ranges, 1);
  g_clear_pointer(&page, g_ptr_array_unref);

  /* The far end: still one LRANGE; then the end of the listing. */
  page = list_page(b, "default", "99990", 10, &last);
  ck_assert_uint_eq(page->len, 10);
  ck_assert(listed_is(page, 0, "m099990") && listed_is(page, 9, "m099999"));
  ck_assert_int_eq(sluice_test_redis_calls(shared, "lrange") - ranges, 2);
  g_clear_pointer(&page, g_ptr_array_unref);
  g_clear_pointer(&cursor, g_free);
  page = list_page(b, "default", last, 10, &cursor);
  ck_assert_uint_eq(page->len, 0);
  ck_assert_ptr_null(cursor);
  ck_assert_int_eq(sluice_test_redis_calls(shared, "evalsha") - evals, 3);
  ck_assert_int_eq(sluice_test_redis_calls(shared, "llen") - lens, 0);
  ck_assert_int_eq(sluice_test_redis_calls(shared, "scan") - scans, 0);
  ck_assert_int_eq(sluice_test_redis_calls(shared, "keys") - keys, 0);
  ck_assert_int_eq(sluice_test_redis_llen(shared, ns, "default"), 100000);
}
END_TEST

/* ---- slots: rewriting --------------------------------------------------- */

/* replace_payloads: a list element is rewritten in place (LPOS from the
 * consuming end, LSET), so the message keeps its place in the order; one
 * whose bytes are not in the list any more (other bytes, fetched since it
 * was listed) is left alone, and so is every other message. The schedule
 * and the dead letters are the shared layer's (redis-replace.c). */
START_TEST(test_replace_payloads_rewrites_in_place)
{
  static const gchar sealed[] = "B\0sealed\xff";
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(GBytes) a = sluice_test_text("A");
  g_autoptr(GBytes) bb = sluice_test_text("B");
  g_autoptr(GBytes) z = sluice_test_text("Z");
  g_autoptr(GBytes) b2 = sluice_test_raw(sealed, sizeof sealed - 1);
  g_autoptr(GBytes) a2 = sluice_test_text("A2");
  g_autoptr(GPtrArray) page = NULL;
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GError) error = NULL;
  SluiceReplacement items[2];
  const gchar *const q_work[] = {"work", NULL};

  sluice_test_redis_replace_scheduled_and_dead(b, TRUE);

  sluice_test_enqueue(b, "a", "work", "A", 0);
  sluice_test_enqueue(b, "b", "work", "B", 0);
  sluice_test_enqueue(b, "c", "work", "C", 0);
  page = sluice_test_list_queued_all(b, "work");
  ck_assert_uint_eq(page->len, 3);
  /* One batch: B's bytes are there, Z's are not. */
  items[0] = (SluiceReplacement){
      .place = SLUICE_WAITING_QUEUED,
      .queue = "work",
      .handle = ((SluiceListedMessage *)page->pdata[1])->handle,
      .payload = bb,
      .replacement = b2};
  items[1] = (SluiceReplacement){.place = SLUICE_WAITING_QUEUED,
                                 .queue = "work",
                                 .payload = z,
                                 .replacement = a2};
  ck_assert_msg(sluice_broker_replace_payloads(b, items, 2, &error), "%s",
                error != NULL ? error->message : "");
  ck_assert(items[0].replaced);
  ck_assert(!items[1].replaced);
  g_clear_pointer(&page, g_ptr_array_unref);
  page = sluice_test_list_queued_all(b, "work");
  ck_assert_uint_eq(page->len, 3);
  ck_assert(listed_is(page, 0, "A"));
  ck_assert(
      g_bytes_equal(((SluiceListedMessage *)page->pdata[1])->payload, b2));
  ck_assert(listed_is(page, 2, "C"));
  /* B's old bytes are gone: a second call replaces nothing. */
  ck_assert(
      !sluice_test_replace(b, SLUICE_WAITING_QUEUED, "work", NULL, bb, a2));

  /* A, listed, is fetched before its replacement arrives. */
  got = sluice_test_fetch(b, "c1", q_work, 1, 0);
  ck_assert(
      sluice_test_bytes_is(sluice_test_delivery_at(got, 0)->payload, "A"));
  ck_assert(!sluice_test_replace(
      b, SLUICE_WAITING_QUEUED, "work",
      ((SluiceListedMessage *)page->pdata[0])->handle, a, a2));
  g_clear_pointer(&got, g_ptr_array_unref);
  got = sluice_test_fetch(b, "c1", q_work, 10, 0);
  ck_assert_uint_eq(got->len, 2);
  ck_assert(g_bytes_equal(sluice_test_delivery_at(got, 0)->payload, b2));
  ck_assert(
      sluice_test_bytes_is(sluice_test_delivery_at(got, 1)->payload, "C"));
}
END_TEST

/* ---- slots: produce ------------------------------------------------------ */

START_TEST(test_enqueue_batch_one_round_trip)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = sluice_test_namespace();
  g_autoptr(GError) error = NULL;
  SluiceSubmit items[50];
  GBytes *payloads[50];
  gchar *ids[50];
  gint64 before, pushes, fetches, sadds;
  guint seen = 0;

  /* A scheduled item goes through the script: this loads it. */
  sluice_test_enqueue(b, "warm-up", "other", "x", 1);
  for (guint i = 0; i < 50; i++) {
    ids[i] = g_strdup_printf("id-%02u", i);
    payloads[i] = sluice_test_text(ids[i]);
    items[i] = (SluiceSubmit){
        .id = ids[i], .queue = "default", .payload = payloads[i]};
  }
  /* Plain items (no claim, record or due time) skip Lua: one LPUSH for
   * the whole batch, sent with its SADD in one round trip. */
  before = sluice_test_redis_calls(shared, "evalsha");
  pushes = sluice_test_redis_calls(shared, "lpush");
  sadds = sluice_test_redis_calls(shared, "sadd");
  ck_assert(sluice_broker_enqueue(b, items, 49, &error));
  ck_assert_int_eq(sluice_test_redis_calls(shared, "evalsha") - before, 0);
  ck_assert_int_eq(sluice_test_redis_calls(shared, "lpush") - pushes, 1);
  ck_assert_int_eq(sluice_test_redis_calls(shared, "sadd") - sadds, 1);
  ck_assert_int_eq(
      sluice_test_redis_integer(shared, "SISMEMBER {%s}:queues default", ns),
      1);
  /* The queue is known now: a single enqueue is one command. */
  pushes = sluice_test_redis_calls(shared, "lpush");
  sadds = sluice_test_redis_calls(shared, "sadd");
  ck_assert(sluice_broker_enqueue(b, &items[49], 1, &error));
  ck_assert_int_eq(sluice_test_redis_calls(shared, "lpush") - pushes, 1);
  ck_assert_int_eq(sluice_test_redis_calls(shared, "sadd") - sadds, 0);
  ck_assert_int_eq(sluice_test_redis_llen(shared, ns, "default"), 50);
  /* With idempotency claims the batch needs the script: still one call. */
  for (guint i = 0; i < 50; i++)
    items[i].dedup_ttl_ms = 60000;
  before = sluice_test_redis_calls(shared, "evalsha");
  ck_assert(sluice_broker_enqueue(b, items, 50, &error));
  ck_assert_int_eq(sluice_test_redis_calls(shared, "evalsha") - before, 1);
  ck_assert_int_eq(sluice_test_redis_llen(shared, ns, "default"), 100);
  for (guint i = 0; i < 50; i++) {
    g_autoptr(GPtrArray) got = sluice_test_fetch(b, "c1", q_default, 1, 0);
    ck_assert_uint_eq(got->len, 1); /* drop the claimed copies */
  }

  /* Many per fetch, first in first out: one script call each (the pause
   * is read in the step that pops). */
  fetches = sluice_test_redis_calls(shared, "evalsha");
  while (seen < 50) {
    g_autoptr(GPtrArray) got = sluice_test_fetch(b, "c1", q_default, 20, 0);
    ck_assert_uint_gt(got->len, 0);
    for (guint k = 0; k < got->len; k++, seen++)
      ck_assert(sluice_test_bytes_is(sluice_test_delivery_at(got, k)->payload,
                                     ids[seen]));
  }
  ck_assert_int_eq(sluice_test_redis_calls(shared, "evalsha") - fetches, 3);
  for (guint i = 0; i < 50; i++) {
    g_free(ids[i]);
    g_bytes_unref(payloads[i]);
  }
}
END_TEST

/* An idempotency claim is a key with a TTL; a claimed id pushes nothing. */
START_TEST(test_enqueue_claim_is_a_key_that_expires)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = sluice_test_namespace();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) p = sluice_test_text("payload");
  SluiceSubmit items[3] = {
      {.id = "dup", .queue = "default", .payload = p, .dedup_ttl_ms = 60000},
      {.id = "dup", .queue = "default", .payload = p, .dedup_ttl_ms = 60000},
      {.id = "other", .queue = "default", .payload = p, .dedup_ttl_ms = 60000},
  };

  ck_assert(sluice_broker_enqueue(b, items, 3, &error));
  ck_assert_int_eq(sluice_test_redis_llen(shared, ns, "default"), 2);
  ck_assert(sluice_broker_enqueue(b, items, 1, &error));
  ck_assert_int_eq(sluice_test_redis_llen(shared, ns, "default"), 2);
  ck_assert_int_gt(sluice_test_redis_integer(shared, "PTTL {%s}:dedup:dup", ns),
                   0);
}
END_TEST

/* ---- slots: consume ------------------------------------------------------ */

/* BLMPOP pops from the first non-empty list only: one fetch takes from one
 * queue, even when it could take more from the next. */
START_TEST(test_fetch_pops_from_one_list_per_call)
{
  g_autoptr(SluiceBroker) b = test_broker();
  const gchar *const queues[] = {"high", "low", NULL};
  g_autoptr(GPtrArray) got = NULL;

  for (guint i = 0; i < 3; i++) {
    g_autofree gchar *lo = g_strdup_printf("low-%u", i);
    g_autofree gchar *hi = g_strdup_printf("high-%u", i);
    sluice_test_enqueue(b, lo, "low", lo, 0);
    sluice_test_enqueue(b, hi, "high", hi, 0);
  }
  got = sluice_test_fetch(b, "c1", queues, 2, 0);
  ck_assert_uint_eq(got->len, 2);
  g_clear_pointer(&got, g_ptr_array_unref);
  got = sluice_test_fetch(b, "c1", queues, 10, 0);
  ck_assert_uint_eq(got->len, 1);
  ck_assert(
      sluice_test_bytes_is(sluice_test_delivery_at(got, 0)->payload, "high-2"));
  g_clear_pointer(&got, g_ptr_array_unref);
  got = sluice_test_fetch(b, "c1", queues, 10, 0);
  ck_assert_uint_eq(got->len, 3);
  ck_assert_str_eq(sluice_test_delivery_at(got, 0)->queue, "low");
}
END_TEST

/* block_ms 0 is LMPOP (a BLMPOP timeout of 0 means "forever"); a BLMPOP
 * blocked on the server gets what another client pushes. */
START_TEST(test_fetch_blocks_in_blmpop_only_when_asked)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(SluiceBroker) producer = test_broker();
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GError) error = NULL;
  gint64 blmpop = sluice_test_redis_calls(shared, "blmpop");
  SluiceTestFetch *f;

  got = sluice_test_fetch(b, "c1", q_default, 5, 0);
  ck_assert_uint_eq(got->len, 0);
  ck_assert_int_eq(sluice_test_redis_calls(shared, "blmpop"), blmpop);
  g_clear_pointer(&got, g_ptr_array_unref);

  f = sluice_test_fetch_start(b, q_default, 10, 60000);
  sluice_test_redis_wait_blocked(shared, 1);
  sluice_test_enqueue(producer, "late", "default", "arrived", 0);
  got = sluice_test_fetch_join(f, &error);
  ck_assert_msg(got != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_uint_eq(got->len, 1);
  ck_assert(sluice_test_bytes_is(sluice_test_delivery_at(got, 0)->payload,
                                 "arrived"));
}
END_TEST

/* A pause stored while a BLMPOP waits: what it pops of the paused queue
 * goes back to the consuming end, in order, and nothing is handed out;
 * with every queue paused the fetch waits without popping (or spinning),
 * and `wakeup` ends the wait. */
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
  ck_assert_int_eq(sluice_test_redis_llen(shared, ns, "a"), 1);
  g_clear_pointer(&got, g_ptr_array_unref);

  /* Every queue paused: blocked on nothing, taking nothing. */
  f = sluice_test_fetch_start(b, only_a, 10, 60000);
  sluice_test_redis_wait_blocked(shared, 1);
  sluice_broker_wakeup(b);
  got = sluice_test_fetch_join(f, &error);
  ck_assert_msg(got != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_uint_eq(got->len, 0);
  ck_assert_int_eq(sluice_test_redis_llen(shared, ns, "a"), 1);
  g_clear_pointer(&got, g_ptr_array_unref);

  ck_assert(sluice_broker_set_paused(other, "a", FALSE, &error));
  got = sluice_test_fetch(b, "c1", both, 10, 0);
  ck_assert_uint_eq(got->len, 1);
  ck_assert(
      sluice_test_bytes_is(sluice_test_delivery_at(got, 0)->payload, "a1"));
}
END_TEST

/* ---- slots: settle ------------------------------------------------------- */

START_TEST(test_settle_record_has_its_ttl)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = sluice_test_namespace();
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GBytes) rec = sluice_test_text("succeeded:42");
  SluiceSettlement s = {0};
  gint64 pttl;

  sluice_test_enqueue(b, "t1", "default", "work", 0);
  got = sluice_test_fetch(b, "c1", q_default, 1, 0);
  s.delivery = sluice_test_delivery_at(got, 0);
  s.action = SLUICE_SETTLE_ACK;
  s.id = "t1";
  s.record = rec;
  s.record_final = TRUE;
  s.record_ttl_ms = 60000;
  sluice_test_settle(b, "c1", &s, 1);
  pttl = sluice_test_redis_integer(shared, "PTTL {%s}:r:t1", ns);
  ck_assert_int_gt(pttl, 0);
  ck_assert_int_le(pttl, 60000);
}
END_TEST

START_TEST(test_settle_noop_costs_nothing)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(GPtrArray) got = NULL;
  SluiceSettlement s[3] = {{0}};
  gint64 c0, c1, c2;

  for (guint i = 0; i < 3; i++) {
    g_autofree gchar *id = g_strdup_printf("n%u", i);
    sluice_test_enqueue(b, id, "default", id, 0);
  }
  got = sluice_test_fetch(b, "c1", q_default, 3, 0);
  ck_assert_uint_eq(got->len, 3);
  for (guint i = 0; i < 3; i++) {
    s[i].delivery = sluice_test_delivery_at(got, i);
    s[i].action = SLUICE_SETTLE_ACK;
    s[i].id = "n";
  }
  c0 = sluice_test_redis_info_int(shared, "stats", "total_commands_processed");
  c1 = sluice_test_redis_info_int(shared, "stats", "total_commands_processed");
  sluice_test_settle(b, "c1", s, 3);
  c2 = sluice_test_redis_info_int(shared, "stats", "total_commands_processed");
  /* Between two INFOs: only the INFO itself, as with nothing between. */
  ck_assert_int_eq(c2 - c1, c1 - c0);
  for (guint i = 0; i < 3; i++)
    ck_assert_int_eq(s[i].status, SLUICE_SETTLE_DONE);
}
END_TEST

START_TEST(test_settle_batch_one_round_trip)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GBytes) rec = sluice_test_text("done");
  g_autoptr(GBytes) retry = sluice_test_text("retry-payload");
  g_autoptr(SluiceDeadLetter) dl =
      sluice_test_dead_letter("b3", "max_attempts", "b3");
  SluiceSettlement s[4] = {{0}};
  SluiceSettlement loader = {0};
  gint64 before, sets;

  for (guint i = 0; i < 5; i++) {
    g_autofree gchar *id = g_strdup_printf("b%u", i);
    sluice_test_enqueue(b, id, "default", id, 0);
  }
  got = sluice_test_fetch(b, "c1", q_default, 5, 0);
  ck_assert_uint_eq(got->len, 5);
  for (guint i = 0; i < 4; i++) {
    s[i].delivery = sluice_test_delivery_at(got, i);
    s[i].record = rec;
    s[i].record_final = TRUE;
    s[i].record_ttl_ms = 60000;
  }
  s[0].action = SLUICE_SETTLE_ACK;
  s[0].id = "b0";
  s[1].action = SLUICE_SETTLE_ACK;
  s[1].id = "b1";
  s[2].action = SLUICE_SETTLE_RETRY;
  s[2].id = "b2";
  s[2].record = NULL;
  s[2].reschedule_payload = retry;
  s[2].reschedule_at = 5000;
  s[3].action = SLUICE_SETTLE_DEAD_LETTER;
  s[3].id = "b3";
  s[3].dead_letter = dl;
  /* Records only (results on, fast mode): no script, pipelined SETs. */
  before = sluice_test_redis_calls(shared, "evalsha");
  sets = sluice_test_redis_calls(shared, "set");
  sluice_test_settle(b, "c1", s, 2);
  ck_assert_int_eq(sluice_test_redis_calls(shared, "evalsha") - before, 0);
  ck_assert_int_eq(sluice_test_redis_calls(shared, "set") - sets, 2);
  /* A retry and a dead letter need the script: one call for both. */
  loader.delivery = sluice_test_delivery_at(got, 4);
  loader.action = SLUICE_SETTLE_RETRY;
  loader.id = "b4";
  loader.reschedule_payload = retry;
  loader.reschedule_at = 5000;
  sluice_test_settle(b, "c1", &loader, 1); /* loads the script */
  before = sluice_test_redis_calls(shared, "evalsha");
  sluice_test_settle(b, "c1", s + 2, 2);
  ck_assert_int_eq(sluice_test_redis_calls(shared, "evalsha") - before, 1);
}
END_TEST

/* The core always fills a dead letter; a bare one (no payload, no count,
 * no time) is completed from the delivery, so the raw bytes are kept. */
START_TEST(test_dead_letter_is_completed_from_the_delivery)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GPtrArray) list =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);
  g_autoptr(SluiceDeadLetter) dl = sluice_dead_letter_new();
  SluiceDeadLetter *e;
  SluiceSettlement s = {0};

  sluice_test_enqueue(b, "ignored", "default", "\xff\x00garbage", 0);
  got = sluice_test_fetch(b, "c1", q_default, 1, 0);
  dl->reason = g_strdup(SLUICE_DLQ_MALFORMED);
  s.delivery = sluice_test_delivery_at(got, 0);
  s.action = SLUICE_SETTLE_DEAD_LETTER;
  s.dead_letter = dl;
  sluice_test_settle(b, "c1", &s, 1);
  ck_assert(sluice_broker_dlq_list(b, NULL, 10, list, &error));
  ck_assert_uint_eq(list->len, 1);
  e = g_ptr_array_index(list, 0);
  ck_assert_ptr_null(e->task_id);
  ck_assert_ptr_null(e->task);
  ck_assert_str_eq(e->reason, SLUICE_DLQ_MALFORMED);
  ck_assert_str_eq(e->source, "default");
  ck_assert_uint_eq(e->deliveries, 1);
  ck_assert_int_gt(e->at, 0);
  ck_assert(
      g_bytes_equal(e->payload, sluice_test_delivery_at(got, 0)->payload));
}
END_TEST

/* A release is an RPUSH to the consuming end: fetched next, before what
 * waited behind it; repeated after a lost reply, it pushes nothing more. */
START_TEST(test_release_goes_back_to_the_consuming_end)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = sluice_test_namespace();
  g_autoptr(GPtrArray) first = NULL;
  g_autoptr(GPtrArray) again = NULL;
  SluiceSettlement s = {0};

  sluice_test_enqueue(b, "a", "default", "A", 0);
  sluice_test_enqueue(b, "b", "default", "B", 0);
  first = sluice_test_fetch(b, "c1", q_default, 1, 0);
  ck_assert(
      sluice_test_bytes_is(sluice_test_delivery_at(first, 0)->payload, "A"));
  s.delivery = sluice_test_delivery_at(first, 0);
  s.action = SLUICE_SETTLE_RELEASE;
  s.id = "a";
  sluice_test_settle(b, "c1", &s, 1);
  ck_assert_int_eq(s.status, SLUICE_SETTLE_DONE);
  sluice_test_settle(b, "c1", &s, 1);
  ck_assert_int_eq(s.status, SLUICE_SETTLE_DONE);
  ck_assert_int_eq(sluice_test_redis_llen(shared, ns, "default"), 2);
  again = sluice_test_fetch(b, "c1", q_default, 2, 0);
  ck_assert_uint_eq(again->len, 2);
  ck_assert(
      sluice_test_bytes_is(sluice_test_delivery_at(again, 0)->payload, "A"));
  ck_assert(
      sluice_test_bytes_is(sluice_test_delivery_at(again, 1)->payload, "B"));
}
END_TEST

/* ---- slots: schedule, revocations, dead letters, stats ------------------- */

START_TEST(test_cancel_scheduled_deletes_the_payload)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = sluice_test_namespace();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) rec = sluice_test_text("cancelled");
  gboolean removed = FALSE;

  sluice_test_enqueue(b, "later", "default", "later", 5000);
  ck_assert_int_eq(
      sluice_test_redis_integer(shared, "HLEN {%s}:sched:payload", ns), 1);
  ck_assert(
      sluice_broker_cancel_scheduled(b, "later", rec, 60000, &removed, &error));
  ck_assert(removed);
  ck_assert_int_eq(
      sluice_test_redis_integer(shared, "HLEN {%s}:sched:payload", ns), 0);
}
END_TEST

static SluiceRevocation *
rev_at(GPtrArray *a, guint i)
{
  return g_ptr_array_index(a, i);
}

/* Revocations are a sorted set by expiry: listed in that order, and the
 * lapsed ones pruned from it. */
START_TEST(test_revocations_are_sorted_by_expiry_and_pruned)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autofree gchar *ns = sluice_test_namespace();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) list =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_revocation_free);
  gint64 cursor = 0;

  ck_assert(sluice_broker_revoke(b, "a", 1000, &error));
  ck_assert(sluice_broker_revoke(b, "b", 2000, &error));
  ck_assert(sluice_broker_revoke(b, "c", 3000, &error));
  ck_assert(sluice_broker_revoke(b, "c", 2500, &error));
  ck_assert(sluice_broker_list_revocations(b, &cursor, 500, list, &error));
  ck_assert_uint_eq(list->len, 3);
  ck_assert_str_eq(rev_at(list, 0)->id, "a");
  ck_assert_int_eq(rev_at(list, 0)->expires_at, 1000);
  ck_assert_str_eq(rev_at(list, 2)->id, "c");
  ck_assert_int_eq(rev_at(list, 2)->expires_at, 3000);
  g_ptr_array_set_size(list, 0);
  cursor = 0;
  ck_assert(sluice_broker_list_revocations(b, &cursor, 1500, list, &error));
  ck_assert_uint_eq(list->len, 2);
  ck_assert_str_eq(rev_at(list, 0)->id, "b");
  ck_assert_int_eq(sluice_test_redis_integer(shared, "ZCARD {%s}:revoked", ns),
                   2);
}
END_TEST

START_TEST(test_dead_letter_cap_trims_the_stream)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autofree gchar *ns = sluice_test_namespace();
  g_autoptr(SluiceBroker) b = fast_broker(sluice_test_redis_url(shared), ns, 3);

  for (guint i = 1; i <= 5; i++) {
    g_autofree gchar *id = g_strdup_printf("e%u", i);
    sluice_test_bury(b, id, SLUICE_DLQ_MAX_ATTEMPTS);
  }
  ck_assert_int_eq(sluice_test_redis_integer(shared, "XLEN {%s}:dlq", ns), 3);
}
END_TEST

/* Without leases, the heartbeat still tells stats who is there, and leave
 * takes a worker off the list. */
START_TEST(test_stats_list_workers_by_heartbeat)
{
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(GError) error = NULL;
  SluiceBrokerStats stats;

  ck_assert(sluice_broker_heartbeat(b, "worker-1", 30000, NULL, 0, &error));
  ck_assert(sluice_broker_heartbeat(b, "worker-2", 30000, NULL, 0, &error));
  stats = sluice_test_stats(b, NULL);
  ck_assert_uint_eq(stats.workers->len, 2);
  ck_assert_int_gt(
      ((SluiceWorkerInfo *)g_ptr_array_index(stats.workers, 0))->last_seen_ms,
      0);
  ck_assert_int_eq(stats.in_flight, -1);
  sluice_broker_stats_clear(&stats);

  ck_assert(sluice_broker_leave(b, "worker-2", &error));
  stats = sluice_test_stats(b, NULL);
  ck_assert_uint_eq(stats.workers->len, 1);
  ck_assert_str_eq(
      ((SluiceWorkerInfo *)g_ptr_array_index(stats.workers, 0))->id,
      "worker-1");
  sluice_broker_stats_clear(&stats);
}
END_TEST

typedef struct {
  SluiceBroker *broker;
  SluiceTestRedis *server;
  gchar *channel;
} PutJob;

static gpointer
put_final_thread(gpointer data)
{
  PutJob *job = data;
  g_autoptr(GBytes) rec = sluice_test_text("final");

  /* Wait until the waiter listens, then write the final record. */
  for (guint i = 0; i < 1000; i++) {
    redisReply *r = sluice_test_redis_command(job->server, "PUBSUB NUMSUB %s",
                                              job->channel);
    gboolean listening = r != NULL && r->type == REDIS_REPLY_ARRAY &&
                         r->elements == 2 && r->element[1]->integer == 1;
    if (r != NULL)
      freeReplyObject(r);
    if (listening)
      break;
    g_usleep(10 * 1000);
  }
  sluice_broker_put_record(job->broker, "w1", rec, TRUE, 60000, NULL);
  return NULL;
}

START_TEST(test_wait_record_wakes_on_notification)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(SluiceBroker) writer = test_broker();
  g_autofree gchar *ns = sluice_test_namespace();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) pending = sluice_test_text("running");
  g_autoptr(GBytes) read = NULL;
  PutJob job;
  GThread *thread;

  ck_assert(sluice_broker_put_record(b, "w1", pending, FALSE, 60000, &error));
  /* No safety-net poll: only the notification can end this wait before
   * the test times out. */
  ((SluiceRedisBroker *)b)->wait_poll_ms = G_MAXINT;
  job.broker = writer;
  job.server = shared;
  job.channel = g_strdup_printf("{%s}:done:w1", ns);
  thread = g_thread_new("put", put_final_thread, &job);
  ck_assert(sluice_broker_wait_record(b, "w1", 3600 * 1000, &read, &error));
  g_thread_join(thread);
  ck_assert(sluice_test_bytes_is(read, "final"));
  g_free(job.channel);
  /* The subscriber connection went back clean (or was dropped). */
  ck_assert_int_eq(
      sluice_test_redis_info_int(shared, "stats", "pubsub_channels"), 0);
}
END_TEST

/* ---- Redis specifics ---------------------------------------------------- */

START_TEST(test_reconnect_after_client_kill)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) got = NULL;
  SluiceTestFetch *f;
  redisReply *r;

  sluice_test_log_capture_reset();
  /* An idle pooled connection. */
  sluice_test_enqueue(b, "k1", "default", "before", 0);

  /* Kill every client: one blocked in a fetch and an idle one. */
  g_ptr_array_unref(sluice_test_fetch(b, "c1", q_default, 10, 0));
  f = sluice_test_fetch_start(b, q_default, 10, 600000);
  sluice_test_redis_wait_blocked(shared, 1);
  /* A second, idle connection. */
  sluice_test_enqueue(b, "k-other", "other", "x", 0);
  r = sluice_test_redis_command(shared, "CLIENT KILL TYPE normal SKIPME yes");
  ck_assert(r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 2);
  freeReplyObject(r);
  ck_assert_ptr_null(sluice_test_fetch_join(f, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_UNAVAILABLE));
  ck_assert(strstr(error->message, sluice_test_redis_url(shared)) != NULL);
  g_clear_error(&error);

  /* The next operations reconnect by themselves; nothing was lost. */
  sluice_test_enqueue(b, "k2", "default", "after", 0);
  got = sluice_test_fetch(b, "c1", q_default, 10, 0);
  ck_assert_uint_eq(got->len, 1);
  ck_assert(
      sluice_test_bytes_is(sluice_test_delivery_at(got, 0)->payload, "after"));
  ck_assert_int_eq(sluice_test_log_capture_count("lost connection to"), 1);
  ck_assert_int_eq(sluice_test_log_capture_count("is back after"), 1);
}
END_TEST

/* Producers, consumers and a client killer at once (docs/redis.md, R19): the
 * pool stays consistent, producers that retry after a lost reply create
 * no duplicate (idempotency claims), and what is lost is bounded by the
 * fetches whose reply was lost (at most once). */
#define CHURN_PRODUCERS 3
#define CHURN_PER_PRODUCER 400
#define CHURN_FETCH_MAX 50

typedef struct {
  SluiceBroker *broker;
  GMutex lock;
  GHashTable *seen; /* payload -> count */
  guint dups;
  guint failed_fetches;
  gint producers_left;
  gint stop;
  guint producer;
  SluiceTestRedis *server;
} Churn;

typedef struct {
  Churn *churn;
  guint index;
} ChurnProducer;

static gpointer
churn_producer(gpointer data)
{
  ChurnProducer *cp = data;
  Churn *c = cp->churn;

  for (guint i = 0; i < CHURN_PER_PRODUCER; i++) {
    g_autofree gchar *id = g_strdup_printf("p%u-%04u", cp->index, i);
    g_autoptr(GBytes) p = sluice_test_text(id);
    SluiceSubmit item = {
        .id = id, .queue = "default", .payload = p, .dedup_ttl_ms = 600000};

    for (;;) {
      g_autoptr(GError) error = NULL;
      if (sluice_broker_enqueue(c->broker, &item, 1, &error))
        break;
      ck_assert_msg(g_error_matches(error, SLUICE_BROKER_ERROR,
                                    SLUICE_BROKER_ERROR_UNAVAILABLE),
                    "%s", error->message);
      g_usleep(5 * 1000);
    }
  }
  g_atomic_int_add(&c->producers_left, -1);
  return NULL;
}

static gpointer
churn_consumer(gpointer data)
{
  Churn *c = data;
  GPtrArray *got =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free);

  while (!g_atomic_int_get(&c->stop)) {
    g_autoptr(GError) error = NULL;

    g_ptr_array_set_size(got, 0);
    if (!sluice_broker_fetch(c->broker, "c", q_default, CHURN_FETCH_MAX, 50,
                             got, &error)) {
      ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                                SLUICE_BROKER_ERROR_UNAVAILABLE));
      g_mutex_lock(&c->lock);
      c->failed_fetches++;
      g_mutex_unlock(&c->lock);
      g_usleep(5 * 1000);
      continue;
    }
    g_mutex_lock(&c->lock);
    for (guint k = 0; k < got->len; k++) {
      gsize len;
      const gchar *d =
          g_bytes_get_data(sluice_test_delivery_at(got, k)->payload, &len);
      gchar *key = g_strndup(d, len);
      if (g_hash_table_contains(c->seen, key)) {
        c->dups++;
        g_free(key);
      } else {
        g_hash_table_add(c->seen, key);
      }
    }
    g_mutex_unlock(&c->lock);
  }
  g_ptr_array_unref(got);
  return NULL;
}

static gpointer
churn_killer(gpointer data)
{
  Churn *c = data;
  redisContext *ctx = sluice_test_redis_connect(c->server);

  ck_assert_ptr_nonnull(ctx);
  while (g_atomic_int_get(&c->producers_left) > 0) {
    redisReply *r = redisCommand(ctx, "CLIENT KILL TYPE normal SKIPME yes");
    if (r != NULL)
      freeReplyObject(r);
    g_usleep(50 * 1000);
  }
  redisFree(ctx);
  return NULL;
}

START_TEST(test_churn_with_killed_connections)
{
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(NULL);
  Churn c = {0};
  ChurnProducer producers[CHURN_PRODUCERS];
  GThread *threads[CHURN_PRODUCERS + 3];
  guint total = CHURN_PRODUCERS * CHURN_PER_PRODUCER;
  guint fetched;

  c.broker = fast_broker(sluice_test_redis_url(server), "churn", 0);
  c.server = server;
  c.seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_mutex_init(&c.lock);
  c.producers_left = CHURN_PRODUCERS;
  for (guint i = 0; i < CHURN_PRODUCERS; i++) {
    producers[i] = (ChurnProducer){&c, i};
    threads[i] = g_thread_new("producer", churn_producer, &producers[i]);
  }
  threads[CHURN_PRODUCERS] = g_thread_new("consumer", churn_consumer, &c);
  threads[CHURN_PRODUCERS + 1] = g_thread_new("consumer", churn_consumer, &c);
  threads[CHURN_PRODUCERS + 2] = g_thread_new("killer", churn_killer, &c);
  for (guint i = 0; i < CHURN_PRODUCERS; i++)
    g_thread_join(threads[i]);
  g_thread_join(threads[CHURN_PRODUCERS + 2]);
  /* Let the consumers drain what is left. */
  /* (A failed LLEN, on a connection the killer closed, is not 0.) */
  while (sluice_test_redis_llen(server, "churn", "default") != 0)
    g_usleep(10 * 1000);
  g_atomic_int_set(&c.stop, 1);
  g_thread_join(threads[CHURN_PRODUCERS]);
  g_thread_join(threads[CHURN_PRODUCERS + 1]);

  fetched = g_hash_table_size(c.seen);
  ck_assert_uint_eq(c.dups, 0);
  ck_assert_uint_le(fetched, total);
  ck_assert_msg(total - fetched <= c.failed_fetches * CHURN_FETCH_MAX,
                "lost %u with %u failed fetches", total - fetched,
                c.failed_fetches);
  g_hash_table_unref(c.seen);
  g_mutex_clear(&c.lock);
  sluice_broker_unref(c.broker);
}
END_TEST

START_TEST(test_restart_loses_nothing_acknowledged)
{
  SluiceTestRedisOptions opts = {.appendonly = TRUE};
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(&opts);
  g_autoptr(SluiceBroker) b =
      fast_broker(sluice_test_redis_url(server), "restart", 0);
  g_autoptr(GError) error = NULL;
  g_autoptr(GHashTable) seen =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  guint acknowledged = 0;
  gboolean back = FALSE;

  sluice_test_log_capture_reset();
  for (guint i = 0; i < 200; i++) {
    g_autofree gchar *id = g_strdup_printf("m%03u", i);
    sluice_test_enqueue(b, id, "default", id, i % 2 == 0 ? 0 : 1000 + i);
    acknowledged++;
  }
  sluice_test_redis_kill(server, SIGKILL);

  /* Down: UNAVAILABLE naming the URL, and a single warning however many
   * calls fail. */
  for (guint i = 0; i < 3; i++) {
    g_autoptr(GBytes) p = sluice_test_text("x");
    SluiceSubmit item = {.id = "down", .queue = "default", .payload = p};
    ck_assert(!sluice_broker_enqueue(b, &item, 1, &error));
    ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                              SLUICE_BROKER_ERROR_UNAVAILABLE));
    ck_assert(strstr(error->message, sluice_test_redis_url(server)) != NULL);
    g_clear_error(&error);
  }
  ck_assert_int_eq(sluice_test_log_capture_count("lost connection to"), 1);

  ck_assert(sluice_test_redis_restart(server, &error));
  for (guint i = 0; i < 200 && !back; i++) {
    back = sluice_redis_broker_ping(b, NULL);
    if (!back)
      g_usleep(50 * 1000); /* the backoff period */
  }
  ck_assert(back);
  ck_assert_int_eq(sluice_test_log_capture_count("lost connection to"), 1);
  ck_assert_int_eq(sluice_test_log_capture_count("is back after"), 1);

  {
    guint promoted;
    gint64 next;
    ck_assert(
        sluice_broker_promote_due(b, 10000, 1000, &promoted, &next, &error));
    ck_assert_uint_eq(promoted, 100);
  }
  for (;;) {
    g_autoptr(GPtrArray) got = sluice_test_fetch(b, "c1", q_default, 64, 0);
    if (got->len == 0)
      break;
    for (guint k = 0; k < got->len; k++) {
      gsize len;
      const gchar *data =
          g_bytes_get_data(sluice_test_delivery_at(got, k)->payload, &len);
      g_hash_table_add(seen, g_strndup(data, len));
    }
  }
  ck_assert_uint_eq(g_hash_table_size(seen), acknowledged);
}
END_TEST

START_TEST(test_eviction_policy_warned_once)
{
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(NULL);
  g_autoptr(SluiceBroker) b =
      fast_broker(sluice_test_redis_url(server), "evict", 0);
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) woken = NULL;
  SluiceTestFetch *f;

  sluice_test_log_capture_reset();
  freeReplyObject(sluice_test_redis_command(
      server, "CONFIG SET maxmemory-policy allkeys-lru"));
  /* Several connections (one blocked in a fetch), one warning. */
  f = sluice_test_fetch_start(b, q_default, 10, 600000);
  sluice_test_redis_wait_blocked(server, 1);
  ck_assert(sluice_redis_broker_ping(b, &error));
  sluice_test_enqueue(b, "e1", "other", "x", 0);
  sluice_broker_wakeup(b);
  woken = sluice_test_fetch_join(f, NULL);
  ck_assert_int_eq(
      sluice_test_log_capture_count("maxmemory-policy allkeys-lru"), 1);
}
END_TEST

START_TEST(test_noscript_after_flush)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) b = test_broker();
  g_autoptr(GPtrArray) got = NULL;
  redisReply *r;

  sluice_test_enqueue(b, "s1", "default", "one", 0);
  r = sluice_test_redis_command(shared, "SCRIPT FLUSH");
  ck_assert(r != NULL && r->type == REDIS_REPLY_STATUS);
  freeReplyObject(r);
  sluice_test_enqueue(b, "s2", "default", "two", 0);
  got = sluice_test_fetch(b, "c1", q_default, 10, 0);
  ck_assert_uint_eq(got->len, 2);
}
END_TEST

START_TEST(test_auth)
{
  SluiceTestRedisOptions opts = {.requirepass = "s3cret:@/pw",
                                 .acl_user = "sluice",
                                 .acl_password = "user-pw"};
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(&opts);
  guint16 port = sluice_test_redis_port(server);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *acl_url =
      g_strdup_printf("redis://sluice:user-pw@127.0.0.1:%u/0", port);
  g_autofree gchar *wrong_pw =
      g_strdup_printf("redis://:not-it@127.0.0.1:%u/0", port);
  g_autofree gchar *wrong_user =
      g_strdup_printf("redis://nobody:user-pw@127.0.0.1:%u/0", port);
  g_autofree gchar *no_pw = g_strdup_printf("redis://127.0.0.1:%u/0", port);
  SluiceBroker *b;

  /* requirepass, percent-encoded in the URL. */
  b = fast_broker(sluice_test_redis_url(server), "auth", 0);
  ck_assert_msg(sluice_redis_broker_ping(b, &error), "%s",
                error != NULL ? error->message : "");
  sluice_test_enqueue(b, "a1", "default", "x", 0);
  sluice_broker_unref(b);

  /* An ACL user. */
  b = fast_broker(acl_url, "auth", 0);
  ck_assert_msg(sluice_redis_broker_ping(b, &error), "%s",
                error != NULL ? error->message : "");
  g_ptr_array_unref(sluice_test_fetch(b, "c1", q_default, 1, 0));
  sluice_broker_unref(b);

  /* Wrong password, wrong user, none: AUTH errors that say what to do and
   * never show a password. */
  b = fast_broker(wrong_pw, "auth", 0);
  ck_assert(!sluice_redis_broker_ping(b, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_AUTH));
  ck_assert(strstr(error->message, "password") != NULL);
  ck_assert(strstr(error->message, "not-it") == NULL);
  ck_assert(strstr(error->message, "***") != NULL);
  g_clear_error(&error);
  sluice_broker_unref(b);

  b = fast_broker(wrong_user, "auth", 0);
  ck_assert(!sluice_redis_broker_ping(b, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_AUTH));
  ck_assert(strstr(error->message, "user-pw") == NULL);
  g_clear_error(&error);
  sluice_broker_unref(b);

  b = fast_broker(no_pw, "auth", 0);
  ck_assert(!sluice_redis_broker_ping(b, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_AUTH));
  ck_assert(strstr(error->message, "requires a password") != NULL);
  g_clear_error(&error);
  sluice_broker_unref(b);
}
END_TEST

START_TEST(test_unreachable_url)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *url = NULL;
  g_autofree gchar *shown = NULL;
  guint16 port = sluice_test_closed_port();
  SluiceBroker *b;

  url = g_strdup_printf("redis://me:hunter2@127.0.0.1:%u/3", port);
  shown = g_strdup_printf("redis://me:***@127.0.0.1:%u/3", port);
  b = fast_broker(url, "down", 0);
  ck_assert(!sluice_redis_broker_ping(b, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_UNAVAILABLE));
  ck_assert_msg(strstr(error->message, shown) != NULL, "%s", error->message);
  ck_assert(strstr(error->message, "hunter2") == NULL);
  g_clear_error(&error);
  /* Within the backoff period the next call fails at once, the same way. */
  {
    g_autoptr(GPtrArray) out = g_ptr_array_new();
    ck_assert(!sluice_broker_fetch(b, "c", q_default, 1, 0, out, &error));
    ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                              SLUICE_BROKER_ERROR_UNAVAILABLE));
    ck_assert(strstr(error->message, shown) != NULL);
  }
  sluice_broker_unref(b);
}
END_TEST

START_TEST(test_options_checked)
{
  g_autoptr(GError) error = NULL;
  SluiceRedisOptions options;
  const gchar *bad_urls[] = {
      "http://localhost",
      "redis://",
      "redis://host/notadb",
      "redis://user@host",
      "rediss://host?tls_min_version=1.1",
      "unix://relative/path",
      "unix:///tmp/s?db=x",
      "redis://host:6379/1?x=y",
  };

  sluice_redis_options_init(&options);
  for (gsize i = 0; i < G_N_ELEMENTS(bad_urls); i++) {
    options.url = bad_urls[i];
    ck_assert_ptr_null(sluice_redis_broker_new(&options, NULL, &error));
    ck_assert_msg(g_error_matches(error, SLUICE_BROKER_ERROR,
                                  SLUICE_BROKER_ERROR_INVALID),
                  "%s", bad_urls[i]);
    g_clear_error(&error);
  }
  options.url = NULL;
  options.ns = "bad{ns}";
  ck_assert_ptr_null(sluice_redis_broker_new(&options, NULL, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID));
  g_clear_error(&error);

  options.ns = NULL;
  options.mode = (SluiceRedisMode)42;
  ck_assert_ptr_null(sluice_redis_broker_new(&options, NULL, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_UNSUPPORTED));
  ck_assert(strstr(error->message, "SLUICE_REDIS_FAST") != NULL);
  g_clear_error(&error);

  /* The reliable mode is built too (tests/test-redis-reliable-broker.c). */
  options.mode = SLUICE_REDIS_RELIABLE;
  {
    g_autoptr(SluiceBroker) b = sluice_redis_broker_new(&options, NULL, &error);
    ck_assert_ptr_nonnull(b);
    ck_assert_str_eq(sluice_broker_get_name(b), "redis-reliable");
  }

  /* Defaults: reliable mode (the CLI's too), a valid broker without
   * connecting. */
  {
    g_autoptr(SluiceBroker) b = sluice_redis_broker_new(NULL, NULL, &error);
    ck_assert_ptr_nonnull(b);
    ck_assert_str_eq(sluice_broker_get_name(b), "redis-reliable");
  }
  options.mode = SLUICE_REDIS_FAST;
  {
    g_autoptr(SluiceBroker) b = sluice_redis_broker_new(&options, NULL, &error);
    ck_assert_ptr_nonnull(b);
    ck_assert_str_eq(sluice_broker_get_name(b), "redis-fast");
    ck_assert(sluice_broker_supports(b, SLUICE_BROKER_FEATURE_SHARED));
    ck_assert(sluice_broker_supports(b, SLUICE_BROKER_FEATURE_DURABLE));
    ck_assert(sluice_broker_supports(b, SLUICE_BROKER_FEATURE_ORDERED));
    ck_assert(sluice_broker_supports(b, SLUICE_BROKER_FEATURE_JOINS));
    ck_assert(!sluice_broker_supports(b, SLUICE_BROKER_FEATURE_LEASES));
    ck_assert(!sluice_broker_supports(b, SLUICE_BROKER_FEATURE_FENCING));
    ck_assert(!sluice_broker_supports(b, SLUICE_BROKER_FEATURE_IN_FLIGHT));
    ck_assert(!sluice_broker_supports(b, SLUICE_BROKER_FEATURE_CLOCK_TTL));
  }
}
END_TEST

START_TEST(test_url_parsing)
{
  g_autoptr(GError) error = NULL;
  SluiceRedisUrl url;

  ck_assert(sluice_redis_url__parse("redis://us%40r:p%40ss%3Aw@[::1]:7000/4",
                                    &url, &error));
  ck_assert(!url.is_unix);
  ck_assert_str_eq(url.host, "::1");
  ck_assert_int_eq(url.port, 7000);
  ck_assert_int_eq(url.db, 4);
  ck_assert_str_eq(url.user, "us@r");
  ck_assert_str_eq(url.password, "p@ss:w");
  ck_assert_str_eq(url.display, "redis://us%40r:***@[::1]:7000/4");
  sluice_redis_url__clear(&url);

  ck_assert(sluice_redis_url__parse("redis://localhost", &url, &error));
  ck_assert_int_eq(url.port, 6379);
  ck_assert_int_eq(url.db, 0);
  ck_assert_ptr_null(url.password);
  sluice_redis_url__clear(&url);

  ck_assert(
      sluice_redis_url__parse("unix:///run/redis.sock?db=2", &url, &error));
  ck_assert(url.is_unix);
  ck_assert_str_eq(url.path, "/run/redis.sock");
  ck_assert_int_eq(url.db, 2);
  sluice_redis_url__clear(&url);
}
END_TEST

START_TEST(test_unix_socket_and_db)
{
  SluiceTestRedisOptions opts = {.unix_socket = TRUE};
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(&opts);
  g_autofree gchar *url =
      g_strdup_printf("%s?db=2", sluice_test_redis_socket_url(server));
  g_autoptr(SluiceBroker) b = fast_broker(url, "unix", 0);
  g_autoptr(GPtrArray) got = NULL;
  redisReply *r;

  sluice_test_enqueue(b, "u1", "default", "via-socket", 0);
  r = sluice_test_redis_command(server, "SELECT 2");
  freeReplyObject(r);
  ck_assert_int_eq(sluice_test_redis_integer(server, "LLEN {unix}:q:default"),
                   1);
  got = sluice_test_fetch(b, "c1", q_default, 1, 0);
  ck_assert_uint_eq(got->len, 1);
  ck_assert(sluice_test_bytes_is(sluice_test_delivery_at(got, 0)->payload,
                                 "via-socket"));
}
END_TEST

/* A workload that touches every kind of key. */
static void
varied_workload(SluiceBroker *b)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) rec = sluice_test_text("rec");
  g_autoptr(GBytes) p = sluice_test_text("p");
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(SluiceDeadLetter) dl =
      sluice_test_dead_letter("v3", "expired", "v3");
  SluiceSubmit items[3] = {
      {.id = "v1",
       .queue = "q1",
       .payload = p,
       .dedup_ttl_ms = 60000,
       .record = rec,
       .record_ttl_ms = 60000},
      {.id = "v2", .queue = "q2", .payload = p, .due_at = 99999},
      {.id = "v3", .queue = "q1", .payload = p},
  };
  SluiceSettlement s[2] = {{0}};
  SluiceSubmit tick = {
      .id = "tick@1", .queue = "q1", .payload = p, .dedup_ttl_ms = 60000};
  gboolean claimed;

  ck_assert(sluice_broker_enqueue(b, items, 3, &error));
  got = sluice_test_fetch(b, "c1", (const gchar *const[]){"q1", NULL}, 2, 0);
  ck_assert_uint_eq(got->len, 2);
  s[0] = (SluiceSettlement){.delivery = sluice_test_delivery_at(got, 0),
                            .action = SLUICE_SETTLE_ACK,
                            .id = "v1",
                            .record = rec,
                            .record_final = TRUE,
                            .record_ttl_ms = 60000};
  s[1] = (SluiceSettlement){.delivery = sluice_test_delivery_at(got, 1),
                            .action = SLUICE_SETTLE_DEAD_LETTER,
                            .id = "v3",
                            .record = rec,
                            .record_final = TRUE,
                            .record_ttl_ms = 60000,
                            .dead_letter = dl};
  ck_assert(sluice_broker_settle(b, "w", s, 2, &error));
  ck_assert(sluice_broker_put_record(b, "v2", rec, FALSE, 60000, &error));
  ck_assert(sluice_broker_revoke(b, "v2", 99999999999, &error));
  ck_assert(
      sluice_broker_claim_periodic(b, "tick", 1, &tick, &claimed, &error));
  ck_assert(sluice_broker_heartbeat(b, "w", 30000, NULL, 0, &error));
  sluice_test_enqueue(b, "v4", "q3", "p", 0);
}

START_TEST(test_every_key_tagged_and_per_task_keys_expire)
{
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(NULL);
  g_autoptr(SluiceBroker) b =
      fast_broker(sluice_test_redis_url(server), "tagged", 0);
  const gchar *shared_keys[] = {"{tagged}:q:q1",
                                "{tagged}:q:q3",
                                "{tagged}:schedule",
                                "{tagged}:sched:payload",
                                "{tagged}:sched:queue",
                                "{tagged}:revoked",
                                "{tagged}:periodic:tick",
                                "{tagged}:dlq",
                                "{tagged}:dlq:count",
                                "{tagged}:queues",
                                "{tagged}:workers",
                                "{tagged}:meta",
                                "{tagged}:revoked:seq",
                                "{tagged}:revoked:n",
                                "{tagged}:dlq:ids",
                                "{tagged}:dlq:dropped",
                                NULL};
  gchar *cursor = g_strdup("0");
  guint keys = 0, per_task = 0;

  varied_workload(b);
  do {
    redisReply *r =
        sluice_test_redis_command(server, "SCAN %s COUNT 100", cursor);
    ck_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
    g_free(cursor);
    cursor = g_strdup(r->element[0]->str);
    for (size_t i = 0; i < r->element[1]->elements; i++) {
      const gchar *key = r->element[1]->element[i]->str;
      keys++;
      ck_assert_msg(g_str_has_prefix(key, "{tagged}:"), "untagged key %s", key);
      if (!g_strv_contains(shared_keys, key)) {
        per_task++;
        ck_assert_msg(sluice_test_redis_integer(server, "PTTL %s", key) > 0,
                      "per-task key %s has no TTL", key);
      }
    }
    freeReplyObject(r);
  } while (strcmp(cursor, "0") != 0);
  g_free(cursor);
  /* r:v1, r:v2, r:v3, dedup:v1, dedup:tick@1 */
  ck_assert_uint_eq(per_task, 5);
  /* The 11 shared keys the workload makes, plus meta, revoked:seq,
   * revoked:n and dlq:ids. */
  ck_assert_uint_eq(keys, 5 + 15);
}
END_TEST

static gboolean
task_ok_for_mode(SluiceTaskContext *ctx, gpointer data, GError **error)
{
  return TRUE;
}

/* One mode per namespace: the first client records it; a producer or a
 * worker of the other mode is refused with an error naming both, so a fast
 * producer and a reliable worker never silently miss each other. */
static void
assert_mode_refused(const gchar *ns, SluiceRedisMode first,
                    SluiceRedisMode second)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(GError) error = NULL;
  SluiceRedisOptions options;
  g_autoptr(SluiceBroker) a = NULL;
  g_autoptr(SluiceBroker) b = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(SluiceRegistry) registry = sluice_registry_new();
  g_autoptr(SluiceWorker) worker = NULL;
  g_autofree gchar *id = NULL;
  const gchar *theirs = first == SLUICE_REDIS_FAST ? "fast" : "reliable";
  const gchar *mine = second == SLUICE_REDIS_FAST ? "fast" : "reliable";

  sluice_redis_options_init(&options);
  options.url = sluice_test_redis_url(shared);
  options.ns = ns;
  options.mode = first;
  a = sluice_redis_broker_new(&options, NULL, &error);
  client = sluice_client_new(a, NULL, &error);
  id = sluice_client_enqueue(client, "t.x", NULL, NULL, &error);
  ck_assert_msg(id != NULL, "%s", error != NULL ? error->message : "");
  g_clear_pointer(&client, sluice_client_unref);

  options.mode = second;
  b = sluice_redis_broker_new(&options, NULL, &error);
  client = sluice_client_new(b, NULL, &error);
  ck_assert_ptr_null(sluice_client_enqueue(client, "t.x", NULL, NULL, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID));
  ck_assert_msg(strstr(error->message, theirs) != NULL &&
                    strstr(error->message, mine) != NULL &&
                    strstr(error->message, "set this client's mode to ") !=
                        NULL &&
                    strstr(error->message, "(SluiceRedisOptions.mode)") != NULL,
                "%s", error->message);
  g_clear_error(&error);
  ck_assert(sluice_registry_add(registry, "t.x", task_ok_for_mode, NULL, NULL,
                                NULL, &error));
  worker = sluice_worker_new(b, registry, NULL, &error);
  ck_assert_ptr_nonnull(worker);
  ck_assert(!sluice_worker_start(worker, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID));
}

START_TEST(test_one_mode_per_namespace)
{
  assert_mode_refused("mode-a", SLUICE_REDIS_FAST, SLUICE_REDIS_RELIABLE);
  assert_mode_refused("mode-b", SLUICE_REDIS_RELIABLE, SLUICE_REDIS_FAST);
}
END_TEST

/* ---- Layout versions ------------------------------------------------------ */

/* Field @field of {@ns}:meta on the shared server, or NULL. */
static gchar *
meta_get(const gchar *ns, const gchar *field)
{
  redisReply *r = sluice_test_redis_command(sluice_test_redis_shared(),
                                            "HGET {%s}:meta %s", ns, field);
  gchar *value;

  ck_assert(r != NULL);
  value = r->type == REDIS_REPLY_STRING ? g_strndup(r->str, r->len) : NULL;
  freeReplyObject(r);
  return value;
}

/* Runs one step on a new broker of @ns; returns its error (NULL: none). */
static GError *
first_step_error(const gchar *ns)
{
  g_autoptr(SluiceBroker) b =
      fast_broker(sluice_test_redis_url(sluice_test_redis_shared()), ns, 0);
  GError *error = NULL;

  sluice_redis_broker_ping(b, &error);
  return error;
}

static SluiceLayout
layout_of(const gchar *ns)
{
  g_autoptr(GError) error = NULL;
  SluiceRedisOptions options;
  SluiceLayout layout;

  sluice_redis_options_init(&options);
  options.url = sluice_test_redis_url(sluice_test_redis_shared());
  options.ns = ns;
  ck_assert_msg(sluice_redis_get_layout(&options, &layout, &error), "%s",
                error != NULL ? error->message : "");
  return layout;
}

/* A new namespace records the layout version and the script set with its
 * mode; one an older Sluice made (a mode, nothing else) is marked version
 * 1 by its first client of this one; reading the layout changes nothing. */
START_TEST(test_layout_version_recorded)
{
  const SluiceRedisScriptSet *set = sluice_redis_scripts__set();
  g_autoptr(GError) error = NULL;
  SluiceLayout layout;
  gchar *v;

  layout = layout_of("layout-new");
  ck_assert_uint_eq(layout.version, 0);
  ck_assert(!layout.recorded);
  ck_assert_uint_eq(layout.current, SLUICE_REDIS_LAYOUT_VERSION);
  sluice_layout_clear(&layout);
  ck_assert_ptr_null(meta_get("layout-new", "mode"));

  error = first_step_error("layout-new");
  ck_assert_msg(error == NULL, "%s", error->message);
  ck_assert_str_eq((v = meta_get("layout-new", "layout")), "1");
  g_free(v);
  ck_assert_str_eq((v = meta_get("layout-new", "scripts")), set->recorded);
  g_free(v);
  ck_assert_str_eq((v = meta_get("layout-new", "mode")), "fast");
  g_free(v);
  layout = layout_of("layout-new");
  ck_assert_uint_eq(layout.version, 1);
  ck_assert(layout.recorded);
  sluice_layout_clear(&layout);

  sluice_test_redis_integer(sluice_test_redis_shared(),
                            "HSET {layout-old}:meta mode fast");
  layout = layout_of("layout-old");
  ck_assert_uint_eq(layout.version, 1);
  ck_assert(!layout.recorded);
  sluice_layout_clear(&layout);
  ck_assert_ptr_null(meta_get("layout-old", "layout"));
  error = first_step_error("layout-old");
  ck_assert_msg(error == NULL, "%s", error->message);
  ck_assert_str_eq((v = meta_get("layout-old", "layout")), "1");
  g_free(v);
  ck_assert_str_eq((v = meta_get("layout-old", "scripts")), set->recorded);
  g_free(v);
}
END_TEST

/* A namespace one layout version newer than this client is refused in one
 * line that names both and says to upgrade, and is left as it was; a
 * script set of this client's version with other bytes is refused too,
 * and a newer set is run beside (its layout is this one) with one
 * warning. */
START_TEST(test_newer_layout_and_other_scripts_refused)
{
  const SluiceRedisScriptSet *set = sluice_redis_scripts__set();
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(GError) error = NULL;
  g_autofree gchar *other = g_strdup_printf("%u:%040d", set->version, 0);
  g_autofree gchar *newer = g_strdup_printf("%u:%040d", set->version + 1, 0);
  g_autofree gchar *other_says =
      g_strdup_printf("runs script set %u with SHA-1 0000", set->version);
  gchar *v;

  sluice_test_redis_integer(shared,
                            "HSET {layout-newer}:meta mode fast "
                            "layout %d",
                            SLUICE_REDIS_LAYOUT_VERSION + 1);
  error = first_step_error("layout-newer");
  ck_assert(error != NULL);
  ck_assert_msg(g_error_matches(error, SLUICE_BROKER_ERROR,
                                SLUICE_BROKER_ERROR_INVALID) &&
                    strstr(error->message,
                           "layout version 2, newer than this "
                           "program's (1): upgrade this program") != NULL &&
                    strchr(error->message, '\n') == NULL,
                "%s", error->message);
  g_clear_error(&error);
  ck_assert_str_eq((v = meta_get("layout-newer", "layout")), "2");
  g_free(v);
  ck_assert_ptr_null(meta_get("layout-newer", "scripts"));

  sluice_test_redis_integer(shared,
                            "HSET {layout-other}:meta mode fast layout 1 "
                            "scripts %s",
                            other);
  error = first_step_error("layout-other");
  ck_assert(error != NULL);
  ck_assert_msg(strstr(error->message, other_says) != NULL &&
                    strstr(error->message, set->sha1) != NULL,
                "%s", error->message);
  g_clear_error(&error);

  sluice_test_log_capture_reset();
  sluice_test_redis_integer(shared,
                            "HSET {layout-ahead}:meta mode fast layout 1 "
                            "scripts %s",
                            newer);
  error = first_step_error("layout-ahead");
  ck_assert_msg(error == NULL, "%s", error->message);
  ck_assert(sluice_test_log_capture_contains("newer script set"));
  ck_assert_str_eq((v = meta_get("layout-ahead", "scripts")), newer);
  g_free(v);
}
END_TEST

/* The script set's version (lua/VERSION) names the SHA-1 of the files
 * this library holds: a change to a .lua file without a new version would
 * have every client of the old bytes refuse every client of the new
 * ones. */
START_TEST(test_script_set_version_names_its_files)
{
  const SluiceRedisScriptSet *set = sluice_redis_scripts__set();

  ck_assert_msg(strcmp(set->sha1, set->listed_sha1) == 0,
                "the Lua scripts changed but brokers/redis/lua/VERSION did "
                "not: write \"version %u\" and \"sha1 %s\" there (and run "
                "make client-lua)",
                set->version + 1, set->sha1);
}
END_TEST

START_TEST(test_namespaces_isolated)
{
  SluiceTestRedis *shared = sluice_test_redis_shared();
  g_autoptr(SluiceBroker) a =
      fast_broker(sluice_test_redis_url(shared), "iso-a", 0);
  g_autoptr(SluiceBroker) b =
      fast_broker(sluice_test_redis_url(shared), "iso-b", 0);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) rec = sluice_test_text("final");
  g_autoptr(GPtrArray) got = NULL;
  GBytes *read = NULL;
  SluiceBrokerStats stats;

  sluice_test_bury(a, "buried", SLUICE_DLQ_EXPIRED);
  sluice_test_enqueue(a, "same-id", "default", "from-a", 0);
  ck_assert(sluice_broker_put_record(a, "same-id", rec, TRUE, 60000, &error));

  got = sluice_test_fetch(b, "c1", q_default, 10, 0);
  ck_assert_uint_eq(got->len, 0);
  ck_assert(sluice_broker_wait_record(b, "same-id", 100, &read, &error));
  ck_assert_ptr_null(read);
  sluice_broker_stats_init(&stats);
  ck_assert(sluice_broker_stats(b, NULL, &stats, &error));
  ck_assert_uint_eq(stats.queues->len, 0);
  ck_assert_int_eq(stats.dead_letters, 0);
  sluice_broker_stats_clear(&stats);

  g_clear_pointer(&got, g_ptr_array_unref);
  got = sluice_test_fetch(a, "c1", q_default, 10, 0);
  ck_assert_uint_eq(got->len, 1);
  ck_assert(
      sluice_test_bytes_is(sluice_test_delivery_at(got, 0)->payload, "from-a"));
  /* Clean up the shared server for the other tests. */
  sluice_test_redis_integer(shared, "DEL {iso-a}:q:default {iso-a}:dlq");
}
END_TEST

START_TEST(test_oom_refuses_work_but_drains)
{
  g_autoptr(SluiceTestRedis) server = sluice_test_redis_own(NULL);
  g_autoptr(SluiceBroker) b =
      fast_broker(sluice_test_redis_url(server), "oom", 0);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) p = sluice_test_text("p");
  g_autoptr(GBytes) rec = sluice_test_text("done");
  g_autoptr(GBytes) retry = sluice_test_text("again");
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GBytes) read = NULL;
  SluiceSubmit item = {.id = "new", .queue = "default", .payload = p};
  SluiceSettlement s[2] = {{0}};

  sluice_test_enqueue(b, "o1", "default", "one", 0);
  sluice_test_enqueue(b, "o2", "default", "two", 0);
  sluice_test_enqueue(b, "o3", "default", "three", 0);
  got = sluice_test_fetch(b, "c1", q_default, 3, 0);
  ck_assert_uint_eq(got->len, 3);
  /* Fresh scripts on the server, so the drain below also loads one. */
  sluice_test_redis_fill(server);

  ck_assert(!sluice_broker_enqueue(b, &item, 1, &error));
  ck_assert_msg(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_FULL),
      "%s", error->message);
  g_clear_error(&error);

  s[0] = (SluiceSettlement){.delivery = sluice_test_delivery_at(got, 0),
                            .action = SLUICE_SETTLE_ACK,
                            .id = "o1",
                            .record = rec,
                            .record_final = TRUE,
                            .record_ttl_ms = 60000};
  s[1] = (SluiceSettlement){.delivery = sluice_test_delivery_at(got, 1),
                            .action = SLUICE_SETTLE_RETRY,
                            .id = "o2",
                            .reschedule_payload = retry,
                            .reschedule_at = 1};
  ck_assert_msg(sluice_broker_settle(b, "w", s, 2, &error), "%s",
                error != NULL ? error->message : "");
  ck_assert(sluice_broker_get_record(b, "o1", &read, &error));
  ck_assert(sluice_test_bytes_is(read, "done"));
  g_clear_pointer(&read, g_bytes_unref);
  /* Records only: the plain SET is refused, the allow-oom script is not. */
  s[0] = (SluiceSettlement){.delivery = sluice_test_delivery_at(got, 2),
                            .action = SLUICE_SETTLE_ACK,
                            .id = "o3",
                            .record = rec,
                            .record_final = TRUE,
                            .record_ttl_ms = 60000};
  ck_assert_msg(sluice_broker_settle(b, "w", s, 1, &error), "%s",
                error != NULL ? error->message : "");
  ck_assert(sluice_broker_get_record(b, "o3", &read, &error));
  ck_assert(sluice_test_bytes_is(read, "done"));

  sluice_test_redis_unfill(server);
  ck_assert(sluice_broker_enqueue(b, &item, 1, &error));
}
END_TEST

/* ---- The Lua files ------------------------------------------------------ */

/* The key names are written twice, as SLUICE_REDIS_K_* for C and in
 * lua/prelude.lua for the scripts (and the other clients): they must
 * agree, one line per key, nothing more. */
START_TEST(test_prelude_names_every_key)
{
  static const struct {
    const gchar *local;
    const gchar *suffix;
  } keys[] = {
      {"K_QUEUE", SLUICE_REDIS_K_QUEUE},
      {"K_STREAM", SLUICE_REDIS_K_STREAM},
      {"K_RECORD", SLUICE_REDIS_K_RECORD},
      {"K_DONE", SLUICE_REDIS_K_DONE},
      {"K_PERIODIC", SLUICE_REDIS_K_PERIODIC},
      {"K_DEDUP", SLUICE_REDIS_K_DEDUP},
      {"K_ALIVE", SLUICE_REDIS_K_ALIVE},
      {"K_SCHEDULE", SLUICE_REDIS_K_SCHEDULE},
      {"K_SCHED_PAYLOAD", SLUICE_REDIS_K_SCHED_PAYLOAD},
      {"K_SCHED_QUEUE", SLUICE_REDIS_K_SCHED_QUEUE},
      {"K_REVOKED", SLUICE_REDIS_K_REVOKED},
      {"K_DLQ", SLUICE_REDIS_K_DLQ},
      {"K_DLQ_COUNT", SLUICE_REDIS_K_DLQ_COUNT},
      {"K_QUEUES", SLUICE_REDIS_K_QUEUES},
      {"K_WORKERS", SLUICE_REDIS_K_WORKERS},
      {"K_STALE", SLUICE_REDIS_K_STALE},
      {"K_META", SLUICE_REDIS_K_META},
      {"K_REVOKED_SEQ", SLUICE_REDIS_K_REVOKED_SEQ},
      {"K_REVOKED_N", SLUICE_REDIS_K_REVOKED_N},
      {"K_DLQ_IDS", SLUICE_REDIS_K_DLQ_IDS},
      {"K_DLQ_DROPPED", SLUICE_REDIS_K_DLQ_DROPPED},
      {"K_WINFO", SLUICE_REDIS_K_WINFO},
      {"K_JOIN", SLUICE_REDIS_K_JOIN},
      {"K_PROGRESS", SLUICE_REDIS_K_PROGRESS},
      {"K_EVENTS", SLUICE_REDIS_K_EVENTS},
  };
  g_auto(GStrv) lines = g_strsplit(sluice_redis_lua__prelude, "\n", -1);
  guint locals = 0;

  for (guint i = 0; i < G_N_ELEMENTS(keys); i++) {
    g_autofree gchar *line =
        g_strdup_printf("local %s = P .. '%s'", keys[i].local, keys[i].suffix);
    ck_assert_msg(g_strv_contains((const gchar *const *)lines, line),
                  "prelude.lua lacks: %s", line);
  }
  for (guint i = 0; lines[i] != NULL; i++)
    locals += g_str_has_prefix(lines[i], "local K_");
  ck_assert_uint_eq(locals, G_N_ELEMENTS(keys));
  ck_assert_ptr_nonnull(strstr(sluice_redis_lua__transport_reliable,
                               "\nlocal GROUP = '" SLUICE_REDIS_RELIABLE_GROUP
                               "'\n"));
}
END_TEST

/* ---- Suite --------------------------------------------------------------- */

static Suite *
redis_suite(void)
{
  Suite *s = suite_create("redis-fast");
  TCase *slots = tcase_create("slots");
  TCase *redis = tcase_create("redis");

  tcase_add_unchecked_fixture(slots, sluice_test_redis_shared_setup,
                              sluice_test_redis_shared_teardown);
  tcase_set_timeout(slots, 60);
  tcase_add_test(slots, test_enqueue_batch_one_round_trip);
  tcase_add_test(slots, test_enqueue_claim_is_a_key_that_expires);
  tcase_add_test(slots, test_fetch_pops_from_one_list_per_call);
  tcase_add_test(slots, test_fetch_blocks_in_blmpop_only_when_asked);
  tcase_add_test(slots, test_pause_reaches_a_blocked_fetch);
  tcase_add_test(slots, test_settle_record_has_its_ttl);
  tcase_add_test(slots, test_settle_noop_costs_nothing);
  tcase_add_test(slots, test_settle_batch_one_round_trip);
  tcase_add_test(slots, test_dead_letter_is_completed_from_the_delivery);
  tcase_add_test(slots, test_release_goes_back_to_the_consuming_end);
  tcase_add_test(slots, test_cancel_scheduled_deletes_the_payload);
  tcase_add_test(slots, test_wait_record_wakes_on_notification);
  tcase_add_test(slots, test_revocations_are_sorted_by_expiry_and_pruned);
  tcase_add_test(slots, test_dead_letter_cap_trims_the_stream);
  tcase_add_test(slots, test_stats_list_workers_by_heartbeat);
  tcase_add_test(slots, test_list_queued_is_one_lrange_per_page);
  tcase_add_test(slots, test_replace_payloads_rewrites_in_place);
  suite_add_tcase(s, slots);

  tcase_add_unchecked_fixture(redis, sluice_test_redis_shared_setup,
                              sluice_test_redis_shared_teardown);
  tcase_set_timeout(redis, 90);
  tcase_add_test(redis, test_reconnect_after_client_kill);
  tcase_add_test(redis, test_churn_with_killed_connections);
  tcase_add_test(redis, test_restart_loses_nothing_acknowledged);
  tcase_add_test(redis, test_eviction_policy_warned_once);
  tcase_add_test(redis, test_noscript_after_flush);
  tcase_add_test(redis, test_auth);
  tcase_add_test(redis, test_unreachable_url);
  tcase_add_test(redis, test_options_checked);
  tcase_add_test(redis, test_url_parsing);
  tcase_add_test(redis, test_unix_socket_and_db);
  tcase_add_test(redis, test_every_key_tagged_and_per_task_keys_expire);
  tcase_add_test(redis, test_namespaces_isolated);
  tcase_add_test(redis, test_one_mode_per_namespace);
  tcase_add_test(redis, test_layout_version_recorded);
  tcase_add_test(redis, test_newer_layout_and_other_scripts_refused);
  tcase_add_test(redis, test_script_set_version_names_its_files);
  tcase_add_test(redis, test_oom_refuses_work_but_drains);
  tcase_add_test(redis, test_prelude_names_every_key);
  suite_add_tcase(s, redis);
  return s;
}

int
main(void)
{
  g_autofree gchar *server = sluice_test_redis_require();
  SRunner *runner = srunner_create(redis_suite());
  int failed;

  /* The reconnection tests count the lines they caused. */
  sluice_test_log_capture_install();
  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_ENV);
  failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

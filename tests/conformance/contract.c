/* contract.c - the broker contract of <sluice/sys/broker.h>, slot by slot.
 *
 * conformance.c drives a broker the way users do, with a client and a
 * worker on top. These scenarios call the slots themselves, through the
 * dispatch functions (sluice_broker_enqueue, _fetch, _settle, ...), on a
 * fresh broker from the same factory, and check what each slot promises:
 * what enqueue reports as `existed`, that fetch honours `max` and the
 * priority of its queues, that a repeated settle is harmless, that RETRY
 * and DEAD_LETTER happen with the acknowledgement, that promote_due never
 * promotes twice, what releases, revocations, periodic claims, dead
 * letters, lookups, announcements, stats, listings, pauses and moves on
 * the schedule do. What needs a capability
 * (LEASES, FENCING, IN_FLIGHT, CLOCK_TTL) or an optional slot is checked
 * only where the broker declares it, never by the broker's name.
 *
 * What only one store can show (Redis keys, scripts, round trips) stays in
 * that broker's own tests (tests/test-redis-*.c).
 *
 * Each scenario waits for what other threads do with bounded, generous
 * deadlines; where a lease must lapse it lets real time pass (and advances
 * the fake clock as much, for a broker whose leases follow it).
 */
#include "config.h"

#include <string.h>

#include "tests/conformance/contract.h"
#include "tests/helpers/broker-calls.h"

static const SluiceConformanceFactory *factory;

static const gchar *const q_default[] = {"default", NULL};

typedef struct {
  SluiceClock *clock;
  SluiceBroker *broker;
  guint64 caps;
} Contract;

/* The capabilities of @b as bits, asked through sluice_broker_supports(),
 * so that a scenario can ask for two at once. */
static guint64
caps_of(SluiceBroker *b)
{
  static const struct {
    SluiceBrokerFeature feature;
    guint64 cap;
  } caps[] = {
      {SLUICE_BROKER_FEATURE_SHARED, SLUICE_BROKER_CAP_SHARED},
      {SLUICE_BROKER_FEATURE_DURABLE, SLUICE_BROKER_CAP_DURABLE},
      {SLUICE_BROKER_FEATURE_LEASES, SLUICE_BROKER_CAP_LEASES},
      {SLUICE_BROKER_FEATURE_FENCING, SLUICE_BROKER_CAP_FENCING},
      {SLUICE_BROKER_FEATURE_CLOCK_TTL, SLUICE_BROKER_CAP_CLOCK_TTL},
      {SLUICE_BROKER_FEATURE_IN_FLIGHT, SLUICE_BROKER_CAP_IN_FLIGHT},
      {SLUICE_BROKER_FEATURE_ORDERED, SLUICE_BROKER_CAP_ORDERED},
  };
  guint64 bits = 0;

  for (gsize i = 0; i < G_N_ELEMENTS(caps); i++)
    if (sluice_broker_supports(b, caps[i].feature))
      bits |= caps[i].cap;
  return bits;
}

static Contract *
contract_new_full(guint dead_letter_max)
{
  Contract *c = g_new0(Contract, 1);
  g_autoptr(GError) error = NULL;

  c->clock = sluice_clock_new_fake(SLUICE_TEST_EPOCH_MS);
  c->broker = factory->create(c->clock, dead_letter_max, factory->data, &error);
  ck_assert_msg(c->broker != NULL, "%s: cannot create the broker: %s",
                factory->name, error != NULL ? error->message : "?");
  c->caps = caps_of(c->broker);
  return c;
}

static Contract *
contract_new(void)
{
  return contract_new_full(100);
}

static void
contract_free(Contract *c)
{
  sluice_broker_unref(c->broker);
  sluice_clock_unref(c->clock);
  g_free(c);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC(Contract, contract_free)

static gboolean
has(const Contract *c, guint64 caps)
{
  return (c->caps & caps) == caps;
}

/* Without SLUICE_BROKER_CAP_ORDERED, a broker hands out the messages of a
 * queue in an order of its own: scenarios that check an order sort what
 * they got by payload first (their payloads sort in the order they were
 * enqueued), and keep checking that each message came once. */
static gint
delivery_payload_cmp(gconstpointer a, gconstpointer b)
{
  const SluiceDelivery *x = *(SluiceDelivery *const *)a;
  const SluiceDelivery *y = *(SluiceDelivery *const *)b;

  return g_bytes_compare(x->payload, y->payload);
}

static void
order_unless_ordered(const Contract *c, GPtrArray *deliveries)
{
  if (!has(c, SLUICE_BROKER_CAP_ORDERED))
    g_ptr_array_sort(deliveries, delivery_payload_cmp);
}

/* Lets @ms of real time pass, and of the fake clock. */
static void
pass_time(Contract *c, gint64 ms)
{
  g_usleep(ms * 1000);
  sluice_clock_advance(c->clock, ms);
}

static SluiceDelivery *
at(GPtrArray *deliveries, guint i)
{
  return sluice_test_delivery_at(deliveries, i);
}

/* Fetches from @queues until a fetch comes back empty; returns everything
 * fetched, in order. */
static GPtrArray *
fetch_all(Contract *c, const gchar *consumer, const gchar *const *queues,
          guint max)
{
  GPtrArray *all =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free);

  for (guint round = 0; round < 1000; round++) {
    g_autoptr(GPtrArray) got =
        sluice_test_fetch(c->broker, consumer, queues, max, 0);
    ck_assert_uint_le(got->len, max);
    if (got->len == 0)
      return all;
    while (got->len > 0)
      g_ptr_array_add(all, g_ptr_array_steal_index(got, 0));
  }
  ck_abort_msg("fetch never came back empty");
  return all;
}

/* What stats say in_flight is when @n deliveries are out. */
static gint64
in_flight_of(const Contract *c, gint64 n)
{
  return has(c, SLUICE_BROKER_CAP_IN_FLIGHT) ? n : -1;
}

/* ---- produce ------------------------------------------------------------- */

START_TEST(enqueue_then_fetch_hands_a_message_out_once)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GPtrArray) got = NULL;

  sluice_test_enqueue(c->broker, "id-1", "default", "hello", 0);
  got = sluice_test_fetch(c->broker, "c1", q_default, 10, 0);
  ck_assert_uint_eq(got->len, 1);
  ck_assert(sluice_test_bytes_is(at(got, 0)->payload, "hello"));
  ck_assert_str_eq(at(got, 0)->queue, "default");
  ck_assert_uint_eq(at(got, 0)->delivery_count, 1);
  g_clear_pointer(&got, g_ptr_array_unref);
  got = sluice_test_fetch(c->broker, "c1", q_default, 10, 0);
  ck_assert_uint_eq(got->len, 0);
}
END_TEST

START_TEST(enqueue_with_a_claim_reports_existed_and_writes_once)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) p = sluice_test_text("payload");
  g_autoptr(GBytes) rec = sluice_test_text("queued");
  g_autoptr(GBytes) read = NULL;
  g_autoptr(GPtrArray) got = NULL;
  SluiceBrokerStats stats;
  SluiceSubmit items[3] = {
      {.id = "dup",
       .queue = "default",
       .payload = p,
       .dedup_ttl_ms = 60000,
       .record = rec,
       .record_ttl_ms = 60000},
      {.id = "dup", .queue = "default", .payload = p, .dedup_ttl_ms = 60000},
      {.id = "other", .queue = "default", .payload = p, .dedup_ttl_ms = 60000},
  };

  ck_assert(sluice_broker_enqueue(c->broker, items, 3, &error));
  ck_assert(!items[0].existed);
  ck_assert(items[1].existed); /* the same id later in the same batch */
  ck_assert(!items[2].existed);
  stats = sluice_test_stats(c->broker, q_default);
  ck_assert_int_eq(sluice_test_queue_ready(&stats, "default"), 2);
  sluice_broker_stats_clear(&stats);

  /* A producer that submits again after a lost reply writes nothing
   * twice. */
  ck_assert(sluice_broker_enqueue(c->broker, items, 1, &error));
  ck_assert(items[0].existed);
  stats = sluice_test_stats(c->broker, q_default);
  ck_assert_int_eq(sluice_test_queue_ready(&stats, "default"), 2);
  sluice_broker_stats_clear(&stats);

  /* The non-final record went in with the first write. */
  ck_assert(sluice_broker_get_record(c->broker, "dup", &read, &error));
  ck_assert(sluice_test_bytes_is(read, "queued"));
  got = fetch_all(c, "c1", q_default, 10);
  ck_assert_uint_eq(got->len, 2);
}
END_TEST

START_TEST(batch_keeps_its_order_across_kinds_of_items)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) p1 = sluice_test_text("1");
  g_autoptr(GBytes) p2 = sluice_test_text("2");
  g_autoptr(GBytes) p3 = sluice_test_text("3");
  g_autoptr(GBytes) p4 = sluice_test_text("4");
  g_autoptr(GBytes) p5 = sluice_test_text("5");
  g_autoptr(GBytes) p6 = sluice_test_text("6");
  g_autoptr(GBytes) rec = sluice_test_text("queued");
  g_autoptr(GPtrArray) got = NULL;
  SluiceBrokerStats stats;
  /* Plain items and items with a claim or a record, interleaved, on two
   * queues, one of them delayed. */
  SluiceSubmit items[6] = {
      {.id = "m1", .queue = "default", .payload = p1},
      {.id = "m2", .queue = "default", .payload = p2, .dedup_ttl_ms = 60000},
      {.id = "m3", .queue = "other", .payload = p3},
      {.id = "m4",
       .queue = "default",
       .payload = p4,
       .record = rec,
       .record_ttl_ms = 60000},
      {.id = "m5", .queue = "default", .payload = p5, .due_at = 5000},
      {.id = "m6", .queue = "default", .payload = p6},
  };

  ck_assert(sluice_broker_enqueue(c->broker, items, 6, &error));
  got = fetch_all(c, "c1", q_default, 10);
  ck_assert_uint_eq(got->len, 4);
  order_unless_ordered(c, got);
  ck_assert(sluice_test_bytes_is(at(got, 0)->payload, "1"));
  ck_assert(sluice_test_bytes_is(at(got, 1)->payload, "2"));
  ck_assert(sluice_test_bytes_is(at(got, 2)->payload, "4"));
  ck_assert(sluice_test_bytes_is(at(got, 3)->payload, "6"));
  stats = sluice_test_stats(c->broker, NULL);
  ck_assert_int_eq(stats.scheduled, 1);
  ck_assert_uint_eq(stats.queues->len, 2);
  sluice_broker_stats_clear(&stats);
}
END_TEST

/* ---- schedule ------------------------------------------------------------ */

START_TEST(promote_due_moves_the_earliest_first_and_reports_the_next)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) got = NULL;
  guint promoted = 99;
  gint64 next = -1;

  sluice_test_enqueue(c->broker, "late", "default", "late", 3000);
  sluice_test_enqueue(c->broker, "early", "default", "early", 1000);
  sluice_test_enqueue(c->broker, "middle", "default", "middle", 2000);

  /* Nothing is ready before its time. */
  got = sluice_test_fetch(c->broker, "c1", q_default, 10, 0);
  ck_assert_uint_eq(got->len, 0);
  g_clear_pointer(&got, g_ptr_array_unref);
  ck_assert(
      sluice_broker_promote_due(c->broker, 999, 10, &promoted, &next, &error));
  ck_assert_uint_eq(promoted, 0);
  ck_assert_int_eq(next, 1000);

  /* Earliest first, at most max, and the next due time reported. */
  ck_assert(
      sluice_broker_promote_due(c->broker, 2500, 1, &promoted, &next, &error));
  ck_assert_uint_eq(promoted, 1);
  ck_assert_int_eq(next, 2000);
  ck_assert(
      sluice_broker_promote_due(c->broker, 2500, 10, &promoted, &next, &error));
  ck_assert_uint_eq(promoted, 1);
  ck_assert_int_eq(next, 3000);
  got = fetch_all(c, "c1", q_default, 10);
  ck_assert_uint_eq(got->len, 2);
  ck_assert(sluice_test_bytes_is(at(got, 0)->payload, "early"));
  ck_assert(sluice_test_bytes_is(at(got, 1)->payload, "middle"));
  g_clear_pointer(&got, g_ptr_array_unref);

  ck_assert(
      sluice_broker_promote_due(c->broker, 5000, 10, &promoted, &next, &error));
  ck_assert_uint_eq(promoted, 1);
  ck_assert_int_eq(next, 0); /* the schedule is empty */
  got = fetch_all(c, "c1", q_default, 10);
  ck_assert_uint_eq(got->len, 1);
  ck_assert(sluice_test_bytes_is(at(got, 0)->payload, "late"));
}
END_TEST

typedef struct {
  SluiceBroker *broker;
  guint promoted;
  gboolean failed;
} PromoteJob;

static gpointer
promote_thread(gpointer data)
{
  PromoteJob *job = data;
  gint64 next;

  for (guint round = 0; round < 20; round++) {
    guint n = 0;
    if (!sluice_broker_promote_due(job->broker, 1000, 7, &n, &next, NULL)) {
      job->failed = TRUE;
      break;
    }
    job->promoted += n;
  }
  return NULL;
}

START_TEST(promote_due_never_promotes_twice)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GHashTable) seen =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  PromoteJob jobs[3];
  GThread *threads[3];
  SluiceBrokerStats stats;

  for (guint i = 0; i < 60; i++) {
    g_autofree gchar *id = g_strdup_printf("s%u", i);
    sluice_test_enqueue(c->broker, id, "default", id, 100 + i);
  }
  for (guint t = 0; t < 3; t++) {
    jobs[t] = (PromoteJob){c->broker, 0, FALSE};
    threads[t] = g_thread_new("promote", promote_thread, &jobs[t]);
  }
  for (guint t = 0; t < 3; t++) {
    g_thread_join(threads[t]);
    ck_assert(!jobs[t].failed);
  }
  ck_assert_uint_eq(jobs[0].promoted + jobs[1].promoted + jobs[2].promoted, 60);
  stats = sluice_test_stats(c->broker, q_default);
  ck_assert_int_eq(sluice_test_queue_ready(&stats, "default"), 60);
  ck_assert_int_eq(stats.scheduled, 0);
  sluice_broker_stats_clear(&stats);
  got = fetch_all(c, "c1", q_default, 25);
  for (guint i = 0; i < got->len; i++)
    g_hash_table_add(seen, sluice_test_bytes_str(at(got, i)->payload));
  ck_assert_uint_eq(got->len, 60);
  ck_assert_uint_eq(g_hash_table_size(seen), 60);
}
END_TEST

START_TEST(cancel_scheduled_removes_the_entry_and_writes_the_record)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) rec = sluice_test_text("cancelled");
  g_autoptr(GBytes) read = NULL;
  SluiceBrokerStats stats;
  gboolean removed = FALSE;
  guint promoted;
  gint64 next;

  sluice_test_enqueue(c->broker, "later", "default", "later", 5000);
  ck_assert(sluice_broker_cancel_scheduled(c->broker, "later", rec, 60000,
                                           &removed, &error));
  ck_assert(removed);
  ck_assert(sluice_broker_get_record(c->broker, "later", &read, &error));
  ck_assert(sluice_test_bytes_is(read, "cancelled"));
  stats = sluice_test_stats(c->broker, NULL);
  ck_assert_int_eq(stats.scheduled, 0);
  sluice_broker_stats_clear(&stats);
  ck_assert(
      sluice_broker_promote_due(c->broker, 9000, 10, &promoted, &next, &error));
  ck_assert_uint_eq(promoted, 0);

  /* Not scheduled: nothing removed, nothing written. */
  ck_assert(sluice_broker_cancel_scheduled(c->broker, "never", rec, 60000,
                                           &removed, &error));
  ck_assert(!removed);
  g_clear_pointer(&read, g_bytes_unref);
  ck_assert(sluice_broker_get_record(c->broker, "never", &read, &error));
  ck_assert_ptr_null(read);
}
END_TEST

/* ---- consume ------------------------------------------------------------- */

/* A message of queues[i] goes before one of queues[i+1]; whether one fetch
 * also takes from the next queue is the broker's choice. */
START_TEST(fetch_takes_at_most_max_in_the_order_of_its_queues)
{
  g_autoptr(Contract) c = contract_new();
  const gchar *const queues[] = {"high", "low", NULL};
  static const gchar *const rest[] = {"high-2", "low-0", "low-1", "low-2"};
  g_autoptr(GPtrArray) got = NULL;

  for (guint i = 0; i < 3; i++) {
    g_autofree gchar *lo = g_strdup_printf("low-%u", i);
    g_autofree gchar *hi = g_strdup_printf("high-%u", i);
    sluice_test_enqueue(c->broker, lo, "low", lo, 0);
    sluice_test_enqueue(c->broker, hi, "high", hi, 0);
  }
  got = sluice_test_fetch(c->broker, "c1", queues, 2, 0);
  ck_assert_uint_eq(got->len, 2);
  if (!has(c, SLUICE_BROKER_CAP_ORDERED)) {
    /* No order to check: the six come out once each, at most max a time. */
    g_autoptr(GPtrArray) rest_got = fetch_all(c, "c1", queues, 2);
    g_autoptr(GHashTable) seen = g_hash_table_new(g_bytes_hash, g_bytes_equal);

    ck_assert_uint_eq(got->len + rest_got->len, 6);
    for (guint i = 0; i < got->len; i++)
      ck_assert(g_hash_table_add(seen, at(got, i)->payload));
    for (guint i = 0; i < rest_got->len; i++)
      ck_assert(g_hash_table_add(seen, at(rest_got, i)->payload));
    return;
  }
  ck_assert_str_eq(at(got, 0)->queue, "high");
  ck_assert(sluice_test_bytes_is(at(got, 0)->payload, "high-0"));
  ck_assert(sluice_test_bytes_is(at(got, 1)->payload, "high-1"));
  g_clear_pointer(&got, g_ptr_array_unref);

  got = fetch_all(c, "c1", queues, 10);
  ck_assert_uint_eq(got->len, G_N_ELEMENTS(rest));
  for (guint i = 0; i < G_N_ELEMENTS(rest); i++) {
    ck_assert_msg(sluice_test_bytes_is(at(got, i)->payload, rest[i]),
                  "delivery %u is not %s", i, rest[i]);
    ck_assert_str_eq(at(got, i)->queue, i == 0 ? "high" : "low");
  }
}
END_TEST

START_TEST(fetch_blocks_until_a_message_arrives_on_any_of_its_queues)
{
  g_autoptr(Contract) c = contract_new();
  const gchar *const queues[] = {"a", "b", NULL};
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GError) error = NULL;
  SluiceTestFetch *f;

  /* block_ms 0 never blocks, even on empty queues. */
  got = sluice_test_fetch(c->broker, "c1", q_default, 5, 0);
  ck_assert_uint_eq(got->len, 0);
  g_clear_pointer(&got, g_ptr_array_unref);

  /* Whether the fetch blocks before or after the message arrives, it gets
   * the message (a fetch that missed it would wait out its block_ms, longer
   * than the test may take). */
  f = sluice_test_fetch_start(c->broker, queues, 10, 60000);
  sluice_test_enqueue(c->broker, "b1", "b", "arrived", 0);
  got = sluice_test_fetch_join(f, &error);
  ck_assert_msg(got != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_uint_eq(got->len, 1);
  ck_assert_str_eq(at(got, 0)->queue, "b");
  ck_assert(sluice_test_bytes_is(at(got, 0)->payload, "arrived"));
}
END_TEST

START_TEST(wakeup_ends_a_blocked_fetch)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GError) error = NULL;
  gint64 deadline = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;
  SluiceTestFetch *f;

  /* A wakeup only ends fetches blocked at that moment: wake until the
   * fetch has returned. Without wakeups it would block for ten minutes. */
  f = sluice_test_fetch_start(c->broker, q_default, 10, 600000);
  while (!sluice_test_fetch_returned(f)) {
    ck_assert_msg(g_get_monotonic_time() < deadline,
                  "wakeup did not end the blocked fetch");
    sluice_broker_wakeup(c->broker);
    g_usleep(10 * 1000);
  }
  got = sluice_test_fetch_join(f, &error);
  ck_assert_msg(got != NULL, "%s", error != NULL ? error->message : "");
  ck_assert_uint_eq(got->len, 0);
  g_clear_pointer(&got, g_ptr_array_unref);

  /* The broker fetches as before. */
  sluice_test_enqueue(c->broker, "after", "default", "after", 0);
  got = sluice_test_fetch(c->broker, "c1", q_default, 1, 0);
  ck_assert_uint_eq(got->len, 1);
}
END_TEST

/* ---- settle -------------------------------------------------------------- */

START_TEST(settle_ack_writes_the_record_with_the_acknowledgement)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GPtrArray) again = NULL;
  g_autoptr(GBytes) rec = sluice_test_text("succeeded:42");
  g_autoptr(GBytes) read = NULL;
  SluiceBrokerStats stats;
  SluiceSettlement s = {0};

  sluice_test_enqueue(c->broker, "t1", "default", "work", 0);
  got = sluice_test_fetch(c->broker, "c1", q_default, 1, 0);
  s.delivery = at(got, 0);
  s.action = SLUICE_SETTLE_ACK;
  s.id = "t1";
  s.record = rec;
  s.record_final = TRUE;
  s.record_ttl_ms = 60000;
  ck_assert_int_eq(sluice_test_settle_one(c->broker, "c1", &s),
                   SLUICE_SETTLE_DONE);
  ck_assert(sluice_broker_get_record(c->broker, "t1", &read, &error));
  ck_assert(sluice_test_bytes_is(read, "succeeded:42"));
  again = sluice_test_fetch(c->broker, "c1", q_default, 1, 0);
  ck_assert_uint_eq(again->len, 0);
  stats = sluice_test_stats(c->broker, NULL);
  ck_assert_int_eq(stats.in_flight, in_flight_of(c, 0));
  sluice_broker_stats_clear(&stats);
}
END_TEST

START_TEST(settle_retry_schedules_the_new_envelope_on_the_same_queue)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GBytes) retry = sluice_test_text("attempt-2");
  g_autoptr(GBytes) rec = sluice_test_text("retrying");
  g_autoptr(GBytes) read = NULL;
  const gchar *const jobs[] = {"jobs", NULL};
  SluiceBrokerStats stats;
  SluiceSettlement s = {0};
  guint promoted;
  gint64 next;

  sluice_test_enqueue(c->broker, "r1", "jobs", "attempt-1", 0);
  got = sluice_test_fetch(c->broker, "c1", jobs, 1, 0);
  s.delivery = at(got, 0);
  s.action = SLUICE_SETTLE_RETRY;
  s.id = "r1";
  s.reschedule_payload = retry;
  s.reschedule_at = 7000;
  s.record = rec;
  s.record_ttl_ms = 60000;
  ck_assert_int_eq(sluice_test_settle_one(c->broker, "c1", &s),
                   SLUICE_SETTLE_DONE);
  g_clear_pointer(&got, g_ptr_array_unref);

  stats = sluice_test_stats(c->broker, NULL);
  ck_assert_int_eq(stats.scheduled, 1);
  sluice_broker_stats_clear(&stats);
  ck_assert(sluice_broker_get_record(c->broker, "r1", &read, &error));
  ck_assert(sluice_test_bytes_is(read, "retrying"));

  ck_assert(
      sluice_broker_promote_due(c->broker, 6999, 10, &promoted, &next, &error));
  ck_assert_uint_eq(promoted, 0);
  ck_assert_int_eq(next, 7000);
  ck_assert(
      sluice_broker_promote_due(c->broker, 7000, 10, &promoted, &next, &error));
  ck_assert_uint_eq(promoted, 1);
  /* Promoted to the queue it was fetched from, with the new envelope. */
  got = sluice_test_fetch(c->broker, "c1", jobs, 1, 0);
  ck_assert_uint_eq(got->len, 1);
  ck_assert(sluice_test_bytes_is(at(got, 0)->payload, "attempt-2"));
}
END_TEST

START_TEST(settle_dead_letter_keeps_every_field)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) list =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);
  g_autoptr(SluiceDeadLetter) got = NULL;
  SluiceDeadLetter *e;

  sluice_test_bury(c->broker, "d1", SLUICE_DLQ_NON_RETRYABLE);
  ck_assert(sluice_broker_dlq_list(c->broker, NULL, 10, list, &error));
  ck_assert_uint_eq(list->len, 1);
  e = g_ptr_array_index(list, 0);
  ck_assert_ptr_nonnull(e->entry_id);
  ck_assert_str_eq(e->task_id, "d1");
  ck_assert_str_eq(e->task, "tasks.add");
  ck_assert_str_eq(e->reason, SLUICE_DLQ_NON_RETRYABLE);
  ck_assert_str_eq(e->detail, "it failed");
  ck_assert_str_eq(e->source, "default");
  ck_assert_uint_eq(e->deliveries, 2);
  ck_assert_int_eq(e->at, 1700000000000);
  ck_assert(sluice_test_bytes_is(e->payload, "d1"));

  ck_assert(sluice_broker_dlq_get(c->broker, e->entry_id, &got, &error));
  ck_assert_str_eq(got->entry_id, e->entry_id);
  ck_assert(sluice_test_bytes_is(got->payload, "d1"));
}
END_TEST

/* A message that does not decode has no id and no task: it is buried with
 * its bytes as they came, and nothing else is written. */
START_TEST(malformed_message_is_buried_with_its_raw_bytes)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GPtrArray) list =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);
  g_autoptr(SluiceDeadLetter) dl = sluice_dead_letter_new();
  SluiceDeadLetter *e;
  SluiceSettlement s = {0};

  sluice_test_enqueue(c->broker, "ignored", "default", "\xff\x01garbage", 0);
  got = sluice_test_fetch(c->broker, "c1", q_default, 1, 0);
  dl->reason = g_strdup(SLUICE_DLQ_MALFORMED);
  dl->source = g_strdup("default");
  dl->deliveries = 1;
  dl->at = 1700000000000;
  dl->payload = g_bytes_ref(at(got, 0)->payload);
  s.delivery = at(got, 0);
  s.action = SLUICE_SETTLE_DEAD_LETTER;
  s.dead_letter = dl;
  ck_assert_int_eq(sluice_test_settle_one(c->broker, "c1", &s),
                   SLUICE_SETTLE_DONE);
  ck_assert(sluice_broker_dlq_list(c->broker, NULL, 10, list, &error));
  ck_assert_uint_eq(list->len, 1);
  e = g_ptr_array_index(list, 0);
  ck_assert_ptr_null(e->task_id);
  ck_assert_ptr_null(e->task);
  ck_assert_str_eq(e->reason, SLUICE_DLQ_MALFORMED);
  ck_assert(g_bytes_equal(e->payload, at(got, 0)->payload));
}
END_TEST

/* One settle call with one settlement of each kind carries out each. */
START_TEST(one_settle_carries_out_every_action)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GPtrArray) left = NULL;
  g_autoptr(GBytes) rec = sluice_test_text("done");
  g_autoptr(GBytes) again = sluice_test_text("again");
  g_autoptr(GBytes) read = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) dead =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);
  g_autoptr(SluiceDeadLetter) dl =
      sluice_test_dead_letter("m4", SLUICE_DLQ_MAX_ATTEMPTS, "p4");
  SluiceBrokerStats stats;
  SluiceSettlement s[4] = {{0}};

  for (guint i = 1; i <= 4; i++) {
    g_autofree gchar *id = g_strdup_printf("m%u", i);
    g_autofree gchar *payload = g_strdup_printf("p%u", i);
    sluice_test_enqueue(c->broker, id, "default", payload, 0);
  }
  sluice_test_heartbeat(c->broker, "c1", 60000, NULL);
  got = sluice_test_fetch(c->broker, "c1", q_default, 10, 0);
  ck_assert_uint_eq(got->len, 4);
  order_unless_ordered(c, got);
  for (guint i = 0; i < 4; i++) {
    g_autofree gchar *want = g_strdup_printf("p%u", i + 1);
    ck_assert(sluice_test_bytes_is(at(got, i)->payload, want));
    ck_assert_uint_eq(at(got, i)->delivery_count, 1);
    ck_assert_str_eq(at(got, i)->queue, "default");
  }
  stats = sluice_test_stats(c->broker, NULL);
  ck_assert_int_eq(stats.in_flight, in_flight_of(c, 4));
  sluice_broker_stats_clear(&stats);

  s[0] = (SluiceSettlement){.delivery = at(got, 0),
                            .action = SLUICE_SETTLE_ACK,
                            .id = "m1",
                            .record = rec,
                            .record_final = TRUE,
                            .record_ttl_ms = 60000};
  s[1] =
      (SluiceSettlement){.delivery = at(got, 1), .action = SLUICE_SETTLE_ACK};
  s[2] = (SluiceSettlement){.delivery = at(got, 2),
                            .action = SLUICE_SETTLE_RETRY,
                            .id = "m3",
                            .reschedule_payload = again,
                            .reschedule_at = 5000};
  s[3] = (SluiceSettlement){.delivery = at(got, 3),
                            .action = SLUICE_SETTLE_DEAD_LETTER,
                            .id = "m4",
                            .dead_letter = dl};
  sluice_test_settle(c->broker, "c1", s, 4);
  for (guint i = 0; i < 4; i++)
    ck_assert_int_eq(s[i].status, SLUICE_SETTLE_DONE);

  ck_assert(sluice_broker_get_record(c->broker, "m1", &read, &error));
  ck_assert(sluice_test_bytes_is(read, "done"));
  stats = sluice_test_stats(c->broker, NULL);
  ck_assert_int_eq(stats.scheduled, 1);
  ck_assert_int_eq(stats.dead_letters, 1);
  ck_assert_int_eq(stats.in_flight, in_flight_of(c, 0));
  sluice_broker_stats_clear(&stats);
  ck_assert(sluice_broker_dlq_list(c->broker, NULL, 10, dead, &error));
  ck_assert_uint_eq(dead->len, 1);
  ck_assert(sluice_test_bytes_is(((SluiceDeadLetter *)dead->pdata[0])->payload,
                                 "p4"));
  left = sluice_test_fetch(c->broker, "c1", q_default, 10, 0);
  ck_assert_uint_eq(left->len, 0);
}
END_TEST

/* The core repeats a settle whose reply was lost: the repeat acknowledges
 * nothing twice and overwrites what it writes again. A broker with fencing
 * finds the delivery settled, and says so (GONE). */
START_TEST(a_repeated_settle_changes_nothing)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GPtrArray) promoted_back = NULL;
  g_autoptr(GBytes) rec = sluice_test_text("done");
  g_autoptr(GBytes) retrying = sluice_test_text("retrying");
  g_autoptr(GBytes) again = sluice_test_text("again");
  g_autoptr(GBytes) read = NULL;
  g_autoptr(GError) error = NULL;
  SluiceSettleStatus repeated = has(c, SLUICE_BROKER_CAP_FENCING)
                                    ? SLUICE_SETTLE_GONE
                                    : SLUICE_SETTLE_DONE;
  SluiceBrokerStats stats;
  SluiceSettlement s[2] = {{0}};
  guint promoted;
  gint64 next;

  sluice_test_enqueue(c->broker, "a", "default", "a", 0);
  sluice_test_enqueue(c->broker, "r", "default", "r", 0);
  sluice_test_heartbeat(c->broker, "c1", 60000, NULL);
  got = sluice_test_fetch(c->broker, "c1", q_default, 2, 0);
  ck_assert_uint_eq(got->len, 2);
  s[0] = (SluiceSettlement){.delivery = at(got, 0),
                            .action = SLUICE_SETTLE_ACK,
                            .id = "a",
                            .record = rec,
                            .record_final = TRUE,
                            .record_ttl_ms = 60000};
  s[1] = (SluiceSettlement){.delivery = at(got, 1),
                            .action = SLUICE_SETTLE_RETRY,
                            .id = "r",
                            .record = retrying,
                            .record_ttl_ms = 60000,
                            .reschedule_payload = again,
                            .reschedule_at = 5000};
  sluice_test_settle(c->broker, "c1", s, 2);
  ck_assert_int_eq(s[0].status, SLUICE_SETTLE_DONE);
  ck_assert_int_eq(s[1].status, SLUICE_SETTLE_DONE);
  stats = sluice_test_stats(c->broker, NULL);
  ck_assert_int_eq(stats.in_flight, in_flight_of(c, 0));
  sluice_broker_stats_clear(&stats);

  sluice_test_settle(c->broker, "c1", s, 2);
  ck_assert_int_eq(s[0].status, repeated);
  ck_assert_int_eq(s[1].status, repeated);

  ck_assert(sluice_broker_get_record(c->broker, "a", &read, &error));
  ck_assert(sluice_test_bytes_is(read, "done"));
  stats = sluice_test_stats(c->broker, NULL);
  ck_assert_int_eq(stats.scheduled, 1); /* overwritten, not added */
  ck_assert_int_eq(stats.in_flight, in_flight_of(c, 0));
  ck_assert_int_eq(stats.dead_letters, 0);
  sluice_broker_stats_clear(&stats);
  ck_assert(
      sluice_broker_promote_due(c->broker, 5000, 10, &promoted, &next, &error));
  ck_assert_uint_eq(promoted, 1);
  promoted_back = fetch_all(c, "c1", q_default, 10);
  ck_assert_uint_eq(promoted_back->len, 1);
  ck_assert(sluice_test_bytes_is(at(promoted_back, 0)->payload, "again"));
}
END_TEST

/* A release gives the delivery back for any consumer to fetch at once, and
 * is not a delivery: the next one reports the same count. */
START_TEST(release_gives_the_delivery_back_without_counting_it)
{
  g_autoptr(Contract) c = contract_new();
  SluiceSettleStatus status;
  g_autoptr(GPtrArray) first = NULL;
  g_autoptr(GPtrArray) again = NULL;
  g_autoptr(GHashTable) seen =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  SluiceSettlement s = {0};

  sluice_test_enqueue(c->broker, "a", "default", "A", 0);
  sluice_test_enqueue(c->broker, "b", "default", "B", 0);
  sluice_test_heartbeat(c->broker, "c1", 60000, NULL);
  first = sluice_test_fetch(c->broker, "c1", q_default, 1, 0);
  ck_assert_uint_eq(first->len, 1);
  /* Without ORDERED, B may come first: either is released. */
  ck_assert(sluice_test_bytes_is(at(first, 0)->payload, "A") ||
            (!has(c, SLUICE_BROKER_CAP_ORDERED) &&
             sluice_test_bytes_is(at(first, 0)->payload, "B")));
  ck_assert_uint_eq(at(first, 0)->delivery_count, 1);
  s.delivery = at(first, 0);
  s.action = SLUICE_SETTLE_RELEASE;
  s.id = sluice_test_bytes_is(at(first, 0)->payload, "A") ? "a" : "b";
  ck_assert_int_eq(sluice_test_settle_one(c->broker, "c1", &s),
                   SLUICE_SETTLE_DONE);
  /* Repeated after a lost reply: releases nothing more. */
  status = sluice_test_settle_one(c->broker, "c1", &s);
  ck_assert_msg(
      status == SLUICE_SETTLE_DONE ||
          (has(c, SLUICE_BROKER_CAP_FENCING) && status == SLUICE_SETTLE_GONE),
      "a repeated release reported %d", (int)status);

  if (has(c, SLUICE_BROKER_CAP_LEASES)) {
    /* Given back, not left for a reclaim: a live peer has nothing to take
     * over. */
    g_autoptr(GPtrArray) reclaimed = NULL;

    sluice_test_heartbeat(c->broker, "c2", 60000, NULL);
    reclaimed = sluice_test_reclaim(c->broker, "c2", q_default, 10, 60000);
    ck_assert_uint_eq(reclaimed->len, 0);
  }
  sluice_test_heartbeat(c->broker, "c2", 60000, NULL);
  again = fetch_all(c, "c2", q_default, 10);
  ck_assert_uint_eq(again->len, 2);
  for (guint i = 0; i < again->len; i++) {
    ck_assert_uint_eq(at(again, i)->delivery_count, 1);
    g_hash_table_add(seen, sluice_test_bytes_str(at(again, i)->payload));
  }
  ck_assert(g_hash_table_contains(seen, "A"));
  ck_assert(g_hash_table_contains(seen, "B"));

  if (has(c, SLUICE_BROKER_CAP_LEASES)) {
    /* A delivery that came after takeovers keeps its count through a
     * release. */
    g_autoptr(GPtrArray) third = NULL;
    SluiceDelivery *d = sluice_test_bytes_is(at(again, 0)->payload, "A")
                            ? at(again, 0)
                            : at(again, 1);

    d->delivery_count = 3;
    s.delivery = d;
    ck_assert_int_eq(sluice_test_settle_one(c->broker, "c2", &s),
                     SLUICE_SETTLE_DONE);
    third = sluice_test_fetch(c->broker, "c1", q_default, 10, 0);
    ck_assert_uint_eq(third->len, 1);
    ck_assert_uint_eq(at(third, 0)->delivery_count, 3);
    ck_assert_int_eq(sluice_test_ack(c->broker, "c1", at(third, 0)),
                     SLUICE_SETTLE_DONE);
  }
}
END_TEST

/* ---- results ------------------------------------------------------------- */

START_TEST(records_are_written_read_and_replaced)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) running = sluice_test_text("running");
  g_autoptr(GBytes) empty = g_bytes_new(NULL, 0);
  GBytes *read = NULL;

  ck_assert(sluice_broker_get_record(c->broker, "x", &read, &error));
  ck_assert_ptr_null(read);
  ck_assert(
      sluice_broker_put_record(c->broker, "x", running, FALSE, 60000, &error));
  ck_assert(sluice_broker_get_record(c->broker, "x", &read, &error));
  ck_assert(sluice_test_bytes_is(read, "running"));
  g_bytes_unref(read);
  /* An empty record is a record, not "none". */
  ck_assert(
      sluice_broker_put_record(c->broker, "x", empty, TRUE, 60000, &error));
  ck_assert(sluice_broker_get_record(c->broker, "x", &read, &error));
  ck_assert_ptr_nonnull(read);
  ck_assert_uint_eq(g_bytes_get_size(read), 0);
  g_bytes_unref(read);
}
END_TEST

typedef struct {
  SluiceBroker *broker;
  gboolean ok;
} PutJob;

static gpointer
put_final_thread(gpointer data)
{
  PutJob *job = data;
  g_autoptr(GBytes) rec = sluice_test_text("final");

  job->ok = sluice_broker_put_record(job->broker, "w1", rec, TRUE, 60000, NULL);
  return NULL;
}

START_TEST(wait_record_returns_a_final_record_or_what_stands_at_the_timeout)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) pending = sluice_test_text("running");
  g_autoptr(GBytes) done = sluice_test_text("succeeded");
  PutJob job = {c->broker, FALSE};
  GThread *thread;
  GBytes *read = NULL;

  /* Nothing at all: NULL after the timeout. */
  ck_assert(sluice_broker_wait_record(c->broker, "none", 100, &read, &error));
  ck_assert_ptr_null(read);
  /* Not final: the record as it stands after the timeout. */
  ck_assert(
      sluice_broker_put_record(c->broker, "p", pending, FALSE, 60000, &error));
  ck_assert(sluice_broker_wait_record(c->broker, "p", 200, &read, &error));
  ck_assert(sluice_test_bytes_is(read, "running"));
  g_bytes_unref(read);
  /* Final before the wait: returned at once (an hour's wait would outlast
   * the test). */
  ck_assert(
      sluice_broker_put_record(c->broker, "f", done, TRUE, 60000, &error));
  ck_assert(
      sluice_broker_wait_record(c->broker, "f", 3600 * 1000, &read, &error));
  ck_assert(sluice_test_bytes_is(read, "succeeded"));
  g_bytes_unref(read);
  /* Final while it waits, or just before: returned when written. */
  ck_assert(
      sluice_broker_put_record(c->broker, "w1", pending, FALSE, 60000, &error));
  thread = g_thread_new("put", put_final_thread, &job);
  ck_assert(
      sluice_broker_wait_record(c->broker, "w1", 3600 * 1000, &read, &error));
  g_thread_join(thread);
  ck_assert(job.ok);
  ck_assert(sluice_test_bytes_is(read, "final"));
  g_bytes_unref(read);
}
END_TEST

/* ---- revocation ---------------------------------------------------------- */

/* The expiry of @id's revocation in @list, or -1. */
static gint64
expiry_in(GPtrArray *list, const gchar *id)
{
  for (guint i = 0; i < list->len; i++) {
    SluiceRevocation *r = g_ptr_array_index(list, i);
    if (strcmp(r->id, id) == 0)
      return r->expires_at;
  }
  return -1;
}

START_TEST(list_revocations_gives_the_live_ones_expiring_after_a_time)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) list =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_revocation_free);
  gint64 cursor = 0;

  ck_assert(sluice_broker_revoke(c->broker, "a", 1000, &error));
  ck_assert(sluice_broker_revoke(c->broker, "b", 2000, &error));
  ck_assert(sluice_broker_revoke(c->broker, "c", 3000, &error));
  ck_assert(sluice_broker_revoke(c->broker, "c", 2500, &error)); /* longer */

  ck_assert(
      sluice_broker_list_revocations(c->broker, &cursor, 500, list, &error));
  ck_assert_uint_eq(list->len, 3);
  ck_assert_int_eq(expiry_in(list, "a"), 1000);
  ck_assert_int_eq(expiry_in(list, "b"), 2000);
  ck_assert_int_eq(expiry_in(list, "c"), 3000); /* never shortened */
  g_ptr_array_set_size(list, 0);

  /* Lapsed ones are left out. */
  cursor = 0;
  ck_assert(
      sluice_broker_list_revocations(c->broker, &cursor, 1500, list, &error));
  ck_assert_uint_eq(list->len, 2);
  ck_assert_int_eq(expiry_in(list, "b"), 2000);
  ck_assert_int_eq(expiry_in(list, "c"), 3000);
}
END_TEST

/* Workers sync revocations by a cursor: each revocation once, whatever its
 * expiry, and a second revocation of an id anew. */
START_TEST(revocations_since_a_cursor_are_each_listed_once)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) list =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_revocation_free);
  gint64 cursor = 0, first;

  ck_assert(sluice_broker_revoke(c->broker, "x", 5000, &error));
  ck_assert(sluice_broker_revoke(c->broker, "y", 3000, &error));
  ck_assert(sluice_broker_revoke(c->broker, "z", 4000, &error));
  ck_assert(sluice_broker_revoke(c->broker, "w", 6000, &error));
  ck_assert(
      sluice_broker_list_revocations(c->broker, &cursor, 100, list, &error));
  ck_assert_uint_eq(list->len, 4);
  /* In the order they were recorded, not by expiry. */
  ck_assert_str_eq(((SluiceRevocation *)list->pdata[0])->id, "x");
  ck_assert_str_eq(((SluiceRevocation *)list->pdata[1])->id, "y");
  ck_assert_str_eq(((SluiceRevocation *)list->pdata[2])->id, "z");
  ck_assert_str_eq(((SluiceRevocation *)list->pdata[3])->id, "w");
  ck_assert_int_eq(expiry_in(list, "x"), 5000);
  ck_assert_int_eq(expiry_in(list, "y"), 3000);
  ck_assert_int_eq(expiry_in(list, "z"), 4000);
  ck_assert_int_eq(expiry_in(list, "w"), 6000);
  ck_assert_int_gt(cursor, 0);
  first = cursor;
  g_ptr_array_set_size(list, 0);

  /* Nothing new: nothing listed, the cursor stays. */
  ck_assert(
      sluice_broker_list_revocations(c->broker, &cursor, 100, list, &error));
  ck_assert_uint_eq(list->len, 0);
  ck_assert_int_eq(cursor, first);

  /* Revoked again: listed anew, past the cursor. */
  ck_assert(sluice_broker_revoke(c->broker, "y", 7000, &error));
  ck_assert(
      sluice_broker_list_revocations(c->broker, &cursor, 100, list, &error));
  ck_assert_uint_eq(list->len, 1);
  ck_assert_int_eq(expiry_in(list, "y"), 7000);
  ck_assert_int_gt(cursor, first);
  g_ptr_array_set_size(list, 0);

  /* From the beginning, lapsed ones left out. */
  cursor = 0;
  ck_assert(
      sluice_broker_list_revocations(c->broker, &cursor, 5500, list, &error));
  ck_assert_uint_eq(list->len, 2);
  ck_assert_int_eq(expiry_in(list, "w"), 6000);
  ck_assert_int_eq(expiry_in(list, "y"), 7000);
}
END_TEST

/* ---- periodic ------------------------------------------------------------ */

typedef struct {
  SluiceBroker *broker;
  gint64 occurrence;
  gboolean claimed;
  gboolean ok;
  GMutex *start;
} ClaimJob;

static gpointer
claim_thread(gpointer data)
{
  ClaimJob *job = data;
  g_autoptr(GBytes) p = sluice_test_text("tick");
  g_autofree gchar *id =
      g_strdup_printf("tick@%" G_GINT64_FORMAT, job->occurrence);
  SluiceSubmit item = {.id = id, .queue = "default", .payload = p};

  g_mutex_lock(job->start); /* both threads start together */
  g_mutex_unlock(job->start);
  job->ok = sluice_broker_claim_periodic(job->broker, "tick", job->occurrence,
                                         &item, &job->claimed, NULL);
  return NULL;
}

START_TEST(claim_periodic_dispatches_each_occurrence_once)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) p = sluice_test_text("tick");
  g_autoptr(GPtrArray) got = NULL;
  SluiceSubmit item = {.id = "old", .queue = "default", .payload = p};
  SluiceBrokerStats stats;
  GMutex start;
  ClaimJob jobs[2];
  GThread *threads[2];
  gint64 last = -1;
  gboolean claimed = TRUE;

  ck_assert(sluice_broker_last_periodic(c->broker, "tick", &last, &error));
  ck_assert_int_eq(last, 0);
  for (gint64 occurrence = 1000; occurrence <= 5000; occurrence += 1000) {
    g_mutex_init(&start);
    g_mutex_lock(&start);
    for (guint t = 0; t < 2; t++) {
      jobs[t] = (ClaimJob){c->broker, occurrence, FALSE, FALSE, &start};
      threads[t] = g_thread_new("claim", claim_thread, &jobs[t]);
    }
    g_mutex_unlock(&start);
    for (guint t = 0; t < 2; t++) {
      g_thread_join(threads[t]);
      ck_assert(jobs[t].ok);
    }
    g_mutex_clear(&start);
    ck_assert_int_eq(jobs[0].claimed + jobs[1].claimed, 1);
  }
  /* Each occurrence dispatched once. */
  stats = sluice_test_stats(c->broker, q_default);
  ck_assert_int_eq(sluice_test_queue_ready(&stats, "default"), 5);
  sluice_broker_stats_clear(&stats);
  ck_assert(sluice_broker_last_periodic(c->broker, "tick", &last, &error));
  ck_assert_int_eq(last, 5000);

  /* Never one older than the newest dispatched. */
  ck_assert(sluice_broker_claim_periodic(c->broker, "tick", 4000, &item,
                                         &claimed, &error));
  ck_assert(!claimed);
  got = fetch_all(c, "c1", q_default, 10);
  ck_assert_uint_eq(got->len, 5);
}
END_TEST

/* ---- dead letters -------------------------------------------------------- */

static gint64
dropped_count(const SluiceBrokerStats *stats, const gchar *reason)
{
  gint64 *n =
      g_hash_table_lookup(stats->dead_letters_dropped_by_reason, reason);

  return n != NULL ? *n : 0;
}

START_TEST(dead_letter_cap_drops_the_oldest_and_counts_them)
{
  g_autoptr(Contract) c = contract_new_full(3);
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) list =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);
  SluiceBrokerStats stats;

  sluice_test_bury(c->broker, "e1", SLUICE_DLQ_MAX_ATTEMPTS);
  sluice_test_bury(c->broker, "e2", SLUICE_DLQ_EXPIRED);
  sluice_test_bury(c->broker, "e3", SLUICE_DLQ_MAX_ATTEMPTS);
  sluice_test_bury(c->broker, "e4", SLUICE_DLQ_UNKNOWN_TASK);
  sluice_test_bury(c->broker, "e5", SLUICE_DLQ_UNKNOWN_TASK);

  /* The two oldest were dropped, exactly. */
  ck_assert(sluice_broker_dlq_list(c->broker, NULL, 10, list, &error));
  ck_assert_uint_eq(list->len, 3);
  if (!has(c, SLUICE_BROKER_CAP_ORDERED)) {
    /* Burials in one millisecond have no order across a broker's parts:
     * two were dropped, counted by reason, and three remain. */
    gint64 dropped = 0;

    stats = sluice_test_stats(c->broker, NULL);
    ck_assert_int_eq(stats.dead_letters, 3);
    ck_assert_int_eq(stats.dead_letters_dropped, 2);
    dropped = dropped_count(&stats, SLUICE_DLQ_MAX_ATTEMPTS) +
              dropped_count(&stats, SLUICE_DLQ_EXPIRED) +
              dropped_count(&stats, SLUICE_DLQ_UNKNOWN_TASK);
    ck_assert_int_eq(dropped, 2);
    ck_assert_int_eq(
        sluice_test_reason_count(&stats, SLUICE_DLQ_MAX_ATTEMPTS) +
            sluice_test_reason_count(&stats, SLUICE_DLQ_EXPIRED) +
            sluice_test_reason_count(&stats, SLUICE_DLQ_UNKNOWN_TASK),
        3);
    sluice_broker_stats_clear(&stats);
    return;
  }
  ck_assert_str_eq(((SluiceDeadLetter *)g_ptr_array_index(list, 0))->task_id,
                   "e3");
  ck_assert_str_eq(((SluiceDeadLetter *)g_ptr_array_index(list, 2))->task_id,
                   "e5");

  /* The counts by reason follow, and the drops are counted. */
  stats = sluice_test_stats(c->broker, NULL);
  ck_assert_int_eq(stats.dead_letters, 3);
  ck_assert_int_eq(sluice_test_reason_count(&stats, SLUICE_DLQ_MAX_ATTEMPTS),
                   1);
  ck_assert_int_eq(sluice_test_reason_count(&stats, SLUICE_DLQ_EXPIRED), 0);
  ck_assert_int_eq(sluice_test_reason_count(&stats, SLUICE_DLQ_UNKNOWN_TASK),
                   2);
  ck_assert_int_eq(stats.dead_letters_dropped, 2);
  ck_assert_int_eq(dropped_count(&stats, SLUICE_DLQ_MAX_ATTEMPTS), 1);
  ck_assert_int_eq(dropped_count(&stats, SLUICE_DLQ_EXPIRED), 1);
  sluice_broker_stats_clear(&stats);
}
END_TEST

START_TEST(dlq_pages_replays_and_deletes_entries)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) list =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);
  g_autoptr(GPtrArray) page =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);
  g_autoptr(GBytes) fresh = sluice_test_text("replayed");
  g_autoptr(GPtrArray) got = NULL;
  g_autofree gchar *first = NULL;
  g_autofree gchar *second = NULL;
  SluiceDeadLetter *missing = NULL;
  SluiceBrokerStats stats;
  gboolean found = FALSE;
  SluiceSubmit item = {.queue = "default", .payload = fresh};
  g_autofree gchar *last_reason = NULL;

  sluice_test_bury(c->broker, "x1", SLUICE_DLQ_MAX_ATTEMPTS);
  sluice_test_bury(c->broker, "x2", SLUICE_DLQ_MAX_ATTEMPTS);
  sluice_test_bury(c->broker, "x3", SLUICE_DLQ_EXPIRED);
  ck_assert(sluice_broker_dlq_list(c->broker, NULL, 10, list, &error));
  ck_assert_uint_eq(list->len, 3);
  first = g_strdup(((SluiceDeadLetter *)g_ptr_array_index(list, 0))->entry_id);
  second = g_strdup(((SluiceDeadLetter *)g_ptr_array_index(list, 1))->entry_id);
  /* The replay goes back under the first entry's task id. */
  item.id = ((SluiceDeadLetter *)g_ptr_array_index(list, 0))->task_id;
  last_reason =
      g_strdup(((SluiceDeadLetter *)g_ptr_array_index(list, 2))->reason);
  if (has(c, SLUICE_BROKER_CAP_ORDERED))
    ck_assert_str_eq(((SluiceDeadLetter *)g_ptr_array_index(list, 2))->task_id,
                     "x3");

  /* Paging: `after` is exclusive, oldest first. */
  ck_assert(sluice_broker_dlq_list(c->broker, first, 1, page, &error));
  ck_assert_uint_eq(page->len, 1);
  ck_assert_str_eq(((SluiceDeadLetter *)g_ptr_array_index(page, 0))->entry_id,
                   second);

  /* Replay: gone from the dead letters, back in its queue, once. */
  ck_assert(sluice_broker_dlq_replay(c->broker, first, &item, &found, &error));
  ck_assert(found);
  got = fetch_all(c, "c1", q_default, 10);
  ck_assert_uint_eq(got->len, 1);
  ck_assert(sluice_test_bytes_is(at(got, 0)->payload, "replayed"));
  g_clear_pointer(&got, g_ptr_array_unref);
  ck_assert(sluice_broker_dlq_replay(c->broker, first, &item, &found, &error));
  ck_assert(!found);
  got = sluice_test_fetch(c->broker, "c1", q_default, 10, 0);
  ck_assert_uint_eq(got->len, 0);
  ck_assert(!sluice_broker_dlq_get(c->broker, first, &missing, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_NOT_FOUND));
  g_clear_error(&error);
  ck_assert(!sluice_broker_dlq_get(c->broker, "not-an-id", &missing, &error));
  ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                            SLUICE_BROKER_ERROR_NOT_FOUND));
  g_clear_error(&error);

  /* Delete. */
  ck_assert(sluice_broker_dlq_delete(c->broker, second, &found, &error));
  ck_assert(found);
  ck_assert(sluice_broker_dlq_delete(c->broker, second, &found, &error));
  ck_assert(!found);

  /* What is left is the third entry. */
  stats = sluice_test_stats(c->broker, NULL);
  ck_assert_int_eq(stats.dead_letters, 1);
  ck_assert_int_eq(sluice_test_reason_count(&stats, SLUICE_DLQ_MAX_ATTEMPTS),
                   g_strcmp0(last_reason, SLUICE_DLQ_MAX_ATTEMPTS) == 0);
  ck_assert_int_eq(sluice_test_reason_count(&stats, SLUICE_DLQ_EXPIRED),
                   g_strcmp0(last_reason, SLUICE_DLQ_EXPIRED) == 0);
  sluice_broker_stats_clear(&stats);
}
END_TEST

/* ---- lookups and announcements ------------------------------------------- */

START_TEST(lookup_task_finds_scheduled_and_buried_tasks)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GError) error = NULL;
  SluiceTaskLocation where = {0};

  if (!sluice_broker_supports(c->broker, SLUICE_BROKER_FEATURE_LOOKUP_TASK))
    return; /* no lookup_task (the suite adds this only with it) */
  sluice_test_enqueue(c->broker, "later", "q1", "later", 5000);
  /* Each burial fetches the message it just enqueued: the queue is empty
   * before it (else it would bury another task's delivery). */
  sluice_test_bury(c->broker, "gone", SLUICE_DLQ_EXPIRED);
  sluice_test_bury(c->broker, "twice", SLUICE_DLQ_EXPIRED);
  sluice_test_bury(c->broker, "twice", SLUICE_DLQ_MAX_ATTEMPTS);
  sluice_test_enqueue(c->broker, "ready", "default", "ready", 0);

  ck_assert(sluice_broker_lookup_task(c->broker, "later", &where, &error));
  ck_assert_int_eq(where.place, SLUICE_TASK_PLACE_SCHEDULED);
  ck_assert(sluice_test_bytes_is(where.payload, "later"));
  ck_assert_str_eq(where.queue, "q1");
  ck_assert_int_eq(where.due_at, 5000);
  sluice_task_location_clear(&where);

  ck_assert(sluice_broker_lookup_task(c->broker, "gone", &where, &error));
  ck_assert_int_eq(where.place, SLUICE_TASK_PLACE_DEAD);
  ck_assert_str_eq(where.dead_letter->task_id, "gone");
  ck_assert_str_eq(where.dead_letter->reason, SLUICE_DLQ_EXPIRED);
  sluice_task_location_clear(&where);

  /* Buried twice: the newest dead letter. */
  ck_assert(sluice_broker_lookup_task(c->broker, "twice", &where, &error));
  ck_assert_int_eq(where.place, SLUICE_TASK_PLACE_DEAD);
  ck_assert_str_eq(where.dead_letter->reason, SLUICE_DLQ_MAX_ATTEMPTS);
  sluice_task_location_clear(&where);

  /* Queued, or unknown: neither scheduled nor buried. */
  ck_assert(sluice_broker_lookup_task(c->broker, "ready", &where, &error));
  ck_assert_int_eq(where.place, SLUICE_TASK_PLACE_NONE);
  sluice_task_location_clear(&where);
  ck_assert(sluice_broker_lookup_task(c->broker, "nobody", &where, &error));
  ck_assert_int_eq(where.place, SLUICE_TASK_PLACE_NONE);
  sluice_task_location_clear(&where);
}
END_TEST

static SluiceWorkerInfo *
worker_in(SluiceBrokerStats *stats, const gchar *id)
{
  for (guint i = 0; i < stats->workers->len; i++) {
    SluiceWorkerInfo *w = g_ptr_array_index(stats->workers, i);
    if (g_strcmp0(w->id, id) == 0)
      return w;
  }
  return NULL;
}

START_TEST(stats_list_announced_workers_with_what_they_announced)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) one = sluice_test_text("info-1");
  g_autoptr(GBytes) two = sluice_test_text("info-2");
  g_autoptr(GBytes) newer = sluice_test_text("info-1, later");
  SluiceBrokerStats stats;
  SluiceWorkerInfo *w;

  if (!sluice_broker_supports(c->broker, SLUICE_BROKER_FEATURE_ANNOUNCE))
    return; /* no announce (the suite adds this only with it) */
  ck_assert(sluice_broker_announce(c->broker, "w1", one, 60000, &error));
  ck_assert(sluice_broker_announce(c->broker, "w2", two, 60000, &error));
  ck_assert(sluice_broker_announce(c->broker, "w1", newer, 1000, &error));
  stats = sluice_test_stats(c->broker, NULL);
  ck_assert_uint_eq(stats.workers->len, 2);
  w = worker_in(&stats, "w1");
  ck_assert_ptr_nonnull(w);
  ck_assert(w->alive);
  ck_assert_int_gt(w->last_seen_ms, 0);
  ck_assert(sluice_test_bytes_is(w->info, "info-1, later")); /* replaced */
  w = worker_in(&stats, "w2");
  ck_assert_ptr_nonnull(w);
  ck_assert(w->alive);
  ck_assert(sluice_test_bytes_is(w->info, "info-2"));
  sluice_broker_stats_clear(&stats);

  if (has(c, SLUICE_BROKER_CAP_CLOCK_TTL)) {
    /* w1's description lapses: listed as not alive, or no more. */
    sluice_clock_advance(c->clock, 1001);
    stats = sluice_test_stats(c->broker, NULL);
    w = worker_in(&stats, "w1");
    ck_assert(w == NULL || !w->alive);
    ck_assert(worker_in(&stats, "w2")->alive);
    sluice_broker_stats_clear(&stats);
  }
}
END_TEST

/* ---- admin --------------------------------------------------------------- */

START_TEST(stats_count_each_queue_and_purge_empties_one)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GError) error = NULL;
  const gchar *const only_a[] = {"a", NULL};
  SluiceBrokerStats stats;
  guint64 removed = 0;

  sluice_test_enqueue(c->broker, "1", "a", "1", 0);
  sluice_test_enqueue(c->broker, "2", "a", "2", 0);
  sluice_test_enqueue(c->broker, "3", "b", "3", 0);
  sluice_test_enqueue(c->broker, "4", "b", "4", 9000);

  stats = sluice_test_stats(c->broker, NULL);
  ck_assert_uint_eq(stats.queues->len, 2);
  ck_assert_int_eq(sluice_test_queue_ready(&stats, "a"), 2);
  ck_assert_int_eq(sluice_test_queue_ready(&stats, "b"), 1);
  ck_assert_int_eq(stats.scheduled, 1);
  ck_assert_int_eq(stats.in_flight, in_flight_of(c, 0));
  ck_assert_int_eq(stats.dead_letters, 0);
  ck_assert_int_eq(stats.stale_settles, 0);
  sluice_broker_stats_clear(&stats);

  stats = sluice_test_stats(c->broker, only_a);
  ck_assert_uint_eq(stats.queues->len, 1);
  ck_assert_int_eq(sluice_test_queue_ready(&stats, "a"), 2);
  sluice_broker_stats_clear(&stats);

  if (!sluice_broker_supports(c->broker, SLUICE_BROKER_FEATURE_STEERING))
    return; /* purging is optional */
  ck_assert(sluice_broker_purge(c->broker, "a", &removed, &error));
  ck_assert_uint_eq(removed, 2);
  ck_assert(sluice_broker_purge(c->broker, "a", &removed, &error));
  ck_assert_uint_eq(removed, 0);
  stats = sluice_test_stats(c->broker, only_a);
  ck_assert_int_eq(sluice_test_queue_ready(&stats, "a"), 0);
  sluice_broker_stats_clear(&stats);
}
END_TEST

/* In-flight counts (IN_FLIGHT) follow fetches and settles; purging takes
 * what is ready, never what is in flight. */
START_TEST(in_flight_counts_deliveries_until_settled_and_purge_spares_them)
{
  g_autoptr(Contract) c = contract_new();
  const gchar *const only_a[] = {"a", NULL};
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GError) error = NULL;
  SluiceBrokerStats stats;
  guint64 removed = 0;

  if (!has(c, SLUICE_BROKER_CAP_IN_FLIGHT))
    return;
  for (guint i = 0; i < 5; i++) {
    g_autofree gchar *id = g_strdup_printf("a%u", i);
    sluice_test_enqueue(c->broker, id, "a", id, 0);
  }
  sluice_test_enqueue(c->broker, "b0", "b", "b0", 0);
  got = sluice_test_fetch(c->broker, "c1", only_a, 2, 0);
  ck_assert_uint_eq(got->len, 2);
  stats = sluice_test_stats(c->broker, NULL);
  ck_assert_int_eq(sluice_test_queue_ready(&stats, "a"), 3);
  ck_assert_int_eq(sluice_test_queue_ready(&stats, "b"), 1);
  ck_assert_int_eq(stats.in_flight, 2);
  ck_assert_int_eq(stats.stale_settles, 0);
  sluice_broker_stats_clear(&stats);

  if (sluice_broker_supports(c->broker, SLUICE_BROKER_FEATURE_STEERING)) {
    ck_assert(sluice_broker_purge(c->broker, "a", &removed, &error));
    ck_assert_uint_eq(removed, 3);
    ck_assert(sluice_broker_purge(c->broker, "b", &removed, &error));
    ck_assert_uint_eq(removed, 1);
    stats = sluice_test_stats(c->broker, NULL);
    ck_assert_int_eq(stats.in_flight, 2);
    sluice_broker_stats_clear(&stats);
  }
  ck_assert_int_eq(sluice_test_ack(c->broker, "c1", at(got, 0)),
                   SLUICE_SETTLE_DONE);
  ck_assert_int_eq(sluice_test_ack(c->broker, "c1", at(got, 1)),
                   SLUICE_SETTLE_DONE);
  stats = sluice_test_stats(c->broker, only_a);
  ck_assert_int_eq(
      sluice_test_queue_ready(&stats, "a"),
      sluice_broker_supports(c->broker, SLUICE_BROKER_FEATURE_STEERING) ? 0
                                                                        : 3);
  ck_assert_int_eq(stats.in_flight, 0);
  sluice_broker_stats_clear(&stats);
}
END_TEST

/* ---- seeing and steering: listings, pauses, moves ------------------------ */

static SluiceListedMessage *
listed_at(GPtrArray *listed, guint i)
{
  ck_assert_uint_lt(i, listed->len);
  return g_ptr_array_index(listed, i);
}

static gint
listed_payload_cmp(gconstpointer a, gconstpointer b)
{
  const SluiceListedMessage *x = *(SluiceListedMessage *const *)a;
  const SluiceListedMessage *y = *(SluiceListedMessage *const *)b;

  return g_bytes_compare(x->payload, y->payload);
}

/* Pages through @queue (NULL: the schedule) @limit at a time, from the
 * start to the end; returns every message listed, in order. */
static GPtrArray *
list_all(Contract *c, const gchar *queue, guint limit, guint *out_pages)
{
  GPtrArray *all = g_ptr_array_new_with_free_func(
      (GDestroyNotify)sluice_listed_message_free);
  g_autofree gchar *cursor = NULL;
  guint pages = 0;

  do {
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) page = g_ptr_array_new_with_free_func(
        (GDestroyNotify)sluice_listed_message_free);
    gchar *next = NULL;
    gboolean ok = queue != NULL
                      ? sluice_broker_list_queued(c->broker, queue, cursor,
                                                  limit, page, &next, &error)
                      : sluice_broker_list_scheduled(c->broker, cursor, limit,
                                                     page, &next, &error);

    ck_assert_msg(ok, "%s", error != NULL ? error->message : "");
    ck_assert_uint_le(page->len, limit);
    /* A page short of the limit is the last. */
    ck_assert(page->len == limit || next == NULL);
    while (page->len > 0)
      g_ptr_array_add(all, g_ptr_array_steal_index(page, 0));
    g_free(cursor);
    cursor = next;
    ck_assert_uint_lt(++pages, 1000);
  } while (cursor != NULL);
  if (out_pages != NULL)
    *out_pages = pages;
  return all;
}

/* Pages from no cursor to none list every ready message once, in the order
 * fetch takes them, and take nothing; a delivered message is not ready, a
 * released one is again. */
START_TEST(list_queued_pages_cover_every_ready_message_once)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GPtrArray) all = NULL;
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GPtrArray) page = g_ptr_array_new_with_free_func(
      (GDestroyNotify)sluice_listed_message_free);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *cursor = NULL;
  SluiceBrokerStats stats;
  SluiceSettlement release = {0};
  guint pages = 0;

  if (!sluice_broker_supports(c->broker, SLUICE_BROKER_FEATURE_STEERING)) {
    ck_assert(!sluice_broker_list_queued(c->broker, "default", NULL, 5, page,
                                         &cursor, &error));
    ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                              SLUICE_BROKER_ERROR_UNSUPPORTED));
    return;
  }
  /* Nothing there: one empty page, and the end. */
  ck_assert(sluice_broker_list_queued(c->broker, "default", NULL, 5, page,
                                      &cursor, &error));
  ck_assert_uint_eq(page->len, 0);
  ck_assert_ptr_null(cursor);

  for (guint i = 0; i < 25; i++) {
    g_autofree gchar *id = g_strdup_printf("m%02u", i);
    sluice_test_enqueue(c->broker, id, "default", id, 0);
  }
  sluice_test_enqueue(c->broker, "other", "elsewhere", "other", 0);
  sluice_test_enqueue(c->broker, "later", "default", "later", 5000);
  all = list_all(c, "default", 7, &pages);
  ck_assert_uint_eq(all->len, 25);
  ck_assert_uint_ge(pages, 4);
  if (!has(c, SLUICE_BROKER_CAP_ORDERED))
    g_ptr_array_sort(all, listed_payload_cmp);
  for (guint i = 0; i < 25; i++) {
    g_autofree gchar *id = g_strdup_printf("m%02u", i);
    ck_assert_msg(sluice_test_bytes_is(listed_at(all, i)->payload, id),
                  "message %u listed out of order", i);
    ck_assert_str_eq(listed_at(all, i)->queue, "default");
    ck_assert_int_eq(listed_at(all, i)->due_at, 0);
  }
  g_clear_pointer(&all, g_ptr_array_unref);
  stats = sluice_test_stats(c->broker, q_default);
  ck_assert_int_eq(sluice_test_queue_ready(&stats, "default"), 25);
  sluice_broker_stats_clear(&stats);

  /* Delivered and not settled: not listed. Released: listed again. */
  got = sluice_test_fetch(c->broker, "c1", q_default, 3, 0);
  ck_assert_uint_eq(got->len, 3);
  all = list_all(c, "default", 100, NULL);
  ck_assert_uint_eq(all->len, 22);
  if (has(c, SLUICE_BROKER_CAP_ORDERED))
    ck_assert(sluice_test_bytes_is(listed_at(all, 0)->payload, "m03"));
  for (guint i = 0; i < all->len; i++)
    for (guint j = 0; j < got->len; j++)
      ck_assert(
          !g_bytes_equal(listed_at(all, i)->payload, at(got, j)->payload));
  g_clear_pointer(&all, g_ptr_array_unref);
  release.delivery = at(got, 0);
  release.action = SLUICE_SETTLE_RELEASE;
  release.id = "m00";
  ck_assert_int_eq(sluice_test_settle_one(c->broker, "c1", &release),
                   SLUICE_SETTLE_DONE);
  all = list_all(c, "default", 100, NULL);
  ck_assert_uint_eq(all->len, 23);
  {
    gboolean seen = FALSE;
    for (guint i = 0; i < all->len; i++)
      seen = seen || g_bytes_equal(listed_at(all, i)->payload,
                                   release.delivery->payload);
    ck_assert_msg(seen, "the released message is not listed");
  }
  g_clear_pointer(&all, g_ptr_array_unref);

  /* A cursor the broker never gave is refused, not guessed at. */
  ck_assert(!sluice_broker_list_queued(c->broker, "default", "not a cursor", 5,
                                       page, &cursor, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID));
}
END_TEST

/* The schedule, earliest first, each entry once across pages, with its
 * id, queue, payload and due time; listing promotes nothing. */
START_TEST(list_scheduled_pages_in_due_order)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GPtrArray) all = NULL;
  g_autoptr(GPtrArray) page = g_ptr_array_new_with_free_func(
      (GDestroyNotify)sluice_listed_message_free);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *cursor = NULL;
  SluiceBrokerStats stats;
  guint promoted;
  gint64 next;

  if (!sluice_broker_supports(c->broker, SLUICE_BROKER_FEATURE_STEERING)) {
    ck_assert(!sluice_broker_list_scheduled(c->broker, NULL, 5, page, &cursor,
                                            &error));
    ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                              SLUICE_BROKER_ERROR_UNSUPPORTED));
    return;
  }
  /* Twelve entries, due in reverse order of their ids, three due at
   * each time. */
  for (guint i = 0; i < 12; i++) {
    g_autofree gchar *id = g_strdup_printf("s%02u", i);
    sluice_test_enqueue(c->broker, id, i % 2 ? "odd" : "even", id,
                        10000 - (i / 3) * 1000);
  }
  sluice_test_enqueue(c->broker, "ready", "default", "ready", 0);
  all = list_all(c, NULL, 5, NULL);
  ck_assert_uint_eq(all->len, 12);
  {
    g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
    for (guint i = 0; i < all->len; i++) {
      SluiceListedMessage *m = listed_at(all, i);
      guint n = (guint)g_ascii_strtoull(m->id + 1, NULL, 10);

      ck_assert_ptr_nonnull(m->id);
      ck_assert(sluice_test_bytes_is(m->payload, m->id));
      ck_assert_str_eq(m->queue, n % 2 ? "odd" : "even");
      ck_assert_int_eq(m->due_at, 10000 - (n / 3) * 1000);
      if (i > 0)
        ck_assert_int_le(listed_at(all, i - 1)->due_at, m->due_at);
      ck_assert_msg(g_hash_table_add(seen, m->id), "%s listed twice", m->id);
    }
  }
  g_clear_pointer(&all, g_ptr_array_unref);
  stats = sluice_test_stats(c->broker, NULL);
  ck_assert_int_eq(stats.scheduled, 12);
  sluice_broker_stats_clear(&stats);

  /* A page goes on after its cursor even when earlier entries were
   * promoted meanwhile: nothing after the cursor is skipped. */
  ck_assert(
      sluice_broker_list_scheduled(c->broker, NULL, 4, page, &cursor, &error));
  ck_assert_uint_eq(page->len, 4);
  ck_assert_ptr_nonnull(cursor);
  ck_assert(
      sluice_broker_promote_due(c->broker, 7000, 2, &promoted, &next, &error));
  ck_assert_uint_eq(promoted, 2);
  g_ptr_array_set_size(page, 0);
  {
    gchar *rest = NULL;
    ck_assert(sluice_broker_list_scheduled(c->broker, cursor, 100, page, &rest,
                                           &error));
    ck_assert_ptr_null(rest);
  }
  ck_assert_uint_eq(page->len, 8);

  g_ptr_array_set_size(page, 0);
  g_clear_pointer(&cursor, g_free); /* an (out) parameter: ours to free */
  ck_assert(!sluice_broker_list_scheduled(c->broker, "not a cursor", 5, page,
                                          &cursor, &error));
  ck_assert(
      g_error_matches(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID));
}
END_TEST

static gboolean
paused_contains(GPtrArray *paused, const gchar *queue)
{
  for (guint i = 0; i < paused->len; i++)
    if (g_strcmp0(paused->pdata[i], queue) == 0)
      return TRUE;
  return FALSE;
}

static GPtrArray *
paused_now(Contract *c)
{
  g_autoptr(GError) error = NULL;
  GPtrArray *paused = g_ptr_array_new_with_free_func(g_free);

  ck_assert_msg(sluice_broker_list_paused(c->broker, paused, &error), "%s",
                error != NULL ? error->message : "");
  return paused;
}

/* A pause is a stored flag: listed until resumed, once however often it
 * is set; the broker still takes and hands out the queue's messages (the
 * workers decide not to fetch). */
START_TEST(paused_queues_are_stored_and_listed)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) paused = NULL;
  g_autoptr(GPtrArray) got = NULL;

  if (!sluice_broker_supports(c->broker, SLUICE_BROKER_FEATURE_STEERING)) {
    paused = paused_now(c);
    ck_assert_uint_eq(paused->len, 0);
    ck_assert(!sluice_broker_set_paused(c->broker, "a", TRUE, &error));
    ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                              SLUICE_BROKER_ERROR_UNSUPPORTED));
    return;
  }
  paused = paused_now(c);
  ck_assert_uint_eq(paused->len, 0);
  g_clear_pointer(&paused, g_ptr_array_unref);
  ck_assert(sluice_broker_set_paused(c->broker, "a", TRUE, &error));
  ck_assert(sluice_broker_set_paused(c->broker, "a", TRUE, &error));
  ck_assert(sluice_broker_set_paused(c->broker, "b", TRUE, &error));
  paused = paused_now(c);
  ck_assert_uint_eq(paused->len, 2);
  ck_assert(paused_contains(paused, "a") && paused_contains(paused, "b"));
  g_clear_pointer(&paused, g_ptr_array_unref);

  /* A pause is read in the step that takes: nothing of "a" is fetched. */
  sluice_test_enqueue(c->broker, "1", "a", "1", 0);
  got = sluice_test_fetch(c->broker, "c1", (const gchar *const[]){"a", NULL},
                          10, 0);
  ck_assert_uint_eq(got->len, 0);

  ck_assert(sluice_broker_set_paused(c->broker, "a", FALSE, &error));
  g_clear_pointer(&got, g_ptr_array_unref);
  got = sluice_test_fetch(c->broker, "c1", (const gchar *const[]){"a", NULL},
                          10, 0);
  ck_assert_uint_eq(got->len, 1);
  ck_assert(sluice_broker_set_paused(c->broker, "never", FALSE, &error));
  paused = paused_now(c);
  ck_assert_uint_eq(paused->len, 1);
  ck_assert(paused_contains(paused, "b"));
}
END_TEST

/* Once set_paused returned, no fetch takes from the queue: not one that
 * starts after it, nor one that was already blocked when the message came
 * (it returns the other queue's message, or nothing); the paused queue's
 * messages wait, in their order, for the resume. */
START_TEST(a_paused_queue_is_not_fetched_even_by_a_blocked_fetch)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GPtrArray) rest = NULL;
  const gchar *const both[] = {"held", "open", NULL};
  const gchar *const held[] = {"held", NULL};
  SluiceTestFetch *f;
  guint from_open = 0;

  if (!sluice_broker_supports(c->broker, SLUICE_BROKER_FEATURE_STEERING))
    return;
  f = sluice_test_fetch_start(c->broker, both, 10, 60000);
  ck_assert(sluice_broker_set_paused(c->broker, "held", TRUE, &error));
  sluice_test_enqueue(c->broker, "h1", "held", "h1", 0);
  sluice_test_enqueue(c->broker, "h2", "held", "h2", 0);
  sluice_test_enqueue(c->broker, "o1", "open", "o1", 0);
  got = sluice_test_fetch_join(f, &error);
  ck_assert_msg(got != NULL, "%s", error != NULL ? error->message : "");
  for (guint i = 0; i < got->len; i++) {
    ck_assert_str_eq(at(got, i)->queue, "open");
    from_open++;
  }
  g_clear_pointer(&got, g_ptr_array_unref);
  got = sluice_test_fetch(c->broker, "c1", both, 10, 0);
  for (guint i = 0; i < got->len; i++) {
    ck_assert_str_eq(at(got, i)->queue, "open");
    from_open++;
  }
  ck_assert_uint_eq(from_open, 1);

  ck_assert(sluice_broker_set_paused(c->broker, "held", FALSE, &error));
  rest = sluice_test_fetch(c->broker, "c1", held, 10, 0);
  /* Both wait, but not always in their order: a blocked read that took h1
   * just after the pause hands it back to the end of its queue (Redis
   * reliable mode: a stream takes no entry back in its place), behind h2
   * when h2 came first (docs/limits.md, "Redis, both modes"). */
  g_ptr_array_sort(rest, delivery_payload_cmp);
  ck_assert_uint_eq(rest->len, 2);
  ck_assert(sluice_test_bytes_is(at(rest, 0)->payload, "h1"));
  ck_assert(sluice_test_bytes_is(at(rest, 1)->payload, "h2"));
}
END_TEST

/* remove_queued takes out exactly the listed messages still ready, each
 * with its final record; one fetched meanwhile stays the consumer's and
 * gets no record; a repeat changes nothing. */
START_TEST(remove_queued_takes_out_only_ready_messages)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) listed = NULL;
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GPtrArray) left = NULL;
  g_autoptr(GPtrArray) records =
      g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
  g_autoptr(GPtrArray) ids = g_ptr_array_new_with_free_func(g_free);
  const gchar *const jobs[] = {"jobs", NULL};
  SluiceRemoval items[4];
  SluiceBrokerStats stats;
  guint fetched = 4;

  if (!sluice_broker_supports(c->broker, SLUICE_BROKER_FEATURE_STEERING)) {
    SluiceRemoval none = {.queue = "jobs", .payload = NULL};
    g_autoptr(GBytes) p = sluice_test_text("x");
    none.payload = p;
    ck_assert(!sluice_broker_remove_queued(c->broker, &none, 1, &error));
    ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                              SLUICE_BROKER_ERROR_UNSUPPORTED));
    return;
  }
  for (guint i = 0; i < 4; i++) {
    g_autofree gchar *id = g_strdup_printf("r%u", i);
    sluice_test_enqueue(c->broker, id, "jobs", id, 0);
  }
  listed = list_all(c, "jobs", 10, NULL);
  ck_assert_uint_eq(listed->len, 4);
  got = sluice_test_fetch(c->broker, "c1", jobs, 1, 0);
  ck_assert_uint_eq(got->len, 1);

  for (guint i = 0; i < 4; i++) {
    const SluiceListedMessage *m = listed->pdata[i];
    gchar *id = sluice_test_bytes_str(m->payload);
    g_autofree gchar *rec = g_strdup_printf("gone-%s", id);

    if (g_bytes_equal(m->payload, at(got, 0)->payload))
      fetched = i;
    g_ptr_array_add(ids, id);
    g_ptr_array_add(records, sluice_test_text(rec));
    items[i] = (SluiceRemoval){.queue = "jobs",
                               .payload = m->payload,
                               .handle = m->handle,
                               .id = id,
                               .record = records->pdata[i],
                               .record_ttl_ms = 60000,
                               .removed = TRUE};
  }
  ck_assert_uint_lt(fetched, 4);
  ck_assert_msg(sluice_broker_remove_queued(c->broker, items, 4, &error), "%s",
                error != NULL ? error->message : "");
  for (guint i = 0; i < 4; i++) {
    g_autoptr(GBytes) read = NULL;

    ck_assert_msg(items[i].removed == (i != fetched), "item %u", i);
    /* The record is final: a wait for it returns at once. */
    ck_assert(sluice_broker_wait_record(
        c->broker, ids->pdata[i], i != fetched ? 60000 : 0, &read, &error));
    if (i != fetched)
      ck_assert(g_bytes_equal(read, records->pdata[i]));
    else
      ck_assert_ptr_null(read);
  }
  left = list_all(c, "jobs", 10, NULL);
  ck_assert_uint_eq(left->len, 0);
  stats = sluice_test_stats(c->broker, jobs);
  ck_assert_int_eq(sluice_test_queue_ready(&stats, "jobs"), 0);
  sluice_broker_stats_clear(&stats);

  /* Again: nothing is ready, nothing changes. */
  ck_assert(sluice_broker_remove_queued(c->broker, items, 4, &error));
  for (guint i = 0; i < 4; i++)
    ck_assert(!items[i].removed);
  g_clear_pointer(&got, g_ptr_array_unref);
  got = sluice_test_fetch(c->broker, "c1", jobs, 10, 0);
  ck_assert_uint_eq(got->len, 0);
}
END_TEST

/* Rescheduling moves an entry's due time, or with 0 straight to its queue
 * (a blocked fetch would take it), bytes untouched; an id that is not on
 * the schedule changes nothing. */
START_TEST(reschedule_moves_an_entry_or_runs_it_now)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) got = NULL;
  const gchar *const jobs[] = {"jobs", NULL};
  SluiceBrokerStats stats;
  gboolean found = TRUE;
  guint promoted;
  gint64 next;

  if (!sluice_broker_supports(c->broker, SLUICE_BROKER_FEATURE_STEERING)) {
    ck_assert(!sluice_broker_reschedule(c->broker, "x", 0, &found, &error));
    ck_assert(g_error_matches(error, SLUICE_BROKER_ERROR,
                              SLUICE_BROKER_ERROR_UNSUPPORTED));
    return;
  }
  sluice_test_enqueue(c->broker, "sooner", "jobs", "sooner", 50000);
  sluice_test_enqueue(c->broker, "now", "jobs", "now-bytes", 60000);
  ck_assert(
      sluice_broker_reschedule(c->broker, "sooner", 2000, &found, &error));
  ck_assert(found);
  ck_assert(
      sluice_broker_promote_due(c->broker, 1999, 10, &promoted, &next, &error));
  ck_assert_uint_eq(promoted, 0);
  ck_assert_int_eq(next, 2000);

  ck_assert(sluice_broker_reschedule(c->broker, "now", 0, &found, &error));
  ck_assert(found);
  got = sluice_test_fetch(c->broker, "c1", jobs, 10, 0);
  ck_assert_uint_eq(got->len, 1);
  ck_assert(sluice_test_bytes_is(at(got, 0)->payload, "now-bytes"));
  ck_assert_str_eq(at(got, 0)->queue, "jobs");
  stats = sluice_test_stats(c->broker, NULL);
  ck_assert_int_eq(stats.scheduled, 1);
  sluice_broker_stats_clear(&stats);

  ck_assert(sluice_broker_reschedule(c->broker, "now", 0, &found, &error));
  ck_assert(!found);
  ck_assert(sluice_broker_reschedule(c->broker, "never", 0, &found, &error));
  ck_assert(!found);
  g_clear_pointer(&got, g_ptr_array_unref);
  got = sluice_test_fetch(c->broker, "c1", jobs, 10, 0);
  ck_assert_uint_eq(got->len, 0);
  ck_assert(
      sluice_broker_promote_due(c->broker, 2000, 10, &promoted, &next, &error));
  ck_assert_uint_eq(promoted, 1);
  got = fetch_all(c, "c1", jobs, 10);
  ck_assert_uint_eq(got->len, 1);
  ck_assert(sluice_test_bytes_is(at(got, 0)->payload, "sooner"));
}
END_TEST

/* ---- leases: heartbeats, reclaim, fencing -------------------------------- */

typedef struct {
  Contract *c;
  const gchar *consumer;
  gint64 idle_ms;
  GPtrArray *taken;
  guint want;
} ReclaimJob;

/* Reclaims for job->consumer until job->want deliveries were taken, letting
 * time pass between tries (each try is a worker's reclaim tick). */
static gboolean
reclaimed_enough(gpointer data)
{
  ReclaimJob *job = data;
  g_autoptr(GPtrArray) got =
      sluice_test_reclaim(job->c->broker, job->consumer, q_default,
                          job->want - job->taken->len, job->idle_ms);

  while (got->len > 0)
    g_ptr_array_add(job->taken, g_ptr_array_steal_index(got, 0));
  if (job->taken->len < job->want)
    sluice_clock_advance(job->c->clock, 20);
  return job->taken->len >= job->want;
}

static GPtrArray *
reclaim_until(Contract *c, const gchar *consumer, guint want, gint64 idle_ms)
{
  ReclaimJob job = {
      c, consumer, idle_ms,
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free),
      want};

  ck_assert_msg(sluice_test_wait_for(reclaimed_enough, &job, 60000),
                "%s reclaimed %u of %u deliveries", consumer, job.taken->len,
                want);
  ck_assert_uint_eq(job.taken->len, want);
  return job.taken;
}

/* What a dead consumer held is taken over, with its count raised, and
 * nothing a live consumer renews; what sat idle past the limit is taken
 * too, never more than asked. */
START_TEST(reclaim_takes_over_only_dead_or_idle_deliveries)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GPtrArray) live = NULL;
  g_autoptr(GPtrArray) dead = NULL;
  g_autoptr(GPtrArray) r1 = NULL;
  g_autoptr(GPtrArray) r2 = NULL;
  g_autoptr(GPtrArray) r3 = NULL;
  g_autoptr(GError) error = NULL;
  guint n = 99;

  if (!has(c, SLUICE_BROKER_CAP_LEASES))
    return;
  for (guint i = 0; i < 3; i++) {
    g_autofree gchar *id = g_strdup_printf("e%u", i);
    sluice_test_enqueue(c->broker, id, "default", id, 0);
  }
  sluice_test_heartbeat(c->broker, "alive", 60000, NULL);
  live = sluice_test_fetch(c->broker, "alive", q_default, 2, 0);
  sluice_test_heartbeat(c->broker, "gone", 300, NULL);
  dead = sluice_test_fetch(c->broker, "gone", q_default, 1, 0);
  ck_assert_uint_eq(live->len, 2);
  ck_assert_uint_eq(dead->len, 1);
  sluice_test_heartbeat(c->broker, "r1", 60000, NULL);
  sluice_test_heartbeat(c->broker, "r2", 60000, NULL);
  sluice_test_heartbeat(c->broker, "r3", 60000, NULL);

  /* The dead consumer's delivery, once its lease lapsed; never a live
   * one's under the idle limit. */
  r1 = reclaim_until(c, "r1", 1, 60000);
  ck_assert_str_eq(at(r1, 0)->handle, at(dead, 0)->handle);
  ck_assert_uint_eq(at(r1, 0)->delivery_count, 2);
  ck_assert(g_bytes_equal(at(r1, 0)->payload, at(dead, 0)->payload));
  r2 = sluice_test_reclaim(c->broker, "r2", q_default, 10, 60000);
  ck_assert_uint_eq(r2->len, 0);
  if (sluice_broker_supports(c->broker,
                             SLUICE_BROKER_FEATURE_COUNT_RECLAIMABLE)) {
    ck_assert(sluice_broker_count_reclaimable(c->broker, "r2", q_default, 10,
                                              60000, &n, &error));
    ck_assert_uint_eq(n, 0);
  }
  ck_assert_int_eq(sluice_test_ack(c->broker, "r1", at(r1, 0)),
                   SLUICE_SETTLE_DONE);

  /* A live consumer's deliveries that sat idle past the limit (it held
   * them without renewing them) are taken too. */
  pass_time(c, 500);
  if (sluice_broker_supports(c->broker,
                             SLUICE_BROKER_FEATURE_COUNT_RECLAIMABLE)) {
    ck_assert(sluice_broker_count_reclaimable(c->broker, "r3", q_default, 10,
                                              300, &n, &error));
    ck_assert_uint_eq(n, 2);
  }
  r3 = sluice_test_reclaim(c->broker, "r3", q_default, 1, 300);
  ck_assert_uint_eq(r3->len, 1); /* never more than asked */
  ck_assert_uint_eq(at(r3, 0)->delivery_count, 2);
}
END_TEST

/* Renewals keep a long delivery with its consumer (and do not count as
 * deliveries); once they stop, the lease lapses and a peer takes it. */
START_TEST(heartbeat_keeps_the_deliveries_it_renews)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GPtrArray) held = NULL;
  g_autoptr(GPtrArray) none = NULL;
  g_autoptr(GPtrArray) taken = NULL;

  if (!has(c, SLUICE_BROKER_CAP_LEASES))
    return;
  sluice_test_enqueue(c->broker, "long", "default", "long", 0);
  sluice_test_heartbeat(c->broker, "c1", 5000, NULL);
  held = sluice_test_fetch(c->broker, "c1", q_default, 1, 0);
  ck_assert_uint_eq(held->len, 1);
  /* Renewed every fifth of the lease, for longer than the lease: neither
   * the consumer nor its delivery look dead or idle. (A lease far longer
   * than a renewal interval: a busy machine may hold a thread up for a
   * second or more.) */
  for (guint i = 0; i < 6; i++) {
    pass_time(c, 1000);
    sluice_test_heartbeat(c->broker, "c1", 5000, held);
  }
  sluice_test_heartbeat(c->broker, "c2", 60000, NULL);
  none = sluice_test_reclaim(c->broker, "c2", q_default, 10, 5000);
  ck_assert_uint_eq(none->len, 0);

  /* Renewals stop (a paused process): once the lease lapses a peer takes
   * the delivery over, counted once more. */
  sluice_test_heartbeat(c->broker, "c3", 60000, NULL);
  taken = reclaim_until(c, "c3", 1, 5000);
  ck_assert_uint_eq(at(taken, 0)->delivery_count, 2);
  if (has(c, SLUICE_BROKER_CAP_FENCING))
    ck_assert_int_eq(sluice_test_ack(c->broker, "c1", at(held, 0)),
                     SLUICE_SETTLE_STALE);
  ck_assert_int_eq(sluice_test_ack(c->broker, "c3", at(taken, 0)),
                   SLUICE_SETTLE_DONE);
}
END_TEST

/* FENCING: a consumer back from a stall settles what a peer took over
 * meanwhile: refused as STALE, nothing acknowledged, scheduled or buried;
 * the peer's settles go through. */
START_TEST(a_settle_by_the_former_owner_is_refused_as_stale)
{
  g_autoptr(Contract) c = contract_new();
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(GPtrArray) taken = NULL;
  g_autoptr(GBytes) late = sluice_test_text("late");
  g_autoptr(GBytes) retry = sluice_test_text("retry");
  g_autoptr(SluiceDeadLetter) dl =
      sluice_test_dead_letter("x3", SLUICE_DLQ_MAX_ATTEMPTS, "x3");
  g_autoptr(GHashTable) mine_of = g_hash_table_new(g_bytes_hash, g_bytes_equal);
  SluiceBrokerStats stats;
  SluiceSettlement s[3] = {{0}};

  if (!has(c, SLUICE_BROKER_CAP_LEASES | SLUICE_BROKER_CAP_FENCING))
    return;
  for (guint i = 1; i <= 3; i++) {
    g_autofree gchar *id = g_strdup_printf("x%u", i);
    sluice_test_enqueue(c->broker, id, "default", id, 0);
  }
  sluice_test_heartbeat(c->broker, "c1", 300, NULL);
  got = sluice_test_fetch(c->broker, "c1", q_default, 3, 0);
  ck_assert_uint_eq(got->len, 3);
  for (guint i = 0; i < 3; i++)
    g_hash_table_insert(mine_of, at(got, i)->payload, at(got, i));
  sluice_test_heartbeat(c->broker, "c2", 60000, NULL);
  taken = reclaim_until(c, "c2", 3, 60000);
  for (guint i = 0; i < 3; i++) {
    SluiceDelivery *mine = g_hash_table_lookup(mine_of, at(taken, i)->payload);
    ck_assert_ptr_nonnull(mine);
    ck_assert_uint_eq(at(taken, i)->delivery_count, 2);
    ck_assert_str_eq(at(taken, i)->handle, mine->handle);
  }

  s[0] = (SluiceSettlement){.delivery = at(got, 0),
                            .action = SLUICE_SETTLE_ACK,
                            .id = "x1",
                            .record = late,
                            .record_final = TRUE,
                            .record_ttl_ms = 60000};
  s[1] = (SluiceSettlement){.delivery = at(got, 1),
                            .action = SLUICE_SETTLE_RETRY,
                            .id = "x2",
                            .reschedule_payload = retry,
                            .reschedule_at = 1};
  s[2] = (SluiceSettlement){.delivery = at(got, 2),
                            .action = SLUICE_SETTLE_DEAD_LETTER,
                            .id = "x3",
                            .dead_letter = dl};
  sluice_test_settle(c->broker, "c1", s, 3);
  for (guint i = 0; i < 3; i++)
    ck_assert_int_eq(s[i].status, SLUICE_SETTLE_STALE);
  stats = sluice_test_stats(c->broker, NULL);
  ck_assert_int_eq(stats.scheduled, 0);
  ck_assert_int_eq(stats.dead_letters, 0);
  ck_assert_int_eq(stats.stale_settles, 3);
  ck_assert_int_eq(stats.in_flight, in_flight_of(c, 3));
  sluice_broker_stats_clear(&stats);

  for (guint i = 0; i < 3; i++)
    ck_assert_int_eq(sluice_test_ack(c->broker, "c2", at(taken, i)),
                     SLUICE_SETTLE_DONE);
  stats = sluice_test_stats(c->broker, NULL);
  ck_assert_int_eq(stats.in_flight, in_flight_of(c, 0));
  sluice_broker_stats_clear(&stats);
}
END_TEST

/* ---- The test case ------------------------------------------------------- */

TCase *
sluice_conformance__contract_tcase(const SluiceConformanceFactory *f)
{
  TCase *tc = tcase_create("contract");

  factory = f;
  tcase_set_timeout(tc, 120);
  sluice_conformance__add(tc, enqueue_then_fetch_hands_a_message_out_once, 0);
  sluice_conformance__add(
      tc, enqueue_with_a_claim_reports_existed_and_writes_once, 0);
  sluice_conformance__add(tc, batch_keeps_its_order_across_kinds_of_items, 0);
  sluice_conformance__add(
      tc, promote_due_moves_the_earliest_first_and_reports_the_next, 0);
  sluice_conformance__add(tc, promote_due_never_promotes_twice, 0);
  sluice_conformance__add(
      tc, cancel_scheduled_removes_the_entry_and_writes_the_record, 0);
  sluice_conformance__add(
      tc, fetch_takes_at_most_max_in_the_order_of_its_queues, 0);
  sluice_conformance__add(
      tc, fetch_blocks_until_a_message_arrives_on_any_of_its_queues, 0);
  sluice_conformance__add(tc, wakeup_ends_a_blocked_fetch, 0);
  sluice_conformance__add(
      tc, settle_ack_writes_the_record_with_the_acknowledgement, 0);
  sluice_conformance__add(
      tc, settle_retry_schedules_the_new_envelope_on_the_same_queue, 0);
  sluice_conformance__add(tc, settle_dead_letter_keeps_every_field, 0);
  sluice_conformance__add(tc, malformed_message_is_buried_with_its_raw_bytes,
                          0);
  sluice_conformance__add(tc, one_settle_carries_out_every_action, 0);
  sluice_conformance__add(tc, a_repeated_settle_changes_nothing, 0);
  sluice_conformance__add(
      tc, release_gives_the_delivery_back_without_counting_it, 0);
  sluice_conformance__add(tc, records_are_written_read_and_replaced, 0);
  sluice_conformance__add(
      tc, wait_record_returns_a_final_record_or_what_stands_at_the_timeout, 0);
  sluice_conformance__add(
      tc, list_revocations_gives_the_live_ones_expiring_after_a_time, 0);
  sluice_conformance__add(tc, revocations_since_a_cursor_are_each_listed_once,
                          0);
  sluice_conformance__add(tc, claim_periodic_dispatches_each_occurrence_once,
                          0);
  sluice_conformance__add(tc, dead_letter_cap_drops_the_oldest_and_counts_them,
                          0);
  sluice_conformance__add(tc, dlq_pages_replays_and_deletes_entries, 0);
  sluice_conformance__add(
      tc, lookup_task_finds_scheduled_and_buried_tasks,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_LOOKUP_TASK));
  sluice_conformance__add(
      tc, stats_list_announced_workers_with_what_they_announced,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_ANNOUNCE));
  sluice_conformance__add(tc, stats_count_each_queue_and_purge_empties_one, 0);
  sluice_conformance__add(
      tc, in_flight_counts_deliveries_until_settled_and_purge_spares_them,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_IN_FLIGHT));
  sluice_conformance__add(
      tc, reclaim_takes_over_only_dead_or_idle_deliveries,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_LEASES));
  sluice_conformance__add(
      tc, heartbeat_keeps_the_deliveries_it_renews,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_LEASES));
  sluice_conformance__add(
      tc, a_settle_by_the_former_owner_is_refused_as_stale,
      SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_LEASES) |
          SLUICE_CONFORMANCE_NEEDS(SLUICE_BROKER_FEATURE_FENCING));
  sluice_conformance__add(tc, list_queued_pages_cover_every_ready_message_once,
                          0);
  sluice_conformance__add(tc, list_scheduled_pages_in_due_order, 0);
  sluice_conformance__add(tc, paused_queues_are_stored_and_listed, 0);
  sluice_conformance__add(
      tc, a_paused_queue_is_not_fetched_even_by_a_blocked_fetch, 0);
  sluice_conformance__add(tc, remove_queued_takes_out_only_ready_messages, 0);
  sluice_conformance__add(tc, reschedule_moves_an_entry_or_runs_it_now, 0);
  return tc;
}

/* broker-calls.c - see broker-calls.h. */
#include "config.h"

#include <string.h>

#include "tests/helpers/broker-calls.h"

/* Runs @call, which reports into _error, and fails the test with that
 * error if it returns FALSE. */
#define SLOT_OK(call, what)                                                    \
  do {                                                                         \
    g_autoptr(GError) _error = NULL;                                           \
    ck_assert_msg((call), "%s: %s", (what),                                    \
                  _error != NULL ? _error->message : "?");                     \
  } while (0)

GBytes *
sluice_test_text(const gchar *s)
{
  return g_bytes_new(s, strlen(s));
}

gboolean
sluice_test_bytes_is(GBytes *b, const gchar *s)
{
  gsize len = 0;
  gconstpointer data;

  if (b == NULL)
    return s == NULL;
  data = g_bytes_get_data(b, &len);
  return s != NULL && len == strlen(s) && memcmp(data, s, len) == 0;
}

gchar *
sluice_test_bytes_str(GBytes *b)
{
  gsize len = 0;
  gconstpointer data = g_bytes_get_data(b, &len);

  return g_strndup(data, len);
}

void
sluice_test_enqueue(SluiceBroker *b, const gchar *id, const gchar *queue,
                    const gchar *payload, gint64 due_at)
{
  g_autoptr(GBytes) p = sluice_test_text(payload);
  SluiceSubmit item = {
      .id = id, .queue = queue, .payload = p, .due_at = due_at};

  SLOT_OK(sluice_broker_enqueue(b, &item, 1, &_error), "enqueue");
}

GPtrArray *
sluice_test_fetch(SluiceBroker *b, const gchar *consumer,
                  const gchar *const *queues, guint max, gint64 block_ms)
{
  GPtrArray *out =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free);

  SLOT_OK(sluice_broker_fetch(b, consumer, queues, max, block_ms, out, &_error),
          "fetch");
  return out;
}

GPtrArray *
sluice_test_reclaim(SluiceBroker *b, const gchar *consumer,
                    const gchar *const *queues, guint max, gint64 idle_ms)
{
  GPtrArray *out =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free);

  SLOT_OK(
      sluice_broker_reclaim(b, consumer, queues, max, idle_ms, out, &_error),
      "reclaim");
  return out;
}

struct _SluiceTestFetch {
  SluiceBroker *broker;
  gchar **queues;
  guint max;
  gint64 block_ms;
  GPtrArray *got;
  GError *error;
  gboolean ok;
  gint returned;
  GThread *thread;
};

static gpointer
fetch_thread(gpointer data)
{
  SluiceTestFetch *f = data;

  f->ok = sluice_broker_fetch(f->broker, "c1", (const gchar *const *)f->queues,
                              f->max, f->block_ms, f->got, &f->error);
  g_atomic_int_set(&f->returned, 1);
  return NULL;
}

SluiceTestFetch *
sluice_test_fetch_start(SluiceBroker *b, const gchar *const *queues, guint max,
                        gint64 block_ms)
{
  SluiceTestFetch *f = g_new0(SluiceTestFetch, 1);

  f->broker = sluice_broker_ref(b);
  f->queues = g_strdupv((gchar **)queues);
  f->max = max;
  f->block_ms = block_ms;
  f->got = g_ptr_array_new_with_free_func((GDestroyNotify)sluice_delivery_free);
  f->thread = g_thread_new("fetch", fetch_thread, f);
  return f;
}

gboolean
sluice_test_fetch_returned(SluiceTestFetch *f)
{
  return g_atomic_int_get(&f->returned);
}

GPtrArray *
sluice_test_fetch_join(SluiceTestFetch *f, GError **error)
{
  GPtrArray *got = NULL;

  g_thread_join(f->thread);
  if (f->ok)
    got = g_steal_pointer(&f->got);
  else
    g_propagate_error(error, g_steal_pointer(&f->error));
  g_clear_pointer(&f->got, g_ptr_array_unref);
  g_strfreev(f->queues);
  sluice_broker_unref(f->broker);
  g_free(f);
  return got;
}

void
sluice_test_heartbeat(SluiceBroker *b, const gchar *consumer, gint64 lease_ms,
                      GPtrArray *held)
{
  SLOT_OK(sluice_broker_heartbeat(
              b, consumer, lease_ms,
              held != NULL ? (SluiceDelivery *const *)held->pdata : NULL,
              held != NULL ? held->len : 0, &_error),
          "heartbeat");
}

SluiceDelivery *
sluice_test_delivery_at(GPtrArray *deliveries, guint i)
{
  ck_assert_uint_lt(i, deliveries->len);
  return g_ptr_array_index(deliveries, i);
}

void
sluice_test_settle(SluiceBroker *b, const gchar *consumer,
                   SluiceSettlement *items, guint n)
{
  SLOT_OK(sluice_broker_settle(b, consumer, items, n, &_error), "settle");
}

SluiceSettleStatus
sluice_test_settle_one(SluiceBroker *b, const gchar *consumer,
                       SluiceSettlement *s)
{
  sluice_test_settle(b, consumer, s, 1);
  return s->status;
}

SluiceSettleStatus
sluice_test_ack(SluiceBroker *b, const gchar *consumer, SluiceDelivery *d)
{
  SluiceSettlement s = {.delivery = d, .action = SLUICE_SETTLE_ACK};

  return sluice_test_settle_one(b, consumer, &s);
}

SluiceDeadLetter *
sluice_test_dead_letter(const gchar *task_id, const gchar *reason,
                        const gchar *payload)
{
  SluiceDeadLetter *dl = sluice_dead_letter_new();

  dl->task_id = g_strdup(task_id);
  dl->task = g_strdup("tasks.add");
  dl->reason = g_strdup(reason);
  dl->detail = g_strdup("it failed");
  dl->source = g_strdup("default");
  dl->deliveries = 2;
  dl->at = 1700000000000;
  dl->payload = sluice_test_text(payload);
  return dl;
}

void
sluice_test_bury(SluiceBroker *b, const gchar *id, const gchar *reason)
{
  static const gchar *const q_default[] = {"default", NULL};
  g_autoptr(GPtrArray) got = NULL;
  g_autoptr(SluiceDeadLetter) dl = NULL;
  SluiceSettlement s = {0};

  sluice_test_enqueue(b, id, "default", id, 0);
  got = sluice_test_fetch(b, "c1", q_default, 1, 0);
  ck_assert_uint_eq(got->len, 1);
  dl = sluice_test_dead_letter(id, reason, id);
  s.delivery = sluice_test_delivery_at(got, 0);
  s.action = SLUICE_SETTLE_DEAD_LETTER;
  s.id = id;
  s.dead_letter = dl;
  sluice_test_settle(b, "c1", &s, 1);
}

gchar *
sluice_test_client_enqueue(SluiceClient *client, const gchar *task,
                           const gchar *json_args,
                           const SluiceEnqueueOptions *options)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) args = NULL;
  gchar *id;

  if (json_args != NULL) {
    args = sluice_args_from_json(json_args, -1, &error);
    ck_assert_msg(args != NULL, "%s", error->message);
  }
  id = sluice_client_enqueue(client, task, args, options, &error);
  ck_assert_msg(id != NULL, "enqueue %s: %s", task,
                error != NULL ? error->message : "");
  return id;
}

SluiceBrokerStats
sluice_test_stats(SluiceBroker *b, const gchar *const *queues)
{
  SluiceBrokerStats stats;

  sluice_broker_stats_init(&stats);
  SLOT_OK(sluice_broker_stats(b, queues, &stats, &_error), "stats");
  return stats;
}

gint64
sluice_test_queue_ready(const SluiceBrokerStats *stats, const gchar *name)
{
  for (guint i = 0; i < stats->queues->len; i++) {
    SluiceQueueStats *q = g_ptr_array_index(stats->queues, i);
    if (strcmp(q->name, name) == 0)
      return q->ready;
  }
  return -1;
}

gint64
sluice_test_reason_count(const SluiceBrokerStats *stats, const gchar *reason)
{
  gint64 *n = g_hash_table_lookup(stats->dead_letters_by_reason, reason);

  return n != NULL ? *n : 0;
}

gint64
sluice_test_stale_settles(SluiceBroker *b)
{
  SluiceBrokerStats stats = sluice_test_stats(b, NULL);
  gint64 n = stats.stale_settles;

  sluice_broker_stats_clear(&stats);
  return n;
}

gboolean
sluice_test_wait_for(gboolean (*check)(gpointer), gpointer data,
                     gint64 timeout_ms)
{
  gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;

  while (!check(data)) {
    if (g_get_monotonic_time() >= deadline)
      return check(data);
    g_usleep(20 * 1000);
  }
  return TRUE;
}

typedef struct {
  SluiceClient *client;
  const GPid *pids;
  guint n;
} AliveWait;

static gboolean
all_alive(gpointer data)
{
  AliveWait *w = data;
  SluiceBrokerStats stats = {0};
  guint found = 0;

  if (!sluice_client_get_stats(w->client, NULL, &stats, NULL))
    return FALSE;
  for (guint i = 0; i < w->n; i++)
    for (guint j = 0; j < stats.workers->len; j++) {
      SluiceWorkerInfo *info = g_ptr_array_index(stats.workers, j);

      if (info->alive && info->pid == w->pids[i]) {
        found++;
        break;
      }
    }
  sluice_broker_stats_clear(&stats);
  return found == w->n;
}

void
sluice_test_wait_alive(SluiceBroker *b, const GPid *pids, guint n)
{
  g_autoptr(SluiceClient) client = sluice_client_new(b, NULL, NULL);
  AliveWait w = {client, pids, n};

  ck_assert_msg(sluice_test_wait_for(all_alive, &w, 60 * 1000),
                "%u worker processes were not listed alive within 60 s", n);
}

/* broker-calls.h - calling broker slots from a test, one assertion each.
 *
 * For tests that drive a broker through the dispatch functions of
 * <sluice/sys/broker.h> rather than through a client and a worker: the
 * contract part of the conformance suite and the Redis broker programs
 * (and, for those that do use a client, its enqueue).
 * Each wrapper fails the test with the slot's error when the slot fails,
 * so a test reads as the calls it makes. Payloads are short strings.
 * They use Check's assertions: call them from a Check test (from its
 * threads too, when the test runs in its own process).
 */
#pragma once

#include <check.h>

#include <sluice/sys/broker.h>
#include <sluice/sluice.h>

G_BEGIN_DECLS

/* Returns: (transfer full): the bytes of @s, without its NUL. */
GBytes *sluice_test_text(const gchar *s);

/* TRUE when @b holds exactly the bytes of @s (both NULL counts). */
gboolean sluice_test_bytes_is(GBytes *b, const gchar *s);

/* Returns: (transfer full): @b as a string. */
gchar *sluice_test_bytes_str(GBytes *b);

/* Submits one message, with nothing but its payload (@due_at 0: ready). */
void sluice_test_enqueue(SluiceBroker *b, const gchar *id, const gchar *queue,
                         const gchar *payload, gint64 due_at);

/* Returns: (transfer full) (element-type SluiceDelivery): what `fetch`
 * handed out. */
GPtrArray *sluice_test_fetch(SluiceBroker *b, const gchar *consumer,
                             const gchar *const *queues, guint max,
                             gint64 block_ms);

/* Returns: (transfer full) (element-type SluiceDelivery): what `reclaim`
 * took over. */
GPtrArray *sluice_test_reclaim(SluiceBroker *b, const gchar *consumer,
                               const gchar *const *queues, guint max,
                               gint64 idle_ms);

/* A fetch run on a thread of its own, for tests that block in one. */
typedef struct _SluiceTestFetch SluiceTestFetch;

/* Starts `fetch` as consumer "c1" on a new thread. @queues is copied.
 * Returns: (transfer full): join it with sluice_test_fetch_join(). */
SluiceTestFetch *sluice_test_fetch_start(SluiceBroker *b,
                                         const gchar *const *queues, guint max,
                                         gint64 block_ms);

/* TRUE once the fetch has returned. */
gboolean sluice_test_fetch_returned(SluiceTestFetch *f);

/* Waits for the fetch and frees @f. Returns: (transfer full) (element-type
 * SluiceDelivery): what it handed out, or NULL with its @error. */
GPtrArray *sluice_test_fetch_join(SluiceTestFetch *f, GError **error);

/* Renews @consumer for @lease_ms, with the deliveries of @held (nullable)
 * it still holds. */
void sluice_test_heartbeat(SluiceBroker *b, const gchar *consumer,
                           gint64 lease_ms, GPtrArray *held);

/* (transfer none): delivery @i of @deliveries. */
SluiceDelivery *sluice_test_delivery_at(GPtrArray *deliveries, guint i);

/* Settles @n items; their statuses are set. */
void sluice_test_settle(SluiceBroker *b, const gchar *consumer,
                        SluiceSettlement *items, guint n);

/* Settles one item. Returns: its status. */
SluiceSettleStatus sluice_test_settle_one(SluiceBroker *b,
                                          const gchar *consumer,
                                          SluiceSettlement *s);

/* Acknowledges @d without a record. Returns: the status. */
SluiceSettleStatus sluice_test_ack(SluiceBroker *b, const gchar *consumer,
                                   SluiceDelivery *d);

/* Returns: (transfer full): a dead letter of task "tasks.add" with every
 * field set, as the core fills it: @reason, detail "it failed", source
 * "default", 2 deliveries, buried at 1700000000000, @payload. */
SluiceDeadLetter *sluice_test_dead_letter(const gchar *task_id,
                                          const gchar *reason,
                                          const gchar *payload);

/* Enqueues @id (payload @id) on queue "default", fetches it as consumer
 * "c1" and buries it for @reason. */
void sluice_test_bury(SluiceBroker *b, const gchar *id, const gchar *reason);

/* Enqueues @task through @client, with @json_args (nullable) as its
 * arguments and @options (nullable). Returns: (transfer full): the id. */
gchar *sluice_test_client_enqueue(SluiceClient *client, const gchar *task,
                                  const gchar *json_args,
                                  const SluiceEnqueueOptions *options);

/* Returns: the broker's stats for @queues (NULL: every queue); the caller
 * clears them with sluice_broker_stats_clear(). */
SluiceBrokerStats sluice_test_stats(SluiceBroker *b,
                                    const gchar *const *queues);

/* The ready count of queue @name in @stats, or -1 if it is not listed. */
gint64 sluice_test_queue_ready(const SluiceBrokerStats *stats,
                               const gchar *name);

/* The dead letters of @reason counted in @stats (0 if none). */
gint64 sluice_test_reason_count(const SluiceBrokerStats *stats,
                                const gchar *reason);

/* The broker's count of settles refused by fencing. */
gint64 sluice_test_stale_settles(SluiceBroker *b);

/* Polls @check every 20 ms until it holds or @timeout_ms of real time
 * passed. For conditions other processes or threads bring about without a
 * notification of their own. Returns: whether @check held. */
gboolean sluice_test_wait_for(gboolean (*check)(gpointer), gpointer data,
                              gint64 timeout_ms);

/* Waits (bounded, real time: 60 s) until the @n worker processes @pids are
 * listed alive on @b. Each has installed its signal handlers by then, so
 * a SIGTERM stops it gracefully; a worker slow to start (a sanitizer build
 * under load) may otherwise take a SIGTERM before it has a handler. */
void sluice_test_wait_alive(SluiceBroker *b, const GPid *pids, guint n);

G_END_DECLS

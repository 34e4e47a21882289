/* redis-replace.h - replace_payloads on a Redis broker, through the public
 * broker API only: what test-redis-fast, test-redis-reliable-broker and
 * test-redis-partitions share.
 *
 * The queued half differs by mode (a list element is rewritten in place, a
 * stream entry is added again at the end), so each program checks it
 * itself; the schedule and the dead letters are the shared layer's, the
 * same in both modes and in every partition, and checked here. Payloads
 * are bytes the broker never decodes: the replacements hold NUL and
 * non-UTF-8 bytes.
 *
 * The functions use Check's assertions.
 */
#pragma once

#include <check.h>

#include <sluice/sys/broker.h>

G_BEGIN_DECLS

/* Returns: (transfer full): @len bytes of @data (NULs included). */
GBytes *sluice_test_raw(const gchar *data, gsize len);

/* Replaces one message (sluice_broker_replace_payloads(), failing the test
 * on an error). Returns: its @replaced. */
gboolean sluice_test_replace(SluiceBroker *b, SluiceWaitingPlace place,
                             const gchar *queue, const gchar *handle,
                             GBytes *payload, GBytes *replacement);

/* Returns: (transfer full): every ready message of @queue, in listing
 * order (SluiceListedMessage). */
GPtrArray *sluice_test_list_queued_all(SluiceBroker *b, const gchar *queue);

/* Returns: (transfer full): every dead letter, in listing order
 * (SluiceDeadLetter). */
GPtrArray *sluice_test_dlq_all(SluiceBroker *b);

/* On @b, which must hold nothing in queues "default" and "later", on its
 * schedule or among its dead letters: a scheduled message is replaced with
 * its due time and queue kept, a dead letter with its reason, detail,
 * source, deliveries, time, task and task id kept (its entry id changes,
 * and lookup_task finds the new one), and stale items (other bytes, an
 * entry or task that is gone or moved on) change nothing. With @ordered, a
 * replaced dead letter is listed after the others (a new stream entry). */
void sluice_test_redis_replace_scheduled_and_dead(SluiceBroker *b,
                                                  gboolean ordered);

G_END_DECLS

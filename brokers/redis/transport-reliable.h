/* transport-reliable.h - test hooks of the redis-reliable transport
 * (internal; the transport itself is reached through redis-transport.h).
 *
 * Only tests call these. They change one broker instance, never global
 * state.
 */
#pragma once

#include <sluice/sys/broker.h>

G_BEGIN_DECLS

/**
 * sluice_redis__reliable_test_skip_priority_read:
 * @broker: a redis-reliable broker
 * @skip: TRUE to make `fetch` over several queues go straight to its
 *   blocking XREADGROUP, without the non-blocking read in priority order
 *   first
 *
 * Lets a test produce the race that the priority read normally closes:
 * several queues with data when the blocking read starts, which answers
 * with up to COUNT entries per queue. The transport must then keep at
 * most the number asked for and hand the rest back.
 */
void sluice_redis__reliable_test_skip_priority_read(SluiceBroker *broker,
                                                    gboolean skip);

G_END_DECLS

/* trace-broker.h - a broker that wraps another and traces every call. */
#pragma once

#include <sluice/sys/broker.h>
#include <sluice/sluice.h>

/* Returns: (transfer full): a broker forwarding to @inner (which it
 * references), logging each slot call at debug level with its duration and
 * outcome, and counting calls per slot. */
SluiceBroker *trace_broker_new(SluiceBroker *inner);

/* Returns: how many times slot @slot ("enqueue", "settle", ...) was called. */
guint trace_broker_get_calls(SluiceBroker *broker, const gchar *slot);

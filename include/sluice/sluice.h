/* sluice.h - the one header users include.
 *
 * Sluice is a task queue for C: producers enqueue named tasks with msgpack
 * arguments, workers run the C function registered under that name, retry
 * it with backoff, store its result and bury what can never succeed in a
 * dead-letter queue. See README.md for a tour and docs/design.md for how it
 * is built.
 *
 * Broker authors include <sluice/sys/broker.h> as well.
 */
#pragma once

#define SLUICE_INSIDE
#include <sluice/sluice-batch.h>
#include <sluice/sluice-brokers.h>
#include <sluice/sluice-client.h>
#include <sluice/sluice-clock.h>
#include <sluice/sluice-envelope.h>
#include <sluice/sluice-events.h>
#include <sluice/sluice-flow.h>
#include <sluice/sluice-macros.h>
#include <sluice/sluice-metrics.h>
#include <sluice/sluice-middleware.h>
#include <sluice/sluice-module.h>
#include <sluice/sluice-policy.h>
#include <sluice/sluice-progress.h>
#include <sluice/sluice-redis.h>
#include <sluice/sluice-sqlite.h>
#include <sluice/sluice-result.h>
#include <sluice/sluice-seal.h>
#include <sluice/sluice-task.h>
#include <sluice/sluice-testing.h>
#include <sluice/sluice-trace.h>
#include <sluice/sluice-worker.h>
#include <sluice/sluice-workflow.h>
#undef SLUICE_INSIDE

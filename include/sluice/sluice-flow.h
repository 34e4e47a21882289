/* sluice-flow.h - flow control: rate limits, concurrency limits, and how
 * long a task may snooze.
 *
 * The worker decides, the broker carries out: a rate limit is checked by
 * the worker when it fetches a message, with one atomic step of the broker
 * (the `rate_acquire` slot of <sluice/sys/broker.h>) on the broker's clock
 * (Redis TIME, or the broker's SluiceClock), never on a worker's. A message
 * over its limit is not a failure: it goes back on the schedule, due when
 * its key can admit it again, with its attempt and its delivery count
 * untouched, and it holds up no other queue or key.
 *
 * docs/flow-control.md says what each setting does and what it costs.
 */
#pragma once

#include <glib.h>

#include <sluice/sluice-macros.h>

G_BEGIN_DECLS

/**
 * SluiceLimitKey:
 * @SLUICE_LIMIT_KEY_NONE: one bucket for everything the limit covers
 * @SLUICE_LIMIT_KEY_TASK: one bucket per task name (useful on a queue)
 * @SLUICE_LIMIT_KEY_HEADER: one bucket per value of the header named
 *   `key_name` (a tenant, a customer); messages without it share one
 * @SLUICE_LIMIT_KEY_ARG: one bucket per value of the argument named
 *   `key_name` (arguments that are a map; a string, an integer or a
 *   boolean value); messages without it share one
 *
 * What splits a limit into buckets, each limited on its own.
 */
typedef enum {
  SLUICE_LIMIT_KEY_NONE,
  SLUICE_LIMIT_KEY_TASK,
  SLUICE_LIMIT_KEY_HEADER,
  SLUICE_LIMIT_KEY_ARG,
} SluiceLimitKey;

/**
 * SluiceRateLimit:
 * @count: how many runs per @period_ms; > 0
 * @period_ms: the period; > 0
 * @burst: how many may start at once after a quiet spell; 0 means 1
 *   (evenly spaced runs, one every period_ms / count). Any window of one
 *   period holds at most count + burst - 1 admissions.
 * @key: what splits the limit into buckets
 * @key_name: (nullable): the header or argument name for
 *   SLUICE_LIMIT_KEY_HEADER and SLUICE_LIMIT_KEY_ARG; NULL otherwise
 *
 * "count per period_ms, with bursts of burst", as the generic cell rate
 * algorithm: a bucket admits a run when the theoretical time of its next
 * admission, less (burst - 1) intervals, is not in the future.
 * Initialise with sluice_rate_limit_init().
 */
typedef struct {
  gint64 count;
  gint64 period_ms;
  gint64 burst;
  SluiceLimitKey key;
  const gchar *key_name;
} SluiceRateLimit;

/**
 * SluiceQueueRateLimit:
 * @queue: the queue it limits
 * @rate: its limit
 *
 * A rate limit for every message fetched from @queue (a task's own limit,
 * SluiceTaskOptions.rate_limit, replaces its queue's).
 */
typedef struct {
  const gchar *queue;
  SluiceRateLimit rate;
} SluiceQueueRateLimit;

/**
 * SluiceConcurrencyLimit:
 * @max: at most this many running at once, across every worker; > 0
 * @key: what splits the limit (SLUICE_LIMIT_KEY_NONE: one set of @max
 *   slots for everything it covers)
 * @key_name: (nullable): the header or argument name for
 *   SLUICE_LIMIT_KEY_HEADER and SLUICE_LIMIT_KEY_ARG; NULL otherwise
 *
 * A message runs only while it holds one of the @max slots of its key.
 * Slots are leases kept by the broker: the worker renews those of its
 * running tasks with its heartbeat and gives each back when its task is
 * settled, and a slot of a worker that died lapses after its lease
 * (visibility_timeout_ms). A message that finds every slot taken waits on
 * the schedule, using no attempt and no delivery; the release of a slot
 * moves the oldest waiting message of its key back to its queue at once.
 */
typedef struct {
  guint max;
  SluiceLimitKey key;
  const gchar *key_name;
} SluiceConcurrencyLimit;

/**
 * SluiceQueueConcurrencyLimit:
 * @queue: the queue it limits
 * @limit: its limit
 *
 * A concurrency limit for every message fetched from @queue (a task's own,
 * SluiceTaskOptions.concurrency_limit, replaces its queue's).
 */
typedef struct {
  const gchar *queue;
  SluiceConcurrencyLimit limit;
} SluiceQueueConcurrencyLimit;

/** The most times a task may snooze when its options do not say. */
#define SLUICE_DEFAULT_MAX_SNOOZES 25

/* The dead-letter reason of a task that snoozed more than max_snoozes is
 * SLUICE_DLQ_SNOOZED_TOO_OFTEN (sluice-brokers.h, with the others). */

/**
 * sluice_rate_limit_init:
 * @limit: (out caller-allocates): set to "no limit" (count 0): fill in
 *   count and period_ms
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_rate_limit_init(SluiceRateLimit *limit);

/**
 * sluice_rate_limit_validate:
 * @limit: (transfer none): the limit
 *
 * Checks @limit the way sluice_registry_add() and sluice_worker_new() do.
 * Returns: TRUE if it is well formed; otherwise FALSE and @error
 * (SLUICE_TASK_ERROR_INVALID) naming the field and what it must be.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_rate_limit_validate(const SluiceRateLimit *limit,
                                    GError **error);

/**
 * SluiceUniqueScope:
 * @SLUICE_UNIQUE_WHILE_QUEUED: no second message of the key while one waits
 *   (in its queue or on the schedule); the claim ends when it starts
 * @SLUICE_UNIQUE_WHILE_RUNNING: no second one while one waits or runs; the
 *   claim ends when it finishes (succeeded, failed for good, cancelled or
 *   dead-lettered; a retry keeps it). While it runs the claim is a lease
 *   renewed with the worker's heartbeat: a worker that dies holds it at
 *   most one visibility_timeout_ms longer
 * @SLUICE_UNIQUE_FOR_TTL: no second one for @ttl_ms after the first was
 *   enqueued, whatever became of it
 *
 * How long a uniqueness key stays claimed.
 */
typedef enum {
  SLUICE_UNIQUE_WHILE_QUEUED,
  SLUICE_UNIQUE_WHILE_RUNNING,
  SLUICE_UNIQUE_FOR_TTL,
} SluiceUniqueScope;

/**
 * SluiceUniqueOptions:
 * @key: (nullable): the uniqueness key; NULL = derived from the task name
 *   and the argument bytes (a SHA-256 of both: the same task with the
 *   same arguments, encoded the same way, is the same key)
 * @scope: how long it is claimed
 * @ttl_ms: SLUICE_UNIQUE_FOR_TTL: how long, > 0. Other scopes: the longest
 *   a claim of a message that waits is kept if the message is lost (a
 *   purge, a deleted task); 0 means the client's dedup_ttl_ms (24 h)
 * @replace: a new message of a key held by one that has not started
 *   replaces it (the new one wins; the old one is taken off the schedule,
 *   or skipped when it starts) instead of being refused
 * @debounce_ms: > 0: only the last of a burst runs: the message is
 *   delayed by @debounce_ms, and each new one of the key within that time
 *   replaces it (its arguments win) and pushes the run on by @debounce_ms.
 *   Implies @replace; wins over the enqueue's delay_ms and eta_ms
 *
 * Set SluiceEnqueueOptions.unique to one (copied when enqueueing). A
 * message refused because its key is held is reported by
 * sluice_client_enqueue() as SLUICE_CLIENT_ERROR_DUPLICATE naming the
 * holder, and by sluice_client_enqueue_full() as the holder's id with
 * out_existed set. Needs a broker with the unique_enqueue slot
 * (docs/flow-control.md); others refuse with UNSUPPORTED.
 */
typedef struct {
  const gchar *key;
  SluiceUniqueScope scope;
  gint64 ttl_ms;
  gboolean replace;
  gint64 debounce_ms;
} SluiceUniqueOptions;

G_END_DECLS

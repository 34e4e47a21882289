/* sluice-policy.h - the retry policy and how its three levels combine.
 *
 * A retry policy is set at three levels: globally (the worker's options), per
 * task (when it is registered) and per message (when it is enqueued). Each
 * field is resolved on its own: the message's value if it set one, else the
 * task's, else the global one, else Sluice's default. A level leaves a field
 * unset with one encoding for every numeric field, SLUICE_RETRY_UNSET (any
 * negative value), and SLUICE_UNSET for jitter: what
 * sluice_retry_policy_init_unset() produces.
 *
 * Backoff after failed attempt n (1-based) is
 *     min(initial_backoff_ms * multiplier^(n-1), max_backoff_ms)
 * and with jitter a uniformly random value in [half that, that], so a batch
 * that failed together does not retry together. Defaults: 3 attempts,
 * 1500 ms, x2.0, capped at 30000 ms, jitter on (1.5 s, 3, 6, 12, 24, 30, 30).
 */
#pragma once

#include <sluice/sluice-macros.h>

G_BEGIN_DECLS

#define SLUICE_DEFAULT_MAX_ATTEMPTS 3
#define SLUICE_DEFAULT_INITIAL_BACKOFF_MS 1500
#define SLUICE_DEFAULT_BACKOFF_MULTIPLIER 2.0
#define SLUICE_DEFAULT_MAX_BACKOFF_MS 30000

/* A numeric field of a SluiceRetryPolicy that a level leaves to the one
 * below (any negative value means the same). */
#define SLUICE_RETRY_UNSET (-1)

/**
 * SluiceTristate:
 * A boolean setting that a level may leave to the level below.
 */
typedef enum {
  SLUICE_UNSET = 0,
  SLUICE_OFF = 1,
  SLUICE_ON = 2,
} SluiceTristate;

/**
 * SluiceRetryPolicy:
 * @max_attempts: attempts in all, the first included (>= 1)
 * @initial_backoff_ms: delay after the first failure (>= 0; 0 retries at
 *   once)
 * @multiplier: growth per attempt (values below 1.0 count as 1.0)
 * @max_backoff_ms: cap of the delay (>= 0)
 * @jitter: randomise each delay within [d/2, d]; SLUICE_UNSET = unset
 *
 * The numeric fields are unset when SLUICE_RETRY_UNSET (negative); a set
 * value out of range (max_attempts 0) is refused where the policy is given
 * (enqueue, registration, worker options).
 *
 * A plain value type: copy it freely; it owns nothing.
 */
typedef struct {
  gint max_attempts;
  gint64 initial_backoff_ms;
  gdouble multiplier;
  gint64 max_backoff_ms;
  SluiceTristate jitter;
} SluiceRetryPolicy;

/** sluice_retry_policy_init_unset: sets every field of @policy to unset. */
SLUICE_AVAILABLE_IN_0_1
void sluice_retry_policy_init_unset(SluiceRetryPolicy *policy);

/** sluice_retry_policy_init_default: sets @policy to Sluice's defaults. */
SLUICE_AVAILABLE_IN_0_1
void sluice_retry_policy_init_default(SluiceRetryPolicy *policy);

/**
 * sluice_retry_policy_resolve:
 * @out: (out caller-allocates): the resolved policy, every field set
 * @global: (nullable): the worker-wide level
 * @task: (nullable): the task's level
 * @message: (nullable): the message's level
 *
 * Resolves field by field: message over task over global over the default.
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_retry_policy_resolve(SluiceRetryPolicy *out,
                                 const SluiceRetryPolicy *global,
                                 const SluiceRetryPolicy *task,
                                 const SluiceRetryPolicy *message);

/**
 * sluice_retry_policy_backoff_ms:
 * @policy: a resolved policy (every field set)
 * @failed_attempt: the 1-based attempt that just failed
 * @rand: (nullable): source of jitter; NULL uses g_random_*()
 *
 * Returns: the delay before the next attempt, in ms.
 */
SLUICE_AVAILABLE_IN_0_1
gint64 sluice_retry_policy_backoff_ms(const SluiceRetryPolicy *policy,
                                      guint failed_attempt, GRand *rand);

G_END_DECLS

/* policy.c - retry policy resolution and backoff (see sluice-policy.h).
 *
 * Resolution is per field, so a message that only overrides max_attempts
 * still inherits the task's backoff. Every numeric field is unset when
 * negative (SLUICE_RETRY_UNSET): 0 is a meaningful backoff (retry at once),
 * so no other value could serve all four fields.
 */
#include "config.h"

#include <math.h>

#include "lib/sluice-private.h"

void
sluice_retry_policy_init_unset(SluiceRetryPolicy *policy)
{
  g_return_if_fail(policy != NULL);
  policy->max_attempts = SLUICE_RETRY_UNSET;
  policy->initial_backoff_ms = SLUICE_RETRY_UNSET;
  policy->multiplier = SLUICE_RETRY_UNSET;
  policy->max_backoff_ms = SLUICE_RETRY_UNSET;
  policy->jitter = SLUICE_UNSET;
}

void
sluice_retry_policy_init_default(SluiceRetryPolicy *policy)
{
  g_return_if_fail(policy != NULL);
  policy->max_attempts = SLUICE_DEFAULT_MAX_ATTEMPTS;
  policy->initial_backoff_ms = SLUICE_DEFAULT_INITIAL_BACKOFF_MS;
  policy->multiplier = SLUICE_DEFAULT_BACKOFF_MULTIPLIER;
  policy->max_backoff_ms = SLUICE_DEFAULT_MAX_BACKOFF_MS;
  policy->jitter = SLUICE_ON;
}

/* Overlays the fields @level sets onto @out. */
static void
overlay(SluiceRetryPolicy *out, const SluiceRetryPolicy *level)
{
  if (level == NULL)
    return;
  if (level->max_attempts >= 0)
    out->max_attempts = level->max_attempts;
  if (level->initial_backoff_ms >= 0)
    out->initial_backoff_ms = level->initial_backoff_ms;
  if (level->multiplier >= 0.0)
    out->multiplier = level->multiplier;
  if (level->max_backoff_ms >= 0)
    out->max_backoff_ms = level->max_backoff_ms;
  if (level->jitter != SLUICE_UNSET)
    out->jitter = level->jitter;
}

void
sluice_retry_policy_resolve(SluiceRetryPolicy *out,
                            const SluiceRetryPolicy *global,
                            const SluiceRetryPolicy *task,
                            const SluiceRetryPolicy *message)
{
  g_return_if_fail(out != NULL);
  sluice_retry_policy_init_default(out);
  overlay(out, global);
  overlay(out, task);
  overlay(out, message);
  /* Refused where given; a policy filled in by hand may still hold them. A
   * multiplier below 1 would shrink delays: constant backoff instead. */
  if (out->multiplier < 1.0)
    out->multiplier = 1.0;
  if (out->max_attempts < 1)
    out->max_attempts = 1;
}

gint64
sluice_retry_policy_backoff_ms(const SluiceRetryPolicy *policy,
                               guint failed_attempt, GRand *rand)
{
  gdouble delay;
  gdouble cap;

  g_return_val_if_fail(policy != NULL, 0);
  if (failed_attempt < 1)
    failed_attempt = 1;

  cap = (gdouble)MAX(policy->max_backoff_ms, 0);
  /* pow() overflows to inf for large attempts; the cap absorbs it. */
  delay = (gdouble)MAX(policy->initial_backoff_ms, 0) *
          pow(MAX(policy->multiplier, 1.0), (gdouble)(failed_attempt - 1));
  if (!(delay <= cap))
    delay = cap;
  if (policy->jitter == SLUICE_ON) {
    gdouble r = rand != NULL ? g_rand_double(rand) : g_random_double();
    delay = delay / 2.0 + r * (delay / 2.0);
  }
  return (gint64)llround(delay);
}

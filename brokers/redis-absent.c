/* redis-absent.c - the Redis broker's public API (sluice-redis.h) in a
 * library configured --without-redis: there is no broker to make, and
 * each call says so, and how to get one, instead of the program failing
 * to link. broker-url.c and the command reach Redis through these same
 * functions, so a redis:// URL gets this error too.
 */
#include "config.h"

#include <string.h>

#include <sluice/sluice.h>

static void
not_built(GError **error)
{
  g_set_error_literal(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_FAILED,
                      "this libsluice was built without the Redis broker "
                      "(configure --without-redis); install libhiredis-dev "
                      "and build it again with the Redis broker, or use the "
                      "memory or SQLite broker");
}

void
sluice_redis_options_init(SluiceRedisOptions *options)
{
  g_return_if_fail(options != NULL);
  memset(options, 0, sizeof *options);
  options->mode = SLUICE_REDIS_RELIABLE;
}

SluiceBroker *
sluice_redis_broker_new(const SluiceRedisOptions *options, SluiceClock *clock,
                        GError **error)
{
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  not_built(error);
  return NULL;
}

gboolean
sluice_redis_broker_ping(SluiceBroker *broker, GError **error)
{
  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  not_built(error);
  return FALSE;
}

gboolean
sluice_redis_get_layout(const SluiceRedisOptions *options, SluiceLayout *out,
                        GError **error)
{
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  not_built(error);
  return FALSE;
}

gboolean
sluice_redis_migrate(const SluiceRedisOptions *options, SluiceLayout *out,
                     GError **error)
{
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  not_built(error);
  return FALSE;
}

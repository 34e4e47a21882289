/* sqlite-absent.c - the SQLite broker's constructors (sluice-sqlite.h) in
 * a library configured --without-sqlite: there is no broker to make, and
 * each call says so, and how to get one, instead of the program failing
 * to link. sluice_broker_new_for_url() (broker-url.c) reaches SQLite
 * through these same functions, so a sqlite:// URL gets this error too.
 */
#include "config.h"

#include <string.h>

#include <sluice/sluice.h>

void
sluice_sqlite_options_init(SluiceSqliteOptions *options)
{
  g_return_if_fail(options != NULL);
  memset(options, 0, sizeof *options);
  options->synchronous = SLUICE_SQLITE_SYNC_FULL;
}

SluiceBroker *
sluice_sqlite_broker_new(const SluiceSqliteOptions *options, SluiceClock *clock,
                         GError **error)
{
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  g_set_error_literal(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_FAILED,
                      "this libsluice was built without the SQLite broker "
                      "(configure --without-sqlite); install libsqlite3-dev "
                      "and build it again with the SQLite broker, or use the "
                      "memory or Redis broker");
  return NULL;
}

static void
not_built(GError **error)
{
  g_set_error_literal(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_FAILED,
                      "this libsluice was built without the SQLite broker "
                      "(configure --without-sqlite); install libsqlite3-dev "
                      "and build it again with the SQLite broker");
}

gboolean
sluice_sqlite_get_layout(const SluiceSqliteOptions *options, SluiceLayout *out,
                         GError **error)
{
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  not_built(error);
  return FALSE;
}

gboolean
sluice_sqlite_migrate(const SluiceSqliteOptions *options, SluiceLayout *out,
                      GError **error)
{
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  not_built(error);
  return FALSE;
}

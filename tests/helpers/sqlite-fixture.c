/* sqlite-fixture.c - see sqlite-fixture.h. */
#include "config.h"

#include <glib/gstdio.h>

#include "brokers/sqlite/sqlite-broker.h"
#include "tests/helpers/sqlite-fixture.h"

static gchar *top_dir;

void
sluice_test_sqlite_setup(void)
{
  if (top_dir == NULL)
    top_dir = g_dir_make_tmp("sluice-sqlite-XXXXXX", NULL);
  g_assert_nonnull(top_dir);
}

static void
remove_tree(const gchar *path)
{
  GDir *dir = g_dir_open(path, 0, NULL);
  const gchar *name;

  if (dir != NULL) {
    while ((name = g_dir_read_name(dir)) != NULL) {
      g_autofree gchar *child = g_build_filename(path, name, NULL);
      remove_tree(child);
    }
    g_dir_close(dir);
    g_chmod(path, 0700);
    g_rmdir(path);
  } else {
    g_remove(path);
  }
}

void
sluice_test_sqlite_teardown(void)
{
  if (top_dir != NULL)
    remove_tree(top_dir);
  g_clear_pointer(&top_dir, g_free);
}

gchar *
sluice_test_sqlite_new_path(void)
{
  g_autofree gchar *tmpl = NULL;

  sluice_test_sqlite_setup();
  tmpl = g_build_filename(top_dir, "db-XXXXXX", NULL);
  g_assert_nonnull(g_mkdtemp(tmpl));
  return g_build_filename(tmpl, "sluice.db", NULL);
}

SluiceBroker *
sluice_test_sqlite_broker_new(const gchar *path, guint dead_letter_max,
                              SluiceClock *clock, GError **error)
{
  SluiceSqliteOptions options;
  SluiceBroker *broker;

  sluice_sqlite_options_init(&options);
  options.path = path;
  options.synchronous = SLUICE_SQLITE_SYNC_NORMAL;
  options.dead_letter_max = dead_letter_max;
  broker = sluice_sqlite_broker_new(&options, clock, error);
  if (broker != NULL)
    SLUICE_SQLITE_BROKER(broker)->poll_ms = G_MAXINT;
  return broker;
}

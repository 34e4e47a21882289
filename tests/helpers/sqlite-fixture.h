/* sqlite-fixture.h - fresh SQLite databases for the tests: each in its own
 * directory under one per-program temporary directory, removed at exit. */
#pragma once

#include <sluice/sluice-sqlite.h>
#include <sluice/sys/broker.h>

G_BEGIN_DECLS

/* Makes the program's temporary directory (idempotent). */
void sluice_test_sqlite_setup(void);
/* Removes it, and every database under it. */
void sluice_test_sqlite_teardown(void);

/* Returns: (transfer full): the path of a database file that does not
 * exist yet, in a directory of its own. */
gchar *sluice_test_sqlite_new_path(void);

/* A broker on a fresh database (synchronous NORMAL: the tests do not
 * survive power cuts either). The safety re-check of waiters is off, so a
 * wait that ends was ended by a notification. */
SluiceBroker *sluice_test_sqlite_broker_new(const gchar *path,
                                            guint dead_letter_max,
                                            SluiceClock *clock, GError **error);

G_END_DECLS

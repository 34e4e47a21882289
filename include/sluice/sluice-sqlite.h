/* sluice-sqlite.h - the SQLite broker: durable queues in one file, shared by
 * every thread and process of one machine, without a server.
 *
 * Every atomic step of the broker contract (an enqueue, a settle, a
 * promotion, a claim, a replay) is one SQLite transaction (BEGIN
 * IMMEDIATE) on a database in WAL mode, so readers never block writers
 * and a crash at any point leaves either the whole step or none of it.
 * Deliveries are held under leases: what a worker killed with -9 held is
 * taken over by a live worker once its lease lapses (at-least-once), and a
 * late settle by the former owner is refused (fencing).
 *
 * A database file is used by any number of processes at once, on one
 * machine: SQLite's locking needs a local file system (not NFS).
 */
#pragma once

#include <sluice/sluice-brokers.h>
#include <sluice/sluice-clock.h>
#include <sluice/sluice-macros.h>

G_BEGIN_DECLS

/**
 * SluiceSqliteSynchronous:
 * @SLUICE_SQLITE_SYNC_FULL: every commit is on disk before it returns
 *   (fsync of the write-ahead log per transaction). Nothing acknowledged is
 *   lost, even at a power cut. The default.
 * @SLUICE_SQLITE_SYNC_NORMAL: commits reach the operating system at once
 *   and the disk at each checkpoint. Survives a crash of any process;
 *   a power cut or kernel crash may lose the last transactions (tasks
 *   enqueued, results written, acknowledgements: an acknowledged task may
 *   run again). The database is never corrupted.
 * @SLUICE_SQLITE_SYNC_OFF: no fsync at all. Survives a crash of a process;
 *   a power cut may lose any recent transaction, or corrupt the database.
 *
 * SQLite's `PRAGMA synchronous`, per connection.
 */
typedef enum {
  SLUICE_SQLITE_SYNC_FULL,
  SLUICE_SQLITE_SYNC_NORMAL,
  SLUICE_SQLITE_SYNC_OFF,
} SluiceSqliteSynchronous;

#define SLUICE_SQLITE_DEFAULT_BUSY_TIMEOUT_MS 10000

/**
 * SluiceSqliteOptions:
 * @path: the database file; created (with its tables) on first use. Its
 *   directory must exist.
 * @synchronous: what a commit waits for (see SluiceSqliteSynchronous)
 * @busy_timeout_ms: how long a transaction waits for another process's
 *   to end before it fails with SLUICE_BROKER_ERROR_UNAVAILABLE
 *   (0 = SLUICE_SQLITE_DEFAULT_BUSY_TIMEOUT_MS)
 * @dead_letter_max: keep at most this many dead letters (0 = 10000)
 * @read_only: open an existing database only to read it (SQLite's
 *   SQLITE_OPEN_READONLY), as a user who may not write the file can: stats,
 *   listings, records, dead letters, events and workflows are read as
 *   usual, and every write fails with SLUICE_BROKER_ERROR_INVALID. The
 *   file is never created and its tables are never added to. In WAL mode
 *   a reader needs the database's -wal and -shm files, which only a user
 *   who may write the directory can create: they exist while any process
 *   has the database open, and a writing broker leaves them in place when
 *   it closes (SQLite's persistent WAL), so a read-only user can read a
 *   database that any writer of this version has used
 *
 * Initialise with sluice_sqlite_options_init(); the broker copies it.
 */
typedef struct {
  const gchar *path;
  SluiceSqliteSynchronous synchronous;
  gint64 busy_timeout_ms;
  guint dead_letter_max;
  gboolean read_only;
} SluiceSqliteOptions;

/** sluice_sqlite_options_init: the defaults (FULL), @path NULL. */
SLUICE_AVAILABLE_IN_0_1
void sluice_sqlite_options_init(SluiceSqliteOptions *options);

/**
 * sluice_sqlite_broker_new:
 * @options: (transfer none): copied; @path is required
 * @clock: (nullable) (transfer none): the clock of due times and of every
 *   TTL (results, idempotency claims, revocations, announcements); NULL =
 *   a real clock. Leases and liveness always follow the real time, since
 *   every process must agree on them.
 *
 * Opens (or creates) the database and checks that it can be written (with
 * @options->read_only: opens an existing one and checks that it can be
 * read).
 * Returns: (transfer full): the broker, or NULL and @error:
 * SLUICE_BROKER_ERROR_INVALID for a file that cannot be opened, is
 * read-only for this user (and @options->read_only is not set), is missing
 * (with @options->read_only) or is not a Sluice database (the message
 * names the file and what to do), SLUICE_BROKER_ERROR_UNAVAILABLE when
 * another process held it locked for longer than the busy timeout. A
 * library configured --without-sqlite has no SQLite broker: it returns
 * NULL and SLUICE_BROKER_ERROR_FAILED saying so.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceBroker *sluice_sqlite_broker_new(const SluiceSqliteOptions *options,
                                       SluiceClock *clock, GError **error);

/**
 * sluice_sqlite_get_layout:
 * @options: (transfer none): @path is required; read_only is ignored (the
 *   file is only read)
 * @out: (out caller-allocates): filled (no need to init it); clear it
 *   with sluice_layout_clear()
 *
 * Reads the database's layout version, the steps it records as applied
 * and those that would bring it to this Sluice's version, and changes
 * nothing. A missing file is at version 0 (every step is pending: the
 * first writer makes it). A broker opened for writing
 * (sluice_sqlite_broker_new()) migrates an older database by itself; a
 * read-only one refuses it.
 * Returns: TRUE, or FALSE and SLUICE_BROKER_ERROR_INVALID for a file that
 * cannot be read or is not a Sluice database, UNAVAILABLE when it stayed
 * locked past the busy timeout.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_sqlite_get_layout(const SluiceSqliteOptions *options,
                                  SluiceLayout *out, GError **error);

/**
 * sluice_sqlite_migrate:
 * @options: (transfer none): as for sluice_sqlite_broker_new(); read_only
 *   is ignored
 * @out: (out caller-allocates) (optional): the layout after the
 *   migration, as sluice_sqlite_get_layout() fills it
 *
 * Brings the database to this Sluice's layout version (creating it if it
 * is missing): every pending step in one transaction, so that it is
 * migrated entirely or not at all, and once however many processes try
 * at the same time. A database newer than this Sluice is refused.
 * Returns: TRUE, or FALSE and the errors of sluice_sqlite_broker_new().
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_sqlite_migrate(const SluiceSqliteOptions *options,
                               SluiceLayout *out, GError **error);

/**
 * sluice_url_is_sqlite:
 * Returns: TRUE when @url names a SQLite database (`sqlite://`).
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_url_is_sqlite(const gchar *url);

/**
 * sluice_sqlite_url_parse:
 * @url: a `sqlite://` URL
 * @options: (out caller-allocates): filled (sluice_sqlite_options_init()
 *   first); @path points into @out_path
 * @out_path: (out) (transfer full): the file's path, to free
 *
 * Returns: TRUE, or FALSE and SLUICE_BROKER_ERROR_INVALID saying what is
 * wrong with @url.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_sqlite_url_parse(const gchar *url, SluiceSqliteOptions *options,
                                 gchar **out_path, GError **error);

G_END_DECLS

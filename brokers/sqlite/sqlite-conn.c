/* sqlite-conn.c - the SQLite broker's database: the pool of connections,
 * transactions, errors, opening (which migrates an older file: the schema
 * and its versions are brokers/sqlite/migrations/ and sqlite-layout.c),
 * and waking waiters (see sqlite-broker.h for why each is as it is).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brokers/sqlite/sqlite-broker.h"

/* ---- Time ------------------------------------------------------------------ */

gint64
sluice_sqlite__now(SluiceSqliteBroker *self)
{
  return sluice_clock_now_ms(sluice_broker_get_clock(&self->parent));
}

gint64
sluice_sqlite__real_now(void)
{
  return g_get_real_time() / 1000;
}

/* ---- Errors ---------------------------------------------------------------- */

gboolean
sluice_sqlite__fail(SluiceSqliteConn *c, int rc, const gchar *what,
                    GError **error)
{
  const gchar *path = c->owner->path;
  /* The connection's message only when it is about this error (after a
   * check of ours it is "not an error"). */
  const gchar *msg =
      c->db != NULL && (sqlite3_errcode(c->db) & 0xff) == (rc & 0xff)
          ? sqlite3_errmsg(c->db)
          : sqlite3_errstr(rc);

  switch (rc & 0xff) {
  case SQLITE_BUSY:
  case SQLITE_LOCKED:
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
                "%s: the SQLite database %s stayed locked by another process "
                "for longer than the busy timeout (%" G_GINT64_FORMAT
                " ms); try again, or raise the timeout",
                what, path, c->owner->busy_timeout_ms);
    break;
  case SQLITE_FULL:
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_FULL,
                "%s: the SQLite database %s is full (%s): free disk space "
                "(or drain the queues); nothing of this step was written",
                what, path, msg);
    break;
  case SQLITE_READONLY:
    if (c->owner->read_only)
      g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                  "%s: the SQLite database %s was opened read-only, to look "
                  "at it: nothing was written",
                  what, path);
    else
      g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                  "%s: the SQLite database %s is read-only for this user: "
                  "give this user write permission on the file and on its "
                  "directory (SQLite writes %s-wal and %s-shm beside it); "
                  "reading it needs neither (a read-only open)",
                  what, path, path, path);
    break;
  case SQLITE_CANTOPEN:
  case SQLITE_PERM:
  case SQLITE_NOTADB:
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "%s: cannot use %s as a SQLite database (%s): check the path "
                "and its permissions",
                what, path, msg);
    break;
  default:
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_FAILED,
                "%s: SQLite database %s: %s", what, path, msg);
    break;
  }
  return FALSE;
}

/* ---- Statements ------------------------------------------------------------ */

sqlite3_stmt *
sluice_sqlite__stmt(SluiceSqliteConn *c, const gchar *sql, GError **error)
{
  sqlite3_stmt *stmt = g_hash_table_lookup(c->stmts, sql);
  int rc;

  if (stmt != NULL) {
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    return stmt;
  }
  rc = sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt,
                          NULL);
  if (rc != SQLITE_OK) {
    sluice_sqlite__fail(c, rc, "preparing a statement", error);
    return NULL;
  }
  g_hash_table_insert(c->stmts, (gpointer)sql, stmt);
  return stmt;
}

gboolean
sluice_sqlite__done(SluiceSqliteConn *c, sqlite3_stmt *stmt, const gchar *what,
                    GError **error)
{
  int rc;

  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
    ;
  if (rc != SQLITE_DONE) {
    sluice_sqlite__fail(c, rc, what, error);
    sqlite3_reset(stmt);
    return FALSE;
  }
  sqlite3_reset(stmt);
  return TRUE;
}

gboolean
sluice_sqlite__row(SluiceSqliteConn *c, sqlite3_stmt *stmt, gboolean *row,
                   const gchar *what, GError **error)
{
  int rc = sqlite3_step(stmt);

  if (rc == SQLITE_ROW) {
    *row = TRUE;
    return TRUE;
  }
  *row = FALSE;
  sqlite3_reset(stmt);
  if (rc == SQLITE_DONE)
    return TRUE;
  return sluice_sqlite__fail(c, rc, what, error);
}

GBytes *
sluice_sqlite__col_bytes(sqlite3_stmt *stmt, int i)
{
  const void *data = sqlite3_column_blob(stmt, i);
  int n = sqlite3_column_bytes(stmt, i);

  return g_bytes_new(data, (gsize)n);
}

gchar *
sluice_sqlite__col_str(sqlite3_stmt *stmt, int i)
{
  const unsigned char *s = sqlite3_column_text(stmt, i);

  return s != NULL ? g_strdup((const gchar *)s) : NULL;
}

void
sluice_sqlite__bind_bytes(sqlite3_stmt *stmt, int i, GBytes *bytes)
{
  gsize n = 0;
  gconstpointer data = g_bytes_get_data(bytes, &n);

  /* A zero-length blob must still be a blob, not NULL. */
  if (n == 0)
    sqlite3_bind_zeroblob(stmt, i, 0);
  else
    sqlite3_bind_blob64(stmt, i, data, n, SQLITE_STATIC);
}

void
sluice_sqlite__bind_str(sqlite3_stmt *stmt, int i, const gchar *s)
{
  if (s == NULL)
    sqlite3_bind_null(stmt, i);
  else
    sqlite3_bind_text(stmt, i, s, -1, SQLITE_STATIC);
}

/* ---- Transactions ---------------------------------------------------------- */

static gboolean
exec_cached(SluiceSqliteConn *c, const gchar *sql, const gchar *what,
            GError **error)
{
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);

  return stmt != NULL && sluice_sqlite__done(c, stmt, what, error);
}

static const gchar begin_immediate_sql[] = "BEGIN IMMEDIATE";
static const gchar begin_sql[] = "BEGIN";
static const gchar commit_sql[] = "COMMIT";

gboolean
sluice_sqlite__begin(SluiceSqliteConn *c, GError **error)
{
  return exec_cached(c, begin_immediate_sql, "starting a transaction", error);
}

gboolean
sluice_sqlite__begin_read(SluiceSqliteConn *c, GError **error)
{
  return exec_cached(c, begin_sql, "starting a read", error);
}

gboolean
sluice_sqlite__commit(SluiceSqliteConn *c, GError **error)
{
  return exec_cached(c, commit_sql, "committing", error);
}

void
sluice_sqlite__rollback(SluiceSqliteConn *c)
{
  /* After SQLITE_FULL and some I/O errors SQLite has rolled back already. */
  if (!sqlite3_get_autocommit(c->db))
    sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
}

gboolean
sluice_sqlite__run(SluiceSqliteBroker *self, gboolean write,
                   SluiceSqliteStep step, gpointer data, GError **error)
{
  SluiceSqliteConn *c = sluice_sqlite__conn_get(self, error);
  gboolean notify = FALSE;
  gboolean ok;

  if (c == NULL)
    return FALSE;
  ok = (write ? sluice_sqlite__begin(c, error)
              : sluice_sqlite__begin_read(c, error)) &&
       step(c, data, &notify, error) && sluice_sqlite__commit(c, error);
  if (!ok)
    sluice_sqlite__rollback(c);
  sluice_sqlite__conn_put(c);
  if (ok && notify)
    sluice_sqlite__notify(self);
  return ok;
}

/* ---- Connections ----------------------------------------------------------- */

static void
stmt_free(gpointer stmt)
{
  sqlite3_finalize(stmt);
}

static void
conn_free(SluiceSqliteConn *c)
{
  if (c == NULL)
    return;
  if (c->stmts != NULL)
    g_hash_table_unref(c->stmts);
  if (c->db != NULL)
    sqlite3_close_v2(c->db);
  g_free(c);
}

static const gchar *
synchronous_name(SluiceSqliteSynchronous s)
{
  switch (s) {
  case SLUICE_SQLITE_SYNC_NORMAL:
    return "NORMAL";
  case SLUICE_SQLITE_SYNC_OFF:
    return "OFF";
  case SLUICE_SQLITE_SYNC_FULL:
  default:
    return "FULL";
  }
}

/* A read-only connection: the file must exist, and in WAL mode its -shm
 * and -wal files too unless this user may make them (see
 * SluiceSqliteOptions.read_only). A first read proves it. */
static gboolean
conn_check_readable(SluiceSqliteConn *c, int rc, GError **error)
{
  const gchar *path = c->owner->path;

  if (rc == SQLITE_OK)
    rc = sqlite3_exec(c->db, "SELECT count(*) FROM sqlite_master", NULL, NULL,
                      NULL);
  if (rc == SQLITE_OK)
    return TRUE;
  if ((rc & 0xff) == SQLITE_CANTOPEN && !g_file_test(path, G_FILE_TEST_EXISTS))
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "there is no SQLite database at %s (a read-only open makes "
                "none): check the path; a worker or an enqueue makes it",
                path);
  else if ((rc & 0xff) == SQLITE_READONLY || (rc & 0xff) == SQLITE_CANTOPEN)
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "cannot read the SQLite database %s as this user: a reader "
                "needs %s-shm and %s-wal, which this user may not make; "
                "they exist while a worker has the database open, and stay "
                "once any sluice that writes it has closed it: run one as "
                "the database's owner, or let this user write the directory",
                path, path, path);
  else
    sluice_sqlite__fail(c, rc, "opening the database to read", error);
  return FALSE;
}

static SluiceSqliteConn *
conn_open(SluiceSqliteBroker *self, GError **error)
{
  SluiceSqliteConn *c = g_new0(SluiceSqliteConn, 1);
  g_autofree gchar *pragmas = NULL;
  int persist_wal = 1;
  int rc;

  c->owner = self;
  c->stmts =
      g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, stmt_free);
  /* NOMUTEX: the pool guarantees one thread per connection at a time. */
  rc = sqlite3_open_v2(self->path, &c->db,
                       (self->read_only
                            ? SQLITE_OPEN_READONLY
                            : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
                           SQLITE_OPEN_NOMUTEX,
                       NULL);
  if (c->db != NULL)
    sqlite3_extended_result_codes(c->db, 0);
  if (self->read_only) {
    if (c->db != NULL)
      sqlite3_busy_timeout(c->db, (int)MIN(self->busy_timeout_ms, G_MAXINT));
    if (!conn_check_readable(c, rc, error)) {
      conn_free(c);
      return NULL;
    }
    return c;
  }
  if (rc != SQLITE_OK) {
    sluice_sqlite__fail(c, rc, "opening the database", error);
    conn_free(c);
    return NULL;
  }
  if (sqlite3_db_readonly(c->db, "main") == 1) {
    sluice_sqlite__fail(c, SQLITE_READONLY, "opening the database", error);
    conn_free(c);
    return NULL;
  }
  sqlite3_busy_timeout(c->db, (int)MIN(self->busy_timeout_ms, G_MAXINT));
  /* The -wal and -shm files stay when the last connection closes (and the
   * WAL is then cut to nothing: journal_size_limit), so that a user who may
   * only read the database can still open it (a reader cannot make them in
   * a directory it may not write). */
  sqlite3_file_control(c->db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist_wal);
  pragmas = g_strdup_printf("PRAGMA journal_mode=WAL; PRAGMA synchronous=%s; "
                            "PRAGMA journal_size_limit=%d;",
                            synchronous_name(self->synchronous),
                            SLUICE_SQLITE_WAL_SIZE_LIMIT);
  rc = sqlite3_exec(c->db, pragmas, NULL, NULL, NULL);
  if (rc == SQLITE_OK && self->max_page_count > 0) {
    g_autofree gchar *limit = g_strdup_printf(
        "PRAGMA max_page_count=%" G_GINT64_FORMAT ";", self->max_page_count);
    rc = sqlite3_exec(c->db, limit, NULL, NULL, NULL);
  }
  if (rc != SQLITE_OK) {
    sluice_sqlite__fail(c, rc, "configuring the database", error);
    conn_free(c);
    return NULL;
  }
  return c;
}

SluiceSqliteConn *
sluice_sqlite__conn_get(SluiceSqliteBroker *self, GError **error)
{
  SluiceSqliteConn *c = NULL;

  g_mutex_lock(&self->pool_lock);
  if (self->closed) {
    g_mutex_unlock(&self->pool_lock);
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_CLOSED,
                "the SQLite broker of %s was closed", self->path);
    return NULL;
  }
  if (self->idle->len > 0)
    c = g_ptr_array_steal_index_fast(self->idle, self->idle->len - 1);
  g_mutex_unlock(&self->pool_lock);
  return c != NULL ? c : conn_open(self, error);
}

void
sluice_sqlite__conn_put(SluiceSqliteConn *c)
{
  SluiceSqliteBroker *self = c->owner;

  /* A connection given back never holds a transaction. */
  sluice_sqlite__rollback(c);
  g_mutex_lock(&self->pool_lock);
  if (!self->closed) {
    g_ptr_array_add(self->idle, c);
    c = NULL;
  }
  g_mutex_unlock(&self->pool_lock);
  conn_free(c);
}

/* ---- Waking ---------------------------------------------------------------- */

guint64
sluice_sqlite__wake_gen(SluiceSqliteBroker *self)
{
  guint64 gen;

  g_mutex_lock(&self->wake_lock);
  gen = self->wake_gen;
  g_mutex_unlock(&self->wake_lock);
  return gen;
}

guint64
sluice_sqlite__wakeups(SluiceSqliteBroker *self)
{
  guint64 n;

  g_mutex_lock(&self->wake_lock);
  n = self->wakeups;
  g_mutex_unlock(&self->wake_lock);
  return n;
}

void
sluice_sqlite__wait(SluiceSqliteBroker *self, guint64 gen, gint64 deadline_us)
{
  gint64 until =
      MIN(deadline_us, g_get_monotonic_time() +
                           MIN(self->poll_ms, G_MAXINT64 / 2000) * 1000);

  g_mutex_lock(&self->wake_lock);
  while (self->wake_gen == gen && !self->closed)
    if (!g_cond_wait_until(&self->wake_cond, &self->wake_lock, until))
      break;
  g_mutex_unlock(&self->wake_lock);
}

static void
bump(SluiceSqliteBroker *self, gboolean wakeup)
{
  g_mutex_lock(&self->wake_lock);
  self->wake_gen++;
  if (wakeup)
    self->wakeups++;
  g_cond_broadcast(&self->wake_cond);
  g_mutex_unlock(&self->wake_lock);
}

void
sluice_sqlite__notify(SluiceSqliteBroker *self)
{
  bump(self, FALSE);
  /* Other processes' watchers see the mtime change (IN_ATTRIB). */
  if (self->wake_fd >= 0)
    (void)futimens(self->wake_fd, NULL);
}

void
sluice_sqlite__wakeup(SluiceBroker *broker)
{
  bump(SLUICE_SQLITE_BROKER(broker), TRUE);
}

static gpointer
watcher_main(gpointer data)
{
  SluiceSqliteBroker *self = data;
  struct pollfd fds[2] = {{.fd = self->inotify_fd, .events = POLLIN},
                          {.fd = self->stop_fd, .events = POLLIN}};
  gchar buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

  for (;;) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    if (fds[1].revents != 0)
      break;
    if (fds[0].revents & POLLIN) {
      /* Only that something happened matters, not what. */
      while (read(self->inotify_fd, buf, sizeof buf) > 0)
        ;
      bump(self, FALSE);
    }
  }
  return NULL;
}

/* The wake file sits next to the database; where it cannot be made (a
 * read-only directory) waiters of other processes fall back to the safety
 * re-check, which the log says. A read-only broker never makes it, and
 * says nothing when it is missing: it has no fetch to wake. */
static void
open_wake_file(SluiceSqliteBroker *self)
{
  self->wake_path = g_strconcat(self->path, "-wake", NULL);
  self->wake_fd = self->read_only ? open(self->wake_path, O_RDONLY | O_CLOEXEC)
                                  : open(self->wake_path,
                                         O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
  self->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (self->wake_fd < 0 || self->inotify_fd < 0 ||
      inotify_add_watch(self->inotify_fd, self->wake_path,
                        IN_ATTRIB | IN_MODIFY) < 0) {
    sluice_broker_log(&self->parent,
                      self->read_only ? G_LOG_LEVEL_DEBUG : G_LOG_LEVEL_WARNING,
                      "cannot watch %s (%s): waiting fetches see other "
                      "processes' tasks only every %" G_GINT64_FORMAT " ms",
                      self->wake_path, g_strerror(errno), self->poll_ms);
    if (self->inotify_fd >= 0)
      close(self->inotify_fd);
    self->inotify_fd = -1;
    return;
  }
  self->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (self->stop_fd < 0) {
    close(self->inotify_fd);
    self->inotify_fd = -1;
    return;
  }
  self->watcher = g_thread_new("sluice-sqlite-wake", watcher_main, self);
}

/* ---- Opening and closing --------------------------------------------------- */

gboolean
sluice_sqlite__open(SluiceSqliteBroker *self, GError **error)
{
  SluiceSqliteConn *c = conn_open(self, error);

  if (c == NULL)
    return FALSE;
  sluice_sqlite__conn_put(c);
  return TRUE;
}

void
sluice_sqlite__start_waking(SluiceSqliteBroker *self)
{
  open_wake_file(self);
}

void
sluice_sqlite__close(SluiceSqliteBroker *self)
{
  g_autoptr(GPtrArray) idle = NULL;

  g_mutex_lock(&self->pool_lock);
  self->closed = TRUE;
  idle = g_steal_pointer(&self->idle);
  self->idle = g_ptr_array_new();
  g_mutex_unlock(&self->pool_lock);
  for (guint i = 0; i < idle->len; i++)
    conn_free(idle->pdata[i]);
  g_mutex_lock(&self->wake_lock);
  self->closed = TRUE;
  g_cond_broadcast(&self->wake_cond);
  g_mutex_unlock(&self->wake_lock);
  if (self->watcher != NULL) {
    guint64 one = 1;
    if (write(self->stop_fd, &one, sizeof one) < 0)
      g_warn_if_reached();
    g_thread_join(g_steal_pointer(&self->watcher));
  }
}

void
sluice_sqlite__set_max_page_count(SluiceBroker *broker, gint64 pages)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  g_autoptr(GPtrArray) idle = g_ptr_array_new();

  g_mutex_lock(&self->pool_lock);
  self->max_page_count = pages;
  /* Idle connections were configured without it. */
  while (self->idle->len > 0)
    g_ptr_array_add(idle, g_ptr_array_steal_index_fast(self->idle, 0));
  g_mutex_unlock(&self->pool_lock);
  for (guint i = 0; i < idle->len; i++)
    conn_free(idle->pdata[i]);
}

void
sluice_sqlite__clear(SluiceSqliteBroker *self)
{
  /* May run on a half-built instance: every field may be unset. */
  if (self->idle != NULL) {
    sluice_sqlite__close(self);
    g_ptr_array_unref(self->idle);
    self->idle = NULL;
  }
  if (self->inotify_fd > 0)
    close(self->inotify_fd);
  if (self->stop_fd > 0)
    close(self->stop_fd);
  if (self->wake_fd > 0)
    close(self->wake_fd);
  g_clear_pointer(&self->queues_known, g_hash_table_unref);
  g_clear_pointer(&self->wake_path, g_free);
  g_clear_pointer(&self->path, g_free);
}

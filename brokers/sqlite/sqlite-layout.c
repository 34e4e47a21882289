/* sqlite-layout.c - the layout versions of a SQLite database and the
 * migrations between them.
 *
 * The schema is the files of brokers/sqlite/migrations/, NNN-what.sql,
 * compiled in (embed.sh, like the Redis scripts): version N of the layout
 * is what steps 1 to N make, and the database records its version in
 * meta 'schema' (the key the first releases wrote, so that one of them
 * refuses a newer file with the message it has: "has schema version 2,
 * this sluice reads version 1"). Each file's first line is a comment that
 * says what it does, in a sentence: `sluice migrate` shows it.
 *
 * Why the migration runs on open, in the transaction that opens: every
 * writer (worker, producer, command) of a newer Sluice can meet an older
 * file, and BEGIN IMMEDIATE makes the check and the steps one step, so two
 * processes that start together migrate once (the second waits for the
 * lock, then finds the file current) and a crash leaves the old version
 * whole. A reader (a read-only open) never writes: it refuses an older
 * file with the command that migrates it.
 *
 * Why step 1 runs again on files at version 1: tables joined version 1
 * for a while without a new number (001-initial.sql says which), so a
 * file at 1 may lack some, and IF NOT EXISTS completes it as the opens of
 * those releases did. Every later step runs once and is recorded in the
 * migrations table (002 made it) in the same transaction.
 *
 * Why a step may be "offline": a step that only adds (a table, an index,
 * a column with a default) leaves the file readable by the processes of
 * the older version still running, so it runs on open. One that rewrites
 * or drops what they use would break them mid-run, so its file says why
 * on a second line, `-- offline: WHY`, and it runs only from `sluice
 * migrate`, which the operator runs once those processes are stopped;
 * any other open refuses the file, unchanged, naming that command.
 */
#include "config.h"

#include <string.h>

#include "brokers/sqlite/sqlite-broker.h"

#include "brokers/sqlite/sqlite-migrations.inc"

/* The table that records the steps exists from this version on. */
#define RECORDED_FROM 2

typedef SluiceSqliteMigration Migration;

static GPtrArray *all_migrations;

#define OFFLINE_MARK "-- offline: "

Migration *
sluice_sqlite__migration_parse(const gchar *file, const gchar *sql)
{
  const gchar *end = strchr(sql, '\n');
  gchar *digits_end = NULL;
  guint64 version = g_ascii_strtoull(file, &digits_end, 10);
  Migration *m;

  if (version < 1 || version > G_MAXUINT || digits_end != file + 3 ||
      *digits_end != '-' || !g_str_has_suffix(file, ".sql") ||
      !g_str_has_prefix(sql, "-- ") || end == NULL)
    return NULL;
  m = g_new0(Migration, 1);
  m->version = (guint)version;
  m->name = g_strndup(file, strlen(file) - strlen(".sql"));
  m->summary = g_strndup(sql + 3, (gsize)(end - sql - 3));
  if (g_str_has_prefix(end + 1, OFFLINE_MARK)) {
    const gchar *why = end + 1 + strlen(OFFLINE_MARK);
    const gchar *why_end = strchr(why, '\n');

    m->offline = why_end != NULL ? g_strndup(why, (gsize)(why_end - why))
                                 : g_strdup(why);
  }
  m->sql = sql;
  return m;
}

void
sluice_sqlite__migration_free(Migration *m)
{
  if (m == NULL)
    return;
  g_free(m->name);
  g_free(m->summary);
  g_free(m->offline);
  g_free(m);
}

/* The steps of sluice_sqlite_migrations[] (file name, text pairs), checked
 * to be numbered 1, 2, ... in order: a gap would be a migration nobody
 * runs. */
const GPtrArray *
sluice_sqlite__migrations(void)
{
  static gsize done;

  if (g_once_init_enter(&done)) {
    GPtrArray *list = g_ptr_array_new();

    for (guint i = 0; sluice_sqlite_migrations[i] != NULL; i += 2) {
      const gchar *file = sluice_sqlite_migrations[i];
      Migration *m =
          sluice_sqlite__migration_parse(file, sluice_sqlite_migrations[i + 1]);

      if (m == NULL || m->version != list->len + 1)
        g_error("brokers/sqlite/migrations/%s: a migration is named "
                "NNN-what.sql, numbered from 001 without a gap, and its "
                "first line is a comment that says what it does",
                file);
      g_ptr_array_add(list, m);
    }
    all_migrations = list;
    g_once_init_leave(&done, 1);
  }
  return all_migrations;
}

guint
sluice_sqlite__layout_version(void)
{
  return sluice_sqlite__migrations()->len;
}

static const Migration *
migration(guint version)
{
  return sluice_sqlite__migrations()->pdata[version - 1];
}

/* ---- Reading the version ------------------------------------------------- */

static gboolean
has_table(SluiceSqliteConn *c, const gchar *name, gboolean *out, GError **error)
{
  static const gchar sql[] =
      "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1";
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, name);
  if (!sluice_sqlite__row(c, stmt, out, "reading the schema", error))
    return FALSE;
  sqlite3_reset(stmt);
  return TRUE;
}

static gboolean
not_sluice(SluiceSqliteConn *c, GError **error)
{
  g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
              "the SQLite database %s records no schema version: it is not "
              "a Sluice database (or one never opened for writing); give "
              "Sluice a file of its own",
              c->owner->path);
  return FALSE;
}

/* The version @c's database records in *@out, 0 for an empty database. A
 * database that holds tables but no version is another program's. */
static gboolean
read_version(SluiceSqliteConn *c, guint *out, GError **error)
{
  static const gchar get_sql[] = "SELECT value FROM meta WHERE key = 'schema'";
  static const gchar any_sql[] =
      "SELECT 1 FROM sqlite_master WHERE type = 'table' LIMIT 1";
  gboolean meta = FALSE, row = FALSE;
  sqlite3_stmt *stmt;
  gint64 version;

  *out = 0;
  if (!has_table(c, "meta", &meta, error))
    return FALSE;
  if (!meta) {
    stmt = sluice_sqlite__stmt(c, any_sql, error);
    if (stmt == NULL ||
        !sluice_sqlite__row(c, stmt, &row, "reading the schema", error))
      return FALSE;
    sqlite3_reset(stmt);
    return !row || not_sluice(c, error);
  }
  stmt = sluice_sqlite__stmt(c, get_sql, error);
  if (stmt == NULL ||
      !sluice_sqlite__row(c, stmt, &row, "reading the schema version", error))
    return FALSE;
  if (!row)
    return not_sluice(c, error);
  version = sqlite3_column_int64(stmt, 0);
  sqlite3_reset(stmt);
  if (version < 1 || version > G_MAXINT) {
    g_set_error(
        error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
        "the SQLite database %s records schema version %" G_GINT64_FORMAT
        ", which no Sluice writes: it is damaged or not Sluice's",
        c->owner->path, version);
    return FALSE;
  }
  *out = (guint)version;
  return TRUE;
}

static gboolean
refuse_newer(SluiceSqliteConn *c, guint version, GError **error)
{
  g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
              "the SQLite database %s has schema version %u, newer than "
              "this program's (%u): upgrade this program (sluice %s) to the "
              "Sluice that migrated it, or a later one; nothing was changed",
              c->owner->path, version, sluice_sqlite__layout_version(),
              PACKAGE_VERSION);
  return FALSE;
}

/* ---- Migrating ----------------------------------------------------------- */

static gboolean
set_version(SluiceSqliteConn *c, guint version, GError **error)
{
  static const gchar sql[] =
      "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema', ?1)";
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);

  if (stmt == NULL)
    return FALSE;
  sqlite3_bind_int64(stmt, 1, version);
  return sluice_sqlite__done(c, stmt, "recording the schema version", error);
}

/* OR REPLACE: on a new file 002 backfills step 1 as if it had been applied
 * before anything was recorded; this run knows when it was. */
static gboolean
record_step(SluiceSqliteConn *c, const Migration *m, gint64 now, GError **error)
{
  static const gchar sql[] =
      "INSERT OR REPLACE INTO migrations (version, name, applied_at, "
      "applied_by) VALUES (?1, ?2, ?3, ?4)";
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);

  if (stmt == NULL)
    return FALSE;
  sqlite3_bind_int64(stmt, 1, m->version);
  sluice_sqlite__bind_str(stmt, 2, m->name);
  sqlite3_bind_int64(stmt, 3, now);
  sluice_sqlite__bind_str(stmt, 4, "sluice " PACKAGE_VERSION);
  return sluice_sqlite__done(c, stmt, "recording a migration", error);
}

/* A pending step that needs the older processes stopped: refused with
 * the command that runs it, before any step of this run. */
static gboolean
refuse_offline(SluiceSqliteConn *c, guint version, const Migration *m,
               GError **error)
{
  g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
              "the SQLite database %s is at schema version %u, and step %u "
              "(%s) cannot run while processes of the older Sluice use it "
              "(%s): stop them, then run `sluice migrate --url sqlite://%s`; "
              "nothing was changed",
              c->owner->path, version, m->version, m->name, m->offline,
              c->owner->path);
  return FALSE;
}

gboolean
sluice_sqlite__migrate(SluiceSqliteConn *c, const GPtrArray *steps,
                       gboolean offline_steps, GError **error)
{
  guint current = steps->len;
  gint64 now = sluice_sqlite__real_now();
  guint version = 0, first, recorded;

  if (!read_version(c, &version, error))
    return FALSE;
  if (version > current)
    return refuse_newer(c, version, error);
  if (version == current)
    return TRUE;
  first = version <= 1 ? 1 : version + 1;
  /* A new file has no older processes: every step runs. */
  for (guint v = first; version > 0 && !offline_steps && v <= current; v++) {
    const Migration *m = steps->pdata[v - 1];

    if (m->offline != NULL)
      return refuse_offline(c, version, m, error);
  }
  /* Steps applied by this run and not recorded yet: the first ones of a
   * new file run before the table that records them exists. */
  recorded = version <= 1 ? version + 1 : first;
  for (guint v = first; v <= current; v++) {
    const Migration *m = steps->pdata[v - 1];
    int rc = sqlite3_exec(c->db, m->sql, NULL, NULL, NULL);

    if (rc != SQLITE_OK) {
      g_autofree gchar *what =
          g_strdup_printf("migrating to schema version %u (%s)", v, m->name);
      return sluice_sqlite__fail(c, rc, what, error);
    }
    if (!set_version(c, v, error))
      return FALSE;
    if (v >= RECORDED_FROM)
      for (; recorded <= v; recorded++)
        if (!record_step(c, steps->pdata[recorded - 1], now, error))
          return FALSE;
  }
  if (version > 0)
    sluice_broker_log(&c->owner->parent, G_LOG_LEVEL_INFO,
                      "the SQLite database %s was at schema version %u: "
                      "migrated to %u",
                      c->owner->path, version, current);
  return TRUE;
}

/* ---- A reader's check ---------------------------------------------------- */

/* Every table the steps make is there (a reader adds none). */
static gboolean
check_tables(SluiceSqliteConn *c, GError **error)
{
  static const gchar marker[] = "CREATE TABLE ";
  static const gchar if_not_exists[] = "IF NOT EXISTS ";
  g_autoptr(GString) missing = g_string_new(NULL);
  const GPtrArray *list = sluice_sqlite__migrations();

  for (guint i = 0; i < list->len; i++) {
    const Migration *m = list->pdata[i];

    for (const gchar *p = strstr(m->sql, marker); p != NULL;
         p = strstr(p, marker)) {
      g_autofree gchar *name = NULL;
      gboolean found = FALSE;

      p += strlen(marker);
      if (g_str_has_prefix(p, if_not_exists))
        p += strlen(if_not_exists);
      name = g_strndup(p, strcspn(p, " ("));
      if (!has_table(c, name, &found, error))
        return FALSE;
      if (!found)
        g_string_append_printf(missing, "%s%s", missing->len > 0 ? ", " : "",
                               name);
    }
  }
  if (missing->len == 0)
    return TRUE;
  g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
              "the SQLite database %s lacks tables of its schema version "
              "(%s): it is damaged, or not a Sluice database",
              c->owner->path, missing->str);
  return FALSE;
}

gboolean
sluice_sqlite__check_layout(SluiceSqliteConn *c, GError **error)
{
  guint current = sluice_sqlite__layout_version();
  guint version = 0;

  if (!read_version(c, &version, error))
    return FALSE;
  if (version == 0)
    return not_sluice(c, error);
  if (version > current)
    return refuse_newer(c, version, error);
  if (version < current) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "the SQLite database %s has schema version %u, older than "
                "this program's (%u), and a read-only open migrates nothing: "
                "run `sluice migrate --url sqlite://%s` as a user who may "
                "write it (any worker or enqueue of this version migrates it "
                "too)",
                c->owner->path, version, current, c->owner->path);
    return FALSE;
  }
  return check_tables(c, error);
}

/* ---- The public functions ------------------------------------------------ */

static void
stmt_free(gpointer stmt)
{
  sqlite3_finalize(stmt);
}

/* What the steps applied to @c's database say of themselves. */
static gboolean
read_applied(SluiceSqliteConn *c, GPtrArray *out, GError **error)
{
  static const gchar sql[] = "SELECT version, name, applied_at, applied_by "
                             "FROM migrations ORDER BY version";
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);
  gboolean row = FALSE;

  if (stmt == NULL)
    return FALSE;
  for (;;) {
    gint64 version;
    g_autofree gchar *name = NULL, *by = NULL;

    if (!sluice_sqlite__row(c, stmt, &row, "reading the migrations", error))
      return FALSE;
    if (!row)
      return TRUE;
    version = sqlite3_column_int64(stmt, 0);
    name = sluice_sqlite__col_str(stmt, 1);
    by = sluice_sqlite__col_str(stmt, 3);
    sluice_layout_add_step(out, (guint)CLAMP(version, 0, G_MAXINT), name,
                           version >= 1 &&
                                   version <= sluice_sqlite__layout_version()
                               ? migration((guint)version)->summary
                               : "a step of a newer Sluice",
                           sqlite3_column_int64(stmt, 2), by);
  }
}

gboolean
sluice_sqlite_get_layout(const SluiceSqliteOptions *options, SluiceLayout *out,
                         GError **error)
{
  /* Only what the statement and error helpers read of a broker: the
   * database is read without one (a broker would migrate it, or refuse
   * it read-only). */
  SluiceSqliteBroker owner = {0};
  SluiceSqliteConn c = {0};
  guint current = sluice_sqlite__layout_version();
  gboolean ok = FALSE;
  int rc;

  g_return_val_if_fail(options != NULL && options->path != NULL, FALSE);
  g_return_val_if_fail(out != NULL, FALSE);
  sluice_layout_init(out);
  out->current = current;
  out->store = g_strdup_printf("the SQLite database %s", options->path);
  if (!g_file_test(options->path, G_FILE_TEST_EXISTS)) {
    for (guint v = 1; v <= current; v++)
      sluice_layout_add_step(out->pending, v, migration(v)->name,
                             migration(v)->summary, 0, NULL);
    g_ptr_array_add(out->notes,
                    g_strdup("the file does not exist yet: the first worker, "
                             "enqueue or `sluice migrate` makes it"));
    return TRUE;
  }
  owner.path = (gchar *)options->path;
  owner.read_only = TRUE;
  owner.busy_timeout_ms = options->busy_timeout_ms > 0
                              ? options->busy_timeout_ms
                              : SLUICE_SQLITE_DEFAULT_BUSY_TIMEOUT_MS;
  c.owner = &owner;
  c.stmts =
      g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, stmt_free);
  rc = sqlite3_open_v2(options->path, &c.db,
                       SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc != SQLITE_OK) {
    sluice_sqlite__fail(&c, rc, "opening the database to read", error);
    goto out;
  }
  sqlite3_busy_timeout(c.db, (int)MIN(owner.busy_timeout_ms, G_MAXINT));
  if (!sluice_sqlite__begin_read(&c, error) ||
      !read_version(&c, &out->version, error))
    goto out;
  out->recorded = out->version > 0;
  if (out->version >= RECORDED_FROM && !read_applied(&c, out->applied, error))
    goto out;
  if (out->version == 1)
    sluice_layout_add_step(out->applied, 1, migration(1)->name,
                           migration(1)->summary, 0, NULL);
  for (guint v = out->version + 1; v <= current; v++) {
    const Migration *m = migration(v);
    g_autofree gchar *summary =
        m->offline != NULL && out->version > 0
            ? g_strdup_printf("%s (only from `sluice migrate`, with every "
                              "process of the older Sluice stopped: %s)",
                              m->summary, m->offline)
            : g_strdup(m->summary);

    sluice_layout_add_step(out->pending, v, m->name, summary, 0, NULL);
  }
  ok = TRUE;
out:
  if (c.db != NULL)
    sluice_sqlite__rollback(&c);
  g_hash_table_unref(c.stmts);
  if (c.db != NULL)
    sqlite3_close_v2(c.db);
  if (!ok)
    sluice_layout_clear(out);
  return ok;
}

gboolean
sluice_sqlite__open_layout(SluiceSqliteBroker *self, GError **error)
{
  SluiceSqliteConn *c = sluice_sqlite__conn_get(self, error);

  if (c == NULL)
    return FALSE;
  /* A reader checks the layout in a read snapshot; a writer migrates it
   * under the write lock, so that the check and the steps are one. */
  if (!(self->read_only ? sluice_sqlite__begin_read(c, error)
                        : sluice_sqlite__begin(c, error)) ||
      !(self->read_only ? sluice_sqlite__check_layout(c, error)
                        : sluice_sqlite__migrate(c, sluice_sqlite__migrations(),
                                                 self->offline_steps, error)) ||
      !sluice_sqlite__commit(c, error)) {
    sluice_sqlite__conn_put(c); /* rolls back */
    return FALSE;
  }
  sluice_sqlite__conn_put(c);
  return TRUE;
}

/* sqlite-steering.c - the SQLite broker's steering slots, what operators
 * do to a namespace: purge a queue, list and remove queued messages, list
 * the schedule and move an entry on it, pause and resume queues.
 *
 * Listing cursors. A queue's cursor is the `mid` of the last message
 * listed: a message's place in its queue, which never changes (a release
 * keeps it), so pages listed while others fetch neither skip nor repeat a
 * message that stays ready. The schedule's cursor is "due_at:rowid" of
 * the last entry listed, the order of the schedule's index.
 */
#include "config.h"

#include "brokers/sqlite/sqlite-broker.h"

/* ---- purge ---------------------------------------------------------------- */

typedef struct {
  const gchar *name;
  gboolean flag;
  guint64 n;
} AdminJob;

static gboolean
purge_step(SluiceSqliteConn *c, gpointer data, gboolean *notify, GError **error)
{
  static const gchar sql[] =
      "DELETE FROM messages WHERE queue = ?1 AND owner IS NULL";
  AdminJob *job = data;
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, job->name);
  if (!sluice_sqlite__done(c, stmt, "purging a queue", error))
    return FALSE;
  job->n = (guint64)sqlite3_changes(c->db);
  return TRUE;
}

gboolean
sluice_sqlite__purge(SluiceBroker *broker, const gchar *queue,
                     guint64 *out_removed, GError **error)
{
  AdminJob job = {.name = queue};

  if (!sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), TRUE, purge_step, &job,
                          error))
    return FALSE;
  *out_removed = job.n;
  return TRUE;
}

/* ---- listings ------------------------------------------------------------- */

typedef struct {
  const gchar *queue;
  gint64 after_mid;
  gint64 after_due;
  gint64 after_rowid;
  gboolean from_start;
  guint limit;
  GPtrArray *out;
  gchar *next;
} ListJob;

static gboolean
list_queued_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                 GError **error)
{
  static const gchar sql[] =
      "SELECT mid, payload FROM messages WHERE queue = ?1 AND owner IS NULL "
      "AND mid > ?2 ORDER BY mid LIMIT ?3";
  ListJob *job = data;
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);
  gint64 last = 0;
  guint n = 0;
  int rc;

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, job->queue);
  sqlite3_bind_int64(stmt, 2, job->after_mid);
  /* One more than asked tells whether the queue goes on. */
  sqlite3_bind_int64(stmt, 3, (gint64)job->limit + 1);
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    if (n++ < job->limit) {
      g_autoptr(GBytes) payload = sluice_sqlite__col_bytes(stmt, 1);
      SluiceListedMessage *m;
      g_autofree gchar *handle = NULL;

      last = sqlite3_column_int64(stmt, 0);
      handle = g_strdup_printf("%" G_GINT64_FORMAT, last);
      m = sluice_listed_message_new(NULL, job->queue, payload, 0);
      sluice_listed_message_set_handle(m, handle);
      g_ptr_array_add(job->out, m);
    }
  }
  sqlite3_reset(stmt);
  if (rc != SQLITE_DONE)
    return sluice_sqlite__fail(c, rc, "listing a queue", error);
  if (n > job->limit && job->limit > 0)
    job->next = g_strdup_printf("%" G_GINT64_FORMAT, last);
  return TRUE;
}

gboolean
sluice_sqlite__list_queued(SluiceBroker *broker, const gchar *queue,
                           const gchar *cursor, guint limit, GPtrArray *out,
                           gchar **out_cursor, GError **error)
{
  ListJob job = {.queue = queue, .limit = limit, .out = out};
  guint64 v = 0;

  if (cursor != NULL &&
      !g_ascii_string_to_unsigned(cursor, 10, 0, G_MAXINT64, &v, NULL)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "“%s” is not a cursor of a queue listing: pass the cursor a "
                "previous page returned, or none to start at the head",
                cursor);
    return FALSE;
  }
  job.after_mid = (gint64)v;
  if (!sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), FALSE, list_queued_step,
                          &job, error))
    return FALSE;
  *out_cursor = job.next;
  return TRUE;
}

typedef struct {
  SluiceRemoval *items;
  guint n;
  gint64 now;
} RemoveJob;

/* A message is ready while nobody owns it; its mid is its handle. */
static gboolean
remove_queued_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                   GError **error)
{
  static const gchar sql[] =
      "DELETE FROM messages WHERE mid = ?1 AND queue = ?2 AND owner IS NULL";
  RemoveJob *job = data;

  for (guint i = 0; i < job->n; i++) {
    SluiceRemoval *r = &job->items[i];
    sqlite3_stmt *stmt;
    guint64 mid;

    r->removed = FALSE;
    if (r->handle == NULL ||
        !g_ascii_string_to_unsigned(r->handle, 10, 1, G_MAXINT64, &mid, NULL))
      continue;
    if ((stmt = sluice_sqlite__stmt(c, sql, error)) == NULL)
      return FALSE;
    sqlite3_bind_int64(stmt, 1, (gint64)mid);
    sluice_sqlite__bind_str(stmt, 2, r->queue);
    if (!sluice_sqlite__done(c, stmt, "taking a task out of its queue", error))
      return FALSE;
    if (sqlite3_changes(c->db) == 0)
      continue;
    if (r->record != NULL &&
        !sluice_sqlite__put_record(c, r->id, r->record, TRUE, r->record_ttl_ms,
                                   job->now, error))
      return FALSE;
    r->removed = TRUE;
    *notify = *notify || r->record != NULL;
  }
  return TRUE;
}

gboolean
sluice_sqlite__remove_queued(SluiceBroker *broker, SluiceRemoval *items,
                             guint n_items, GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  RemoveJob job = {items, n_items, sluice_sqlite__now(self)};

  /* One transaction for the batch; on failure nothing of it happened. */
  if (sluice_sqlite__run(self, TRUE, remove_queued_step, &job, error))
    return TRUE;
  for (guint i = 0; i < n_items; i++)
    items[i].removed = FALSE;
  return FALSE;
}

static gboolean
list_scheduled_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                    GError **error)
{
  static const gchar first_sql[] =
      "SELECT rowid, id, queue, payload, due_at FROM schedule ORDER BY due_at, "
      "rowid LIMIT ?1";
  static const gchar after_sql[] =
      "SELECT rowid, id, queue, payload, due_at FROM schedule WHERE (due_at, "
      "rowid) > (?2, ?3) ORDER BY due_at, rowid LIMIT ?1";
  ListJob *job = data;
  sqlite3_stmt *stmt =
      sluice_sqlite__stmt(c, job->from_start ? first_sql : after_sql, error);
  gint64 last_due = 0, last_rowid = 0;
  guint n = 0;
  int rc;

  if (stmt == NULL)
    return FALSE;
  sqlite3_bind_int64(stmt, 1, (gint64)job->limit + 1);
  if (!job->from_start) {
    sqlite3_bind_int64(stmt, 2, job->after_due);
    sqlite3_bind_int64(stmt, 3, job->after_rowid);
  }
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    if (n++ < job->limit) {
      g_autoptr(GBytes) payload = sluice_sqlite__col_bytes(stmt, 3);
      last_rowid = sqlite3_column_int64(stmt, 0);
      last_due = sqlite3_column_int64(stmt, 4);
      g_ptr_array_add(job->out, sluice_listed_message_new(
                                    (const gchar *)sqlite3_column_text(stmt, 1),
                                    (const gchar *)sqlite3_column_text(stmt, 2),
                                    payload, last_due));
    }
  }
  sqlite3_reset(stmt);
  if (rc != SQLITE_DONE)
    return sluice_sqlite__fail(c, rc, "listing the schedule", error);
  if (n > job->limit && job->limit > 0)
    job->next = g_strdup_printf("%" G_GINT64_FORMAT ":%" G_GINT64_FORMAT,
                                last_due, last_rowid);
  return TRUE;
}

gboolean
sluice_sqlite__list_scheduled(SluiceBroker *broker, const gchar *cursor,
                              guint limit, GPtrArray *out, gchar **out_cursor,
                              GError **error)
{
  ListJob job = {.limit = limit, .out = out, .from_start = cursor == NULL};

  if (cursor != NULL) {
    gchar *end = NULL;
    guint64 rowid;

    job.after_due = g_ascii_strtoll(cursor, &end, 10);
    if (end == cursor || *end != ':' ||
        !g_ascii_string_to_unsigned(end + 1, 10, 0, G_MAXINT64, &rowid, NULL)) {
      g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                  "“%s” is not a cursor of a schedule listing: pass the "
                  "cursor a previous page returned, or none to start at the "
                  "earliest",
                  cursor);
      return FALSE;
    }
    job.after_rowid = (gint64)rowid;
  }
  if (!sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), FALSE,
                          list_scheduled_step, &job, error))
    return FALSE;
  *out_cursor = job.next;
  return TRUE;
}

/* ---- pauses --------------------------------------------------------------- */

static gboolean
set_paused_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                GError **error)
{
  static const gchar pause_sql[] =
      "INSERT OR IGNORE INTO paused (queue) VALUES (?1)";
  static const gchar resume_sql[] = "DELETE FROM paused WHERE queue = ?1";
  AdminJob *job = data;
  sqlite3_stmt *stmt =
      sluice_sqlite__stmt(c, job->flag ? pause_sql : resume_sql, error);

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, job->name);
  /* A resume gives waiting fetchers something: what the queue holds. */
  *notify = !job->flag;
  return sluice_sqlite__done(c, stmt, "pausing a queue", error);
}

gboolean
sluice_sqlite__set_paused(SluiceBroker *broker, const gchar *queue,
                          gboolean paused, GError **error)
{
  AdminJob job = {.name = queue, .flag = paused};

  return sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), TRUE, set_paused_step,
                            &job, error);
}

static gboolean
list_paused_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                 GError **error)
{
  static const gchar sql[] = "SELECT queue FROM paused";
  GPtrArray *out = data;
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);
  int rc;

  if (stmt == NULL)
    return FALSE;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
    g_ptr_array_add(out, sluice_sqlite__col_str(stmt, 0));
  sqlite3_reset(stmt);
  if (rc != SQLITE_DONE)
    return sluice_sqlite__fail(c, rc, "listing paused queues", error);
  return TRUE;
}

gboolean
sluice_sqlite__list_paused(SluiceBroker *broker, GPtrArray *out, GError **error)
{
  return sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), FALSE,
                            list_paused_step, out, error);
}

/* ---- reschedule ----------------------------------------------------------- */

typedef struct {
  const gchar *id;
  gint64 due_at;
  gboolean found;
} RescheduleJob;

static gboolean
reschedule_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                GError **error)
{
  static const gchar get_sql[] =
      "SELECT queue, payload FROM schedule WHERE id = ?1";
  static const gchar move_sql[] =
      "UPDATE schedule SET due_at = ?2 WHERE id = ?1";
  static const gchar unschedule_sql[] = "DELETE FROM schedule WHERE id = ?1";
  RescheduleJob *job = data;
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, get_sql, error);
  g_autofree gchar *queue = NULL;
  g_autoptr(GBytes) payload = NULL;
  gboolean row = FALSE;

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, job->id);
  if (!sluice_sqlite__row(c, stmt, &row, "reading the schedule", error))
    return FALSE;
  job->found = row;
  if (!row)
    return TRUE;
  queue = sluice_sqlite__col_str(stmt, 0);
  payload = sluice_sqlite__col_bytes(stmt, 1);
  sqlite3_reset(stmt);
  if (job->due_at > 0) {
    stmt = sluice_sqlite__stmt(c, move_sql, error);
    if (stmt == NULL)
      return FALSE;
    sluice_sqlite__bind_str(stmt, 1, job->id);
    sqlite3_bind_int64(stmt, 2, job->due_at);
    return sluice_sqlite__done(c, stmt, "moving a scheduled task", error);
  }
  stmt = sluice_sqlite__stmt(c, unschedule_sql, error);
  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, job->id);
  if (!sluice_sqlite__done(c, stmt, "moving a scheduled task", error) ||
      !sluice_sqlite__push_ready(c, queue, payload, 0, error))
    return FALSE;
  *notify = TRUE;
  return TRUE;
}

gboolean
sluice_sqlite__reschedule(SluiceBroker *broker, const gchar *id, gint64 due_at,
                          gboolean *out_found, GError **error)
{
  RescheduleJob job = {id, due_at, FALSE};

  if (!sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), TRUE, reschedule_step,
                          &job, error))
    return FALSE;
  *out_found = job.found;
  return TRUE;
}

typedef struct {
  SluiceReplacement *items;
  guint n;
} ReplaceJob;

/* Each place's row keeps its key, so a queued message keeps its place
 * (mid) and a scheduled one its due time: only the bytes change, and only
 * if they are still the bytes listed (a ready message: still unowned). */
static gboolean
replace_payloads_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
                      GError **error)
{
  static const gchar queued_sql[] =
      "UPDATE messages SET payload = ?3 WHERE mid = ?1 AND queue = ?2 AND "
      "owner IS NULL AND payload = ?4";
  static const gchar scheduled_sql[] =
      "UPDATE schedule SET payload = ?3 WHERE id = ?1 AND payload = ?4";
  static const gchar dead_sql[] =
      "UPDATE dead_letters SET payload = ?3 WHERE entry = ?1 AND payload = ?4";
  ReplaceJob *job = data;

  for (guint i = 0; i < job->n; i++) {
    SluiceReplacement *r = &job->items[i];
    const gchar *sql = r->place == SLUICE_WAITING_QUEUED      ? queued_sql
                       : r->place == SLUICE_WAITING_SCHEDULED ? scheduled_sql
                                                              : dead_sql;
    sqlite3_stmt *stmt;
    guint64 key = 0;

    r->replaced = FALSE;
    if (r->place != SLUICE_WAITING_SCHEDULED &&
        (r->handle == NULL ||
         !g_ascii_string_to_unsigned(r->handle, 10, 1, G_MAXINT64, &key, NULL)))
      continue;
    if ((stmt = sluice_sqlite__stmt(c, sql, error)) == NULL)
      return FALSE;
    if (r->place == SLUICE_WAITING_SCHEDULED)
      sluice_sqlite__bind_str(stmt, 1, r->handle);
    else
      sqlite3_bind_int64(stmt, 1, (gint64)key);
    if (r->place == SLUICE_WAITING_QUEUED)
      sluice_sqlite__bind_str(stmt, 2, r->queue);
    sluice_sqlite__bind_bytes(stmt, 3, r->replacement);
    sluice_sqlite__bind_bytes(stmt, 4, r->payload);
    if (!sluice_sqlite__done(c, stmt, "rewriting a waiting message", error))
      return FALSE;
    r->replaced = sqlite3_changes(c->db) > 0;
  }
  return TRUE;
}

gboolean
sluice_sqlite__replace_payloads(SluiceBroker *broker, SluiceReplacement *items,
                                guint n_items, GError **error)
{
  ReplaceJob job = {items, n_items};

  /* One transaction for the batch; on failure nothing of it happened. */
  if (sluice_sqlite__run(SLUICE_SQLITE_BROKER(broker), TRUE,
                         replace_payloads_step, &job, error))
    return TRUE;
  for (guint i = 0; i < n_items; i++)
    items[i].replaced = FALSE;
  return FALSE;
}

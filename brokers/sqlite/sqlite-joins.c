/* sqlite-joins.c - the join slots of the SQLite broker. Each is one
 * transaction: opening writes every join and every first task in one
 * commit; an arrival reads the member's row and the join's count and
 * writes the outcome, the count and (if it completes the join) the
 * released messages under the one write lock, so two workers finishing
 * the last two members at once release the join exactly once.
 *
 *   joins         id -> total, arrived, status, meta, expires_at
 *   join_members  (join, member) -> outcome: a member's row exists once
 *   join_release  (join, seq) -> queue, payload: deleted when released
 *
 * A join past its expiry reads as absent; the sweep deletes it.
 */
#include "config.h"

#include "brokers/sqlite/sqlite-broker.h"

/* ---- open ----------------------------------------------------------------- */

typedef struct {
  const SluiceJoinSpec *joins;
  guint n_joins;
  SluiceSubmit *items;
  guint n_items;
  gint64 now;
  gboolean existed;
} OpenJob;

/* Reads join @id if it is alive: its total, arrived and status. */
static gboolean
read_join(SluiceSqliteConn *c, const gchar *id, gint64 now, gboolean *found,
          gint64 *total, gint64 *arrived, gint64 *status, GBytes **meta,
          GError **error)
{
  static const gchar sql[] = "SELECT total, arrived, status, meta FROM joins "
                             "WHERE id = ?1 AND expires_at > ?2";
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sql, error);

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, id);
  sqlite3_bind_int64(stmt, 2, now);
  if (!sluice_sqlite__row(c, stmt, found, "reading a workflow join", error))
    return FALSE;
  if (!*found)
    return TRUE;
  *total = sqlite3_column_int64(stmt, 0);
  *arrived = sqlite3_column_int64(stmt, 1);
  *status = sqlite3_column_int64(stmt, 2);
  if (meta != NULL)
    *meta = sqlite3_column_type(stmt, 3) == SQLITE_NULL
                ? NULL
                : sluice_sqlite__col_bytes(stmt, 3);
  sqlite3_reset(stmt);
  return TRUE;
}

/* Deletes what is left of an expired join of the same id, so that its
 * member rows cannot count for the new one. */
static gboolean
forget_join(SluiceSqliteConn *c, const gchar *id, GError **error)
{
  static const gchar *const sqls[] = {
      "DELETE FROM join_members WHERE join_id = ?1",
      "DELETE FROM join_release WHERE join_id = ?1",
      "DELETE FROM joins WHERE id = ?1",
  };

  for (gsize i = 0; i < G_N_ELEMENTS(sqls); i++) {
    sqlite3_stmt *stmt = sluice_sqlite__stmt(c, sqls[i], error);
    if (stmt == NULL)
      return FALSE;
    sluice_sqlite__bind_str(stmt, 1, id);
    if (!sluice_sqlite__done(c, stmt, "forgetting an expired join", error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
open_step(SluiceSqliteConn *c, gpointer data, gboolean *notify, GError **error)
{
  static const gchar join_sql[] =
      "INSERT INTO joins (id, total, arrived, status, meta, expires_at) "
      "VALUES (?1, ?2, 0, 0, ?3, ?4)";
  static const gchar release_sql[] =
      "INSERT INTO join_release (join_id, seq, queue, payload) "
      "VALUES (?1, ?2, ?3, ?4)";
  OpenJob *job = data;
  gboolean found = FALSE;
  gint64 total, arrived, status;

  if (!read_join(c, job->joins[0].id, job->now, &found, &total, &arrived,
                 &status, NULL, error))
    return FALSE;
  if (found) {
    job->existed = TRUE;
    return TRUE;
  }
  for (guint i = 0; i < job->n_joins; i++) {
    const SluiceJoinSpec *spec = &job->joins[i];
    sqlite3_stmt *stmt;

    if (!forget_join(c, spec->id, error))
      return FALSE;
    stmt = sluice_sqlite__stmt(c, join_sql, error);
    if (stmt == NULL)
      return FALSE;
    sluice_sqlite__bind_str(stmt, 1, spec->id);
    sqlite3_bind_int64(stmt, 2, spec->total);
    if (spec->meta != NULL)
      sluice_sqlite__bind_bytes(stmt, 3, spec->meta);
    sqlite3_bind_int64(stmt, 4, job->now + spec->ttl_ms);
    if (!sluice_sqlite__done(c, stmt, "opening a workflow join", error))
      return FALSE;
    for (guint k = 0; k < spec->n_release; k++) {
      stmt = sluice_sqlite__stmt(c, release_sql, error);
      if (stmt == NULL)
        return FALSE;
      sluice_sqlite__bind_str(stmt, 1, spec->id);
      sqlite3_bind_int64(stmt, 2, k);
      sluice_sqlite__bind_str(stmt, 3, spec->release[k].queue);
      sluice_sqlite__bind_bytes(stmt, 4, spec->release[k].payload);
      if (!sluice_sqlite__done(c, stmt, "storing what a join releases", error))
        return FALSE;
    }
  }
  for (guint i = 0; i < job->n_items; i++) {
    gboolean ready = FALSE;
    if (!sluice_sqlite__submit(c, &job->items[i], job->now, &ready, error))
      return FALSE;
    *notify = *notify || ready;
  }
  return TRUE;
}

gboolean
sluice_sqlite__join_open(SluiceBroker *broker, const SluiceJoinSpec *joins,
                         guint n_joins, SluiceSubmit *items, guint n_items,
                         gboolean *out_existed, GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  OpenJob job = {joins, n_joins, items, n_items, sluice_sqlite__now(self),
                 FALSE};

  if (!sluice_sqlite__run(self, TRUE, open_step, &job, error))
    return FALSE;
  *out_existed = job.existed;
  return TRUE;
}

/* ---- arrive --------------------------------------------------------------- */

typedef struct {
  SluiceJoinArrival *items;
  guint n_items;
  gint64 now;
} ArriveJob;

static gboolean
release(SluiceSqliteConn *c, const gchar *join_id, gboolean *notify,
        GError **error)
{
  static const gchar list_sql[] = "SELECT queue, payload FROM join_release "
                                  "WHERE join_id = ?1 ORDER BY seq";
  static const gchar drop_sql[] = "DELETE FROM join_release WHERE join_id = ?1";
  sqlite3_stmt *stmt = sluice_sqlite__stmt(c, list_sql, error);
  g_autoptr(GPtrArray) queues = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) payloads =
      g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
  gboolean row = FALSE;

  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, join_id);
  for (;;) {
    if (!sluice_sqlite__row(c, stmt, &row, "reading what a join releases",
                            error))
      return FALSE;
    if (!row)
      break;
    g_ptr_array_add(queues, sluice_sqlite__col_str(stmt, 0));
    g_ptr_array_add(payloads, sluice_sqlite__col_bytes(stmt, 1));
  }
  for (guint i = 0; i < queues->len; i++)
    if (!sluice_sqlite__push_ready(c, g_ptr_array_index(queues, i),
                                   g_ptr_array_index(payloads, i), 0, error))
      return FALSE;
  if (queues->len > 0)
    *notify = TRUE;
  stmt = sluice_sqlite__stmt(c, drop_sql, error);
  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, join_id);
  return sluice_sqlite__done(c, stmt, "releasing a join", error);
}

static gboolean
arrive_step(SluiceSqliteConn *c, gpointer data, gboolean *notify,
            GError **error)
{
  static const gchar member_sql[] =
      "INSERT OR IGNORE INTO join_members (join_id, member, outcome) "
      "VALUES (?1, ?2, ?3)";
  static const gchar count_sql[] =
      "UPDATE joins SET arrived = ?2, status = ?3 WHERE id = ?1";
  ArriveJob *job = data;

  for (guint i = 0; i < job->n_items; i++) {
    SluiceJoinArrival *a = &job->items[i];
    gboolean found = FALSE;
    gint64 total = 0, arrived = 0, status = 0;
    sqlite3_stmt *stmt;

    a->counted = a->released = FALSE;
    if (!read_join(c, a->join_id, job->now, &found, &total, &arrived, &status,
                   NULL, error))
      return FALSE;
    if (!found || a->member >= total)
      continue;
    stmt = sluice_sqlite__stmt(c, member_sql, error);
    if (stmt == NULL)
      return FALSE;
    sluice_sqlite__bind_str(stmt, 1, a->join_id);
    sqlite3_bind_int64(stmt, 2, a->member);
    sluice_sqlite__bind_bytes(stmt, 3, a->outcome);
    if (!sluice_sqlite__done(c, stmt, "recording a join member", error))
      return FALSE;
    if (sqlite3_changes(sqlite3_db_handle(stmt)) == 0)
      continue; /* arrived already */
    a->counted = TRUE;
    arrived++;
    if (status == SLUICE_JOIN_OPEN) {
      if (a->step == SLUICE_JOIN_ABANDON) {
        status = SLUICE_JOIN_ABANDONED;
      } else if (arrived == total || a->step == SLUICE_JOIN_RELEASE_NOW) {
        status = SLUICE_JOIN_RELEASED;
        a->released = TRUE;
        if (!release(c, a->join_id, notify, error))
          return FALSE;
      }
    }
    stmt = sluice_sqlite__stmt(c, count_sql, error);
    if (stmt == NULL)
      return FALSE;
    sluice_sqlite__bind_str(stmt, 1, a->join_id);
    sqlite3_bind_int64(stmt, 2, arrived);
    sqlite3_bind_int64(stmt, 3, status);
    if (!sluice_sqlite__done(c, stmt, "counting a join member", error))
      return FALSE;
  }
  return TRUE;
}

gboolean
sluice_sqlite__join_arrive(SluiceBroker *broker, SluiceJoinArrival *items,
                           guint n_items, GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  ArriveJob job = {items, n_items, sluice_sqlite__now(self)};

  return sluice_sqlite__run(self, TRUE, arrive_step, &job, error);
}

/* ---- grow ----------------------------------------------------------------- */

typedef struct {
  const gchar *join_id;
  guint expected_total;
  guint by;
  SluiceSubmit *items;
  guint n_items;
  gint64 now;
  guint total;
} GrowJob;

static gboolean
grow_step(SluiceSqliteConn *c, gpointer data, gboolean *notify, GError **error)
{
  static const gchar sql[] = "UPDATE joins SET total = ?2 WHERE id = ?1";
  GrowJob *job = data;
  gboolean found = FALSE;
  gint64 total = 0, arrived = 0, status = 0;
  sqlite3_stmt *stmt;

  job->total = 0;
  if (!read_join(c, job->join_id, job->now, &found, &total, &arrived, &status,
                 NULL, error))
    return FALSE;
  if (!found || status != SLUICE_JOIN_OPEN)
    return TRUE;
  job->total = (guint)total;
  if (total != job->expected_total)
    return TRUE;
  stmt = sluice_sqlite__stmt(c, sql, error);
  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, job->join_id);
  sqlite3_bind_int64(stmt, 2, total + job->by);
  if (!sluice_sqlite__done(c, stmt, "growing a join", error))
    return FALSE;
  for (guint i = 0; i < job->n_items; i++) {
    gboolean ready = FALSE;
    if (!sluice_sqlite__submit(c, &job->items[i], job->now, &ready, error))
      return FALSE;
    *notify = *notify || ready;
  }
  job->total = (guint)(total + job->by);
  return TRUE;
}

gboolean
sluice_sqlite__join_grow(SluiceBroker *broker, const gchar *join_id,
                         guint expected_total, guint by, SluiceSubmit *items,
                         guint n_items, guint *out_total, GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  GrowJob job = {join_id, expected_total,           by, items,
                 n_items, sluice_sqlite__now(self), 0};

  if (!sluice_sqlite__run(self, TRUE, grow_step, &job, error))
    return FALSE;
  *out_total = job.total;
  return TRUE;
}

/* ---- read ----------------------------------------------------------------- */

typedef struct {
  const gchar *join_id;
  gboolean with_outcomes;
  gint64 now;
  SluiceJoinState *out;
  gboolean found;
} ReadJob;

static gboolean
read_step(SluiceSqliteConn *c, gpointer data, gboolean *notify, GError **error)
{
  static const gchar members_sql[] =
      "SELECT member, outcome FROM join_members WHERE join_id = ?1";
  ReadJob *job = data;
  gint64 total = 0, arrived = 0, status = 0;
  sqlite3_stmt *stmt;
  gboolean row = FALSE;

  sluice_join_state_clear(job->out);
  if (!read_join(c, job->join_id, job->now, &job->found, &total, &arrived,
                 &status, &job->out->meta, error))
    return FALSE;
  if (!job->found)
    return TRUE;
  job->out->total = (guint)total;
  job->out->arrived = (guint)arrived;
  job->out->status = (SluiceJoinStatus)status;
  if (!job->with_outcomes)
    return TRUE;
  job->out->outcomes =
      g_ptr_array_new_full((guint)total, (GDestroyNotify)g_bytes_unref);
  g_ptr_array_set_size(job->out->outcomes, (gint)total);
  stmt = sluice_sqlite__stmt(c, members_sql, error);
  if (stmt == NULL)
    return FALSE;
  sluice_sqlite__bind_str(stmt, 1, job->join_id);
  for (;;) {
    gint64 member;
    if (!sluice_sqlite__row(c, stmt, &row, "reading join members", error))
      return FALSE;
    if (!row)
      break;
    member = sqlite3_column_int64(stmt, 0);
    if (member >= 0 && member < total &&
        g_ptr_array_index(job->out->outcomes, member) == NULL)
      g_ptr_array_index(job->out->outcomes, member) =
          sluice_sqlite__col_bytes(stmt, 1);
  }
  return TRUE;
}

gboolean
sluice_sqlite__join_read(SluiceBroker *broker, const gchar *join_id,
                         gboolean with_outcomes, SluiceJoinState *out,
                         gboolean *out_found, GError **error)
{
  SluiceSqliteBroker *self = SLUICE_SQLITE_BROKER(broker);
  ReadJob job = {join_id, with_outcomes, sluice_sqlite__now(self), out, FALSE};

  if (!sluice_sqlite__run(self, FALSE, read_step, &job, error))
    return FALSE;
  *out_found = job.found;
  return TRUE;
}

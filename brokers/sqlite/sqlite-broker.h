/* sqlite-broker.h - the SQLite broker's private state and shared layer
 * (internal; the slots are one file per topic of the contract, listed at
 * the end of this header, the row-level steps they share sqlite-rows.c,
 * the class sqlite.c).
 *
 * Connections (sqlite-conn.c). A sqlite3 connection must not be used by
 * two threads at once, so each slot checks one out of the broker's pool
 * for the length of the call and gives it back: a thread never shares a
 * connection and there are at most as many connections as threads in a
 * slot at once. (A GPrivate per thread would be process-global state that
 * outlives the broker, and `close` could not reach the connections of
 * other threads.) Each connection keeps its prepared statements.
 *
 * Transactions. Each atomic step is one BEGIN IMMEDIATE ... COMMIT: the
 * write lock is taken first, so two steps never interleave and never fail
 * half-way on a lock upgrade; readers see the database as of their last
 * commit (WAL).
 *
 * Waking. A commit that gives a waiter something (a ready message, a final
 * record, a wakeup) bumps the broker's wake generation and broadcasts
 * `wake_cond` for the threads of this process, and touches the wake file
 * ("<db>-wake", its mtime only) for other processes: a watcher thread per
 * broker reads inotify events on that file and does the same bump. A
 * waiter sleeps on `wake_cond` until the generation moves or its deadline
 * (plus a safety re-check every `poll_ms`, in case an event was lost),
 * so nothing polls the database in a loop.
 *
 * Clocks. Due times and every TTL follow the broker's SluiceClock; leases
 * and liveness follow the real time (every process must agree on them).
 */
#pragma once

#include <sqlite3.h>

#include <sluice/sluice-sqlite.h>
#include <sluice/sys/broker.h>

G_BEGIN_DECLS

/* A waiter re-checks the database this often without an event (events
 * are lost only if the wake file is removed while it is watched). */
#define SLUICE_SQLITE_SAFETY_POLL_MS 1000

/* PRAGMA journal_size_limit: a write-ahead log grown past this by a burst
 * is cut back to it when it restarts, and to nothing when the last
 * connection closes (the log file itself stays: sqlite-conn.c). */
#define SLUICE_SQLITE_WAL_SIZE_LIMIT (64 * 1024 * 1024)

typedef struct _SluiceSqliteBroker SluiceSqliteBroker;

typedef struct {
  SluiceSqliteBroker *owner;
  sqlite3 *db;
  /* SQL text (a static string, by address) -> sqlite3_stmt */
  GHashTable *stmts;
} SluiceSqliteConn;

struct _SluiceSqliteBroker {
  SluiceBroker parent;
  gchar *path;
  SluiceSqliteSynchronous synchronous;
  gint64 busy_timeout_ms;
  guint dead_letter_max;
  gboolean read_only; /* SluiceSqliteOptions.read_only */
  /* Opened by `sluice migrate`: it may run the steps that need the older
   * processes stopped (sqlite-layout.c). */
  gboolean offline_steps;
  /* Tests only: PRAGMA max_page_count for new connections (0: none). */
  gint64 max_page_count;

  GMutex pool_lock;
  GPtrArray *idle; /* SluiceSqliteConn * */
  gboolean closed;

  /* Queues known to be in the queues table (stats list them). */
  GMutex queues_lock;
  GHashTable *queues_known;

  GMutex wake_lock;
  GCond wake_cond;
  guint64 wake_gen;
  guint64 wakeups; /* `wakeup` calls */
  gint64 poll_ms;
  gchar *wake_path;
  int wake_fd;    /* the wake file, for futimens(); -1 if none */
  int inotify_fd; /* -1 if none */
  int stop_fd;    /* eventfd that ends the watcher */
  GThread *watcher;
};

#define SLUICE_SQLITE_BROKER(b) ((SluiceSqliteBroker *)(b))

/* ---- sqlite-conn.c -------------------------------------------------------- */

/* Opens the first connection (creating or migrating the schema, or, read
 * only, checking it) and the wake file. */
gboolean sluice_sqlite__open(SluiceSqliteBroker *self, GError **error);
/* Watches the wake file for other processes' writes (sqlite-conn.c). */
void sluice_sqlite__start_waking(SluiceSqliteBroker *self);
void sluice_sqlite__close(SluiceSqliteBroker *self);
void sluice_sqlite__clear(SluiceSqliteBroker *self);

/* Tests only: caps the database at @pages pages (PRAGMA max_page_count)
 * on every connection made from now on, to stand for a full disk. */
void sluice_sqlite__set_max_page_count(SluiceBroker *broker, gint64 pages);

SluiceSqliteConn *sluice_sqlite__conn_get(SluiceSqliteBroker *self,
                                          GError **error);
void sluice_sqlite__conn_put(SluiceSqliteConn *c);

/* Returns: (transfer none): @sql prepared on @c, reset and unbound, or NULL
 * and @error. @sql must be a static string (it is the cache key). */
sqlite3_stmt *sluice_sqlite__stmt(SluiceSqliteConn *c, const gchar *sql,
                                  GError **error);

/* Always FALSE: sets @error from @rc (and the connection's message) for
 * the step @what. */
gboolean sluice_sqlite__fail(SluiceSqliteConn *c, int rc, const gchar *what,
                             GError **error);

/* One step of a slot: runs inside a transaction; sets *@notify when its
 * commit gives waiters something. */
typedef gboolean (*SluiceSqliteStep)(SluiceSqliteConn *c, gpointer data,
                                     gboolean *notify, GError **error);

/* Runs @step in one transaction (BEGIN IMMEDIATE if @write, else a read
 * snapshot) on a pooled connection, rolls back if it fails, and notifies
 * waiters after the commit if it asked to. */
gboolean sluice_sqlite__run(SluiceSqliteBroker *self, gboolean write,
                            SluiceSqliteStep step, gpointer data,
                            GError **error);

gboolean sluice_sqlite__begin(SluiceSqliteConn *c, GError **error);
gboolean sluice_sqlite__begin_read(SluiceSqliteConn *c, GError **error);
gboolean sluice_sqlite__commit(SluiceSqliteConn *c, GError **error);
void sluice_sqlite__rollback(SluiceSqliteConn *c);

/* Runs @stmt to its end (SQLITE_DONE). */
gboolean sluice_sqlite__done(SluiceSqliteConn *c, sqlite3_stmt *stmt,
                             const gchar *what, GError **error);
/* Steps @stmt once: TRUE with *@row set on SQLITE_ROW / cleared on DONE. */
gboolean sluice_sqlite__row(SluiceSqliteConn *c, sqlite3_stmt *stmt,
                            gboolean *row, const gchar *what, GError **error);

/* Returns: (transfer full): column @i as bytes (never NULL). */
GBytes *sluice_sqlite__col_bytes(sqlite3_stmt *stmt, int i);
/* Returns: (transfer full): column @i as a string, or NULL. */
gchar *sluice_sqlite__col_str(sqlite3_stmt *stmt, int i);
void sluice_sqlite__bind_bytes(sqlite3_stmt *stmt, int i, GBytes *bytes);
void sluice_sqlite__bind_str(sqlite3_stmt *stmt, int i, const gchar *s);

/* The wake generation now; a waiter reads it before it looks. */
guint64 sluice_sqlite__wake_gen(SluiceSqliteBroker *self);
guint64 sluice_sqlite__wakeups(SluiceSqliteBroker *self);
/* Sleeps until the generation moves past @gen, or until @deadline_us
 * (monotonic), or the safety re-check. */
void sluice_sqlite__wait(SluiceSqliteBroker *self, guint64 gen,
                         gint64 deadline_us);
/* After a commit that gives waiters something: wakes this process's and
 * the other processes' waiters. */
void sluice_sqlite__notify(SluiceSqliteBroker *self);
void sluice_sqlite__wakeup(SluiceBroker *broker);

/* The broker clock's now, and the real time for leases (ms). */
gint64 sluice_sqlite__now(SluiceSqliteBroker *self);
gint64 sluice_sqlite__real_now(void);

/* ---- sqlite-layout.c ------------------------------------------------------- */

/* One step of the layout: a file of brokers/sqlite/migrations/. */
typedef struct {
  guint version;
  gchar *name;    /* "002-migrations" */
  gchar *summary; /* its first line: what it does */
  /* (nullable) its "-- offline:" line: why it cannot run while processes
   * of the older layout use the file; NULL for a step that only adds */
  gchar *offline;
  const gchar *sql;
} SluiceSqliteMigration;

/* Reads a migration file's name (NNN-what.sql) and header. Returns:
 * (transfer full) (nullable): the step, or NULL when the file breaks the
 * rules (numbered, a first line that says what it does). */
SluiceSqliteMigration *sluice_sqlite__migration_parse(const gchar *file,
                                                      const gchar *sql);
void sluice_sqlite__migration_free(SluiceSqliteMigration *m);
/* (transfer none): this code's steps, version 1 first. */
const GPtrArray *sluice_sqlite__migrations(void);
/* The layout version this code reads and writes: its last migration's. */
guint sluice_sqlite__layout_version(void);
/* Inside a write transaction: brings @c's database to the version of
 * @steps (sluice_sqlite__migrations(): version 1 first, numbered without a
 * gap), creating it when empty, or refuses a newer one. A pending step
 * that needs the older processes stopped runs only with @offline_steps;
 * without, the file is refused, unchanged, with the command that runs
 * it. */
gboolean sluice_sqlite__migrate(SluiceSqliteConn *c, const GPtrArray *steps,
                                gboolean offline_steps, GError **error);
/* Inside a read: refuses a database at another version than this code's,
 * or one that lacks its tables. */
gboolean sluice_sqlite__check_layout(SluiceSqliteConn *c, GError **error);
/* The first step of a broker, after sluice_sqlite__open(): a writer
 * migrates the file to this Sluice's layout, a reader checks it
 * (sqlite-layout.c). */
gboolean sluice_sqlite__open_layout(SluiceSqliteBroker *self, GError **error);

/* ---- Shared steps, inside a transaction ----------------------------------- */

/* Writes @item (dedup claim, ready message or schedule entry, record). */
gboolean sluice_sqlite__submit(SluiceSqliteConn *c, SluiceSubmit *item,
                               gint64 now, gboolean *out_ready, GError **error);
gboolean sluice_sqlite__push_ready(SluiceSqliteConn *c, const gchar *queue,
                                   GBytes *payload, gint64 delivery_count,
                                   GError **error);
gboolean sluice_sqlite__schedule(SluiceSqliteConn *c, const gchar *id,
                                 const gchar *queue, GBytes *payload,
                                 gint64 due_at, GError **error);
gboolean sluice_sqlite__put_record(SluiceSqliteConn *c, const gchar *id,
                                   GBytes *record, gboolean final,
                                   gint64 ttl_ms, gint64 now, GError **error);
/* Appends @entry, drops the oldest beyond the cap; adds to *@dropped. */
gboolean sluice_sqlite__bury(SluiceSqliteConn *c, const SluiceDeadLetter *entry,
                             guint *dropped, GError **error);
/* The columns of a dead letter, in the order dead_letter_of() reads them. */
#define DEAD_LETTER_COLUMNS                                                    \
  "entry, task_id, task, reason, detail, source, deliveries, at, payload"
/* Returns: (transfer full): the dead letter in the row @stmt stands on. */
SluiceDeadLetter *sluice_sqlite__dead_letter_of(sqlite3_stmt *stmt);
/* Sets *@out (transfer full) to task @task_id's newest dead letter; leaves
 * it alone when the task has none. */
gboolean sluice_sqlite__newest_dead_letter(SluiceSqliteConn *c,
                                           const gchar *task_id,
                                           SluiceDeadLetter **out,
                                           GError **error);
gboolean sluice_sqlite__add_counter(SluiceSqliteConn *c, const gchar *name,
                                    gint64 n, GError **error);
gboolean sluice_sqlite__get_counter(SluiceSqliteConn *c, const gchar *name,
                                    gint64 *out, GError **error);
/* Deletes lapsed records, claims, revocations and liveness rows. */
gboolean sluice_sqlite__sweep(SluiceSqliteConn *c, gint64 now, GError **error);

/* ---- The slots, by the file that holds them ------------------------------ */

/* sqlite-queue.c */
gboolean sluice_sqlite__enqueue(SluiceBroker *broker, SluiceSubmit *items,
                                guint n_items, GError **error);
gboolean sluice_sqlite__fetch(SluiceBroker *broker, const gchar *consumer,
                              const gchar *const *queues, guint max,
                              gint64 block_ms, GPtrArray *out, GError **error);
gboolean sluice_sqlite__settle(SluiceBroker *broker, const gchar *consumer,
                               SluiceSettlement *items, guint n_items,
                               GError **error);
gboolean sluice_sqlite__heartbeat(SluiceBroker *broker, const gchar *consumer,
                                  gint64 lease_ms, SluiceDelivery *const *held,
                                  guint n_held, GError **error);
gboolean sluice_sqlite__reclaim(SluiceBroker *broker, const gchar *consumer,
                                const gchar *const *queues, guint max,
                                gint64 idle_ms, GPtrArray *out, GError **error);
gboolean sluice_sqlite__count_reclaimable(SluiceBroker *broker,
                                          const gchar *consumer,
                                          const gchar *const *queues, guint max,
                                          gint64 idle_ms, guint *out_n,
                                          GError **error);
gboolean sluice_sqlite__leave(SluiceBroker *broker, const gchar *consumer,
                              GError **error);

/* sqlite-schedule.c */
gboolean sluice_sqlite__promote_due(SluiceBroker *broker, gint64 now_ms,
                                    guint max, guint *out_promoted,
                                    gint64 *out_next_due, GError **error);
gboolean sluice_sqlite__cancel_scheduled(SluiceBroker *broker, const gchar *id,
                                         GBytes *record, gint64 record_ttl_ms,
                                         gboolean *out_removed, GError **error);

/* sqlite-records.c */
gboolean sluice_sqlite__get_record(SluiceBroker *broker, const gchar *id,
                                   GBytes **out_record, GError **error);
gboolean sluice_sqlite__put_record_slot(SluiceBroker *broker, const gchar *id,
                                        GBytes *record, gboolean final,
                                        gint64 ttl_ms, GError **error);
gboolean sluice_sqlite__put_records(SluiceBroker *broker,
                                    const SluiceRecordWrite *items, guint n,
                                    GError **error);
gboolean sluice_sqlite__wait_record(SluiceBroker *broker, const gchar *id,
                                    gint64 timeout_ms, GBytes **out_record,
                                    GError **error);
gboolean sluice_sqlite__lookup_task(SluiceBroker *broker, const gchar *id,
                                    SluiceTaskLocation *out, GError **error);

/* sqlite-revocations.c */
gboolean sluice_sqlite__revoke(SluiceBroker *broker, const gchar *id,
                               gint64 expires_at, GError **error);
gboolean sluice_sqlite__list_revocations(SluiceBroker *broker, gint64 cursor,
                                         gint64 now_ms, GPtrArray *out,
                                         gint64 *out_cursor, GError **error);

/* sqlite-dead-letters.c */
gboolean sluice_sqlite__dlq_list(SluiceBroker *broker, const gchar *after,
                                 guint limit, GPtrArray *out, GError **error);
gboolean sluice_sqlite__dlq_get(SluiceBroker *broker, const gchar *entry_id,
                                SluiceDeadLetter **out_entry, GError **error);
gboolean sluice_sqlite__dlq_replay(SluiceBroker *broker, const gchar *entry_id,
                                   SluiceSubmit *item, gboolean *out_found,
                                   GError **error);
gboolean sluice_sqlite__dlq_delete(SluiceBroker *broker, const gchar *entry_id,
                                   gboolean *out_found, GError **error);

/* sqlite-stats.c */
gboolean sluice_sqlite__stats(SluiceBroker *broker, const gchar *const *queues,
                              SluiceBrokerStats *out, GError **error);
gboolean sluice_sqlite__announce(SluiceBroker *broker, const gchar *consumer,
                                 GBytes *info, gint64 ttl_ms, GError **error);

/* sqlite.c */
gboolean sluice_sqlite__check(SluiceBroker *broker, GError **error);

/* sqlite-steering.c */
gboolean sluice_sqlite__replace_payloads(SluiceBroker *broker,
                                         SluiceReplacement *items,
                                         guint n_items, GError **error);
gboolean sluice_sqlite__reschedule(SluiceBroker *broker, const gchar *id,
                                   gint64 due_at, gboolean *out_found,
                                   GError **error);
gboolean sluice_sqlite__purge(SluiceBroker *broker, const gchar *queue,
                              guint64 *out_removed, GError **error);
gboolean sluice_sqlite__list_queued(SluiceBroker *broker, const gchar *queue,
                                    const gchar *cursor, guint limit,
                                    GPtrArray *out, gchar **out_cursor,
                                    GError **error);
gboolean sluice_sqlite__remove_queued(SluiceBroker *broker,
                                      SluiceRemoval *items, guint n_items,
                                      GError **error);
gboolean sluice_sqlite__list_scheduled(SluiceBroker *broker,
                                       const gchar *cursor, guint limit,
                                       GPtrArray *out, gchar **out_cursor,
                                       GError **error);
gboolean sluice_sqlite__set_paused(SluiceBroker *broker, const gchar *queue,
                                   gboolean paused, GError **error);
gboolean sluice_sqlite__list_paused(SluiceBroker *broker, GPtrArray *out,
                                    GError **error);

/* sqlite-periodic.c */
gboolean sluice_sqlite__claim_periodic(SluiceBroker *broker, const gchar *name,
                                       gint64 occurrence_at, SluiceSubmit *item,
                                       gboolean *out_claimed, GError **error);
gboolean sluice_sqlite__last_periodic(SluiceBroker *broker, const gchar *name,
                                      gint64 *out_last, GError **error);

/* sqlite-joins.c */
gboolean sluice_sqlite__join_open(SluiceBroker *broker,
                                  const SluiceJoinSpec *joins, guint n_joins,
                                  SluiceSubmit *items, guint n_items,
                                  gboolean *out_existed, GError **error);
gboolean sluice_sqlite__join_arrive(SluiceBroker *broker,
                                    SluiceJoinArrival *items, guint n_items,
                                    GError **error);
gboolean sluice_sqlite__join_grow(SluiceBroker *broker, const gchar *join_id,
                                  guint expected_total, guint by,
                                  SluiceSubmit *items, guint n_items,
                                  guint *out_total, GError **error);
gboolean sluice_sqlite__join_read(SluiceBroker *broker, const gchar *join_id,
                                  gboolean with_outcomes, SluiceJoinState *out,
                                  gboolean *out_found, GError **error);

/* sqlite-events.c */
gboolean sluice_sqlite__put_progress(SluiceBroker *broker, const gchar *id,
                                     GBytes *progress, gint64 ttl_ms,
                                     GError **error);
gboolean sluice_sqlite__get_progress(SluiceBroker *broker, const gchar *id,
                                     GBytes **out_progress, GError **error);
gboolean sluice_sqlite__append_events(SluiceBroker *broker,
                                      GBytes *const *events, guint n,
                                      guint max_len, gint64 max_age_ms,
                                      gint64 now_ms, GError **error);
gboolean sluice_sqlite__read_events(SluiceBroker *broker, const gchar *cursor,
                                    guint limit, gint64 block_ms,
                                    GPtrArray *out, gchar **out_cursor,
                                    GError **error);

/* sqlite-flow.c */
gboolean sluice_sqlite__rate_acquire(SluiceBroker *broker,
                                     SluiceRateAcquire *items, guint n_items,
                                     GError **error);
gboolean sluice_sqlite__slot_acquire(SluiceBroker *broker,
                                     SluiceSlotAcquire *items, guint n_items,
                                     GError **error);
gboolean sluice_sqlite__slot_release(SluiceBroker *broker,
                                     SluiceSlotRelease *items, guint n_items,
                                     GError **error);
gboolean sluice_sqlite__list_slots(SluiceBroker *broker, guint limit,
                                   GPtrArray *out, GError **error);

/* sqlite-unique.c */
gboolean sluice_sqlite__unique_enqueue(SluiceBroker *broker,
                                       SluiceUniqueSubmit *items, guint n_items,
                                       GError **error);
gboolean sluice_sqlite__unique_update(SluiceBroker *broker,
                                      SluiceUniqueUpdate *items, guint n_items,
                                      GError **error);

G_END_DECLS

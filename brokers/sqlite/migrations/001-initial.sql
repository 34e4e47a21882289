-- The tables of the contract: queues, schedule, records, dead letters, workers, flow limits, workflows, events.
--
-- Layout version 1, as the first releases made it. Tables joined it over
-- time without a new version (joins, progress, events, rate_buckets,
-- slot_holders, slot_waiters, unique_claims), so a file at version 1 may
-- lack some: every statement here is IF NOT EXISTS, and this step is run
-- again on any file at version 1 to complete it. Every later change is a
-- migration of its own, run once.
--
--   meta          key -> value: 'schema' is the layout version
--   messages      every message of every queue, ready (owner NULL) or
--                 delivered (owner = the consumer, touched_at = its lease's
--                 last renewal); `mid` is its position in its queue (fetch
--                 takes the lowest) and its handle, the same across
--                 takeovers, so a release keeps the message's place
--   queues        the names of the queues ever written, for stats
--   schedule      id -> (queue, payload, due_at); ordered by (due_at, rowid)
--   records       id -> (record, final, expires_at)
--   dedup         id -> expires_at of the idempotency claim
--   revocations   id -> (expires_at, seq): seq orders a sync cursor
--   periodic      name -> last occurrence
--   dead_letters  entry (autoincrement: entry ids only grow) -> fields
--   dropped       reason -> dead letters dropped by the cap
--   consumers     name -> alive_until (liveness, real time)
--   workers       name -> what it announced, last_seen, expires_at
--   paused        the paused queues
--   counters      name -> n: stale_settles, revocation_seq
--   joins, join_members, join_release: workflow joins (sqlite-joins.c)
--   progress      id -> a task's progress report, expires_at
--   events        the event stream: seq (the cursor) -> at, event
--   rate_buckets  rate-limit bucket -> tat, its theoretical arrival time
--                 (us of the broker's clock; sqlite-flow.c)
--   slot_holders  (concurrency key, holder) -> expires_at (real time)
--   slot_waiters  n -> (concurrency key, task id, added_at): n orders them
--   unique_claims uniqueness key -> holder, running, expires_at (the
--                 broker's clock; sqlite-unique.c)
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS messages (
  mid INTEGER PRIMARY KEY AUTOINCREMENT, queue TEXT NOT NULL,
  payload BLOB NOT NULL, deliveries INTEGER NOT NULL DEFAULT 0,
  owner TEXT, touched_at INTEGER);
CREATE INDEX IF NOT EXISTS messages_ready ON messages (queue, mid)
  WHERE owner IS NULL;
CREATE INDEX IF NOT EXISTS messages_held ON messages (queue, mid)
  WHERE owner IS NOT NULL;
CREATE TABLE IF NOT EXISTS queues (name TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS schedule (id TEXT UNIQUE NOT NULL,
  queue TEXT NOT NULL, payload BLOB NOT NULL, due_at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS schedule_due ON schedule (due_at);
CREATE TABLE IF NOT EXISTS records (id TEXT PRIMARY KEY,
  record BLOB NOT NULL, final INTEGER NOT NULL,
  expires_at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS records_expiry ON records (expires_at);
CREATE TABLE IF NOT EXISTS dedup (id TEXT PRIMARY KEY,
  expires_at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS dedup_expiry ON dedup (expires_at);
CREATE TABLE IF NOT EXISTS revocations (id TEXT PRIMARY KEY,
  expires_at INTEGER NOT NULL, seq INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS revocations_seq ON revocations (seq);
CREATE TABLE IF NOT EXISTS periodic (name TEXT PRIMARY KEY,
  last INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS dead_letters (
  entry INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT, task TEXT,
  reason TEXT, detail TEXT, source TEXT, deliveries INTEGER,
  at INTEGER, payload BLOB);
CREATE INDEX IF NOT EXISTS dead_letters_task ON dead_letters (task_id);
CREATE TABLE IF NOT EXISTS dropped (reason TEXT PRIMARY KEY,
  n INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS consumers (name TEXT PRIMARY KEY,
  alive_until INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS workers (name TEXT PRIMARY KEY, info BLOB,
  last_seen INTEGER NOT NULL, expires_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS paused (queue TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY,
  n INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS joins (id TEXT PRIMARY KEY,
  total INTEGER NOT NULL, arrived INTEGER NOT NULL,
  status INTEGER NOT NULL, meta BLOB, expires_at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS joins_expiry ON joins (expires_at);
CREATE TABLE IF NOT EXISTS join_members (join_id TEXT NOT NULL,
  member INTEGER NOT NULL, outcome BLOB NOT NULL,
  PRIMARY KEY (join_id, member)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS join_release (join_id TEXT NOT NULL,
  seq INTEGER NOT NULL, queue TEXT NOT NULL, payload BLOB NOT NULL,
  PRIMARY KEY (join_id, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS progress (id TEXT PRIMARY KEY,
  progress BLOB NOT NULL, expires_at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS progress_expiry ON progress (expires_at);
CREATE TABLE IF NOT EXISTS events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER NOT NULL,
  event BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS rate_buckets (key TEXT PRIMARY KEY,
  tat INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS rate_buckets_tat ON rate_buckets (tat);
CREATE TABLE IF NOT EXISTS slot_holders (key TEXT NOT NULL,
  holder TEXT NOT NULL, expires_at INTEGER NOT NULL,
  PRIMARY KEY (key, holder));
CREATE TABLE IF NOT EXISTS slot_waiters (n INTEGER PRIMARY KEY,
  key TEXT NOT NULL, id TEXT NOT NULL, added_at INTEGER NOT NULL,
  UNIQUE (key, id));
CREATE TABLE IF NOT EXISTS unique_claims (key TEXT PRIMARY KEY,
  holder TEXT NOT NULL, running INTEGER NOT NULL,
  expires_at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS unique_claims_expiry ON unique_claims
  (expires_at);

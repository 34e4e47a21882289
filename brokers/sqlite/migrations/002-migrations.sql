-- A table of the steps applied to this file (version, name, when, by which sluice), which `sluice migrate` lists.
--
-- Until this step nothing said how a file came to its version: every step
-- from here on is recorded in the transaction that applies it (the runner,
-- brokers/sqlite/sqlite-layout.c, adds its row), so the table is the
-- file's history. A file at version 1 was made before steps were recorded:
-- its first step is backfilled without a time. Plain CREATE TABLE, no IF
-- NOT EXISTS: a migration runs once, and a second run would be a bug that
-- this makes loud.
CREATE TABLE migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,
  applied_at INTEGER, applied_by TEXT);
INSERT INTO migrations (version, name, applied_at, applied_by)
  VALUES (1, '001-initial', NULL, NULL);

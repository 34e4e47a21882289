#!/usr/bin/env python3
"""upgrade.py - what the previous release point wrote, the current build
opens, migrates and drains, losing nothing.

The commit in tests/upgrade/FROM is built once (git worktree add --detach
into ${XDG_CACHE_HOME:-~/.cache}/sluice-upgrade/<commit>, reused by every
later run; without the git history the test skips, unless CI is set). Its
`sluice`, with its demo module, fills a SQLite file and a Redis namespace
in fast and in reliable mode with what its command line can reach: tasks
run with their results stored, a dead letter, a task waiting for its
retry, one running when its worker was killed -9 (not in fast mode, which
loses it by design), queued ones, a scheduled one, a paused queue with a
task in it, a uniqueness claim, and the claim of a periodic schedule its
worker ran from its key file (every second, missed = all). Then the
current build:

  - `sluice migrate --dry-run` shows the pending steps and changes nothing;
  - SQLite: two workers started at once migrate the file online, once;
    Redis: `sluice migrate` records the layout version;
  - every old result reads back, the uniqueness claim still holds, the
    pause is still there, the dead letter replays;
  - its worker drains everything: every task ends succeeded, and nothing
    is left queued, scheduled, in flight or dead;
  - its workers run the schedule on from the old claim: the occurrences
    due while no worker ran are dispatched when they start, and every
    occurrence, claimed by either build, ran exactly once with none
    skipped (the workers' events say);
  - an old worker started before the migration still serves its queue
    meanwhile;
  - the old build refuses the SQLite file it migrated (with the old
    build's own message), and a store one layout version newer than the
    current build is refused by it in one line that says to upgrade.

Then a rolling upgrade, on a fresh Redis namespace in each mode (both at
once, so that its duration is paid once):

  - an old worker runs, with a periodic schedule (every 2 s) from its
    key file, while the old `sluice enqueue` enqueues; the old worker
    claims occurrences before any current client touches the namespace;
  - the current `sluice enqueue` joins (producers first, as
    docs/upgrading.md says): it records the layout, and among its tasks
    is one only the current worker has (rollout.added, from
    tests/upgrade/rollout.la, loaded into the current worker only): the
    old worker, alone so far, defers it (its record is "scheduled" with
    the deferral note, its log says it defers, its /metrics count it);
  - a current worker with the same schedule joins, and both producers go
    on until SLUICE_UPGRADE_ROLL_SECONDS (default 60) since the start;
  - the old worker is stopped (SIGTERM, by pid) and the current one
    drains; then the namespace's events (every worker writes them) show
    every task of both producers and every periodic occurrence started
    and succeeded exactly once (no worker is killed, so at-least-once
    allows no duplicate here), nothing retried, failed or dead-lettered,
    every new-only task run by the current worker, the schedule dispatched
    at every interval with no occurrence skipped or repeated across the
    two versions and on after the old worker stopped.

It prints, per mode, how many tasks each producer enqueued, how many each
worker ran and how often the old worker deferred the new-only task.

Workflows are not in it: the old `sluice` can show and cancel a workflow
but not make one (nor can its Python and Node producers).

Options: --build-only builds the old commit and stops; --no-roll leaves
the rolling upgrade out, --roll-only runs only it. A build without the
Redis broker or without SQLite (configure --without-redis, the minimal
build of .ci/run) upgrades only the stores it has.

Run time after the first build: about half a minute, plus the roll's
duration and half a minute more; the first build of the old commit takes a few
minutes more (it is timed in the log).
"""

import fcntl
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

SRC = os.environ.get("SLUICE_SRCDIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("SLUICE_BUILDDIR") or os.path.join(SRC, "_build")
PATIENCE = 60.0
# How long producers of both versions enqueue during the rolling upgrade.
ROLL_SECONDS = float(os.environ.get("SLUICE_UPGRADE_ROLL_SECONDS") or 60)
# The task only the current build's worker has (tests/upgrade/rollout.la).
NEW_TASK = "rollout.added"
# The label a worker's metrics give every name it has not registered.
UNREGISTERED = "(unregistered)"


def log(*words):
    print("upgrade:", *words, flush=True)


def skip(why):
    """Exit 77 (SKIP), or fail when CI is set: CI has the history."""
    if os.environ.get("CI"):
        log(why, "(and CI is set: failing)")
        sys.exit(1)
    log(why, "(skipped)")
    sys.exit(77)


def from_commit():
    with open(os.path.join(SRC, "tests", "upgrade", "FROM")) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                return line
    raise SystemExit("upgrade: tests/upgrade/FROM names no commit")


def git(*args):
    return subprocess.run(["git", "-C", SRC] + list(args), check=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True).stdout.strip()


def old_build(commit):
    """The build of @commit, made on first use under a lock (two runs of
    make check at once share the cache), reused afterwards."""
    try:
        full = git("rev-parse", "--verify", "--quiet", commit + "^{commit}")
    except (OSError, subprocess.CalledProcessError):
        skip("no git history here (not a git checkout, or a shallow one "
             "without %s)" % commit)
    cache = os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
        "sluice-upgrade", full)
    tree = os.path.join(cache, "src")
    build = os.path.join(cache, "build")
    done = os.path.join(build, ".built")
    os.makedirs(cache, exist_ok=True)
    with open(os.path.join(cache, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(done):
            return build
        started = time.monotonic()
        log("building", full, "in", cache, "once (later runs reuse it)")
        subprocess.run(["git", "-C", SRC, "worktree", "prune"], check=True)
        if not os.path.exists(os.path.join(tree, ".git")):
            shutil.rmtree(tree, ignore_errors=True)
            git("worktree", "add", "--detach", tree, full)

        def run(argv, cwd):
            p = subprocess.run(argv, cwd=cwd, text=True,
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
            if p.returncode != 0:
                sys.stderr.write(p.stderr[-4000:])
                raise SystemExit("upgrade: building %s failed: %s"
                                 % (full, " ".join(argv)))

        run(["autoreconf", "-fi"], tree)
        os.makedirs(build, exist_ok=True)
        run([os.path.join(tree, "configure"), "-q", "CFLAGS=-O1 -g0"], build)
        run(["make", "-j2", "-s", "all"], build)
        with open(done, "w") as f:
            f.write("%.0f s\n" % (time.monotonic() - started))
        log("built %s in %.0f s" % (full[:12], time.monotonic() - started))
        return build


# ---- Processes and Redis ----------------------------------------------------

class Procs:
    """Processes this test started, stopped by their pid at exit."""

    def __init__(self):
        self.procs = []

    def start(self, argv, env, log_path):
        with open(log_path, "ab") as logf:
            p = subprocess.Popen(argv, env=env, stdout=logf,
                                 stderr=subprocess.STDOUT)
        p.args_log = log_path
        self.procs.append(p)
        return p

    def stop(self, p, sig=signal.SIGTERM):
        if p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(timeout=PATIENCE)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        return p.returncode

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resp(port, *args):
    """One Redis command, for what no sluice command does (RESP, by hand:
    the test needs nothing but the standard library)."""
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(out)
        f = s.makefile("rb")

        def read():
            line = f.readline().rstrip(b"\r\n")
            kind, rest = line[:1], line[1:]
            if kind == b"+":
                return rest.decode()
            if kind == b"-":
                raise AssertionError("Redis: " + rest.decode())
            if kind == b":":
                return int(rest)
            if kind == b"$":
                n = int(rest)
                if n < 0:
                    return None
                data = f.read(n + 2)[:-2]
                return data.decode()
            if kind == b"*":
                return [read() for _ in range(int(rest))]
            raise AssertionError("Redis: unexpected reply %r" % line)

        return read()


def start_redis(procs, tmp):
    server = os.environ.get("REDIS_SERVER") or shutil.which("redis-server")
    if not server:
        skip("no redis-server (apt-get install redis-server)")
    for _ in range(5):
        port = free_port()
        p = procs.start([server, "--port", str(port), "--bind", "127.0.0.1",
                         "--save", "", "--appendonly", "no", "--dir", tmp],
                        os.environ.copy(), os.path.join(tmp, "redis.log"))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and p.poll() is None:
            try:
                if resp(port, "PING") == "PONG":
                    return port
            except OSError:
                time.sleep(0.05)
        procs.stop(p, signal.SIGKILL)
    raise AssertionError("redis-server would not start")


# ---- The two builds ---------------------------------------------------------

class Sluice:
    """One build's `sluice` and demo module, on one store."""

    def __init__(self, name, build, env, tmp, procs):
        self.name = name
        self.bin = os.path.join(build, "cli", "sluice")
        self.demo = os.path.join(build, "examples", "demo-module", ".libs",
                                 "demo.so")
        self.rollout = os.path.join(build, "tests", "upgrade", ".libs",
                                    "rollout.so")
        self.env = env
        self.tmp = tmp
        self.procs = procs
        for f in (self.bin, self.demo):
            if not os.path.exists(f):
                raise SystemExit("upgrade: %s is missing: build it first"
                                 % f)

    def run(self, *args, ok=True):
        p = subprocess.run([self.bin] + list(args), env=self.env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=PATIENCE)
        if ok and p.returncode != 0:
            raise AssertionError("%s sluice %s: status %d: %s"
                                 % (self.name, " ".join(args), p.returncode,
                                    p.stderr))
        return p

    def json(self, *args):
        return json.loads(self.run(*(list(args) + ["--json"])).stdout)

    def enqueue(self, task, args, id, *options):
        self.run("enqueue", task, json.dumps(args), "--id", id, *options)

    def state(self, id):
        p = self.run("inspect", id, "--json", ok=False)
        return json.loads(p.stdout)["state"] if p.returncode == 0 else None

    def worker(self, label, *args, modules=()):
        argv = [self.bin, "worker", "--module", self.demo, "--no-task-log"]
        for m in modules:
            argv += ["--module", m]
        return self.procs.start(
            argv + list(args), self.env,
            os.path.join(self.tmp, "%s-%s.log" % (self.name, label)))


def wait_for(what, check, patience=PATIENCE):
    deadline = time.monotonic() + patience
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError("waited %.0f s for %s" % (patience, what))
        time.sleep(0.2)


def one_line_refusal(p, words):
    assert p.returncode != 0, "not refused: %s" % p.stdout
    lines = p.stderr.strip().split("\n")
    assert len(lines) == 1 and words in lines[0], \
        "not one line saying “%s”: %s" % (words, p.stderr)
    return lines[0]


def events(s):
    """Every event of the namespace's stream, oldest first."""
    text = s.run("events", "--json").stdout
    decoder = json.JSONDecoder()
    out = []
    at = 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at == len(text):
            return out
        e, at = decoder.raw_decode(text, at)
        out.append(e)


def alive(s, worker_id):
    return any(w["id"] == worker_id and w["alive"]
               for w in s.json("stats")["workers"])


def by_id(evs, kind):
    counts = {}
    for e in evs:
        if e["kind"] == kind:
            counts[e["id"]] = counts.get(e["id"], 0) + 1
    return counts


def schedule_file(tmp, label, name, queue, every_ms, missed="skip"):
    """A key file with one periodic schedule of demo.echo, for workers of
    both builds and their `sluice periodic ls`."""
    path = os.path.join(tmp, "%s.conf" % label)
    with open(path, "w") as f:
        f.write('[periodic "%s"]\ntask = demo.echo\nargs = {"tick": 1}\n'
                'queue = %s\ninterval = %dms\nmissed = %s\n'
                % (name, queue, every_ms, missed))
    return path


def last_occurrence(s, config):
    """When the schedule's last occurrence was due, as the store's claim
    says (0: never)."""
    [sched] = s.json("periodic", "ls", "--config", config)["schedules"]
    return sched["last_at"] or 0


def occurrences(evs, name):
    """The due times of the schedule's occurrences that succeeded."""
    return sorted(int(e["id"].rsplit(":", 1)[1]) for e in evs
                  if e["kind"] == "succeeded"
                  and e["id"].startswith("periodic:%s:" % name))


def once_each(evs, ids, what):
    """Each id started and succeeded exactly once: at-least-once delivery
    allows a duplicate only after a worker died, and none did."""
    started = by_id(evs, "started")
    succeeded = by_id(evs, "succeeded")
    twice = [(id, started.get(id), succeeded.get(id)) for id in ids
             if started.get(id) != 1 or succeeded.get(id) != 1]
    assert not twice, "%s: not run exactly once (id, starts, successes): " \
        "%s" % (what, twice[:5])


def no_gaps(ticks, every_ms, what):
    gaps = [(a, b) for a, b in zip(ticks, ticks[1:]) if b - a != every_ms]
    assert ticks and all(t % every_ms == 0 for t in ticks) and not gaps, \
        "%s: occurrences skipped or off the interval: %s" % (what, gaps
                                                             or ticks)


def run_what_is_left(new, worker_id, queues):
    """Occurrences dispatched as the workers with the schedule stopped may
    wait in a queue: a worker without it runs what is left, until nothing
    is queued, scheduled or in flight."""
    args = ["--worker-id", worker_id, "--events"]
    for q in queues:
        args += ["--queue", q]
    last = new.worker(worker_id, *args)
    wait_for("the worker %s to start" % worker_id,
             lambda: alive(new, worker_id))

    def empty():
        st = new.json("stats")
        return all(q["ready"] == 0 for q in st["queues"]) and \
            st["scheduled"] == 0 and st["in_flight"] in (0, None)
    wait_for("nothing left", empty)
    assert new.procs.stop(last) == 0, "the worker %s did not stop" % worker_id


# ---- One store --------------------------------------------------------------

# A periodic schedule the old worker claims before the upgrade; missed =
# all, so that the occurrences due while no worker runs are dispatched by
# the new build when it starts, and none is lost or repeated.
FILL_TICK = "fill-tick"
FILL_TICK_MS = 1000


def fill_with_old(old, crash, config):
    """What the old command line can leave in a store; returns the ids
    that must end succeeded, and the last periodic occurrence the old
    worker claimed."""
    old.run("pause", "paused")
    for i in range(3):
        old.enqueue("demo.echo", {"r": i}, "r-%d" % i)
    # Buried after its one attempt (the old worker allows one), and a
    # retry of the new one succeeds (demo.flaky fails its first attempt).
    old.enqueue("demo.flaky", {"fail_times": 1}, "d-1")
    # Its own three attempts: the first fails, the retry waits 5 s.
    old.enqueue("demo.flaky", {"fail_times": 1}, "t-1", "--max-attempts", "3")
    # It runs the key file's periodic schedule too, and leaves its claim.
    w = old.worker("worker", "--queue", "default", "--max-attempts", "1",
                   "--backoff", "5s", "--no-jitter", "--queue", "ticks",
                   "--events", "--config", config)
    if crash:
        old.enqueue("demo.sleep", {"ms": 2000}, "k-1", "--queue", "slow")
        slow = old.worker("slow", "--queue", "slow", "--visibility-timeout",
                          "3s")
        wait_for("k-1 to run", lambda: old.state("k-1") == "running")
        old.procs.stop(slow, signal.SIGKILL)
    wait_for("the old worker's tasks", lambda: all(
        old.state("r-%d" % i) == "succeeded" for i in range(3))
        and old.state("d-1") == "dead_lettered"
        and old.state("t-1") == "retrying"
        and old.state("periodic:%s:%d" % (FILL_TICK, last_occurrence(
            old, config))) == "succeeded")
    assert old.procs.stop(w) == 0, "the old worker did not stop cleanly"
    claimed = last_occurrence(old, config)
    for i in range(20):
        old.enqueue("demo.echo", {"q": i}, "q-%d" % i)
    old.enqueue("demo.echo", {"s": 1}, "s-1", "--delay", "4s")
    old.enqueue("demo.echo", {"p": 1}, "p-1", "--queue", "paused")
    old.enqueue("demo.echo", {"u": 1}, "u-1", "--queue", "paused",
                "--unique-key", "k1")
    stats = old.json("stats")
    assert stats["dead_letters"] == 1 and stats["scheduled"] >= 2, stats
    return (["r-0", "r-1", "r-2", "d-1", "t-1", "s-1", "p-1", "u-1"]
            + ["q-%d" % i for i in range(20)] + (["k-1"] if crash else []),
            claimed)


def check_and_drain(label, new, old_worker, must_succeed, sqlite_path,
                    config, claimed):
    """The new build on what the old one left: its workers start first,
    so that on SQLite they are what meets the old file (two at once: one
    migrates, the other waits for the lock and finds it migrated)."""
    args = ["--queue", "default", "--queue", "paused", "--queue", "slow",
            "--backoff", "500ms", "--no-jitter", "--visibility-timeout", "3s",
            "--queue", "ticks", "--events", "--config", config]
    joined = int(time.time() * 1000)
    workers = [new.worker("worker", *args)]
    if sqlite_path is not None:
        workers.append(new.worker("worker-2", *args))
    for i in range(3):
        got = new.json("result", "r-%d" % i)
        assert got["state"] == "succeeded" and got["result"] == {"r": i}, got
    held = new.json("enqueue", "demo.echo", "{}", "--queue", "paused",
                    "--unique-key", "k1")
    assert held["existed"] and held.get("unique_held"), held
    stats = new.json("stats")
    assert [q["paused"] for q in stats["queues"]
            if q["name"] == "paused"] == [True], stats
    [entry] = new.json("dlq", "list")["entries"]
    assert entry["task_id"] == "d-1" and entry["reason"] == "max_attempts", \
        entry
    new.run("dlq", "replay", entry["entry_id"])
    new.run("resume", "paused")
    wait_for("every task to succeed", lambda: all(
        new.state(id) == "succeeded" for id in must_succeed), 90)
    # The retry the old worker scheduled, and the replayed dead letter
    # (its attempts counted afresh), each succeeded at their second.
    for id in ("t-1", "d-1"):
        got = new.json("result", id)
        assert got["attempt"] == 2, got
    # The schedule fires on: an occurrence due after the new workers
    # started (those missed meanwhile came first: missed = all).
    wait_for("the schedule to fire after the upgrade",
             lambda: last_occurrence(new, config) > joined)
    for w in workers:
        assert new.procs.stop(w) == 0, "a new worker did not stop cleanly"
    run_what_is_left(new, "last-" + label, ["ticks"])
    evs = events(new)
    ticks = occurrences(evs, FILL_TICK)
    # Each occurrence once, whichever build claimed it, and none lost
    # between the old worker's last claim and the new workers' start.
    once_each(evs, ["periodic:%s:%d" % (FILL_TICK, t) for t in ticks], label)
    no_gaps(ticks, FILL_TICK_MS, label)
    before = [t for t in ticks if t <= claimed]
    missed = [t for t in ticks if claimed < t <= joined]
    assert before and before[-1] == claimed and missed, (claimed, ticks)
    log("%s: periodic %s: occurrences claimed by the old build %d, by the "
        "new one %d (%d of them due while neither ran), each run once"
        % (label, FILL_TICK, len(before), len(ticks) - len(before),
           len(missed)))
    # A rolling upgrade: the old worker, running since before the store
    # was migrated, still serves its queue.
    new.enqueue("demo.echo", {"o": 1}, "o-1", "--queue", "oldq")
    wait_for("the old worker to run o-1",
             lambda: new.state("o-1") == "succeeded")
    assert new.procs.stop(old_worker) == 0, "the old worker did not stop"
    stats = new.json("stats")
    assert all(q["ready"] == 0 for q in stats["queues"]), stats
    assert stats["scheduled"] == 0 and stats["dead_letters"] == 0, stats
    assert stats["in_flight"] in (0, None), stats
    assert stats["layout_version"] == (2 if sqlite_path else 1), stats
    if sqlite_path is not None:
        db = sqlite3.connect(sqlite_path)
        rows = db.execute("SELECT version, applied_at FROM migrations "
                          "ORDER BY version").fetchall()
        db.close()
        assert [v for v, _ in rows] == [1, 2], rows
        assert rows[0][1] is None and rows[1][1] > 0, rows


def upgrade_one(label, old, new, crash, sqlite_path=None, redis_port=None,
                ns=None):
    started = time.monotonic()
    config = schedule_file(old.tmp, "fill-" + label, FILL_TICK, "ticks",
                           FILL_TICK_MS, missed="all")
    must_succeed, claimed = fill_with_old(old, crash, config)
    # At least one occurrence falls due while no worker runs the schedule.
    wait_for("an occurrence due with no worker", lambda: time.time() * 1000
             > claimed + 2 * FILL_TICK_MS)
    rolling = old.worker("rolling", "--queue", "oldq")
    wait_for("the old worker to start", lambda: any(
        w["alive"] for w in old.json("stats")["workers"]))
    dry = new.json("migrate", "--dry-run")
    before = dry["before"]
    assert before["version"] == 1 and not dry["migrated"], dry
    if sqlite_path is not None:
        assert [s["name"] for s in before["pending"]] == ["002-migrations"], \
            before
        # Nothing changed: the old build still opens it.
        old.run("stats")
    else:
        assert not before["recorded"] and before["pending"] == [], before
        assert resp(redis_port, "HGET", "{%s}:meta" % ns, "layout") is None
        migrated = new.json("migrate")
        assert migrated["migrated"] and migrated["after"]["recorded"], \
            migrated
        assert resp(redis_port, "HGET", "{%s}:meta" % ns, "layout") == "1"
    check_and_drain(label, new, rolling, must_succeed, sqlite_path, config,
                    claimed)

    # Rolling back: what the old build does with the store now.
    if sqlite_path is not None:
        line = one_line_refusal(old.run("stats", ok=False),
                                "has schema version 2, this sluice reads "
                                "version 1")
        log("%s: the old build on the migrated file says: %s" % (label, line))
        db = sqlite3.connect(sqlite_path)
        db.execute("UPDATE meta SET value = '3' WHERE key = 'schema'")
        db.commit()
        db.close()
        line = one_line_refusal(new.run("stats", ok=False),
                                "upgrade this program")
    else:
        old.run("stats")  # it does not know the fields, and reads on
        resp(redis_port, "HSET", "{%s}:meta" % ns, "layout", "2")
        line = one_line_refusal(new.run("stats", ok=False),
                                "upgrade this program")
    log("%s: one version newer, the current build says: %s" % (label, line))
    log("%s: %d tasks upgraded and drained in %.0f s"
        % (label, len(must_succeed), time.monotonic() - started))


# ---- A rolling upgrade ------------------------------------------------------

TICK = "roll-tick"
TICK_MS = 2000


class Producer:
    """One build's `sluice enqueue` in a loop, on a thread, until stopped:
    what it enqueued, by id."""

    def __init__(self, sluice, label, tasks):
        self.sluice = sluice
        self.label = label
        self.tasks = tasks
        self.ids = {}
        self.error = None
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        n = 0
        try:
            while not self.stopping.is_set():
                task = self.tasks[n % len(self.tasks)]
                id = "%s-%d" % (self.label, n)
                self.sluice.enqueue(task, {"by": self.label, "n": n}, id,
                                    "--queue", "roll")
                self.ids[id] = task
                n += 1
        except Exception as e:  # the main thread reports it
            self.error = e

    def first(self, task):
        return next((id for id, t in list(self.ids.items()) if t == task),
                    None)

    def stop(self):
        self.stopping.set()
        self.thread.join()
        if self.error is not None:
            raise AssertionError("the %s producer: %s" % (self.label,
                                                          self.error))
        return self.ids


def metric(port, name, **labels):
    """The sum of a worker's /metrics samples of @name with @labels."""
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                timeout=10) as f:
        text = f.read().decode()
    want = ['%s="%s"' % kv for kv in labels.items()]
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            sample, _, value = line.rpartition(" ")
            if all(w in sample for w in want):
                total += float(value)
    return total


def healthy(port):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port,
                                    timeout=5) as f:
            return f.status == 200
    except OSError:
        return False


class Roll:
    """One Redis namespace upgraded while it works: an old worker and the
    old producer, then the new producer (its new-only tasks met by the old
    worker alone first), then a new worker beside the old one; the old
    worker is stopped and the new one drains. Both workers run the same
    periodic schedule, so its claims pass from one version to the other."""

    def __init__(self, mode, build, env, tmp, procs, port):
        self.mode = mode
        self.ns = "uproll-" + mode
        self.port = port
        env = dict(env, SLUICE_URL="redis://127.0.0.1:%d/0" % port,
                   SLUICE_MODE=mode, SLUICE_NAMESPACE=self.ns)
        self.old = Sluice("old-roll-" + mode, build, env, tmp, procs)
        self.new = Sluice("new-roll-" + mode, BUILD, env, tmp, procs)
        if not os.path.exists(self.new.rollout):
            raise SystemExit("upgrade: %s is missing: make check builds it"
                             % self.new.rollout)
        self.config = schedule_file(tmp, "roll-" + mode, TICK, "roll", TICK_MS)
        self.worker_args = ["--queue", "roll", "--events", "--config",
                            self.config]

    def last_tick(self, s):
        return last_occurrence(s, self.config)

    def start_old(self):
        self.old_metrics = free_port()
        self.old_worker = self.old.worker(
            "worker", "--worker-id", "old-" + self.mode, "--metrics-listen",
            "127.0.0.1:%d" % self.old_metrics, *self.worker_args)
        self.old_producer = Producer(self.old, "old-" + self.mode,
                                     ["demo.echo", "demo.noop"])

    def wait_old(self):
        wait_for("the old worker's metrics", lambda: healthy(self.old_metrics))
        wait_for("the old worker to run an old producer's task",
                 lambda: self.old_producer.ids and self.old.state(
                     "old-%s-0" % self.mode) == "succeeded")
        wait_for("the old worker to dispatch the periodic schedule",
                 lambda: self.last_tick(self.old) > 0)
        assert resp(self.port, "HGET", "{%s}:meta" % self.ns,
                    "layout") is None, "the old build recorded a layout"

    def start_new_producer(self):
        # Producers first (docs/upgrading.md): a new-only task that no
        # worker of the namespace knows yet.
        self.new_producer = Producer(self.new, "new-" + self.mode,
                                     [NEW_TASK, "demo.echo"])

    def wait_deferred(self):
        """Only the old worker is there: the new-only tasks it takes are
        deferred, with a note in their record, and never buried."""
        def deferred():
            id = self.new_producer.first(NEW_TASK)
            if id is None:
                return None
            rec = self.new.json("inspect", id)
            if rec["state"] == "scheduled" and "deferred" in (
                    rec.get("error") or ""):
                return (id, rec["error"])
            return None
        self.deferred_id, note = wait_for("a new-only task to be deferred",
                                          deferred)
        self.deferred_note = note
        wait_for("the old worker's deferral in its metrics", lambda: metric(
            self.old_metrics, "sluice_worker_tasks_deferred_total",
            task=UNREGISTERED) > 0)
        # The new producer, the first client of this version, recorded the
        # layout while the old worker ran on.
        assert resp(self.port, "HGET", "{%s}:meta" % self.ns,
                    "layout") == "1"
        self.before_new_worker = self.last_tick(self.new)

    def start_new(self):
        self.new_worker = self.new.worker(
            "worker", "--worker-id", "new-" + self.mode, *self.worker_args,
            modules=[self.new.rollout])

    def wait_new(self):
        wait_for("the new worker to run the deferred task",
                 lambda: self.new.state(self.deferred_id) == "succeeded")

    def stop_producers(self):
        self.old_ids = self.old_producer.stop()
        self.new_ids = self.new_producer.stop()

    def stop_old(self):
        self.old_deferrals = metric(self.old_metrics,
                                    "sluice_worker_tasks_deferred_total",
                                    task=UNREGISTERED)
        assert self.old.procs.stop(self.old_worker) == 0, \
            "the old worker did not stop cleanly on SIGTERM"
        self.old_stopped_ms = int(time.time() * 1000)

    def drain(self):
        ids = dict(self.old_ids, **self.new_ids)

        def all_succeeded():
            done = by_id(events(self.new), "succeeded")
            return all(id in done for id in ids)
        wait_for("every task of both producers to succeed", all_succeeded,
                 120)
        # The schedule fires on with the old worker gone.
        wait_for("an occurrence dispatched by the new worker alone",
                 lambda: self.last_tick(self.new) > self.old_stopped_ms)
        assert self.new.procs.stop(self.new_worker) == 0, \
            "the new worker did not stop cleanly"
        run_what_is_left(self.new, "last-" + self.mode, ["roll"])

    def check(self):
        evs = events(self.new)
        ids = dict(self.old_ids, **self.new_ids)
        for kind in ("dead_lettered", "failed", "retried", "cancelled"):
            got = [e["id"] for e in evs if e["kind"] == kind]
            assert not got, "%s: %s %s" % (self.mode, kind, got[:5])
        ticks = occurrences(evs, TICK)
        once_each(evs, list(ids) + ["periodic:%s:%d" % (TICK, t)
                                    for t in ticks], self.mode)
        stats = self.new.json("stats")
        assert stats["dead_letters"] == 0, stats
        assert self.new.json("dlq", "list")["entries"] == []
        ran_by = {}
        for e in evs:
            if e["kind"] == "succeeded":
                ran_by[e["id"]] = e.get("worker") or ""
        new_only = [id for id, t in ids.items() if t == NEW_TASK]
        wrong = [id for id in new_only if not ran_by[id].startswith("new-")]
        assert not wrong, "%s: new-only tasks run elsewhere: %s" % (
            self.mode, [(id, ran_by[id]) for id in wrong[:5]])
        got = self.new.json("result", self.deferred_id)
        n = int(self.deferred_id.rsplit("-", 1)[1])
        assert got["state"] == "succeeded" and got["result"] == {
            "by": "new-" + self.mode, "n": n}, got
        # The records agree with the events (read for every 50th task: a
        # command per task would cost more than the roll).
        for id in sorted(ids)[::50]:
            assert self.new.state(id) == "succeeded", (id, self.new.json(
                "inspect", id))
        with open(self.old_worker.args_log, errors="replace") as f:
            assert "deferring messages of it" in f.read(), \
                "the old worker did not log its deferral"
        assert self.old_deferrals > 0
        # One claim per occurrence, across both versions: every interval
        # dispatched, once, by one worker or the other (a worker that
        # starts on a claim dispatches the next due occurrence).
        no_gaps(ticks, TICK_MS, self.mode)
        old_ticks = [t for t in ticks if t <= self.before_new_worker]
        late = [t for t in ticks if t > self.old_stopped_ms]
        assert old_ticks and late, (old_ticks, late)
        assert self.last_tick(self.old) == self.last_tick(self.new)
        workers = {}
        for id in ids:
            w = ran_by[id].split("-")[0]
            workers[w] = workers.get(w, 0) + 1
        log("%s roll: enqueued by the old build's sluice enqueue %d, by the "
            "new one's %d (%d of them %s); run by the old worker %d, the new "
            "%d, after it %d, each once; the old worker deferred %s %.0f "
            "times, none dead-lettered; periodic %s: %d occurrences, %d "
            "before the new worker, %d after the old one stopped, each once, "
            "none skipped"
            % (self.mode, len(self.old_ids), len(self.new_ids), len(new_only),
               NEW_TASK, workers.get("old", 0), workers.get("new", 0),
               workers.get("last", 0), NEW_TASK, self.old_deferrals, TICK,
               len(ticks), len(old_ticks), len(late)))
        log("%s roll: the record of %s while only the old worker ran: %s"
            % (self.mode, self.deferred_id, self.deferred_note))


def rolling_upgrade(build, env, tmp, procs, port):
    """Both modes at once, so the roll's duration is paid once."""
    started = time.monotonic()
    rolls = [Roll(mode, build, env, tmp, procs, port)
             for mode in ("reliable", "fast")]
    try:
        for r in rolls:
            r.start_old()
        for r in rolls:
            r.wait_old()
        for r in rolls:
            r.start_new_producer()
        for r in rolls:
            r.wait_deferred()
        for r in rolls:
            r.start_new()
        for r in rolls:
            r.wait_new()
        # The producers of both versions go on for the roll's duration
        # (not a wait for anything to happen: what must happen was waited
        # for above, and is checked below).
        time.sleep(max(0.0, started + ROLL_SECONDS - time.monotonic()))
        for r in rolls:
            r.stop_producers()
    finally:
        for r in rolls:
            if hasattr(r, "new_producer"):
                r.new_producer.stopping.set()
            if hasattr(r, "old_producer"):
                r.old_producer.stopping.set()
    for r in rolls:
        r.stop_old()
    for r in rolls:
        r.drain()
    for r in rolls:
        r.check()
    log("rolling upgrade in %.0f s" % (time.monotonic() - started))


def main():
    build = old_build(from_commit())
    if "--build-only" in sys.argv:
        log("old build:", build)
        return 0
    started = time.monotonic()
    procs = Procs()
    tmp = tempfile.mkdtemp(prefix="sluice-upgrade-")
    # What this build has (configure --without-redis, --without-sqlite):
    # the stores it cannot open are not upgraded here.
    with_redis = os.environ.get("SLUICE_WITH_REDIS", "yes") != "no"
    with_sqlite = os.environ.get("SLUICE_WITH_SQLITE", "yes") != "no"
    if not with_redis and not with_sqlite:
        skip("this build has neither the Redis nor the SQLite broker")
    try:
        port = start_redis(procs, tmp) if with_redis else None
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("SLUICE_")}
        # No default database in the user's state directory, ever.
        env["XDG_STATE_HOME"] = tmp
        stores = []
        if with_sqlite:
            stores.append(
                ("sqlite", {"SLUICE_URL": "sqlite://%s/tasks.db" % tmp}, True))
        if with_redis:
            stores += [
                ("redis-fast", {"SLUICE_URL": "redis://127.0.0.1:%d/0" % port,
                                "SLUICE_MODE": "fast",
                                "SLUICE_NAMESPACE": "upfast"}, False),
                ("redis-reliable",
                 {"SLUICE_URL": "redis://127.0.0.1:%d/0" % port,
                  "SLUICE_MODE": "reliable",
                  "SLUICE_NAMESPACE": "uprel"}, True),
            ]
        for label, settings, crash in ([] if "--roll-only" in sys.argv
                                       else stores):
            store_env = dict(env, **settings)
            old = Sluice("old-" + label, build, store_env, tmp, procs)
            new = Sluice("new-" + label, BUILD, store_env, tmp, procs)
            upgrade_one(label, old, new, crash,
                        sqlite_path=("%s/tasks.db" % tmp
                                     if label == "sqlite" else None),
                        redis_port=port if label != "sqlite" else None,
                        ns=settings.get("SLUICE_NAMESPACE"))
        # The rolling upgrade runs on Redis namespaces.
        if "--no-roll" not in sys.argv and with_redis:
            rolling_upgrade(build, env, tmp, procs, port)
        log("passed in %.0f s" % (time.monotonic() - started))
        return 0
    except AssertionError as e:
        log("FAILED:", e)
        for name in sorted(os.listdir(tmp)):
            if name.endswith(".log"):
                with open(os.path.join(tmp, name), errors="replace") as f:
                    tail = f.read()[-3000:]
                sys.stderr.write("---- %s\n%s\n" % (name, tail))
        return 1
    finally:
        procs.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

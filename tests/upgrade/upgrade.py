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
task in it, a uniqueness claim. Then the current build:

  - `sluice migrate --dry-run` shows the pending steps and changes nothing;
  - SQLite: two workers started at once migrate the file online, once;
    Redis: `sluice migrate` records the layout version;
  - every old result reads back, the uniqueness claim still holds, the
    pause is still there, the dead letter replays;
  - its worker drains everything: every task ends succeeded, and nothing
    is left queued, scheduled, in flight or dead; an old worker started
    before the migration still serves its queue meanwhile (a rolling
    upgrade);
  - the old build refuses the SQLite file it migrated (with the old
    build's own message), and a store one layout version newer than the
    current build is refused by it in one line that says to upgrade.

Run time after the first build: about a minute; the first build of the
old commit takes a few minutes more (it is timed in the log).
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
import time

SRC = os.environ.get("SLUICE_SRCDIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("SLUICE_BUILDDIR") or os.path.join(SRC, "_build")
PATIENCE = 60.0


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

    def worker(self, label, *args):
        return self.procs.start(
            [self.bin, "worker", "--module", self.demo, "--no-task-log"]
            + list(args), self.env,
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


# ---- One store --------------------------------------------------------------

def fill_with_old(old, crash):
    """What the old command line can leave in a store; returns the ids
    that must end succeeded."""
    old.run("pause", "paused")
    for i in range(3):
        old.enqueue("demo.echo", {"r": i}, "r-%d" % i)
    # Buried after its one attempt (the old worker allows one), and a
    # retry of the new one succeeds (demo.flaky fails its first attempt).
    old.enqueue("demo.flaky", {"fail_times": 1}, "d-1")
    # Its own three attempts: the first fails, the retry waits 5 s.
    old.enqueue("demo.flaky", {"fail_times": 1}, "t-1", "--max-attempts", "3")
    w = old.worker("worker", "--queue", "default", "--max-attempts", "1",
                   "--backoff", "5s", "--no-jitter")
    if crash:
        old.enqueue("demo.sleep", {"ms": 2000}, "k-1", "--queue", "slow")
        slow = old.worker("slow", "--queue", "slow", "--visibility-timeout",
                          "3s")
        wait_for("k-1 to run", lambda: old.state("k-1") == "running")
        old.procs.stop(slow, signal.SIGKILL)
    wait_for("the old worker's tasks", lambda: all(
        old.state("r-%d" % i) == "succeeded" for i in range(3))
        and old.state("d-1") == "dead_lettered"
        and old.state("t-1") == "retrying")
    assert old.procs.stop(w) == 0, "the old worker did not stop cleanly"
    for i in range(20):
        old.enqueue("demo.echo", {"q": i}, "q-%d" % i)
    old.enqueue("demo.echo", {"s": 1}, "s-1", "--delay", "4s")
    old.enqueue("demo.echo", {"p": 1}, "p-1", "--queue", "paused")
    old.enqueue("demo.echo", {"u": 1}, "u-1", "--queue", "paused",
                "--unique-key", "k1")
    stats = old.json("stats")
    assert stats["dead_letters"] == 1 and stats["scheduled"] >= 2, stats
    return ["r-0", "r-1", "r-2", "d-1", "t-1", "s-1", "p-1", "u-1"] \
        + ["q-%d" % i for i in range(20)] + (["k-1"] if crash else [])


def check_and_drain(new, old_worker, must_succeed, sqlite_path):
    """The new build on what the old one left: its workers start first,
    so that on SQLite they are what meets the old file (two at once: one
    migrates, the other waits for the lock and finds it migrated)."""
    args = ["--queue", "default", "--queue", "paused", "--queue", "slow",
            "--backoff", "500ms", "--no-jitter", "--visibility-timeout", "3s"]
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
    for w in workers:
        assert new.procs.stop(w) == 0, "a new worker did not stop cleanly"
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
    must_succeed = fill_with_old(old, crash)
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
    check_and_drain(new, rolling, must_succeed, sqlite_path)

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


def main():
    build = old_build(from_commit())
    if "--build-only" in sys.argv:
        log("old build:", build)
        return 0
    started = time.monotonic()
    procs = Procs()
    tmp = tempfile.mkdtemp(prefix="sluice-upgrade-")
    try:
        port = start_redis(procs, tmp)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("SLUICE_")}
        # No default database in the user's state directory, ever.
        env["XDG_STATE_HOME"] = tmp
        stores = [
            ("sqlite", {"SLUICE_URL": "sqlite://%s/tasks.db" % tmp}, True),
            ("redis-fast", {"SLUICE_URL": "redis://127.0.0.1:%d/0" % port,
                            "SLUICE_MODE": "fast",
                            "SLUICE_NAMESPACE": "upfast"}, False),
            ("redis-reliable", {"SLUICE_URL": "redis://127.0.0.1:%d/0" % port,
                                "SLUICE_MODE": "reliable",
                                "SLUICE_NAMESPACE": "uprel"}, True),
        ]
        for label, settings, crash in stores:
            store_env = dict(env, **settings)
            old = Sluice("old-" + label, build, store_env, tmp, procs)
            new = Sluice("new-" + label, BUILD, store_env, tmp, procs)
            upgrade_one(label, old, new, crash,
                        sqlite_path=("%s/tasks.db" % tmp
                                     if label == "sqlite" else None),
                        redis_port=port if label != "sqlite" else None,
                        ns=settings.get("SLUICE_NAMESPACE"))
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

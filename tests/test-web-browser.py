#!/usr/bin/env python3
"""test-web-browser.py - `sluice web` in a real browser: headless Chromium
driven through chromedriver with the W3C WebDriver HTTP protocol.

The client is this file's own few lines of urllib (the standard library),
not Selenium: WebDriver is a small JSON-over-HTTP protocol, and a test
that needs nothing but python3, chromium and chromium-driver runs the
same on every Debian machine dev.sh sets up.

It starts its own redis-server (with a password, to check that none
reaches the page), a `sluice worker` with the demo module and a
`sluice web`, each on a free loopback port and stopped by its pid. It
makes tasks in every state (queued, scheduled, retrying, running: a
sleeping task, dead), loads the dashboard, checks the figures and rows it
shows against what the broker says (`sluice stats`, `sluice ls`,
`sluice dlq list`), replays a dead letter and pauses a queue by clicking
(through the confirmation dialog), checks both in the broker, and checks
that a write without the token is refused and that text from a message
is shown as text. Screenshots go to tests/test-web-browser.out/ in the
build tree.

The dashboard is served over HTTPS (--tls-cert, --tls-key) with a
certificate of a test CA the test makes with openssl: Chromium trusts
exactly that certificate's key (--ignore-certificate-errors-spki-list,
its SPKI's SHA-256), not every certificate, and the test's own requests
trust the CA only.

Every wait is for a condition, with a generous deadline; nothing asserts
on time. Exit 77 (skip) only when chromium or chromedriver is not
installed, and not even then under CI.
"""

import base64
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request

PATIENCE = 90.0  # seconds: a bound for broken code, not a timing assertion
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"

BUILD = os.environ.get("SLUICE_BUILDDIR") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))
SLUICE = os.path.join(BUILD, "cli", "sluice")
DEMO = os.path.join(BUILD, "examples", "demo-module", ".libs", "demo.so")
OUT = os.path.join(BUILD, "tests", "test-web-browser.out")
WORKFLOW_PROC = os.path.join(BUILD, "tests", "helpers", "workflow-proc")
PASSWORD = "pw-" + base64.b32encode(os.urandom(10)).decode().lower()
TOKEN = base64.b64encode(os.urandom(24)).decode()


def log(*args):
    print(*args, flush=True)


def wait_for(what, check, patience=PATIENCE, every=0.1):
    """Calls check() until it returns something true; returns it."""
    deadline = time.monotonic() + patience
    last = None
    while True:
        try:
            value = check()
            if value:
                return value
        except Exception as e:  # the condition may not hold yet
            last = e
        if time.monotonic() > deadline:
            raise AssertionError("gave up waiting for %s (last error: %r)" %
                                 (what, last))
        time.sleep(every)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def https_env(env):
    """env for a process that serves HTTPS. GIO loads GnuTLS with
    glib-networking's module (dlopen), so its thread-local variables are
    dynamic TLS, and under AddressSanitizer the runtime of GCC 12 (up to
    GCC 13 and LLVM 16) records such a block with a heuristic for glibc
    2.19's layout: a block 16 bytes past a page boundary is taken to have a
    header, whose two words it reads as the block's start and size. glibc
    has had no such header since 2.25, so LeakSanitizer scans a range that
    is no memory and its tracer dies at exit ("Tracer caught signal 11",
    after "DTLS ... at 0x3000001b2-0x13000012b4" with
    LSAN_OPTIONS=verbosity=1:log_threads=1; google/sanitizers#1322).
    intercept_tls_get_addr=0 for this process only: leaks are still
    checked, from every root but the dynamic TLS of modules loaded with
    dlopen. Outside ASan nothing reads it."""
    env = dict(env)
    asan = env.get("ASAN_OPTIONS", "")
    env["ASAN_OPTIONS"] = (asan + ":" if asan else "") + \
        "intercept_tls_get_addr=0"
    return env


class Procs:
    """The processes the test started, stopped by their pids."""

    def __init__(self):
        self.procs = []

    def start(self, name, argv, env=None, cwd=None):
        logf = open(os.path.join(OUT, name + ".log"), "wb")
        p = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, env=env, cwd=cwd)
        self.procs.append((name, p, logf))
        return p

    def log_of(self, name):
        with open(os.path.join(OUT, name + ".log"), "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self, name):
        """SIGTERM, and the exit status, which must be 0 (a sanitizer's
        report at exit is not)."""
        for n, p, logf in self.procs:
            if n == name:
                p.send_signal(signal.SIGTERM)
                status = p.wait(PATIENCE)
                assert status == 0, "%s exited %d:\n%s" % (
                    name, status, self.log_of(name)[-4000:])
                return
        raise AssertionError("no process " + name)

    def stop_all(self):
        for name, p, logf in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            logf.close()
        self.procs = []


class WebDriver:
    """The few W3C WebDriver commands the test needs."""

    def __init__(self, base):
        self.base = base
        self.session = None

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data,
                                     method=method)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=PATIENCE) as r:
                return json.loads(r.read().decode())["value"]
        except urllib.error.HTTPError as e:
            raise AssertionError("WebDriver %s %s: %s" %
                                 (method, path, e.read().decode()))

    def s(self, method, path, body=None):
        return self.call(method, "/session/%s%s" % (self.session, path), body)

    def open(self, chromium, profile, spki):
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--no-first-run",
                         "--user-data-dir=" + profile,
                         "--ignore-certificate-errors-spki-list=" + spki,
                         "--window-size=1400,1000"],
            },
        }}}
        self.session = self.call("POST", "/session", caps)["sessionId"]

    def close(self):
        if self.session is not None:
            try:
                self.s("DELETE", "")
            except Exception:
                pass
            self.session = None

    def go(self, url):
        self.s("POST", "/url", {"url": url})

    def js(self, script, *args):
        return self.s("POST", "/execute/sync",
                      {"script": script, "args": list(args)})

    def find(self, css):
        return self.s("POST", "/element",
                      {"using": "css selector", "value": css})[ELEMENT]

    def find_all(self, css):
        return [e[ELEMENT] for e in self.s(
            "POST", "/elements", {"using": "css selector", "value": css})]

    def text(self, css):
        return self.s("GET", "/element/%s/text" % self.find(css))

    def click(self, css):
        self.s("POST", "/element/%s/click" % self.find(css), {})

    def type(self, css, text):
        self.s("POST", "/element/%s/value" % self.find(css), {"text": text})

    def source(self):
        return self.s("GET", "/source")

    def screenshot(self, name):
        png = base64.b64decode(self.s("GET", "/screenshot"))
        with open(os.path.join(OUT, name + ".png"), "wb") as f:
            f.write(png)
        log("screenshot", name + ".png")


class Test:
    def __init__(self, chromium, chromedriver, redis_server):
        self.chromium = chromium
        self.chromedriver = chromedriver
        self.redis_server = redis_server
        self.procs = Procs()
        self.dir = tempfile.mkdtemp(prefix="sluice-web-browser-")
        self.env = dict(os.environ)
        for k in ("SLUICE_CONFIG", "G_MESSAGES_DEBUG", "SLUICE_URL"):
            self.env.pop(k, None)
        self.env["LC_ALL"] = "C.UTF-8"
        self.env["SLUICE_MODE"] = "reliable"
        self.env["SLUICE_NAMESPACE"] = "browser"
        self.seen_sources = []

    # ---- The servers -------------------------------------------------------

    def openssl(self, *args, stdin=None):
        return subprocess.run(("openssl",) + args, cwd=self.dir, input=stdin,
                              check=True, capture_output=True).stdout

    def make_certificates(self):
        """A test CA, and a certificate it signs for 127.0.0.1 and
        localhost; self.spki is the base64 SHA-256 of the latter's public
        key, as Chromium's flag takes it."""
        ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
        self.openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out",
                     "ca.pem", "-days", "2", "-subj", "/CN=sluice-test-ca",
                     "-addext", "basicConstraints=critical,CA:TRUE",
                     "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        self.openssl("req", *ec, "-keyout", "server.key", "-out",
                     "server.csr", "-subj", "/CN=localhost")
        with open(os.path.join(self.dir, "server.ext"), "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                    "extendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n")
        self.openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem",
                     "-CAkey", "ca.key", "-set_serial", "0x7e57", "-days",
                     "2", "-extfile", "server.ext", "-out", "server.pem")
        os.chmod(os.path.join(self.dir, "server.key"), 0o600)
        public = self.openssl("x509", "-in", "server.pem", "-pubkey",
                              "-noout")
        der = self.openssl("pkey", "-pubin", "-outform", "der", stdin=public)
        digest = self.openssl("dgst", "-sha256", "-binary", stdin=der)
        self.spki = base64.b64encode(digest).decode()
        self.tls = ssl.create_default_context(
            cafile=os.path.join(self.dir, "ca.pem"))

    def get(self, path):
        """GET of the dashboard, trusting the test CA only."""
        return urllib.request.urlopen(self.url + path, timeout=PATIENCE,
                                      context=self.tls).read()

    def start_redis(self):
        rdir = os.path.join(self.dir, "redis")
        os.mkdir(rdir)
        for _ in range(5):
            port = free_port()
            p = self.procs.start("redis", [
                self.redis_server, "--port", str(port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", rdir,
                "--requirepass", PASSWORD])
            try:
                wait_for("redis-server to answer", lambda: self.redis_ping(
                    port, p), patience=20)
                self.port = port
                break
            except AssertionError:
                if p.poll() is None:
                    raise
                self.procs.procs.pop()  # the port was taken meanwhile
        else:
            raise AssertionError("redis-server would not start")
        pwfile = os.path.join(self.dir, "redis-password")
        with open(pwfile, "w") as f:
            f.write(PASSWORD + "\n")
        os.chmod(pwfile, 0o600)
        self.env["SLUICE_URL"] = "redis://127.0.0.1:%d/0" % self.port
        self.env["SLUICE_PASSWORD_FILE"] = pwfile

    def redis_ping(self, port, p):
        if p.poll() is not None:
            raise AssertionError("redis-server exited")
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"AUTH %s\r\nPING\r\n" % PASSWORD.encode())
            data = b""
            while data.count(b"\r\n") < 2:
                chunk = s.recv(100)
                if not chunk:
                    return False
                data += chunk
            return b"+PONG" in data

    def sluice(self, *args):
        r = subprocess.run([SLUICE] + list(args), env=self.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=PATIENCE)
        if r.returncode != 0:
            raise AssertionError("sluice %s: exit %d: %s" % (
                " ".join(args), r.returncode, r.stderr.decode()))
        return r.stdout.decode()

    def sluice_json(self, *args):
        return json.loads(self.sluice(*args, "--json"))

    def start_worker(self):
        self.procs.start("worker", [
            SLUICE, "worker", "--module", DEMO, "--queue", "work",
            "--concurrency", "2", "--max-attempts", "3", "--backoff", "1h",
            "--backoff-max", "1h", "--no-jitter", "--worker-id", "w-browser",
            "--shutdown-timeout", "2s", "--events"],
            env=self.env)
        wait_for("the worker to be ready",
                 lambda: " ready: " in self.procs.log_of("worker"))

    def start_web(self):
        tfile = os.path.join(self.dir, "web-token")
        with open(tfile, "w") as f:
            f.write(TOKEN + "\n")
        os.chmod(tfile, 0o600)
        self.procs.start("web", [
            SLUICE, "web", "--listen", "127.0.0.1:0", "--token-file", tfile,
            "--sample-interval", "1s",
            "--tls-cert", os.path.join(self.dir, "server.pem"),
            "--tls-key", os.path.join(self.dir, "server.key")],
            env=https_env(self.env))

        def url():
            text = self.procs.log_of("web")
            at = text.find("serving on https://")
            if at < 0:
                return None
            rest = text[at + len("serving on "):]
            return rest[:rest.index("/", len("https://"))]
        self.url = wait_for("sluice web to serve", url)
        log("dashboard at", self.url)

    def start_browser(self):
        port = free_port()
        self.procs.start("chromedriver", [
            self.chromedriver, "--port=%d" % port, "--allowed-ips=127.0.0.1"])
        self.wd = WebDriver("http://127.0.0.1:%d" % port)
        wait_for("chromedriver to be ready",
                 lambda: self.wd.call("GET", "/status")["ready"])
        self.wd.open(self.chromium, os.path.join(OUT, "profile"), self.spki)

    # ---- Tasks in every state ----------------------------------------------

    def enqueue(self, task, args, *options):
        return self.sluice("enqueue", task, args, *options).strip()

    def state_of(self, task_id):
        return self.sluice_json("inspect", task_id)["state"]

    def make_tasks(self):
        t = {}
        t["queued"] = [self.enqueue("demo.noop", "{}", "--queue", "idle")
                       for _ in range(3)]
        # Text from a message is shown as text, never as markup.
        t["hostile"] = self.enqueue(
            "demo.echo", '{"x": "<img src=x id=injected onerror=alert(1)>"}',
            "--queue", "idle")
        t["scheduled"] = [self.enqueue("demo.noop", "{}", "--queue", "work",
                                       "--delay", "1h") for _ in range(2)]
        t["retrying"] = [self.enqueue("demo.fail", "{}", "--queue", "work")]
        t["running"] = [self.enqueue("demo.sleep", '{"ms": 600000}',
                                     "--queue", "work")]
        t["dead"] = [self.enqueue("demo.fatal", "{}", "--queue", "work")
                     for _ in range(2)]
        for state in ("retrying", "running"):
            for i in t[state]:
                wait_for("%s to be %s" % (i, state),
                         lambda: self.state_of(i) == state)
        for i in t["dead"]:
            wait_for("%s to be dead-lettered" % i,
                     lambda: self.state_of(i) == "dead_lettered")
        # Running tasks are listed from the workers' announcements.
        wait_for("the running task to be announced", lambda: len(
            self.sluice_json("ls", "--state", "running")["tasks"]) == 1)
        self.tasks = t

    # ---- The page ----------------------------------------------------------

    def load(self, fragment):
        """Loads the page afresh at #fragment and waits until it has
        rendered it (a query of its own makes each load a new document:
        a change of fragment alone would not reload)."""
        self.loads = getattr(self, "loads", 0) + 1
        self.wd.go("%s/?load=%d%s" % (self.url, self.loads, fragment))
        self.wait_loaded(fragment)

    def wait_loaded(self, fragment):
        want = fragment if fragment.startswith("#") else "#/"
        wait_for("the page %s to render" % fragment, lambda: self.wd.js(
            "return document.body.dataset.loaded === arguments[0];", want))
        self.check_no_password()

    def check_no_password(self):
        page = self.wd.source()
        assert PASSWORD not in page, "the Redis password reached the page"
        self.seen_sources.append(page)

    def ids_in(self, css):
        return set(self.wd.js(
            "return Array.from(document.querySelectorAll(arguments[0]))"
            ".map(e => e.dataset.id || e.dataset.entry);", css))

    def check_overview(self):
        self.load("")
        stats = self.sluice_json("stats")
        queued = sum(q["ready"] for q in stats["queues"])
        alive = sum(1 for w in stats["workers"] if w["alive"])
        assert int(self.wd.text("#n-queued")) == queued == 4, queued
        assert int(self.wd.text("#n-scheduled")) == stats["scheduled"] == 3
        assert int(self.wd.text("#n-dead")) == stats["dead_letters"] == 2
        assert int(self.wd.text("#n-workers")) == alive == 1
        for q in stats["queues"]:
            depth = self.wd.text('tr[data-queue="%s"] .depth' % q["name"])
            assert int(depth) == q["ready"], (q, depth)
        assert self.wd.find_all("#rate-chart"), "no chart"
        assert self.wd.text("#where").endswith(
            "redis://127.0.0.1:%d/0" % self.port), self.wd.text("#where")
        self.wd.screenshot("overview")

    def check_listing(self, state, fragment, broker_args):
        self.load(fragment)
        shown = self.ids_in("#tasks tbody tr")
        broker = {t["id"] for t in self.sluice_json(
            "ls", "--state", state, *broker_args)["tasks"]}
        assert shown == broker, (state, shown, broker)
        assert shown, state
        self.wd.screenshot("tasks-" + state)
        return shown

    def check_listings(self):
        queued = self.check_listing("queued", "#/tasks/queued?queue=idle",
                                    ["idle"])
        assert queued == set(self.tasks["queued"] + [self.tasks["hostile"]])
        # The hostile argument is on the page as text, not as an element.
        assert not self.wd.find_all("#injected")
        assert "<img src=x id=injected" in self.wd.text("#tasks")
        assert self.check_listing("scheduled", "#/tasks/scheduled", []) == \
            set(self.tasks["scheduled"])
        assert self.check_listing("retrying", "#/tasks/retrying", []) == \
            set(self.tasks["retrying"])
        assert self.check_listing("running", "#/tasks/running", []) == \
            set(self.tasks["running"])
        # A filter by task name, applied from the page.
        self.load("#/tasks/scheduled")
        self.wd.type("#filter-task", "demo.nothing")
        self.wd.click("#filter-apply")
        self.wait_loaded("#/tasks/scheduled?task=demo.nothing")
        assert self.wd.find_all("#empty")

    def check_task_page(self):
        retrying = self.tasks["retrying"][0]
        self.load("#/")
        self.wd.type("#find-id", retrying)
        self.wd.click("#find-go")
        self.wait_loaded("#/task/" + retrying)
        assert self.wd.text("#task-state") == "retrying"
        assert "demo.fail fails on every attempt" in self.wd.text("main")
        self.wd.screenshot("task-retrying")

    def check_dead_letters(self):
        self.load("#/dead")
        entries = self.sluice_json("dlq", "list")["entries"]
        shown = self.ids_in("#dead tbody tr")
        assert shown == {e["entry_id"] for e in entries}, (shown, entries)
        count = self.wd.text('tr[data-reason="non_retryable"] .count')
        assert int(count) == len(entries) == 2
        self.wd.screenshot("dead")
        # The task page of a dead letter shows its whole message.
        first = entries[0]
        self.load("#/task/%s?entry=%s" % (first["task_id"], first["entry_id"]))
        assert self.wd.text("#task-state") == "dead_lettered"
        assert "demo.fatal fails without retry" in self.wd.text("main")
        self.wd.screenshot("task-dead")

    def enter_token(self):
        self.wd.type("#token", TOKEN)
        self.wd.js("document.getElementById('token').blur();")

    def check_writes_need_the_token(self):
        self.wd.js("sessionStorage.clear();")
        self.load("")
        self.wd.click('tr[data-queue="work"] button.pause')
        wait_for("the refusal to be shown", lambda: "give the token" in
                 self.wd.text("#notice"))
        assert not self.queue_paused("work")
        self.wd.screenshot("refused-without-token")

    def queue_paused(self, name):
        for q in self.sluice_json("stats")["queues"]:
            if q["name"] == name:
                return q["paused"]
        raise AssertionError("no queue " + name)

    def check_replay_by_clicking(self):
        self.load("#/dead")
        self.enter_token()
        entries = self.sluice_json("dlq", "list")["entries"]
        target = entries[0]
        row = 'tr[data-entry="%s"]' % target["entry_id"]
        self.wd.click(row + " button.replay")
        wait_for("the confirmation", lambda: self.wd.js(
            "return document.getElementById('confirm').open;"))
        assert target["task_id"] in self.wd.text("#confirm-text")
        self.wd.screenshot("replay-confirm")
        self.wd.click("#confirm-ok")
        wait_for("the replay to be reported", lambda: "replayed task" in
                 self.wd.text("#notice"))
        # In the broker: the entry is gone, and the task ran again (it
        # fails for good again, so it is buried as a new entry).
        left = {e["entry_id"] for e in self.sluice_json("dlq", "list")[
            "entries"]}
        assert target["entry_id"] not in left
        wait_for("the replayed task to be buried again", lambda: any(
            e["task_id"] == target["task_id"] and
            e["entry_id"] != target["entry_id"]
            for e in self.sluice_json("dlq", "list")["entries"]))
        self.wd.screenshot("after-replay")

    def check_pause_by_clicking(self):
        self.load("")
        assert not self.queue_paused("work")
        self.wd.click('tr[data-queue="work"] button.pause')
        wait_for("the pause to be reported", lambda: "paused queue work" in
                 self.wd.text("#notice"))
        assert self.queue_paused("work")
        wait_for("the page to show the queue paused", lambda: self.wd.text(
            'tr[data-queue="work"] .paused') == "paused")
        self.wd.screenshot("after-pause")

    def check_chart_and_workers(self):
        # Samples are taken every second: wait for a point with the
        # replayed task in it (processed > 0).
        def has_work():
            rates = json.loads(self.get("/api/rates"))
            return any(p["processed"] > 0 for p in rates["points"])
        wait_for("a sample with processed tasks", has_work)
        self.load("")
        assert self.wd.find_all('#rate-chart polyline[data-series="processed"]')
        assert self.wd.text("#rate-now").startswith("last: ")
        self.wd.screenshot("overview-chart")
        self.load("#/workers")
        assert self.wd.text('tr[data-worker="w-browser"] .health') == "healthy"
        running = self.tasks["running"][0]
        assert running in self.wd.text(
            'tr[data-worker="w-browser"] .running-tasks')
        self.wd.screenshot("workers")

    def event_row(self, kind, task_id):
        rows = self.wd.find_all(
            'table#events tr[data-kind="%s"][data-task-id="%s"]'
            % (kind, task_id))
        return rows[0] if rows else None

    def check_events(self):
        """The events page lists a task's succeeded event, follows new
        ones without a reload, and links each to its task's page."""
        before = self.enqueue("demo.noop", "{}", "--queue", "work")
        wait_for("%s to succeed" % before,
                 lambda: self.state_of(before) == "succeeded")
        self.load("#/events")
        wait_for("the succeeded event of %s" % before,
                 lambda: self.event_row("succeeded", before))
        assert self.event_row("started", before)
        # A task finished while the page is open appears by its polling.
        after = self.enqueue("demo.noop", "{}", "--queue", "work")
        wait_for("the succeeded event of %s, followed" % after,
                 lambda: self.event_row("succeeded", after))
        assert self.wd.js("return document.body.dataset.loaded;") == \
            "#/events"
        assert "work" in self.wd.text(
            'table#events tr[data-kind="succeeded"][data-task-id="%s"]'
            % after)
        self.wd.screenshot("events")
        self.wd.click('table#events tr[data-kind="succeeded"]'
                      '[data-task-id="%s"] a.task-link' % after)
        self.wait_loaded("#/task/" + after)
        assert self.wd.text("#task-state") == "succeeded"

    def check_workflow_page(self):
        """A workflow's page draws its tree, each task with its state."""
        r = subprocess.run([
            WORKFLOW_PROC, "--url", "redis://:%s@127.0.0.1:%d/0" % (
                PASSWORD, self.port), "--namespace", "browser",
            "--queue", "work"], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, timeout=PATIENCE)
        assert r.returncode == 0, r.stderr.decode()
        wf = r.stdout.decode().strip()
        callback = wf + ".2"
        self.sluice("result", callback, "--wait", "90s")
        self.load("#/workflow/" + wf)
        assert self.wd.text("#workflow-id") == wf
        assert self.wd.text("#workflow-tree .wf-chord > .wf-kind") == \
            "chord (wait for all)"
        assert len(self.wd.find_all(
            '#workflow-tree li.wf-task[data-state="succeeded"]')) == 3
        assert "1 of 1 results in, 0 failed" in self.wd.text(
            "#workflow-counts")
        self.wd.screenshot("workflow")
        self.wd.click('#workflow-tree li.wf-task[data-task-id="%s"] '
                      'a.task-link' % callback)
        self.wait_loaded("#/task/" + callback)
        assert self.wd.text("#task-state") == "succeeded"

    def check_api_never_shows_the_password(self):
        """...and says how long each answer takes (a figure, not a check)."""
        for path in ("/api/overview", "/api/rates", "/api/dead",
                     "/api/tasks?state=scheduled", "/", "/app.js"):
            times = []
            for _ in range(20):
                t0 = time.monotonic()
                body = self.get(path).decode()
                times.append((time.monotonic() - t0) * 1000)
                assert PASSWORD not in body, path
            times.sort()
            log("GET %-28s median %.2f ms, max %.2f ms (20 requests)" %
                (path, times[len(times) // 2], times[-1]))

    def run(self):
        self.start_redis()
        self.start_worker()
        self.make_tasks()
        self.make_certificates()
        self.start_web()
        self.start_browser()
        t0 = time.monotonic()
        self.load("")
        log("first page load: %.0f ms" % ((time.monotonic() - t0) * 1000))
        assert self.wd.js("return location.protocol;") == "https:"
        self.check_overview()
        self.check_listings()
        self.check_task_page()
        self.check_dead_letters()
        self.check_writes_need_the_token()
        self.check_replay_by_clicking()
        # Before the pause: it stops the worker's queue.
        self.check_events()
        self.check_workflow_page()
        self.check_pause_by_clicking()
        self.check_chart_and_workers()
        self.check_api_never_shows_the_password()
        for page in self.seen_sources:
            assert PASSWORD not in page
        self.wd.close()
        self.procs.stop("web")
        self.procs.stop("worker")

    def cleanup(self):
        if getattr(self, "wd", None) is not None:
            self.wd.close()
        self.procs.stop_all()
        shutil.rmtree(self.dir, ignore_errors=True)


def find_program(*names):
    for n in names:
        path = shutil.which(n)
        if path:
            return path
    return None


def main():
    chromium = find_program("chromium", "chromium-browser")
    chromedriver = find_program("chromedriver")
    redis_server = os.environ.get("REDIS_SERVER") or find_program(
        "redis-server")
    missing = [n for n, p in (("chromium", chromium),
                              ("chromium-driver", chromedriver),
                              ("redis-server", redis_server)) if not p]
    if missing:
        log("needs %s (apt-get install %s; dev.sh installs them)" %
            (", ".join(missing), " ".join(missing)))
        return 1 if os.environ.get("CI") else 77
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    test = Test(chromium, chromedriver, redis_server)
    try:
        test.run()
        log("PASS: every check held; screenshots in", OUT)
        return 0
    except Exception:
        traceback.print_exc()
        try:
            test.wd.screenshot("failure")
        except Exception:
            pass
        for name in ("web", "worker", "chromedriver"):
            try:
                log("---- %s log:\n%s" % (name, test.procs.log_of(name)[-4000:]))
            except Exception:
                pass
        return 1
    finally:
        test.cleanup()


if __name__ == "__main__":
    sys.exit(main())

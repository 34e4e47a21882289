"""Python producers and the C worker (`sluice worker --module demo`) on a
real redis-server, in both modes: every kind of task enqueued here runs
there and its result comes back; tasks a C producer (`sluice enqueue`)
made are inspected and cancelled from here."""

import asyncio
import json
import time

import pytest

import sluice
import sluice.aio
import support

WAIT = 120000  # ms: generous, the machine is shared


@pytest.fixture(params=["fast", "reliable"])
def mode(request):
    return request.param


@pytest.fixture
def worker(build, server, namespace, mode):
    w = support.Worker(server.url, mode, namespace)
    yield w
    w.stop()


def client(server, namespace, mode, **kw):
    return sluice.Client(server.url, namespace=namespace, mode=mode, **kw)


def test_every_kind_of_task_runs_on_the_c_worker(worker, server, namespace,
                                                 mode):
    c = client(server, namespace, mode)
    now = int(time.time() * 1000)
    echo = c.enqueue("demo.echo", {"to": "world", "n": [1, 2.5, None]},
                     headers={"tenant": "acme", "traceparent":
                              "00-4bf92f3577b34da6a3ce929d0e0e4736-"
                              "00f067aa0ba902b7-01"})
    delayed = c.enqueue("demo.echo", "later", delay_ms=300)
    eta = c.enqueue("demo.echo", b"\x00\x01bin", eta_ms=now + 300)
    own, existed = c.enqueue_full("demo.echo", 42, id="order-%s" % mode)
    again = c.enqueue_full("demo.echo", 43, id="order-%s" % mode)
    flaky = c.enqueue("demo.flaky", {"fail_times": 1},
                      options=sluice.Options(max_attempts=3,
                                             initial_backoff_ms=0))
    fatal = c.enqueue("demo.fatal")
    fail = c.enqueue("demo.fail", options={"max_attempts": 2,
                                           "initial_backoff_ms": 0})
    nothing = c.enqueue("demo.noop", options={"store_result": True})
    batch = c.enqueue_batch([sluice.Request("demo.echo", i)
                             for i in range(20)])

    assert c.get_result(echo, WAIT).value == {"to": "world",
                                              "n": [1, 2.5, None]}
    assert c.get_result(delayed, WAIT).value == "later"
    got = c.get_result(eta, WAIT)
    assert got.value == b"\x00\x01bin" and got.started_at >= now + 300
    assert not existed and again == (own, True)
    assert c.get_result(own, WAIT).value == 42
    got = c.get_result(flaky, WAIT)
    assert got.state == "succeeded" and got.attempt == 2
    got = c.get_result(fatal, WAIT)
    assert (got.state, got.dead_letter_reason) == ("dead_lettered", "non_retryable")
    got = c.get_result(fail, WAIT)
    assert (got.state, got.dead_letter_reason, got.attempt) == (
        "dead_lettered", "max_attempts", 2)
    got = c.get_result(nothing, WAIT)
    assert got.state == "succeeded" and not got.has_value
    assert [c.get_result(i, WAIT).value for i in batch] == list(range(20))

    # The dead letters, listed and one replayed: it runs (and fails) again.
    dead = c.dlq_list(task="demo.fail")
    assert [d.task_id for d in dead] == [fail]
    assert [d.task_id for d in c.dlq_list(reason="non_retryable")] == [fatal]
    assert c.dlq_replay(dead[0].entry_id) == fail
    got = c.get_result(fail, WAIT)
    assert (got.state, got.attempt) == ("dead_lettered", 2)
    assert [d.task_id for d in c.dlq_list(task="demo.fail")] == [fail]


def test_asyncio_producer_on_the_c_worker(worker, server, namespace, mode):
    async def run():
        async with sluice.aio.Client(server.url, namespace=namespace,
                                     mode=mode) as c:
            ids = [await c.enqueue("demo.echo", i, delay_ms=100 * (i % 2))
                   for i in range(6)]
            ids += await c.enqueue_batch([{"task": "demo.echo", "args": "b"}])
            results = await asyncio.gather(
                *(c.get_result(i, WAIT) for i in ids))
            return [r.value for r in results]
    assert asyncio.run(run()) == [0, 1, 2, 3, 4, 5, "b"]


def test_c_producers_tasks_are_inspected_and_cancelled(build, server,
                                                       namespace, mode):
    def cli(*args):
        return support.sluice_cli(*args, url=server.url, mode=mode,
                                  namespace=namespace)

    c = client(server, namespace, mode)
    before = int(time.time() * 1000)
    later = cli("enqueue", "demo.echo", '{"a": 1}', "--delay", "1h").strip()
    queued = cli("enqueue", "demo.sleep", '{"ms": 1}', "-q", "idle").strip()
    got = c.inspect(later)
    assert (got.state, got.task, got.queue) == ("scheduled", "demo.echo",
                                                "default")
    assert before + 3600000 <= got.due_at <= before + 3600000 + 120000
    assert c.cancel(later) == "removed"
    assert c.inspect(later).state == "cancelled"
    record = json.loads(cli("inspect", later, "--json"))
    assert record["state"] == "cancelled"

    # Queued, not yet taken: revoked; a worker then skips it.
    assert c.cancel(queued) == "revoked"
    w = support.Worker(server.url, mode, namespace, queues=("idle",))
    try:
        assert c.get_result(queued, WAIT).state == "cancelled"
    finally:
        w.stop()


def test_the_readme_example_runs(build, server):
    """README's Python example, as written but for the server's URL, on a
    C worker of the namespace and mode it uses."""
    with open(support.os.path.join(support.SRCDIR, "README.md")) as f:
        readme = f.read()
    code = readme.split("### Python\n", 1)[1].split("```python\n", 1)[1]
    code = code.split("```", 1)[0]
    assert "sluice.Client(" in code
    w = support.Worker(server.url, "reliable", "sluice")
    try:
        out = support.subprocess.run(
            [support.sys.executable, "-c",
             code.replace("redis://127.0.0.1:6379/0", server.url)],
            cwd=support.os.path.join(support.SRCDIR, "clients", "python"),
            capture_output=True, timeout=120)
    finally:
        w.stop()
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode() == "{'to': 'world'}\n"


def _replay_cases():
    p = sluice.protocol
    full = p.encode_envelope(
        "m1", "t.m", "default", p.pack_args({"k": [1, "x"]}), 3, 1700000000000,
        1700000005000, p.Options(max_attempts=4, initial_backoff_ms=0,
                                 multiplier=1.5, max_backoff_ms=10,
                                 jitter=True, timeout_ms=20, expires_at=30,
                                 store_result=False, result_ttl_ms=40,
                                 dead_letter=True),
        {"z": "1", "a": "2"}, 1700000001000,
        ["line %d" % i for i in range(12)])
    unknown = msgpack_pack({"v": 1, "id": "u1", "task": "t.u", "queue": "uq",
                            "attempt": 2, "later": {"field": [1]},
                            "opts": {"max_attempts": 0, "multiplier": 0.0,
                                     "future": True}})
    return {
        "msgpack with every field": full,
        "msgpack with unknown keys and unset options": unknown,
        "json": b' {"v":1,"id":"j1","task":"t.j","queue":"default",'
                b'"args":[1,2.5,{"$bin":"AAE="},"x",{"n":null}],'
                b'"attempt":4,"enqueued_at":1700000000000,'
                b'"opts":{"max_attempts":5,"multiplier":2,"jitter":false},'
                b'"headers":{"b":"1","a":"2"},"history":["e1"],'
                b'"extra":{"k":[1]}}',
        "malformed": b"\xc1\x00",
        "a field of the wrong type": msgpack_pack(
            {"v": 1, "id": "w1", "task": "t.w", "queue": "default",
             "attempt": "3"}),
    }


def msgpack_pack(v):
    import msgpack
    return msgpack.packb(v, use_bin_type=True)


@pytest.mark.parametrize("keep", [False, True], ids=["reset", "keep"])
def test_dlq_replay_sends_what_the_c_client_sends(build, server, mode, keep):
    """The same dead letters replayed by `sluice dlq replay` (C) and by
    this client leave the same bytes on the queue and the same record."""
    r = server.client()
    for name, payload in _replay_cases().items():
        queues = {}
        for who in ("c", "py"):
            ns = "replay-%s-%s-%s-%d" % (who, mode, keep, abs(hash(name)))
            c = client(server, ns, mode)
            c.enqueue("t.ok", queue="setup")  # records the mode
            eid = r.xadd("{%s}:dlq" % ns, {
                "payload": payload, "reason": "max_attempts",
                "source": "default", "deliveries": 1, "at": 1,
                "task_id": "tid-1", "task": "t.x"}).decode()
            r.hincrby("{%s}:dlq:count" % ns, "max_attempts", 1)
            if who == "c":
                support.sluice_cli("dlq", "replay", eid,
                                   *(["--keep-attempt"] if keep else []),
                                   url=server.url, mode=mode, namespace=ns)
            else:
                c.dlq_replay(eid, keep_attempt=keep)
            assert c.dlq_list() == [], name
            got = {}
            for key in r.keys("{%s}:[qs]:*" % ns):
                q = key.decode().split(":", 2)[2]
                if q != "setup":
                    got[q] = (r.lrange(key, 0, -1) if mode == "fast" else
                              [f[b"p"] for _, f in r.xrange(key)])
            recs = []
            for key in r.keys("{%s}:r:*" % ns):
                raw = r.get(key)
                res = sluice.protocol.decode_record(raw[1:], "x")
                # Everything but the time it was written.
                recs.append((key.decode().split(":", 2)[2], raw[:1],
                             res.state, res.task, res.queue, res.attempt))
            queues[who] = (got, recs)
        assert queues["py"] == queues["c"], name


def test_inspect_says_what_sluice_inspect_says(worker, server, namespace,
                                               mode):
    """inspect here and `sluice inspect --json` (the C client) agree on
    tasks in every place: a record, the schedule (deferred, retrying,
    delayed), the dead letters without a record."""
    c = client(server, namespace, mode)
    r = server.client()

    def cli_inspect(id):
        return json.loads(support.sluice_cli("inspect", id, "--json",
                                             url=server.url, mode=mode,
                                             namespace=namespace))

    deferred = c.enqueue("nobody.knows")
    retrying = c.enqueue("demo.fail", options={"initial_backoff_ms": 600000,
                                               "max_backoff_ms": 600000})
    delayed = c.enqueue("demo.echo", 1, delay_ms=3600000)
    dead = c.enqueue("demo.fatal")
    done = c.enqueue("demo.echo", {"a": [1]})
    assert c.get_result(dead, WAIT).state == "dead_lettered"
    assert c.get_result(done, WAIT).state == "succeeded"
    support.wait_until(lambda: r.zscore("{%s}:schedule" % namespace,
                                        deferred) is not None,
                       what="the deferral")
    def state_of(id):
        # Until its first attempt ends, a task without a record is in its
        # queue or running, where inspect finds nothing yet.
        try:
            return c.inspect(id).state
        except sluice.NotFound:
            return None

    support.wait_until(lambda: state_of(retrying) == "retrying",
                       what="the retry")
    r.delete("{%s}:r:%s" % (namespace, dead))  # found among dead letters
    r.delete("{%s}:r:%s" % (namespace, deferred))
    for id in (deferred, retrying, delayed, dead, done):
        mine, theirs = c.inspect(id), cli_inspect(id)
        for field, key in (("id", "id"), ("state", "state"), ("task", "task"),
                           ("queue", "queue"), ("attempt", "attempt"),
                           ("worker", "worker"), ("error", "error"),
                           ("dead_letter_reason", "dead_letter_reason"),
                           ("enqueued_at", "enqueued_at"),
                           ("started_at", "started_at"),
                           ("finished_at", "finished_at"),
                           ("due_at", "due_at")):
            want = theirs.get(key)
            assert (getattr(mine, field) or None) == want, (id, field)
        if theirs.get("result") is not None:
            assert mine.value == theirs["result"]

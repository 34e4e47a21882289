"""The client against a real redis-server (no worker): where each kind of
enqueue lands, results, inspect, cancel, dead letters, and the typed
errors."""

import asyncio
import threading
import time

import msgpack
import pytest

import sluice
import sluice.aio
from sluice import protocol as p
import support


@pytest.fixture(params=["fast", "reliable"])
def mode(request):
    return request.param


def ready(server, ns, mode, queue="default"):
    """The payloads ready on a queue, oldest first, as a worker sees them."""
    r = server.client()
    if mode == "fast":
        return list(reversed(r.lrange("{%s}:q:%s" % (ns, queue), 0, -1)))
    return [f[b"p"] for _, f in r.xrange("{%s}:s:%s" % (ns, queue))]


def test_ready_enqueue_lands_on_the_queue(server, namespace, mode):
    c = sluice.Client(server.url, namespace=namespace, mode=mode)
    id = c.enqueue("demo.echo", {"to": "world"}, headers={"tenant": "acme"},
                   options=sluice.Options(max_attempts=5, timeout_ms=3000))
    [payload] = ready(server, namespace, mode)
    env = msgpack.unpackb(payload)
    assert env["id"] == id and env["task"] == "demo.echo"
    assert env["args"] == {"to": "world"} and env["attempt"] == 1
    assert env["opts"] == {"max_attempts": 5, "timeout_ms": 3000}
    assert env["headers"] == {"tenant": "acme"}
    r = server.client()
    assert r.sismember("{%s}:queues" % namespace, "default")
    assert r.hget("{%s}:meta" % namespace, "mode") == mode.encode()


def test_delayed_and_eta_go_to_the_schedule(server, namespace, mode):
    c = sluice.Client(server.url, namespace=namespace, mode=mode)
    before = int(time.time() * 1000)
    a = c.enqueue("t.ok", delay_ms=60000)
    b = c.enqueue("t.ok", eta_ms=before + 120000, queue="later")
    past = c.enqueue("t.ok", eta_ms=before - 1000)  # due: queued at once
    r = server.client()
    due_a = r.zscore("{%s}:schedule" % namespace, a)
    assert before + 60000 <= due_a <= before + 60000 + 60000
    assert r.zscore("{%s}:schedule" % namespace, b) == before + 120000
    assert r.hget("{%s}:sched:queue" % namespace, b) == b"later"
    assert r.zscore("{%s}:schedule" % namespace, past) is None
    assert len(ready(server, namespace, mode)) == 1
    got = c.inspect(a)
    assert got.state == "scheduled" and got.due_at == due_a
    assert got.task == "t.ok" and got.queue == "default"


def test_caller_id_is_idempotent(server, namespace, mode):
    c = sluice.Client(server.url, namespace=namespace, mode=mode)
    assert c.enqueue_full("t.ok", id="order-42") == ("order-42", False)
    assert c.enqueue_full("t.ok", id="order-42") == ("order-42", True)
    # In one batch too: the second claim of an id writes nothing.
    ids = c.enqueue_batch([{"task": "t.ok", "id": "o-1"},
                           {"task": "t.ok", "id": "o-1"}])
    assert ids == ["o-1", "o-1"]
    assert len(ready(server, namespace, mode)) == 2
    ttl = server.client().pttl("{%s}:dedup:order-42" % namespace)
    assert 0 < ttl <= p.DEFAULT_DEDUP_TTL_MS


def test_batch_keeps_order_per_queue(server, namespace, mode):
    c = sluice.Client(server.url, namespace=namespace, mode=mode)
    ids = c.enqueue_batch(
        [sluice.Request("t.ok", i, queue="q%d" % (i % 2)) for i in range(10)])
    for q in (0, 1):
        got = [msgpack.unpackb(x)["id"]
               for x in ready(server, namespace, mode, "q%d" % q)]
        assert got == ids[q::2]


def test_track_state_writes_a_pending_record(server, namespace, mode):
    c = sluice.Client(server.url, namespace=namespace, mode=mode,
                      track_state=True)
    id = c.enqueue("t.ok", options={"result_ttl_ms": 50000})
    raw = server.client().get("{%s}:r:%s" % (namespace, id))
    assert raw[:1] == b"P"
    assert 0 < server.client().pttl("{%s}:r:%s" % (namespace, id)) <= 50000
    got = c.inspect(id)
    assert got.state == "queued" and got.task == "t.ok"
    s = c.enqueue("t.ok", delay_ms=60000)
    assert c.inspect(s).state == "scheduled" and c.inspect(s).due_at > 0


def final_record(id, state="succeeded", value=None):
    return b"F" + p.encode_record(p.Result(id=id, state=state, value=value,
                                           has_value=value is not None))


def test_get_result_is_woken_by_the_notification(server, namespace):
    # A safety poll far longer than the test: only the PUBLISH can wake it.
    c = sluice.Client(server.url, namespace=namespace,
                      result_poll_interval_ms=600000)
    r = server.client()
    key = "{%s}:r:n1" % namespace

    def finish():
        support.wait_until(lambda: r.pubsub_numsub(
            "{%s}:done:n1" % namespace)[0][1] == 1, what="the subscription")
        r.set(key, final_record("n1", value=[1, "two"]))
        r.publish("{%s}:done:n1" % namespace, "F")

    t = threading.Thread(target=finish)
    t.start()
    got = c.get_result("n1", timeout_ms=120000)
    t.join()
    assert got.state == "succeeded" and got.value == [1, "two"]


def test_get_result_polls_when_the_notification_is_lost(server, namespace):
    c = sluice.Client(server.url, namespace=namespace,
                      result_poll_interval_ms=100)
    r = server.client()
    r.set("{%s}:r:n2" % namespace, b"P" + p.encode_record(
        p.Result(id="n2", state="running")))

    def finish():
        support.wait_until(lambda: r.pubsub_numsub(
            "{%s}:done:n2" % namespace)[0][1] == 1, what="the subscription")
        r.set("{%s}:r:n2" % namespace, final_record("n2", "failed"))

    t = threading.Thread(target=finish)
    t.start()
    assert c.get_result("n2", timeout_ms=120000).state == "failed"
    t.join()


def test_get_result_times_out_with_the_last_state(server, namespace):
    c = sluice.Client(server.url, namespace=namespace,
                      result_poll_interval_ms=50)
    server.client().set("{%s}:r:n3" % namespace, b"P" + p.encode_record(
        p.Result(id="n3", state="retrying")))
    with pytest.raises(sluice.Timeout, match="retrying"):
        c.get_result("n3", timeout_ms=200)


def test_cancel_removes_scheduled_and_revokes_queued(server, namespace,
                                                     mode):
    c = sluice.Client(server.url, namespace=namespace, mode=mode)
    s = c.enqueue("t.ok", delay_ms=60000)
    q = c.enqueue("t.ok")
    assert c.cancel(s) == "removed"
    assert c.inspect(s).state == "cancelled"
    assert c.get_result(s, timeout_ms=0).error == "cancelled before it ran"
    r = server.client()
    assert r.zscore("{%s}:schedule" % namespace, s) is None
    assert r.hget("{%s}:sched:payload" % namespace, s) is None
    assert c.cancel(q) == "revoked"
    expiry = r.zscore("{%s}:revoked" % namespace, q)
    assert expiry > time.time() * 1000
    assert r.zscore("{%s}:revoked:seq" % namespace, q) is not None
    with pytest.raises(sluice.NotFound):
        c.inspect(q)  # queued, without a record


def add_dead_letter(server, ns, payload, **fields):
    r = server.client()
    f = {"payload": payload, "reason": "max_attempts", "source": "default",
         "deliveries": 1, "at": 1700000000000}
    f.update(fields)
    eid = r.xadd("{%s}:dlq" % ns, f)
    if "task_id" in fields:
        r.hset("{%s}:dlq:ids" % ns, fields["task_id"], eid)
    r.hincrby("{%s}:dlq:count" % ns, f["reason"], 1)
    return eid.decode()


def test_dead_letters_list_filter_and_replay(server, namespace, mode):
    c = sluice.Client(server.url, namespace=namespace, mode=mode)
    env = p.encode_envelope("d1", "t.fail", "default", p.pack_args([7]), 3,
                            1700000000000, 0, p.Options(max_attempts=3),
                            {"tenant": "acme"}, 0, ["boom", "boom"])
    e1 = add_dead_letter(server, namespace, env, task_id="d1", task="t.fail",
                         detail="boom")
    e2 = add_dead_letter(server, namespace, b"\xc1junk", reason="malformed")
    assert [d.entry_id for d in c.dlq_list()] == [e1, e2]
    assert [d.entry_id for d in c.dlq_list(reason="malformed")] == [e2]
    assert [d.entry_id for d in c.dlq_list(task="t.fail")] == [e1]
    assert [d.entry_id for d in c.dlq_list(after=e1)] == [e2]
    assert len(c.dlq_list(limit=1)) == 1
    # Every reason of the one list is a filter; another is refused, as by
    # `sluice dlq list --reason`.
    for reason in sluice.DEAD_LETTER_REASONS:
        c.dlq_list(reason=reason)
    with pytest.raises(sluice.InvalidInput, match="snoozed_too_often"):
        c.dlq_list(reason="nope")
    got = c.inspect("d1")
    assert got.state == "dead_lettered" and got.dead_letter_reason == "max_attempts"
    assert got.attempt == 3 and got.error == "boom"

    assert c.dlq_replay(e1) == "d1"
    [back] = ready(server, namespace, mode)
    # Attempts restored; id, args, options, headers and history kept.
    assert back == p.encode_envelope(
        "d1", "t.fail", "default", p.pack_args([7]), 1, 1700000000000, 0,
        p.Options(max_attempts=3), {"tenant": "acme"}, 0, ["boom", "boom"])
    assert c.inspect("d1").state == "queued"
    r = server.client()
    assert r.hget("{%s}:dlq:count" % namespace, "max_attempts") is None
    # A malformed one goes back byte for byte.
    assert c.dlq_replay(e2) == "replay:" + e2
    assert ready(server, namespace, mode)[1] == b"\xc1junk"
    assert c.dlq_list() == []
    with pytest.raises(sluice.NotFound):
        c.dlq_replay(e1)


def test_full_when_redis_is_out_of_memory(server, namespace):
    c = sluice.Client(server.url, namespace=namespace)
    c.enqueue("t.ok")  # the mode is recorded before memory runs out
    r = server.client()
    r.config_set("maxmemory", "1")
    try:
        with pytest.raises(sluice.Full, match="out of memory"):
            c.enqueue("t.ok")
        with pytest.raises(sluice.Full):
            asyncio.run(_aio_enqueue(server.url, namespace))
    finally:
        r.config_set("maxmemory", "0")
    assert len(ready(server, namespace, "reliable")) == 1


def test_default_mode_is_reliable(server, namespace):
    # As for the C library and `sluice worker`: a producer with default
    # settings that reaches a fresh namespace first records "reliable", so
    # a worker with its defaults is not refused.
    assert sluice.Client(redis=server.client()).settings.mode == "reliable"
    for make in ("sync", "asyncio"):
        ns = namespace + "-" + make
        if make == "sync":
            sluice.Client(server.url, namespace=ns).enqueue("t.ok")
        else:
            asyncio.run(_aio_enqueue(server.url, ns))
        assert server.client().hget("{%s}:meta" % ns, "mode") == b"reliable"
        assert len(ready(server, ns, "reliable")) == 1


async def _aio_enqueue(url, ns, **settings):
    c = sluice.aio.Client(url, namespace=ns, **settings)
    try:
        return await c.enqueue("t.ok")
    finally:
        await c.close()


def test_unavailable_when_nothing_listens():
    url = "redis://127.0.0.1:%d/0" % support.free_port()
    with pytest.raises(sluice.Unavailable):
        sluice.Client(url).enqueue("t.ok")
    with pytest.raises(sluice.Unavailable):
        asyncio.run(_aio_enqueue(url, "x"))


def test_malformed_record_is_a_malformed_reply(server, namespace):
    c = sluice.Client(server.url, namespace=namespace)
    server.client().set("{%s}:r:m1" % namespace, b"F\x93\x01\x02")
    with pytest.raises(sluice.MalformedReply):
        c.inspect("m1")
    with pytest.raises(sluice.MalformedReply):
        c.get_result("m1", timeout_ms=1000)


def test_wrong_mode_is_refused(server, namespace, mode):
    other = "reliable" if mode == "fast" else "fast"
    sluice.Client(server.url, namespace=namespace, mode=other).enqueue("t.ok")
    with pytest.raises(sluice.WrongMode, match=other):
        sluice.Client(server.url, namespace=namespace, mode=mode).enqueue(
            "t.ok")
    with pytest.raises(sluice.WrongMode):
        asyncio.run(_aio_enqueue(server.url, namespace, mode=mode))


def test_scripts_are_loaded_again_after_a_flush(server, namespace):
    c = sluice.Client(server.url, namespace=namespace, mode="fast")
    c.enqueue("t.ok")
    server.client().script_flush()
    c.enqueue("t.ok")
    assert len(ready(server, namespace, "fast")) == 2


def test_asyncio_client_does_what_the_sync_one_does(server, namespace, mode):
    async def run():
        async with sluice.aio.Client(server.url, namespace=namespace,
                                     mode=mode,
                                     result_poll_interval_ms=600000) as c:
            a = await c.enqueue("t.ok", [1], delay_ms=60000)
            b, existed = await c.enqueue_full("t.ok", id="x1")
            assert not existed
            assert (await c.enqueue_full("t.ok", id="x1"))[1]
            assert (await c.inspect(a)).state == "scheduled"
            assert await c.cancel(a) == "removed"
            assert (await c.get_result(a, timeout_ms=1000)).state == \
                "cancelled"
            assert await c.cancel(b) == "revoked"
            ids = await c.enqueue_batch([{"task": "t.ok"}] * 3)
            assert len(set(ids)) == 3

            r = server.client()

            def finish():
                support.wait_until(lambda: r.pubsub_numsub(
                    "{%s}:done:w1" % namespace)[0][1] == 1,
                    what="the subscription")
                r.set("{%s}:r:w1" % namespace, final_record("w1", value=5))
                r.publish("{%s}:done:w1" % namespace, "F")
            t = threading.Thread(target=finish)
            t.start()
            got = await c.get_result("w1", timeout_ms=120000)
            t.join()
            assert got.value == 5
            with pytest.raises(sluice.Timeout):
                await c.get_result("never", timeout_ms=100)
            return await c.dlq_list()
    assert asyncio.run(run()) == []
    assert len(ready(server, namespace, mode)) == 4


def test_mode_is_checked_on_every_new_connection(server, namespace):
    meta = "{%s}:meta" % namespace
    r = server.client()
    c = sluice.Client(server.url, namespace=namespace, mode="fast")
    a = sluice.aio.Client(server.url, namespace=namespace, mode="fast")

    async def aio_enqueue():
        return await a.enqueue("t.ok")

    loop = asyncio.new_event_loop()
    try:
        c.enqueue("t.ok")
        loop.run_until_complete(aio_enqueue())
        # A restart without persistence: the record is gone, and the next
        # connection records it again.
        r.delete(meta)
        r.client_kill_filter(_type="normal", skipme=True)
        c.enqueue("t.ok")
        assert r.hget(meta, "mode") == b"fast"
        # Another mode recorded meanwhile: refused once reconnected.
        r.hset(meta, "mode", "reliable")
        r.client_kill_filter(_type="normal", skipme=True)
        with pytest.raises(sluice.WrongMode):
            c.enqueue("t.ok")
        with pytest.raises(sluice.WrongMode):
            c.enqueue("t.ok")  # not left connected
        # (redis.asyncio hands out a killed pooled connection once before it
        # notices: drop them instead.)
        loop.run_until_complete(a.redis.connection_pool.disconnect())
        with pytest.raises(sluice.WrongMode):
            loop.run_until_complete(aio_enqueue())
        with pytest.raises(sluice.WrongMode):
            loop.run_until_complete(aio_enqueue())
    finally:
        loop.run_until_complete(a.close())
        loop.close()
    assert len(ready(server, namespace, "fast")) == 3


def _meta(server, ns):
    return server.client().hgetall("{%s}:meta" % ns)


def test_layout_and_scripts_recorded_as_the_c_client_does(server, namespace):
    # A new namespace: the layout version, the script set and the mode; one
    # an older Sluice made (a mode only): marked version 1.
    sluice.Client(server.url, namespace=namespace).enqueue("t.ok")
    assert _meta(server, namespace) == {
        b"mode": b"reliable", b"layout": b"1",
        b"scripts": p.SCRIPTS.encode()}
    old = namespace + "-old"
    server.client().hset("{%s}:meta" % old, "mode", "fast")
    asyncio.run(_aio_enqueue(server.url, old, mode="fast"))
    assert _meta(server, old) == {
        b"mode": b"fast", b"layout": b"1", b"scripts": p.SCRIPTS.encode()}


def test_a_newer_layout_or_other_scripts_are_refused(server, namespace):
    r = server.client()
    newer = namespace + "-newer"
    r.hset("{%s}:meta" % newer, mapping={"mode": "reliable", "layout": "2"})
    for enqueue in (lambda: sluice.Client(server.url, namespace=newer)
                    .enqueue("t.ok"),
                    lambda: asyncio.run(_aio_enqueue(server.url, newer))):
        with pytest.raises(sluice.WrongVersion) as e:
            enqueue()
        assert "layout version 2, newer than this program's (1): upgrade " \
            "this program" in str(e.value)
    # Refused before anything was written.
    assert _meta(server, newer) == {b"mode": b"reliable", b"layout": b"2"}
    assert r.llen("{%s}:q:default" % newer) == 0
    assert r.xlen("{%s}:s:default" % newer) == 0

    other = namespace + "-other"
    r.hset("{%s}:meta" % other, mapping={
        "mode": "reliable", "layout": "1",
        "scripts": "%d:%s" % (p.SCRIPTS_VERSION, "0" * 40)})
    with pytest.raises(sluice.WrongVersion) as e:
        sluice.Client(server.url, namespace=other).enqueue("t.ok")
    assert p.SCRIPTS_SHA1 in str(e.value)

    ahead = namespace + "-ahead"
    later = "%d:%s" % (p.SCRIPTS_VERSION + 1, "0" * 40)
    r.hset("{%s}:meta" % ahead, mapping={
        "mode": "reliable", "layout": "1", "scripts": later})
    sluice.Client(server.url, namespace=ahead).enqueue("t.ok")
    assert _meta(server, ahead)[b"scripts"] == later.encode()

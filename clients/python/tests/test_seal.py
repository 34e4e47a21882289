"""Sealing (sluice/seal.py): the keyring file and its refusals, the wire
form of sealed args and results (the shared test vector of PROTOCOL.md,
checked byte for byte by the C and Node tests too), the associated data,
and on a real redis-server: every enqueue path sealed (no marker byte
anywhere in the namespace), results opened, inspect and dead letters, and
a message sealed by the Node client opened here."""

import asyncio
import json
import os
import shutil
import subprocess
import time

import msgpack
import pytest

import sluice
import sluice.aio
import support
from sluice import protocol as p
from sluice import seal

# The shared vector (tests/test-seal.c and clients/node/test/seal.test.js
# check the same bytes).
VECTOR_KEY = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="
VECTOR_NONCE = bytes(range(12))
VECTOR_PLAIN = bytes.fromhex("91a568656c6c6f")
VECTOR_ARGS = ("c423000102030405060708090a0bcdf735c2265984deddb58164b650686816"
               "28ac6802125b")
VECTOR_RESULT = ("c423000102030405060708090a0bcdf735c226598408f84295840dabb6a1"
                 "0e72f2b35a2918")
KEY2 = "3q2+7wABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhs="
MARKER = "MARKER-7f3a9c-do-not-store-in-clear"


def write(path, text, mode=0o600):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return str(path)


def ring_text(*ids, current=None, keys=(VECTOR_KEY, KEY2)):
    lines = ["# a test keyring"] + ["key %s %s" % (i, k)
                                    for i, k in zip(ids, keys)]
    return "\n".join(lines + ["current %s" % (current or ids[-1]), ""])


@pytest.fixture
def ring():
    return sluice.Keyring.from_text(ring_text("k1"), "test")


# ---- The keyring file --------------------------------------------------------

def test_keyring_loads_a_good_file(tmp_path, monkeypatch):
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    path = write(tmp_path / "ring", "# keys\n\n  key\t2026-11  %s  \n"
                 "key 2026-12 %s\r\ncurrent 2026-12\n" % (VECTOR_KEY, KEY2))
    r = sluice.Keyring.load(path)
    assert r.current == "2026-12"
    assert r.key_ids() == ["2026-11", "2026-12"]
    assert r.has_key("2026-11") and not r.has_key("2026-13")
    # Never the key material, however it is shown.
    for shown in (repr(r), str(r), repr(p.Settings(keyring=r))):
        assert VECTOR_KEY not in shown and KEY2 not in shown
    # The client option takes the path too.
    c = sluice.Client("redis://127.0.0.1:1/0", keyring=path)
    assert c.settings.keyring.current == "2026-12"


@pytest.mark.parametrize("text,line,why", [
    ("key k1 %s\nfoo bar\ncurrent k1\n" % VECTOR_KEY, 2, "a line is"),
    ("key k1\ncurrent k1\n", 1, "a key line is"),
    ("key k/1 %s\ncurrent k/1\n" % VECTOR_KEY, 1, "a key id is"),
    ("key %s %s\ncurrent k\n" % ("k" * 65, VECTOR_KEY), 1, "a key id is"),
    ("key k1 %s\n#\nkey k1 %s\ncurrent k1\n" % (VECTOR_KEY, KEY2), 3,
     "given twice"),
    ("key k1 AAAA\ncurrent k1\n", 1, "32 random bytes"),
    ("key k1 %s\ncurrent k1\n" % VECTOR_KEY[:-1], 1, "32 random bytes"),
    ("key k1 %s\ncurrent k1\n" % ("A" * 42 + "=="), 1, "32 random bytes"),
    ("key k1 %s\ncurrent k1\ncurrent k1\n" % VECTOR_KEY, 3, "second"),
    ("key k1 %s\ncurrent\n" % VECTOR_KEY, 2, "a current line is"),
])
def test_keyring_refuses_a_bad_line_naming_file_and_line(tmp_path, text,
                                                         line, why):
    path = write(tmp_path / "ring", text)
    with pytest.raises(sluice.KeyringError) as e:
        sluice.Keyring.load(path)
    assert str(e.value).startswith("keyring %s, line %d: " % (path, line))
    assert why in str(e.value)
    assert VECTOR_KEY not in str(e.value) and KEY2 not in str(e.value)


@pytest.mark.parametrize("text,why", [
    ("key k1 %s\n" % VECTOR_KEY, "no “current ID” line"),
    ("key k1 %s\ncurrent k2\n" % VECTOR_KEY, "“k2” is not among its keys"),
    ("", "no “current ID” line"),
])
def test_keyring_refuses_without_its_current_key(tmp_path, text, why):
    path = write(tmp_path / "ring", text)
    with pytest.raises(sluice.KeyringError, match=why) as e:
        sluice.Keyring.load(path)
    assert path in str(e.value) and VECTOR_KEY not in str(e.value)


def test_keyring_refuses_what_is_not_text(tmp_path):
    path = tmp_path / "ring"
    path.write_bytes(b"key k1 \xff\xfe\ncurrent k1\n")
    os.chmod(path, 0o600)
    with pytest.raises(sluice.KeyringError, match="is not text"):
        sluice.Keyring.load(str(path))
    with pytest.raises(sluice.KeyringError, match="cannot read the keyring"):
        sluice.Keyring.load(str(tmp_path / "missing"))


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o602, 0o660])
def test_keyring_readable_by_others_is_refused(tmp_path, monkeypatch, mode):
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    path = write(tmp_path / "ring", ring_text("k1"), mode)
    with pytest.raises(sluice.KeyringError) as e:
        sluice.Keyring.load(path)
    assert "chmod 600 %s" % path in str(e.value)
    assert "mode %04o" % mode in str(e.value)
    with pytest.raises(sluice.KeyringError):
        sluice.Client("redis://127.0.0.1:1/0", keyring=path)


def test_keyring_under_credentials_directory_may_be_group_readable(
        tmp_path, monkeypatch):
    creds = tmp_path / "creds"
    creds.mkdir()
    path = write(creds / "sluice-keyring", ring_text("k1"), 0o640)
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    assert sluice.Keyring.load(path).current == "k1"
    # Only under it: the same file elsewhere is still refused.
    other = write(tmp_path / "ring", ring_text("k1"), 0o640)
    with pytest.raises(sluice.KeyringError, match="chmod 600"):
        sluice.Keyring.load(other)
    # A directory whose name only starts like it is not under it.
    lookalike = tmp_path / "creds-x"
    lookalike.mkdir()
    near = write(lookalike / "ring", ring_text("k1"), 0o640)
    with pytest.raises(sluice.KeyringError, match="chmod 600"):
        sluice.Keyring.load(near)


def test_keyring_option_must_be_a_path_or_keyring():
    with pytest.raises(sluice.KeyringError, match="path or a sluice.Keyring"):
        sluice.Client("redis://127.0.0.1:1/0", keyring=42)


# ---- The wire form -----------------------------------------------------------

def test_shared_vector_args_and_result():
    r = sluice.Keyring.from_text("key k1 %s\ncurrent k1\n" % VECTOR_KEY)
    got, label = r._seal(seal.ARGS, "t-1", "demo.echo", "default",
                         VECTOR_PLAIN, VECTOR_NONCE)
    assert (got.hex(), label) == (VECTOR_ARGS, "aes-256-gcm:k1")
    got, _ = r._seal(seal.RESULT, "t-1", "demo.echo", "default",
                     VECTOR_PLAIN, VECTOR_NONCE)
    assert got.hex() == VECTOR_RESULT
    assert seal.open_sealed(r, seal.ARGS, label, "t-1", "demo.echo",
                            "default", bytes.fromhex(VECTOR_ARGS)) == \
        VECTOR_PLAIN
    assert seal.open_sealed(r, seal.RESULT, label, "t-1", "demo.echo",
                            "default", bytes.fromhex(VECTOR_RESULT)) == \
        VECTOR_PLAIN


def test_seal_open_round_trip_with_a_new_nonce_each_time(ring):
    for plain in (b"\xc0", VECTOR_PLAIN, b"\x01" * 300, b"\x02" * 70000):
        a, label = ring.seal(seal.ARGS, "id", "t.x", "q", plain)
        b, _ = ring.seal(seal.ARGS, "id", "t.x", "q", plain)
        assert a != b  # a new nonce: the same args do not look the same
        assert a[0] == (0xC4 if len(plain) < 228 else
                        0xC5 if len(plain) < 65508 else 0xC6)
        assert seal.bin_body(a) is not None
        assert seal.open_sealed(ring, seal.ARGS, label, "id", "t.x", "q",
                                a) == plain


def test_associated_data_binds_id_task_queue_and_domain(ring):
    sealed, label = ring.seal(seal.ARGS, "t-1", "demo.echo", "default",
                              VECTOR_PLAIN)
    for where in [("t-2", "demo.echo", "default"),
                  ("t-1", "demo.other", "default"),
                  ("t-1", "demo.echo", "other")]:
        with pytest.raises(sluice.SealError,
                           match="cannot decrypt: authentication failed"):
            seal.open_sealed(ring, seal.ARGS, label, *where, sealed)
    with pytest.raises(sluice.SealError, match="authentication failed"):
        seal.open_sealed(ring, seal.RESULT, label, "t-1", "demo.echo",
                         "default", sealed)
    flipped = sealed[:-1] + bytes([sealed[-1] ^ 1])
    with pytest.raises(sluice.SealError, match="authentication failed"):
        seal.open_sealed(ring, seal.ARGS, label, "t-1", "demo.echo",
                         "default", flipped)


def test_unknown_key_and_algorithm(ring):
    sealed, label = ring.seal(seal.ARGS, "i", "t.t", "q", b"\xc0")
    other = sluice.Keyring.from_text(ring_text("k1", "k2", current="k2",
                                               keys=(KEY2, VECTOR_KEY)))
    # k1 of the other ring is another key: authentication fails.
    with pytest.raises(sluice.SealError, match="authentication failed"):
        seal.open_sealed(other, seal.ARGS, label, "i", "t.t", "q", sealed)
    only2 = sluice.Keyring.from_text("key k2 %s\ncurrent k2\n" % KEY2)
    with pytest.raises(sluice.SealError,
                       match="cannot decrypt: key k1 unknown"):
        seal.open_sealed(only2, seal.ARGS, label, "i", "t.t", "q", sealed)
    with pytest.raises(sluice.SealError,
                       match="cannot decrypt: key k1 unknown .*no keyring"):
        seal.open_sealed(None, seal.ARGS, label, "i", "t.t", "q", sealed)
    with pytest.raises(sluice.SealError,
                       match="cannot decrypt: algorithm chacha unknown"):
        seal.open_sealed(ring, seal.ARGS, "chacha:k1", "i", "t.t", "q",
                         sealed)


def test_sealed_envelope_bytes_and_the_clear_form_unchanged(ring):
    s = p.Settings(keyring=ring)
    req = p.Request("demo.echo", ["hello"], id="t-1", headers={"h": "v"})
    sealed = p.prepare(s, req, 1000).payload
    clear = p.prepare(p.Settings(), req, 1000).payload
    m = msgpack.unpackb(sealed, raw=False)
    assert m["v"] == 2 and list(m)[-1] == "seal"
    assert m["seal"] == "aes-256-gcm:k1"
    assert seal.open_sealed(ring, seal.ARGS, m["seal"], "t-1", "demo.echo",
                            "default", seal.bin_header(len(m["args"]))
                            + m["args"]) == VECTOR_PLAIN
    # Everything but v, args and seal as in clear, in the same order.
    c = msgpack.unpackb(clear, raw=False)
    assert [k for k in m if k != "seal"] == list(c)
    assert {k: v for k, v in m.items() if k not in ("v", "args", "seal")} \
        == {k: v for k, v in c.items() if k not in ("v", "args")}
    # Without a keyring: version 1, exactly the encoder's bytes of before.
    assert clear == p.encode_envelope("t-1", "demo.echo", "default",
                                      p.pack_args(["hello"]), 1, 1000, 0,
                                      p.Options(), {"h": "v"})
    assert c["v"] == 1 and "seal" not in c
    # No args: nil sealed, so that the worker seals the result.
    m = msgpack.unpackb(p.prepare(s, p.Request("demo.noop", id="n"),
                                  1).payload, raw=False)
    assert seal.open_sealed(ring, seal.ARGS, m["seal"], "n", "demo.noop",
                            "default", seal.bin_header(len(m["args"]))
                            + m["args"]) == b"\xc0"


def _env(**over):
    m = {"v": 2, "id": "t-1", "task": "demo.echo", "queue": "default",
         "args": bytes.fromhex(VECTOR_ARGS)[2:], "attempt": 1,
         "seal": "aes-256-gcm:k1"}
    m.update(over)
    return msgpack.packb({k: v for k, v in m.items() if v is not None},
                         use_bin_type=True)


def test_decoder_rules_for_version_2():
    assert p.decode_envelope(_env())["seal"] == "aes-256-gcm:k1"
    assert p.decode_envelope(_env(v=1)) is None  # v1 with seal
    assert p.decode_envelope(_env(v=3)) is None
    assert p.decode_envelope(_env(v=2, seal=None)) is None  # one form each
    for bad in ("aes-256-gcm", "aes-256-gcm:", ":k1", "aes_256:k1",
                "aes-256-gcm:k/1", "aes-256-gcm:" + "k" * 65, 7):
        assert p.decode_envelope(_env(seal=bad)) is None, bad
    assert p.decode_envelope(_env(args=b"\x00" * 27)) is None
    assert p.decode_envelope(_env(args=b"\x00" * 28)) is not None
    assert p.decode_envelope(_env(args="a string")) is None
    assert p.decode_envelope(_env(args=None)) is None
    # An unknown algorithm still decodes: opening says which.
    assert p.decode_envelope(_env(seal="chacha20:k1")) is not None
    # JSON: args {"$bin": base64}.
    import base64
    js = json.dumps({"v": 2, "id": "t-1", "task": "demo.echo",
                     "queue": "default", "attempt": 1,
                     "args": {"$bin": base64.b64encode(
                         bytes.fromhex(VECTOR_ARGS)[2:]).decode()},
                     "seal": "aes-256-gcm:k1"}).encode()
    env = p.decode_envelope(js)
    assert env["args"].hex() == VECTOR_ARGS and env["v"] == 2
    assert p.decode_envelope(js.replace(b'"v": 2', b'"v": 1')) is None


def test_result_record_rules(ring):
    value, label = ring._seal(seal.RESULT, "t-1", "demo.echo", "default",
                              VECTOR_PLAIN, VECTOR_NONCE)
    rec = {"v": 2, "id": "t-1", "state": "succeeded", "task": "demo.echo",
           "queue": "default", "value": value[2:], "finished_at": 5,
           "seal": label}
    r = p.decode_record(msgpack.packb(rec, use_bin_type=True), "t-1")
    assert (r.value, r.seal, r.encrypted_with) == (None, label, "k1")
    assert p.open_result(r, ring).value == ["hello"] and r.seal is None
    for bad in ({"v": 1}, {"seal": "nope"}, {"value": b"\0" * 27},
                {"value": "text"}):
        with pytest.raises(sluice.MalformedReply):
            p.decode_record(msgpack.packb({**rec, **bad}, use_bin_type=True),
                            "t-1")
    r = p.decode_record(msgpack.packb(rec, use_bin_type=True), "t-1")
    with pytest.raises(sluice.SealError) as e:
        p.open_result(r, None)
    assert str(e.value) == ("the result of task t-1 is encrypted with key "
                            "k1: give the client the keyring")
    moved = p.decode_record(msgpack.packb({**rec, "id": "t-2"},
                                          use_bin_type=True), "t-2")
    with pytest.raises(sluice.SealError,
                       match="t-2 is sealed: cannot decrypt: authentication"):
        p.open_result(moved, ring)


# ---- On a real redis-server -----------------------------------------------------

def dump_namespace(r, ns):
    """Every byte the namespace holds, key by key, read as its type needs."""
    out = {}
    for key in r.scan_iter(match="{%s}:*" % ns, count=1000):
        t = r.type(key).decode()
        if t == "string":
            data = [r.get(key)]
        elif t == "list":
            data = r.lrange(key, 0, -1)
        elif t == "hash":
            data = [b for kv in r.hgetall(key).items() for b in kv]
        elif t == "zset":
            data = [m for m, _ in r.zrange(key, 0, -1, withscores=True)]
        elif t == "set":
            data = list(r.smembers(key))
        elif t == "stream":
            data = [b for _, f in r.xrange(key) for kv in f.items()
                    for b in kv]
        else:
            raise AssertionError("key %r of type %s" % (key, t))
        out[key] = b"\0".join(data)
    return out


def enqueue_every_way(c, marker):
    ids = [c.enqueue("demo.echo", {"secret": marker})]
    ids.append(c.enqueue("demo.echo", [marker], delay_ms=3600_000))
    ids.append(c.enqueue_full("demo.echo", marker.encode(), id="own-1")[0])
    ids += c.enqueue_batch([sluice.Request("demo.echo", [marker, i],
                                           queue="q%d" % (i % 2))
                            for i in range(3)])
    ids.append(c.enqueue("demo.echo", {"s": marker}, eta_ms=int(
        time.time() * 1000) + 3600_000, id="own-2"))
    return ids


@pytest.mark.parametrize("mode", ["fast", "reliable"])
def test_marker_appears_nowhere_in_redis(server, namespace, mode, ring):
    r = server.client()
    c = sluice.Client(server.url, namespace=namespace, mode=mode,
                      track_state=True, keyring=ring)
    ids = enqueue_every_way(c, MARKER)

    async def aio():
        a = sluice.aio.Client(server.url, namespace=namespace, mode=mode,
                              track_state=True, keyring=ring)
        try:
            return [await a.enqueue("demo.echo", MARKER),
                    (await a.enqueue_batch([{"task": "demo.echo",
                                             "args": [MARKER]}]))[0]]
        finally:
            await a.close()
    ids += asyncio.run(aio())
    dump = dump_namespace(r, namespace)
    assert len(dump) >= 5, dump.keys()  # queues, schedule, records, dedup
    for key, data in dump.items():
        assert MARKER.encode() not in data, key
    # What was written is sealed and the id, task, queue readable: inspect
    # of a scheduled one decodes it.
    assert c.inspect(ids[1]).state == "scheduled"
    assert c.inspect(ids[1]).task == "demo.echo"
    # The test can fail: without a keyring the same enqueues show it.
    clear_ns = namespace + "-clear"
    enqueue_every_way(sluice.Client(server.url, namespace=clear_ns,
                                    mode=mode, track_state=True), MARKER)
    assert any(MARKER.encode() in d
               for d in dump_namespace(r, clear_ns).values())


def sealed_record(ring, id, value, task="demo.echo", queue="default"):
    sealed, label = ring.seal(seal.RESULT, id, task, queue,
                              msgpack.packb(value, use_bin_type=True))
    return b"F" + msgpack.packb(
        {"v": 2, "id": id, "state": "succeeded", "task": task,
         "queue": queue, "value": msgpack.unpackb(sealed), "finished_at": 1,
         "seal": label},
        use_bin_type=True)


def test_sealed_result_opened_by_get_result_and_inspect(server, namespace,
                                                       ring):
    r = server.client()
    r.set("{%s}:r:t-1" % namespace, sealed_record(ring, "t-1", {"ok": 1}))
    c = sluice.Client(server.url, namespace=namespace, keyring=ring)
    assert c.get_result("t-1", 5000).value == {"ok": 1}
    got = c.inspect("t-1")
    assert (got.value, got.seal) == ({"ok": 1}, None)
    bare = sluice.Client(server.url, namespace=namespace)
    with pytest.raises(sluice.SealError) as e:
        bare.get_result("t-1", 5000)
    assert str(e.value) == ("the result of task t-1 is encrypted with key "
                            "k1: give the client the keyring")
    got = bare.inspect("t-1")
    assert (got.state, got.value, got.encrypted_with) == ("succeeded", None,
                                                          "k1")
    only2 = sluice.Keyring.from_text("key k2 %s\ncurrent k2\n" % KEY2)
    with pytest.raises(sluice.SealError, match="encrypted with key k1"):
        sluice.Client(server.url, namespace=namespace,
                      keyring=only2).get_result("t-1", 5000)

    async def aio():
        a = sluice.aio.Client(server.url, namespace=namespace, keyring=ring)
        b = sluice.aio.Client(server.url, namespace=namespace)
        try:
            with pytest.raises(sluice.SealError, match="encrypted with key"):
                await b.get_result("t-1", 5000)
            return ((await a.get_result("t-1", 5000)).value,
                    (await a.inspect("t-1")).value,
                    (await b.inspect("t-1")).encrypted_with)
        finally:
            await a.close()
            await b.close()
    assert asyncio.run(aio()) == ({"ok": 1}, {"ok": 1}, "k1")
    # A record moved to another task's key does not open.
    r.set("{%s}:r:t-2" % namespace, r.get("{%s}:r:t-1" % namespace)
          .replace(b"t-1", b"t-2"))
    with pytest.raises(sluice.SealError, match="authentication failed"):
        c.get_result("t-2", 5000)


def bury(r, ns, payload, task_id, reason="malformed"):
    return r.xadd("{%s}:dlq" % ns, {
        "payload": payload, "reason": reason, "source": "default",
        "deliveries": 1, "at": 1, "task_id": task_id, "task": "demo.echo",
        "detail": "x"}).decode()


def test_dead_letters_sealed_listed_opened_and_replayed_as_they_are(
        server, namespace, ring):
    r = server.client()
    c = sluice.Client(server.url, namespace=namespace, mode="reliable",
                      keyring=ring)
    pr = p.prepare(c.settings, p.Request("demo.echo", [MARKER], id="d-1"),
                   1000)
    eid = bury(r, namespace, pr.payload, "d-1")
    got = c.dlq_get(eid)
    assert (got.args, got.has_args, got.seal) == ([MARKER], True,
                                                  "aes-256-gcm:k1")
    bare = sluice.Client(server.url, namespace=namespace, mode="reliable")
    listed = bare.dlq_list()
    assert [(d.entry_id, d.has_args, d.args, d.encrypted_with)
            for d in listed] == [(eid, False, None, "k1")]
    assert listed[0].args_error == ("encrypted with key k1: give the "
                                    "client the keyring")
    # Clear dead letters show their args too.
    clear = p.prepare(bare.settings, p.Request("demo.echo", [1]), 1000)
    bury(r, namespace, clear.payload, clear.id)
    assert bare.dlq_list()[1].args == [1]
    # Replay: the sealed args go back byte for byte, still sealed.
    assert bare.dlq_replay(eid) == "d-1"
    [(_, fields)] = r.xrange("{%s}:s:default" % namespace)
    back = p.decode_envelope(fields[b"m"] if b"m" in fields
                             else list(fields.values())[0])
    assert back["v"] == 2 and back["seal"] == "aes-256-gcm:k1"
    assert back["args"] == p.decode_envelope(pr.payload)["args"]
    assert MARKER.encode() not in b"".join(dump_namespace(r, namespace)
                                           .values())


# ---- Across languages ----------------------------------------------------------

NODE_DIR = os.path.join(support.SRCDIR, "clients", "node")


def need_node():
    node = shutil.which("node")
    if node and os.path.exists(os.path.join(NODE_DIR, "node_modules",
                                            ".package-lock.json")):
        return node
    if os.environ.get("CI"):
        pytest.fail("node or clients/node/node_modules is missing")
    pytest.skip("node or clients/node/node_modules is missing")


def test_node_sealed_message_and_result_opened_here(server, namespace,
                                                    tmp_path):
    node = need_node()
    path = write(tmp_path / "ring", ring_text("k1", "k2"))
    script = r"""
const sluice = require(process.argv[1]);
(async () => {
  const c = new sluice.Client(process.argv[2], {namespace: process.argv[3],
    keyring: process.argv[4]});
  const id = await c.enqueue('demo.echo', {from: 'node', m: process.argv[5]},
    {id: 'n-1', queue: 'nq'});
  const r = await c.getResult('p-1', {timeoutMs: 60000});
  console.log(JSON.stringify({id, value: r.value}));
  await c.close();
})().catch((e) => { console.error(e.message); process.exit(1); });
"""
    r = server.client()
    ring = sluice.Keyring.load(path)
    # A result Python sealed (as a worker would), for Node to open.
    r.set("{%s}:r:p-1" % namespace, sealed_record(ring, "p-1", ["from py"],
                                                  queue="pq"))
    out = subprocess.run([node, "-e", script, NODE_DIR, server.url,
                          namespace, path, MARKER], capture_output=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr.decode()
    assert json.loads(out.stdout) == {"id": "n-1", "value": ["from py"]}
    [(_, fields)] = r.xrange("{%s}:s:nq" % namespace)
    env = p.decode_envelope(list(fields.values())[0])
    assert env["seal"] == "aes-256-gcm:k2"
    plain = seal.open_sealed(ring, seal.ARGS, env["seal"], "n-1",
                             "demo.echo", "nq", env["args"])
    assert msgpack.unpackb(plain, raw=False) == {"from": "node",
                                                 "m": MARKER}


def test_python_seals_c_worker_runs_and_seals_node_opens(build, server,
                                                         namespace,
                                                         tmp_path):
    """The three languages on one message: sealed here, opened and run by
    `sluice worker --keyring`, whose result it seals; Node opens that."""
    node = need_node()
    path = write(tmp_path / "ring", ring_text("k1", "k2"))
    w = support.Worker(server.url, "reliable", namespace,
                       extra=["--keyring", path])
    try:
        c = sluice.Client(server.url, namespace=namespace, keyring=path)
        id = c.enqueue("demo.echo", {"m": MARKER, "n": [1, 2.5, None]})
        nothing = c.enqueue("demo.noop", options={"store_result": True})
        assert c.get_result(id, 120000).value == {"m": MARKER,
                                                  "n": [1, 2.5, None]}
        got = c.get_result(nothing, 120000)
        assert got.state == "succeeded"
        raw = server.client().get("{%s}:r:%s" % (namespace, id))
        record = msgpack.unpackb(raw[1:], raw=False)
        assert (record["v"], record["seal"]) == (2, "aes-256-gcm:k2")
        assert list(record)[-1] == "seal"
        for key, data in dump_namespace(server.client(), namespace).items():
            assert MARKER.encode() not in data, key
        script = r"""
const sluice = require(process.argv[1]);
(async () => {
  const c = new sluice.Client(process.argv[2], {namespace: process.argv[3],
    keyring: process.argv[4]});
  const r = await c.getResult(process.argv[5], {timeoutMs: 60000});
  const bare = new sluice.Client(process.argv[2], {namespace: process.argv[3]});
  const err = await bare.getResult(process.argv[5], {timeoutMs: 60000})
    .then(() => 'opened', (e) => e.message);
  console.log(JSON.stringify({value: r.value, err}));
  await c.close(); await bare.close();
})().catch((e) => { console.error(e.message); process.exit(1); });
"""
        out = subprocess.run([node, "-e", script, NODE_DIR, server.url,
                              namespace, path, id], capture_output=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr.decode()
        assert json.loads(out.stdout) == {
            "value": {"m": MARKER, "n": [1, 2.5, None]},
            "err": "the result of task %s is encrypted with key k2: give "
                   "the client the keyring" % id}
    finally:
        w.stop()
    assert "cannot decrypt" not in w.output(), w.output()


def test_c_worker_without_the_key_buries_it_and_replay_keeps_it_sealed(
        build, server, namespace, tmp_path):
    """A worker started without the keyring never runs the message: it
    buries it `malformed` naming the key; this client lists it opened, and
    a replay to a worker with the keyring runs it."""
    path = write(tmp_path / "ring", ring_text("k1", "k2"))
    c = sluice.Client(server.url, namespace=namespace, keyring=path)
    w = support.Worker(server.url, "reliable", namespace)
    try:
        id = c.enqueue("demo.echo", [MARKER])
        [dl] = support.wait_until(c.dlq_list, 120, "the dead letter")
    finally:
        w.stop()
    assert (dl.reason, dl.task_id) == ("malformed", id)
    assert "cannot decrypt: key k2 unknown" in dl.detail, dl.detail
    assert (dl.args, dl.seal) == ([MARKER], "aes-256-gcm:k2")
    bare = sluice.Client(server.url, namespace=namespace).dlq_get(
        dl.entry_id)
    assert bare.encrypted_with == "k2" and not bare.has_args
    assert c.dlq_replay(dl.entry_id) == id
    w = support.Worker(server.url, "reliable", namespace,
                       extra=["--keyring", path])
    try:
        assert c.get_result(id, 120000).value == [MARKER]
    finally:
        w.stop()
    for key, data in dump_namespace(server.client(), namespace).items():
        assert MARKER.encode() not in data, key

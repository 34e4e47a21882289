"""The bytes this client writes are the C library's for the same input
(tests/data/encodings.json through tests/c-oracle), and the scripts it
runs are the C broker's, SHA for SHA."""

import base64
import json
import os

import pytest

from sluice import protocol as p
import support

with open(os.path.join(support.DATA, "encodings.json")) as f:
    CASES = json.load(f)["cases"]


def from_json(v):
    """PROTOCOL.md's JSON form of args to Python ({"$bin": ...} -> bytes)."""
    if isinstance(v, dict):
        if list(v) == ["$bin"] and isinstance(v["$bin"], str):
            return base64.b64decode(v["$bin"])
        return {k: from_json(x) for k, x in v.items()}
    if isinstance(v, list):
        return [from_json(x) for x in v]
    return v


def encode(case):
    if case.get("kind") == "record":
        return p.encode_record(p.Result(
            id=case["id"], state=case["state"], task=case.get("task"),
            queue=case.get("queue"), attempt=case.get("attempt", 0),
            error=case.get("error"), enqueued_at=case.get("enqueued_at", 0),
            started_at=case.get("started_at", 0),
            finished_at=case.get("finished_at", 0)))
    return p.encode_envelope(
        case["id"], case["task"], case["queue"],
        p.pack_args(from_json(case.get("args"))), case.get("attempt", 1),
        case.get("enqueued_at", 0), case.get("eta", 0),
        p.check_options(case.get("opts")), case.get("headers"))


@pytest.fixture(scope="module")
def c_encodings():
    support.need_build()
    lines = support.oracle("encode", os.path.join(support.DATA,
                                                  "encodings.json"))
    return dict(line.split("\t") for line in lines.splitlines())


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_same_bytes_as_c(case, c_encodings):
    assert encode(case).hex() == c_encodings[case["name"]]


def test_every_case_was_encoded_by_c(c_encodings):
    assert sorted(c_encodings) == sorted(c["name"] for c in CASES)


def test_prepare_writes_what_the_encoder_writes():
    s = p.Settings(track_state=True)
    got = p.prepare(s, p.Request("t.ok", [1], queue="q", id="x",
                                 delay_ms=1000, headers={"b": "1", "a": "2"},
                                 options={"max_attempts": 2}), 5000)
    assert got.payload == p.encode_envelope(
        "x", "t.ok", "q", p.pack_args([1]), 1, 5000, 6000,
        p.Options(max_attempts=2), {"a": "2", "b": "1"})
    assert got.due == 6000 and got.dedup
    assert got.record == b"P" + p.encode_record(p.Result(
        id="x", state="scheduled", task="t.ok", queue="q", enqueued_at=5000))


def test_scripts_are_the_c_brokers():
    support.need_build()
    c = {}
    for line in support.oracle("scripts").splitlines():
        mode, name, sha = line.split("\t")
        c[(mode, name)] = sha
    for mode in p.MODES:
        for name in p.PRODUCER_SCRIPTS:
            assert p.Script(mode, name).sha == c[(mode, name)], (mode, name)
    # Every shared script, not only those this client calls.
    for (mode, name), sha in c.items():
        assert p.Script(mode, name).sha == sha, (mode, name)


def test_dead_letter_reasons_are_the_c_librarys():
    support.need_build()
    assert list(p.DEAD_LETTER_REASONS) == \
        support.oracle("dead-letter-reasons").split()


def test_script_set_is_the_c_brokers():
    # What a namespace records of its clients' scripts: this package's
    # version and SHA-1 of them must be the C library's.
    support.need_build()
    version, sha1, layout = support.oracle("script-set").split()
    assert (p.SCRIPTS_VERSION, p.SCRIPTS_SHA1) == (int(version), sha1)
    assert p.LAYOUT_VERSION == int(layout)


def test_shipped_lua_is_the_trees():
    tree = os.path.join(support.SRCDIR, "brokers", "redis", "lua")
    for dirpath, _, files in os.walk(tree):
        for f in files:
            if not f.endswith(".lua"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), tree)
            with open(os.path.join(dirpath, f), "rb") as a, \
                    open(os.path.join(p._LUA_DIR, rel), "rb") as b:
                assert a.read() == b.read(), \
                    "%s differs: run `make client-lua`" % rel


def test_a_json_envelope_is_read_as_strictly_as_the_c_library_reads_it():
    def env(rest):
        return ('{"v":1,"id":"i","task":"t","queue":"q","attempt":1%s}'
                % rest).encode()
    got = p.decode_envelope(env(',"args":[2,2.0,-1e2,{"$bin":"AAE="},'
                                '"\\ud83d\\ude00"]'))
    assert got["args"].hex() == \
        "9502cb4000000000000000cbc059000000000000c4020001a4f09f9880"
    for bad in (',"id":"j"', ',"args":NaN', ',"args":"\\u0000"',
                ',"args":"\\ud800"', ',"args":01', ',"args":[1,]',
                ',"args":9223372036854775808', ',"args":{"a":1,"a":2}',
                ',"attempt":true'):
        assert p.decode_envelope(env(bad)) is None, bad
    assert p.decode_envelope(env("") + b" x") is None
    assert p.decode_envelope(b" \n" + env("") + b" ") is not None

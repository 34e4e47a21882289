"""The inputs the C client refuses (tests/data/bad-inputs.json, read by
tests/test-client-inputs.c too) are refused here, with nothing written,
and those it accepts are accepted."""

import asyncio
import json
import os

import pytest

import sluice
import sluice.aio
import support

with open(os.path.join(support.DATA, "bad-inputs.json")) as f:
    CASES = json.load(f)["cases"]


def field(case, name):
    v = case.get(name)
    if isinstance(v, dict):
        return v["repeat"] * v["times"]
    return v


def request(case):
    headers = {"h%d" % i: "v" for i in range(case.get("header_count", 0))}
    headers.update(case.get("headers", {}))
    args = None
    if "args_nesting" in case:
        args = 0
        for _ in range(case["args_nesting"]):
            args = [args]
    elif "args_zeros" in case:
        args = [0] * case["args_zeros"]
    elif "args_bytes" in case:
        args = "a" * case["args_bytes"]
    return dict(task=field(case, "task"), args=args,
                queue=field(case, "queue"), id=field(case, "id"),
                delay_ms=case.get("delay_ms", 0), eta_ms=case.get("eta_ms", 0),
                headers=headers or None, options=case.get("options"))


def written(server, ns):
    return server.client().keys("{%s}:[qs]*" % ns)


def check(case, run, server, ns):
    expect = case["expect"]
    if expect == "ok":
        run()
        assert written(server, ns), case["name"]
        return
    err = sluice.TooLarge if expect == "too_large" else sluice.InvalidInput
    with pytest.raises(err) as e:
        run()
    if expect == "invalid":
        assert not isinstance(e.value, sluice.TooLarge), case["name"]
    assert not written(server, ns), case["name"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
@pytest.mark.parametrize("mode", ["fast", "reliable"])
def test_sync(case, mode, server, namespace):
    c = sluice.Client(server.url, namespace=namespace, mode=mode)
    r = request(case)
    check(case, lambda: c.enqueue(r.pop("task"), r.pop("args"), **r),
          server, namespace)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_asyncio_and_batch(case, server, namespace):
    async def run():
        c = sluice.aio.Client(server.url, namespace=namespace)
        try:
            # In a batch, the same refusal, named by its index.
            await c.enqueue_batch([request(case)])
        finally:
            await c.close()
    check(case, lambda: asyncio.run(run()), server, namespace)


def test_batch_is_all_or_nothing(server, namespace):
    c = sluice.Client(server.url, namespace=namespace)
    reqs = [sluice.Request("t.ok") for _ in range(5)]
    reqs[3] = sluice.Request("bad name")
    with pytest.raises(sluice.InvalidInput, match="request 3 of the batch"):
        c.enqueue_batch(reqs)
    assert not written(server, namespace)


def test_options_of_the_wrong_type_are_refused():
    for bad in ({"max_attempts": "3"}, {"jitter": 1}, {"timeout_ms": 1.5},
                {"multiplier": float("nan")}, {"nope": 1},
                {"max_attempts": 2**31}):
        with pytest.raises(sluice.InvalidInput):
            sluice.protocol.check_options(bad)

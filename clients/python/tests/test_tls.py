"""rediss:// for the Python producers, against a redis-server that speaks
TLS only: the C library's tls_* parameters, mapped onto redis-py's TLS,
with a C worker (`sluice worker --url rediss://...`) on the other side."""

import asyncio
import re
import ssl
import warnings

import pytest

import sluice
import sluice.aio
import support

WAIT = 30000


@pytest.fixture(scope="module")
def tls_server():
    s = support.TlsRedisServer(auth_clients="yes")
    yield s
    s.stop()


@pytest.fixture(params=["reliable", "fast"])
def mode(request):
    return request.param


def test_python_producer_and_c_worker_over_mutual_tls(build, tls_server,
                                                       namespace, mode):
    w = support.Worker(tls_server.url, mode, namespace)
    try:
        with sluice.Client(tls_server.url, namespace=namespace,
                           mode=mode) as c:
            ids = [c.enqueue("demo.echo", {"n": i}) for i in range(5)]
            got = [c.get_result(i, WAIT) for i in ids]
        assert [(r.state, r.value) for r in got] == [
            ("succeeded", {"n": i}) for i in range(5)]
    finally:
        w.stop()
    # Nothing went over plain TCP: the server has no plain port.
    assert "rediss://" in tls_server.url


def test_asyncio_producer_over_tls(tls_server, namespace):
    async def run():
        async with sluice.aio.Client(tls_server.url, namespace=namespace,
                                     track_state=True) as c:
            i = await c.enqueue("demo.echo", 7)
            return await c.inspect(i)
    assert asyncio.run(run()).state == "queued"


def test_server_name_is_checked_and_can_be_given(tls_server, namespace):
    # The certificate names 127.0.0.1 and localhost.
    url = tls_server.url.replace("127.0.0.1", "localhost")
    with sluice.Client(url, namespace=namespace) as c:
        c.enqueue("demo.echo", 1)
    with sluice.Client(tls_server.url + "&tls_server_name=other.example",
                       namespace=namespace) as c:
        with pytest.raises(sluice.Unavailable, match="(?i)hostname|match"):
            c.enqueue("demo.echo", 1)


def test_refusals(tls_server, namespace):
    ca = tls_server.certs["ca.crt"]
    # No client certificate for a server that wants one.
    plain_tls = "rediss://127.0.0.1:%d/0?tls_ca_file=%s" % (tls_server.port,
                                                             ca)
    with sluice.Client(plain_tls, namespace=namespace) as c:
        with pytest.raises(sluice.Unavailable):
            c.enqueue("demo.echo", 1)
    # An unknown CA: the system's trust store does not have the test CA.
    no_ca = "rediss://127.0.0.1:%d/0?tls_cert=%s&tls_key=%s" % (
        tls_server.port, tls_server.certs["client.crt"],
        tls_server.certs["client.key"])
    with sluice.Client(no_ca, namespace=namespace) as c:
        with pytest.raises(sluice.Unavailable, match="(?i)certificate"):
            c.enqueue("demo.echo", 1)
    # What the C library refuses, refused before anything is sent.
    for url, says in [
            ("redis://h/0?tls_ca_file=/ca", "rediss://"),
            ("rediss://h/0?tls_min_version=1.1", "tls_min_version"),
            ("rediss://h/0?tls_insecure=maybe", "tls_insecure"),
            ("rediss://h/0?tls_cert=/c", "go together"),
            ("rediss://h/0?tls_cafile=/c", "unknown query parameter"),
            ("rediss://u:hunter2@h/0?tls_ca_file=/nonexistent", "u:***@")]:
        with pytest.raises(sluice.InvalidInput, match=re.escape(says)) as e:
            sluice.Client(url)
        assert "hunter2" not in str(e.value)


def test_insecure_connects_and_warns(tls_server, namespace):
    url = "rediss://127.0.0.1:%d/0?tls_insecure=1&tls_cert=%s&tls_key=%s" % (
        tls_server.port, tls_server.certs["client.crt"],
        tls_server.certs["client.key"])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with sluice.Client(url, namespace=namespace) as c:
            c.enqueue("demo.echo", 1)
    assert any("TLS WITHOUT VERIFICATION" in str(w.message) for w in seen)


def test_minimum_version(tls_server, namespace):
    with sluice.Client(tls_server.url + "&tls_min_version=1.3",
                       namespace=namespace) as c:
        c.enqueue("demo.echo", 1)
    assert ssl.HAS_TLSv1_3

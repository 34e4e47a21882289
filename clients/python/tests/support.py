"""Test support: a throwaway redis-server and Sluice C workers, each
started by the test on a free loopback port in a directory of its own and
stopped by pid (as tests/helpers/redis-server.c does for the C suites)."""

import os
import shutil
import signal
import sys
import socket
import subprocess
import tempfile
import time

import redis

SRCDIR = os.environ.get("SLUICE_SRCDIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BUILDDIR = os.environ.get("SLUICE_BUILDDIR") or os.path.join(SRCDIR,
                                                             "_build")
DATA = os.path.join(SRCDIR, "tests", "data")


def wait_until(cond, timeout=60.0, what="a condition"):
    """Polls cond() every 20 ms until true; generous deadlines, because
    the machine is shared."""
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for %s" % what)
        time.sleep(0.02)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    def __init__(self):
        exe = os.environ.get("REDIS_SERVER") or shutil.which("redis-server")
        if not exe:
            raise RuntimeError("redis-server is not installed "
                               "(apt-get install redis-server)")
        self.dir = tempfile.mkdtemp(prefix="sluice-py-redis-")
        for _ in range(20):
            self.port = free_port()
            self.proc = subprocess.Popen(
                [exe, "--port", str(self.port), "--bind", "127.0.0.1",
                 "--dir", self.dir, "--save", "", "--appendonly", "no",
                 "--maxmemory-policy", "noeviction"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                cwd=self.dir)
            if self._ready():
                break
            self.proc.kill()
            self.proc.wait()
        else:
            raise RuntimeError("redis-server did not start")
        self.url = "redis://127.0.0.1:%d/0" % self.port

    def _ready(self):
        end = time.monotonic() + 30
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                return False  # the port was taken meanwhile: try another
            try:
                if redis.Redis(port=self.port, socket_timeout=1).ping():
                    return True
            except redis.exceptions.ConnectionError:
                time.sleep(0.02)
        return False

    def client(self):
        return redis.Redis(port=self.port)

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def sluice_exe():
    return os.path.join(BUILDDIR, "cli", "sluice")


def sluice_env():
    env = dict(os.environ)
    env["SLUICE_MODULE_PATH"] = os.path.join(BUILDDIR, "examples",
                                             "demo-module", ".libs")
    for k in ("SLUICE_URL", "SLUICE_MODE", "SLUICE_NAMESPACE",
              "SLUICE_CONFIG"):
        env.pop(k, None)
    return env


class Worker:
    """`sluice worker --module demo`, the C worker, on one namespace."""

    def __init__(self, url, mode, namespace, queues=("default",),
                 extra=()):
        args = [sluice_exe(), "worker", "--module", "demo", "--url", url,
                "--mode", mode, "--namespace", namespace, "-c", "2",
                "--backoff", "10ms", "--backoff-max", "20ms",
                "--no-task-log"] + list(extra)
        for q in queues:
            args += ["-q", q]
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(args, env=sluice_env(),
                                     stdout=self.log, stderr=self.log)

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def output(self):
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")


def sluice_cli(*args, url, mode, namespace):
    """The `sluice` command (a C producer); returns its stdout."""
    out = subprocess.run([sluice_exe()] + list(args) + [
        "--url", url, "--mode", mode, "--namespace", namespace],
        env=sluice_env(), capture_output=True, timeout=120)
    if out.returncode != 0:
        raise AssertionError("sluice %s failed: %s" % (
            " ".join(args), out.stderr.decode()))
    return out.stdout.decode()


def need_build():
    """The C build's programs (c-oracle, sluice, the demo module). Under
    `make check` (SLUICE_REQUIRE_BUILD=1) they must be there: a test that
    skips there could not fail."""
    import pytest
    if not os.path.exists(sluice_exe()):
        if os.environ.get("SLUICE_REQUIRE_BUILD"):
            pytest.fail("no C build in %s" % BUILDDIR)
        pytest.skip("no C build in %s (set SLUICE_BUILDDIR)" % BUILDDIR)


def oracle(*args):
    exe = os.path.join(BUILDDIR, "tests", "c-oracle")
    return subprocess.run([exe] + list(args), capture_output=True,
                          check=True, timeout=120).stdout.decode()


# ---- TLS ------------------------------------------------------------------

def make_certs(directory):
    """A CA, a server certificate for 127.0.0.1 and localhost, and a client
    certificate, made with the openssl command in @directory."""
    script = r"""
set -e
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1" 2>/dev/null; }
key ca.key
openssl req -x509 -new -key ca.key -out ca.crt -days 30 -subj /CN=py-ca \
  -addext basicConstraints=critical,CA:TRUE 2>/dev/null
for who in server client; do
  key $who.key
  openssl req -new -key $who.key -out $who.csr -subj /CN=$who 2>/dev/null
done
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > server.ext
printf 'extendedKeyUsage=clientAuth\n' > client.ext
for who in server client; do
  openssl x509 -req -in $who.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
    -days 30 -extfile $who.ext -out $who.crt 2>/dev/null
done
"""
    subprocess.run(["sh", "-c", script], cwd=directory, check=True,
                   timeout=60)
    return {name: os.path.join(directory, name) for name in
            ("ca.crt", "server.crt", "server.key", "client.crt",
             "client.key")}


class TlsRedisServer(RedisServer):
    """A redis-server that speaks TLS only (--port 0 --tls-port P), with
    certificates of make_certs(); the test's own admin connection goes by
    its unix socket. auth_clients: its --tls-auth-clients."""

    def __init__(self, auth_clients="no"):
        exe = os.environ.get("REDIS_SERVER") or shutil.which("redis-server")
        if not exe:
            raise RuntimeError("redis-server is not installed "
                               "(apt-get install redis-server)")
        self.dir = tempfile.mkdtemp(prefix="sluice-py-tls-")
        self.certs = make_certs(self.dir)
        self.sock = os.path.join(self.dir, "redis.sock")
        for _ in range(20):
            self.port = free_port()
            self.proc = subprocess.Popen(
                [exe, "--port", "0", "--tls-port", str(self.port),
                 "--bind", "127.0.0.1", "--unixsocket", self.sock,
                 "--tls-cert-file", self.certs["server.crt"],
                 "--tls-key-file", self.certs["server.key"],
                 "--tls-ca-cert-file", self.certs["ca.crt"],
                 "--tls-auth-clients", auth_clients,
                 "--dir", self.dir, "--save", "", "--appendonly", "no",
                 "--maxmemory-policy", "noeviction"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                cwd=self.dir)
            if self._ready():
                break
            self.proc.kill()
            self.proc.wait()
        else:
            raise RuntimeError("redis-server did not start")
        self.url = "rediss://127.0.0.1:%d/0?tls_ca_file=%s" % (
            self.port, self.certs["ca.crt"])
        if auth_clients == "yes":
            self.url += "&tls_cert=%s&tls_key=%s" % (
                self.certs["client.crt"], self.certs["client.key"])

    def _ready(self):
        end = time.monotonic() + 30
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                return False
            try:
                if redis.Redis(unix_socket_path=self.sock,
                               socket_timeout=1).ping():
                    return True
            except (redis.exceptions.ConnectionError, FileNotFoundError):
                time.sleep(0.02)
        return False

    def client(self):
        return redis.Redis(unix_socket_path=self.sock)

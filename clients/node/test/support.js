'use strict';
// Test support: a throwaway redis-server and Sluice C workers, each
// started by the test on a free loopback port in a directory of its own
// and stopped by pid (as tests/helpers/redis-server.c does for the C
// suites).

const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const Redis = require('ioredis');

const SRCDIR = process.env.SLUICE_SRCDIR || path.resolve(__dirname, '..', '..', '..');
const BUILDDIR = process.env.SLUICE_BUILDDIR || path.join(SRCDIR, '_build');
const DATA = path.join(SRCDIR, 'tests', 'data');
const SLUICE = path.join(BUILDDIR, 'cli', 'sluice');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls cond() every 20 ms until truthy; generous deadlines, the
 * machine is shared. */
async function waitUntil(cond, what, timeoutMs = 60000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function which(name) {
  for (const dir of (process.env.PATH || '').split(':')) {
    const f = path.join(dir, name);
    if (fs.existsSync(f)) return f;
  }
  return null;
}

async function ping(port) {
  const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  r.on('error', () => {});
  try {
    await r.connect();
    return (await r.ping()) === 'PONG';
  } catch (e) {
    return false;
  } finally {
    r.disconnect();
  }
}

async function startRedis() {
  const exe = process.env.REDIS_SERVER || which('redis-server');
  if (!exe) throw new Error('redis-server is not installed (apt-get install redis-server)');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-node-redis-'));
  for (let attempt = 0; attempt < 20; attempt++) {
    const port = await freePort();
    const proc = spawn(exe, ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir,
      '--save', '', '--appendonly', 'no', '--maxmemory-policy', 'noeviction'],
    { cwd: dir, stdio: 'ignore' });
    let exited = false;
    proc.on('exit', () => { exited = true; });
    const end = Date.now() + 30000;
    while (!exited && Date.now() < end) {
      if (await ping(port)) {
        return {
          port, url: `redis://127.0.0.1:${port}/0`, proc, dir,
          client() {
            const r = new Redis({ port, host: '127.0.0.1' });
            r.on('error', () => {});
            return r;
          },
          async stop() { await stopProc(proc); fs.rmSync(dir, { recursive: true, force: true }); },
        };
      }
      await sleep(20);
    }
    await stopProc(proc); // the port was taken meanwhile: try another
  }
  throw new Error('redis-server did not start');
}

function stopProc(proc) {
  return new Promise((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) { resolve(); return; }
    const kill = setTimeout(() => process.kill(proc.pid, 'SIGKILL'), 60000);
    proc.on('exit', () => { clearTimeout(kill); resolve(); });
    process.kill(proc.pid, 'SIGTERM');
  });
}

function haveBuild() {
  return fs.existsSync(SLUICE);
}

/** The C build's programs must be there under `make check`
 * (SLUICE_REQUIRE_BUILD=1): a test that skips there could not fail. */
function skipWithoutBuild(t) {
  if (haveBuild()) return false;
  if (process.env.SLUICE_REQUIRE_BUILD) throw new Error(`no C build in ${BUILDDIR}`);
  t.skip(`no C build in ${BUILDDIR} (set SLUICE_BUILDDIR)`);
  return true;
}

function sluiceEnv() {
  const env = { ...process.env };
  env.SLUICE_MODULE_PATH = path.join(BUILDDIR, 'examples', 'demo-module', '.libs');
  for (const k of ['SLUICE_URL', 'SLUICE_MODE', 'SLUICE_NAMESPACE', 'SLUICE_CONFIG']) delete env[k];
  return env;
}

/** `sluice worker --module demo`, the C worker, on one namespace. */
function startWorker(url, mode, namespace, queues = ['default']) {
  const args = ['worker', '--module', 'demo', '--url', url, '--mode', mode, '--namespace', namespace,
    '-c', '2', '--backoff', '10ms', '--backoff-max', '20ms', '--no-task-log'];
  for (const q of queues) args.push('-q', q);
  const proc = spawn(SLUICE, args, { env: sluiceEnv(), stdio: 'ignore' });
  return { proc, stop: () => stopProc(proc) };
}

/** The `sluice` command (a C producer); returns its standard output. */
function sluiceCli(args, { url, mode, namespace }) {
  return execFileSync(SLUICE, [...args, '--url', url, '--mode', mode, '--namespace', namespace],
    { env: sluiceEnv(), timeout: 120000 }).toString();
}

function oracle(...args) {
  return execFileSync(path.join(BUILDDIR, 'tests', 'c-oracle'), args, { timeout: 120000 }).toString();
}

/** A CA, a server certificate for 127.0.0.1 and localhost and a client
 * certificate, made with the openssl command in @dir. */
function makeCerts(dir) {
  const script = `set -e
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1" 2>/dev/null; }
key ca.key
openssl req -x509 -new -key ca.key -out ca.crt -days 30 -subj /CN=node-ca -addext basicConstraints=critical,CA:TRUE 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > server.ext
printf 'extendedKeyUsage=clientAuth\n' > client.ext
for who in server client; do
  key $who.key
  openssl req -new -key $who.key -out $who.csr -subj /CN=$who 2>/dev/null
  openssl x509 -req -in $who.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -extfile $who.ext -out $who.crt 2>/dev/null
done
`;
  execFileSync('sh', ['-c', script], { cwd: dir, timeout: 60000 });
  const certs = {};
  for (const n of ['ca.crt', 'server.crt', 'server.key', 'client.crt', 'client.key']) certs[n] = path.join(dir, n);
  return certs;
}

/** A redis-server that speaks TLS only (--port 0 --tls-port P), with the
 * certificates of makeCerts(); the test's own connection goes by its unix
 * socket. @authClients: its --tls-auth-clients. */
async function startTlsRedis(authClients = 'no') {
  const exe = process.env.REDIS_SERVER || which('redis-server');
  if (!exe) throw new Error('redis-server is not installed (apt-get install redis-server)');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-node-tls-'));
  const certs = makeCerts(dir);
  const sock = path.join(dir, 'redis.sock');
  for (let attempt = 0; attempt < 20; attempt++) {
    const port = await freePort();
    const proc = spawn(exe, ['--port', '0', '--tls-port', String(port), '--bind', '127.0.0.1',
      '--unixsocket', sock, '--tls-cert-file', certs['server.crt'], '--tls-key-file', certs['server.key'],
      '--tls-ca-cert-file', certs['ca.crt'], '--tls-auth-clients', authClients,
      '--dir', dir, '--save', '', '--appendonly', 'no', '--maxmemory-policy', 'noeviction'],
    { cwd: dir, stdio: 'ignore' });
    let exited = false;
    proc.on('exit', () => { exited = true; });
    const end = Date.now() + 30000;
    while (!exited && Date.now() < end) {
      const r = new Redis({ path: sock, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      r.on('error', () => {});
      let up = false;
      try { await r.connect(); up = (await r.ping()) === 'PONG'; } catch (e) { up = false; } finally { r.disconnect(); }
      if (up) {
        let url = `rediss://127.0.0.1:${port}/0?tls_ca_file=${encodeURIComponent(certs['ca.crt'])}`;
        if (authClients === 'yes') {
          url += `&tls_cert=${encodeURIComponent(certs['client.crt'])}&tls_key=${encodeURIComponent(certs['client.key'])}`;
        }
        return {
          port, url, proc, dir, certs,
          async stop() { await stopProc(proc); fs.rmSync(dir, { recursive: true, force: true }); },
        };
      }
      await sleep(20);
    }
    await stopProc(proc);
  }
  throw new Error('redis-server did not start');
}

let nsCounter = 0;
const newNamespace = () => `node${process.pid}-${nsCounter++}`;

module.exports = {
  SRCDIR, BUILDDIR, DATA, sleep, waitUntil, freePort, startRedis, startTlsRedis, skipWithoutBuild,
  startWorker, sluiceCli, oracle, newNamespace,
};

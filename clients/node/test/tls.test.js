'use strict';
// rediss:// for the Node producers, against a redis-server that speaks TLS
// only: the C library's tls_* parameters mapped onto ioredis's `tls`
// option, with a C worker (`sluice worker --url rediss://...`) on the
// other side.

const assert = require('node:assert/strict');
const { test, before, after } = require('node:test');
const sluice = require('..');
const support = require('./support');

const WAIT = { timeoutMs: 120000 };
let server;
before(async () => { server = await support.startTlsRedis('yes'); });
after(async () => { await server.stop(); });

for (const mode of ['fast', 'reliable']) {
  test(`${mode}: a Node producer and a C worker over mutual TLS`, async (t) => {
    if (support.skipWithoutBuild(t)) return;
    const ns = support.newNamespace();
    const worker = support.startWorker(server.url, mode, ns);
    const c = new sluice.Client(server.url, { namespace: ns, mode });
    try {
      const ids = [];
      for (let i = 0; i < 5; i++) ids.push(await c.enqueue('demo.echo', { n: i }));
      for (let i = 0; i < 5; i++) {
        const r = await c.getResult(ids[i], WAIT);
        assert.equal(r.state, 'succeeded');
        assert.deepEqual(r.value, { n: i });
      }
    } finally {
      await c.close();
      await worker.stop();
    }
  });
}

test('the server name is checked, and tls_server_name gives another', async () => {
  const ns = support.newNamespace();
  const byName = new sluice.Client(server.url.replace('127.0.0.1', 'localhost'), { namespace: ns });
  try {
    await byName.enqueue('demo.echo', 1);
  } finally {
    await byName.close();
  }
  const wrong = new sluice.Client(`${server.url}&tls_server_name=other.example`, { namespace: ns });
  try {
    await assert.rejects(wrong.enqueue('demo.echo', 1), sluice.UnavailableError);
  } finally {
    await wrong.close();
  }
});

test('refusals', async () => {
  const ns = support.newNamespace();
  const noCert = new sluice.Client(`rediss://127.0.0.1:${server.port}/0?tls_ca_file=${server.certs['ca.crt']}`, { namespace: ns });
  try {
    await assert.rejects(noCert.enqueue('demo.echo', 1), sluice.UnavailableError);
  } finally {
    await noCert.close();
  }
  const unknownCa = new sluice.Client(`rediss://127.0.0.1:${server.port}/0?tls_cert=${server.certs['client.crt']}&tls_key=${server.certs['client.key']}`, { namespace: ns });
  try {
    await assert.rejects(unknownCa.enqueue('demo.echo', 1), sluice.UnavailableError);
  } finally {
    await unknownCa.close();
  }
  for (const [url, says] of [
    ['redis://h/0?tls_ca_file=/ca', /rediss:\/\//],
    ['rediss://h/0?tls_min_version=1.1', /tls_min_version/],
    ['rediss://h/0?tls_insecure=maybe', /tls_insecure/],
    ['rediss://h/0?tls_cert=/c', /go together/],
    ['rediss://h/0?tls_cafile=/c', /unknown query parameter/],
    ['rediss://u:hunter2@h/0?tls_ca_file=/nonexistent', /cannot use tls_ca_file/],
  ]) {
    assert.throws(() => new sluice.Client(url), (e) => {
      assert.ok(e instanceof sluice.InvalidInputError, e.message);
      assert.match(e.message, says);
      assert.ok(!e.message.includes('hunter2'));
      return true;
    });
  }
});

test('tls_insecure connects without verification and warns', async () => {
  const warned = [];
  const onWarning = (w) => warned.push(w.message);
  process.on('warning', onWarning);
  const ns = support.newNamespace();
  const c = new sluice.Client(`rediss://127.0.0.1:${server.port}/0?tls_insecure=1&tls_cert=${server.certs['client.crt']}&tls_key=${server.certs['client.key']}&tls_min_version=1.3`, { namespace: ns });
  try {
    await c.enqueue('demo.echo', 1);
  } finally {
    await c.close();
  }
  await support.sleep(10);
  process.off('warning', onWarning);
  assert.ok(warned.some((m) => m.includes('TLS WITHOUT VERIFICATION')), warned.join('; '));
});

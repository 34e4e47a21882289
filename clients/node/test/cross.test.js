'use strict';
// Node producers and the C worker (`sluice worker --module demo`) on a
// real redis-server, in both modes: every kind of task enqueued here runs
// there and its result comes back; tasks a C producer (`sluice enqueue`)
// made are inspected and cancelled from here.

const assert = require('node:assert/strict');
const { test, before, after } = require('node:test');
const sluice = require('..');
const support = require('./support');

const WAIT = { timeoutMs: 120000 }; // generous: the machine is shared
let server;
before(async () => { server = await support.startRedis(); });
after(async () => { await server.stop(); });

for (const mode of ['fast', 'reliable']) {
  test(`${mode}: every kind of task runs on the C worker`, async (t) => {
    if (support.skipWithoutBuild(t)) return;
    const ns = support.newNamespace();
    const worker = support.startWorker(server.url, mode, ns);
    const c = new sluice.Client(server.url, { namespace: ns, mode });
    try {
      const now = Date.now();
      const echo = await c.enqueue('demo.echo', { to: 'world', n: [1, 2.5, null] }, {
        headers: { tenant: 'acme', traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
      });
      const delayed = await c.enqueue('demo.echo', 'later', { delayMs: 300 });
      const eta = await c.enqueue('demo.echo', Buffer.from([0, 1, 0x62]), { etaMs: now + 300 });
      const own = await c.enqueueFull('demo.echo', 42, { id: `order-${mode}` });
      const again = await c.enqueueFull('demo.echo', 43, { id: `order-${mode}` });
      const flaky = await c.enqueue('demo.flaky', { fail_times: 1 }, { options: { maxAttempts: 3, initialBackoffMs: 0 } });
      const fatal = await c.enqueue('demo.fatal');
      const fail = await c.enqueue('demo.fail', null, { options: { maxAttempts: 2, initialBackoffMs: 0 } });
      const nothing = await c.enqueue('demo.noop', null, { options: { storeResult: true } });
      const batch = await c.enqueueBatch(Array.from({ length: 20 }, (_, i) => ({ task: 'demo.echo', args: i })));

      assert.deepEqual((await c.getResult(echo, WAIT)).value, { to: 'world', n: [1, 2.5, null] });
      assert.equal((await c.getResult(delayed, WAIT)).value, 'later');
      const e = await c.getResult(eta, WAIT);
      assert.deepEqual(Buffer.from(e.value), Buffer.from([0, 1, 0x62]));
      assert.ok(e.startedAt >= now + 300);
      assert.equal(own.existed, false);
      assert.deepEqual(again, { id: own.id, existed: true });
      assert.equal((await c.getResult(own.id, WAIT)).value, 42);
      const f = await c.getResult(flaky, WAIT);
      assert.equal(f.state, 'succeeded');
      assert.equal(f.attempt, 2);
      const d = await c.getResult(fatal, WAIT);
      assert.deepEqual([d.state, d.deadLetterReason], ['dead_lettered', 'non_retryable']);
      const g = await c.getResult(fail, WAIT);
      assert.deepEqual([g.state, g.deadLetterReason, g.attempt], ['dead_lettered', 'max_attempts', 2]);
      const n = await c.getResult(nothing, WAIT);
      assert.equal(n.state, 'succeeded');
      assert.equal(n.hasValue, false);
      const values = await Promise.all(batch.map((id) => c.getResult(id, WAIT)));
      assert.deepEqual(values.map((r) => r.value), Array.from({ length: 20 }, (_, i) => i));

      const dead = await c.dlqList({ task: 'demo.fail' });
      assert.deepEqual(dead.map((x) => x.taskId), [fail]);
      assert.deepEqual((await c.dlqList({ reason: 'non_retryable' })).map((x) => x.taskId), [fatal]);
      assert.equal(await c.dlqReplay(dead[0].entryId), fail);
      const h = await c.getResult(fail, WAIT);
      assert.deepEqual([h.state, h.attempt], ['dead_lettered', 2]);
    } finally {
      await c.close();
      await worker.stop();
    }
  });

  test(`${mode}: a C producer's tasks are inspected and cancelled`, async (t) => {
    if (support.skipWithoutBuild(t)) return;
    const ns = support.newNamespace();
    const conn = { url: server.url, mode, namespace: ns };
    const c = new sluice.Client(server.url, { namespace: ns, mode });
    try {
      const now = Date.now();
      const later = support.sluiceCli(['enqueue', 'demo.echo', '{"a": 1}', '--delay', '1h'], conn).trim();
      const queued = support.sluiceCli(['enqueue', 'demo.sleep', '{"ms": 1}', '-q', 'idle'], conn).trim();
      const got = await c.inspect(later);
      assert.deepEqual([got.state, got.task, got.queue], ['scheduled', 'demo.echo', 'default']);
      assert.ok(got.dueAt >= now + 3600000 && got.dueAt <= now + 3600000 + 120000);
      assert.equal(await c.cancel(later), 'removed');
      assert.equal((await c.inspect(later)).state, 'cancelled');
      assert.equal(JSON.parse(support.sluiceCli(['inspect', later, '--json'], conn)).state, 'cancelled');

      assert.equal(await c.cancel(queued), 'revoked');
      const worker = support.startWorker(server.url, mode, ns, ['idle']);
      try {
        assert.equal((await c.getResult(queued, WAIT)).state, 'cancelled');
      } finally {
        await worker.stop();
      }
    } finally {
      await c.close();
    }
  });
}

test('the README example runs', async (t) => {
  if (support.skipWithoutBuild(t)) return;
  // README's Node example, as written but for the server's URL and where
  // the package is, on a C worker of the namespace and mode it uses.
  const fs = require('node:fs');
  const path = require('node:path');
  const { execFile } = require('node:child_process');
  const readme = fs.readFileSync(path.join(support.SRCDIR, 'README.md'), 'utf8');
  let code = readme.split('### Node\n')[1].split('```js\n')[1].split('```')[0];
  assert.ok(code.includes("require('sluice-client')"));
  code = code.replace("require('sluice-client')", `require(${JSON.stringify(path.join(__dirname, '..'))})`)
    .replace('redis://127.0.0.1:6379/0', server.url);
  const worker = support.startWorker(server.url, 'reliable', 'sluice');
  try {
    const out = await new Promise((resolve, reject) => {
      execFile(process.execPath, ['-e', `(async () => {\n${code}\n})().catch((e) => { console.error(e); process.exit(1); });`],
        { timeout: 120000 }, (err, stdout, stderr) => (err ? reject(new Error(stderr || err.message)) : resolve(stdout)));
    });
    assert.equal(out, "{ to: 'world' }\n");
  } finally {
    await worker.stop();
  }
});

function replayCases() {
  const p = sluice.protocol;
  const msgpack = require('@msgpack/msgpack');
  const pack = (v) => Buffer.from(msgpack.encode(v));
  return {
    'msgpack with every field': p.encodeEnvelope({
      id: 'm1', task: 't.m', queue: 'default', args: p.packArgs({ k: [1, 'x'] }), attempt: 3,
      enqueuedAt: 1700000000000, eta: 1700000005000,
      opts: {
        maxAttempts: 4, initialBackoffMs: 0, multiplier: 1.5, maxBackoffMs: 10, jitter: true,
        timeoutMs: 20, expiresAt: 30, storeResult: false, resultTtlMs: 40, deadLetter: true,
      },
      headers: { z: '1', a: '2' }, unknownSince: 1700000001000,
      history: Array.from({ length: 12 }, (_, i) => `line ${i}`),
    }),
    'msgpack with unknown keys and unset options': pack({
      v: 1, id: 'u1', task: 't.u', queue: 'uq', attempt: 2, later: { field: [1] },
      opts: { max_attempts: 0, multiplier: 0.5, future: true },
    }),
    json: Buffer.from(' {"v":1,"id":"j1","task":"t.j","queue":"default","args":[1,2.5,2.0,{"$bin":"AAE="},"x",{"n":null}],'
      + '"attempt":4,"enqueued_at":1700000000000,"opts":{"max_attempts":5,"multiplier":2,"jitter":false},'
      + '"headers":{"b":"1","a":"2"},"history":["e1"],"extra":{"k":[1]}}'),
    malformed: Buffer.from([0xc1, 0x00]),
    'a field of the wrong type': pack({ v: 1, id: 'w1', task: 't.w', queue: 'default', attempt: '3' }),
  };
}

for (const mode of ['fast', 'reliable']) {
  for (const keep of [false, true]) {
    test(`${mode}: dlqReplay sends what the C client sends (${keep ? 'keep' : 'reset'})`, async (t) => {
      if (support.skipWithoutBuild(t)) return;
      const r = server.client();
      const p = sluice.protocol;
      try {
        for (const [name, payload] of Object.entries(replayCases())) {
          const seen = {};
          for (const who of ['c', 'node']) {
            const ns = support.newNamespace();
            const c = new sluice.Client(server.url, { namespace: ns, mode });
            try {
              await c.enqueue('t.ok', null, { queue: 'setup' });
              const eid = await r.xadd(`{${ns}}:dlq`, '*', 'payload', payload, 'reason', 'max_attempts',
                'source', 'default', 'deliveries', '1', 'at', '1', 'task_id', 'tid-1', 'task', 't.x');
              await r.hincrby(`{${ns}}:dlq:count`, 'max_attempts', 1);
              if (who === 'c') {
                support.sluiceCli(['dlq', 'replay', eid, ...(keep ? ['--keep-attempt'] : [])], { url: server.url, mode, namespace: ns });
              } else {
                await c.dlqReplay(eid, { keepAttempt: keep });
              }
              assert.deepEqual(await c.dlqList(), [], name);
              const got = {};
              for (const key of (await r.keys(`{${ns}}:[qs]:*`)).sort()) {
                const q = key.split(':').slice(2).join(':');
                if (q === 'setup') continue;
                got[q] = mode === 'fast' ? (await r.lrangeBuffer(key, 0, -1)).map((b) => b.toString('hex'))
                  : (await r.xrangeBuffer(key, '-', '+')).map(([, f]) => f[1].toString('hex'));
              }
              const recs = [];
              for (const key of (await r.keys(`{${ns}}:r:*`)).sort()) {
                const raw = await r.getBuffer(key);
                const res = p.decodeRecord(raw.subarray(1), 'x');
                recs.push([key.split(':').slice(2).join(':'), raw[0], res.state, res.task, res.queue, res.attempt]);
              }
              seen[who] = { got, recs };
            } finally {
              await c.close();
            }
          }
          assert.deepEqual(seen.node, seen.c, name);
        }
      } finally {
        r.disconnect();
      }
    });
  }
}

for (const mode of ['fast', 'reliable']) {
  test(`${mode}: inspect says what \`sluice inspect\` says`, async (t) => {
    if (support.skipWithoutBuild(t)) return;
    const ns = support.newNamespace();
    const worker = support.startWorker(server.url, mode, ns);
    const c = new sluice.Client(server.url, { namespace: ns, mode });
    const r = server.client();
    const conn = { url: server.url, mode, namespace: ns };
    try {
      const deferred = await c.enqueue('nobody.knows');
      const retrying = await c.enqueue('demo.fail', null, { options: { initialBackoffMs: 600000, maxBackoffMs: 600000 } });
      const delayed = await c.enqueue('demo.echo', 1, { delayMs: 3600000 });
      const dead = await c.enqueue('demo.fatal');
      const done = await c.enqueue('demo.echo', { a: [1] });
      assert.equal((await c.getResult(dead, WAIT)).state, 'dead_lettered');
      assert.equal((await c.getResult(done, WAIT)).state, 'succeeded');
      await support.waitUntil(async () => (await r.zscore(`{${ns}}:schedule`, deferred)) !== null, 'the deferral');
      // Until its first attempt ends, a task without a record is in its queue
      // or running, where inspect finds nothing yet.
      const stateOf = async (id) => {
        try {
          return (await c.inspect(id)).state;
        } catch (e) {
          if (e instanceof sluice.NotFoundError) return null;
          throw e;
        }
      };
      await support.waitUntil(async () => (await stateOf(retrying)) === 'retrying', 'the retry');
      await r.del(`{${ns}}:r:${dead}`, `{${ns}}:r:${deferred}`); // found on the schedule, among dead letters
      const fields = [['id', 'id'], ['state', 'state'], ['task', 'task'], ['queue', 'queue'],
        ['attempt', 'attempt'], ['worker', 'worker'], ['error', 'error'], ['deadLetterReason', 'dead_letter_reason'],
        ['enqueuedAt', 'enqueued_at'], ['startedAt', 'started_at'], ['finishedAt', 'finished_at'], ['dueAt', 'due_at']];
      for (const id of [deferred, retrying, delayed, dead, done]) {
        const mine = await c.inspect(id);
        const theirs = JSON.parse(support.sluiceCli(['inspect', id, '--json'], conn));
        for (const [f, k] of fields) assert.equal(mine[f] || null, theirs[k] === undefined ? null : theirs[k], `${id} ${f}`);
        if (theirs.result !== null && theirs.result !== undefined) assert.deepEqual(mine.value, theirs.result);
      }
    } finally {
      r.disconnect();
      await c.close();
      await worker.stop();
    }
  });
}

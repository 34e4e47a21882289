'use strict';
// The inputs the C client refuses (tests/data/bad-inputs.json, read by
// tests/test-client-inputs.c too) are refused here, with nothing written,
// and those it accepts are accepted.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { test, before, after } = require('node:test');
const sluice = require('..');
const support = require('./support');

const { cases } = JSON.parse(fs.readFileSync(path.join(support.DATA, 'bad-inputs.json'), 'utf8'));
let server;
let redis;
before(async () => { server = await support.startRedis(); redis = server.client(); });
after(async () => { redis.disconnect(); await server.stop(); });

function field(c, name) {
  const v = c[name];
  return v !== null && typeof v === 'object' ? v.repeat.repeat(v.times) : v;
}

function request(c) {
  const headers = {};
  for (let i = 0; i < (c.header_count || 0); i++) headers[`h${i}`] = 'v';
  Object.assign(headers, c.headers || {});
  let args;
  if (c.args_nesting !== undefined) {
    args = 0;
    for (let i = 0; i < c.args_nesting; i++) args = [args];
  } else if (c.args_zeros !== undefined) {
    args = new Array(c.args_zeros).fill(0);
  } else if (c.args_bytes !== undefined) {
    args = 'a'.repeat(c.args_bytes);
  }
  const options = {};
  for (const [k, v] of Object.entries(c.options || {})) options[k] = v; // wire names are accepted
  return {
    task: field(c, 'task'), args, queue: field(c, 'queue'), id: field(c, 'id'),
    delayMs: c.delay_ms, etaMs: c.eta_ms,
    headers: Object.keys(headers).length ? headers : undefined, options,
  };
}

async function written(ns) {
  return (await redis.keys(`{${ns}}:[qs]*`)).length > 0;
}

async function check(c, run, ns) {
  if (c.expect === 'ok') {
    await run();
    assert.ok(await written(ns), c.name);
    return;
  }
  const err = c.expect === 'too_large' ? sluice.TooLargeError : sluice.InvalidInputError;
  await assert.rejects(run, (e) => {
    assert.ok(e instanceof err, `${c.name}: ${e}`);
    if (c.expect === 'invalid') assert.ok(!(e instanceof sluice.TooLargeError), c.name);
    return true;
  });
  assert.ok(!(await written(ns)), c.name);
}

for (const mode of ['fast', 'reliable']) {
  for (const c of cases) {
    test(`${mode}: ${c.name}`, async () => {
      const ns = support.newNamespace();
      const client = new sluice.Client(server.url, { namespace: ns, mode });
      try {
        const { task, args, ...opts } = request(c);
        await check(c, () => client.enqueue(task, args, opts), ns);
      } finally {
        await client.close();
      }
    });
  }
}

for (const c of cases) {
  test(`batch: ${c.name}`, async () => {
    const ns = support.newNamespace();
    const client = new sluice.Client(server.url, { namespace: ns });
    try {
      await check(c, () => client.enqueueBatch([request(c)]), ns);
    } finally {
      await client.close();
    }
  });
}

test('a batch is all or nothing', async () => {
  const ns = support.newNamespace();
  const client = new sluice.Client(server.url, { namespace: ns });
  const reqs = Array.from({ length: 5 }, () => ({ task: 't.ok' }));
  reqs[3].task = 'bad name';
  await assert.rejects(client.enqueueBatch(reqs), /request 3 of the batch/);
  assert.ok(!(await written(ns)));
  await client.close();
});

test('options of the wrong type are refused', () => {
  for (const bad of [{ maxAttempts: '3' }, { jitter: 1 }, { timeoutMs: 1.5 },
    { multiplier: NaN }, { nope: 1 }, { maxAttempts: 2 ** 31 }]) {
    assert.throws(() => sluice.protocol.checkOptions(bad), sluice.InvalidInputError);
  }
});

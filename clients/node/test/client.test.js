'use strict';
// The client against a real redis-server (no worker): where each kind of
// enqueue lands, results, inspect, cancel, dead letters, and the typed
// errors.

const assert = require('node:assert/strict');
const { test, before, after } = require('node:test');
const msgpack = require('@msgpack/msgpack');
const sluice = require('..');
const support = require('./support');

const p = sluice.protocol;
let server;
let redis;
before(async () => { server = await support.startRedis(); redis = server.client(); });
after(async () => { redis.disconnect(); await server.stop(); });

async function ready(ns, mode, queue = 'default') {
  if (mode === 'fast') return (await redis.lrangeBuffer(`{${ns}}:q:${queue}`, 0, -1)).reverse();
  return (await redis.xrangeBuffer(`{${ns}}:s:${queue}`, '-', '+')).map(([, f]) => f[1]);
}

async function withClient(options, fn) {
  const ns = support.newNamespace();
  const c = new sluice.Client(server.url, { namespace: ns, ...options });
  try {
    return await fn(c, ns);
  } finally {
    await c.close();
  }
}

function finalRecord(id, state = 'succeeded', value) {
  return Buffer.concat([Buffer.from('F'), p.encodeRecord(p.newResult({
    id, state, value, hasValue: value !== undefined,
  }))]);
}

for (const mode of ['fast', 'reliable']) {
  test(`${mode}: a ready enqueue lands on the queue`, () => withClient({ mode }, async (c, ns) => {
    const id = await c.enqueue('demo.echo', { to: 'world' }, {
      headers: { tenant: 'acme' }, options: { maxAttempts: 5, timeoutMs: 3000 },
    });
    const [payload] = await ready(ns, mode);
    const env = msgpack.decode(payload);
    assert.equal(env.id, id);
    assert.deepEqual(env.args, { to: 'world' });
    assert.deepEqual(env.opts, { max_attempts: 5, timeout_ms: 3000 });
    assert.deepEqual(env.headers, { tenant: 'acme' });
    assert.equal(await redis.sismember(`{${ns}}:queues`, 'default'), 1);
    assert.equal(await redis.hget(`{${ns}}:meta`, 'mode'), mode);
  }));

  test(`${mode}: delayed and ETA go to the schedule`, () => withClient({ mode }, async (c, ns) => {
    const now = Date.now();
    const a = await c.enqueue('t.ok', null, { delayMs: 60000 });
    const b = await c.enqueue('t.ok', null, { etaMs: now + 120000, queue: 'later' });
    const past = await c.enqueue('t.ok', null, { etaMs: now - 1000 });
    const dueA = Number(await redis.zscore(`{${ns}}:schedule`, a));
    assert.ok(dueA >= now + 60000 && dueA <= now + 120000);
    assert.equal(Number(await redis.zscore(`{${ns}}:schedule`, b)), now + 120000);
    assert.equal(await redis.hget(`{${ns}}:sched:queue`, b), 'later');
    assert.equal(await redis.zscore(`{${ns}}:schedule`, past), null);
    assert.equal((await ready(ns, mode)).length, 1);
    const got = await c.inspect(a);
    assert.equal(got.state, 'scheduled');
    assert.equal(got.dueAt, dueA);
  }));

  test(`${mode}: a caller id is idempotent`, () => withClient({ mode }, async (c, ns) => {
    assert.deepEqual(await c.enqueueFull('t.ok', null, { id: 'order-42' }), { id: 'order-42', existed: false });
    assert.deepEqual(await c.enqueueFull('t.ok', null, { id: 'order-42' }), { id: 'order-42', existed: true });
    assert.deepEqual(await c.enqueueBatch([{ task: 't.ok', id: 'o-1' }, { task: 't.ok', id: 'o-1' }]), ['o-1', 'o-1']);
    assert.equal((await ready(ns, mode)).length, 2);
    const ttl = await redis.pttl(`{${ns}}:dedup:order-42`);
    assert.ok(ttl > 0 && ttl <= 24 * 3600 * 1000);
  }));

  test(`${mode}: a batch keeps its order per queue`, () => withClient({ mode }, async (c, ns) => {
    const ids = await c.enqueueBatch(Array.from({ length: 10 }, (_, i) => ({ task: 't.ok', args: i, queue: `q${i % 2}` })));
    for (const q of [0, 1]) {
      const got = (await ready(ns, mode, `q${q}`)).map((x) => msgpack.decode(x).id);
      assert.deepEqual(got, ids.filter((_, i) => i % 2 === q));
    }
  }));

  test(`${mode}: cancel removes scheduled, revokes queued`, () => withClient({ mode }, async (c, ns) => {
    const s = await c.enqueue('t.ok', null, { delayMs: 60000 });
    const q = await c.enqueue('t.ok');
    assert.equal(await c.cancel(s), 'removed');
    assert.equal((await c.inspect(s)).state, 'cancelled');
    assert.equal((await c.getResult(s, { timeoutMs: 0 })).error, 'cancelled before it ran');
    assert.equal(await redis.hget(`{${ns}}:sched:payload`, s), null);
    assert.equal(await c.cancel(q), 'revoked');
    assert.ok(Number(await redis.zscore(`{${ns}}:revoked`, q)) > Date.now());
    await assert.rejects(c.inspect(q), sluice.NotFoundError);
  }));

  test(`${mode}: dead letters are listed, filtered and replayed`, () => withClient({ mode }, async (c, ns) => {
    const env = p.encodeEnvelope({
      id: 'd1', task: 't.fail', queue: 'default', args: p.packArgs([7]), attempt: 3,
      enqueuedAt: 1700000000000, opts: { maxAttempts: 3 }, headers: { tenant: 'acme' },
      history: ['boom', 'boom'],
    });
    const add = async (payload, fields) => {
      const f = { payload, reason: 'max_attempts', source: 'default', deliveries: '1', at: '1700000000000', ...fields };
      const eid = await redis.xadd(`{${ns}}:dlq`, '*', ...Object.entries(f).flat());
      if (f.task_id) await redis.hset(`{${ns}}:dlq:ids`, f.task_id, eid);
      await redis.hincrby(`{${ns}}:dlq:count`, f.reason, 1);
      return eid;
    };
    const e1 = await add(env, { task_id: 'd1', task: 't.fail', detail: 'boom' });
    const e2 = await add(Buffer.from([0xc1, 0x6a]), { reason: 'malformed' });
    assert.deepEqual((await c.dlqList()).map((d) => d.entryId), [e1, e2]);
    assert.deepEqual((await c.dlqList({ reason: 'malformed' })).map((d) => d.entryId), [e2]);
    assert.deepEqual((await c.dlqList({ task: 't.fail' })).map((d) => d.entryId), [e1]);
    assert.deepEqual((await c.dlqList({ after: e1 })).map((d) => d.entryId), [e2]);
    assert.equal((await c.dlqList({ limit: 1 })).length, 1);
    // Every reason of the one list is a filter; another is refused, as by
    // `sluice dlq list --reason`.
    for (const reason of sluice.DEAD_LETTER_REASONS) await c.dlqList({ reason });
    await assert.rejects(c.dlqList({ reason: 'nope' }), (e) => e instanceof sluice.InvalidInputError
      && e.message.includes('snoozed_too_often'));
    const got = await c.inspect('d1');
    assert.equal(got.state, 'dead_lettered');
    assert.equal(got.deadLetterReason, 'max_attempts');
    assert.equal(got.attempt, 3);

    assert.equal(await c.dlqReplay(e1), 'd1');
    const [back] = await ready(ns, mode);
    assert.deepEqual(back, p.encodeEnvelope({
      id: 'd1', task: 't.fail', queue: 'default', args: p.packArgs([7]), attempt: 1,
      enqueuedAt: 1700000000000, opts: { maxAttempts: 3 }, headers: { tenant: 'acme' },
      history: ['boom', 'boom'],
    }));
    assert.equal((await c.inspect('d1')).state, 'queued');
    assert.equal(await c.dlqReplay(e2), `replay:${e2}`);
    assert.deepEqual((await ready(ns, mode))[1], Buffer.from([0xc1, 0x6a]));
    assert.deepEqual(await c.dlqList(), []);
    await assert.rejects(c.dlqReplay(e1), sluice.NotFoundError);
  }));

  test(`${mode}: the other mode is refused`, async () => {
    const ns = support.newNamespace();
    const other = mode === 'fast' ? 'reliable' : 'fast';
    const a = new sluice.Client(server.url, { namespace: ns, mode: other });
    await a.enqueue('t.ok');
    await a.close();
    const b = new sluice.Client(server.url, { namespace: ns, mode });
    await assert.rejects(b.enqueue('t.ok'), (e) => e instanceof sluice.WrongModeError && e.message.includes(other));
    await b.close();
  });
}

test('track_state writes a pending record', () => withClient({ trackState: true }, async (c, ns) => {
  const id = await c.enqueue('t.ok', null, { options: { resultTtlMs: 50000 } });
  const raw = await redis.getBuffer(`{${ns}}:r:${id}`);
  assert.equal(raw[0], 0x50);
  const ttl = await redis.pttl(`{${ns}}:r:${id}`);
  assert.ok(ttl > 0 && ttl <= 50000);
  assert.equal((await c.inspect(id)).state, 'queued');
}));

test('getResult is woken by the notification', () => withClient({ resultPollIntervalMs: 600000 }, async (c, ns) => {
  const waiting = c.getResult('n1', { timeoutMs: 120000 });
  await support.waitUntil(async () => (await redis.pubsub('NUMSUB', `{${ns}}:done:n1`))[1] === 1, 'the subscription');
  await redis.set(`{${ns}}:r:n1`, finalRecord('n1', 'succeeded', [1, 'two']));
  await redis.publish(`{${ns}}:done:n1`, 'F');
  const got = await waiting;
  assert.equal(got.state, 'succeeded');
  assert.deepEqual(got.value, [1, 'two']);
}));

test('getResult polls when the notification is lost', () => withClient({ resultPollIntervalMs: 100 }, async (c, ns) => {
  const waiting = c.getResult('n2', { timeoutMs: 120000 });
  await support.waitUntil(async () => (await redis.pubsub('NUMSUB', `{${ns}}:done:n2`))[1] === 1, 'the subscription');
  await redis.set(`{${ns}}:r:n2`, finalRecord('n2', 'failed'));
  assert.equal((await waiting).state, 'failed');
}));

test('getResult times out with the last state', () => withClient({ resultPollIntervalMs: 50 }, async (c, ns) => {
  await redis.set(`{${ns}}:r:n3`, Buffer.concat([Buffer.from('P'), p.encodeRecord(p.newResult({ id: 'n3', state: 'retrying' }))]));
  await assert.rejects(c.getResult('n3', { timeoutMs: 200 }), (e) => e instanceof sluice.SluiceTimeoutError && /retrying/.test(e.message));
}));

test('full when Redis is out of memory', () => withClient({}, async (c, ns) => {
  await c.enqueue('t.ok');
  await redis.config('SET', 'maxmemory', '1');
  try {
    await assert.rejects(c.enqueue('t.ok'), (e) => e instanceof sluice.FullError && /out of memory/.test(e.message));
  } finally {
    await redis.config('SET', 'maxmemory', '0');
  }
  assert.equal((await ready(ns, 'reliable')).length, 1);
}));

// As for the C library and `sluice worker`: a producer with default
// settings that reaches a fresh namespace first records "reliable", so a
// worker with its defaults is not refused.
test('the default mode is reliable', () => withClient({}, async (c, ns) => {
  assert.equal(c.settings.mode, 'reliable');
  await c.enqueue('t.ok');
  assert.equal(await redis.hget(`{${ns}}:meta`, 'mode'), 'reliable');
  assert.equal((await ready(ns, 'reliable')).length, 1);
}));

test('unavailable when nothing listens', async () => {
  const c = new sluice.Client(`redis://127.0.0.1:${await support.freePort()}/0`);
  await assert.rejects(c.enqueue('t.ok'), sluice.UnavailableError);
  await c.close();
});

test('a malformed record is a malformed reply', () => withClient({}, async (c, ns) => {
  await redis.set(`{${ns}}:r:m1`, Buffer.from([0x46, 0x93, 0x01, 0x02]));
  await assert.rejects(c.inspect('m1'), sluice.MalformedReplyError);
  await assert.rejects(c.getResult('m1', { timeoutMs: 1000 }), sluice.MalformedReplyError);
}));

test('scripts are loaded again after a flush', () => withClient({ mode: 'fast' }, async (c, ns) => {
  await c.enqueue('t.ok');
  await redis.script('FLUSH');
  await c.enqueue('t.ok');
  assert.equal((await ready(ns, 'fast')).length, 2);
}));

test('the mode is checked again after a reconnection', () => withClient({ mode: 'fast' }, async (c, ns) => {
  const meta = `{${ns}}:meta`;
  await c.enqueue('t.ok');
  await redis.del(meta); // a restart without persistence
  await redis.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
  await support.waitUntil(() => c.modeChecked === null, 'the client to see the connection close');
  await c.enqueue('t.ok');
  assert.equal(await redis.hget(meta, 'mode'), 'fast');
  await redis.hset(meta, 'mode', 'reliable');
  await redis.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
  await support.waitUntil(() => c.modeChecked === null, 'the client to see the connection close');
  await assert.rejects(c.enqueue('t.ok'), sluice.WrongModeError);
  await assert.rejects(c.enqueue('t.ok'), sluice.WrongModeError);
  assert.equal((await ready(ns, 'fast')).length, 2);
}));

// A new namespace records the layout version, the script set and the mode;
// one an older Sluice made (a mode only) is marked version 1.
test('the layout and the scripts are recorded as the C client does', () => withClient({}, async (c, ns) => {
  await c.enqueue('t.ok');
  assert.deepEqual(await redis.hgetall(`{${ns}}:meta`), { mode: 'reliable', layout: '1', scripts: p.SCRIPTS });
  const old = `${ns}-old`;
  await redis.hset(`{${old}}:meta`, 'mode', 'fast');
  const o = new sluice.Client(server.url, { namespace: old, mode: 'fast' });
  try {
    await o.enqueue('t.ok');
  } finally {
    await o.close();
  }
  assert.deepEqual(await redis.hgetall(`{${old}}:meta`), { mode: 'fast', layout: '1', scripts: p.SCRIPTS });
}));

// A newer layout is refused before anything is written, and so is a script
// set of this client's version with other bytes; a newer set runs beside.
test('a newer layout or other scripts are refused', async () => {
  const ns = support.newNamespace();
  const zeros = '0'.repeat(40);
  const cases = [
    [`${ns}-newer`, { mode: 'reliable', layout: '2' }, /layout version 2, newer than this program's \(1\): upgrade this program/],
    [`${ns}-other`, { mode: 'reliable', layout: '1', scripts: `${p.SCRIPTS_VERSION}:${zeros}` }, new RegExp(p.SCRIPTS_SHA1)],
  ];
  for (const [name, meta, words] of cases) {
    await redis.hset(`{${name}}:meta`, meta);
    const c = new sluice.Client(server.url, { namespace: name });
    try {
      await assert.rejects(c.enqueue('t.ok'), (e) => e instanceof sluice.WrongVersionError && words.test(e.message));
    } finally {
      await c.close();
    }
    assert.deepEqual(await redis.hgetall(`{${name}}:meta`), meta);
    assert.equal((await ready(name, 'reliable')).length, 0);
  }
  const ahead = `${ns}-ahead`;
  const later = `${p.SCRIPTS_VERSION + 1}:${zeros}`;
  await redis.hset(`{${ahead}}:meta`, { mode: 'reliable', layout: '1', scripts: later });
  const c = new sluice.Client(server.url, { namespace: ahead });
  try {
    await c.enqueue('t.ok');
  } finally {
    await c.close();
  }
  assert.equal(await redis.hget(`{${ahead}}:meta`, 'scripts'), later);
});

'use strict';
// Sealing (lib/seal.js): the keyring file and its refusals, the wire form
// of sealed args and results (the shared test vector of PROTOCOL.md,
// checked byte for byte by the C and Python tests too), the associated
// data, and on a real redis-server: every enqueue path sealed (no marker
// byte anywhere in the namespace), results opened, inspect and dead
// letters, and a message sealed by the Python client opened here.

const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { test, before, after } = require('node:test');
const msgpack = require('@msgpack/msgpack');
const sluice = require('..');
const seal = require('../lib/seal');
const support = require('./support');

const p = sluice.protocol;
const { Keyring, KeyringError, SealError } = sluice;

// The shared vector (tests/test-seal.c and clients/python/tests/
// test_seal.py check the same bytes).
const VECTOR_KEY = 'ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=';
const VECTOR_NONCE = Buffer.from([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
const VECTOR_PLAIN = Buffer.from('91a568656c6c6f', 'hex');
const VECTOR_ARGS = 'c423000102030405060708090a0bcdf735c2265984deddb58164b65068681628ac6802125b';
const VECTOR_RESULT = 'c423000102030405060708090a0bcdf735c226598408f84295840dabb6a10e72f2b35a2918';
const KEY2 = '3q2+7wABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhs=';
const MARKER = 'MARKER-7f3a9c-do-not-store-in-clear';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-node-seal-'));
let n = 0;
function write(text, mode = 0o600, dir = tmp) {
  const file = path.join(dir, `ring-${n++}`);
  fs.writeFileSync(file, text);
  fs.chmodSync(file, mode);
  return file;
}
const ringText = (current = 'k1') => `# a test keyring\nkey k1 ${VECTOR_KEY}\nkey k2 ${KEY2}\ncurrent ${current}\n`;
const ring = Keyring.fromText(`key k1 ${VECTOR_KEY}\ncurrent k1\n`, 'test');

let server;
let redis;
before(async () => { server = await support.startRedis(); redis = server.client(); });
after(async () => {
  redis.disconnect();
  await server.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

// ---- The keyring file ------------------------------------------------------

test('keyring: a good file loads, its keys never shown', () => {
  delete process.env.CREDENTIALS_DIRECTORY;
  const file = write(`# keys\n\n  key\t2026-11  ${VECTOR_KEY}  \nkey 2026-12 ${KEY2}\r\ncurrent 2026-12\n`);
  const r = Keyring.load(file);
  assert.equal(r.current, '2026-12');
  assert.deepEqual(r.keyIds(), ['2026-11', '2026-12']);
  assert.ok(r.hasKey('2026-11') && !r.hasKey('2026-13'));
  const util = require('node:util');
  for (const shown of [String(r), util.inspect(r), JSON.stringify(r), JSON.stringify(Object.entries(r)),
    util.inspect(p.checkSettings({ keyring: r }), { depth: 9 })]) {
    assert.ok(!shown.includes(VECTOR_KEY) && !shown.includes(KEY2), shown);
    assert.ok(!shown.includes(Buffer.from(VECTOR_KEY, 'base64').toString('hex')), shown);
  }
  // The client option takes the path too.
  const c = new sluice.Client('redis://127.0.0.1:1/0', { keyring: file });
  assert.equal(c.settings.keyring.current, '2026-12');
  c.close();
});

for (const [text, line, why] of [
  [`key k1 ${VECTOR_KEY}\nfoo bar\ncurrent k1\n`, 2, 'a line is'],
  ['key k1\ncurrent k1\n', 1, 'a key line is'],
  [`key k/1 ${VECTOR_KEY}\ncurrent k/1\n`, 1, 'a key id is'],
  [`key ${'k'.repeat(65)} ${VECTOR_KEY}\ncurrent k\n`, 1, 'a key id is'],
  [`key k1 ${VECTOR_KEY}\n#\nkey k1 ${KEY2}\ncurrent k1\n`, 3, 'given twice'],
  ['key k1 AAAA\ncurrent k1\n', 1, '32 random bytes'],
  [`key k1 ${VECTOR_KEY.slice(0, -1)}\ncurrent k1\n`, 1, '32 random bytes'],
  [`key k1 ${'A'.repeat(42)}==\ncurrent k1\n`, 1, '32 random bytes'],
  [`key k1 ${VECTOR_KEY}\ncurrent k1\ncurrent k1\n`, 3, 'second'],
  [`key k1 ${VECTOR_KEY}\ncurrent\n`, 2, 'a current line is'],
]) {
  test(`keyring: refused at line ${line} (${why})`, () => {
    const file = write(text);
    assert.throws(() => Keyring.load(file), (e) => {
      assert.ok(e instanceof KeyringError && e instanceof sluice.InvalidInputError);
      assert.ok(e.message.startsWith(`keyring ${file}, line ${line}: `), e.message);
      assert.ok(e.message.includes(why), e.message);
      assert.ok(!e.message.includes(VECTOR_KEY) && !e.message.includes(KEY2));
      return true;
    });
  });
}

test('keyring: no current key, not text, missing', () => {
  for (const [text, why] of [[`key k1 ${VECTOR_KEY}\n`, /no “current ID” line/],
    [`key k1 ${VECTOR_KEY}\ncurrent k2\n`, /“k2” is not among its keys/], ['', /no “current ID” line/]]) {
    const file = write(text);
    assert.throws(() => Keyring.load(file), (e) => e instanceof KeyringError && why.test(e.message)
      && e.message.includes(file));
  }
  const bin = write(Buffer.from([0x6b, 0x65, 0x79, 0x20, 0xff, 0xfe, 0x0a]));
  assert.throws(() => Keyring.load(bin), /is not text/);
  assert.throws(() => Keyring.load(path.join(tmp, 'missing')), /cannot read the keyring/);
  assert.throws(() => new sluice.Client('redis://127.0.0.1:1/0', { keyring: 42 }), KeyringError);
});

for (const mode of [0o644, 0o640, 0o602, 0o660]) {
  test(`keyring: mode ${mode.toString(8)} is refused`, () => {
    delete process.env.CREDENTIALS_DIRECTORY;
    const file = write(ringText(), mode);
    assert.throws(() => Keyring.load(file), (e) => e instanceof KeyringError
      && e.message.includes(`chmod 600 ${file}`) && e.message.includes(`mode 0${mode.toString(8)}`));
    assert.throws(() => new sluice.Client('redis://127.0.0.1:1/0', { keyring: file }), KeyringError);
  });
}

test('keyring: under $CREDENTIALS_DIRECTORY it may be group-readable', () => {
  const creds = fs.mkdtempSync(path.join(tmp, 'creds'));
  const file = write(ringText(), 0o640, creds);
  process.env.CREDENTIALS_DIRECTORY = creds;
  try {
    assert.equal(Keyring.load(file).current, 'k1');
    assert.throws(() => Keyring.load(write(ringText(), 0o640)), /chmod 600/);
    const near = `${creds}-x`;
    fs.mkdirSync(near);
    assert.throws(() => Keyring.load(write(ringText(), 0o640, near)), /chmod 600/);
  } finally {
    delete process.env.CREDENTIALS_DIRECTORY;
  }
});

// ---- The wire form ---------------------------------------------------------

test('seal: the shared vector, args and result', () => {
  const a = seal._sealWithNonce(ring, seal.ARGS, 't-1', 'demo.echo', 'default', VECTOR_PLAIN, VECTOR_NONCE);
  assert.equal(a.sealed.toString('hex'), VECTOR_ARGS);
  assert.equal(a.label, 'aes-256-gcm:k1');
  const r = seal._sealWithNonce(ring, seal.RESULT, 't-1', 'demo.echo', 'default', VECTOR_PLAIN, VECTOR_NONCE);
  assert.equal(r.sealed.toString('hex'), VECTOR_RESULT);
  assert.deepEqual(seal.openSealed(ring, seal.ARGS, a.label, 't-1', 'demo.echo', 'default',
    Buffer.from(VECTOR_ARGS, 'hex')), VECTOR_PLAIN);
  assert.deepEqual(seal.openSealed(ring, seal.RESULT, a.label, 't-1', 'demo.echo', 'default',
    Buffer.from(VECTOR_RESULT, 'hex')), VECTOR_PLAIN);
  assert.equal(sluice.Keyring.prototype._sealWithNonce, undefined);
});

test('seal: round trip, a new nonce each time, the smallest bin', () => {
  for (const plain of [Buffer.from([0xc0]), VECTOR_PLAIN, Buffer.alloc(300, 1), Buffer.alloc(70000, 2)]) {
    const a = ring.seal(seal.ARGS, 'id', 't.x', 'q', plain);
    const b = ring.seal(seal.ARGS, 'id', 't.x', 'q', plain);
    assert.notDeepEqual(a.sealed, b.sealed);
    assert.equal(a.sealed[0], plain.length < 228 ? 0xc4 : plain.length < 65508 ? 0xc5 : 0xc6);
    assert.deepEqual(seal.openSealed(ring, seal.ARGS, a.label, 'id', 't.x', 'q', a.sealed), plain);
  }
});

test('seal: the associated data binds id, task, queue and domain', () => {
  const { sealed, label } = ring.seal(seal.ARGS, 't-1', 'demo.echo', 'default', VECTOR_PLAIN);
  for (const where of [['t-2', 'demo.echo', 'default'], ['t-1', 'demo.other', 'default'], ['t-1', 'demo.echo', 'other']]) {
    assert.throws(() => seal.openSealed(ring, seal.ARGS, label, ...where, sealed),
      (e) => e instanceof SealError && /^cannot decrypt: authentication failed/.test(e.message));
  }
  assert.throws(() => seal.openSealed(ring, seal.RESULT, label, 't-1', 'demo.echo', 'default', sealed),
    /authentication failed/);
  const flipped = Buffer.from(sealed);
  flipped[flipped.length - 1] ^= 1;
  assert.throws(() => seal.openSealed(ring, seal.ARGS, label, 't-1', 'demo.echo', 'default', flipped),
    /authentication failed/);
});

test('seal: an unknown key or algorithm', () => {
  const { sealed, label } = ring.seal(seal.ARGS, 'i', 't.t', 'q', Buffer.from([0xc0]));
  const only2 = Keyring.fromText(`key k2 ${KEY2}\ncurrent k2\n`);
  assert.throws(() => seal.openSealed(only2, seal.ARGS, label, 'i', 't.t', 'q', sealed), /^SealError: cannot decrypt: key k1 unknown/);
  assert.throws(() => seal.openSealed(null, seal.ARGS, label, 'i', 't.t', 'q', sealed), /cannot decrypt: key k1 unknown .*no keyring/);
  assert.throws(() => seal.openSealed(ring, seal.ARGS, 'chacha:k1', 'i', 't.t', 'q', sealed), /cannot decrypt: algorithm chacha unknown/);
  const other = Keyring.fromText(`key k1 ${KEY2}\ncurrent k1\n`);
  assert.throws(() => seal.openSealed(other, seal.ARGS, label, 'i', 't.t', 'q', sealed), /authentication failed/);
});

test('seal: the sealed envelope, and the clear one unchanged', () => {
  const s = p.checkSettings({ keyring: ring });
  const req = { task: 'demo.echo', args: ['hello'], id: 't-1', headers: { h: 'v' } };
  const sealedEnv = p.prepare(s, req, 1000).payload;
  const clearEnv = p.prepare(p.checkSettings({}), req, 1000).payload;
  const m = msgpack.decode(sealedEnv);
  assert.equal(m.v, 2);
  assert.equal(Object.keys(m).at(-1), 'seal');
  assert.equal(m.seal, 'aes-256-gcm:k1');
  const env = p.decodeEnvelope(sealedEnv);
  assert.deepEqual(seal.openSealed(ring, seal.ARGS, env.seal, 't-1', 'demo.echo', 'default', env.args), VECTOR_PLAIN);
  const c = msgpack.decode(clearEnv);
  assert.deepEqual(Object.keys(m).filter((k) => k !== 'seal'), Object.keys(c));
  for (const k of Object.keys(c)) if (k !== 'v' && k !== 'args') assert.deepEqual(m[k], c[k]);
  assert.equal(c.v, 1);
  assert.deepEqual(clearEnv, p.encodeEnvelope({
    id: 't-1', task: 'demo.echo', queue: 'default', args: p.packArgs(['hello']), attempt: 1,
    enqueuedAt: 1000, eta: 0, opts: p.checkOptions(undefined), headers: { h: 'v' },
  }));
  // No args: nil sealed, so that the worker seals the result.
  const nil = p.decodeEnvelope(p.prepare(s, { task: 'demo.noop', id: 'n' }, 1).payload);
  assert.deepEqual(seal.openSealed(ring, seal.ARGS, nil.seal, 'n', 'demo.noop', 'default', nil.args), Buffer.from([0xc0]));
});

function env(over = {}) {
  const m = {
    v: 2, id: 't-1', task: 'demo.echo', queue: 'default',
    args: Buffer.from(VECTOR_ARGS, 'hex').subarray(2), attempt: 1, seal: 'aes-256-gcm:k1', ...over,
  };
  for (const k of Object.keys(m)) if (m[k] === undefined) delete m[k];
  return Buffer.from(msgpack.encode(m));
}

test('decoder: the rules of version 2', () => {
  assert.equal(p.decodeEnvelope(env()).seal, 'aes-256-gcm:k1');
  assert.equal(p.decodeEnvelope(env({ v: 1 })), null);
  assert.equal(p.decodeEnvelope(env({ v: 3 })), null);
  assert.equal(p.decodeEnvelope(env({ seal: undefined })), null); // one form each
  for (const bad of ['aes-256-gcm', 'aes-256-gcm:', ':k1', 'aes_256:k1', 'aes-256-gcm:k/1', `aes-256-gcm:${'k'.repeat(65)}`, 7]) {
    assert.equal(p.decodeEnvelope(env({ seal: bad })), null, String(bad));
  }
  assert.equal(p.decodeEnvelope(env({ args: Buffer.alloc(27) })), null);
  assert.notEqual(p.decodeEnvelope(env({ args: Buffer.alloc(28) })), null);
  assert.equal(p.decodeEnvelope(env({ args: 'a string' })), null);
  assert.equal(p.decodeEnvelope(env({ args: undefined })), null);
  assert.notEqual(p.decodeEnvelope(env({ seal: 'chacha20:k1' })), null);
  const js = Buffer.from(JSON.stringify({
    v: 2, id: 't-1', task: 'demo.echo', queue: 'default', attempt: 1,
    args: { $bin: Buffer.from(VECTOR_ARGS, 'hex').subarray(2).toString('base64') }, seal: 'aes-256-gcm:k1',
  }));
  const j = p.decodeEnvelope(js);
  assert.equal(j.args.toString('hex'), VECTOR_ARGS);
  assert.equal(p.decodeEnvelope(Buffer.from(js.toString().replace('"v":2', '"v":1'))), null);
});

function sealedRecord(keyring, id, value, { task = 'demo.echo', queue = 'default' } = {}) {
  const { sealed, label } = keyring.seal(seal.RESULT, id, task, queue, Buffer.from(msgpack.encode(value)));
  return Buffer.concat([Buffer.from('F'), Buffer.from(msgpack.encode({
    v: 2, id, state: 'succeeded', task, queue, value: msgpack.decode(sealed), finished_at: 1, seal: label,
  }))]);
}

test('decoder: result records of version 2', () => {
  const rec = sealedRecord(ring, 't-1', ['hello']).subarray(1);
  const r = p.decodeRecord(rec, 't-1');
  assert.deepEqual([r.value, r.seal, r.encryptedWith], [null, 'aes-256-gcm:k1', 'k1']);
  assert.deepEqual(p.openResult(r, ring).value, ['hello']);
  assert.equal(r.seal, null);
  const m = msgpack.decode(rec);
  for (const bad of [{ v: 1 }, { seal: 'nope' }, { value: Buffer.alloc(27) }, { value: 'text' }]) {
    assert.throws(() => p.decodeRecord(Buffer.from(msgpack.encode({ ...m, ...bad })), 't-1'), sluice.MalformedReplyError);
  }
  assert.throws(() => p.openResult(p.decodeRecord(rec, 't-1'), null),
    { message: 'the result of task t-1 is encrypted with key k1: give the client the keyring' });
  const moved = Buffer.from(msgpack.encode({ ...m, id: 't-2' }));
  assert.throws(() => p.openResult(p.decodeRecord(moved, 't-2'), ring), /t-2 is sealed: cannot decrypt: authentication/);
});

// ---- On a real redis-server ------------------------------------------------

/** Every byte the namespace holds, key by key, read as its type needs. */
async function dumpNamespace(ns) {
  const out = new Map();
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `{${ns}}:*`, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      const type = await redis.type(key);
      let data;
      if (type === 'string') data = [await redis.getBuffer(key)];
      else if (type === 'list') data = await redis.lrangeBuffer(key, 0, -1);
      else if (type === 'hash') data = Object.entries(await redis.hgetallBuffer(key)).flat().map((x) => Buffer.from(x));
      else if (type === 'zset') data = await redis.zrangeBuffer(key, 0, -1);
      else if (type === 'set') data = await redis.smembersBuffer(key);
      else if (type === 'stream') data = (await redis.xrangeBuffer(key, '-', '+')).flatMap(([, f]) => f);
      else throw new Error(`key ${key} of type ${type}`);
      out.set(key, Buffer.concat(data.flatMap((d) => [d, Buffer.from([0])])));
    }
  } while (cursor !== '0');
  return out;
}

async function enqueueEveryWay(c, marker) {
  const ids = [await c.enqueue('demo.echo', { secret: marker })];
  ids.push(await c.enqueue('demo.echo', [marker], { delayMs: 3600000 }));
  ids.push((await c.enqueueFull('demo.echo', Buffer.from(marker), { id: 'own-1' })).id);
  ids.push(...await c.enqueueBatch([0, 1, 2].map((i) => ({ task: 'demo.echo', args: [marker, i], queue: `q${i % 2}` }))));
  ids.push(await c.enqueue('demo.echo', { s: marker }, { etaMs: Date.now() + 3600000, id: 'own-2' }));
  return ids;
}

for (const mode of ['fast', 'reliable']) {
  test(`${mode}: the marker appears nowhere in Redis`, async () => {
    const ns = support.newNamespace();
    const c = new sluice.Client(server.url, { namespace: ns, mode, trackState: true, keyring: ring });
    const clearNs = `${ns}-clear`;
    const clear = new sluice.Client(server.url, { namespace: clearNs, mode, trackState: true });
    try {
      const ids = await enqueueEveryWay(c, MARKER);
      const dump = await dumpNamespace(ns);
      assert.ok(dump.size >= 5, [...dump.keys()].join(' '));
      for (const [key, data] of dump) assert.ok(!data.includes(MARKER), key);
      const seen = await c.inspect(ids[1]);
      assert.deepEqual([seen.state, seen.task], ['scheduled', 'demo.echo']);
      // The test can fail: without a keyring the same enqueues show it.
      await enqueueEveryWay(clear, MARKER);
      assert.ok([...(await dumpNamespace(clearNs)).values()].some((d) => d.includes(MARKER)));
    } finally {
      await c.close();
      await clear.close();
    }
  });
}

test('a sealed result: getResult and inspect open it, or say which key', async () => {
  const ns = support.newNamespace();
  await redis.set(`{${ns}}:r:t-1`, sealedRecord(ring, 't-1', { ok: 1 }));
  const c = new sluice.Client(server.url, { namespace: ns, keyring: ring });
  const bare = new sluice.Client(server.url, { namespace: ns });
  const only2 = new sluice.Client(server.url, { namespace: ns, keyring: Keyring.fromText(`key k2 ${KEY2}\ncurrent k2\n`) });
  try {
    assert.deepEqual((await c.getResult('t-1', { timeoutMs: 5000 })).value, { ok: 1 });
    const seen = await c.inspect('t-1');
    assert.deepEqual([seen.value, seen.seal], [{ ok: 1 }, null]);
    await assert.rejects(bare.getResult('t-1', { timeoutMs: 5000 }), (e) => e instanceof SealError
      && e.message === 'the result of task t-1 is encrypted with key k1: give the client the keyring');
    const closed = await bare.inspect('t-1');
    assert.deepEqual([closed.state, closed.value, closed.encryptedWith], ['succeeded', null, 'k1']);
    await assert.rejects(only2.getResult('t-1', { timeoutMs: 5000 }), /encrypted with key k1/);
    const moved = (await redis.getBuffer(`{${ns}}:r:t-1`)).toString('latin1').replace('t-1', 't-2');
    await redis.set(`{${ns}}:r:t-2`, Buffer.from(moved, 'latin1'));
    await assert.rejects(c.getResult('t-2', { timeoutMs: 5000 }), /authentication failed/);
  } finally {
    await c.close();
    await bare.close();
    await only2.close();
  }
});

test('dead letters: sealed args opened or named, replayed as they are', async () => {
  const ns = support.newNamespace();
  const c = new sluice.Client(server.url, { namespace: ns, keyring: ring });
  const bare = new sluice.Client(server.url, { namespace: ns });
  try {
    const pr = p.prepare(c.settings, { task: 'demo.echo', args: [MARKER], id: 'd-1' }, 1000);
    const bury = (payload, id) => redis.xadd(`{${ns}}:dlq`, '*', 'payload', payload, 'reason', 'malformed',
      'source', 'default', 'deliveries', '1', 'at', '1', 'task_id', id, 'task', 'demo.echo', 'detail', 'x');
    const eid = await bury(pr.payload, 'd-1');
    const got = await c.dlqGet(eid);
    assert.deepEqual([got.args, got.hasArgs, got.seal], [[MARKER], true, 'aes-256-gcm:k1']);
    const listed = await bare.dlqList();
    assert.deepEqual(listed.map((d) => [d.entryId, d.hasArgs, d.args, d.encryptedWith]), [[eid, false, null, 'k1']]);
    assert.equal(listed[0].argsError, 'encrypted with key k1: give the client the keyring');
    const clear = p.prepare(bare.settings, { task: 'demo.echo', args: [1] }, 1000);
    await bury(clear.payload, clear.id);
    assert.deepEqual((await bare.dlqList())[1].args, [1]);
    assert.equal(await bare.dlqReplay(eid), 'd-1');
    const [[, fields]] = await redis.xrangeBuffer(`{${ns}}:s:default`, '-', '+');
    const back = p.decodeEnvelope(fields[1]);
    assert.deepEqual([back.v, back.seal], [2, 'aes-256-gcm:k1']);
    assert.deepEqual(back.args, p.decodeEnvelope(pr.payload).args);
    for (const [key, data] of await dumpNamespace(ns)) assert.ok(!data.includes(MARKER), key);
  } finally {
    await c.close();
    await bare.close();
  }
});

// ---- Across languages ------------------------------------------------------

function python(t) {
  for (const py of ['/usr/bin/python3', 'python3']) {
    try {
      execFileSync(py, ['-c', 'import redis, msgpack, cryptography'], { stdio: 'ignore' });
      return py;
    } catch (e) {
      // the next one
    }
  }
  if (process.env.CI) throw new Error('no python3 with redis, msgpack and cryptography');
  t.skip('no python3 with redis, msgpack and cryptography');
  return null;
}

test('a message and a result sealed by the Python client open here', async (t) => {
  const py = python(t);
  if (py === null) return;
  const ns = support.newNamespace();
  const file = write(ringText('k2'));
  const script = `
import sys
sys.path.insert(0, sys.argv[1])
import sluice, msgpack
from sluice import seal
c = sluice.Client(sys.argv[2], namespace=sys.argv[3], keyring=sys.argv[4])
print(c.enqueue("demo.echo", {"from": "python", "m": sys.argv[5]}, id="py-1", queue="pq"))
print(c.get_result("n-1", 60000).value)
`;
  const keyring = Keyring.load(file);
  // A result Node sealed (as a worker would), for Python to open.
  await redis.set(`{${ns}}:r:n-1`, sealedRecord(keyring, 'n-1', 'from node', { queue: 'nq' }));
  const out = execFileSync(py, ['-c', script, path.join(support.SRCDIR, 'clients', 'python'), server.url, ns, file, MARKER],
    { timeout: 120000 }).toString();
  assert.equal(out, 'py-1\nfrom node\n');
  const [[, fields]] = await redis.xrangeBuffer(`{${ns}}:s:pq`, '-', '+');
  const e = p.decodeEnvelope(fields[1]);
  assert.equal(e.seal, 'aes-256-gcm:k2');
  const plain = seal.openSealed(keyring, seal.ARGS, e.seal, 'py-1', 'demo.echo', 'pq', e.args);
  assert.deepEqual(msgpack.decode(plain), { from: 'python', m: MARKER });
});

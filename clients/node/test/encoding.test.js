'use strict';
// The bytes this client writes are the C library's for the same input
// (tests/data/encodings.json through tests/c-oracle), and the scripts it
// runs are the C broker's, SHA for SHA.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');
const { protocol: p } = require('..');
const support = require('./support');

const { cases } = JSON.parse(fs.readFileSync(path.join(support.DATA, 'encodings.json'), 'utf8'));

/** PROTOCOL.md's JSON form of args ({"$bin": ...} is a bin). */
function fromJson(v) {
  if (Array.isArray(v)) return v.map(fromJson);
  if (v !== null && typeof v === 'object') {
    const keys = Object.keys(v);
    if (keys.length === 1 && keys[0] === '$bin' && typeof v.$bin === 'string') {
      return Buffer.from(v.$bin, 'base64');
    }
    return Object.fromEntries(keys.map((k) => [k, fromJson(v[k])]));
  }
  return v;
}

function encode(c) {
  if (c.kind === 'record') {
    return p.encodeRecord(p.newResult({
      id: c.id, state: c.state, task: c.task, queue: c.queue, attempt: c.attempt || 0,
      error: c.error, enqueuedAt: c.enqueued_at || 0, startedAt: c.started_at || 0,
      finishedAt: c.finished_at || 0,
    }));
  }
  return p.encodeEnvelope({
    id: c.id, task: c.task, queue: c.queue, args: p.packArgs(fromJson(c.args)),
    attempt: c.attempt || 1, enqueuedAt: c.enqueued_at || 0, eta: c.eta || 0,
    opts: p.checkOptions(c.opts), headers: c.headers,
  });
}

function cEncodings() {
  const out = {};
  for (const line of support.oracle('encode', path.join(support.DATA, 'encodings.json')).trim().split('\n')) {
    const [name, hex] = line.split('\t');
    out[name] = hex;
  }
  return out;
}

test('every case encodes to the C bytes', (t) => {
  if (support.skipWithoutBuild(t)) return;
  const c = cEncodings();
  assert.deepEqual(Object.keys(c).sort(), cases.map((x) => x.name).sort());
  for (const x of cases) assert.equal(encode(x).toString('hex'), c[x.name], x.name);
});

test('the dead-letter reasons are the C library\'s', (t) => {
  if (support.skipWithoutBuild(t)) return;
  assert.deepEqual([...p.DEAD_LETTER_REASONS], support.oracle('dead-letter-reasons').trim().split('\n'));
  assert.equal(require('..').DEAD_LETTER_REASONS, p.DEAD_LETTER_REASONS);
});

test('prepare writes what the encoder writes', () => {
  const s = p.checkSettings({ trackState: true });
  const got = p.prepare(s, {
    task: 't.ok', args: [1], queue: 'q', id: 'x', delayMs: 1000, headers: { b: '1', a: '2' },
    options: { maxAttempts: 2 },
  }, 5000);
  assert.deepEqual(got.payload, p.encodeEnvelope({
    id: 'x', task: 't.ok', queue: 'q', args: p.packArgs([1]), attempt: 1, enqueuedAt: 5000,
    eta: 6000, opts: { maxAttempts: 2 }, headers: { a: '2', b: '1' },
  }));
  assert.equal(got.due, 6000);
  assert.ok(got.dedup);
  assert.deepEqual(got.record, Buffer.concat([Buffer.from('P'), p.encodeRecord(p.newResult({
    id: 'x', state: 'scheduled', task: 't.ok', queue: 'q', enqueuedAt: 5000,
  }))]));
});

test('a Map is a map in its own order, an object with integer-like keys in JavaScript\'s', () => {
  assert.equal(p.packArgs(new Map([['b', 1], ['1', new Map([['x', [true]]])]])).toString('hex'),
    '82a16201a13181a17891c3');
  assert.equal(p.packArgs({ b: 1, 1: 2 }).toString('hex'), '82a13102a16201');
  assert.throws(() => p.packArgs(10n ** 30n), /cannot be encoded/);
});

test('decodeEnvelope keeps args as their bytes', () => {
  const args = Buffer.from([0x92, 0xd0, 0x01, 0xca, 0x3f, 0x80, 0, 0]); // int8 1, float32 1.0
  const env = p.encodeEnvelope({ id: 'i', task: 't', queue: 'q', args, attempt: 2 });
  const back = p.decodeEnvelope(env);
  assert.deepEqual(back.args, args);
  assert.equal(back.attempt, 2);
  assert.equal(p.decodeEnvelope(Buffer.concat([env, Buffer.from([0])])), null);
  assert.equal(p.decodeEnvelope(env.subarray(0, env.length - 1)), null);
});

test('the scripts are the C broker\'s', (t) => {
  if (support.skipWithoutBuild(t)) return;
  const lines = support.oracle('scripts').trim().split('\n');
  assert.ok(lines.length > p.PRODUCER_SCRIPTS.length * 2);
  for (const line of lines) {
    const [mode, name, sha] = line.split('\t');
    assert.equal(p.script(mode, name).sha, sha, `${mode} ${name}`);
  }
});

// What a namespace records of its clients' scripts: this package's version
// and SHA-1 of them must be the C library's.
test('the script set is the C broker\'s', (t) => {
  if (support.skipWithoutBuild(t)) return;
  const [version, sha1, layout] = support.oracle('script-set').trim().split('\t');
  assert.equal(p.SCRIPTS_VERSION, Number(version));
  assert.equal(p.SCRIPTS_SHA1, sha1);
  assert.equal(p.LAYOUT_VERSION, Number(layout));
});

test('the shipped Lua is the tree\'s', () => {
  const tree = path.join(support.SRCDIR, 'brokers', 'redis', 'lua');
  const walk = (dir) => fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (
    e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)]));
  const files = walk(tree).filter((f) => f.endsWith('.lua'));
  assert.ok(files.length > 20);
  for (const f of files) {
    const rel = path.relative(tree, f);
    assert.deepEqual(fs.readFileSync(path.join(p.LUA_DIR, rel)), fs.readFileSync(f),
      `${rel} differs: run \`make client-lua\``);
  }
});

test('a JSON envelope is read as strictly as the C library reads it', () => {
  const env = (rest) => Buffer.from(`{"v":1,"id":"i","task":"t","queue":"q","attempt":1${rest}}`);
  const got = p.decodeEnvelope(env(',"args":[2,2.0,-1e2,{"$bin":"AAE="},"\\ud83d\\ude00"]'));
  assert.equal(got.args.toString('hex'), '9502cb4000000000000000cbc059000000000000c4020001a4f09f9880');
  for (const bad of [',"id":"j"', ',"args":NaN', ',"args":"\\u0000"', ',"args":"\\ud800"',
    ',"args":01', ',"args":[1,]', ',"args":9223372036854775808', ',"args":{"a":1,"a":2}']) {
    assert.equal(p.decodeEnvelope(env(bad)), null, bad);
  }
  assert.equal(p.decodeEnvelope(Buffer.concat([env(''), Buffer.from(' x')])), null);
  assert.notEqual(p.decodeEnvelope(Buffer.concat([Buffer.from(' \n'), env(''), Buffer.from(' ')])), null);
});

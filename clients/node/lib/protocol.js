'use strict';
// What a Sluice producer writes and reads, without any I/O: the checks
// the C client makes before it sends anything (same rules, same limits),
// the envelope and result-record encodings (byte for byte the C
// library's, PROTOCOL.md), the scripts (assembled from the Lua files the C
// broker compiles in) and the argument lists and replies of the scripts a
// producer calls. Mirrors clients/python/sluice/protocol.py.

const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const msgpack = require('@msgpack/msgpack');
const {
  InvalidInputError, TooLargeError, MalformedReplyError, WrongModeError,
  WrongVersionError, SealError,
} = require('./errors');
const seal = require('./seal');
const {
  decodeJsonEnvelope, KNOWN_KEYS, KNOWN_OPTIONS, carried,
} = require('./json-envelope');

// The limits of include/sluice/sluice-envelope.h and sluice-client.h.
const MAX_ID_BYTES = 256;
const MAX_NAME_BYTES = 200;
const MAX_HEADERS = 256;
const MAX_ARGS_DEPTH = 63;
const HISTORY_MAX_LINES = 10;
const ARGS_COST_FACTOR = 16;
const ARGS_COST_BASE = 64 * 1024;
const UNPACKED_VALUE_BYTES = 24;
const DEFAULTS = {
  namespace: 'sluice',
  mode: 'reliable', // as the C library and the sluice command: one default
  trackState: false,
  resultTtlMs: 24 * 3600 * 1000,
  revokeTtlMs: 3600 * 1000,
  dedupTtlMs: 24 * 3600 * 1000,
  maxMessageBytes: 1024 * 1024,
  resultPollIntervalMs: 5000,
  // A Keyring, or the path of a keyring file: every message is sealed
  // with it, and sealed results are opened (lib/seal.js).
  keyring: null,
};
const DEFAULT_QUEUE = 'default';
const INT32_MAX = 2 ** 31 - 1;
const FINAL_STATES = ['succeeded', 'failed', 'dead_lettered', 'cancelled'];
const STATES = ['queued', 'scheduled', 'running', 'retrying', ...FINAL_STATES];
const MODES = ['fast', 'reliable'];

// ---- Names -----------------------------------------------------------------

const WHAT = { id: 'task id', task: 'task name', queue: 'queue name' };

function wellFormed(s) {
  return typeof s.isWellFormed === 'function'
    ? s.isWellFormed()
    : !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?:^|[^\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);
}

/** True when s can be sent as a string: valid UTF-8 without NUL. */
function sendable(s) {
  return wellFormed(s) && !s.includes('\0');
}

/** What is wrong with a task id, task name or queue name, as
 * sluice_name__problem() says it, or null. */
function nameProblem(kind, value) {
  const what = WHAT[kind];
  if (value === undefined || value === null || value === '') return `the ${what} cannot be empty`;
  if (typeof value !== 'string') return `the ${what} must be a string, not ${typeof value}`;
  const limit = kind === 'id' ? MAX_ID_BYTES : MAX_NAME_BYTES;
  const len = Buffer.byteLength(value, 'utf8');
  if (len > limit) return `the ${what} “${value.slice(0, 40)}” is ${len} bytes long; the limit is ${limit}`;
  if (!sendable(value)) return `the ${what} is not valid UTF-8 (or holds a NUL byte)`;
  if (kind === 'task') {
    const b = Buffer.from(value, 'utf8');
    for (let i = 0; i < b.length; i++) {
      if (b[i] < 0x21 || b[i] > 0x7e) {
        return `the task name “${value}” has a space or a character that is not printable ASCII at byte ${i}; use names such as “mail.send”`;
      }
    }
  }
  return null;
}

function checkName(kind, value) {
  const problem = nameProblem(kind, value);
  if (problem !== null) throw new InvalidInputError(problem);
}

function checkNamespace(ns) {
  if (typeof ns !== 'string' || ns === '') {
    throw new InvalidInputError('the Redis namespace is empty: use a short name such as “sluice”');
  }
  if (Buffer.byteLength(ns, 'utf8') > 256) {
    throw new InvalidInputError('the Redis namespace is longer than 256 bytes: every key carries it, so choose a short one');
  }
  for (const c of ns) {
    if ('{}#'.includes(c) || c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f) {
      throw new InvalidInputError(`the Redis namespace “${ns}” contains ${JSON.stringify(c)}, which is not allowed (braces make the hash tag, “#” is reserved for partitions, control characters are refused): choose another name`);
    }
  }
}

// ---- Trace context (lib/trace-context.c) -----------------------------------

const FORM = 'expected 00-<32 hex digits>-<16 hex digits>-<2 hex digits>, lower case, e.g. 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

function hex(s, nonzero) {
  return /^[0-9a-f]*$/.test(s) && !(nonzero && /^0*$/.test(s));
}

function traceInvalid(what, value, why) {
  const shown = value.slice(0, 80) + (value.length > 80 ? '…' : '');
  return new InvalidInputError(`header ${what} “${shown}” is not a W3C trace context: ${why}`);
}

function checkTraceparent(tp) {
  if (tp.length < 55 || tp[2] !== '-' || tp[35] !== '-' || tp[52] !== '-'
      || !hex(tp.slice(0, 2)) || !hex(tp.slice(3, 35)) || !hex(tp.slice(36, 52))
      || !hex(tp.slice(53, 55))) {
    throw traceInvalid('traceparent', tp, FORM);
  }
  if (tp.startsWith('ff')) throw traceInvalid('traceparent', tp, 'version ff is forbidden');
  if (!hex(tp.slice(3, 35), true)) throw traceInvalid('traceparent', tp, 'the trace id is all zeros');
  if (!hex(tp.slice(36, 52), true)) throw traceInvalid('traceparent', tp, 'the parent id is all zeros');
  if (tp.startsWith('00') ? tp.length !== 55 : tp.length > 55 && tp[55] !== '-') {
    throw traceInvalid('traceparent', tp, 'extra characters after the flags');
  }
}

function keyChars(s) {
  return /^[a-z0-9_\-*/]*$/.test(s);
}

function validKey(key) {
  const at = key.indexOf('@');
  const first = at < 0 ? key : key.slice(0, at);
  if (first.length === 0 || first.length > (at >= 0 ? 241 : 256)
      || !/^[a-z0-9]/.test(first) || !keyChars(first.slice(1))) return false;
  if (at >= 0) {
    const system = key.slice(at + 1);
    if (system.length === 0 || system.length > 14 || !/^[a-z]/.test(system)
        || !keyChars(system.slice(1))) return false;
  }
  return true;
}

function validValue(v) {
  return v.length > 0 && v.length <= 256 && !v.endsWith(' ') && /^[\x20-\x7e]*$/.test(v)
    && !/[,=]/.test(v);
}

function checkTracestate(ts) {
  let n = 0;
  for (const member of ts.split(',')) {
    const m = member.replace(/^[ \t]+|[ \t]+$/g, '');
    if (m === '') continue;
    if (++n > 32) throw traceInvalid('tracestate', ts, 'more than 32 members');
    const eq = m.indexOf('=');
    if (eq < 0 || !validKey(m.slice(0, eq)) || !validValue(m.slice(eq + 1))) {
      throw traceInvalid('tracestate', ts, `member “${m.slice(0, 80)}” is not key=value (a key of lower-case letters, digits and _-*/, optionally tenant@system; a value of printable ASCII without , and =)`);
    }
  }
}

function checkHeaders(headers) {
  if (headers === undefined || headers === null) return {};
  if (typeof headers !== 'object') throw new InvalidInputError('headers must be an object of strings');
  const entries = headers instanceof Map ? [...headers] : Object.entries(headers);
  if (entries.length > MAX_HEADERS) {
    throw new InvalidInputError(`headers: ${entries.length} names, more than the limit of ${MAX_HEADERS}`);
  }
  const out = {};
  for (const [k, v] of entries) {
    if (typeof k !== 'string' || typeof v !== 'string') throw new InvalidInputError('headers: names and values must be strings');
    if (!sendable(k)) throw new InvalidInputError('headers (a name): not valid UTF-8 (or holds a NUL byte)');
    if (!sendable(v)) throw new InvalidInputError('headers (a value): not valid UTF-8 (or holds a NUL byte)');
    out[k] = v;
  }
  const tp = out.traceparent;
  const ts = out.tracestate;
  if (tp !== undefined) checkTraceparent(tp);
  if (ts !== undefined) {
    if (tp === undefined) {
      throw new InvalidInputError('header tracestate without a traceparent: a trace state belongs to the trace a traceparent names; set both, or neither');
    }
    checkTracestate(ts);
  }
  return out;
}

// ---- Options ---------------------------------------------------------------

// camelCase name -> wire name, in the wire order.
const OPTIONS = [
  ['maxAttempts', 'max_attempts'], ['initialBackoffMs', 'initial_backoff_ms'],
  ['multiplier', 'multiplier'], ['maxBackoffMs', 'max_backoff_ms'],
  ['jitter', 'jitter'], ['timeoutMs', 'timeout_ms'], ['expiresAt', 'expires_at'],
  ['storeResult', 'store_result'], ['resultTtlMs', 'result_ttl_ms'],
  ['deadLetter', 'dead_letter'],
];
const WIRE = Object.fromEntries(OPTIONS.map(([c, w]) => [w, c]));

function checkInt(field, v, low, high = Number.MAX_SAFE_INTEGER) {
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new InvalidInputError(`${field}: must be an integer, not ${JSON.stringify(v)}`);
  if (v < low || v > high) throw new InvalidInputError(`${field}: must be in [${low}, ${high}], found ${v}`);
  return v;
}

/** Options from camelCase or wire (snake_case) names; undefined/null =
 * unset. */
function checkOptions(options) {
  const o = {};
  if (options === undefined || options === null) return o;
  if (typeof options !== 'object') throw new InvalidInputError('options must be an object');
  for (const [k, v] of Object.entries(options)) {
    const name = WIRE[k] || k;
    if (!OPTIONS.some(([c]) => c === name)) {
      throw new InvalidInputError(`unknown option ${k}; known: ${OPTIONS.map(([c]) => c).join(', ')}`);
    }
    if (v !== undefined && v !== null) o[name] = v;
  }
  if (o.maxAttempts !== undefined) {
    if (o.maxAttempts === 0) throw new InvalidInputError('opts: max_attempts must be at least 1 (or unset to leave it to the level below)');
    checkInt('opts.max_attempts', o.maxAttempts, 1, INT32_MAX);
  }
  for (const f of ['initialBackoffMs', 'maxBackoffMs', 'timeoutMs', 'expiresAt', 'resultTtlMs']) {
    if (o[f] !== undefined) checkInt(`opts.${f}`, o[f], 0);
  }
  if (o.multiplier !== undefined) {
    if (typeof o.multiplier !== 'number' || !Number.isFinite(o.multiplier) || o.multiplier < 0) {
      throw new InvalidInputError(`opts.multiplier: must be a finite number >= 0, found ${o.multiplier}`);
    }
  }
  for (const f of ['jitter', 'storeResult', 'deadLetter']) {
    if (o[f] !== undefined && typeof o[f] !== 'boolean') throw new InvalidInputError(`opts.${f}: must be a boolean`);
  }
  return o;
}

// ---- Encoding --------------------------------------------------------------

const enc = (v) => Buffer.from(msgpack.encode(v));

function float64(x) {
  const b = Buffer.alloc(9);
  b[0] = 0xcb;
  b.writeDoubleBE(x, 1);
  return b;
}

function mapHeader(n) {
  if (n < 16) return Buffer.from([0x80 | n]);
  if (n < 65536) return Buffer.from([0xde, n >> 8, n & 0xff]);
  const b = Buffer.alloc(5);
  b[0] = 0xdf;
  b.writeUInt32BE(n, 1);
  return b;
}

function isContainer(v) {
  return Array.isArray(v) || v instanceof Map
    || (v !== null && typeof v === 'object' && !ArrayBuffer.isView(v)
        && !(v instanceof ArrayBuffer) && !(v instanceof msgpack.ExtData));
}

/** Checks args as the C encoder does (nesting, unpacking cost); returns
 * how many msgpack values they are. */
function walkArgs(value) {
  let count = 0;
  const stack = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop();
    count++;
    if (!isContainer(v)) continue;
    if (depth > MAX_ARGS_DEPTH) {
      throw new InvalidInputError(`args: nested deeper than ${MAX_ARGS_DEPTH} levels, the limit (workers decode messages nested at most ${MAX_ARGS_DEPTH + 1} deep, the envelope taking one level)`);
    }
    if (Array.isArray(v)) {
      for (const x of v) stack.push([x, depth + 1]);
    } else {
      const entries = v instanceof Map ? [...v] : Object.entries(v);
      for (const [k, x] of entries) {
        stack.push([k, depth + 1]);
        stack.push([x, depth + 1]);
      }
    }
  }
  return count;
}

function arrayHeader(n) {
  if (n < 16) return Buffer.from([0x90 | n]);
  if (n < 65536) return Buffer.from([0xdc, n >> 8, n & 0xff]);
  const b = Buffer.alloc(5);
  b[0] = 0xdd;
  b.writeUInt32BE(n, 1);
  return b;
}

/** Containers by hand, so that a Map is a msgpack map in its own order
 * (@msgpack/msgpack writes a Map as an empty map); scalars by the
 * library. Depth is bounded by walkArgs first. */
function encodeValue(v) {
  if (Array.isArray(v)) return Buffer.concat([arrayHeader(v.length), ...v.map(encodeValue)]);
  if (isContainer(v)) {
    const entries = v instanceof Map ? [...v] : Object.entries(v);
    return Buffer.concat([mapHeader(entries.length),
      ...entries.flatMap(([k, x]) => [encodeValue(k), encodeValue(x)])]);
  }
  return enc(v);
}

/** The msgpack bytes of args (empty for undefined/null: left out). A
 * Buffer given as args is sent as a bin, a Map as a map in its order;
 * integers beyond 2^53 cannot be given. */
function packArgs(args) {
  if (args === undefined || args === null) return Buffer.alloc(0);
  const n = walkArgs(args);
  let data;
  try {
    data = encodeValue(args);
  } catch (e) {
    throw new InvalidInputError(`args cannot be encoded as msgpack: ${e.message}`);
  }
  const cost = (n - 1) * UNPACKED_VALUE_BYTES;
  if (cost > ARGS_COST_FACTOR * data.length + ARGS_COST_BASE) {
    throw new TooLargeError(`args: ${n} values in ${data.length} bytes would take ${cost} bytes once unpacked (24 bytes per value), more than ${ARGS_COST_FACTOR} times their size plus ${ARGS_COST_BASE / 1024} KiB; pack dense data as a Buffer (bin) instead`);
  }
  return data;
}

function utf8Compare(a, b) {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** The envelope as the C library encodes it (PROTOCOL.md, "What Sluice
 * writes"). e: {id, task, queue, args (msgpack Buffer), attempt,
 * enqueuedAt, eta, opts (checked), headers, unknownSince, history,
 * unknown and unknownOpts (the msgpack key/value pairs of the keys this
 * build does not know, written after the known ones), seal
 * ("ALGORITHM:KEY-ID" when args are sealed, one msgpack bin: then version
 * 2, and `seal` after the other known keys)}. */
function encodeEnvelope(e) {
  const parts = [];
  let n = 0;
  const put = (k, v) => { parts.push(enc(k), Buffer.isBuffer(v) ? v : enc(v)); n++; };
  let args = e.args || Buffer.alloc(0);
  if (args.length === 1 && args[0] === 0xc0) args = Buffer.alloc(0);
  const sealed = typeof e.seal === 'string';
  put('v', sealed ? 2 : 1);
  put('id', e.id);
  put('task', e.task);
  put('queue', e.queue);
  if (args.length > 0) put('args', args);
  put('attempt', e.attempt || 1);
  if (e.enqueuedAt > 0) put('enqueued_at', e.enqueuedAt);
  if (e.eta > 0) put('eta', e.eta);
  const o = e.opts || {};
  const opts = [];
  if (o.maxAttempts >= 0) opts.push(['max_attempts', enc(o.maxAttempts)]);
  if (o.initialBackoffMs >= 0) opts.push(['initial_backoff_ms', enc(o.initialBackoffMs)]);
  if (o.multiplier > 0) opts.push(['multiplier', float64(o.multiplier)]); // 0 is "unset" on the wire
  if (o.maxBackoffMs >= 0) opts.push(['max_backoff_ms', enc(o.maxBackoffMs)]);
  if (o.jitter !== undefined) opts.push(['jitter', enc(o.jitter)]);
  if (o.timeoutMs > 0) opts.push(['timeout_ms', enc(o.timeoutMs)]);
  if (o.expiresAt > 0) opts.push(['expires_at', enc(o.expiresAt)]);
  if (o.storeResult !== undefined) opts.push(['store_result', enc(o.storeResult)]);
  if (o.resultTtlMs > 0) opts.push(['result_ttl_ms', enc(o.resultTtlMs)]);
  if (o.deadLetter !== undefined) opts.push(['dead_letter', enc(o.deadLetter)]);
  const unknownOpts = e.unknownOpts || [];
  if (opts.length > 0 || unknownOpts.length > 0) {
    put('opts', Buffer.concat([mapHeader(opts.length + unknownOpts.length),
      ...opts.flatMap(([k, v]) => [enc(k), v]), ...unknownOpts]));
  }
  if (e.unknownSince > 0) put('unknown_since', e.unknownSince);
  if (e.history && e.history.length > 0) put('history', e.history);
  const headers = e.headers || {};
  const names = Object.keys(headers).sort(utf8Compare);
  if (names.length > 0) {
    put('headers', Buffer.concat([mapHeader(names.length),
      ...names.flatMap((k) => [enc(k), enc(headers[k])])]));
  }
  if (sealed) put('seal', e.seal);
  // The keys this build does not know, after the known ones, as they came.
  for (const pair of e.unknown || []) {
    parts.push(pair);
    n++;
  }
  return Buffer.concat([mapHeader(n), ...parts]);
}

/** The end offset of the msgpack value at pos in buf (throws on
 * truncated input or 0xc1). */
function skip(buf, pos) {
  let left = 1;
  while (left > 0) {
    if (pos >= buf.length) throw new RangeError('truncated');
    const m = buf[pos++];
    left--;
    let len = 0;
    let items = 0;
    if (m <= 0x7f || m >= 0xe0 || (m >= 0xc2 && m <= 0xc3) || m === 0xc0) {
      // fixint, nil, bool
    } else if (m >= 0x80 && m <= 0x8f) items = 2 * (m & 0x0f);
    else if (m >= 0x90 && m <= 0x9f) items = m & 0x0f;
    else if (m >= 0xa0 && m <= 0xbf) len = m & 0x1f;
    else {
      const need = (k) => { if (pos + k > buf.length) throw new RangeError('truncated'); };
      switch (m) {
        case 0xc4: case 0xd9: need(1); len = buf[pos]; pos += 1; break;
        case 0xc5: case 0xda: need(2); len = buf.readUInt16BE(pos); pos += 2; break;
        case 0xc6: case 0xdb: need(4); len = buf.readUInt32BE(pos); pos += 4; break;
        case 0xc7: need(1); len = buf[pos] + 1; pos += 1; break;
        case 0xc8: need(2); len = buf.readUInt16BE(pos) + 1; pos += 2; break;
        case 0xc9: need(4); len = buf.readUInt32BE(pos) + 1; pos += 4; break;
        case 0xca: len = 4; break;
        case 0xcb: len = 8; break;
        case 0xcc: case 0xd0: len = 1; break;
        case 0xcd: case 0xd1: len = 2; break;
        case 0xce: case 0xd2: len = 4; break;
        case 0xcf: case 0xd3: len = 8; break;
        case 0xd4: len = 2; break;
        case 0xd5: len = 3; break;
        case 0xd6: len = 5; break;
        case 0xd7: len = 9; break;
        case 0xd8: len = 17; break;
        case 0xdc: need(2); items = buf.readUInt16BE(pos); pos += 2; break;
        case 0xdd: need(4); items = buf.readUInt32BE(pos); pos += 4; break;
        case 0xde: need(2); items = 2 * buf.readUInt16BE(pos); pos += 2; break;
        case 0xdf: need(4); items = 2 * buf.readUInt32BE(pos); pos += 4; break;
        default: throw new RangeError('not msgpack');
      }
    }
    pos += len;
    if (pos > buf.length) throw new RangeError('truncated');
    left += items;
  }
  return pos;
}

function decodeOne(buf) {
  return msgpack.decode(buf);
}

/** The map header at the start of buf: {count, pos} (pos: the first key),
 * or null when buf does not start with a map. */
function readMapHeader(buf) {
  const m = buf[0];
  if (m >= 0x80 && m <= 0x8f) return { count: m & 0x0f, pos: 1 };
  if (m === 0xde) return { count: buf.readUInt16BE(1), pos: 3 };
  if (m === 0xdf) return { count: buf.readUInt32BE(1), pos: 5 };
  return null;
}

/** `opts` from its msgpack bytes, the pairs of the options this build does
 * not know pushed onto unknown; null when it is not a map of string keys. */
function readOpts(buf, unknown) {
  const head = readMapHeader(buf);
  if (head === null) return null;
  let { pos } = head;
  const n = head.count;
  const opts = {};
  const seen = new Set();
  for (let i = 0; i < n; i++) {
    const kend = skip(buf, pos);
    const key = decodeOne(buf.subarray(pos, kend));
    const vend = skip(buf, kend);
    if (typeof key !== 'string') return null;
    if (KNOWN_OPTIONS.has(key)) {
      if (Object.prototype.hasOwnProperty.call(opts, key)) return null;
      opts[key] = decodeOne(buf.subarray(kend, vend));
    } else {
      if (carried(key) && !seen.has(key)) unknown.push(Buffer.from(buf.subarray(pos, vend)));
      seen.add(key);
    }
    pos = vend;
  }
  return opts;
}

/** The fields of an envelope (args kept as its bytes, the keys this build
 * does not know as msgpack pairs in __unknown and __unknownOpts), or null
 * when it is not one. */
function decodeEnvelope(data) {
  try {
    const buf = Buffer.from(data);
    let first = 0;
    while (first < buf.length && ' \t\r\n'.includes(String.fromCharCode(buf[first]))) first++;
    if (buf[first] === 0x7b) return checkedEnvelope(decodeJsonEnvelope(buf));
    const head = readMapHeader(buf);
    if (head === null) return null;
    let { pos } = head;
    const n = head.count;
    const env = { __unknown: [], __unknownOpts: [] };
    const seen = new Set();
    for (let i = 0; i < n; i++) {
      const kend = skip(buf, pos);
      const key = decodeOne(buf.subarray(pos, kend));
      const vend = skip(buf, kend);
      const raw = buf.subarray(kend, vend);
      if (typeof key !== 'string') return null;
      if (!KNOWN_KEYS.has(key)) {
        // A newer producer's key: its bytes, carried as they came; only
        // the first of a repeated one, as in C.
        if (carried(key) && !seen.has(key)) env.__unknown.push(Buffer.from(buf.subarray(pos, vend)));
        seen.add(key);
        pos = vend;
        continue;
      }
      if (Object.prototype.hasOwnProperty.call(env, key) && key !== 'args') return null;
      if (key === 'opts') {
        const opts = readOpts(raw, env.__unknownOpts);
        if (opts === null) return null;
        env.opts = opts;
      } else env[key] = key === 'args' ? Buffer.from(raw) : decodeOne(raw);
      pos = vend;
    }
    if (pos !== buf.length) return null;
    return checkedEnvelope(env);
  } catch (e) {
    return null;
  }
}

/** env when its required fields are there, history cut to its newest 10
 * lines as the C decoder keeps them; else null. */
function checkedEnvelope(env) {
  if (env.v !== 1 && env.v !== 2) return null;
  for (const k of ['id', 'task', 'queue']) if (typeof env[k] !== 'string') return null;
  if (!Number.isInteger(env.attempt)) return null;
  // Sealed args (PROTOCOL.md): version 2, a well-formed label, and one bin
  // of at least a nonce and a tag. One form per message: version 2 without
  // `seal` is refused, as the C decoder does.
  if (env.v === 2 && !Object.prototype.hasOwnProperty.call(env, 'seal')) return null;
  if (Object.prototype.hasOwnProperty.call(env, 'seal')
      && (env.v !== 2 || !seal.validLabel(env.seal) || seal.binBody(env.args || Buffer.alloc(0)) === null)) {
    return null;
  }
  if (Array.isArray(env.history)) env.history = env.history.slice(-HISTORY_MAX_LINES);
  return env;
}

// ---- Result records --------------------------------------------------------

const RECORD_KEYS = [
  ['id', 'id'], ['state', 'state'], ['task', 'task'], ['queue', 'queue'],
  ['attempt', 'attempt'], ['value', 'value'], ['error', 'error'],
  ['deadLetterReason', 'dlq_reason'], ['worker', 'worker'], ['enqueuedAt', 'enqueued_at'],
  ['startedAt', 'started_at'], ['finishedAt', 'finished_at'],
];

function newResult(fields) {
  const r = {
    id: '', state: 'unknown', task: null, queue: null, attempt: 0, value: null,
    hasValue: false, error: null, deadLetterReason: null, worker: null, enqueuedAt: 0,
    startedAt: 0, finishedAt: 0, dueAt: 0,
    // "aes-256-gcm:KEY-ID" while the value is sealed and could not be
    // opened (inspect without the key): value is then null, and
    // encryptedWith the key's id.
    seal: null, encryptedWith: null, ...fields,
  };
  r.final = FINAL_STATES.includes(r.state);
  return r;
}

/** A record as sluice_result_encode() writes it. */
function encodeRecord(r) {
  const parts = [enc('v'), enc(1)];
  for (const [c, w] of RECORD_KEYS) {
    const v = r[c];
    if (w === 'attempt' || w.endsWith('_at')) {
      if (v > 0) parts.push(enc(w), enc(v));
    } else if (w === 'value') {
      if (r.hasValue) parts.push(enc(w), enc(v));
    } else if (v !== undefined && v !== null) {
      parts.push(enc(w), enc(v));
    }
  }
  return Buffer.concat([mapHeader(parts.length / 2), ...parts]);
}

function decodeRecord(data, id) {
  let m;
  try {
    m = msgpack.decode(data);
  } catch (e) {
    throw new MalformedReplyError(`the record of task ${id} cannot be read: ${e.message}`);
  }
  if (m === null || typeof m !== 'object' || (m.v !== 1 && m.v !== 2) || typeof m.id !== 'string'
      || typeof m.state !== 'string') {
    throw new MalformedReplyError(`the record of task ${id} is not a Sluice result record (format version 1 or 2)`);
  }
  // A sealed value (version 2): one bin of at least a nonce and a tag.
  const sealed = Object.prototype.hasOwnProperty.call(m, 'seal');
  if (sealed && (m.v !== 2 || !seal.validLabel(m.seal) || !(m.value instanceof Uint8Array)
      || m.value.length < seal.OVERHEAD)) {
    throw new MalformedReplyError(`the record of task ${id} has a malformed seal (version 2, “ALGORITHM:KEY-ID”, a value of at least ${seal.OVERHEAD} bytes)`);
  }
  const f = { id: m.id, state: STATES.includes(m.state) ? m.state : 'unknown' };
  for (const [c, w] of RECORD_KEYS) {
    if (['task', 'queue', 'error', 'dlq_reason', 'worker'].includes(w) && typeof m[w] === 'string') f[c] = m[w];
    if ((w === 'attempt' || w.endsWith('_at')) && Number.isInteger(m[w])) f[c] = m[w];
  }
  if (Object.prototype.hasOwnProperty.call(m, 'value')) {
    f.value = m.value;
    f.hasValue = true;
  }
  const r = newResult(f);
  if (sealed) {
    Object.defineProperty(r, 'sealedValue', { value: Buffer.from(m.value), writable: true, enumerable: false });
    r.seal = m.seal;
    r.encryptedWith = seal.keyIdOf(m.seal);
    r.value = null;
  }
  return r;
}

/** Opens r's sealed value in place with keyring; throws SealError (the
 * value stays sealed). A value in clear is left as it is. */
function openResult(r, keyring) {
  if (r.seal === null || r.seal === undefined) return r;
  let plain;
  try {
    plain = seal.openSealed(keyring, seal.RESULT, r.seal, r.id, r.task, r.queue,
      Buffer.concat([seal.binHeader(r.sealedValue.length), r.sealedValue]));
  } catch (e) {
    if (!(e instanceof SealError)) throw e;
    if (r.seal.startsWith(`${seal.ALGORITHM}:`) && (!keyring || !keyring.hasKey(r.encryptedWith))) {
      throw new SealError(`the result of task ${r.id} is encrypted with key ${r.encryptedWith}: give the client the keyring`);
    }
    throw new SealError(`the result of task ${r.id} is sealed: ${e.message}`);
  }
  try {
    r.value = msgpack.decode(plain);
  } catch (e) {
    throw new MalformedReplyError(`the opened result of task ${r.id} cannot be read: ${e.message}`);
  }
  r.seal = null;
  r.encryptedWith = null;
  r.sealedValue = Buffer.alloc(0);
  return r;
}

function splitRecord(data) {
  if (data === null || data === undefined) return [null, false];
  if (data[0] === 0x46 || data[0] === 0x50) return [data.subarray(1), data[0] === 0x46];
  return [data, false];
}

// ---- Scripts ---------------------------------------------------------------

const LUA_DIR = path.join(__dirname, '..', 'lua');
const lua = (name) => fs.readFileSync(path.join(LUA_DIR, name));

/** A script as the C broker assembles it (brokers/redis/redis-scripts.h):
 * the step's shebang line, prelude, hooks, the mode's transport, library,
 * the rest of the step (a bare one, whose second line starts "-- bare:":
 * shebang line, prelude, the rest). */
function script(mode, name) {
  const source = lua(`${name}.lua`);
  const nl = source.indexOf(0x0a) + 1;
  // A script whose second line says "-- bare:" needs the prelude alone.
  const bare = source.subarray(nl, nl + 8).toString() === '-- bare:';
  const text = bare
    ? Buffer.concat([source.subarray(0, nl), lua('prelude.lua'), source.subarray(nl)])
    : Buffer.concat([source.subarray(0, nl), lua('prelude.lua'), lua('hooks.lua'),
      lua(`transport-${mode}.lua`), lua('library.lua'), source.subarray(nl)]);
  return { name, text, sha: crypto.createHash('sha1').update(text).digest('hex') };
}

const PRODUCER_SCRIPTS = ['enqueue', 'cancel_scheduled', 'revoke', 'lookup_task', 'dlq_replay'];

function scriptsFor(mode) {
  return Object.fromEntries(PRODUCER_SCRIPTS.map((n) => [n, script(mode, n)]));
}

// ---- What a namespace records ({ns}:meta) ----------------------------------

// The version of the key layout these scripts use (SLUICE_REDIS_LAYOUT_VERSION
// of brokers/redis/redis-keys.h); a namespace of a newer one is refused.
const LAYOUT_VERSION = 1;
// The fields of {ns}:meta a client reads on every new connection, in order.
const META_FIELDS = ['mode', 'layout', 'scripts'];

/** The version lua/VERSION gives the script set, and the SHA-1 of the .lua
 * files this package ships: every file in byte order of its path, as path
 * NUL length NUL bytes (PROTOCOL.md, "Versions of a namespace"). */
function scriptSet() {
  const line = lua('VERSION').toString().split('\n').find((l) => l.startsWith('version '));
  const version = Number(line.split(' ')[1]);
  const walk = (dir) => fs.readdirSync(path.join(LUA_DIR, dir), { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? walk(path.posix.join(dir, e.name))
      : [path.posix.join(dir, e.name)]));
  const paths = walk('').filter((f) => f.endsWith('.lua'))
    .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  const h = crypto.createHash('sha1');
  for (const f of paths) {
    const data = lua(f);
    h.update(Buffer.concat([Buffer.from(`${f}\0${data.length}\0`), data]));
  }
  return { version, sha1: h.digest('hex') };
}

const { version: SCRIPTS_VERSION, sha1: SCRIPTS_SHA1 } = scriptSet();
// As {ns}:meta's field scripts holds it.
const SCRIPTS = `${SCRIPTS_VERSION}:${SCRIPTS_SHA1}`;

/** What to record in @meta given the META_FIELDS read from it, as the C
 * client does (brokers/redis/redis-broker.c): a new namespace gets the
 * layout version, the script set and the mode, in that order with HSETNX;
 * one with a mode and no layout was made before layouts were recorded and
 * is version 1. Only what is read back afterwards decides. */
function metaWrites(meta, mode, [recordedMode, layout, scripts]) {
  if (recordedMode === null) {
    return [['hsetnx', meta, 'layout', String(LAYOUT_VERSION)],
      ['hsetnx', meta, 'scripts', SCRIPTS], ['hsetnx', meta, 'mode', mode]];
  }
  if (layout === null || scripts === null) {
    return [['hsetnx', meta, 'layout', '1'], ['hsetnx', meta, 'scripts', SCRIPTS]];
  }
  return [];
}

/** Throws for a namespace of the other mode (WrongModeError), of a newer
 * layout, or whose script set has this client's version and other bytes
 * (WrongVersionError). Returns what to write after (a newer client records
 * its set) and a warning to give once, or null. With @checking, only the
 * mode and the layout: what is checked before anything is written. */
function checkMeta(settings, [recordedMode, layout, scripts], checking = false) {
  const { namespace: ns, mode, prefix } = settings;
  if (recordedMode !== null && recordedMode !== mode) {
    throw new WrongModeError(`the namespace “${ns}” is used in ${recordedMode} mode, but this client is set up for ${mode} mode: producers, workers and commands of one namespace must use the same mode; pass mode: "${recordedMode}", or use another namespace`);
  }
  if (layout !== null) {
    if (!/^[0-9]+$/.test(layout) || Number(layout) < 1) {
      throw new WrongVersionError(`${prefix}meta records layout “${layout}”, which is not a layout version: it was written by hand, or not by Sluice`);
    }
    if (Number(layout) > LAYOUT_VERSION) {
      throw new WrongVersionError(`the namespace “${ns}” has layout version ${layout}, newer than this program's (${LAYOUT_VERSION}): upgrade this program (sluice-client) to the Sluice that migrated it, or a later one`);
    }
  }
  if (checking || scripts === null) return { after: [], warning: null };
  const m = /^([0-9]+):([0-9a-f]{40})$/.exec(scripts);
  if (m === null || Number(m[1]) < 1) {
    throw new WrongVersionError(`${prefix}meta records scripts “${scripts}”, which is not a script set (VERSION:SHA1): delete the field (HDEL ${prefix}meta scripts) and the next client records its own`);
  }
  const version = Number(m[1]);
  if (version === SCRIPTS_VERSION && m[2] !== SCRIPTS_SHA1) {
    throw new WrongVersionError(`the namespace “${ns}” runs script set ${SCRIPTS_VERSION} with SHA-1 ${m[2]}, but this client's set ${SCRIPTS_VERSION} has SHA-1 ${SCRIPTS_SHA1}: one of them runs scripts that differ from its release's; install every client from released Sluice packages`);
  }
  if (version < SCRIPTS_VERSION) {
    return { after: [['hset', `${prefix}meta`, 'scripts', SCRIPTS]], warning: null };
  }
  if (version > SCRIPTS_VERSION) {
    return { after: [], warning: `the namespace “${ns}” has clients of a newer script set (${version}) than this one's (${SCRIPTS_VERSION}): upgrade this program when you can` };
  }
  return { after: [], warning: null };
}

// ---- Requests --------------------------------------------------------------

function checkSettings(options) {
  const s = { ...DEFAULTS };
  for (const [k, v] of Object.entries(options || {})) {
    if (!(k in DEFAULTS)) throw new InvalidInputError(`unknown client option ${k}; known: ${Object.keys(DEFAULTS).join(', ')}`);
    if (v !== undefined) s[k] = v;
  }
  s.keyring = seal.asKeyring(s.keyring);
  checkNamespace(s.namespace);
  if (!MODES.includes(s.mode)) throw new InvalidInputError(`mode must be “fast” or “reliable”, not ${JSON.stringify(s.mode)}`);
  for (const k of ['resultTtlMs', 'revokeTtlMs', 'dedupTtlMs', 'maxMessageBytes', 'resultPollIntervalMs']) checkInt(k, s[k], 1);
  s.prefix = `{${s.namespace}}:`;
  return s;
}

/** The checks and encoding of sluice_client_enqueue(), in its order. r:
 * {task, args, queue, id, delayMs, etaMs, headers, options}. */
function prepare(s, r, now) {
  checkName('task', r.task);
  const queue = r.queue === undefined || r.queue === null ? DEFAULT_QUEUE : r.queue;
  checkName('queue', queue);
  if (r.id !== undefined && r.id !== null) checkName('id', r.id);
  const delayMs = r.delayMs === undefined ? 0 : r.delayMs;
  const etaMs = r.etaMs === undefined ? 0 : r.etaMs;
  for (const [f, v] of [['delayMs', delayMs], ['etaMs', etaMs]]) {
    if (typeof v !== 'number' || !Number.isInteger(v)) throw new InvalidInputError(`${f} must be an integer`);
  }
  if (delayMs < 0 || etaMs < 0) throw new InvalidInputError('delayMs and etaMs cannot be negative');
  const headers = checkHeaders(r.headers);
  const opts = checkOptions(r.options);
  let args = packArgs(r.args);
  const id = r.id !== undefined && r.id !== null ? r.id : crypto.randomUUID();
  let eta = etaMs > 0 ? etaMs : delayMs > 0 ? now + delayMs : 0;
  if (eta <= now) eta = 0; // an ETA in the past is simply due
  let label;
  if (s.keyring) {
    // Everything is sealed, nil args included: the worker seals the
    // result of a sealed message only, and this client can open it.
    ({ sealed: args, label } = s.keyring.seal(seal.ARGS, id, r.task, queue,
      args.length > 0 ? args : Buffer.from([0xc0])));
  }
  const payload = encodeEnvelope({
    id, task: r.task, queue, args, attempt: 1, enqueuedAt: now, eta, opts, headers, seal: label,
  });
  if (payload.length > s.maxMessageBytes) {
    throw new TooLargeError(`cannot enqueue “${r.task}”: the message is ${payload.length} bytes, over the limit of ${s.maxMessageBytes} (maxMessageBytes); keep large data elsewhere and pass a reference to it`);
  }
  let record = Buffer.alloc(0);
  if (s.trackState) {
    record = Buffer.concat([Buffer.from('P'), encodeRecord(newResult({
      id, state: eta > 0 ? 'scheduled' : 'queued', task: r.task, queue, enqueuedAt: now,
    }))]);
  }
  return {
    id, queue, payload, due: eta, dedup: r.id !== undefined && r.id !== null, record,
    recordTtlMs: opts.resultTtlMs > 0 ? opts.resultTtlMs : s.resultTtlMs,
  };
}

/** ARGV of enqueue.lua: token, the distinct queues, then the items. */
function enqueueArgv(s, items) {
  const queues = [];
  for (const p of items) if (!queues.includes(p.queue)) queues.push(p.queue);
  const argv = [crypto.randomBytes(16).toString('hex'), String(queues.length), ...queues];
  for (const p of items) {
    if (p.due <= 0 && !p.dedup && p.record.length === 0) {
      argv.push('r', p.queue, p.payload);
    } else {
      argv.push('s', p.id, p.queue, p.payload, String(p.due),
        String(p.dedup ? s.dedupTtlMs : 0), p.record, String(p.recordTtlMs));
    }
  }
  return argv;
}

function enqueueReply(reply, n) {
  const s = Buffer.isBuffer(reply) ? reply.toString('latin1') : reply;
  if (typeof s !== 'string' || s.length !== n || !/^[01]*$/.test(s)) {
    throw new MalformedReplyError(`enqueue: Redis answered ${JSON.stringify(String(reply))}, not one 0/1 per message`);
  }
  return [...s].map((c) => c === '1');
}

function intReply(what, reply) {
  if (typeof reply !== 'number' || !Number.isInteger(reply)) {
    throw new MalformedReplyError(`${what}: Redis answered ${JSON.stringify(String(reply))}, not an integer`);
  }
  return reply;
}

function pairReply(what, reply) {
  if (!Array.isArray(reply) || reply.length !== 2) {
    throw new MalformedReplyError(`${what}: Redis answered ${JSON.stringify(String(reply))}, not a pair`);
  }
  return [intReply(what, reply[0]), intReply(what, reply[1])];
}

function cancelRecord(id, now) {
  return Buffer.concat([Buffer.from('F'), encodeRecord(newResult({
    id, state: 'cancelled', error: 'cancelled before it ran', finishedAt: now,
  }))]);
}

// ---- Dead letters ----------------------------------------------------------

// Every reason the C library buries a message for, in its order: a copy of
// its one list, sluice_dead_letter_reasons() (sluice-brokers.h), which
// test/encoding.test.js compares with the C build's (tests/c-oracle).
const DEAD_LETTER_REASONS = Object.freeze([
  'max_attempts', 'non_retryable', 'malformed', 'unknown_task', 'expired',
  'max_deliveries', 'snoozed_too_often',
]);

/** A dlqList reason filter: null/undefined, or one of DEAD_LETTER_REASONS
 * (as `sluice dlq list --reason` takes it). */
function checkReason(reason) {
  if (reason !== undefined && reason !== null && !DEAD_LETTER_REASONS.includes(reason)) {
    throw new InvalidInputError(
      `unknown dead-letter reason “${reason}”; the reasons are ${DEAD_LETTER_REASONS.join(', ')}`);
  }
}

function deadLetterFromEntry(entry, keyring = null) {
  if (!Array.isArray(entry) || entry.length !== 2 || !Array.isArray(entry[1])) {
    throw new MalformedReplyError('dead letter: not a stream entry');
  }
  const dl = {
    entryId: String(entry[0]), payload: Buffer.alloc(0), reason: null, source: null,
    deliveries: 0, at: 0, taskId: null, task: null, detail: null,
    // The message's args, decoded (opened with the client's keyring when
    // sealed); hasArgs false when it has none or they could not be read or
    // opened. seal: "aes-256-gcm:KEY-ID" when they are sealed; argsError
    // says why they are not shown, e.g. "encrypted with key K: give the
    // client the keyring".
    args: null, hasArgs: false, seal: null, encryptedWith: null, argsError: null,
  };
  const f = entry[1];
  for (let i = 0; i + 1 < f.length; i += 2) {
    const k = String(f[i]);
    const v = f[i + 1];
    if (k === 'payload') dl.payload = Buffer.from(v);
    else if (k === 'task_id') dl.taskId = String(v);
    else if (['reason', 'source', 'task', 'detail'].includes(k)) dl[k] = String(v);
    else if (k === 'deliveries' || k === 'at') {
      const n = Number(String(v));
      if (Number.isInteger(n)) dl[k] = n;
    }
  }
  readDeadLetterArgs(dl, keyring);
  return dl;
}

function readDeadLetterArgs(dl, keyring) {
  const env = decodeEnvelope(dl.payload);
  if (env === null) return;
  let data = env.args || Buffer.alloc(0);
  if (typeof env.seal === 'string') {
    dl.seal = env.seal;
    dl.encryptedWith = seal.keyIdOf(env.seal);
    if (env.seal.startsWith(`${seal.ALGORITHM}:`) && (!keyring || !keyring.hasKey(dl.encryptedWith))) {
      dl.argsError = `encrypted with key ${dl.encryptedWith}: give the client the keyring`;
      return;
    }
    try {
      data = seal.openSealed(keyring, seal.ARGS, env.seal, env.id, env.task, env.queue, data);
    } catch (e) {
      if (!(e instanceof SealError)) throw e;
      dl.argsError = e.message;
      return;
    }
  }
  if (data.length === 0 || (data.length === 1 && data[0] === 0xc0)) return;
  try {
    dl.args = msgpack.decode(data);
    dl.hasArgs = true;
  } catch (e) {
    dl.argsError = `the args cannot be read: ${e.message}`;
  }
}

function validEntryId(id) {
  return typeof id === 'string' && /^[0-9]+-[0-9]+$/.test(id);
}

/** What sluice_client_dlq_replay() submits for a dead letter. */
function replaySubmit(s, dl, keepAttempt, now) {
  const raw = () => ({
    id: dl.taskId ? dl.taskId : `replay:${dl.entryId}`, queue: dl.source || DEFAULT_QUEUE,
    payload: dl.payload, record: Buffer.alloc(0), recordTtlMs: s.resultTtlMs,
  });
  const env = decodeEnvelope(dl.payload);
  if (env === null) return raw(); // back byte for byte: maybe a newer worker reads it
  let payload;
  try {
    const wire = env.opts && typeof env.opts === 'object' ? env.opts : {};
    const given = {};
    for (const [w, v] of Object.entries(wire)) {
      // 0 is "unset" on the wire for these two (PROTOCOL.md).
      if (WIRE[w] && !(v === 0 && (w === 'max_attempts' || w === 'multiplier'))) given[WIRE[w]] = v;
    }
    const history = env.history || [];
    if (!Array.isArray(history) || !history.every((h) => typeof h === 'string')) return raw();
    payload = encodeEnvelope({
      id: env.id, task: env.task, queue: env.queue, args: env.args,
      attempt: keepAttempt ? env.attempt : 1, enqueuedAt: env.enqueued_at || 0, eta: 0,
      opts: checkOptions(given), headers: checkHeaders(env.headers), history,
      unknown: env.__unknown, unknownOpts: env.__unknownOpts, seal: env.seal,
    });
  } catch (e) {
    if (e instanceof InvalidInputError || e instanceof TypeError) return raw();
    throw e;
  }
  const record = Buffer.concat([Buffer.from('P'), encodeRecord(newResult({
    id: env.id, state: 'queued', task: env.task, queue: env.queue, enqueuedAt: now,
  }))]);
  return { id: env.id, queue: env.queue, payload, record, recordTtlMs: s.resultTtlMs };
}

function replayArgv(entryId, p) {
  return [entryId, p.id, p.queue, p.payload, '0', '0', p.record, String(p.recordTtlMs)];
}

// ---- Inspect ---------------------------------------------------------------

/** What inspect says of a task lookup_task.lua found without a record:
 * {1, due, queue, payload} scheduled, {2, entry} dead, {0} nowhere. */
function resultOfLookup(id, reply) {
  if (!Array.isArray(reply) || reply.length === 0) throw new MalformedReplyError('lookup_task: unexpected reply');
  const place = intReply('lookup_task', reply[0]);
  if (place === 0) return null;
  if (place === 1 && reply.length === 4) {
    const due = Math.trunc(Number(String(reply[1])));
    const env = decodeEnvelope(reply[3]);
    if (env === null) {
      return newResult({
        id, state: 'scheduled', queue: String(reply[2]), dueAt: due,
        error: 'its message on the schedule cannot be decoded; it is buried `malformed` when due',
      });
    }
    const r = newResult({
      id, state: env.attempt > 1 ? 'retrying' : 'scheduled', task: env.task, queue: env.queue,
      attempt: env.attempt, enqueuedAt: env.enqueued_at || 0, dueAt: due,
    });
    if (env.unknown_since) {
      r.error = `deferred: no worker knows a task named “${env.task}” (since ${iso8601(env.unknown_since)}); it is buried unknown_task if none does by unknown_task_timeout`;
    } else if (Array.isArray(env.history) && env.history.length > 0) {
      r.error = env.history[env.history.length - 1];
    }
    return r;
  }
  if (place === 2 && reply.length === 2) {
    const dl = deadLetterFromEntry(reply[1]);
    const env = decodeEnvelope(dl.payload);
    const r = newResult({
      id, state: 'dead_lettered', task: dl.task, queue: dl.source, error: dl.detail,
      deadLetterReason: dl.reason,
    });
    if (env !== null) {
      r.attempt = env.attempt;
      r.enqueuedAt = env.enqueued_at || 0;
      r.finishedAt = dl.at;
    }
    return r;
  }
  throw new MalformedReplyError('lookup_task: unexpected reply');
}

/** As g_date_time_format_iso8601() writes a UTC time of whole seconds. */
function iso8601(ms) {
  const d = new Date(Math.floor(Number(ms) / 1000) * 1000);
  return Number.isNaN(d.getTime()) ? 'an unknown time' : d.toISOString().replace('.000Z', 'Z');
}

function dueOfLookup(reply) {
  return Array.isArray(reply) && reply.length === 4 && reply[0] === 1
    ? Math.trunc(Number(String(reply[1]))) : 0;
}

module.exports = {
  MAX_ID_BYTES, MAX_NAME_BYTES, MAX_HEADERS, MAX_ARGS_DEPTH, DEFAULTS, MODES,
  PRODUCER_SCRIPTS, LUA_DIR, nameProblem, checkName, checkHeaders, checkOptions,
  packArgs, encodeEnvelope, decodeEnvelope, skip, encodeRecord, decodeRecord,
  splitRecord, newResult, openResult, script, scriptsFor, checkSettings, prepare, enqueueArgv,
  enqueueReply, intReply, pairReply, cancelRecord, DEAD_LETTER_REASONS, checkReason,
  deadLetterFromEntry, validEntryId,
  replaySubmit, replayArgv, resultOfLookup, dueOfLookup, LAYOUT_VERSION,
  META_FIELDS, SCRIPTS_VERSION, SCRIPTS_SHA1, SCRIPTS, metaWrites, checkMeta,
};

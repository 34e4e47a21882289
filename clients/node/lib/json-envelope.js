'use strict';
// A JSON envelope (PROTOCOL.md, "The JSON encoding"), read as the C
// library reads it: strictly (no duplicate keys, no lone surrogates, no
// U+0000, no NaN), and with its `args` converted to the msgpack bytes the
// C library converts them to. JSON.parse cannot do this: it forgets
// whether a number was written 2 or 2.0, which the conversion keeps apart.

const msgpack = require('@msgpack/msgpack');

class JsonNumber {
  constructor(text) {
    this.text = text;
    this.integral = /^-?\d+$/.test(text);
  }
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

function fail(why, at) {
  throw new SyntaxError(`${why} at ${at}`);
}

/** The tree of text: objects as arrays of [key, value] pairs (in order),
 * numbers as JsonNumber. */
function parse(text) {
  let i = 0;
  const ws = () => { while (i < text.length && ' \t\r\n'.includes(text[i])) i++; };
  const str = () => {
    let out = '';
    i++;
    for (;;) {
      if (i >= text.length) fail('unterminated string', i);
      const c = text[i++];
      if (c === '"') break;
      if (c < ' ') fail('a control character in a string', i);
      if (c !== '\\') { out += c; continue; }
      const e = text[i++];
      const simple = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
      if (e in simple) { out += simple[e]; continue; }
      if (e !== 'u' || !/^[0-9a-fA-F]{4}$/.test(text.slice(i, i + 4))) fail('a bad escape', i);
      let u = parseInt(text.slice(i, i + 4), 16);
      i += 4;
      if (u === 0) fail('U+0000', i);
      if (u >= 0xd800 && u <= 0xdbff) {
        if (text.slice(i, i + 2) !== '\\u' || !/^[dD][c-fC-F][0-9a-fA-F]{2}$/.test(text.slice(i + 2, i + 6))) fail('a lone surrogate', i);
        const lo = parseInt(text.slice(i + 2, i + 6), 16);
        i += 6;
        u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
      } else if (u >= 0xdc00 && u <= 0xdfff) {
        fail('a lone surrogate', i);
      }
      out += String.fromCodePoint(u);
    }
    if (out.includes('\0')) fail('U+0000', i);
    return out;
  };
  const value = (depth) => {
    if (depth > 1000) fail('nested too deep', i);
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const pairs = [];
      const seen = new Set();
      ws();
      if (text[i] === '}') { i++; return { pairs }; }
      for (;;) {
        ws();
        if (text[i] !== '"') fail('a key expected', i);
        const k = str();
        if (seen.has(k)) fail('a key given twice', i);
        seen.add(k);
        ws();
        if (text[i++] !== ':') fail('":" expected', i);
        pairs.push([k, value(depth + 1)]);
        ws();
        const sep = text[i++];
        if (sep === '}') return { pairs };
        if (sep !== ',') fail('"," or "}" expected', i);
      }
    }
    if (c === '[') {
      i++;
      const items = [];
      ws();
      if (text[i] === ']') { i++; return items; }
      for (;;) {
        items.push(value(depth + 1));
        ws();
        const sep = text[i++];
        if (sep === ']') return items;
        if (sep !== ',') fail('"," or "]" expected', i);
      }
    }
    if (c === '"') return str();
    for (const [word, v] of [['true', true], ['false', false], ['null', null]]) {
      if (text.startsWith(word, i)) { i += word.length; return v; }
    }
    const m = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/.exec(text.slice(i, i + 400));
    if (m === null) fail('not JSON', i);
    i += m[0].length;
    return new JsonNumber(m[0]);
  };
  const root = value(0);
  ws();
  if (i !== text.length) fail('bytes after the envelope', i);
  return root;
}

function intBytes(n) {
  if (n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER)) {
    return Buffer.from(msgpack.encode(Number(n)));
  }
  const b = Buffer.alloc(9);
  if (n >= 0n) { b[0] = 0xcf; b.writeBigUInt64BE(n, 1); } else { b[0] = 0xd3; b.writeBigInt64BE(n, 1); }
  return b;
}

function header(n, small, b16, b32) {
  if (n < 16) return Buffer.from([small | n]);
  if (n < 65536) return Buffer.from([b16, n >> 8, n & 0xff]);
  const b = Buffer.alloc(5);
  b[0] = b32;
  b.writeUInt32BE(n, 1);
  return b;
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** The msgpack bytes Sluice converts a JSON args tree to. */
function argsBytes(v) {
  if (v instanceof JsonNumber) {
    if (v.integral) {
      const n = BigInt(v.text);
      if (n < INT64_MIN || n > INT64_MAX) throw new RangeError('an integer beyond 64 bits');
      return intBytes(n);
    }
    const x = Number(v.text);
    if (!Number.isFinite(x)) throw new RangeError('not a finite number');
    const b = Buffer.alloc(9);
    b[0] = 0xcb;
    b.writeDoubleBE(x, 1);
    return b;
  }
  if (Array.isArray(v)) return Buffer.concat([header(v.length, 0x90, 0xdc, 0xdd), ...v.map(argsBytes)]);
  if (v !== null && typeof v === 'object') {
    if (v.pairs.length === 1 && v.pairs[0][0] === '$bin' && typeof v.pairs[0][1] === 'string') {
      if (!BASE64.test(v.pairs[0][1])) throw new RangeError('bad base64');
      return Buffer.from(msgpack.encode(Buffer.from(v.pairs[0][1], 'base64')));
    }
    return Buffer.concat([header(v.pairs.length, 0x80, 0xde, 0xdf),
      ...v.pairs.flatMap(([k, x]) => [Buffer.from(msgpack.encode(k)), argsBytes(x)])]);
  }
  return Buffer.from(msgpack.encode(v));
}

/** The tree as plain values (objects, numbers), for the fields other
 * than args. */
function plain(v) {
  if (v instanceof JsonNumber) return Number(v.text);
  if (Array.isArray(v)) return v.map(plain);
  if (v !== null && typeof v === 'object') return Object.fromEntries(v.pairs.map(([k, x]) => [k, plain(x)]));
  return v;
}

// What the C library knows; anything else is a newer producer's key,
// which a re-encoding carries through (PROTOCOL.md, "Keys this build does
// not know").
const KNOWN_KEYS = new Set(['v', 'id', 'task', 'queue', 'args', 'attempt',
  'enqueued_at', 'eta', 'opts', 'unknown_since', 'history', 'headers', 'wf',
  'snz', 'uq', 'seal']);
const KNOWN_OPTIONS = new Set(['max_attempts', 'initial_backoff_ms',
  'multiplier', 'max_backoff_ms', 'jitter', 'timeout_ms', 'expires_at',
  'store_result', 'result_ttl_ms', 'dead_letter', 'hard_timeout_ms']);

/** A key the C library carries: UTF-8 text without U+0000. */
function carried(key) {
  return typeof key === 'string' && key !== '' && !key.includes('\u0000');
}

/** A carried key and its value as msgpack, converted as args are. */
function carriedPair(k, v) {
  return Buffer.concat([Buffer.from(msgpack.encode(k)), argsBytes(v)]);
}

/** The fields of a JSON envelope, args as msgpack bytes; throws on
 * anything the C decoder refuses at this level. The keys this build does
 * not know are kept as msgpack pairs (env.__unknown, env.__unknownOpts). */
function decodeJsonEnvelope(buf) {
  const text = new TextDecoder('utf-8', { fatal: true }).decode(buf);
  const root = parse(text);
  if (root === null || typeof root !== 'object' || Array.isArray(root) || root instanceof JsonNumber) {
    throw new SyntaxError('not an object');
  }
  const env = { __unknown: [], __unknownOpts: [] };
  for (const [k, v] of root.pairs) {
    if (!KNOWN_KEYS.has(k)) {
      if (carried(k)) env.__unknown.push(carriedPair(k, v));
      continue;
    }
    if (k === 'opts' && v !== null && typeof v === 'object' && !Array.isArray(v) &&
        !(v instanceof JsonNumber)) {
      for (const [ok, ov] of v.pairs) {
        if (!KNOWN_OPTIONS.has(ok) && carried(ok)) env.__unknownOpts.push(carriedPair(ok, ov));
      }
    }
    if (k === 'args') env.args = argsBytes(v);
    else if (v instanceof JsonNumber && !v.integral && ['v', 'attempt', 'enqueued_at', 'eta', 'unknown_since'].includes(k)) {
      throw new TypeError(`${k}: not an integer`);
    } else env[k] = plain(v);
  }
  return env;
}

module.exports = { decodeJsonEnvelope, KNOWN_KEYS, KNOWN_OPTIONS, carried };

'use strict';
// Sealing: task arguments and results encrypted at rest (PROTOCOL.md,
// "Keyrings" and "Sealed arguments"; the C library's sluice-seal.h).
// Mirrors clients/python/sluice/seal.py.
//
// A producer given a keyring seals the args of every message it sends with
// the keyring's current key (AES-256-GCM, the task's id, name and queue
// bound as associated data, so a ciphertext moved to another task does not
// open), and opens the results a worker sealed with any key of the keyring.
// The key bytes never leave this module: no message or inspection shows
// them.

const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { KeyringError, SealError } = require('./errors');

const ALGORITHM = 'aes-256-gcm';
const KEY_BYTES = 32;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const OVERHEAD = NONCE_BYTES + TAG_BYTES;
// What the associated data starts with: the same key seals both, and an
// args ciphertext must not open as a result, nor the other way round.
const ARGS = Buffer.from('sluice-args\0');
const RESULT = Buffer.from('sluice-result\0');

const ID = /^[A-Za-z0-9._-]{1,64}$/;
// ALGORITHM as a message's `seal` may name it (serializers/envelope-fields.c
// check_seal): letters, digits and "-", 1 to 32 bytes.
const ALG = /^[A-Za-z0-9-]{1,32}$/;

const validKeyId = (s) => typeof s === 'string' && ID.test(s);

/** Whether label has the shape of a `seal` value, "ALGORITHM:KEY-ID" (the
 * algorithm need not be one this build knows). */
function validLabel(label) {
  if (typeof label !== 'string') return false;
  const colon = label.indexOf(':');
  return colon >= 0 && ALG.test(label.slice(0, colon)) && validKeyId(label.slice(colon + 1));
}

const keyIdOf = (label) => label.slice(label.indexOf(':') + 1);
const algorithmOf = (label) => label.slice(0, Math.max(label.indexOf(':'), 0));

/** 32 bytes from canonical standard base64 with its padding, or null. */
function decodeKey(text) {
  if (text.length !== 44 || !/^[A-Za-z0-9+/]{43}=$/.test(text)) return null;
  const raw = Buffer.from(text, 'base64');
  if (raw.length !== KEY_BYTES || raw.toString('base64') !== text) return null;
  return raw;
}

function under(file, dir) {
  const real = (p) => { try { return fs.realpathSync(p); } catch (e) { return path.resolve(p); } };
  const d = real(dir).replace(/\/+$/, '');
  return real(file).startsWith(`${d}/`);
}

/** The smallest msgpack bin header for n bytes. */
function binHeader(n) {
  if (n < 0x100) return Buffer.from([0xc4, n]);
  if (n < 0x10000) return Buffer.from([0xc5, n >> 8, n & 0xff]);
  const b = Buffer.alloc(5);
  b[0] = 0xc6;
  b.writeUInt32BE(n, 1);
  return b;
}

/** The bytes of the one msgpack bin data is, when it is one of at least
 * OVERHEAD bytes (nonce and tag); else null. */
function binBody(data) {
  if (!Buffer.isBuffer(data)) return null;
  let head = 0;
  let n = 0;
  if (data.length >= 2 && data[0] === 0xc4) [head, n] = [2, data[1]];
  else if (data.length >= 3 && data[0] === 0xc5) [head, n] = [3, data.readUInt16BE(1)];
  else if (data.length >= 5 && data[0] === 0xc6) [head, n] = [5, data.readUInt32BE(1)];
  if (head === 0 || head + n !== data.length || n < OVERHEAD) return null;
  return data.subarray(head);
}

function associatedData(domain, id, task, queue) {
  return Buffer.concat([domain, Buffer.from(`${id || ''}\0${task || ''}\0${queue || ''}`, 'utf8')]);
}

// The keys of each keyring, where only this module reaches them.
const secrets = new WeakMap();

/** Named AES-256 keys, one of them current: the current key seals, every
 * key opens. Load one with Keyring.load(path) (or Keyring.fromText); the
 * file format is PROTOCOL.md's "Keyrings". */
class Keyring {
  constructor(keys, current) {
    if (!(keys instanceof Map) || !keys.has(current)) {
      throw new KeyringError('make a Keyring with Keyring.load(path) or Keyring.fromText(text)');
    }
    secrets.set(this, new Map(keys));
    Object.defineProperty(this, 'current', { value: current, enumerable: true });
    Object.freeze(this);
  }

  /** Reads and checks the whole file. A file that others than its owner
   * can read or write (mode & 0o077) is refused, unless it lies under
   * $CREDENTIALS_DIRECTORY (systemd's LoadCredential=). Throws
   * KeyringError naming the file (and the line); never quotes a key. */
  static load(file) {
    let st = null;
    try {
      st = fs.statSync(file);
    } catch (e) {
      // the read below says why it cannot be opened
    }
    if (st !== null && (st.mode & 0o077) !== 0) {
      const creds = process.env.CREDENTIALS_DIRECTORY;
      if (!(creds && under(file, creds))) {
        const mode = (st.mode & 0o7777).toString(8).padStart(4, '0');
        throw new KeyringError(`keyring ${file} can be read or written by other users (mode ${mode}): run: chmod 600 ${file} (under systemd, hand it over with LoadCredential=)`);
      }
    }
    let data;
    try {
      data = fs.readFileSync(file);
    } catch (e) {
      throw new KeyringError(`cannot read the keyring: ${file}: ${e.code || e.message}`);
    }
    return Keyring.fromText(data, String(file));
  }

  /** The same as load() for a keyring held in memory (a test, a secret
   * manager's answer); origin names it in error messages. */
  static fromText(text, origin = '(in memory)') {
    let s = text;
    if (Buffer.isBuffer(text)) {
      try {
        s = new TextDecoder('utf-8', { fatal: true }).decode(text);
      } catch (e) {
        s = null;
      }
    }
    if (typeof s !== 'string' || s.includes('\0')) {
      throw new KeyringError(`keyring ${origin} is not text: it is “key ID BASE64-KEY” and “current ID” lines`);
    }
    const keys = new Map();
    let current = null;
    const fail = (n, why) => new KeyringError(`keyring ${origin}, line ${n}: ${why}`);
    const lines = s.split('\n');
    for (let i = 0; i < lines.length; i++) {
      const n = i + 1;
      const line = lines[i].replace(/^[ \t\r\n\v\f]+|[ \t\r\n\v\f]+$/g, '');
      if (line === '' || line.startsWith('#')) continue;
      const words = line.split(/[ \t]+/);
      if (words[0] === 'key') {
        if (words.length !== 3) throw fail(n, 'a key line is “key ID BASE64-KEY”');
        if (!validKeyId(words[1])) throw fail(n, 'a key id is 1 to 64 letters, digits, “-”, “.” or “_”');
        if (keys.has(words[1])) throw fail(n, 'this key id is given twice');
        const key = decodeKey(words[2]);
        if (key === null) throw fail(n, 'a key is 32 random bytes in base64 (44 characters): make one with sluice keys rotate');
        keys.set(words[1], key);
      } else if (words[0] === 'current') {
        if (words.length !== 2) throw fail(n, 'a current line is “current ID”');
        if (current !== null) throw fail(n, 'a second “current” line');
        [, current] = words;
      } else {
        throw fail(n, 'a line is “key ID BASE64-KEY”, “current ID”, a comment (#) or empty');
      }
    }
    if (current === null) throw new KeyringError(`keyring ${origin} has no “current ID” line: name the key that seals`);
    if (!keys.has(current)) throw new KeyringError(`keyring ${origin}: the current key “${current.slice(0, 80)}” is not among its keys`);
    return new Keyring(keys, current);
  }

  /** The ids of every key, in the file's order. */
  keyIds() {
    return [...secrets.get(this).keys()];
  }

  hasKey(id) {
    return secrets.get(this).has(id);
  }

  toString() {
    return `[Keyring current=${this.current} keys=${secrets.get(this).size}]`;
  }

  toJSON() {
    return { current: this.current, keys: this.keyIds() };
  }

  [Symbol.for('nodejs.util.inspect.custom')]() {
    return this.toString();
  }

  /** plain sealed with the current key and a new random nonce: {sealed
   * (the msgpack bin that `args` or a result's `value` holds), label (for
   * `seal`)}. domain: ARGS or RESULT. */
  seal(domain, id, task, queue, plain) {
    return sealWithNonce(this, domain, id, task, queue, plain, crypto.randomBytes(NONCE_BYTES));
  }
}

// The nonce is a parameter for the tests' fixed vector only (exported as
// _sealWithNonce, not by index.js): a nonce used twice with one key gives
// the key away.
function sealWithNonce(keyring, domain, id, task, queue, plain, nonce) {
  if (nonce.length !== NONCE_BYTES) throw new RangeError('a nonce is 12 bytes');
  const c = crypto.createCipheriv(ALGORITHM, secrets.get(keyring).get(keyring.current), nonce,
    { authTagLength: TAG_BYTES });
  c.setAAD(associatedData(domain, id, task, queue));
  const body = Buffer.concat([nonce, c.update(plain), c.final(), c.getAuthTag()]);
  return { sealed: Buffer.concat([binHeader(body.length), body]), label: `${ALGORITHM}:${keyring.current}` };
}

/** The plaintext of sealed (a msgpack bin: nonce, ciphertext, tag) that
 * `seal` value label names; throws SealError "cannot decrypt: ..." (an
 * algorithm or key this keyring lacks, or a ciphertext, id, task or queue
 * that was changed). keyring null: no keyring was given. */
function openSealed(keyring, domain, label, id, task, queue, sealed) {
  const alg = algorithmOf(label);
  const keyId = keyIdOf(label);
  if (alg !== ALGORITHM) {
    throw new SealError(`cannot decrypt: algorithm ${alg.slice(0, 32)} unknown (this build seals and opens ${ALGORITHM})`);
  }
  if (!keyring || !keyring.hasKey(keyId)) {
    throw new SealError(`cannot decrypt: key ${keyId} unknown (${keyring ? "not in this program's keyring" : 'this program was given no keyring'})`);
  }
  const body = binBody(sealed);
  if (body === null) throw new SealError('cannot decrypt: authentication failed (too short to be sealed)');
  const d = crypto.createDecipheriv(ALGORITHM, secrets.get(keyring).get(keyId),
    body.subarray(0, NONCE_BYTES), { authTagLength: TAG_BYTES });
  d.setAAD(associatedData(domain, id, task, queue));
  d.setAuthTag(body.subarray(body.length - TAG_BYTES));
  try {
    return Buffer.concat([d.update(body.subarray(NONCE_BYTES, body.length - TAG_BYTES)), d.final()]);
  } catch (e) {
    throw new SealError(`cannot decrypt: authentication failed (sealed with key ${keyId}, but the ciphertext or the task's id, name or queue was changed)`);
  }
}

/** A client's keyring option: null/undefined, a Keyring, or a path. */
function asKeyring(value) {
  if (value === undefined || value === null) return null;
  if (value instanceof Keyring) return value;
  if (typeof value === 'string') return Keyring.load(value);
  throw new KeyringError(`keyring must be a path or a Keyring, not ${typeof value}`);
}

module.exports = {
  ALGORITHM, OVERHEAD, ARGS, RESULT, Keyring, openSealed, asKeyring, validLabel,
  keyIdOf, binHeader, binBody, _sealWithNonce: sealWithNonce,
};

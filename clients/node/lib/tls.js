'use strict';
// rediss:// URLs for the Node producers: the tls_* parameters of the C
// library's URLs (docs/redis.md, "TLS"), mapped onto ioredis's own `tls`
// option (Node's tls.connect() options).
//
//   new sluice.Client('rediss://redis.example:6380/0?tls_ca_file=/etc/ca.pem')
//
// The same defaults as in C: the server's chain and host name are
// verified (against tls_ca_file / every certificate of tls_ca_dir, else
// Node's own CA store), TLS 1.2 is the minimum, tls_cert and tls_key give a
// client certificate (mutual TLS), tls_server_name the name checked and
// sent by SNI, and tls_insecure=1 turns verification off, with a warning.
// The files are read once, when the client is made. A tls_* parameter on a
// redis:// URL is refused, as in C, rather than ignored.

const fs = require('node:fs');
const path = require('node:path');
const { InvalidInputError } = require('./errors');

const PARAMS = ['tls_ca_file', 'tls_ca_dir', 'tls_cert', 'tls_key',
  'tls_server_name', 'tls_min_version', 'tls_insecure'];

/** @url as a message may quote it: the password masked. */
function shownUrl(url) {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch (e) {
    return '(a malformed URL)';
  }
}

function readFile(name, file) {
  try {
    return fs.readFileSync(file);
  } catch (e) {
    throw new InvalidInputError(`cannot use ${name} “${file}”: ${e.code || e.message}`);
  }
}

/** Every certificate file of @dir (what OpenSSL's CApath holds). */
function readDir(dir) {
  let names;
  try {
    names = fs.readdirSync(dir);
  } catch (e) {
    throw new InvalidInputError(`cannot use tls_ca_dir “${dir}”: ${e.code || e.message}`);
  }
  const out = [];
  for (const n of names.sort()) {
    const f = path.join(dir, n);
    try {
      if (!fs.statSync(f).isFile()) continue;
      const text = fs.readFileSync(f);
      if (text.includes('-----BEGIN CERTIFICATE-----')) out.push(text);
    } catch (e) { /* unreadable entries are not certificates */ }
  }
  return out;
}

/**
 * The URL for ioredis without its tls_* parameters, and the `tls` option
 * they and the scheme give (undefined for a plain URL). Throws
 * InvalidInputError.
 */
function splitUrl(url) {
  let u;
  try {
    u = new URL(url);
  } catch (e) {
    return { url, tls: undefined }; // ioredis says what is wrong with it
  }
  const isTls = u.protocol === 'rediss:';
  const got = {};
  for (const [name, value] of [...u.searchParams]) {
    if (!name.startsWith('tls_')) continue;
    if (!isTls) throw new InvalidInputError(`the tls_* parameters are for TLS: write rediss:// (parameter ${name})`);
    if (!PARAMS.includes(name)) throw new InvalidInputError(`unknown query parameter “${name}”: the TLS ones are ${PARAMS.join(', ')}`);
    if (name in got) throw new InvalidInputError(`${name} is given twice: give it once`);
    if (value === '' && name !== 'tls_insecure') throw new InvalidInputError(`${name} has no value`);
    got[name] = value;
    u.searchParams.delete(name);
  }
  if (!isTls) return { url, tls: undefined };
  const version = got.tls_min_version || '1.2';
  if (version !== '1.2' && version !== '1.3') throw new InvalidInputError('tls_min_version is 1.2 (the default) or 1.3');
  const insecure = got.tls_insecure || '0';
  if (!['0', '1', 'true', 'false', 'yes', 'no'].includes(insecure)) {
    throw new InvalidInputError('tls_insecure is 1 (no verification of the server: for tests only) or 0');
  }
  if (('tls_cert' in got) !== ('tls_key' in got)) throw new InvalidInputError('tls_cert and tls_key go together (mutual TLS)');

  const tls = { minVersion: version === '1.3' ? 'TLSv1.3' : 'TLSv1.2' };
  const ca = [];
  if (got.tls_ca_file) ca.push(readFile('tls_ca_file', got.tls_ca_file));
  if (got.tls_ca_dir) ca.push(...readDir(got.tls_ca_dir));
  if (ca.length > 0) tls.ca = ca;
  if (got.tls_cert) {
    tls.cert = readFile('tls_cert', got.tls_cert);
    tls.key = readFile('tls_key', got.tls_key);
  }
  if (got.tls_server_name) tls.servername = got.tls_server_name;
  if (['1', 'true', 'yes'].includes(insecure)) {
    tls.rejectUnauthorized = false;
    process.emitWarning(`TLS WITHOUT VERIFICATION for ${shownUrl(url)} (tls_insecure): anyone on the network path can pose as the server and read every task; use it for a test only, and give the server's CA with tls_ca_file instead`, 'SluiceWarning');
  }
  return { url: u.toString(), tls };
}

module.exports = { splitUrl, shownUrl, PARAMS };

'use strict';
// The Sluice producer for Node, on ioredis.

const Redis = require('ioredis');
const p = require('./protocol');
const tlsUrl = require('./tls');
const {
  SluiceError, InvalidInputError, FullError, UnavailableError,
  MalformedReplyError, NotFoundError, SluiceTimeoutError, SealError,
} = require('./errors');

const nowMs = () => Date.now();
// Warnings given once per process (every new connection checks).
const told = new Set();

function isConnectionError(e) {
  return e.name === 'MaxRetriesPerRequestError'
    || /Connection is closed|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|Stream isn't writeable|enableOfflineQueue/.test(e.message || '');
}

/** The typed error for what ioredis rejected with. */
function translate(what, e) {
  if (e instanceof SluiceError) return e;
  if (isConnectionError(e)) {
    return new UnavailableError(`${what}: Redis is unreachable or the connection was lost (${e.message}); check the URL and that Redis runs`);
  }
  if (/^OOM/.test(e.message || '')) {
    return new FullError(`${what}: Redis is out of memory and refuses new work (${e.message}); let workers drain it, or raise maxmemory`);
  }
  return new SluiceError(`${what}: Redis refused the command: ${e.message}`);
}

const REDIS_OPTIONS = {
  lazyConnect: true,
  // A command fails (UnavailableError) after one reconnection attempt
  // instead of waiting for Redis forever.
  maxRetriesPerRequest: 1,
  retryStrategy: (times) => Math.min(times * 100, 2000),
};

class Client {
  /**
   * @param {string} url redis:// or rediss:// (TLS, with the C library's
   *   tls_* parameters: lib/tls.js) URL for ioredis, default
   *   redis://127.0.0.1:6379/0
   * @param {object} options namespace, mode ("reliable", the default as in
   *   C and the sluice command, or "fast"),
   *   trackState, resultTtlMs, revokeTtlMs, dedupTtlMs, maxMessageBytes,
   *   resultPollIntervalMs: the settings of SluiceClientOptions, with the
   *   same defaults; redis: an ioredis instance to use instead of url;
   *   keyring: a Keyring or the path of a keyring file (KeyringError if it
   *   cannot be used): every message's args are then sealed with its
   *   current key, getResult opens sealed results (SealError when the
   *   keyring lacks their key), inspect and dead letters show what it
   *   opens (docs/clients.md, "Sealing").
   */
  constructor(url = 'redis://127.0.0.1:6379/0', options = {}) {
    const { redis, ...settings } = options;
    this.settings = p.checkSettings(settings);
    this.ownsRedis = redis === undefined;
    if (redis !== undefined) {
      this.redis = redis;
    } else {
      // rediss://: the tls_* parameters are Sluice's (lib/tls.js).
      const { url: plain, tls } = tlsUrl.splitUrl(url);
      this.redis = new Redis(plain, tls !== undefined ? { ...REDIS_OPTIONS, tls } : REDIS_OPTIONS);
    }
    this.scripts = p.scriptsFor(this.settings.mode);
    this.modeChecked = null;
    if (this.ownsRedis) {
      // Errors reach the caller through the command that met them.
      this.redis.on('error', () => {});
      // The mode is checked again after every reconnection, as the C
      // client checks it on every new connection: a namespace wiped by a
      // restart is recorded again.
      this.redis.on('close', () => { this.modeChecked = null; });
    }
    this.subscriber = null;
    this.waiters = new Map(); // channel -> Set of wake functions
  }

  async close() {
    if (this.subscriber !== null) this.subscriber.disconnect();
    if (this.ownsRedis) this.redis.disconnect();
  }

  key(suffix, name = '') {
    return this.settings.prefix + suffix + name;
  }

  async checkMode() {
    if (this.modeChecked === null) {
      this.modeChecked = this.readMode().catch((e) => {
        this.modeChecked = null;
        throw e;
      });
    }
    return this.modeChecked;
  }

  /** {ns}:meta checked as the C client checks it on every new connection:
   * its mode, layout version and script set, recording what a new
   * namespace (or one made before versions were recorded) lacks; a refusal
   * comes before anything is written (protocol.checkMeta). */
  async readMode() {
    const meta = this.key('meta');
    const read = () => Promise.all(p.META_FIELDS.map((f) => this.redis.hget(meta, f)));
    const tryWrites = async (writes) => {
      for (const [cmd, ...args] of writes) {
        // A read-only user's writes are refused: what is read back decides.
        await this.redis[cmd](...args).catch((e) => {
          if (isConnectionError(e)) throw e;
        });
      }
    };
    let fields;
    let result;
    try {
      fields = await read();
      p.checkMeta(this.settings, fields, true);
      const writes = p.metaWrites(meta, this.settings.mode, fields);
      if (writes.length > 0) {
        await tryWrites(writes);
        fields = await read();
      }
      result = p.checkMeta(this.settings, fields);
      await tryWrites(result.after);
    } catch (e) {
      throw translate("reading the namespace's meta", e);
    }
    if (result.warning !== null && !told.has(result.warning)) {
      told.add(result.warning);
      process.emitWarning(result.warning, 'SluiceWarning');
    }
  }

  /** EVALSHA, and on NOSCRIPT the text once, as the C broker does. */
  async eval(name, argv) {
    await this.checkMode();
    const s = this.scripts[name];
    try {
      try {
        return await this.redis.callBuffer('EVALSHA', s.sha, '1', this.settings.prefix, ...argv);
      } catch (e) {
        if (!/^NOSCRIPT/.test(e.message || '')) throw e;
        await this.redis.callBuffer('SCRIPT', 'LOAD', s.text);
        return await this.redis.callBuffer('EVALSHA', s.sha, '1', this.settings.prefix, ...argv);
      }
    } catch (e) {
      throw translate(name, e);
    }
  }

  async command(what, ...args) {
    await this.checkMode();
    try {
      return await this.redis.callBuffer(...args);
    } catch (e) {
      throw translate(what, e);
    }
  }

  // ---- enqueue -------------------------------------------------------------

  /** Enqueues one message; resolves to its task id. options: queue, id
   * (idempotent for dedupTtlMs), delayMs, etaMs (ms since the epoch;
   * wins), headers, options (per-message: maxAttempts, initialBackoffMs,
   * multiplier, maxBackoffMs, jitter, timeoutMs, expiresAt, storeResult,
   * resultTtlMs, deadLetter). */
  async enqueue(task, args, options = {}) {
    return (await this.enqueueFull(task, args, options)).id;
  }

  /** enqueue(), also telling whether a caller-chosen id had been enqueued
   * already (then nothing was written). */
  async enqueueFull(task, args, options = {}) {
    const { ids, existed } = await this.enqueueMany([{ ...options, task, args }], false);
    return { id: ids[0], existed: existed[0] };
  }

  /** Many messages in one script call, each atomic on its own; nothing is
   * sent if any is invalid. requests: [{task, args, ...enqueue options}]. */
  async enqueueBatch(requests) {
    return (await this.enqueueMany(requests, true)).ids;
  }

  async enqueueMany(requests, batch) {
    const now = nowMs();
    const prepared = requests.map((r, i) => {
      try {
        return p.prepare(this.settings, r, now);
      } catch (e) {
        if (batch && e instanceof InvalidInputError) {
          e.message = `request ${i} of the batch: ${e.message}`;
        }
        throw e;
      }
    });
    if (prepared.length === 0) return { ids: [], existed: [] };
    const argv = p.enqueueArgv(this.settings, prepared);
    let reply;
    try {
      reply = await this.eval('enqueue', argv);
    } catch (e) {
      // Every claim holds this call's token: a batch of ids only is safe
      // to send again, and recognises its own claims.
      if (!(e instanceof UnavailableError) || !prepared.every((x) => x.dedup)) throw e;
      reply = await this.eval('enqueue', argv);
    }
    return { ids: prepared.map((x) => x.id), existed: p.enqueueReply(reply, prepared.length) };
  }

  // ---- results -------------------------------------------------------------

  async readRecord(id) {
    const raw = await this.command('get_record', 'GET', this.key('r:', id));
    const [data, final] = p.splitRecord(raw);
    if (data === null) return [null, false];
    const r = p.decodeRecord(data, id);
    return [r, final || r.final];
  }

  async subscribe(channel, wake) {
    if (this.subscriber === null) {
      this.subscriber = this.redis.duplicate();
      this.subscriber.on('error', () => {});
      this.subscriber.on('message', (ch) => {
        for (const w of this.waiters.get(ch) || []) w();
      });
    }
    let set = this.waiters.get(channel);
    if (set === undefined) {
      set = new Set();
      this.waiters.set(channel, set);
    }
    set.add(wake);
    if (set.size === 1) await this.subscriber.subscribe(channel);
  }

  async unsubscribe(channel, wake) {
    const set = this.waiters.get(channel);
    if (set === undefined) return;
    set.delete(wake);
    if (set.size === 0) {
      this.waiters.delete(channel);
      await this.subscriber.unsubscribe(channel).catch(() => {});
    }
  }

  /** Waits for task id's final record (options.timeoutMs; none = forever).
   * Woken by the notification published with the final record; re-reads
   * it every resultPollIntervalMs in case a notification was lost. Rejects
   * with SluiceTimeoutError. */
  async getResult(id, options = {}) {
    p.checkName('id', id);
    const timeoutMs = options.timeoutMs;
    const deadline = timeoutMs === undefined || timeoutMs === null
      ? Infinity : Date.now() + Math.max(timeoutMs, 0);
    const poll = this.settings.resultPollIntervalMs;
    const channel = this.key('done:', id);
    let last = null;
    let wakeUp = () => {};
    let woken = false;
    const wake = () => { woken = true; wakeUp(); };
    await this.checkMode();
    try {
      // Subscribed before reading: a final record written after the read
      // is announced to this subscription.
      await this.subscribe(channel, wake).catch((e) => { throw translate('get_result', e); });
      for (;;) {
        woken = false;
        const [r, final] = await this.readRecord(id);
        if (r !== null) {
          last = r.state;
          // A sealed result is opened, or SealError.
          if (final) return p.openResult(r, this.settings.keyring);
        }
        const wait = Math.min(poll, deadline - Date.now());
        if (wait <= 0) break;
        if (!woken) {
          await new Promise((resolve) => {
            const timer = setTimeout(resolve, wait);
            wakeUp = () => { clearTimeout(timer); resolve(); };
          });
        }
        wakeUp = () => {};
      }
    } finally {
      await this.unsubscribe(channel, wake);
    }
    throw new SluiceTimeoutError(`task ${id} did not finish within ${Math.max(timeoutMs || 0, 0)} ms (its record says: ${last || 'nothing yet'})`);
  }

  /** The task's record, or what the schedule or the dead letters say of
   * it; rejects with NotFoundError. */
  async inspect(id) {
    p.checkName('id', id);
    const [r] = await this.readRecord(id);
    if (r !== null) {
      // Inspecting is for operators, who may hold no keyring: a value that
      // does not open stays sealed (r.seal, r.encryptedWith say with which
      // key).
      try {
        p.openResult(r, this.settings.keyring);
      } catch (e) {
        if (!(e instanceof SealError)) throw e;
      }
      if (r.state === 'scheduled' || r.state === 'retrying') {
        r.dueAt = p.dueOfLookup(await this.eval('lookup_task', [id]));
      }
      return r;
    }
    const found = p.resultOfLookup(id, await this.eval('lookup_task', [id]));
    if (found === null) {
      throw new NotFoundError(`no record of task ${id}: it does not exist, its record expired, or it is queued or running with trackState off`);
    }
    return found;
  }

  /** "removed" when it was still scheduled (gone; its record says
   * cancelled), else "revoked" (workers skip it, or interrupt it). */
  async cancel(id) {
    p.checkName('id', id);
    const now = nowMs();
    const n = p.intReply('cancel_scheduled', await this.eval('cancel_scheduled',
      [id, p.cancelRecord(id, now), String(this.settings.resultTtlMs)]));
    if (n === 1) return 'removed';
    p.intReply('revoke', await this.eval('revoke', [id, String(now + this.settings.revokeTtlMs)]));
    return 'revoked';
  }

  // ---- dead letters --------------------------------------------------------

  /** Dead letters oldest first: options after (an entry id), limit
   * (default 100), reason, task. */
  async dlqList(options = {}) {
    const { after, reason, task } = options;
    let limit = options.limit === undefined ? 100 : options.limit;
    if (after !== undefined && after !== null && !p.validEntryId(after)) {
      throw new InvalidInputError(`“${after}” is not a dead-letter entry id (they look like 1700000000000-0)`);
    }
    if (!Number.isInteger(limit) || limit < 0) throw new InvalidInputError('limit must be an integer >= 0');
    p.checkReason(reason);
    limit = limit || 100;
    const filtered = (reason !== undefined && reason !== null) || (task !== undefined && task !== null);
    const out = [];
    let cursor = after;
    while (out.length < limit) {
      const want = filtered ? 256 : limit - out.length;
      const page = await this.command('dlq_list', 'XRANGE', this.key('dlq'),
        cursor === undefined || cursor === null ? '-' : `(${cursor}`, '+', 'COUNT', String(want));
      if (!Array.isArray(page)) throw new MalformedReplyError('dlq_list: unexpected reply');
      const entries = page.map((e) => p.deadLetterFromEntry(e, this.settings.keyring));
      for (const e of entries) {
        if (out.length >= limit) break;
        if ((reason === undefined || reason === null || e.reason === reason)
            && (task === undefined || task === null || e.task === task)) out.push(e);
      }
      if (entries.length < want) break;
      cursor = entries[entries.length - 1].entryId;
    }
    return out;
  }

  async dlqGet(entryId) {
    if (p.validEntryId(entryId)) {
      const page = await this.command('dlq_get', 'XRANGE', this.key('dlq'), entryId, entryId, 'COUNT', '1');
      if (Array.isArray(page) && page.length > 0) return p.deadLetterFromEntry(page[0], this.settings.keyring);
    }
    throw new NotFoundError(`no dead letter with entry id ${entryId} (list them with dlqList or \`sluice dlq list\`)`);
  }

  /** Sends a dead letter back to its queue (attempts restored unless
   * options.keepAttempt); resolves to its task id. */
  async dlqReplay(entryId, options = {}) {
    const dl = await this.dlqGet(entryId);
    const sub = p.replaySubmit(this.settings, dl, Boolean(options.keepAttempt), nowMs());
    const [found] = p.pairReply('dlq_replay', await this.eval('dlq_replay', p.replayArgv(entryId, sub)));
    if (found !== 1) throw new NotFoundError(`no dead letter with entry id ${entryId} (replayed or deleted meanwhile)`);
    return sub.id;
  }
}

module.exports = { Client };

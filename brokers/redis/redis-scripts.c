/* redis-scripts.c - the Lua scripts of the Redis brokers (see
 * redis-scripts.h) and EVALSHA with the NOSCRIPT fallback.
 *
 * Rules every script here follows:
 *
 *  - Checks before writes. Redis does not roll a script back when it fails
 *    half-way, so a step reads everything it decides on before its first
 *    write. Batch scripts (enqueue, settle) apply this per item: each
 *    item is atomic on its own, as the broker contract asks.
 *  - Shebang by effect. Steps that add work (enqueue, promote, periodic
 *    claim, dead-letter replay) use "#!lua", so an out-of-memory Redis
 *    refuses them with an OOM error (SLUICE_BROKER_ERROR_FULL); steps that
 *    drain (settle, cancel, records, deletes, heartbeats) use
 *    "flags=allow-oom", so workers can still empty the queues. Verified on
 *    Redis 7.0 (docs/redis.md, fact 8).
 *  - Times come from the caller (the core's clock), never from the Redis
 *    clock or a worker's wall clock read here; TTLs are PX, so expiry
 *    follows the server.
 *  - Numbers travel as decimal strings and scores stay below 2^53, so Lua's
 *    doubles hold them exactly.
 *
 * A transport (redis-transport.h) supplies a Lua fragment defining t_push,
 * t_push_many, t_check, t_ack, t_release, t_depth, t_in_flight, t_purge,
 * t_peek, t_heartbeat and t_leave, and optionally t_flush and t_gone; the
 * library
 * and bodies below call only those to touch a queue.
 *
 * Stored formats:
 *  - record at K_RECORD..id: one flag byte, 'F' (final) or 'P', then the
 *    record bytes; a final write also PUBLISHes "F" on K_DONE..id.
 *  - dead letter: a K_DLQ stream entry with fields payload, reason,
 *    source, deliveries, at and, when known, task_id, task, detail;
 *    K_DLQ_COUNT holds reason -> count, changed in the same script as
 *    every add and removal, so it is exact.
 *
 * To add a script: add its id to SluiceRedisScriptId, its body below with
 * its ARGV documented, and a line in sluice_redis_scripts__init().
 */
#include "config.h"

#include "brokers/redis/redis-scripts.h"

/* ---- Optional transport hooks ------------------------------------------
 *
 * Spliced in before the transport's fragment, which may redefine them (a
 * later `local function` of the same name shadows these). */
static const gchar lua_hook_defaults[] =
    /* Called once at the end of every settle script, after each item's
     * writes: a transport may defer the work of t_ack to it. */
    "local function t_flush() end\n"
    /* Called when t_check refused a settlement: true when no consumer
     * holds the entry at all (settled already, or lost), rather than
     * another one (stale). Without fencing, nothing is ever refused. */
    "local function t_gone(queue, handle) return false end\n";

/* ---- The shared library -------------------------------------------------- */

static const gchar lua_library[] =
    /* rec: flag byte + record, or '' for none. */
    "local function put_record(id, rec, ttl)\n"
    "  if rec == '' then return end\n"
    "  redis.call('SET', K_RECORD .. id, rec, 'PX', ttl)\n"
    "  if string.byte(rec, 1) == 70 then\n" /* 'F' */
    "    redis.call('PUBLISH', K_DONE .. id, 'F')\n"
    "  end\n"
    "end\n"
    /* The same, without the notification: settle publishes in one go. */
    "local function set_record(id, rec, ttl)\n"
    "  if rec == '' then return false end\n"
    "  redis.call('SET', K_RECORD .. id, rec, 'PX', ttl)\n"
    "  return string.byte(rec, 1) == 70\n"
    "end\n"
    "local function schedule_add(id, queue, payload, at)\n"
    "  redis.call('ZADD', K_SCHEDULE, at, id)\n"
    "  redis.call('HSET', K_SCHED_PAYLOAD, id, payload)\n"
    "  redis.call('HSET', K_SCHED_QUEUE, id, queue)\n"
    "end\n"
    "local function schedule_remove(id)\n"
    "  redis.call('ZREM', K_SCHEDULE, id)\n"
    "  redis.call('HDEL', K_SCHED_PAYLOAD, id)\n"
    "  redis.call('HDEL', K_SCHED_QUEUE, id)\n"
    "end\n"
    /* The check half of a submit: TRUE when its idempotency claim exists. */
    "local function submit_claimed(id, dedup_ttl)\n"
    "  return tonumber(dedup_ttl) > 0 and\n"
    "         redis.call('EXISTS', K_DEDUP .. id) == 1\n"
    "end\n"
    /* The write half: claim, queue or schedule, record. */
    "local function submit_write(id, queue, payload, due, dedup_ttl, rec,\n"
    "                            rec_ttl)\n"
    "  if tonumber(dedup_ttl) > 0 then\n"
    "    redis.call('SET', K_DEDUP .. id, '1', 'PX', dedup_ttl)\n"
    "  end\n"
    "  if tonumber(due) > 0 then\n"
    "    schedule_add(id, queue, payload, due)\n"
    "  else\n"
    "    t_push(queue, payload)\n"
    "  end\n"
    "  put_record(id, rec, rec_ttl)\n"
    "end\n"
    "local function dlq_count_add(reason, n)\n"
    "  if redis.call('HINCRBY', K_DLQ_COUNT, reason, n) <= 0 then\n"
    "    redis.call('HDEL', K_DLQ_COUNT, reason)\n"
    "  end\n"
    "end\n"
    /* entry: one element of an XRANGE reply. Returns its reason. */
    "local function dlq_remove(entry)\n"
    "  redis.call('XDEL', K_DLQ, entry[1])\n"
    "  local f, reason = entry[2], 'unknown'\n"
    "  for j = 1, #f, 2 do\n"
    "    if f[j] == 'reason' then\n"
    "      reason = f[j + 1]; dlq_count_add(reason, -1)\n"
    "    elseif f[j] == 'task_id' and\n"
    "           redis.call('HGET', K_DLQ_IDS, f[j + 1]) == entry[1] then\n"
    "      redis.call('HDEL', K_DLQ_IDS, f[j + 1])\n"
    "    end\n"
    "  end\n"
    "  return reason\n"
    "end\n"
    /* Appends a dead letter, first dropping the oldest entries so that at
     * most max remain: exact, every count kept exact, and every drop
     * counted by reason. Returns how many were dropped. */
    "local function dlq_add(max, payload, task_id, task, reason, detail,\n"
    "                       source, deliveries, at)\n"
    "  local over = redis.call('XLEN', K_DLQ) - max + 1\n"
    "  local old = {}\n"
    "  if over > 0 then\n"
    "    old = redis.call('XRANGE', K_DLQ, '-', '+', 'COUNT', over)\n"
    "  end\n"
    "  for _, e in ipairs(old) do\n"
    "    redis.call('HINCRBY', K_DLQ_DROPPED, dlq_remove(e), 1)\n"
    "  end\n"
    "  local f = {'XADD', K_DLQ, '*', 'payload', payload, 'reason', reason,\n"
    "             'source', source, 'deliveries', deliveries, 'at', at}\n"
    "  if task_id ~= '' then\n"
    "    f[#f + 1] = 'task_id'; f[#f + 1] = task_id\n"
    "  end\n"
    "  if task ~= '' then f[#f + 1] = 'task'; f[#f + 1] = task end\n"
    "  if detail ~= '' then f[#f + 1] = 'detail'; f[#f + 1] = detail end\n"
    "  local eid = redis.call(unpack(f))\n"
    "  if task_id ~= '' then redis.call('HSET', K_DLQ_IDS, task_id, eid) end\n"
    "  dlq_count_add(reason, 1)\n"
    "  return #old\n"
    "end\n";

/* ---- The steps ----------------------------------------------------------
 *
 * A submit is 7 ARGV fields: id queue payload due dedup_ttl rec rec_ttl
 * (due 0 = ready now; dedup_ttl 0 = no claim; rec '' = no record).
 */

/* ARGV: token, nq, the nq distinct queues of the batch, then the items,
 * each one of:
 *   'r' queue payload                      ready now, no id-keyed extras
 *   's' id queue payload due dedup_ttl rec rec_ttl   (a full submit)
 * Every check comes first (claims, including an id claimed earlier in the
 * same batch), then the writes: the queues first, one push per queue (the
 * likeliest write to fail, on a key of a wrong type, so a failure leaves no
 * claim without its message), then schedule entries, claims and records.
 * Returns one char per item: '1' when its claim existed (nothing written).
 * A claim holds the token of the call that made it (unique per call): a
 * call replayed after its reply was lost finds its own claims and answers
 * '0' for them, without writing twice.
 * The compact 'r' form and the grouped pushes keep Redis CPU per message
 * low: argument count and redis.call count dominate a script's cost. */
static const gchar body_enqueue[] =
    "local token, nq = ARGV[1], tonumber(ARGV[2])\n"
    "local out, pushes, order, writes, seen = {}, {}, {}, {}, {}\n"
    "local i = nq + 3\n"
    "while i <= #ARGV do\n"
    "  local q, p\n"
    "  if ARGV[i] == 'r' then\n"
    "    q, p = ARGV[i + 1], ARGV[i + 2]\n"
    "    out[#out + 1] = '0'\n"
    "    i = i + 3\n"
    "  else\n"
    "    local id, dedup = ARGV[i + 1], tonumber(ARGV[i + 5])\n"
    "    local claim = dedup > 0 and not seen[id] and\n"
    "                  redis.call('GET', K_DEDUP .. id)\n"
    "    if claim == token then\n"
    "      out[#out + 1] = '0'\n"
    "      seen[id] = true\n"
    "    elseif dedup > 0 and (seen[id] or claim) then\n"
    "      out[#out + 1] = '1'\n"
    "    else\n"
    "      if dedup > 0 then seen[id] = true end\n"
    "      writes[#writes + 1] = i\n"
    "      out[#out + 1] = '0'\n"
    "      if tonumber(ARGV[i + 4]) <= 0 then\n"
    "        q, p = ARGV[i + 2], ARGV[i + 3]\n"
    "      end\n"
    "    end\n"
    "    i = i + 8\n"
    "  end\n"
    "  if q then\n"
    "    local list = pushes[q]\n"
    "    if not list then\n"
    "      list = {}; pushes[q] = list; order[#order + 1] = q\n"
    "    end\n"
    "    list[#list + 1] = p\n"
    "  end\n"
    "end\n"
    "for _, q in ipairs(order) do t_push_many(q, pushes[q]) end\n"
    "for _, j in ipairs(writes) do\n"
    "  local id = ARGV[j + 1]\n"
    "  if tonumber(ARGV[j + 5]) > 0 then\n"
    "    redis.call('SET', K_DEDUP .. id, token, 'PX', ARGV[j + 5])\n"
    "  end\n"
    "  if tonumber(ARGV[j + 4]) > 0 then\n"
    "    schedule_add(id, ARGV[j + 2], ARGV[j + 3], ARGV[j + 4])\n"
    "  end\n"
    "  put_record(id, ARGV[j + 6], ARGV[j + 7])\n"
    "end\n"
    "if nq > 0 then redis.call('SADD', K_QUEUES, unpack(ARGV, 3, nq + 2)) end\n"
    "return table.concat(out)\n";

/* ARGV: now, max. Moves due entries, earliest first. Returns {promoted,
 * earliest due score left or '0'}. An entry whose payload is missing
 * (written by hand) is dropped from the schedule. */
static const gchar body_promote[] =
    "local ids = redis.call('ZRANGEBYSCORE', K_SCHEDULE, '-inf', ARGV[1],\n"
    "                       'LIMIT', 0, ARGV[2])\n"
    "local n = 0\n"
    "for _, id in ipairs(ids) do\n"
    "  local payload = redis.call('HGET', K_SCHED_PAYLOAD, id)\n"
    "  local queue = redis.call('HGET', K_SCHED_QUEUE, id)\n"
    "  schedule_remove(id)\n"
    "  if payload and queue then\n"
    "    t_push(queue, payload)\n"
    "    n = n + 1\n"
    "  end\n"
    "end\n"
    "local nxt = redis.call('ZRANGE', K_SCHEDULE, 0, 0, 'WITHSCORES')\n"
    "return {n, nxt[2] or '0'}\n";

/* ARGV: dead_letter_max, consumer, then per settlement one of:
 *   'a' id rec rec_ttl       an ACK when the transport's ack is a no-op:
 *                            only the record (compact: fewer arguments)
 *   op queue handle id rec rec_ttl, followed by
 *     op 'A' (ack):          nothing
 *     op 'R' (retry):        payload at
 *     op 'D' (dead letter):  payload task_id task reason detail source
 *                            deliveries at
 *     op 'L' (release):      payload delivery_count
 * Returns {one char per settlement, dead letters dropped by the cap}: 'D'
 * done, 'S' stale (t_check refused: another consumer holds the entry;
 * nothing acknowledged, scheduled or buried; the record is still written,
 * the last to finish wins), 'G' gone (refused too: no consumer holds it,
 * t_gone). Refused ones are added to K_STALE, so stats see fenced settles
 * of every process, not only of the one that asks.
 *
 * Final records are announced only on channels someone listens to: one
 * PUBSUB NUMSUB over the batch's channels replaces a PUBLISH per task
 * (a redis.call costs about a microsecond, and most tasks are not
 * awaited). A waiter subscribes before it reads the record, and a script
 * is atomic, so a waiter is either counted here or reads the record. */
static const gchar body_settle[] =
    "local max = tonumber(ARGV[1])\n"
    "local consumer = ARGV[2]\n"
    "local out, done = {}, {}\n"
    "local stale, dropped = 0, 0\n"
    "local i = 3\n"
    "while i <= #ARGV do\n"
    "  local op = ARGV[i]\n"
    "  if op == 'a' then\n"
    "    if set_record(ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]) then\n"
    "      done[#done + 1] = K_DONE .. ARGV[i + 1]\n"
    "    end\n"
    "    out[#out + 1] = 'D'\n"
    "    i = i + 4\n"
    "  else\n"
    "    local queue, handle = ARGV[i + 1], ARGV[i + 2]\n"
    "    local id, rec, ttl = ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]\n"
    "    local f = i + 6\n"
    "    if op == 'R' then i = f + 2\n"
    "    elseif op == 'D' then i = f + 8\n"
    "    elseif op == 'L' then i = f + 2\n"
    "    else i = f end\n"
    "    if t_check(queue, handle, consumer) then\n"
    "      if op == 'L' then\n"
    "        t_release(queue, handle, consumer, ARGV[f], ARGV[f + 1])\n"
    "      else\n"
    "        t_ack(queue, handle, consumer)\n"
    "        if op == 'R' then\n"
    "          schedule_add(id, queue, ARGV[f], ARGV[f + 1])\n"
    "        elseif op == 'D' then\n"
    "          dropped = dropped + dlq_add(max, ARGV[f], ARGV[f + 1],\n"
    "                  ARGV[f + 2], ARGV[f + 3], ARGV[f + 4], ARGV[f + 5],\n"
    "                  ARGV[f + 6], ARGV[f + 7])\n"
    "        end\n"
    "      end\n"
    "      out[#out + 1] = 'D'\n"
    "    else\n"
    "      out[#out + 1] = t_gone(queue, handle) and 'G' or 'S'\n"
    "      stale = stale + 1\n"
    "    end\n"
    "    if id ~= '' and set_record(id, rec, ttl) then\n"
    "      done[#done + 1] = K_DONE .. id\n"
    "    end\n"
    "  end\n"
    "end\n"
    "if #done > 0 then\n"
    "  local n = redis.call('PUBSUB', 'NUMSUB', unpack(done))\n"
    "  for j = 2, #n, 2 do\n"
    "    if n[j] > 0 then redis.call('PUBLISH', n[j - 1], 'F') end\n"
    "  end\n"
    "end\n"
    "t_flush()\n"
    "if stale > 0 then redis.call('INCRBY', K_STALE, stale) end\n"
    "return {table.concat(out), dropped}\n";

/* ARGV: id rec rec_ttl. Returns 1 if id was scheduled (now removed and the
 * record written), else 0 and nothing written. */
static const gchar body_cancel[] =
    "if not redis.call('ZSCORE', K_SCHEDULE, ARGV[1]) then return 0 end\n"
    "schedule_remove(ARGV[1])\n"
    "put_record(ARGV[1], ARGV[2], ARGV[3])\n"
    "return 1\n";

/* ARGV: id rec rec_ttl. */
static const gchar body_record[] = "put_record(ARGV[1], ARGV[2], ARGV[3])\n"
                                   "return 1\n";

/* ARGV: name occurrence_at, then one submit. Returns {claimed, existed}. */
static const gchar body_claim_periodic[] =
    "local key = K_PERIODIC .. ARGV[1]\n"
    "local last = redis.call('GET', key)\n"
    "if last and tonumber(last) >= tonumber(ARGV[2]) then return {0, 0} end\n"
    "local existed = submit_claimed(ARGV[3], ARGV[7])\n"
    "redis.call('SET', key, ARGV[2])\n"
    "redis.call('SADD', K_QUEUES, ARGV[4])\n"
    "if existed then return {1, 1} end\n"
    "submit_write(ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8],\n"
    "             ARGV[9])\n"
    "return {1, 0}\n";

/* ARGV: entry_id, then one submit. Returns {found, existed}. */
static const gchar body_dlq_replay[] =
    "local e = redis.call('XRANGE', K_DLQ, ARGV[1], ARGV[1])\n"
    "if #e == 0 then return {0, 0} end\n"
    "local existed = submit_claimed(ARGV[2], ARGV[6])\n"
    "dlq_remove(e[1])\n"
    "redis.call('SADD', K_QUEUES, ARGV[3])\n"
    "if existed then return {1, 1} end\n"
    "submit_write(ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7],\n"
    "             ARGV[8])\n"
    "return {1, 0}\n";

/* ARGV: entry_id. Returns 1 if it existed (now deleted), else 0. */
static const gchar body_dlq_delete[] =
    "local e = redis.call('XRANGE', K_DLQ, ARGV[1], ARGV[1])\n"
    "if #e == 0 then return 0 end\n"
    "dlq_remove(e[1])\n"
    "return 1\n";

/* ARGV: '*' (every known queue) or the queues (none: figures without
 * queues). Returns {{queue, depth, ...}, scheduled, dead letters, {reason,
 * count, ...}, {worker, seen, announcement or false, ...}, in_flight,
 * stale settles, {reason, dropped, ...}}. A worker without an
 * announcement has lapsed: it is shown as not alive until the heartbeat
 * prunes it. */
static const gchar body_stats[] =
    "local queues\n"
    "if ARGV[1] == '*' then\n"
    "  queues = redis.call('SMEMBERS', K_QUEUES)\n"
    "  table.sort(queues)\n"
    "else\n"
    "  queues = ARGV\n"
    "end\n"
    "local depths = {}\n"
    "for _, q in ipairs(queues) do\n"
    "  depths[#depths + 1] = q\n"
    "  depths[#depths + 1] = t_depth(q)\n"
    "end\n"
    "local seen = redis.call('ZRANGE', K_WORKERS, 0, -1, 'WITHSCORES')\n"
    "local workers = {}\n"
    "for j = 1, #seen, 2 do\n"
    "  workers[#workers + 1] = seen[j]\n"
    "  workers[#workers + 1] = seen[j + 1]\n"
    "  workers[#workers + 1] = redis.call('GET', K_WINFO .. seen[j])\n"
    "end\n"
    "return {depths, redis.call('ZCARD', K_SCHEDULE),\n"
    "        redis.call('XLEN', K_DLQ), redis.call('HGETALL', K_DLQ_COUNT),\n"
    "        workers, t_in_flight(queues), redis.call('GET', K_STALE) or '0',\n"
    "        redis.call('HGETALL', K_DLQ_DROPPED)}\n";

/* ARGV: queue. Returns how many ready messages were deleted. */
static const gchar body_purge[] = "return t_purge(ARGV[1])\n";

/* ARGV: consumer now lease_ms, then queue handle pairs of the deliveries
 * it holds. Registers the worker for stats, forgets workers silent for
 * three leases, and lets the transport renew leases. Returns 1, or what
 * t_heartbeat returned if anything (an error reply makes the heartbeat
 * fail after its writes: the lease had lapsed before this renewal). */
static const gchar body_heartbeat[] =
    "local now, lease = tonumber(ARGV[2]), tonumber(ARGV[3])\n"
    "redis.call('ZADD', K_WORKERS, ARGV[2], ARGV[1])\n"
    "if lease > 0 then\n"
    "  redis.call('ZREMRANGEBYSCORE', K_WORKERS, '-inf',\n"
    "             string.format('(%.0f', now - 3 * lease))\n"
    "end\n"
    "return t_heartbeat(ARGV[1], lease, ARGV, 4) or 1\n";

/* ARGV: consumer. */
static const gchar body_leave[] = "redis.call('ZREM', K_WORKERS, ARGV[1])\n"
                                  "redis.call('DEL', K_WINFO .. ARGV[1])\n"
                                  "t_leave(ARGV[1])\n"
                                  "return 1\n";

/* ARGV: consumer now ttl_ms info. The announcement lapses with the lease,
 * so a worker killed with -9 shows as not alive within a lease. */
static const gchar body_announce[] =
    "redis.call('SET', K_WINFO .. ARGV[1], ARGV[4], 'PX', ARGV[3])\n"
    "redis.call('ZADD', K_WORKERS, ARGV[2], ARGV[1])\n"
    "return 1\n";

/* ARGV: id expires_at. A revocation never gets shorter (GT), and each one
 * gets the next insertion number: the workers' sync cursor. */
static const gchar body_revoke[] =
    "redis.call('ZADD', K_REVOKED, 'GT', ARGV[2], ARGV[1])\n"
    "local n = redis.call('INCR', K_REVOKED_N)\n"
    "redis.call('ZADD', K_REVOKED_SEQ, n, ARGV[1])\n"
    "return n\n";

/* ARGV: cursor now. Drops lapsed revocations, then returns {cursor', id,
 * expiry, ...}: those recorded after the cursor, in insertion order.
 * cursor' covers every number given so far. */
static const gchar body_revocations_since[] =
    "local lapsed = redis.call('ZRANGEBYSCORE', K_REVOKED, '-inf', ARGV[2])\n"
    "for s = 1, #lapsed, 1000 do\n"
    "  local chunk = {unpack(lapsed, s, math.min(s + 999, #lapsed))}\n"
    "  redis.call('ZREM', K_REVOKED, unpack(chunk))\n"
    "  redis.call('ZREM', K_REVOKED_SEQ, unpack(chunk))\n"
    "end\n"
    "local out = {redis.call('GET', K_REVOKED_N) or '0'}\n"
    "local ids = redis.call('ZRANGEBYSCORE', K_REVOKED_SEQ,\n"
    "                       '(' .. ARGV[1], '+inf')\n"
    "for _, id in ipairs(ids) do\n"
    "  local e = redis.call('ZSCORE', K_REVOKED, id)\n"
    "  if e then out[#out + 1] = id; out[#out + 1] = e end\n"
    "end\n"
    "return out\n";

/* ARGV: id. Returns {1, due, queue, payload} when it is on the schedule,
 * {2, entry} (an XRANGE element) for its newest dead letter, else {0}. */
static const gchar body_lookup[] =
    "local due = redis.call('ZSCORE', K_SCHEDULE, ARGV[1])\n"
    "if due then\n"
    "  return {1, due, redis.call('HGET', K_SCHED_QUEUE, ARGV[1]) or '',\n"
    "          redis.call('HGET', K_SCHED_PAYLOAD, ARGV[1]) or ''}\n"
    "end\n"
    "local eid = redis.call('HGET', K_DLQ_IDS, ARGV[1])\n"
    "if eid then\n"
    "  local e = redis.call('XRANGE', K_DLQ, eid, eid)\n"
    "  if #e == 1 then return {2, e[1]} end\n"
    "end\n"
    "return {0}\n";

/* ARGV: queue cursor limit. The transport's page of ready messages:
 * {cursor', payload, ...}, cursor' '' at the end. */
static const gchar body_list_queued[] =
    "return t_peek(ARGV[1], ARGV[2], tonumber(ARGV[3]))\n";

/* ARGV: cursor_id cursor_due limit (cursor_id '' = from the earliest).
 * Returns {next_id, next_due, then id due queue payload per entry}, in due
 * order (ties in id order, as the zset keeps them), next_id '' at the end.
 * The cursor's entry is found by rank, so entries promoted or cancelled
 * meanwhile shift nothing; if it left the schedule, the page resumes at its
 * due time (entries due then may repeat). O(log n + limit). */
static const gchar body_list_scheduled[] =
    "local start, limit = 0, tonumber(ARGV[3])\n"
    "if ARGV[1] ~= '' then\n"
    "  local r = redis.call('ZRANK', K_SCHEDULE, ARGV[1])\n"
    "  local due = r and redis.call('ZSCORE', K_SCHEDULE, ARGV[1])\n"
    "  if due and tonumber(due) == tonumber(ARGV[2]) then\n"
    "    start = r + 1\n"
    "  else\n"
    "    start = redis.call('ZCOUNT', K_SCHEDULE, '-inf', '(' .. ARGV[2])\n"
    "  end\n"
    "end\n"
    "local e = redis.call('ZRANGE', K_SCHEDULE, start, start + limit - 1,\n"
    "                     'WITHSCORES')\n"
    "local out = {'', ''}\n"
    "for j = 1, #e, 2 do\n"
    "  out[#out + 1] = e[j]\n"
    "  out[#out + 1] = e[j + 1]\n"
    "  out[#out + 1] = redis.call('HGET', K_SCHED_QUEUE, e[j]) or ''\n"
    "  out[#out + 1] = redis.call('HGET', K_SCHED_PAYLOAD, e[j]) or ''\n"
    "end\n"
    "if #e == 2 * limit then out[1], out[2] = e[#e - 1], e[#e] end\n"
    "return out\n";

/* ARGV: id due. Returns 1 if id was scheduled, else 0 and nothing
 * written. due 0 moves it to its queue now (as promotion does); due > 0
 * makes it due then. */
static const gchar body_reschedule[] =
    "if not redis.call('ZSCORE', K_SCHEDULE, ARGV[1]) then return 0 end\n"
    "if tonumber(ARGV[2]) > 0 then\n"
    "  redis.call('ZADD', K_SCHEDULE, 'XX', ARGV[2], ARGV[1])\n"
    "  return 1\n"
    "end\n"
    "local payload = redis.call('HGET', K_SCHED_PAYLOAD, ARGV[1])\n"
    "local queue = redis.call('HGET', K_SCHED_QUEUE, ARGV[1])\n"
    "schedule_remove(ARGV[1])\n"
    "if payload and queue then t_push(queue, payload) end\n"
    "return 1\n";

/* ---- Assembly ------------------------------------------------------------ */

void
sluice_redis_script__init(SluiceRedisScript *script, const gchar *name,
                          const gchar *shebang, const gchar *transport_lua,
                          const gchar *body)
{
  g_autoptr(GChecksum) sum = NULL;

  script->name = name;
  script->text = g_strconcat(
      shebang, sluice_redis_keys__lua_prelude(), lua_hook_defaults,
      transport_lua != NULL ? transport_lua : "", lua_library, body, NULL);
  script->text_len = strlen(script->text);
  sum = g_checksum_new(G_CHECKSUM_SHA1);
  g_checksum_update(sum, (const guchar *)script->text,
                    (gssize)script->text_len);
  g_strlcpy(script->sha, g_checksum_get_string(sum), sizeof script->sha);
}

void
sluice_redis_script__clear(SluiceRedisScript *script)
{
  g_clear_pointer(&script->text, g_free);
  script->text_len = 0;
  script->sha[0] = '\0';
}

void
sluice_redis_scripts__init(SluiceRedisScript *scripts,
                           const gchar *transport_lua)
{
  static const struct {
    SluiceRedisScriptId id;
    const gchar *name;
    const gchar *shebang;
    const gchar *body;
  } table[] = {
      {SLUICE_REDIS_SCRIPT_ENQUEUE, "enqueue", SLUICE_REDIS_LUA_ADDS_WORK,
       body_enqueue},
      {SLUICE_REDIS_SCRIPT_PROMOTE, "promote_due", SLUICE_REDIS_LUA_ADDS_WORK,
       body_promote},
      {SLUICE_REDIS_SCRIPT_SETTLE, "settle", SLUICE_REDIS_LUA_DRAINS,
       body_settle},
      {SLUICE_REDIS_SCRIPT_CANCEL, "cancel_scheduled", SLUICE_REDIS_LUA_DRAINS,
       body_cancel},
      {SLUICE_REDIS_SCRIPT_RECORD, "put_record", SLUICE_REDIS_LUA_DRAINS,
       body_record},
      {SLUICE_REDIS_SCRIPT_CLAIM_PERIODIC, "claim_periodic",
       SLUICE_REDIS_LUA_ADDS_WORK, body_claim_periodic},
      {SLUICE_REDIS_SCRIPT_DLQ_REPLAY, "dlq_replay", SLUICE_REDIS_LUA_ADDS_WORK,
       body_dlq_replay},
      {SLUICE_REDIS_SCRIPT_DLQ_DELETE, "dlq_delete", SLUICE_REDIS_LUA_DRAINS,
       body_dlq_delete},
      {SLUICE_REDIS_SCRIPT_STATS, "stats", SLUICE_REDIS_LUA_READS, body_stats},
      {SLUICE_REDIS_SCRIPT_PURGE, "purge", SLUICE_REDIS_LUA_DRAINS, body_purge},
      {SLUICE_REDIS_SCRIPT_HEARTBEAT, "heartbeat", SLUICE_REDIS_LUA_DRAINS,
       body_heartbeat},
      {SLUICE_REDIS_SCRIPT_LEAVE, "leave", SLUICE_REDIS_LUA_DRAINS, body_leave},
      {SLUICE_REDIS_SCRIPT_ANNOUNCE, "announce", SLUICE_REDIS_LUA_DRAINS,
       body_announce},
      {SLUICE_REDIS_SCRIPT_REVOKE, "revoke", SLUICE_REDIS_LUA_DRAINS,
       body_revoke},
      {SLUICE_REDIS_SCRIPT_REVOCATIONS_SINCE, "list_revocations_since",
       SLUICE_REDIS_LUA_DRAINS, body_revocations_since},
      {SLUICE_REDIS_SCRIPT_LOOKUP, "lookup_task", SLUICE_REDIS_LUA_READS,
       body_lookup},
      {SLUICE_REDIS_SCRIPT_LIST_QUEUED, "list_queued", SLUICE_REDIS_LUA_READS,
       body_list_queued},
      {SLUICE_REDIS_SCRIPT_LIST_SCHEDULED, "list_scheduled",
       SLUICE_REDIS_LUA_READS, body_list_scheduled},
      {SLUICE_REDIS_SCRIPT_RESCHEDULE, "reschedule", SLUICE_REDIS_LUA_ADDS_WORK,
       body_reschedule},
  };
  G_STATIC_ASSERT(G_N_ELEMENTS(table) == SLUICE_REDIS_SCRIPT_N);

  for (gsize i = 0; i < G_N_ELEMENTS(table); i++)
    sluice_redis_script__init(&scripts[table[i].id], table[i].name,
                              table[i].shebang, transport_lua, table[i].body);
}

void
sluice_redis_scripts__clear(SluiceRedisScript *scripts)
{
  for (guint i = 0; i < SLUICE_REDIS_SCRIPT_N; i++)
    sluice_redis_script__clear(&scripts[i]);
}

/* ---- Running ------------------------------------------------------------- */

gboolean
sluice_redis_script__eval(SluiceRedisPool *pool, SluiceRedisConn *conn,
                          const SluiceRedisScript *script,
                          const SluiceRedisKeys *keys, int argc,
                          const char **argv, size_t *lens,
                          redisReply **out_reply, GError **error)
{
  redisReply *replies[2] = {NULL, NULL};
  redisReply *reply;
  const SluiceRedisScriptInfo info = {script->name, script->text};

  g_return_val_if_fail(argc >= SLUICE_REDIS_SCRIPT_ARGV0, FALSE);
  *out_reply = NULL;
  argv[0] = "EVALSHA";
  lens[0] = 7;
  argv[1] = script->sha;
  lens[1] = 40;
  argv[2] = "1";
  lens[2] = 1;
  argv[3] = keys->prefix;
  lens[3] = keys->prefix_len;

  sluice_redis_conn__append(conn, argc, argv, lens);
  if (!sluice_redis_conn__exchange(pool, conn, 1, replies, 0, error))
    return FALSE;
  reply = replies[0];

  if (sluice_redis_reply__is_error_code(reply, "NOSCRIPT")) {
    const char *load[3] = {"SCRIPT", "LOAD", script->text};
    size_t load_lens[3] = {6, 4, script->text_len};

    freeReplyObject(reply);
    /* Load and call again in one round trip. */
    sluice_redis_conn__append(conn, 3, load, load_lens);
    sluice_redis_conn__append(conn, argc, argv, lens);
    if (!sluice_redis_conn__exchange(pool, conn, 2, replies, 0, error))
      return FALSE;
    if (!sluice_redis_reply__check(pool, replies[0], script->name, error)) {
      sluice_redis_replies__free(replies, 2);
      return FALSE;
    }
    freeReplyObject(replies[0]);
    reply = replies[1];
  }
  if (!sluice_redis_reply__check_script(pool, reply, script->name, &info,
                                        error)) {
    freeReplyObject(reply);
    return FALSE;
  }
  *out_reply = reply;
  return TRUE;
}

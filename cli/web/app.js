// app.js - the dashboard of `sluice web`: plain JavaScript, no framework,
// nothing fetched but this server's own /api/ (the page works offline).
//
// Everything a message or a worker says (task names, ids, arguments,
// errors, hosts) is data from outside: it only ever reaches the page as
// text (textContent, text nodes, attribute values), never as markup.
// Write actions send the token typed in the header in the X-Sluice-Token
// header; it is kept in this tab's sessionStorage only.
'use strict';

const STATES = ['queued', 'scheduled', 'retrying', 'running'];
const PAGE = 50;
const REFRESH_MS = 5000;
const EVENTS_POLL_MS = 2000;
const EVENTS_SHOWN = 200; // the newest kept on the events page
const EVENTS_PAGE = 1000;

let overview = null; // the last /api/overview
let refreshTimer = null;
let eventsTimer = null;
let eventsGeneration = 0; // a new events page stops the old one's polling

// ---- DOM helpers -----------------------------------------------------------

// el('td', {class: 'num'}, 'text', child...): strings become text nodes.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function table(headers, rows, attrs) {
  return el('table', attrs || {},
    el('thead', {}, el('tr', {}, headers.map((h) =>
      el('th', {class: h.num ? 'num' : null}, h.label || h)))),
    el('tbody', {}, rows));
}

function show(...nodes) {
  const main = document.getElementById('main');
  main.replaceChildren(...nodes.flat().filter((n) => n));
}

function notice(text, isError) {
  const n = document.getElementById('notice');
  n.textContent = text;
  n.className = isError ? 'error' : '';
  n.hidden = !text;
}

function taskLink(id, entry) {
  if (!id) return '-';
  let href = '#/task/' + encodeURIComponent(id);
  if (entry) href += '?entry=' + encodeURIComponent(entry);
  return el('a', {href, class: 'task-link'}, id);
}

// ---- Times -----------------------------------------------------------------

// Times come as ms since the epoch (null: not reached).
function age(at) {
  if (!at) return '-';
  const ms = at - Date.now();
  const s = Math.round(Math.abs(ms) / 1000);
  const text = s < 60 ? s + 's' : s < 3600 ? Math.round(s / 60) + 'm'
    : s < 86400 ? Math.round(s / 3600) + 'h' : Math.round(s / 86400) + 'd';
  return ms > 0 ? 'in ' + text : text + ' ago';
}

function time(at) {
  return at ? el('span', {title: new Date(at).toISOString()}, age(at)) : '-';
}

// ---- The API ---------------------------------------------------------------

async function api(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v) q.set(k, v);
  const url = '/api/' + path + (q.toString() ? '?' + q : '');
  const r = await fetch(url, {headers: {Accept: 'application/json'}});
  const body = await r.json().catch(() => ({error: 'HTTP ' + r.status}));
  if (!r.ok) throw Object.assign(new Error(body.error || 'HTTP ' + r.status), {status: r.status, body});
  return body;
}

function token() {
  return sessionStorage.getItem('sluice-token') || '';
}

function canWrite() {
  return overview && overview.writes === 'token';
}

async function post(path, params) {
  const headers = {'Content-Type': 'application/x-www-form-urlencoded'};
  if (token()) headers['X-Sluice-Token'] = token();
  const r = await fetch('/api/' + path, {
    method: 'POST',
    headers,
    body: new URLSearchParams(params),
  });
  const body = await r.json().catch(() => ({error: 'HTTP ' + r.status}));
  if (!r.ok) throw Object.assign(new Error(body.error || 'HTTP ' + r.status), {status: r.status, body});
  return body;
}

// Asks in the page's own dialog; resolves true on Confirm.
function confirmAction(text) {
  const dialog = document.getElementById('confirm');
  document.getElementById('confirm-text').textContent = text;
  return new Promise((resolve) => {
    const done = (answer) => {
      ok.removeEventListener('click', yes);
      cancel.removeEventListener('click', no);
      dialog.removeEventListener('cancel', no);
      dialog.close();
      resolve(answer);
    };
    const ok = document.getElementById('confirm-ok');
    const cancel = document.getElementById('confirm-cancel');
    const yes = () => done(true);
    const no = () => done(false);
    ok.addEventListener('click', yes);
    cancel.addEventListener('click', no);
    dialog.addEventListener('cancel', no);
    dialog.showModal();
  });
}

// A write button: asks first when @question is given, then posts, says
// what happened and re-renders the page.
function action(label, cls, question, path, params, done) {
  return el('button', {
    type: 'button', class: cls, disabled: !canWrite(),
    title: canWrite() ? null : 'write actions are disabled (see the badge at the top)',
    onclick: async () => {
      if (question && !(await confirmAction(question))) return;
      try {
        const r = await post(path, params);
        notice(done ? done(r) : label + ': done');
      } catch (e) {
        notice(label + ' failed: ' + e.message, true);
      }
      route(true);
    },
  }, label);
}

// ---- Header ----------------------------------------------------------------

function renderHeader() {
  const where = document.getElementById('where');
  where.textContent = overview.namespace + ' · ' + overview.mode + ' · ' + overview.broker;
  const writes = document.getElementById('writes');
  const input = document.getElementById('token');
  const labels = {
    'token': ['writes need the token', 'good'],
    'read-only': ['read-only', 'warn'],
    'no-token': ['read-only (no --token-file)', 'warn'],
  };
  const [text, cls] = labels[overview.writes] || [overview.writes, ''];
  writes.textContent = text;
  writes.className = 'badge ' + cls;
  input.hidden = overview.writes !== 'token';
}

async function loadOverview() {
  overview = await api('overview');
  renderHeader();
  return overview;
}

// ---- The chart -------------------------------------------------------------

// @now is the server's clock, which the points' times are on.
function chart(rates, startedAt, now) {
  const W = 1200, H = 240, L = 44, R = 12, T = 10, B = 24;
  const from = now - 3600 * 1000;
  const points = rates.points.filter((p) => p.at >= from && p.span_ms > 0).map((p) => ({
    at: p.at,
    processed: p.processed * 1000 / p.span_ms,
    failed: p.failed * 1000 / p.span_ms,
  }));
  let max = 0;
  for (const p of points) max = Math.max(max, p.processed, p.failed);
  max = max <= 0 ? 1 : niceCeil(max);
  const x = (t) => L + (W - L - R) * (t - from) / (now - from);
  const y = (v) => T + (H - T - B) * (1 - v / max);
  const root = svg('svg', {viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'tasks processed and failed per second, last hour', id: 'rate-chart'});
  for (let i = 0; i <= 4; i++) {
    const v = max * i / 4;
    root.append(svg('line', {class: 'grid', x1: L, x2: W - R, y1: y(v), y2: y(v)}));
    root.append(svg('text', {class: 'axis', x: L - 6, y: y(v) + 4, 'text-anchor': 'end'}, fmtRate(v)));
  }
  for (let m = 60; m >= 0; m -= 15) {
    const t = now - m * 60 * 1000;
    root.append(svg('text', {class: 'axis', x: x(t), y: H - 6, 'text-anchor': 'middle'}, m === 0 ? 'now' : '-' + m + 'm'));
  }
  for (const key of ['processed', 'failed']) {
    if (points.length === 0) continue;
    const d = points.map((p) => x(p.at).toFixed(1) + ',' + y(p[key]).toFixed(1)).join(' ');
    root.append(svg('polyline', {class: key, points: d, 'data-series': key}));
  }
  const last = points[points.length - 1];
  return el('div', {class: 'chart'},
    root,
    el('div', {class: 'legend'},
      el('span', {}, el('span', {class: 'swatch processed'}), 'processed/s'),
      el('span', {}, el('span', {class: 'swatch failed'}), 'failed/s'),
      el('span', {id: 'rate-now'}, last ? 'last: ' + fmtRate(last.processed) + ' processed/s, ' + fmtRate(last.failed) + ' failed/s' : 'no samples yet'),
      el('span', {}, 'history since ' + new Date(startedAt).toLocaleTimeString() + ' (when sluice web started)')));
}

function niceCeil(v) {
  const e = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * e) return m * e;
  return 10 * e;
}

function fmtRate(v) {
  return v >= 10 ? v.toFixed(0) : v >= 1 ? v.toFixed(1) : v.toFixed(2);
}

// ---- Pages -----------------------------------------------------------------

async function pageOverview() {
  const [o, rates] = await Promise.all([loadOverview(), api('rates')]);
  const queued = o.queues.reduce((n, q) => n + q.ready, 0);
  const alive = o.workers.filter((w) => w.alive).length;
  const card = (id, n, label, href) => el('a', {href, class: 'card-link'},
    el('div', {class: 'card'}, el('div', {class: 'n', id}, n), el('div', {class: 'label'}, label)));
  const rows = o.queues.map((q) => el('tr', {'data-queue': q.name},
    el('td', {}, el('a', {href: '#/tasks/queued?queue=' + encodeURIComponent(q.name)}, q.name)),
    el('td', {class: 'num depth'}, q.ready),
    el('td', {class: 'paused'}, q.paused ? el('span', {class: 'badge warn'}, 'paused') : el('span', {class: 'badge good'}, 'running')),
    el('td', {}, el('div', {class: 'actions'},
      q.paused
        ? action('Resume', 'resume', null, 'queues/resume', {queue: q.name}, () => 'resumed queue ' + q.name)
        : action('Pause', 'pause', null, 'queues/pause', {queue: q.name}, () => 'paused queue ' + q.name),
      action('Purge', 'purge danger', 'Delete all ' + q.ready + ' tasks waiting in queue “' + q.name + '”? Tasks running or scheduled are not touched.',
        'queues/purge', {queue: q.name, confirm: q.name}, (r) => 'purged ' + r.removed + ' tasks from ' + q.name)))));
  show(
    el('div', {class: 'cards'},
      card('n-queued', queued, 'queued', '#/tasks/queued'),
      card('n-scheduled', o.scheduled, 'scheduled + retrying', '#/tasks/scheduled'),
      card('n-in-flight', o.in_flight === null ? 'n/a' : o.in_flight, 'in flight', '#/tasks/running'),
      card('n-dead', o.dead_letters, 'dead letters', '#/dead'),
      card('n-workers', alive, 'workers alive', '#/workers')),
    el('h2', {}, 'Processed and failed per second, last hour'),
    chart(rates, o.started_at, o.now),
    el('h2', {}, 'Queues'),
    o.queues.length === 0 ? el('p', {class: 'muted'}, 'No queues yet.')
      : table(['Queue', {label: 'Depth', num: true}, 'State', ''], rows, {id: 'queues'}));
  scheduleRefresh();
}

function tasksRow(state, t) {
  const cells = [el('td', {class: 'id'}, taskLink(t.id)), el('td', {class: 'task'}, t.task || '-')];
  const acts = [];
  if (state === 'queued') {
    cells.push(el('td', {class: 'num'}, t.attempt || '-'), el('td', {}, time(t.enqueued_at)),
      el('td', {class: 'wrap'}, t.sealed_with ? 'encrypted with key ' + t.sealed_with
        : t.args === null ? '-' : JSON.stringify(t.args)));
  } else if (state === 'scheduled' || state === 'retrying') {
    cells.push(el('td', {}, t.queue), el('td', {class: 'num'}, t.attempt || '-'), el('td', {}, time(t.due_at)),
      el('td', {class: 'wrap'}, t.error || '-'));
    acts.push(action('Run now', 'run-now', null, 'tasks/run-now', {id: t.id}, () => 'task ' + t.id + ' queued to run now'));
  } else {
    cells.push(el('td', {}, t.queue), el('td', {class: 'wrap'}, t.worker || '-'), el('td', {}, time(t.started_at)));
  }
  acts.push(action(state === 'running' || state === 'queued' ? 'Cancel' : 'Delete', 'delete danger',
    'Delete task ' + t.id + ' (' + (t.task || '?') + ')? ' + (state === 'running'
      ? 'It is revoked: its worker cancels it.'
      : state === 'queued' ? 'It is taken out of its queue for good.' : 'It is taken off the schedule for good.'),
    'tasks/delete', {id: t.id}, (r) => 'task ' + t.id + ': ' + r.outcome));
  cells.push(el('td', {}, el('div', {class: 'actions'}, acts)));
  return el('tr', {'data-id': t.id}, cells);
}

const TASK_HEADERS = {
  queued: ['ID', 'Task', {label: 'Attempt', num: true}, 'Enqueued', 'Arguments', ''],
  scheduled: ['ID', 'Task', 'Queue', {label: 'Attempt', num: true}, 'Due', 'Note', ''],
  retrying: ['ID', 'Task', 'Queue', {label: 'Attempt', num: true}, 'Next attempt', 'Last error', ''],
  running: ['ID', 'Task', 'Queue', 'Worker', 'Started', ''],
};

// The filter bar of a listing: inputs, and Enter or the button applies.
function filters(fields, apply) {
  const inputs = {};
  const go = () => {
    const values = {};
    for (const [k, i] of Object.entries(inputs)) values[k] = i.value.trim();
    apply(values);
  };
  const nodes = fields.map((f) => {
    const i = f.options
      ? el('select', {id: 'filter-' + f.name, 'aria-label': f.label}, f.options.map((o) =>
        el('option', {value: o.value, selected: o.value === f.value}, o.label)))
      : el('input', {id: 'filter-' + f.name, type: 'search', placeholder: f.label, value: f.value || '', 'aria-label': f.label,
        onkeydown: (e) => { if (e.key === 'Enter') go(); }});
    if (f.options) i.addEventListener('change', go);
    inputs[f.name] = i;
    return i;
  });
  return el('div', {class: 'toolbar'}, nodes, el('button', {type: 'button', id: 'filter-apply', onclick: go}, 'Filter'));
}

async function pageTasks(state, params) {
  const o = await loadOverview();
  const queues = o.queues.map((q) => q.name);
  const queue = params.get('queue') || (state === 'queued' ? queues[0] : '');
  const task = params.get('task') || '';
  const cursor = params.get('cursor') || '';
  const base = (s, extra) => {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(extra)) if (v) q.set(k, v);
    return '#/tasks/' + s + (q.toString() ? '?' + q : '');
  };
  const tabs = el('div', {class: 'tabs'}, STATES.map((s) =>
    el('a', {href: base(s, {queue: s === 'queued' ? queue : ''}), class: s === state ? 'current' : null, 'data-state': s}, s)),
  el('a', {href: '#/dead'}, 'dead'));
  const bar = filters([
    state === 'queued'
      ? {name: 'queue', label: 'queue', value: queue, options: queues.map((q) => ({value: q, label: q}))}
      : {name: 'queue', label: 'queue (any)', value: queue},
    {name: 'task', label: 'task name', value: task},
  ], (v) => { location.hash = base(state, v); });
  if (state === 'queued' && !queue) {
    show(el('h2', {}, 'Tasks'), tabs, el('p', {class: 'muted'}, 'No queues yet.'));
    return;
  }
  const page = await api('tasks', {state, queue, task, cursor, limit: PAGE});
  const rows = page.tasks.map((t) => tasksRow(state, t));
  show(
    el('h2', {}, state[0].toUpperCase() + state.slice(1) + ' tasks'),
    tabs, bar,
    rows.length === 0 ? el('p', {class: 'muted', id: 'empty'}, 'No ' + state + ' tasks' + (cursor ? ' on this page.' : '.'))
      : table(TASK_HEADERS[state], rows, {id: 'tasks', 'data-state': state}),
    el('div', {class: 'toolbar'},
      cursor ? el('a', {href: base(state, {queue, task})}, 'First page') : null,
      page.next_cursor ? el('a', {href: base(state, {queue, task, cursor: page.next_cursor}), id: 'next-page'}, 'Next page') : null,
      state === 'running' ? el('span', {class: 'muted'}, 'Running tasks are what workers announced, at most 2 s ago.') : null));
}

async function pageDead(params) {
  const o = await loadOverview();
  const reason = params.get('reason') || '';
  const task = params.get('task') || '';
  const after = params.get('after') || '';
  const link = (extra) => {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(extra)) if (v) q.set(k, v);
    return '#/dead' + (q.toString() ? '?' + q : '');
  };
  const reasons = Object.entries(o.dead_letters_by_reason);
  const byReason = table(['Reason', {label: 'Dead letters', num: true}],
    reasons.map(([r, n]) => el('tr', {'data-reason': r},
      el('td', {}, el('a', {href: link({reason: r, task})}, r)), el('td', {class: 'num count'}, n))),
    {id: 'reasons'});
  const page = await api('dead', {reason, task, after, limit: PAGE});
  const rows = page.entries.map((e) => el('tr', {'data-entry': e.entry_id, 'data-task-id': e.task_id || ''},
    el('td', {}, time(e.at)),
    el('td', {}, e.reason),
    el('td', {class: 'task'}, e.task || '-'),
    el('td', {class: 'id'}, taskLink(e.task_id, e.entry_id)),
    el('td', {class: 'wrap'}, e.detail || '-'),
    el('td', {}, el('div', {class: 'actions'},
      action('Replay', 'replay', 'Replay dead letter of task ' + (e.task_id || '(malformed)') + ' (' + (e.task || '?') + ')? It is queued again at attempt 1.',
        'dead/replay', {entry: e.entry_id}, (r) => 'replayed task ' + (r.task_id || e.task_id)),
      action('Delete', 'delete danger', 'Delete dead letter of task ' + (e.task_id || '(malformed)') + ' for good?',
        'dead/delete', {entry: e.entry_id}, () => 'deleted dead letter ' + e.entry_id)))));
  const what = (reason ? 'reason ' + reason : 'any reason') + (task ? ', task ' + task : '');
  const bulk = (verb, path) => el('button', {
    type: 'button', class: 'danger bulk-' + verb.toLowerCase(), disabled: !canWrite(),
    onclick: async () => {
      let count = (await api('dead/count', {reason, task})).count;
      for (;;) {
        if (count === 0) { notice('No dead letters match.'); return; }
        if (!(await confirmAction(verb + ' all ' + count + ' dead letters of ' + what + '?'))) return;
        try {
          const r = await post(path, {reason, task, expect: count});
          notice(verb + ': ' + r.done + ' done' + (r.gone ? ', ' + r.gone + ' already gone' : ''));
          break;
        } catch (e) {
          if (e.status !== 409) { notice(verb + ' failed: ' + e.message, true); break; }
          count = e.body.count; // changed meanwhile: ask again with the new count
        }
      }
      route(true);
    },
  }, verb + ' all matching');
  show(
    el('h2', {}, 'Dead letters by reason'),
    reasons.length === 0 ? el('p', {class: 'muted'}, 'No dead letters.') : byReason,
    el('h2', {}, 'Dead letters' + (reason || task ? ' (' + what + ')' : '')),
    filters([
      {name: 'reason', label: 'reason', value: reason, options: [{value: '', label: 'any reason'}].concat(
        o.dead_letter_reasons.map((r) => ({value: r, label: r})))},
      {name: 'task', label: 'task name', value: task},
    ], (v) => { location.hash = link(v); }),
    el('div', {class: 'toolbar'}, bulk('Replay', 'dead/replay-all'), bulk('Delete', 'dead/delete-all')),
    rows.length === 0 ? el('p', {class: 'muted', id: 'empty'}, 'No dead letters match.')
      : table(['Buried', 'Reason', 'Task', 'Task id', 'Detail', ''], rows, {id: 'dead'}),
    el('div', {class: 'toolbar'},
      after ? el('a', {href: link({reason, task})}, 'First page') : null,
      page.next_after ? el('a', {href: link({reason, task, after: page.next_after}), id: 'next-page'}, 'Next page') : null));
}

function kv(pairs) {
  return el('dl', {class: 'kv'}, pairs.filter(([, v]) => v !== undefined).map(([k, v]) =>
    [el('dt', {}, k), el('dd', {'data-key': k}, v === null || v === '' ? '-' : v)]));
}

function json(value) {
  return el('pre', {class: 'json'}, JSON.stringify(value, null, 2));
}

// What the dashboard shows for args or a result it has no key for: start
// `sluice web` with the keyring (--keyring) to see them.
function sealed(key) {
  return el('p', {class: 'muted sealed'}, 'encrypted with key ' + key + ' (start sluice web with --keyring to read it)');
}

async function pageTask(id, params) {
  await loadOverview();
  const t = await api('task', {id, entry: params.get('entry')});
  const r = t.record, l = t.listed, d = t.dead_letter, env = t.envelope;
  const parts = [el('h2', {}, 'Task ', el('code', {id: 'task-id'}, id))];
  if (r) {
    parts.push(el('h2', {}, 'Record'), kv([
      ['state', el('span', {class: 'badge', id: 'task-state'}, r.state)], ['task', r.task], ['queue', r.queue],
      ['attempt', r.attempt], ['worker', r.worker], ['enqueued', time(r.enqueued_at)], ['started', time(r.started_at)],
      ['finished', time(r.finished_at)], ['due', time(r.due_at)], ['dead-letter reason', r.dead_letter_reason]]));
    parts.push(el('h2', {}, 'Result'), r.sealed_with ? sealed(r.sealed_with)
      : r.result === null ? el('p', {class: 'muted'}, 'none') : json(r.result));
    parts.push(el('h2', {}, 'Error'), r.error ? el('pre', {id: 'task-error'}, r.error) : el('p', {class: 'muted'}, 'none'));
    if (t.progress) {
      const pct = Math.round(t.progress.fraction * 100) + '%';
      parts.push(el('h2', {}, 'Progress'), kv([
        ['progress', el('span', {id: 'task-progress'}, pct)], ['message', t.progress.message],
        ['reported', time(t.progress.at)]]));
    }
  } else {
    parts.push(el('p', {class: 'muted'}, 'This task has no record (it was enqueued without state tracking, or its record expired).'));
  }
  if (env) {
    parts.push(el('h2', {}, 'Message (envelope)'), kv([
      ['id', env.id], ['task', env.task], ['queue', env.queue], ['attempt', env.attempt], ['version', env.version],
      ['enqueued', time(env.enqueued_at)], ['eta', time(env.eta)], ['max attempts', env.max_attempts],
      ['timeout (ms)', env.timeout_ms], ['expires', time(env.expires_at)],
      ['headers', Object.keys(env.headers).length ? Object.entries(env.headers).map(([k, v]) => k + '=' + v).join(', ') : null]]));
    parts.push(el('h2', {}, 'Arguments'), env.sealed_with ? sealed(env.sealed_with) : json(env.args));
    parts.push(el('h2', {}, 'History'), env.history.length === 0 ? el('p', {class: 'muted'}, 'no failed attempts')
      : el('ol', {id: 'history'}, env.history.map((h) => el('li', {}, h))));
  } else if (l) {
    parts.push(el('h2', {}, 'Message (as listed, ' + l.state + ')'), kv([
      ['queue', l.queue], ['attempt', l.attempt], ['enqueued', time(l.enqueued_at)], ['due', time(l.due_at)],
      ['started', time(l.started_at)], ['worker', l.worker], ['last error', l.error]]));
    parts.push(el('h2', {}, 'Arguments'), l.sealed_with ? sealed(l.sealed_with)
      : l.args === null ? el('p', {class: 'muted'}, 'not known') : json(l.args));
    parts.push(el('p', {class: 'muted'}, 'The full history and headers of a message are shown for dead letters; a listing carries its last error only.'));
  }
  if (d) {
    parts.push(el('h2', {}, 'Dead letter'), kv([
      ['entry', d.entry_id], ['reason', d.reason], ['detail', d.detail], ['source', d.source],
      ['deliveries', d.deliveries], ['buried', time(d.at)], ['decoding', d.decode_error]]),
    el('div', {class: 'toolbar'},
      action('Replay', 'replay', 'Replay this dead letter? It is queued again at attempt 1.', 'dead/replay', {entry: d.entry_id}, () => 'replayed task ' + id),
      action('Delete dead letter', 'delete danger', 'Delete this dead letter for good?', 'dead/delete', {entry: d.entry_id}, () => 'deleted dead letter')));
  }
  show(parts);
}

async function pageWorkers() {
  const o = await loadOverview();
  const badge = {healthy: 'good', late: 'warn', dead: 'bad'};
  const rows = o.workers.map((w) => el('tr', {'data-worker': w.id},
    el('td', {class: 'wrap'}, w.id),
    el('td', {class: 'health'}, el('span', {class: 'badge ' + (badge[w.health] || '')}, w.health)),
    el('td', {}, (w.host || '-') + (w.pid ? ' / ' + w.pid : '')),
    el('td', {class: 'wrap'}, w.queues.join(', ') || '-'),
    el('td', {class: 'num running'}, w.running + ' / ' + w.concurrency),
    el('td', {class: 'num'}, w.succeeded), el('td', {class: 'num'}, w.failed),
    el('td', {class: 'num'}, w.retried), el('td', {class: 'num'}, w.dead_lettered),
    el('td', {}, time(w.started_at)), el('td', {}, time(w.last_seen)),
    el('td', {class: 'wrap running-tasks'}, w.running_tasks.length === 0 ? '-'
      : w.running_tasks.map((t) => el('div', {}, taskLink(t.id), ' ', t.task)))));
  show(el('h2', {}, 'Workers'),
    rows.length === 0 ? el('p', {class: 'muted'}, 'No workers seen lately.')
      : table(['Worker', 'Health', 'Host / pid', 'Queues', {label: 'Running', num: true}, {label: 'Succeeded', num: true},
        {label: 'Failed', num: true}, {label: 'Retried', num: true}, {label: 'Dead', num: true}, 'Started', 'Last seen', 'Running tasks'], rows, {id: 'workers'}),
    el('p', {class: 'muted'}, 'Healthy: a heartbeat in the last 6 s; late: alive but no heartbeat since; dead: its liveness lapsed (listed for a while). Counts are since each worker started; failed counts failed attempts, retried or not.'));
  scheduleRefresh();
}

function eventRow(e) {
  const detail = e.kind === 'progress' && e.progress !== undefined
    ? Math.round(e.progress * 100) + '%' + (e.detail ? ' ' + e.detail : '') : e.detail;
  return el('tr', {'data-cursor': e.cursor, 'data-kind': e.kind, 'data-task-id': e.id},
    // A clock time, not an age: an age is stale once the row stays up.
    el('td', {}, e.at ? el('span', {title: new Date(e.at).toISOString()}, new Date(e.at).toLocaleTimeString()) : '-'),
    el('td', {class: 'kind'}, el('span', {class: 'badge event-' + e.kind}, e.kind)),
    el('td', {class: 'id'}, taskLink(e.id)),
    el('td', {class: 'task'}, e.task || '-'),
    el('td', {}, e.queue || '-'),
    el('td', {class: 'num'}, e.attempt || '-'),
    el('td', {class: 'wrap'}, detail || '-'));
}

// The events page: catches up from the oldest event kept (keeping the
// newest EVENTS_SHOWN), then asks for what follows its cursor every
// EVENTS_POLL_MS. The server never waits for events, so neither does it.
async function pageEvents() {
  await loadOverview();
  const generation = ++eventsGeneration;
  const body = el('tbody', {});
  const status = el('p', {class: 'muted', id: 'events-status'}, 'Reading events…');
  let cursor = '';
  show(el('h2', {}, 'Events'),
    el('p', {class: 'muted'}, 'Task lifecycle events, newest first, as workers started with --events write them; new ones appear as they come.'),
    status,
    el('table', {id: 'events'},
      el('thead', {}, el('tr', {}, ['Time', 'Kind', 'Task id', 'Task', 'Queue', 'Attempt', 'Detail'].map((h) =>
        el('th', {class: h === 'Attempt' ? 'num' : null}, h)))),
      body));
  const poll = async () => {
    if (generation !== eventsGeneration) return;
    try {
      for (;;) {
        const page = await api('events', {cursor, limit: EVENTS_PAGE});
        if (generation !== eventsGeneration) return;
        cursor = page.cursor;
        const rows = page.events.slice(-EVENTS_SHOWN).map(eventRow).reverse();
        body.prepend(...rows);
        while (body.rows.length > EVENTS_SHOWN) body.lastChild.remove();
        if (page.events.length < EVENTS_PAGE) break;
      }
      status.textContent = body.rows.length === 0 ? 'No events yet.'
        : 'Showing the newest ' + body.rows.length + (body.rows.length === EVENTS_SHOWN ? ' (older ones are kept by the broker: sluice events)' : '') + '.';
      status.className = 'muted';
    } catch (e) {
      status.textContent = e.status === 501 ? e.message : 'Could not read events: ' + e.message;
      status.className = e.status === 501 ? 'muted unsupported' : 'error';
      // A broker without events will not grow them: stop asking.
      if (e.status === 501) return;
    }
    document.body.dataset.events = cursor;
    eventsTimer = setTimeout(poll, EVENTS_POLL_MS);
  };
  await poll();
}

function workflowNode(n) {
  if (n.kind === 'task')
    return el('li', {class: 'wf-task', 'data-task-id': n.id, 'data-state': n.state},
      el('span', {class: 'task'}, n.task), ' ', taskLink(n.id), ' ',
      el('span', {class: 'badge state'}, n.state));
  return el('li', {class: 'wf-' + n.kind},
    el('span', {class: 'wf-kind'}, n.kind + (n.policy ? ' (' + n.policy + ')' : '')),
    el('ul', {}, n.children.map(workflowNode)));
}

// A workflow's tree, each task with its state (as `sluice workflow show`).
async function pageWorkflow(id) {
  await loadOverview();
  const w = await api('workflows/' + encodeURIComponent(id));
  show(el('h2', {}, 'Workflow ', el('code', {id: 'workflow-id'}, id)),
    el('p', {id: 'workflow-counts'}, w.tasks + ' tasks; ' + w.finished + ' of ' + w.results + ' results in, ' + w.failed + ' failed'),
    el('ul', {class: 'workflow', id: 'workflow-tree'}, workflowNode(w.tree)));
  scheduleRefresh();
}

// ---- Routing ---------------------------------------------------------------

function scheduleRefresh() {
  clearTimeout(refreshTimer);
  // Not while a dialog asks: the page under it must stay what was asked about.
  refreshTimer = setTimeout(() => { if (!document.getElementById('confirm').open) route(true); else scheduleRefresh(); }, REFRESH_MS);
}

async function route(quiet) {
  clearTimeout(refreshTimer);
  clearTimeout(eventsTimer);
  eventsGeneration++;
  const hash = location.hash.replace(/^#/, '') || '/';
  const [path, query] = hash.split('?');
  const params = new URLSearchParams(query || '');
  const parts = path.split('/').filter((p) => p);
  const page = parts[0] || 'overview';
  for (const a of document.querySelectorAll('nav a'))
    a.classList.toggle('current', a.dataset.page === (page === 'task' ? 'tasks' : page));
  if (!quiet) notice('');
  try {
    if (page === 'overview') await pageOverview();
    else if (page === 'tasks') await pageTasks(STATES.includes(parts[1]) ? parts[1] : 'queued', params);
    else if (page === 'dead') await pageDead(params);
    else if (page === 'task') await pageTask(decodeURIComponent(parts.slice(1).join('/')), params);
    else if (page === 'workers') await pageWorkers();
    else if (page === 'events') await pageEvents();
    else if (page === 'workflow') await pageWorkflow(decodeURIComponent(parts.slice(1).join('/')));
    else show(el('p', {}, 'No such page.'));
    document.body.dataset.loaded = location.hash || '#/';
  } catch (e) {
    show(el('p', {class: 'muted'}, 'Could not load this page: ', el('span', {id: 'load-error'}, e.message)));
    document.body.dataset.loaded = 'error';
    if (page === 'overview' || page === 'workers') scheduleRefresh();
  }
}

document.addEventListener('DOMContentLoaded', () => {
  const input = document.getElementById('token');
  input.value = token();
  input.addEventListener('input', () => sessionStorage.setItem('sluice-token', input.value));
  const find = () => {
    const id = document.getElementById('find-id').value.trim();
    if (id) location.hash = '#/task/' + encodeURIComponent(id);
  };
  document.getElementById('find-go').addEventListener('click', find);
  document.getElementById('find-id').addEventListener('keydown', (e) => { if (e.key === 'Enter') find(); });
  window.addEventListener('hashchange', () => route());
  route();
});

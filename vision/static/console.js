// glassdesk operator console. Plain ES module, no build step, no external resources.
//
// Auth: when the server has a token, the page asks for it once, keeps it in sessionStorage (this
// tab only) and sends it as `Authorization: Bearer` on every request, the event stream included:
// events are read from a fetch() body stream because EventSource cannot send headers. Screenshots,
// JUnit is fetched the same way and saved from a blob: URL; the run viewer (/runs/{id}) does the same.
//
// Live updates come only from GET /api/v1/events (Server-Sent Events); nothing polls.

const SCREEN_W = 1920;
const SCREEN_H = 1080;
const TOKEN_KEY = 'glassdesk.token';
// The statuses a run ends in, as the server defines them (/api/v1/console/info).
let FINAL = new Set();
const EXAMPLE_SCRIPT = `[
  {"action": "move", "x": 960, "y": 420},
  {"action": "click", "x": 640, "y": 47},
  {"action": "type", "text": "hello from glassdesk"},
  {"action": "wait", "duration_ms": 800},
  {"action": "key", "keys": ["Escape"]},
  {"action": "done", "answer": "typed into the address bar, then left it"}
]`;

const $ = (id) => document.getElementById(id);

const state = {
  token: sessionStorage.getItem(TOKEN_KEY) || '',
  info: null,
  sessions: new Map(),
  selected: null,
  seq: 0,
  trace: { id: null, follow: true, data: null, rendered: new Map(), loading: false, dirty: false },
  runs: [],
  started: false,
};

// ------------------------------------------------------------------------------------- helpers

function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key === 'text') node.textContent = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else if (key === 'style') Object.assign(node.style, value);
    else node.setAttribute(key, value === true ? '' : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const fmtInt = (n) => (n ?? 0).toLocaleString('en-US');
function fmtMs(ms) {
  if (ms === null || ms === undefined) return '–';
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}
function fmtDuration(seconds) {
  if (seconds === null || seconds === undefined) return '–';
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
}
function fmtWhen(iso) {
  const d = new Date(iso);
  const time = d.toLocaleTimeString('en-GB', { hour12: false });
  return d.toDateString() === new Date().toDateString() ? time
    : `${d.toLocaleDateString('en-GB', { day: 'numeric', month: 'short' })} ${time.slice(0, 5)}`;
}
const statusText = (s) => (s === 'needs_confirmation' ? 'needs approval' : String(s || '').replace(/_/g, ' '));
const pill = (status, text) => h('span', { class: `pill ${status}`, text: text || statusText(status) });

function describeAction(a) {
  if (!a) return '';
  const kind = String(a.action || '?').replace(/_/g, ' ');
  let name = [...(a.modifiers || []), kind].join('+');
  if (a.button && a.button !== 'left') name = `${a.button} ${name}`;
  const words = [name];
  if (a.direction) words.push(`${a.direction} ×${a.amount ?? '?'}`);
  if (a.x !== null && a.x !== undefined && a.y !== null && a.y !== undefined) words.push(`at (${a.x}, ${a.y})`);
  if (Array.isArray(a.path) && a.path.length) {
    const [p, q] = [a.path[0], a.path[a.path.length - 1]];
    words.push(`(${p.x}, ${p.y}) → (${q.x}, ${q.y})`);
  }
  if (a.keys) words.push(Array.isArray(a.keys) ? a.keys.join(' ') : String(a.keys));
  if (typeof a.text === 'string') words.push(JSON.stringify(a.text.length > 80 ? `${a.text.slice(0, 80)}…` : a.text));
  if (a.duration_ms !== undefined && a.duration_ms !== null) words.push(`${a.duration_ms} ms`);
  if (a.region) words.push(`[${a.region.x0}, ${a.region.y0}, ${a.region.x1}, ${a.region.y1}]`);
  if (a.answer) words.push(`— ${a.answer}`);
  if (a.reason) words.push(`— ${a.reason}`);
  return words.join(' ');
}

function actionPoints(a) {
  if (!a) return [];
  if (Array.isArray(a.path) && a.path.length) return a.path.map((p) => [p.x, p.y]);
  if (a.x !== null && a.x !== undefined && a.y !== null && a.y !== undefined) return [[a.x, a.y]];
  return [];
}

// ------------------------------------------------------------------------------------- API

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(path, { method = 'GET', body, raw = false, signal } = {}) {
  const headers = {};
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(path, {
    method, headers, signal, cache: 'no-store',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 401) {
    showLogin(state.token ? 'That token was not accepted.' : '');
    throw new ApiError(401, 'unauthorized', 'This server needs its access token.');
  }
  if (!response.ok) {
    let code = `http_${response.status}`;
    let message = response.statusText || 'request failed';
    try {
      const data = await response.json();
      if (data.error) ({ code, message } = data.error);
      else if (typeof data.detail === 'string') message = data.detail;
      else if (Array.isArray(data.detail)) message = data.detail.map((d) => `${(d.loc || []).slice(1).join('.')}: ${d.msg}`).join('\n');
    } catch { /* not JSON */ }
    throw new ApiError(response.status, code, message);
  }
  if (raw) return response;
  const type = response.headers.get('content-type') || '';
  return type.includes('json') ? response.json() : response.text();
}

const imageCache = new Map();
function authImage(url) {
  if (!imageCache.has(url)) {
    const promise = api(url, { raw: true }).then((r) => r.blob()).then((b) => URL.createObjectURL(b));
    promise.catch(() => imageCache.delete(url));
    imageCache.set(url, promise);
  }
  return imageCache.get(url);
}

// ------------------------------------------------------------------------------------- login

function showLogin(message) {
  stopEverything();
  $('app').hidden = true;
  $('login').hidden = false;
  $('login-error').hidden = !message;
  $('login-error').textContent = message || '';
  $('token-input').value = '';
  $('token-input').focus();
}

$('login-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  state.token = $('token-input').value.trim();
  sessionStorage.setItem(TOKEN_KEY, state.token);
  $('login-error').hidden = true;
  await boot();
});

$('lock').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  state.token = '';
  location.reload();
});

async function boot() {
  try {
    state.info = await api('/api/v1/console/info');
    FINAL = new Set(state.info.final_statuses);
  } catch (error) {
    if (error.status !== 401) {
      $('login').hidden = false;
      $('login-error').hidden = false;
      $('login-error').textContent = `The server could not be reached: ${error.message}`;
    }
    return;
  }
  $('login').hidden = true;
  $('app').hidden = false;
  $('lock').hidden = !state.token;
  await start();
}

// ------------------------------------------------------------------------------------- start

async function start() {
  state.started = true;
  fillModels();
  await refreshSessions();
  const wanted = new URLSearchParams(location.hash.slice(1)).get('session');
  const ids = [...state.sessions.keys()];
  const first = [wanted, 'default', ids[0]].find((id) => id && state.sessions.has(id));
  if (first) selectSession(first);
  else renderAll();
  streamEvents();
  refreshRuns();
  refreshStats();
}

let streamAbort = null;
let liveRetry = null;
function stopEverything() {
  state.started = false;
  if (streamAbort) streamAbort.abort();
  streamAbort = null;
  disconnectLive();
}

function fillModels() {
  const list = $('model-list');
  list.replaceChildren(...(state.info.models || []).map((m) => h('option', { value: m })));
  const model = $('model');
  if (!model.value) model.value = state.info.default_model || 'scripted';
  toggleScript();
}

// ------------------------------------------------------------------------------------- sessions

async function refreshSessions() {
  const snapshot = await api('/api/v1/console/sessions');
  const fresh = new Map();
  for (const s of snapshot.sessions) {
    const known = state.sessions.get(s.id);
    fresh.set(s.id, { ...s, note: known ? known.note : null });
  }
  state.sessions = fresh;
  state.seq = Math.max(state.seq, snapshot.seq);
  if (state.selected && !fresh.has(state.selected)) state.selected = null;
  renderAll();
}

let sessionsTimer = null;
function scheduleSessionsRefresh() {
  clearTimeout(sessionsTimer);
  sessionsTimer = setTimeout(() => refreshSessions().catch(() => {}), 300);
}

function runBusy(s) {
  return !!(s && s.run && !FINAL.has(s.run.status));
}

// While a run is busy: the step in progress; once finished: how many steps it took.
// How many steps the run may take: the agent's budget plus the steps a person took during a
// take-over (recorded as steps, not counted against the budget). The header, the session list and
// the trace's facts all count this way, so their "step N of M" agree.
function stepsOf(run) {
  return run.max_steps ? run.max_steps + (run.operator_steps || 0) : run.max_steps;
}

function stepLabel(s, long = false) {
  const run = s.run;
  const n = stepsOf(run);
  if (!runBusy(s)) return long ? `${run.step}${n ? ` of ${n}` : ''} steps` : `${run.step}${n ? `/${n}` : ''} steps`;
  let k = run.status === 'needs_confirmation' ? run.step
    : Math.max(run.step + 1, (s.last_action && s.last_action.step) || 0);
  if (n) k = Math.min(k, n);
  return long ? `step ${k}${n ? ` of ${n}` : ''}` : `step ${k}${n ? `/${n}` : ''}`;
}

function sessionBadge(s) {
  if (s.takeover) return ['takeover', 'operator'];
  if (s.paused && runBusy(s)) return ['paused', 'paused'];
  if (runBusy(s)) return [s.run.status, statusText(s.run.status)];
  return [s.status, s.status];
}

function renderSessions() {
  const items = [...state.sessions.values()].map((s) => {
    const [cls, text] = sessionBadge(s);
    const run = s.run;
    const facts = run ? [run.model, stepLabel(s), `${fmtInt(run.tokens)} tokens`]
      .filter(Boolean).join(' · ') : '';
    return h('li', {},
      h('button', {
        class: `session${s.id === state.selected ? ' selected' : ''}`, type: 'button', 'data-session': s.id,
        onclick: () => selectSession(s.id),
      },
      h('div', { class: 'session-top' }, h('span', { class: 'session-id', text: s.id }), pill(cls, text)),
      run ? h('div', { class: 'session-instr', text: run.instruction, title: run.instruction })
        : h('div', { class: 'session-empty', text: 'No run yet' }),
      facts ? h('div', { class: 'session-facts', text: facts }) : null,
      runBusy(s) && run.max_steps ? h('div', { class: `session-bar${s.paused || run.status === 'needs_confirmation' ? ' wait' : ''}` },
        h('span', { style: { width: `${Math.min(100, (run.step / stepsOf(run)) * 100)}%` } })) : null));
  });
  $('sessions').replaceChildren(...(items.length ? items : [h('li', { class: 'session-empty', text: 'No sessions.' })]));
}

function selectSession(id) {
  const previous = state.selected;
  if (previous && previous !== id && live.control) setTakeover(false, previous);
  state.selected = id;
  const params = new URLSearchParams(location.hash.slice(1));
  params.set('session', id);
  history.replaceState(null, '', `#${params}`);
  const s = state.sessions.get(id);
  if (previous !== id) {
    showTrace(s && s.run ? s.run.trace_id : null, { follow: true });
    connectLive(id, false);
    refreshRecording(id);
  }
  renderAll();
}

$('new-session').addEventListener('click', async () => {
  const button = $('new-session');
  button.disabled = true;
  button.textContent = 'Starting…';
  try {
    const created = await api('/api/v1/sessions', { method: 'POST', body: {} });
    await refreshSessions();
    selectSession(created.id);
  } catch (error) {
    alert(`Could not start a session: ${error.message}`);
  } finally {
    button.disabled = false;
    button.textContent = '+ New';
  }
});

// ------------------------------------------------------------------------------------- selected session

function renderAll() {
  renderSessions();
  renderSelected();
}

function renderSelected() {
  const s = state.sessions.get(state.selected);
  const run = s && s.run;
  const busy = runBusy(s);
  $('live-session').textContent = s ? s.id : '—';
  $('start-session').textContent = s ? s.id : '—';
  const status = $('run-status');
  const [cls, text] = !s ? ['idle', 'no session'] : s.takeover ? ['takeover', 'operator has control']
    : s.paused && busy ? ['paused', 'paused'] : run ? [run.status, statusText(run.status)] : ['idle', 'idle'];
  status.className = `pill ${cls}`;
  status.textContent = text;
  $('run-progress').textContent = run ? stepLabel(s, true) : '';
  $('run-instruction').hidden = !run;
  $('run-instruction').textContent = run ? run.instruction : '';

  const active = busy && run.active;
  $('pause').disabled = !active || s.paused;
  $('pause').hidden = !!(s && s.paused && busy);
  $('resume').hidden = !(s && s.paused);
  $('stop').disabled = !busy;
  $('takeover').checked = !!(s && s.takeover);
  $('takeover').disabled = !s;
  $('start').disabled = !s || busy || s.status !== 'ready';
  $('start').firstChild.textContent = busy ? 'Running on ' : 'Start on ';

  const pending = run && run.status === 'needs_confirmation' ? run.pending_safety_checks || [] : [];
  $('safety').hidden = !pending.length;
  const held = pending.length ? heldActions(run) : [];
  $('safety-checks').replaceChildren(...pending.map((c) => h('li', {}, h('code', { text: c.code }), ' ', c.message)),
    held.length ? h('li', { class: 'held' }, 'It wants to: ', h('b', { text: held.map(describeAction).join('; ') })) : null);
  showHeldMarker(held);

  const now = $('now-text');
  now.replaceChildren();
  if (!run) now.append('No run on this session yet. Start one on the left.');
  else if (s.note && busy) now.append(s.note);
  else if (run.status === 'needs_confirmation') now.append(h('b', { text: 'Waiting for your decision' }), ' — approve to let the agent act, or deny to stop the run.');
  else if (s.paused && busy) now.append(h('b', { text: 'Paused' }), ` — ${s.pause_reason || 'by the operator'}`);
  else if (busy && s.last_action && s.last_action.action) {
    now.append(h('b', { text: `Step ${s.last_action.step}${run.max_steps ? ` of ${stepsOf(run)}` : ''}` }), ` — ${describeAction(s.last_action.action)}`);
  } else if (busy) now.append(h('b', { text: `Step ${run.step + 1}` }), ' — the model is thinking…');
  else {
    now.append(h('b', { text: `Finished: ${statusText(run.status)}` }));
    if (run.answer) now.append(` — ${run.answer}`);
    else if (run.error) now.append(` — ${run.error.message}`);
  }
  $('now-tokens').textContent = run ? `${fmtInt(run.tokens)} tokens` : '';
  $('follow').hidden = state.trace.follow || !run;
  $('live-wrap').classList.toggle('control', live.control);
  $('control-banner').hidden = !live.control;
}

// ------------------------------------------------------------------------------------- controls

function sessionPath(suffix) {
  return `/api/v1/sessions/${encodeURIComponent(state.selected)}/${suffix}`;
}

async function control(suffix) {
  try {
    await api(sessionPath(suffix), { method: 'POST' });
  } catch (error) {
    flashError(error);
  }
}

$('pause').addEventListener('click', () => control('vision/pause'));
$('resume').addEventListener('click', () => {
  const s = state.sessions.get(state.selected);
  if (s && s.takeover) setTakeover(false);
  else control('vision/resume');
});
$('stop').addEventListener('click', () => control('vision/cancel'));
$('deny').addEventListener('click', () => control('vision/cancel'));
$('approve').addEventListener('click', () => {
  const s = state.sessions.get(state.selected);
  const ids = (s && s.run && s.run.pending_safety_checks || []).map((c) => c.id);
  if (!ids.length) return;
  $('approve').disabled = true;
  // Continues the held run; the call returns when the run ends, progress arrives as events.
  api(sessionPath('vision/act'), { method: 'POST', body: { acknowledged_safety_checks: ids } })
    .catch(flashError)
    .finally(() => { $('approve').disabled = false; });
});
$('takeover').addEventListener('change', (event) => setTakeover(event.target.checked));
$('record').addEventListener('change', (event) => setRecording(event.target.checked));

// The session recording (a video receipt of the display, start to stop): the switch shows whether
// the selected session is being filmed; a stopped one leaves a line with its video and SHA-256.
async function refreshRecording(sessionId) {
  $('record').checked = false;
  $('recording').hidden = true;
  if (!sessionId) return;
  try {
    const rec = await api(`/api/v1/sessions/${encodeURIComponent(sessionId)}/recording`);
    if (rec && sessionId === state.selected) showRecording(rec);  // null: not being filmed
  } catch (error) {
    flashError(error);
  }
}

function showRecording(rec) {
  const box = $('recording');
  $('record').checked = rec.status === 'recording';
  box.hidden = false;
  box.replaceChildren();
  if (rec.status === 'recording') {
    box.append(h('b', { text: 'Recording' }), ` — since ${new Date(rec.started_at).toLocaleTimeString()}, `
      + `${rec.actions} action${rec.actions === 1 ? '' : 's'} marked`);
  } else if (rec.video) {
    const n = rec.video.chapters;
    const link = h('a', { href: '#', text: `video (${rec.video.duration_s.toFixed(1)} s, ${n} chapter${n === 1 ? '' : 's'})` });
    link.addEventListener('click', (event) => {
      event.preventDefault();
      authImage(rec.video.url).then((url) => window.open(url, '_blank')).catch(flashError);
    });
    box.append(h('b', { text: 'Recorded' }), ' — ', link, ` · sha256 ${rec.video.sha256.slice(0, 16)}…`);
  } else {
    box.append(h('b', { text: 'Recording stopped' }), ` — ${rec.video_note || 'no video'}`);
  }
}

async function setRecording(on, sessionId = state.selected) {
  if (!sessionId) return;
  $('record').disabled = true;
  try {
    const rec = await api(`/api/v1/sessions/${encodeURIComponent(sessionId)}/recording/${on ? 'start' : 'stop'}`,
      { method: 'POST' });
    if (sessionId === state.selected) showRecording(rec);
  } catch (error) {
    flashError(error);
    $('record').checked = !on;
  } finally {
    $('record').disabled = !state.selected;
  }
}

async function setTakeover(on, sessionId = state.selected) {
  if (!sessionId) return;
  try {
    const creds = await api(`/api/v1/sessions/${encodeURIComponent(sessionId)}/takeover`, { method: 'POST', body: { on } });
    if (sessionId === state.selected) connectLive(sessionId, on, creds);
  } catch (error) {
    flashError(error);
    $('takeover').checked = !on;
  }
}

function flashError(error) {
  const now = $('now-text');
  now.replaceChildren(h('b', { text: 'Error' }), ` — ${error.message}`);
}

// ------------------------------------------------------------------------------------- start form

function toggleScript() {
  const scripted = $('model').value.trim() === 'scripted';
  $('script-field').hidden = !scripted;
  if (scripted && !$('script').value.trim()) $('script').value = EXAMPLE_SCRIPT;
}
$('model').addEventListener('input', toggleScript);
$('model').addEventListener('change', toggleScript);
$('script-example').addEventListener('click', () => { $('script').value = EXAMPLE_SCRIPT; });

$('start-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const error = $('start-error');
  error.hidden = true;
  const s = state.sessions.get(state.selected);
  if (!s) return;
  const body = { instruction: $('instruction').value.trim(), max_steps: Number($('max-steps').value) || 10 };
  const model = $('model').value.trim();
  if (model) body.model = model;
  const budget = Number($('budget-tokens').value);
  if (budget > 0) body.budget_tokens = budget;
  if (model === 'scripted') {
    try {
      body.script = JSON.parse($('script').value);
      if (!Array.isArray(body.script)) throw new Error('it must be a JSON list of actions');
    } catch (e) {
      error.textContent = `Script: ${e.message}`;
      error.hidden = false;
      return;
    }
  }
  $('start').disabled = true;
  state.trace.follow = true;
  // The call returns when the run ends; the run itself is followed through events. A plain JSON
  // call (not the SSE variant): closing this page must not cancel the run.
  api(`/api/v1/sessions/${encodeURIComponent(s.id)}/vision/act`, { method: 'POST', body })
    .catch((e) => {
      error.textContent = e.message;
      error.hidden = false;
    })
    .finally(renderSelected);
});

// ------------------------------------------------------------------------------------- events

function setConn(mode) {
  const conn = $('conn');
  conn.className = `conn ${mode}`;
  conn.textContent = mode === 'live' ? 'live' : mode === 'down' ? 'reconnecting…' : 'connecting…';
}

async function streamEvents() {
  let delay = 1000;
  while (state.started) {
    streamAbort = new AbortController();
    try {
      const response = await api(`/api/v1/events?after=${state.seq}`, { raw: true, signal: streamAbort.signal });
      setConn('live');
      delay = 1000;
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let cut;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          handleBlock(buffer.slice(0, cut));
          buffer = buffer.slice(cut + 2);
        }
      }
    } catch (error) {
      if (error.status === 401 || error.name === 'AbortError') return;
    }
    if (!state.started) return;
    setConn('down');
    await sleep(delay);
    delay = Math.min(delay * 2, 10000);
    try { await refreshSessions(); } catch { /* next round */ }
  }
}

function handleBlock(block) {
  let data = '';
  for (const line of block.split('\n')) {
    if (line.startsWith('data:')) data += line.slice(5).trimStart();
  }
  if (!data) return;
  let event;
  try { event = JSON.parse(data); } catch { return; }
  if (event.seq <= state.seq) return;
  state.seq = event.seq;
  try { onEvent(event); } catch (error) { console.warn('event handling failed', event.kind, error); }
}

let runsTimer = null;
let statsTimer = null;
function scheduleRuns() { clearTimeout(runsTimer); runsTimer = setTimeout(refreshRuns, 250); }
function scheduleStats() { clearTimeout(statsTimer); statsTimer = setTimeout(refreshStats, 400); }

function onEvent(ev) {
  if (ev.kind.startsWith('session_')) {  // created, deleted, restarted: the list is the server's
    scheduleSessionsRefresh();
    return;
  }
  const s = state.sessions.get(ev.session_id);
  if (!s) {
    if (ev.session_id) scheduleSessionsRefresh();
    return;
  }
  const sameRun = s.run && s.run.trace_id === ev.trace_id;
  switch (ev.kind) {
    case 'run_started':
      s.run = { trace_id: ev.trace_id, status: 'running', instruction: ev.instruction, model: ev.model, step: 0,
        max_steps: ev.max_steps, tokens: 0, pending_safety_checks: [], active: true };
      s.last_action = null;
      s.note = null;
      if (ev.session_id === state.selected && state.trace.follow) showTrace(ev.trace_id, { follow: true });
      scheduleRuns();
      break;
    case 'action':
      s.last_action = { step: ev.step, action: ev.action };
      s.note = null;
      if (ev.session_id === state.selected) flashMarker(ev.action);
      break;
    case 'step':
      if (sameRun) {
        s.run.step = ev.step.index;
        s.run.tokens = ev.tokens;
        if (ev.max_steps) s.run.max_steps = ev.max_steps;
        if (ev.operator_steps !== undefined) s.run.operator_steps = ev.operator_steps;
      }
      if (state.trace.id === ev.trace_id) refreshTrace();
      scheduleRuns();
      break;
    case 'retrying':
      s.note = `The model call failed — retry ${ev.attempt} in ${ev.wait_s} s (${ev.reason})`;
      break;
    case 'needs_confirmation':
      if (sameRun) Object.assign(s.run, { status: 'needs_confirmation', pending_safety_checks: ev.checks || [], active: false });
      if (state.trace.id === ev.trace_id) refreshTrace();
      scheduleRuns();
      break;
    case 'acknowledged':
      if (sameRun) Object.assign(s.run, { status: 'running', pending_safety_checks: [], active: true });
      if (state.trace.id === ev.trace_id) renderTraceHead();
      scheduleRuns();
      break;
    case 'paused':
      s.paused = true;
      s.pause_reason = ev.reason;
      break;
    case 'resumed':
      s.paused = false;
      s.pause_reason = null;
      break;
    case 'takeover':
      s.takeover = !!ev.on;
      break;
    case 'run_finished':
      if (sameRun) {
        Object.assign(s.run, { status: ev.status, active: false, pending_safety_checks: [], answer: ev.answer,
          error: ev.error, step: ev.steps ?? s.run.step, tokens: ev.tokens ?? s.run.tokens });
      }
      s.note = null;
      if (state.trace.id === ev.trace_id) refreshTrace();
      scheduleRuns();
      scheduleStats();
      break;
    default:
      return;
  }
  if (s.run && state.trace.id === s.run.trace_id && state.trace.data) {
    renderTraceHead();
    renderTimelineEnd();
  }
  renderSessions();
  if (ev.session_id === state.selected) renderSelected();
}

// ------------------------------------------------------------------------------------- live view

const live = { rfb: null, sid: null, control: false };

async function connectLive(sid, controlWanted, creds = null) {
  disconnectLive();
  live.sid = sid;
  live.control = false;
  setLiveState('Connecting to the desktop…');
  renderSelected();
  if (!state.info.novnc) {
    setLiveState('No live view: the noVNC client is not installed on the server (Debian package "novnc").');
    return;
  }
  let info = creds;
  try {
    info = info || await api(`/api/v1/sessions/${encodeURIComponent(sid)}/live`);
  } catch (error) {
    setLiveState(`No live view yet: ${error.message}`);
    retryLive(sid);
    return;
  }
  if (live.sid !== sid) return;
  const { default: RFB } = await import('/console/novnc/core/rfb.js');
  if (live.sid !== sid) return;
  // The server relays the session's VNC (same origin); the live-view token is offered as a
  // websocket subprotocol, never put in the URL. It lets in new connections until it expires.
  const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}${info.websocket}`;
  const holder = h('div', { class: 'rfb' });
  holder.style.position = 'absolute';
  holder.style.inset = '0';
  $('screen').replaceChildren(holder);
  const rfb = new RFB(holder, url, { shared: true, wsProtocols: ['binary', `glassdesk.token.${info.token}`] });
  rfb.viewOnly = info.view_only;
  rfb.scaleViewport = true;
  rfb.resizeSession = false;
  rfb.clipViewport = false;
  rfb.showDotCursor = !info.view_only;
  rfb.focusOnClick = !info.view_only;
  rfb.background = '#0b1220';
  rfb.qualityLevel = 8;
  rfb.addEventListener('connect', () => {
    if (live.rfb !== rfb) return;
    setLiveState('');
    if (!info.view_only) rfb.focus();
  });
  rfb.addEventListener('disconnect', (event) => {
    if (live.rfb !== rfb) return;
    live.rfb = null;
    setLiveState(event.detail && event.detail.clean ? 'The live view closed — reconnecting…'
      : 'Lost the connection to the desktop — reconnecting…');
    retryLive(sid);
  });
  rfb.addEventListener('securityfailure', (event) => {
    setLiveState(`The desktop refused the live view: ${(event.detail && event.detail.reason) || 'authentication failed'}`);
  });
  live.rfb = rfb;
  live.control = !info.view_only;
  renderSelected();
}

function retryLive(sid) {
  clearTimeout(liveRetry);
  liveRetry = setTimeout(() => {
    if (state.started && state.selected === sid && !live.rfb) connectLive(sid, false);
  }, 2000);
}

function disconnectLive() {
  clearTimeout(liveRetry);
  const rfb = live.rfb;
  live.rfb = null;
  live.control = false;
  if (rfb) {
    try { rfb.disconnect(); } catch { /* already gone */ }
  }
}

function setLiveState(text) {
  $('live-state').textContent = text;
  $('live-state').hidden = !text;
}

// The actions a run holds until the operator decides: the last step of its trace, if shown.
function heldActions(run) {
  const data = state.trace.data;
  if (!data || data.meta.trace_id !== run.trace_id || !data.steps.length) return [];
  const last = data.steps[data.steps.length - 1];
  return last.error && last.error.code === 'needs_confirmation' ? last.actions || [] : [];
}

function placeOnLive(node, x, y) {
  const wrap = $('live-wrap').getBoundingClientRect();
  const canvas = $('screen').querySelector('canvas');
  let rect = canvas ? canvas.getBoundingClientRect() : wrap;
  if (!rect.width || !rect.height) rect = wrap;
  node.style.left = `${rect.left - wrap.left + (x / SCREEN_W) * rect.width}px`;
  node.style.top = `${rect.top - wrap.top + (y / SCREEN_H) * rect.height}px`;
}

function showHeldMarker(actions) {
  const wrap = $('live-wrap');
  wrap.querySelectorAll('.held-marker').forEach((n) => n.remove());
  for (const action of actions) {
    const points = actionPoints(action);
    if (!points.length) continue;
    const node = h('div', { class: 'held-marker', title: `held: ${describeAction(action)}` });
    wrap.append(node);
    placeOnLive(node, ...points[0]);
  }
}

function flashMarker(action) {
  const points = actionPoints(action);
  if (!points.length) return;
  const marker = $('live-marker');
  marker.hidden = false;
  placeOnLive(marker, ...points[0]);
  marker.style.animation = 'none';
  void marker.offsetWidth; // restart the animation
  marker.style.animation = '';
}

// ------------------------------------------------------------------------------------- timeline

function showTrace(traceId, { follow } = {}) {
  if (follow !== undefined) state.trace.follow = follow;
  if (state.trace.id !== traceId) {
    Object.assign(state.trace, { id: traceId, data: null, rendered: new Map(), dirty: false });
    $('timeline').replaceChildren();
    $('timeline').dataset.trace = traceId || '';
  }
  renderTraceHead();
  markSelectedRun();
  renderSelected();
  if (traceId) refreshTrace();
}

$('follow').addEventListener('click', () => {
  const s = state.sessions.get(state.selected);
  showTrace(s && s.run ? s.run.trace_id : null, { follow: true });
});

async function refreshTrace() {
  const t = state.trace;
  if (!t.id) return;
  if (t.loading) { t.dirty = true; return; }
  t.loading = true;
  try {
    do {
      t.dirty = false;
      const id = t.id;
      const data = await api(`/api/v1/traces/${encodeURIComponent(id)}`);
      if (state.trace.id !== id) break;
      t.data = data;
      renderTraceHead();
      renderSteps();
      renderSelected();
    } while (t.dirty);
  } catch (error) {
    $('trace-empty').hidden = false;
    $('trace-empty').textContent = `Could not load the trace: ${error.message}`;
  } finally {
    t.loading = false;
  }
}

// A trace on disk says "running" while its run waits for approval; the live session knows better.
function liveStatus(meta) {
  for (const s of state.sessions.values()) {
    if (s.run && s.run.trace_id === meta.trace_id && !FINAL.has(meta.status)) {
      return s.takeover ? 'paused' : s.paused && s.run.status === 'running' ? 'paused' : s.run.status;
    }
  }
  return meta.status;
}

function renderTraceHead() {
  const data = state.trace.data;
  $('trace-empty').hidden = !!data;
  $('trace-empty').textContent = state.trace.id ? 'Loading…' : 'The steps of the current run appear here as they happen.';
  $('trace-meta').hidden = !data;
  if (!data) return;
  const m = data.meta;
  $('trace-instruction').textContent = m.instruction;
  // A done the run did not check (no expect) is the model's word: shown as such, not in green.
  const live = liveStatus(m);
  const current = (live === 'done' || live === 'done_after_heal') && FINAL.has(m.status) && m.verified !== true
    ? 'unverified' : live;
  const status = $('trace-status');
  status.className = `pill ${current}`;
  status.textContent = statusText(current);
  const tokens = (m.usage.input_tokens || 0) + (m.usage.output_tokens || 0);
  const seconds = m.finished_at ? (new Date(m.finished_at) - new Date(m.started_at)) / 1000 : null;
  const byOperator = data.steps.filter((st) => st.by === 'operator').length;
  $('trace-facts').textContent = [m.model,
    `${m.steps}${m.max_steps ? ` / ${m.max_steps + byOperator}` : ''} steps${byOperator ? ` (${byOperator} by the operator)` : ''}`,
    `${fmtInt(tokens)} tokens`, seconds !== null ? fmtDuration(seconds) : null, m.session_id ? `session ${m.session_id}` : null]
    .filter(Boolean).join(' · ');
  const outcome = $('trace-outcome');
  outcome.hidden = !(m.answer || m.error);
  outcome.className = `trace-outcome ${m.error ? 'bad' : 'ok'}`;
  outcome.textContent = m.error ? `${m.error.code}: ${m.error.message}` : m.answer ? `Answer: ${m.answer}` : '';
}

function renderSteps() {
  const t = state.trace;
  const list = $('timeline');
  const column = list;
  const nearBottom = column.scrollHeight - column.scrollTop - column.clientHeight < 160;
  let added = false;
  for (const step of t.data.steps) {
    if (t.rendered.has(step.index)) continue;
    const node = stepNode(step, t.data.meta);
    t.rendered.set(step.index, node);
    list.append(node);
    added = true;
  }
  renderTimelineEnd();
  if (added && t.follow && nearBottom) column.scrollTop = column.scrollHeight;
}

function renderTimelineEnd() {
  const data = state.trace.data;
  if (!data) return;
  const list = $('timeline');
  const current = liveStatus(data.meta);
  let end = list.querySelector('.timeline-end');
  if (!end) end = h('li', { class: 'timeline-end' });
  end.textContent = !FINAL.has(data.meta.status)
    ? (current === 'needs_confirmation' ? 'waiting for approval…' : current === 'paused' ? 'paused…' : 'running…')
    : `${statusText(data.meta.status)} after ${data.meta.steps} step${data.meta.steps === 1 ? '' : 's'}`;
  list.append(end);
}

function stepImageUrl(traceId, index, which) {
  return `/api/v1/traces/${encodeURIComponent(traceId)}/steps/${index}/${which}.png`;
}

function markNodes(actions) {
  const nodes = [];
  const numbered = actions.filter((a) => actionPoints(a).length).length > 1;
  actions.forEach((a, i) => {
    const points = actionPoints(a);
    const pos = ([x, y]) => ({ left: `${(x / SCREEN_W) * 100}%`, top: `${(y / SCREEN_H) * 100}%` });
    if (points.length) {
      nodes.push(h('span', { class: 'mark', style: pos(points[0]), title: describeAction(a) }, numbered ? h('b', { text: i + 1 }) : null));
      if (points.length > 1) nodes.push(h('span', { class: 'mark end', style: pos(points[points.length - 1]) }));
    }
    if (a.region) {
      const r = a.region;
      nodes.push(h('span', { class: 'region', style: {
        left: `${(r.x0 / SCREEN_W) * 100}%`, top: `${(r.y0 / SCREEN_H) * 100}%`,
        width: `${((r.x1 - r.x0) / SCREEN_W) * 100}%`, height: `${((r.y1 - r.y0) / SCREEN_H) * 100}%` } }));
    }
  });
  return nodes;
}

function stepNode(step, meta) {
  const pending = step.error && step.error.code === 'needs_confirmation';
  const failed = !pending && (step.error || (step.results || []).some((r) => !r.ok));
  const acts = (step.actions || []).map(describeAction).join('; ') || 'no action';
  const which = step.before_png ? 'before' : step.after_png ? 'after' : null;
  let shot = null;
  if (which) {
    const img = h('img', { alt: `step ${step.index}: ${acts}`, 'data-step': step.index });
    authImage(stepImageUrl(meta.trace_id, step.index, which)).then((url) => { img.src = url; }).catch(() => {
      img.alt = 'screenshot unavailable';
    });
    shot = h('div', { class: 'shot', title: 'Open large', onclick: () => openLightbox(meta.trace_id, step, which) },
      img, ...markNodes(step.actions || []));
  }
  const usage = step.usage || {};
  const operator = step.by === 'operator';
  const metaLine = operator ? 'by the operator, during a take-over'
    : [`model ${fmtMs(step.model_ms)}`, `exec ${fmtMs(step.exec_ms)}`, `settle ${fmtMs(step.settle_ms)}`,
      `${fmtInt(usage.input_tokens)} in / ${fmtInt(usage.output_tokens)} out tokens`].join(' · ');
  const words = step.text && step.text.trim()
    ? h('p', { class: 'words', text: step.text, title: 'Click to expand', onclick: (e) => e.currentTarget.classList.toggle('open') })
    : h('p', { class: 'words none', text: 'no words from the model' });
  const problems = [];
  if (step.error) problems.push(pending ? `Safety check — ${step.error.message}` : `${step.error.code}: ${step.error.message}`);
  for (const r of step.results || []) if (!r.ok && r.error && !(step.error && step.error.message.includes(r.error))) problems.push(r.error);
  return h('li', { class: `step${failed ? ' failed' : ''}${pending ? ' pending' : ''}${operator ? ' operator' : ''}`, 'data-index': step.index },
    h('div', { class: 'step-head' }, h('span', { class: 'step-no', text: step.index }), h('span', { class: 'step-acts', text: acts }),
      operator ? h('span', { class: 'step-by', text: 'operator' }) : null),
    shot, words, h('div', { class: 'step-meta', text: metaLine }),
    problems.length ? h('div', { class: 'step-error', text: problems.join('\n') }) : null);
}

// ------------------------------------------------------------------------------------- lightbox

const lightbox = { traceId: null, step: null, which: 'before' };

function openLightbox(traceId, step, which) {
  Object.assign(lightbox, { traceId, step, which });
  $('lightbox').hidden = false;
  drawLightbox();
}

function drawLightbox() {
  const { traceId, step, which } = lightbox;
  $('lightbox-title').textContent = `Step ${step.index} — ${(step.actions || []).map(describeAction).join('; ') || 'no action'}`;
  $('lb-before').classList.toggle('active', which === 'before');
  $('lb-after').classList.toggle('active', which === 'after');
  $('lb-before').disabled = !step.before_png;
  $('lb-after').disabled = !step.after_png;
  const img = $('lightbox-img');
  img.removeAttribute('src');
  authImage(stepImageUrl(traceId, step.index, which)).then((url) => { img.src = url; }).catch(() => {});
  $('lightbox-marks').replaceChildren(...(which === 'before' ? markNodes(step.actions || []) : []));
}

$('lb-before').addEventListener('click', () => { lightbox.which = 'before'; drawLightbox(); });
$('lb-after').addEventListener('click', () => { lightbox.which = 'after'; drawLightbox(); });
$('lightbox-close').addEventListener('click', () => { $('lightbox').hidden = true; });
$('lightbox').addEventListener('click', (event) => { if (event.target === $('lightbox')) $('lightbox').hidden = true; });
document.addEventListener('keydown', (event) => { if (event.key === 'Escape') $('lightbox').hidden = true; });

// ------------------------------------------------------------------------------------- report and JUnit

// The run viewer (/runs/{id}, vision/static/run.js) in a new tab. window.open without noopener gives
// the new tab a copy of this tab's sessionStorage: the viewer finds the token there and asks for nothing.
function openReport(traceId) {
  window.open(`/runs/${encodeURIComponent(traceId)}`, '_blank');
}

async function downloadJunit(traceId) {
  try {
    const xml = await api(`/api/v1/traces/${encodeURIComponent(traceId)}/junit.xml`);
    const url = URL.createObjectURL(new Blob([xml], { type: 'application/xml' }));
    const link = h('a', { href: url, download: `glassdesk-${traceId}.xml` });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 30000);
  } catch (error) {
    flashError(error);
  }
}

$('open-report').addEventListener('click', () => state.trace.id && openReport(state.trace.id));
$('download-junit').addEventListener('click', () => state.trace.id && downloadJunit(state.trace.id));

// ------------------------------------------------------------------------------------- runs and models

document.querySelectorAll('.tab').forEach((tab) => tab.addEventListener('click', () => {
  document.querySelectorAll('.tab').forEach((t) => t.classList.toggle('active', t === tab));
  $('tab-runs').hidden = tab.dataset.tab !== 'runs';
  $('tab-qa').hidden = tab.dataset.tab !== 'qa';
  $('tab-models').hidden = tab.dataset.tab !== 'models';
  if (tab.dataset.tab === 'qa') refreshQaRuns();
}));

// QA runs (the verbs and suites): read when their tab is shown; each opens in the run viewer.
async function refreshQaRuns() {
  let runs;
  try {
    runs = await api('/api/v1/console/qa-runs?limit=50');
  } catch {
    return;
  }
  const rows = runs.map((r) => h('tr', { 'data-run': r.test_run_id, onclick: () => openReport(r.test_run_id) },
    h('td', { class: 'when', text: r.timestamp ? fmtWhen(r.timestamp) : '–', title: `${r.timestamp || ''} · session ${r.session_id || '–'}` }),
    h('td', { class: 'instr', text: r.name || r.test_run_id, title: r.test_run_id }),
    h('td', { class: 'model', text: r.verb || '' }),
    h('td', {}, pill(r.status)),
    h('td', { class: 'num col-time', text: r.duration_ms !== null && r.duration_ms !== undefined ? fmtDuration(r.duration_ms / 1000) : '–' }),
    h('td', { class: 'links' },
      h('button', { class: 'btn small', type: 'button', text: 'View',
        onclick: (e) => { e.stopPropagation(); openReport(r.test_run_id); } }))));
  $('qa-runs-table').tBodies[0].replaceChildren(...rows);
  $('qa-runs-table').hidden = !rows.length;
  $('qa-runs-empty').hidden = !!rows.length;
}

async function refreshRuns() {
  try {
    state.runs = await api('/api/v1/traces?limit=50');
  } catch {
    return;
  }
  const rows = state.runs.map((m) => {
    const tokens = (m.usage.input_tokens || 0) + (m.usage.output_tokens || 0);
    const seconds = m.finished_at ? (new Date(m.finished_at) - new Date(m.started_at)) / 1000 : null;
    return h('tr', { 'data-trace': m.trace_id, class: m.trace_id === state.trace.id ? 'selected' : '',
      onclick: () => showTrace(m.trace_id, { follow: false }) },
    h('td', { class: 'when', text: fmtWhen(m.started_at), title: `${m.started_at} · session ${m.session_id || '–'}` }),
    h('td', { class: 'instr', text: m.instruction, title: m.instruction }),
    h('td', { class: 'model', text: m.model }),
    h('td', {}, pill(liveStatus(m))),
    h('td', { class: 'num', text: `${m.steps}${m.max_steps ? `/${m.max_steps}` : ''}` }),
    h('td', { class: 'num', text: fmtInt(tokens) }),
    h('td', { class: 'num col-time', text: seconds !== null ? fmtDuration(seconds) : '–' }),
    h('td', { class: 'links' },
      h('button', { class: 'btn small', type: 'button', text: 'View',
        onclick: (e) => { e.stopPropagation(); openReport(m.trace_id); } }), ' ',
      h('button', { class: 'btn small', type: 'button', text: 'JUnit',
        onclick: (e) => { e.stopPropagation(); downloadJunit(m.trace_id); } })));
  });
  $('runs-table').tBodies[0].replaceChildren(...rows);
  $('runs-table').hidden = !rows.length;
  $('runs-empty').hidden = !!rows.length;
}

function markSelectedRun() {
  document.querySelectorAll('#runs-table tbody tr').forEach((row) => {
    row.classList.toggle('selected', row.dataset.trace === state.trace.id);
  });
}

async function refreshStats() {
  let stats;
  try {
    stats = await api('/api/v1/stats');
  } catch {
    return;
  }
  const rows = stats.models.filter((m) => m.runs || m.running).map((m) => {
    const rate = m.done_rate === null ? null : Math.round(m.done_rate * 100);
    const breakdown = [m.mean_model_ms, m.mean_exec_ms, m.mean_settle_ms].map(fmtMs).join(' · ');
    return h('tr', { 'data-model': m.model },
      h('td', { class: 'model', text: m.model }),
      h('td', { class: 'num', text: `${m.runs}${m.running ? ` (+${m.running} live)` : ''}` }),
      h('td', {}, rate === null ? '–' : h('div', { class: 'rate' },
        h('div', { class: 'rate-bar' }, h('span', { style: { width: `${rate}%` } })), h('b', { text: `${rate}%` }))),
      h('td', { class: 'num', text: m.mean_steps ?? '–' }),
      h('td', { class: 'num', text: m.mean_tokens === null ? '–' : fmtInt(Math.round(m.mean_tokens)) }),
      h('td', { class: 'num', text: fmtMs(m.mean_step_ms) }),
      h('td', { class: 'num muted', text: breakdown }));
  });
  $('stats-table').tBodies[0].replaceChildren(...rows);
  $('stats-table').hidden = !rows.length;
  $('stats-empty').hidden = !!rows.length;
}

window.addEventListener('resize', () => renderSelected());
// Sessions created or deleted through the API publish no event: catch up when the tab comes back.
document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible' && state.started) refreshSessions().catch(() => {});
});

// ------------------------------------------------------------------------------------- go

boot();

// glassdesk live view: one session's desktop through the server's RFB relay, with glassdesk's
// status strip drawn over the picture (in this page only: the agent's screenshots never show it).
//
// The link is /view/<session>#token=<live-view token>. The fragment never leaves the browser; the
// token is sent as a header to ask what it grants, and as a websocket subprotocol to connect (a
// browser cannot set headers on a websocket, and a URL would put it in access logs).

import RFB from '/console/novnc/core/rfb.js';

const SCREEN_W = 1920;
const PANEL_H = 28; // the XFCE panel at the bottom of the desktop (desktop/assets/xfce4-panel.xml)
const MARGIN = 48; // display pixels the strip keeps from the point the agent's action targets
const RETRY_MS = 2000;

const $ = (id) => document.getElementById(id);
const session = decodeURIComponent(location.pathname.split('/').pop() || '');
const token = new URLSearchParams(location.hash.slice(1)).get('token') || '';
const api = `/api/v1/sessions/${encodeURIComponent(session)}`;
const wsBase = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}${api}`;
const protocols = (real) => [real, `glassdesk.token.${token}`];

const view = { rfb: null, strip: null, retry: null, avoid: [] };
let resized = null;

function setState(text, fatal = false) {
  $('state').textContent = text;
  $('state').classList.toggle('fatal', fatal);
  document.body.dataset.state = fatal ? 'refused' : text ? 'connecting' : 'live';
}

// What the token grants; a refusal carries glassdesk's error code and message.
async function grant() {
  const response = await fetch(`${api}/viewer`, { headers: { 'x-live-token': token }, cache: 'no-store' });
  const body = await response.json().catch(() => ({}));
  if (response.ok) return body;
  const error = body.error || {};
  throw Object.assign(new Error(error.message || `HTTP ${response.status}`), {
    code: error.code || `http_${response.status}`, status: response.status,
    retryAfter: Number(response.headers.get('retry-after') || 0),
  });
}

function later(seconds = RETRY_MS / 1000) {
  clearTimeout(view.retry);
  view.retry = setTimeout(connect, seconds * 1000);
}

async function connect() {
  clearTimeout(view.retry);
  $('badge-session').textContent = session;
  if (!token) {
    setState('This link has no live-view token: ask for a new live-view link.', true);
    return;
  }
  setState('Connecting to the desktop…');
  let info;
  try {
    info = await grant();
  } catch (error) {
    document.body.dataset.error = error.code || 'network';
    if (error.status === 429) {
      setState(`${error.message}`, true);
      later(Math.max(1, error.retryAfter));
    } else if (!error.status || error.status >= 500) {
      setState(`The live view is not reachable now (${error.message}); retrying…`);
      later();
    } else {
      setState(error.message, true); // expired, revoked, forged, another session's, no such session
    }
    return;
  }
  delete document.body.dataset.error;
  document.body.dataset.mode = info.mode;
  $('badge-mode').textContent = info.mode === 'control' ? 'you have control' : 'view only';
  showStrip(info);
  const rfb = new RFB($('screen'), `${wsBase}/vnc`, { shared: true, wsProtocols: protocols('binary') });
  rfb.viewOnly = info.mode !== 'control';
  rfb.scaleViewport = true;
  rfb.resizeSession = false;
  rfb.clipViewport = false;
  rfb.showDotCursor = info.mode === 'control';
  rfb.focusOnClick = info.mode === 'control';
  rfb.background = '#0b1220';
  rfb.qualityLevel = 8;
  rfb.addEventListener('connect', () => {
    if (view.rfb !== rfb) return;
    setState('');
    if (info.mode === 'control') rfb.focus();
    const canvas = $('screen').querySelector('canvas');
    if (canvas) resized.observe(canvas); // noVNC scales the canvas to the window
    placeStrip();
  });
  rfb.addEventListener('disconnect', () => {
    if (view.rfb !== rfb) return;
    view.rfb = null;
    setState('The connection to the desktop closed; reconnecting…');
    later(); // asks again what the token grants: an expired or revoked link then says so
  });
  view.rfb = rfb;
  openStrip();
}

// ----------------------------------------------------------------------------------- the strip

function openStrip() {
  if (view.strip) return;
  const socket = new WebSocket(`${wsBase}/viewer/strip`, protocols('glassdesk.strip'));
  socket.onmessage = (event) => showStrip(JSON.parse(event.data));
  socket.onclose = () => {
    if (view.strip !== socket) return;
    view.strip = null;
    setTimeout(() => { if (view.rfb) openStrip(); }, RETRY_MS);
  };
  view.strip = socket;
}

function showStrip(state) {
  const strip = $('strip');
  const shown = state.strip;
  strip.hidden = !shown;
  if (!shown) return;
  strip.dataset.tone = shown.tone;
  $('strip-text').textContent = shown.text;
  view.avoid = shown.avoid || [];
  placeStrip();
}

// Where the strip goes over the picture, first choice first (as display positions): over the
// empty right-hand side of the panel; top, left of Chromium's window buttons; the panel's middle;
// the top left corner. The first whose box, grown by MARGIN, holds none of the action's points.
function placeStrip() {
  const strip = $('strip');
  if (strip.hidden) return;
  const canvas = $('screen').querySelector('canvas');
  const rect = canvas ? canvas.getBoundingClientRect() : null;
  if (!rect || !rect.width) {
    strip.style.left = '8px';
    strip.style.top = `${window.innerHeight - strip.offsetHeight - 8}px`;
    return;
  }
  const scale = rect.width / SCREEN_W;
  const w = strip.offsetWidth;
  const h = strip.offsetHeight;
  const panelY = rect.bottom - (PANEL_H * scale + h) / 2;
  const options = [
    [rect.right - w - 8, panelY],
    [rect.right - w - 160 * scale, rect.top + 4],
    [rect.left + (rect.width - w) / 2, panelY],
    [rect.left + 8, rect.top + 4],
  ];
  const points = view.avoid.map(([x, y]) => [rect.left + x * scale, rect.top + y * scale]);
  const margin = MARGIN * scale;
  const clear = ([x, y]) => !points.some(([px, py]) =>
    px >= x - margin && px < x + w + margin && py >= y - margin && py < y + h + margin);
  const distance = ([x, y]) => Math.min(...points.map(([px, py]) => Math.abs(x + w / 2 - px) + Math.abs(y + h / 2 - py)));
  const [x, y] = options.find(clear) || options.reduce((best, o) => (distance(o) > distance(best) ? o : best));
  strip.style.left = `${Math.round(x)}px`;
  strip.style.top = `${Math.round(y)}px`;
}

resized = new ResizeObserver(placeStrip);
resized.observe($('screen'));
window.addEventListener('resize', placeStrip);
window.addEventListener('hashchange', () => location.reload()); // a new link pasted over this one
connect();

// The run viewer: one run (a vision trace or a QA run) from its document (vision/evidence/runview.py).
//
// Live, at /runs/{id}: the document comes from GET /api/v1/runs/{id} with the console's token
// (sessionStorage, as the console keeps it), and every image, the film and its chapters are fetched
// with it and shown from blob: URLs. A run still running is followed (follow(), below) until it ends. Offline, in a report file: the same page with this script
// inlined and the document embedded (#run-data), its files as data: URIs; nothing is fetched.
//
// The film and the steps follow each other: a step's head seeks the film to its chapter, and the
// chapter playing marks its step. Marks are placed by the fraction of the image they fall on, so
// they stay on their pixel at any size. The DOM is built with textContent only.

const TOKEN_KEY = 'glassdesk.token';
const embedded = document.getElementById('run-data');
const OFFLINE = embedded !== null;
let token = OFFLINE ? '' : (sessionStorage.getItem(TOKEN_KEY) || '');
const $ = (id) => document.getElementById(id);

function h(tag, attrs = {}, children = []) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'text') node.textContent = value;
    else if (key === 'class') node.className = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? '' : value);
  }
  for (const child of [].concat(children)) if (child) node.append(child);
  return node;
}

// ------------------------------------------------------------------------------------- API

class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

async function api(path, { method = 'GET', body, raw = false, etag = null } = {}) {
  const headers = {};
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  // A conditional request of our own: with cache 'no-store' the browser passes the 304 through.
  if (etag) headers['If-None-Match'] = etag;
  const response = await fetch(path, { method, headers, cache: 'no-store',
    body: body === undefined ? undefined : JSON.stringify(body) });
  if (response.status === 304) return null;
  if (response.status === 401) {
    showLogin(token ? 'That token was not accepted.' : '');
    throw new ApiError(401, 'unauthorized', 'This server needs its access token.');
  }
  if (!response.ok) {
    let code = `http_${response.status}`;
    let message = response.statusText || 'request failed';
    try {
      const data = await response.json();
      if (data.error) ({ code, message } = data.error);
      else if (typeof data.detail === 'string') message = data.detail;
    } catch { /* not JSON */ }
    throw new ApiError(response.status, code, message);
  }
  if (raw) return response;
  return response.json();
}

// A file of the run as the page may show it: offline it is already a data: URI (or a name beside
// the report); live it is fetched with the token, which a src attribute cannot send.
const blobs = new Map();
function fileUrl(src) {
  if (!src) return Promise.resolve('');
  if (OFFLINE || src.startsWith('data:')) return Promise.resolve(src);
  if (!blobs.has(src)) {
    blobs.set(src, api(src, { raw: true }).then((r) => r.blob()).then((b) => URL.createObjectURL(b)));
  }
  return blobs.get(src);
}

function showLogin(message) {
  $('run').hidden = true;
  $('login').hidden = false;
  $('login-error').hidden = !message;
  $('login-error').textContent = message || '';
  $('token-input').focus();
}

// ------------------------------------------------------------------------------------- marks

function pct(value, whole) { return `${(value / whole * 100).toFixed(3)}%`; }

// Marks over one image, in the image's own pixels: the display's for a screenshot (its size is the
// document's), the shot's for a comparison image (read off the image once it has loaded).
function placeMarks(layer, img, marks, size) {
  const draw = (w, hgt) => {
    layer.replaceChildren();
    const lines = [];
    for (const m of marks) {
      if (m.kind === 'point') {
        const node = h('span', { class: `mark point ${m.action || ''}`, title: m.tip || '', 'data-x': m.x, 'data-y': m.y },
          [h('b', { text: m.label || '' })]);
        node.style.left = pct(m.x, w);
        node.style.top = pct(m.y, hgt);
        layer.append(node);
      } else if (m.kind === 'box' && m.box) {
        const [x0, y0, x1, y1] = m.box;
        const node = h('span', { class: `mark rect ${m.tone || ''}`, title: m.tip || '', 'data-box': m.box.join(',') });
        node.style.left = pct(x0, w);
        node.style.top = pct(y0, hgt);
        node.style.width = pct(x1 - x0, w);
        node.style.height = pct(y1 - y0, hgt);
        layer.append(node);
      } else if (m.kind === 'path') {
        lines.push(m.points);
      }
    }
    if (lines.length) {
      const ns = 'http://www.w3.org/2000/svg';
      const svg = document.createElementNS(ns, 'svg');
      svg.setAttribute('viewBox', `0 0 ${w} ${hgt}`);
      svg.setAttribute('preserveAspectRatio', 'none');
      for (const points of lines) {
        const line = document.createElementNS(ns, 'polyline');
        line.setAttribute('points', points.map((p) => p.join(',')).join(' '));
        line.setAttribute('vector-effect', 'non-scaling-stroke');
        svg.append(line);
      }
      layer.prepend(svg);
    }
  };
  if (size) draw(size[0], size[1]);
  else img.addEventListener('load', () => draw(img.naturalWidth, img.naturalHeight), { once: true });
}

function figure(image, screen) {
  const img = h('img', { alt: image.label });
  const layer = h('div', { class: 'marks' });
  const shot = h('div', { class: 'shot' }, [img, layer]);
  // The marks' layer covers the image exactly: the same box as .shot, marks absolutely inside it.
  layer.style.cssText = 'position:absolute;inset:0';
  placeMarks(layer, img, image.marks || [], image.natural ? null : [image.width || screen[0], image.height || screen[1]]);
  if (!image.src) img.alt = `${image.label} (the file is missing)`;
  else fileUrl(image.src).then((url) => { img.src = url; }).catch(() => { img.alt = `${image.label} (not available)`; });
  const node = h('figure', { 'data-which': image.which || image.label, title: 'click to enlarge' },
    [h('figcaption', { text: image.label }), shot]);
  // A click widens the figure to its row (the marks are fractions of the image, so they follow).
  shot.addEventListener('click', () => node.classList.toggle('big'));
  return node;
}

// ------------------------------------------------------------------------------------- film

const film = { video: null, steps: [], chapterItems: [] };

function clock(seconds) {
  const m = Math.floor(seconds / 60);
  const s = seconds - m * 60;
  return `${m}:${s.toFixed(1).padStart(4, '0')}`;
}

function seek(chapter) {
  if (!film.video || !chapter) return;
  film.video.currentTime = chapter.start;
  markPlaying();
}

// A seek lands on a frame's time, which can be a hair before the chapter's start (the last
// chapter's start can even be past the film's last frame): a chapter plays from just before it.
const SEEK_SLACK_S = 0.05;

function markPlaying() {
  if (!film.video) return;
  const t = film.video.currentTime + SEEK_SLACK_S;
  const plays = (chapter) => Boolean(chapter) && t >= chapter.start && t < chapter.end + SEEK_SLACK_S;
  // One chapter plays at a time (the steps' chapters are copies of the film's: matched by start).
  const current = [...film.chapterItems].reverse().find(({ chapter }) => plays(chapter));
  const start = current ? current.chapter.start : null;
  for (const { node, chapter } of [...film.steps, ...film.chapterItems]) {
    node.classList.toggle('playing', Boolean(chapter) && chapter.start === start);
  }
}

function filmPane(view) {
  const v = view.video;
  if (!v) return [];
  const video = h('video', { id: 'film', controls: true, preload: 'metadata', playsinline: true });
  film.video = video;
  fileUrl(v.src).then((url) => { video.src = url; }).catch(() => {});
  for (const [kind, src, label] of [['chapters', v.chapters_src, 'steps'], ['captions', v.captions_src, 'actions']]) {
    if (!src) continue;
    const track = h('track', { kind, label, srclang: 'en', default: kind === 'chapters' });
    fileUrl(src).then((url) => { track.src = url; }).catch(() => {});
    video.append(track);
  }
  video.addEventListener('timeupdate', markPlaying);
  video.addEventListener('seeked', markPlaying);
  const items = v.chapters.map((chapter) => {
    const node = h('li', { 'data-start': chapter.start, onclick: () => seek(chapter) },
      [h('time', { text: clock(chapter.start) }), chapter.title]);
    film.chapterItems.push({ node, chapter });
    return node;
  });
  const facts = [`video ${v.name}`, v.note, v.sha256 ? `sha256 ${v.sha256}` : ''].filter(Boolean).join(' · ');
  return [video, h('div', { class: 'sub', text: facts }),
    items.length ? h('ol', { class: 'chapters', id: 'chapters' }, items)
      : h('p', { class: 'muted', text: 'The film has no chapters.' })];
}

// ------------------------------------------------------------------------------------- review

// What the boxes on a shot's images stand for: every region, or (a bounded record, or one made
// before every region was recorded) how many of them.
function boxedWords(shot) {
  const boxed = shot.boxed === undefined ? (shot.largest_region ? 1 : 0) : shot.boxed;
  if (!boxed) return '';
  if (boxed >= shot.regions) return boxed === 1 ? '; boxed' : '; each boxed';
  return boxed === 1 ? `; the largest (${shot.largest_region.pixels} px) boxed` : `; the ${boxed} largest boxed`;
}

function review(view, comparison) {
  const status = h('div', { class: 'review-status', role: 'status' });
  const trios = comparison.shots.map((shot) => h('div', { class: 'review-shot', 'data-shot': shot.name }, [
    h('h3', { text: `${shot.name}: ${shot.passed ? 'matches' : 'differs'} · ${shot.diff_pixels.toLocaleString('en')} pixels `
      + `(${Number(shot.diff_percentage).toFixed(4)}%) in ${shot.regions} region(s)`
      + boxedWords(shot) }),
    // One shot's reason is the comparison's (said above); each of several says its own.
    shot.reason && comparison.shots.length > 1 ? h('p', { class: 'bad', text: shot.reason }) : null,
    h('div', { class: 'trio' }, shot.images.map((image) => figure(image, view.screen))),
  ]));
  const buttons = [];
  if (comparison.approvable && !OFFLINE) {
    const approve = h('button', { type: 'button', class: 'approve', text: 'Approve as the new baseline' });
    const reject = h('button', { type: 'button', class: 'reject', text: 'Reject' });
    approve.addEventListener('click', async () => {
      approve.disabled = true;
      status.className = 'review-status';
      status.textContent = 'Approving…';
      try {
        const done = await api(`/api/v1/qa/baselines/${encodeURIComponent(comparison.baseline_id)}/approve`,
          { method: 'POST', body: { test_run_id: comparison.test_run_id } });
        status.className = 'review-status good';
        status.textContent = `Approved: baseline ${done.baseline_id} is now version ${done.version}, `
          + `promoted from run ${done.test_run_id}.`;
        reject.disabled = true;
      } catch (error) {
        // The approval API's rules decide (a stale comparison, one approved already): its words shown.
        status.className = 'review-status bad';
        status.textContent = `${error.code}: ${error.message}`;
        approve.disabled = false;
      }
    });
    reject.addEventListener('click', () => {
      approve.disabled = true;
      reject.disabled = true;
      status.className = 'review-status';
      status.textContent = `Rejected: baseline ${comparison.baseline_id} stays at version ${comparison.baseline_version} `
        + 'and the run stays failed. Nothing is recorded: fix the page and compare again.';
    });
    buttons.push(approve, reject);
  } else if (comparison.approvable) {
    buttons.push(h('span', { class: 'muted', text: `To approve or reject, open /runs/${view.id} in the console.` }));
  } else if (comparison.approved_as) {
    buttons.push(h('span', { class: 'good approved', text: `Approved: this run's images are version `
      + `${comparison.approved_as} of baseline ${comparison.baseline_id}.` }));
  }
  return h('div', { class: `review ${comparison.passed ? 'passed' : 'failed'}`, 'data-baseline': comparison.baseline_id }, [
    h('h3', { text: `Visual comparison with baseline ${comparison.baseline_id} v${comparison.baseline_version}: `
      + (comparison.passed ? 'passed' : 'failed') }),
    ...trios,
    h('div', { class: 'buttons' }, [...buttons, status]),
  ]);
}

// ------------------------------------------------------------------------------------- steps

function stepNode(view, step) {
  const operator = step.by === 'operator';
  const seekButton = step.chapter
    ? h('button', { type: 'button', class: 'seek', title: 'play this step in the film', text: `▶ ${clock(step.chapter.start)}` })
    : null;
  const head = h('div', { class: 'head' }, [
    h('h2', { text: `Step ${step.index}` + (operator ? ' · by the operator' : '') + `: ${step.title}` }),
    operator ? h('span', { class: 'badge operator', text: 'operator' }) : null,
    h('span', { class: `badge ${step.status}`, text: step.status }),
    h('span', { class: 'facts', text: step.facts }),
    seekButton,
  ]);
  const body = [];
  if (step.url) body.push(h('div', { class: 'sub', text: step.url }));
  for (const error of step.errors) body.push(h('div', { class: 'box error', text: error }));
  for (const heal of step.heals) {
    body.push(h('div', { class: 'box heal' }, [
      h('div', { text: heal.text }),
      heal.facts && Object.keys(heal.facts).length
        ? h('div', { class: 'sub', text: Object.entries(heal.facts).map(([k, v]) => `${k}: ${v}`).join(' · ') }) : null,
      heal.images && heal.images.length ? h('div', { class: 'shots' }, heal.images.map((i) => figure(i, view.screen))) : null,
    ]));
  }
  if (step.retries) body.push(h('div', { class: 'sub', text: `retried ${step.retries} time(s) before this outcome` }));
  if (step.images.length) body.push(h('div', { class: 'shots' }, step.images.map((i) => figure(i, view.screen))));
  for (const comparison of step.comparisons || []) body.push(review(view, comparison));
  body.push(h('h3', { text: step.text_label }));
  body.push(h('p', { class: step.text ? 'words' : 'words muted', text: step.text || '(no text)' }));
  if (step.reasoning) {
    body.push(h('details', {}, [h('summary', { text: 'Reasoning' }), h('p', { class: 'words', text: step.reasoning })]));
  }
  if (step.actions && step.actions.length) {
    body.push(h('h3', { text: 'Actions, in display pixels' }),
      h('ol', { class: 'actions' }, step.actions.map((a) => h('li', { text: a }))));
  }
  if (step.executed) body.push(h('h3', { text: 'Executed' }), h('pre', { text: step.executed }));
  if (step.outputs && step.outputs.length) body.push(h('h3', { text: 'Results' }), h('pre', { text: step.outputs.join('\n') }));
  if (step.detail) body.push(h('details', {}, [h('summary', { text: 'Detail' }), h('pre', { text: step.detail })]));
  if (step.console.length) {
    body.push(h('h3', { text: `Console at this step (${step.console.length})` }), h('pre', { class: 'console', text: step.console.join('\n') }));
  }
  if (step.network.length) {
    body.push(h('h3', { text: `Network failures (${step.network.length})` }), h('pre', { class: 'network', text: step.network.join('\n') }));
  }
  const node = h('section', { class: `step st-${step.status}${operator ? ' operator' : ''}`, id: step.id,
    'data-index': step.index, 'data-by': step.by }, [head, h('div', { class: 'body' }, body)]);
  if (step.chapter) {
    node.dataset.chapterStart = step.chapter.start;
    head.addEventListener('click', (event) => { if (!event.target.closest('a')) seek(step.chapter); });
  }
  film.steps.push({ node, chapter: step.chapter });
  return node;
}

// ------------------------------------------------------------------------------------- page

async function download(href) {
  try {
    const response = await api(href, { raw: true });
    const url = URL.createObjectURL(await response.blob());
    const name = (response.headers.get('content-disposition') || '').match(/filename="([^"]+)"/);
    const link = h('a', { href: url, download: name ? name[1] : href.split('/').pop() });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 30000);
  } catch (error) {
    if (error.status !== 401) alert(`${error.code}: ${error.message}`);
  }
}

const present = (...nodes) => nodes.filter(Boolean);

function renderHead(view) {
  document.title = `${view.status} · ${view.title}`.slice(0, 120);
  // Offline the exports are the server's to give (they need its token): their addresses are kept,
  // folded, for a reviewer to fetch; a list of long URLs would crowd the run's header.
  const exports = OFFLINE
    ? (view.exports.length ? [h('details', {}, [h('summary', { text: `Exports on the server (${view.exports.length})` }),
      h('ul', {}, view.exports.map((e) => h('li', { class: 'sub', text: `${e.label}: ${e.href}` })))])] : [])
    : view.exports.map((e) => h('a', { href: e.href, onclick: (event) => { event.preventDefault(); download(e.href); },
      text: e.label }));
  $('run-head').replaceChildren(...present(
    h('div', { class: 'sub', text: `glassdesk ${OFFLINE ? 'report' : 'run viewer'} · ${view.subtitle}` }),
    h('h1', { text: view.title }),
    h('div', {}, [h('span', { class: `badge ${view.status}`, id: 'run-status', text: view.status.replaceAll('_', ' ') }),
      view.live && !OFFLINE ? h('span', { class: 'live', id: 'run-live', text: 'live: new steps appear as they are recorded' })
        : null,
      view.live && OFFLINE ? h('span', { class: 'muted', text: ' still running when this report was made' }) : null]),
    h('ul', { class: 'facts' }, view.facts.map(([value, label]) => h('li', {}, [h('b', { text: value }), h('span', { text: label })]))),
    h('div', { id: 'evidence', class: `box ${view.evidence.ok ? 'verified' : 'broken'}`, text: view.evidence.text }),
    view.verdict ? h('div', { id: 'verdict', class: `box ${{ true: 'verified', false: 'broken' }[view.verdict.ok] || 'unverified'}` }, [
      h('div', { text: view.verdict.text }),
      view.verdict.checks.length ? h('ul', { class: 'checks' }, view.verdict.checks.map((c) =>
        h('li', { class: c.passed ? 'passed' : 'failed', text: `${c.passed ? '✓' : '✗'} ${c.text}` }))) : null]) : null,
    view.answer ? h('div', { class: 'box', text: `Answer: ${view.answer}` }) : null,
    view.error ? h('div', { class: 'box error', text: view.error }) : null,
    view.console && view.console.length ? h('details', {}, [h('summary', { text: `Page errors (${view.console.length})` }),
      h('pre', { text: view.console.join('\n') })]) : null,
    h('nav', { class: 'exports', id: 'exports' }, exports),
  ));
}

// The steps as nodes, keyed by id with the JSON they were built from: an update keeps a step whose
// record is unchanged (its loaded images, a widened picture, a review's answer stay as they are)
// and builds the new or changed ones.
let shown = new Map();

function renderSteps(view) {
  const next = new Map();
  const nodes = view.steps.map((step) => {
    const json = JSON.stringify(step);
    const kept = shown.get(step.id);
    const node = kept && kept.json === json ? kept.node : stepNode(view, step);
    next.set(step.id, { json, node });
    return node;
  });
  shown = next;
  $('steps').replaceChildren(...(nodes.length ? nodes : [h('p', { class: 'muted', text: 'No steps recorded.' })]));
  film.steps = film.steps.filter(({ node }) => node.isConnected);
}

let filmShown = null;

function renderFilm(view) {
  const json = JSON.stringify(view.video || null);
  if (json === filmShown) return;  // the film playing is not reloaded by an update that did not change it
  filmShown = json;
  film.video = null;
  film.chapterItems = [];
  $('film-pane').replaceChildren(...filmPane(view));
  markPlaying();
}

function render(view) {
  renderHead(view);
  renderFilm(view);
  renderSteps(view);
  $('run-foot').textContent = `Marks are display pixels of a ${view.screen[0]}×${view.screen[1]} screen; `
    + 'every file is listed with its SHA-256 in the run\'s hash-chained record.';
  $('login').hidden = true;
  $('run').hidden = false;
  document.body.dataset.ready = 'true';
}

// ------------------------------------------------------------------------------------- suite

// A suite's report (glassdesk qa --report, vision/qa/suite_report.py): the list of its tests, each
// opening its run's own document in the page above, with a way back. The route is the URL's
// fragment (#run-N, from 1), so the browser's back button and a link to one test work in a file too. The
// report holds each file once, in doc.files, and the runs name it by key: resolved before a run
// renders, so the run's document is the viewer's own.
const FILE_REF = 'suite-file:';

function withFiles(value, files) {
  if (typeof value === 'string') return value.startsWith(FILE_REF) && files[value.slice(FILE_REF.length)] !== undefined
    ? files[value.slice(FILE_REF.length)] : value;
  if (Array.isArray(value)) return value.map((v) => withFiles(v, files));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withFiles(v, files)]));
  }
  return value;
}

function seconds(ms) { return `${((ms || 0) / 1000).toFixed(1)} s`; }

function caseRow(test, number) {
  const attempts = test.attempts.map((a) => h('li', {}, [
    h('a', { href: `#run-${a.run + 1}`, text: `attempt ${a.attempt}: ${a.name}` }), ' ',
    h('span', { class: `badge ${a.status}`, text: a.status }),
    a.message ? h('span', { class: 'muted', text: ` ${a.message}` }) : null,
  ]));
  return h('li', { class: `case st-${test.status}`, 'data-run': test.run, 'data-status': test.status }, [
    h('a', { class: 'case-link', href: `#run-${test.run + 1}` }, [
      h('span', { class: 'number', text: `${number}.` }),
      h('span', { class: `badge ${test.status}`, text: test.status }),
      ...test.badges.map((b) => h('span', { class: `badge ${b}`, text: b })),
      h('b', { class: 'name', text: test.name }),
      h('span', { class: 'facts', text: [seconds(test.duration_ms), test.note].filter(Boolean).join(' · ') }),
    ]),
    test.message ? h('div', { class: 'box error message', text: test.message }) : null,
    attempts.length ? h('ol', { class: 'attempts' }, attempts) : null,
  ]);
}

function suitePage(suite) {
  let pane = $('suite');
  if (!pane) {
    pane = h('div', { id: 'suite', class: 'suite' });
    document.body.insertBefore(pane, $('run'));
  }
  pane.replaceChildren(
    h('header', {}, present(
      h('div', { class: 'sub', text: `glassdesk report · ${suite.subtitle}` }),
      h('h1', { text: suite.title }),
      h('div', {}, [h('span', { class: `badge ${suite.status}`, id: 'suite-status', text: suite.status })]),
      h('ul', { class: 'facts' }, suite.facts.map(([value, label]) => h('li', {}, [h('b', { text: value }), h('span', { text: label })]))),
      suite.note ? h('div', { class: 'box', text: suite.note }) : null,
    )),
    h('main', { class: 'cases' }, [h('ol', { id: 'cases', class: 'cases' }, suite.cases.map((c, i) => caseRow(c, i + 1)))]),
  );
  const route = () => {
    const match = /^#run-(\d+)$/.exec(location.hash);
    const view = match ? suite.runs[Number(match[1]) - 1] : null;  // #run-1 is the first, as the list counts
    if (film.video) film.video.pause();
    if (!view) {
      $('run').hidden = true;
      pane.hidden = false;
      document.title = `${suite.status} · ${suite.title}`.slice(0, 120);
      document.body.dataset.view = 'suite';
      document.body.dataset.ready = 'true';
      return;
    }
    // A run rendered afresh: the film and its steps are the new run's.
    film.video = null;
    film.steps = [];
    film.chapterItems = [];
    pane.hidden = true;
    render(withFiles(view, suite.files));
    $('run-head').prepend(h('a', { href: '#', class: 'back', id: 'back', text: `← every test of ${suite.title}` }));
    document.body.dataset.view = `run-${match[1]}`;
    window.scrollTo(0, 0);
  };
  window.addEventListener('hashchange', route);
  route();
}

// -------------------------------------------------------------------------------- following

// Following a running run. The page asks for the run's document again every second with the
// ETag of the last one; the server answers 304 for the price of listing the run's files, and the
// whole document when a step, the end or the film was recorded. Chosen over the console's event
// stream: QA runs publish nothing on it, the run's last state (the evidence check over the sealed
// film, the answer) is in the document and not in the events, and a stream per viewer tab would
// hold one of the six connections a browser gives an origin. The poll is the same authenticated
// call as the first load: without the token it is a 401, never a 304. Offline nothing is fetched.
const POLL_MS = 1000;
const POLL_MAX_MS = 10000;
let following = 0;  // which boot() follows: a new one (after the token is typed) ends the former

async function follow(path, etag, generation) {
  let delay = POLL_MS;
  let ended = false;
  document.body.dataset.live = 'true';
  while (generation === following) {
    await new Promise((resolve) => { setTimeout(resolve, document.hidden ? POLL_MAX_MS : delay); });
    if (generation !== following) return;
    let response;
    let view;
    try {
      response = await api(path, { raw: true, etag });
      view = response === null ? null : await response.json();
    } catch (error) {
      if (error.status === 401) return;  // the token form is shown; typing it boots again
      if (error.status === 404) break;  // the run was deleted: nothing more will come
      delay = Math.min(delay * 2, POLL_MAX_MS);  // the server away or restarting: ask less often
      continue;
    }
    delay = POLL_MS;
    if (response === null) {  // 304: nothing new
      if (ended) break;
      continue;
    }
    etag = response.headers.get('etag');
    render(view);
    if (!etag) break;  // a document the server cannot tag (its run's folder is gone): asking again tells nothing
    document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
    // The end is final once it answers 304: a document built while the last record was being
    // written (the manifest ahead of its meta.json, a report still to be written) can say the
    // evidence is broken; the files' next change changes the ETag, and the next poll corrects it.
    ended = !view.live;
  }
  if (generation === following) document.body.dataset.live = 'false';
}

async function boot() {
  if (OFFLINE) {
    const doc = JSON.parse(embedded.textContent);
    if (doc.kind === 'suite') suitePage(doc);
    else render(doc);
    return;
  }
  const id = decodeURIComponent(location.pathname.split('/').filter(Boolean).pop() || '');
  const path = `/api/v1/runs/${encodeURIComponent(id)}`;
  following += 1;
  try {
    const response = await api(path, { raw: true });
    const view = await response.json();
    render(view);
    if (view.live) follow(path, response.headers.get('etag'), following);
  } catch (error) {
    if (error.status === 401) return;
    $('load-error').hidden = false;
    $('load-error').textContent = `${error.code}: ${error.message}`;
  }
}

if (!OFFLINE) {
  $('login-form').addEventListener('submit', (event) => {
    event.preventDefault();
    token = $('token-input').value.trim();
    sessionStorage.setItem(TOKEN_KEY, token);
    boot();
  });
}
boot();

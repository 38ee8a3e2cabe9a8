"""The QA verbs' own local site, on 127.0.0.1: a login flow, a page with console errors, a canvas
whose button only OCR can find, pages for visual comparisons (a colour one unit off, an element
moved, a clock that changes; a button renamed, an icon, a border, struck-through todo items), and
pages that keep state in the browser (a localStorage counter, a first-visit cookie, a cookie login
the server checks, and a page that writes and reads back every kind of browser storage). Pages
report what really happened to them (a click on the canvas, a sign-in) to ``POST /event``; the
tests read that record, never the QA service's own account.
"""

from __future__ import annotations

import html
import threading
import time
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, unquote, urlsplit

from tests.fakes.events import EventServer, read_event

REPORT = """<script>
  function report(rec) {
    return fetch('/event', {method: 'POST', body: JSON.stringify(Object.assign({page: location.pathname}, rec))});
  }
</script>"""

STYLE = """<style>
  html, body { margin: 0; font: 22px/1.4 "DejaVu Sans", sans-serif; background: #fff; color: #111; }
  .at { position: absolute; }
  button, input { font-size: 22px; padding: 6px 14px; }
</style>"""


def _page(title: str, body: str) -> bytes:
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>{STYLE}{REPORT}"
            f"</head><body>{body}</body></html>").encode()


PAGES: dict[str, bytes] = {
    "/": _page("qa home", '<h1 id="heading">qa home</h1><p>a page that loads</p>'),

    "/login": _page("sign in", """
<form class="at" id="login" style="left: 100px; top: 100px" onsubmit="return false">
  <label for="user">User</label> <input id="user" autocomplete="off">
  <label for="pw">Password</label> <input id="pw" type="password" autocomplete="off">
  <button id="go" type="button">Sign in</button>
</form>
<script>
  document.getElementById('go').addEventListener('click', () => {
    const user = document.getElementById('user').value, pw = document.getElementById('pw').value;
    report({type: 'signin', user: user, pw: pw}).then(() => {
      location.href = pw === 'right' ? '/welcome?user=' + encodeURIComponent(user) : '/login?failed=1';
    });
  });
</script>"""),

    "/signed-up": _page("signed up", '<h1 id="done">Account created</h1>'),

    "/welcome": _page("welcome", '<h1 id="greeting">Welcome</h1><p id="who"></p><script>'
                                 "document.getElementById('who').textContent = "
                                 "new URLSearchParams(location.search).get('user');</script>"),

    "/console": _page("console errors", """
<p>this page logs and throws</p>
<script>
  console.log('qa: a plain log line');
  console.warn('qa: a warning');
  console.error('analytics: tracker blocked');
  console.error('qa: real failure number', 1);
  throw new Error('qa: uncaught boom');
</script>"""),

    "/quiet": _page("quiet", "<p>no errors here</p><script>console.error('analytics: tracker blocked');</script>"),

    # Quiet at its load event; a timer throws 300 ms later, as late bundles and first fetches do.
    "/late-error": _page("late error", "<p>fine at first</p><script>"
                                       "setTimeout(() => { throw new Error('qa: thrown after load'); }, 300);"
                                       "</script>"),

    # A button drawn on a canvas: its words are pixels, not DOM text. A click inside it is reported.
    "/canvas": _page("canvas app", """
<canvas id="app" class="at" width="800" height="400" style="left: 100px; top: 100px"></canvas>
<p id="state" class="at" style="left: 100px; top: 560px">idle</p>
<script>
  const c = document.getElementById('app'), g = c.getContext('2d');
  g.fillStyle = '#f4f4f4'; g.fillRect(0, 0, 800, 400);
  g.fillStyle = '#1f6feb'; g.fillRect(420, 220, 260, 90);
  g.fillStyle = '#fff'; g.font = 'bold 40px "DejaVu Sans"'; g.fillText('Launch', 485, 280);
  c.addEventListener('click', (e) => {
    const r = c.getBoundingClientRect(), x = e.clientX - r.left, y = e.clientY - r.top;
    const hit = x >= 420 && x <= 680 && y >= 220 && y <= 310;
    report({type: 'canvas_click', hit: hit, x: x, y: y, screenX: e.screenX, screenY: e.screenY});
    if (hit) document.getElementById('state').textContent = 'launched';
  });
</script>"""),

    # The flow language's page (tests/integration/test_qa_language.py): a to-do list (add with Enter,
    # double-click to edit, check to complete), a hidden and a removable element, attributes,
    # data-testid, hover, drag and drop, a file input, a hash route for back and forward, and a
    # class that comes later. Real input is reported (isTrusted and the pointer's screen position).
    "/lang": _page("Todos lang", """
<section style="padding: 20px 40px">
  <input id="new" placeholder="What needs to be done?" autocomplete="off" style="width: 500px">
  <ul class="todo-list" data-testid="list" data-qa="list">
    <li class="todo" data-testid="todo-item" data-qa="row"><input class="toggle" type="checkbox"
      aria-label="done"> <label>Buy milk</label></li>
    <li class="todo completed" data-testid="todo-item" data-qa="row"><input class="toggle" type="checkbox" checked
      aria-label="done"> <label>Walk the dog</label></li>
  </ul>
  <p><button id="ghost-btn" disabled>Disabled</button> <input id="ro" readonly value="fixed">
     <a id="close" href="#/closed" title="Close this">close</a>
     <img alt="company logo" width="30" height="20"
          src="data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg'/%3E">
     <span id="hidden-one" style="display: none">you cannot see me</span>
     <span id="soon-gone">here for now</span> <button id="remove">Remove</button>
     <button id="later">Later</button> <span id="late" class="waiting">late</span></p>
  <p><span id="hoverme" style="padding: 4px; background: #eef">hover me</span>
     <span id="tip" style="visibility: hidden">a tooltip</span></p>
  <div style="display: flex; gap: 40px">
    <div id="drag-src" draggable="true" style="width: 120px; height: 50px; background: #cde">drag me</div>
    <div id="drop" style="width: 200px; height: 50px; background: #edc">drop here</div>
  </div>
  <p><input id="file" type="file" multiple> <span id="files"></span>
     <span id="note" contenteditable="true" style="display: inline-block; min-width: 200px">a note</span></p>
  <p><button id="sync" onclick="fetch('/api/sync', {method: 'POST', headers: {'Authorization': 'Bearer t0k3n-of-ada',
     'Content-Type': 'application/json'}, body: JSON.stringify({user: {name: 'ada'}, items: [1, 2]})})">Sync</button>
     <select id="toppings" multiple aria-label="Toppings"><option value="ham" selected>Ham</option>
     <option value="olives">Olives</option><option value="egg" selected>Egg</option></select></p>
</section>
<script>
  const list = document.querySelector('.todo-list');
  function wire(li) {
    const label = li.querySelector('label'), toggle = li.querySelector('.toggle');
    toggle.addEventListener('change', (e) => {
      li.classList.toggle('completed', toggle.checked);
      report({type: 'toggle', checked: toggle.checked, trusted: e.isTrusted});
    });
    label.addEventListener('dblclick', (e) => {
      report({type: 'dblclick', text: label.textContent, trusted: e.isTrusted, screenX: e.screenX});
      li.classList.add('editing');
      const edit = document.createElement('input');
      edit.className = 'edit'; edit.value = label.textContent;
      li.appendChild(edit); edit.focus();
      edit.addEventListener('keydown', (k) => {
        if (k.key !== 'Enter') return;
        label.textContent = edit.value.trim(); li.classList.remove('editing'); edit.remove();
      });
    });
  }
  list.querySelectorAll('li').forEach(wire);
  document.getElementById('new').addEventListener('keydown', (e) => {
    const input = e.target;
    if (e.key !== 'Enter' || !input.value.trim()) return;
    const li = document.createElement('li');
    li.className = 'todo'; li.dataset.testid = 'todo-item'; li.dataset.qa = 'row';
    li.innerHTML = '<input class="toggle" type="checkbox" aria-label="done"> <label></label>';
    li.querySelector('label').textContent = input.value.trim();
    list.appendChild(li); wire(li); input.value = '';
    report({type: 'added', trusted: e.isTrusted});
  });
  document.getElementById('remove').addEventListener('click', () => document.getElementById('soon-gone').remove());
  document.getElementById('later').addEventListener('click', () => setTimeout(() => {
    const late = document.getElementById('late');
    late.className = 'arrived'; late.dataset.at = String(Date.now());
  }, 700));
  const hover = document.getElementById('hoverme'), tip = document.getElementById('tip');
  hover.addEventListener('mouseenter', (e) => { tip.style.visibility = 'visible';
    report({type: 'hover', trusted: e.isTrusted}); });
  document.getElementById('drag-src').addEventListener('dragstart', (e) => e.dataTransfer.setData('text', 'x'));
  const drop = document.getElementById('drop');
  drop.addEventListener('dragover', (e) => e.preventDefault());
  drop.addEventListener('drop', (e) => { e.preventDefault(); drop.textContent = 'dropped';
    drop.dataset.at = e.offsetX + ',' + e.offsetY;  // where in it the pointer was released
    report({type: 'drop', trusted: e.isTrusted}); });
  document.getElementById('file').addEventListener('change', (e) => {
    document.getElementById('files').textContent = Array.from(e.target.files).map(f => f.name).join(', ');
  });
</script>"""),
}


# Pages whose answer depends on what the browser kept from earlier tests: run after another test
# on a browser that was not cleared, each shows something else.
STATEFUL: dict[str, bytes] = {
    # "count: 1" on a browser's first visit, 2 on the next...
    "/counter": _page("counter", """<p id="count"></p><script>
  const n = Number(localStorage.getItem('visits') || 0) + 1;
  localStorage.setItem('visits', String(n));
  document.getElementById('count').textContent = 'count: ' + n;
</script>"""),
    # "first visit" unless a cookie says the browser was here before (then "welcome back").
    "/visit": _page("visit", """<p id="visit"></p><script>
  const seen = document.cookie.split('; ').includes('seen=1');
  document.cookie = 'seen=1; path=/; max-age=3600';
  document.getElementById('visit').textContent = seen ? 'welcome back' : 'first visit';
</script>"""),
    # A sign-in that sets a session cookie; /account is rendered by the server from that cookie.
    "/signin": _page("sign in", """
<form id="signin" class="at" style="left: 100px; top: 100px" onsubmit="return false">
  <label for="who">Name</label> <input id="who" autocomplete="off">
  <button id="enter" type="button">Enter</button>
</form>
<script>
  document.getElementById('enter').addEventListener('click', () => {
    document.cookie = 'session=' + encodeURIComponent(document.getElementById('who').value) + '; path=/';
    location.href = '/account';
  });
</script>"""),
    # Every kind of storage a page can keep, written (``?write=1``) and read back, reported to
    # POST /event; /cached.js is cacheable for an hour, and the site counts how often it is fetched.
    "/storage": _page("storage", """<p id="state">looking</p><script src="/cached.js"></script><script>
  async function write() {
    document.cookie = 'k=v; path=/; max-age=3600';
    localStorage.setItem('k', 'v');
    sessionStorage.setItem('k', 'v');
    await new Promise((ok, no) => {
      const open = indexedDB.open('qa-db', 1);
      open.onupgradeneeded = () => open.result.createObjectStore('s');
      open.onsuccess = () => { open.result.close(); ok(); };
      open.onerror = no;
    });
    await (await caches.open('qa-cache')).put('/kept', new Response('kept'));
    await navigator.serviceWorker.register('/sw.js');
    await navigator.serviceWorker.ready;
  }
  async function look() {
    return {
      cookie: document.cookie, local: localStorage.getItem('k'), session: sessionStorage.getItem('k'),
      idb: (await indexedDB.databases()).map(d => d.name), caches: await caches.keys(),
      workers: (await navigator.serviceWorker.getRegistrations()).length,
      geolocation: (await navigator.permissions.query({name: 'geolocation'})).state,
    };
  }
  (async () => {
    try {
      if (location.search.includes('write')) await write();
      const seen = await look();
      await report(Object.assign({type: 'storage', origin: location.origin}, seen));
      document.getElementById('state').textContent = 'reported';
    } catch (e) {
      await report({type: 'storage_error', message: String(e)});
    }
  })();
</script>"""),
}


def visual_page(query: dict[str, list[str]]) -> bytes:
    """A card at (left, top) in a colour; ``clock`` adds a line that changes on every load."""
    left = int(query.get("left", ["100"])[0])
    red = int(query.get("red", ["200"])[0])
    heading = float(query.get("heading", ["100"])[0])  # a fraction of a pixel re-renders its anti-aliasing
    clock = f'<p id="clock" class="at" style="left: 700px; top: 40px">{time.time():.6f}</p>' \
        if query.get("clock") else ""
    return _page("visual", f"""
<div id="card" class="at" style="left: {left}px; top: 150px; width: 300px; height: 200px;
     background: rgb({red}, 60, 60)"></div>
<h2 class="at" style="left: {heading}px; top: 380px">a steady heading</h2>{clock}""")


ICONS = {  # 24x24 SVG paths: the same stroke, another shape
    "chevron-right": "M9 5l7 7-7 7",
    "chevron-down": "M5 9l7 7 7-7",
}


def widgets_page(query: dict[str, list[str]]) -> bytes:
    """A small app for visual defaults: a counter button (``label``), an icon (``icon``), a bordered
    panel (``border=0`` takes its border away), a todo list whose completed items are struck through
    and grey (``done=0`` draws them as open ones) and, with ``clock``, a line that changes on every
    load. Every change a query makes is one a person sees at a glance. The counter's box has a fixed
    size, so a component shot of it compares whatever its button says."""
    label = query.get("label", ["Increment"])[0]
    icon = ICONS[query.get("icon", ["chevron-right"])[0]]
    border = "1px solid #c8c8c8" if query.get("border", ["1"])[0] == "1" else "1px solid transparent"
    done = "text-decoration: line-through; color: #8a8a8a;" if query.get("done", ["1"])[0] == "1" else ""
    clock = f'<p id="clock" class="at" style="left: 700px; top: 40px">{time.time():.6f}</p>' \
        if query.get("clock") else ""
    return _page("widgets", f"""
<style>.done {{ {done} }} #todos li {{ margin: 4px 0; }}</style>
<div id="counter" class="at" style="left: 100px; top: 40px; width: 560px; height: 140px">
  <p>Clicks so far: <span id="count">0</span></p><button id="inc" type="button">{label}</button></div>
<svg id="icon" class="at" style="left: 720px; top: 66px" width="24" height="24" viewBox="0 0 24 24">
  <path d="{icon}" fill="none" stroke="#333" stroke-width="2" stroke-linecap="round" stroke-linejoin="round"/></svg>
<div id="panel" class="at" style="left: 100px; top: 210px; width: 360px; height: 80px; border: {border};
     padding: 8px">a panel with a thin border</div>
<ul id="todos" class="at" style="left: 100px; top: 330px; width: 420px">
  <li class="done">buy milk</li><li>write the report</li><li class="done">call the bank</li></ul>{clock}""")


def signup_page(query: dict) -> bytes:
    """Every way a test names an element, for the element under a pixel (desktop.browser.hit), the
    exports and the heals: a field by label, one by placeholder only, a button whose text is in a
    span, one with a test id, a link, a canvas (no element a locator can name inside it: a text and
    an icon drawn on it). Submitting reports what was typed and goes to /signed-up; a click on the
    canvas reports its point. The variants, for replays that heal (or must not):

    - ``v=2`` rewords the labels a little (same ids, same roles, similar names);
    - ``v=3`` turns "Create account" into "Delete account" (another meaning: no heal);
    - ``v=5`` renames every id and class of the clicked elements and rewords their labels as v=2;
    - ``v=6`` is v=5 with the button's effect removed (nothing listens to its click);
    - ``v=7`` draws the canvas's text and icon elsewhere on it;
    - ``v=9`` renames the button "Sign me up" (a name no record is like: a model's heal)."""
    version = (query.get("v") or ["1"])[0]
    renamed = version in ("5", "6", "9")
    email = {"2": "E-mail", "5": "E-mail", "6": "E-mail"}.get(version, "Email")
    placeholder = {"2": "Your password", "5": "Your password", "6": "Your password"}.get(version, "Password")
    create = {"2": "Create an account", "3": "Delete account", "5": "Create an account", "6": "Create an account",
              "9": "Sign me up"}.get(version, "Create account")
    ids = ("mail", "secret", "make", "m1", "m2", "m3") if renamed else ("email", "pw", "create", "f1", "f2", "b1")
    listen = "" if version == "6" else f"document.getElementById('{ids[2]}').addEventListener('click', submit);"
    # Where the canvas's text and icon are drawn (canvas px): v=7 moves both.
    (tx, ty), (ix, iy) = ((230, 110), (40, 30)) if version == "7" else ((30, 50), (300, 100))
    return _page("sign up", f"""
<form class="at" id="signup" style="left: 100px; top: 80px; width: 700px" onsubmit="return false">
  <p><label for="{ids[0]}">{email}</label> <input id="{ids[0]}" class="{ids[3]}" autocomplete="off"></p>
  <p><input id="{ids[1]}" class="{ids[4]}" type="password" placeholder="{placeholder}" autocomplete="off"></p>
  <p><input type="checkbox" id="terms"> <label for="terms">I agree</label></p>
  <p><button id="{ids[2]}" class="{ids[5]}" type="button"><span>{create}</span></button>
     <button data-testid="cancel-btn" type="button" aria-label="Cancel sign-up">x</button>
     <a href="/" id="home">Home</a></p>
</form>
<canvas id="pad" class="at" style="left: 900px; top: 80px" width="420" height="180"></canvas>
<script>
  function submit() {{
    const email = document.getElementById('{ids[0]}').value, pw = document.getElementById('{ids[1]}').value;
    const terms = document.getElementById('terms').checked;
    report({{type: 'signup', email: email, pw: pw, terms: terms, version: '{version}'}}).then(() => {{
      location.href = '/signed-up?email=' + encodeURIComponent(email);
    }});
  }}
  {listen}
  const pad = document.getElementById('pad'), g = pad.getContext('2d');
  g.fillStyle = '#fff'; g.fillRect(0, 0, pad.width, pad.height);
  g.fillStyle = '#111'; g.font = 'bold 28px sans-serif'; g.fillText('START', {tx}, {ty});
  // The icon: no text, a shape a template image finds (a red disc with a yellow square in it).
  g.fillStyle = '#c62828'; g.beginPath(); g.arc({ix + 22}, {iy + 22}, 22, 0, 2 * Math.PI); g.fill();
  g.fillStyle = '#fdd835'; g.fillRect({ix + 12}, {iy + 12}, 20, 20);
  pad.addEventListener('click', e => report({{type: 'pad', x: e.offsetX, y: e.offsetY, version: '{version}'}}));
</script>""")


def notify_page(query: dict) -> bytes:
    """A button whose click shows a message (and the time it was saved at, which no test should
    assert), for the texts a step makes appear (vision.perception.effects). The variants, for replays:

    - ``v=2`` renames the button's id and rewords it ("Save changes": a heal by name);
    - ``v=3`` keeps the button but its click shows nothing (the message's assertion must fail);
    - ``v=4`` is v=2 with nothing shown (the healed step's effect is gone: it must fail)."""
    version = (query.get("v") or ["1"])[0]
    button_id, label = ("keep", "Save changes") if version in ("2", "4") else ("save", "Save")
    shows = version not in ("3", "4")
    show = ("document.getElementById('msg').textContent = 'Profile saved for ada';"
            "document.getElementById('at').textContent = new Date().toISOString().slice(11, 19);") if shows else ""
    return _page("notify", f"""
<div class="at" style="left: 100px; top: 80px; width: 600px">
  <h1>Your profile</h1>
  <p><button id="{button_id}" type="button">{label}</button></p>
  <p id="msg" role="status"></p><p id="at"></p>
</div>
<script>
  document.getElementById('{button_id}').addEventListener('click', () => {{ {show} }});
</script>""")


class QaSite(EventServer):
    __test__ = False

    def __init__(self):
        super().__init__()
        site = self
        self.cached_fetches = 0  # how often /cached.js was fetched: once per empty HTTP cache
        # /held?gate=NAME answers once the test opens that gate (held_open): a flow's navigation
        # held there keeps the run running at a step the test chose, for as long as it needs.
        self._gates: dict[str, threading.Event] = {}
        self._gates_lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status: int, body: bytes, content_type: str = "text/html; charset=utf-8") -> None:
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(body)))
                self.send_header("cache-control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                parts = urlsplit(self.path)
                if parts.path in PAGES:
                    self._send(200, PAGES[parts.path])
                elif parts.path in STATEFUL:
                    self._send(200, STATEFUL[parts.path])
                elif parts.path == "/account":  # the server reads the login from the cookie
                    cookies = dict(c.strip().split("=", 1) for c in (self.headers.get("cookie") or "").split(";")
                                   if "=" in c)
                    who = unquote(cookies.get("session", ""))
                    said = f"signed in as {html.escape(who)}" if who else "signed out"
                    self._send(200, _page("account", f'<p id="account">{said}</p>'))
                elif parts.path == "/cached.js":
                    site.cached_fetches += 1
                    body = b"window.cachedScript = true;"
                    self.send_response(200)
                    self.send_header("content-type", "text/javascript")
                    self.send_header("content-length", str(len(body)))
                    self.send_header("cache-control", "public, max-age=3600")
                    self.end_headers()
                    self.wfile.write(body)
                elif parts.path == "/sw.js":
                    self._send(200, b"self.addEventListener('fetch', () => {});", "text/javascript")
                elif parts.path == "/visual":
                    self._send(200, visual_page(parse_qs(parts.query)))
                elif parts.path == "/signup":
                    self._send(200, signup_page(parse_qs(parts.query)))
                elif parts.path == "/notify":
                    self._send(200, notify_page(parse_qs(parts.query)))
                elif parts.path == "/widgets":
                    self._send(200, widgets_page(parse_qs(parts.query)))
                elif parts.path == "/held":
                    gate = parse_qs(parts.query).get("gate", [""])[0]
                    site.gate(gate).wait(120)  # bounded: a test that never opens it fails, not hangs
                    self._send(200, _page("held", f'<p id="released">released {html.escape(gate)}</p>'))
                elif parts.path == "/favicon.ico":
                    self._send(204, b"", "image/x-icon")
                else:
                    self._send(404, _page("not found", "<h1>not found</h1>"))

            def do_POST(self):
                site.record(read_event(self))

        self.serve(Handler)

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def gate(self, name: str) -> threading.Event:
        with self._gates_lock:
            return self._gates.setdefault(name, threading.Event())


def pixel(desk, selector: str) -> tuple[int, int]:
    """Where the page layer would click the element, on the display (its own lookup, not the hit test)."""
    from desktop.browser.locate import locate
    from desktop.models import Target

    async def work(pages):
        return await locate(await pages.front(), Target(selector=selector), 5000)

    found = desk.stack.browser.call(work, 10)
    return found.x, found.y

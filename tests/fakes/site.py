"""A small local web site for the page layer's tests, served on 127.0.0.1.

Each page does one thing the page layer must see or act on: console errors and an uncaught
exception, a fetch that gets a 404, alert/confirm/prompt, a page that asks before it is left
(beforeunload), downloads (one with a hostile name), a file input, a form with a select, a link
that opens a new tab, a page 4000 px tall, a button under a veil, one that slides, and a page whose load brings
subresources and console lines. The pages
report what really happened to them (clicks with their screenX/screenY, the files an input got,
what a dialog answered) to ``POST /event``; the tests read that record, never the page layer's own
account of itself.
"""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

from tests.fakes.events import EventServer, read_event

REPORT = """<script>
  // Report to the test server: ground truth for the tests.
  function report(rec) {
    return fetch('/event', {method: 'POST', body: JSON.stringify(Object.assign({page: location.pathname}, rec))});
  }
  window.addEventListener('click', (e) => report({type: 'click', target: e.target.id || e.target.tagName,
      screenX: e.screenX, screenY: e.screenY, clientX: e.clientX, clientY: e.clientY,
      scrollY: window.scrollY}), {capture: true});
</script>"""

STYLE = """<style>
  html, body { margin: 0; font: 20px/1.4 "DejaVu Sans", sans-serif; background: #fff; color: #111; }
  .at { position: absolute; }
  button { font-size: 22px; padding: 8px 20px; }
</style>"""


def _page(title: str, body: str, head: str = "") -> bytes:
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>{STYLE}"
            f"{head}{REPORT}</head><body>{body}</body></html>").encode()


PAGES: dict[str, bytes] = {
    "/": _page("site index", """
<h1>site index</h1>
<a href="/console">console</a> <a href="/fetch404">fetch</a> <a href="/dialogs">dialogs</a>
<a href="/downloads">downloads</a> <a href="/upload">upload</a> <a href="/form">form</a>
<a href="/newtab">new tab</a> <a href="/tall">tall</a> <a href="/leave">leave</a>"""),

    "/console": _page("console errors", """
<p id="words">this page logs and throws</p>
<script>
  console.log('site: a plain log line');
  console.warn('site: a warning');
  console.error('site: console error number', 1);
  throw new Error('site: uncaught boom');
</script>"""),

    "/fetch404": _page("fetch", """
<p id="status">fetching</p>
<script>
  fetch('/missing.json').then((r) => {
    document.getElementById('status').textContent = 'fetched ' + r.status;
    report({type: 'fetched', status: r.status});
  });
</script>"""),

    "/dialogs": _page("dialogs", """
<button class="at" id="alert" style="left: 100px; top: 200px">Alert</button>
<button class="at" id="confirm" style="left: 300px; top: 200px">Confirm</button>
<button class="at" id="prompt" style="left: 500px; top: 200px">Prompt</button>
<label class="at" for="name" style="left: 100px; top: 320px">Name</label>
<input class="at" id="name" style="left: 200px; top: 315px; width: 300px" autocomplete="off">
<p class="at" id="result" style="left: 100px; top: 400px">no answer yet</p>
<script>
  function answered(kind, value) {
    document.getElementById('result').textContent = kind + ': ' + JSON.stringify(value);
    report({type: 'answered', kind: kind, value: value});
  }
  // The dialogs open from a timer: the click that opens one returns before the dialog blocks the page.
  document.getElementById('alert').addEventListener('click', () => setTimeout(
      () => answered('alert', alert('site alert: hello')), 0));
  document.getElementById('confirm').addEventListener('click', () => setTimeout(
      () => answered('confirm', confirm('site confirm: proceed?')), 0));
  document.getElementById('prompt').addEventListener('click', () => setTimeout(
      () => answered('prompt', prompt('site prompt: your name?', 'anon')), 0));
  document.getElementById('name').addEventListener('input', (e) => report({type: 'input', value: e.target.value}));
</script>"""),

    "/leave": _page("asks before leaving", """
<button class="at" id="touch" style="left: 100px; top: 200px">Touch</button>
<script>
  // Chromium asks before leaving only a page a person has interacted with: a real click on Touch.
  window.addEventListener('beforeunload', (e) => { e.preventDefault(); e.returnValue = ''; });
  window.addEventListener('pagehide', () => navigator.sendBeacon('/event', JSON.stringify(
      {page: location.pathname, type: 'left'})));
</script>"""),

    "/downloads": _page("downloads", """
<a class="at" id="report" href="/files/report.txt" style="left: 100px; top: 100px">download the report</a>
<a class="at" id="hostile" href="/files/hostile" style="left: 100px; top: 200px">download a hostile name</a>"""),

    "/upload": _page("upload", """
<input class="at" type="file" id="file" multiple style="left: 100px; top: 100px">
<p class="at" id="got" style="left: 100px; top: 200px">no file</p>
<input class="at" type="file" id="refusing" style="left: 100px; top: 300px">
<script>
  // An input whose page throws away what it is given: an upload there did not take.
  document.getElementById('refusing').addEventListener('change', (e) => { e.target.value = ''; });
  document.getElementById('file').addEventListener('change', async (e) => {
    const files = [];
    for (const f of e.target.files) files.push({name: f.name, size: f.size, text: await f.text()});
    document.getElementById('got').textContent = files.map((f) => f.name).join(', ');
    report({type: 'files', files: files});
  });
</script>"""),

    "/form": _page("form", """
<form class="at" id="order" style="left: 100px; top: 100px" onsubmit="return false">
  <label for="colour">Colour</label>
  <select id="colour" name="colour">
    <option value="r">Red</option>
    <option value="g">Green</option>
    <option value="b">Blue</option>
  </select>
  <label for="qty">Quantity</label>
  <input id="qty" name="qty" autocomplete="off">
  <input id="gift" type="checkbox"> <label for="gift">Gift wrap</label>
</form>
<p class="at" id="chosen" style="left: 100px; top: 300px">nothing chosen</p>
<script>
  document.getElementById('colour').addEventListener('change', (e) => {
    document.getElementById('chosen').textContent = 'chosen ' + e.target.value;
    report({type: 'change', value: e.target.value});
  });
  document.getElementById('gift').addEventListener('change', (e) => report({type: 'gift', checked: e.target.checked}));
  document.getElementById('qty').addEventListener('keydown', (e) => report({type: 'key', key: e.key}));
  setTimeout(() => {  // an element that appears late, for waits
    const late = document.createElement('p');
    late.id = 'late'; late.textContent = 'arrived late';
    document.body.appendChild(late);
  }, 300);
</script>"""),

    "/agent": _page("an agent's page", """
<button class="at" id="more" style="left: 100px; top: 100px">Add one</button>
<p class="at" id="count" style="left: 100px; top: 160px">0 added</p>
<input class="at" id="note" style="left: 100px; top: 240px; width: 400px" autocomplete="off" aria-label="Note">
<script>
  let added = 0;  // each click repaints the count: a visible effect (tests/bench_load.py)
  document.getElementById('more').addEventListener('click', () => {
    document.getElementById('count').textContent = ++added + ' added';
  });
</script>"""),
    "/newtab": _page("new tab opener", """
<a class="at" id="open" href="/form" target="_blank" style="left: 100px; top: 100px">open the form in a new tab</a>"""),

    "/reach": _page("reach", """
<p id="status">reaching</p>
<script>
  // Fetches every URL listed in the fragment (separated by |): what the network policy must stop.
  const targets = decodeURIComponent(location.hash.slice(1)).split('|').filter(Boolean);
  Promise.allSettled(targets.map((u) => fetch(u, {mode: 'no-cors', cache: 'no-store'})))
    .then((outcomes) => report({type: 'reached', outcomes: outcomes.map((o) => o.status)}));
</script>"""),

    "/covered": _page("covered", """
<button class="at go" id="free" style="left: 500px; top: 100px">Free</button>
<button class="at go" id="under" style="left: 100px; top: 100px">Under the veil</button>
<div class="at veil" id="veil" style="left: 50px; top: 50px; width: 350px; height: 150px; \
background: rgba(0, 0, 0, .3)"></div>"""),

    # A button that slides 600 px to the right for 1.5 s from the page's first frame: an action on
    # it right after the load must wait for it to stand still, or its pixel misses it.
    "/sliding": _page("sliding", """
<style>#slider { left: 100px; top: 300px; transition: left 1.5s linear } #slider.moved { left: 700px }</style>
<button class="at" id="slider">Sliding</button>
<script>requestAnimationFrame(() => document.getElementById('slider').classList.add('moved'))</script>"""),

    # A page whose load brings what the recording sees: a stylesheet, a script, images (each a
    # request with its response) and console lines, one of them an error. The benchmark loads it
    # with the recording attached and detached (tests/bench_page.py).
    "/load": _page("a page load", """
<link rel="stylesheet" href="/files/load.css">
<h1 id="heading">a page load</h1>
<img src="/files/dot.svg?1" alt=""> <img src="/files/dot.svg?2" alt=""> <img src="/files/dot.svg?3" alt="">
<img src="/files/dot.svg?4" alt="">
<script src="/files/load.js"></script>"""),

    # A screen that never stands still (tests/bench_video.py: what filming costs at its worst): the
    # whole viewport repainted every frame, a gradient sliding and a counter ticking.
    "/busy": _page("a busy screen", """
<style>
  body { margin: 0 }
  #busy { position: fixed; inset: 0; background: linear-gradient(90deg, #f00, #ff0, #0f0, #0ff, #00f, #f0f, #f00);
          background-size: 200% 100%; animation: slide 2s linear infinite; font: 120px monospace; color: #fff;
          display: flex; align-items: center; justify-content: center }
  @keyframes slide { from { background-position: 0 0 } to { background-position: 200% 0 } }
</style>
<div id="busy">0</div>
<script>
  const busy = document.getElementById('busy');
  const tick = (t) => { busy.textContent = Math.floor(t); requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
</script>"""),
    "/tall": _page("tall page", """
<div style="height: 4000px; position: relative">
  <p class="at" style="left: 100px; top: 50px">the top of a tall page</p>
  <button class="at" id="far" style="left: 600px; top: 3900px; width: 200px; height: 50px">Far below</button>
</div>"""),
}

REPORT_TEXT = b"glassdesk download test: the report\n" * 20

# The subresources of /load: path -> (content type, body).
ASSETS: dict[str, tuple[str, bytes]] = {
    "/files/load.css": ("text/css", b"h1 { color: #234; } img { width: 16px; height: 16px; }\n"),
    "/files/load.js": ("text/javascript", b"""
for (let i = 1; i <= 5; i++) console.log('site: load line', i);
console.warn('site: load warning');
console.error('site: load error');
document.getElementById('heading').textContent = 'a page load, scripted';
"""),
    "/files/dot.svg": ("image/svg+xml", b'<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16">'
                                        b'<circle cx="8" cy="8" r="6" fill="#2a6"/></svg>'),
}


class TestSite(EventServer):
    """The site on 127.0.0.1 on a free port, and the events its pages reported."""

    __test__ = False  # a helper, not a test class

    def __init__(self):
        super().__init__()
        self.hits: list[str] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(body)))
                self.send_header("cache-control", "no-store")
                for name, value in headers.items():
                    self.send_header(name.replace("_", "-"), value)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                path = urlsplit(self.path).path
                with site._cond:
                    site.hits.append(path)
                if path in PAGES:
                    self._send(200, PAGES[path], "text/html; charset=utf-8")
                elif path == "/files/report.txt":
                    self._send(200, REPORT_TEXT, "text/plain",
                               content_disposition='attachment; filename="report.txt"')
                elif path == "/files/hostile":
                    self._send(200, b"hostile name\n", "text/plain",
                               content_disposition='attachment; filename="../../escape.txt"')
                elif path in ASSETS:
                    self._send(200, ASSETS[path][1], ASSETS[path][0])
                elif path == "/favicon.ico":
                    self._send(204, b"", "image/x-icon")
                else:
                    self._send(404, b'{"error": "not here"}', "application/json")

            def do_POST(self):
                site.record(read_event(self))

        self.serve(Handler)

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def clear(self) -> None:
        with self._cond:
            self.events.clear()
            self.hits.clear()

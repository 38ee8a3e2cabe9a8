"""The offline ``ocr`` model on the form layouts people meet, served locally: each instruction puts
its text into the field it names, or the run does not end ``done`` (it never says done after typing
into nothing or into another field). The field is found by asking the page what is near the label
(vision.perception.fields.field_by_page), so a label above its field, a placeholder, a floating
label, a grid, a wrapping label and a fieldset are all the same to it."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytestmark = pytest.mark.x11

STYLE = ("<style>body{font:20px/1.4 'DejaVu Sans',sans-serif;margin:60px}input{font:20px 'DejaVu Sans',sans-serif;"
         "padding:6px;width:320px;border:1px solid #888}form{max-width:900px}button{font-size:20px;margin-top:16px}"
         "</style>")
BUTTON = '<button type="button" id="go">Sign in</button>'
LAYOUTS = {
    "label-above": '<style>label{display:block;margin-top:12px}</style>'
                   '<label for="name">Name</label><input id="name"><label for="pw">Password</label>'
                   '<input id="pw" type="password"><br>' + BUTTON,
    "label-left": '<style>label{display:inline-block;width:140px}p{margin:12px 0}</style>'
                  '<p><label for="name">Name</label><input id="name"></p>'
                  '<p><label for="pw">Password</label><input id="pw" type="password"></p>' + BUTTON,
    "placeholder-only": '<p><input id="name" placeholder="Name" aria-label="Name"></p>'
                        '<p><input id="pw" type="password" placeholder="Password" aria-label="Password"></p>' + BUTTON,
    "floating-label": '<style>.f{position:relative;margin:22px 0}.f label{position:absolute;left:10px;top:9px;'
                      'color:#555;pointer-events:none}.f input{padding-top:8px}</style>'
                      '<div class="f"><input id="name"><label for="name">Name</label></div>'
                      '<div class="f"><input id="pw" type="password"><label for="pw">Password</label></div>' + BUTTON,
    "grid": '<style>.g{display:grid;grid-template-columns:360px 360px;column-gap:40px}</style>'
            '<div class="g"><label for="name">Name</label><label for="pw">Password</label>'
            '<input id="name"><input id="pw" type="password"></div>' + BUTTON,
    "wrapping-label": '<style>label{display:block;margin:12px 0}</style>'
                      '<label>Name <input id="name"></label><label>Password <input id="pw" type="password"></label>'
                      + BUTTON,
    "fieldset": '<fieldset><legend>Account</legend><label for="name">Name</label><br><input id="name"><br>'
                '<label for="pw">Password</label><br><input id="pw" type="password"></fieldset>' + BUTTON,
}
INSTRUCTIONS = [('type "alice" into "Name"', "name", "alice"), ('type "hunter2" into "Password"', "pw", "hunter2"),
                ("type alice into the Name field", "name", "alice")]


@pytest.fixture(scope="module")
def forms():
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = LAYOUTS.get(self.path.strip("/"))
            page = (f"<!doctype html><html><head><meta charset=utf-8><link rel=icon href='data:,'><title>form</title>"
                    f"{STYLE}</head><body><form onsubmit='return false'>{body}</form></body></html>").encode()
            self.send_response(200 if body else 404)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def values(desk) -> dict[str, str]:
    async def work(pages):
        return await (await pages.front()).evaluate(
            "() => ({name: document.querySelector('#name').value, pw: document.querySelector('#pw').value})")

    return desk.stack.browser.call(work, 10)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_each_instruction_fills_the_field_it_names_or_does_not_end_done(vision_api, desk, forms, layout):
    outcomes = []
    for instruction, field, text in INSTRUCTIONS:
        desk.run_settled(lambda: desk.open_url(f"{forms}/{layout}"))
        body = vision_api.post("/api/v1/sessions/itest/vision/act",
                               json={"instruction": instruction, "model": "ocr", "max_steps": 4}).json()
        seen = values(desk)
        wanted = {"name": "", "pw": "", field: text}
        # The verdict that matters: a done is never said over a form that does not hold the text.
        assert body["status"] != "done" or seen == wanted, (layout, instruction, body["status"], seen,
                                                             [s["text"] for s in body["steps"]])
        outcomes.append((instruction, body["status"], seen == wanted))
    # and on these layouts each instruction is carried out
    assert all(done for _, _, done in outcomes), (layout, outcomes)


def test_on_a_real_app_a_checked_run_adds_a_todo_and_a_wrong_expectation_fails_it(vision_api, desk):
    """TodoMVC's React example (the npm package tests/fakes/todomvc.py serves): a field named only by
    its placeholder, filled by the ocr model, the run verified by the list the app then shows."""
    from tests.fakes.todomvc import TodoMvcServer

    with TodoMvcServer() as app:
        for expected, verified in (("buy milk", True), ("buy bread", False)):
            desk.run_settled(lambda: desk.open_url(f"{app.origin}/"))
            body = vision_api.post("/api/v1/sessions/itest/vision/act", json={
                "instruction": 'type "buy milk" into "What needs to be done?" then press enter', "model": "ocr",
                "expect": [{"selector": "#todo-list li", "assertion": {"type": "has_text", "expected": expected},
                            "timeout_ms": 2000}]}).json()
            assert body["verified"] is verified, (body["checks"], [(s["text"], s["error"]) for s in body["steps"]])
            assert body["status"] == ("done" if verified else "failed"), (body["status"], body["error"])
            if not verified:
                # The second run's todo beside the first's (localStorage keeps them): the first is said.
                assert body["checks"][0]["saw"].endswith("saw text 'buy milk' (the first of 2 matches)"), body["checks"]

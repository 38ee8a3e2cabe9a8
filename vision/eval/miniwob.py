"""MiniWoB++ built in: the ``miniwob`` package's own task pages (PyPI ``miniwob``), served on
loopback, each episode scored by the page's own reward; and an oracle that solves the tasks it
covers from the DOM, acting only through glassdesk's real pixel input (a scripted run).

The pages are served as the package ships them, with one script added after MiniWoB's core (what
MiniWoB's own Python harness does through Selenium's execute_script): it seeds the page's random
problem from the URL (``?seed=``, the episode's number, so every model meets the same problems),
raises the episode's time limit (``?max_time=``, ms; MiniWoB's 10 s is for scripted agents, not
models that think for seconds a step), and copies the reward the page computes into a hidden
``<output id="glassdesk-episode">`` the check reads: ``data-success`` is "true" when the raw reward
is at least 1, MiniWoB's own success; its value is the rewards as JSON.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import re
import threading
from collections.abc import Callable, Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from vision.eval.runner import EpisodeContext
from vision.eval.tasks import EPISODE, Task, TaskError, TaskSet

PREFIX = "miniwob:"
# MiniWoB's own limit: the time-penalised reward is also reported against it.
MINIWOB_MAX_TIME_MS = 10_000
MARK = "#glassdesk-episode"
SHIM = """<script>
(function () {
  var query = core.QueryString;
  if (query.seed !== undefined) { Math.seedrandom(query.seed); }
  if (query.max_time !== undefined) { core.EPISODE_MAX_TIME = parseInt(query.max_time, 10); }
  var endEpisode = core.endEpisode;
  core.endEpisode = function (reward, timeProportional, reason) {
    var open = core.EP_TIMER !== null, started = core.ept0;
    endEpisode.apply(this, arguments);
    if (!open) { return; }
    var mark = document.getElementById('glassdesk-episode');
    if (mark === null) {
      mark = document.createElement('output');
      mark.id = 'glassdesk-episode';
      mark.hidden = true;
      document.body.appendChild(mark);
    }
    mark.dataset.success = WOB_RAW_REWARD_GLOBAL >= 1 ? 'true' : 'false';
    mark.value = JSON.stringify({raw: WOB_RAW_REWARD_GLOBAL, reward: WOB_REWARD_GLOBAL,
                                 elapsed_ms: new Date().getTime() - started, reason: reason || null});
  };
})();
</script>"""
CORE = '<script src="../core/core.js"></script>'


class MiniwobMissing(TaskError):
    pass


def pages_dir() -> Path:
    """The package's html folder, found without importing it (its import registers gymnasium
    environments and needs Selenium; only its pages are used)."""
    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        raise MiniwobMissing("MiniWoB++ is not installed here: pip install --no-deps miniwob==1.1.0 (its pages "
                             "are all glassdesk uses)")
    return Path(next(iter(spec.submodule_search_locations))) / "html"


def task_names(root: Path | None = None) -> list[str]:
    return sorted(p.stem for p in ((root or pages_dir()) / "miniwob").glob("*.html"))


def with_shim(html: str) -> str:
    """A task page with glassdesk's script after MiniWoB's core (pure)."""
    if CORE not in html:
        raise ValueError("not a MiniWoB++ task page: it does not load core/core.js")
    return html.replace(CORE, CORE + SHIM, 1)


class _Pages(SimpleHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        path = self.path.split("?", 1)[0]
        if re.fullmatch(r"/miniwob/[a-z0-9-]+\.html", path):
            file = Path(self.directory) / path.lstrip("/")
            if file.is_file():
                body = with_shim(file.read_text(encoding="utf-8")).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)
                return
        super().do_GET()

    def log_message(self, *args):  # a quiet server: the runs' traces say what was loaded
        pass


@contextlib.contextmanager
def serve(root: Path | None = None) -> Iterator[str]:
    """The task pages on a loopback port for as long as the block runs: its base URL."""
    handler = functools.partial(_Pages, directory=str(root or pages_dir()))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="glassdesk-miniwob", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def parse_spec(spec: str, available: list[str]) -> list[str]:
    """``miniwob:click-button,enter-text`` or ``miniwob:all`` (or ``miniwob:oracle``: the tasks the
    oracle covers) as task names; every unknown name listed at once (pure)."""
    names = [n.strip() for n in spec.removeprefix(PREFIX).split(",") if n.strip()]
    if names == ["all"]:
        return list(available)
    if names == ["oracle"]:
        return [n for n in available if n in SOLVERS]
    unknown = [n for n in names if n not in available]
    if not names or unknown:
        raise TaskError(f"{spec}: " + (f"no such MiniWoB++ task(s): {', '.join(unknown)}" if unknown else
                                       "name the tasks") + f" ({len(available)} exist; miniwob:all runs every one)")
    return list(dict.fromkeys(names))


def tasks(spec: str, base_url: str, *, max_steps: int = 10, budget_seconds: float = 300,
          available: list[str] | None = None) -> TaskSet:
    """The MiniWoB++ tasks of ``spec`` as glassdesk tasks (pure): the page opened with the episode
    as its seed, its START cover clicked in the setup, its #query the instruction, its reward the check."""
    names = parse_spec(spec, available if available is not None else task_names())
    limit = int(budget_seconds * 1000)
    return TaskSet(name=spec, tasks=[Task.model_validate({
        "id": name, "instruction_from": "#query",
        "start": {"url": f"{base_url}/miniwob/{name}.html?seed={EPISODE}&max_time={limit}"},
        "setup": [{"action": "click", "selector": "#sync-task-cover"}],
        "expect": [{"selector": MARK, "assertion": {"type": "has_attribute", "attribute": "data-success",
                                                    "expected": "true"}, "timeout_ms": 2000,
                    "name": "MiniWoB++'s reward says success"}],
        "max_steps": max_steps, "budget_seconds": budget_seconds}) for name in names])


def reward(episodes, session_id: str, task: Task) -> dict[str, float] | None:
    """The rewards the page gave (raw, time-penalised against the raised limit and against
    MiniWoB's own 10 s), or None when the episode never ended on the page."""
    found = episodes.locate(session_id, {"selector": MARK, "state": "attached", "timeout_ms": 1})
    if not found.get("exists") or not found.get("value"):
        return None
    given = json.loads(found["value"])
    raw, elapsed = float(given["raw"]), float(given["elapsed_ms"])
    return {"raw": raw, "reward": float(given["reward"]), "elapsed_ms": elapsed,
            "reward_at_10s": round(raw * max(0.0, 1 - elapsed / MINIWOB_MAX_TIME_MS), 4) if raw > 0 else raw}


# ------------------------------------------------------------------------------ the oracle

class OracleMiss(Exception):
    """The oracle could not read a solution off the page: a defect to find, never a pass."""


Look = Callable[..., dict]


def _centre(found: dict) -> dict:
    box = found["box"]
    return {"action": "click", "x": box["x"] + box["width"] // 2, "y": box["y"] + box["height"] // 2}


def _quoted(instruction: str, index: int = 0) -> str:
    found = re.findall(r'"([^"]*)"', instruction)
    if len(found) <= index:
        raise OracleMiss(f"no quoted text #{index + 1} in {instruction!r}")
    return found[index]


def _css_text(text: str) -> str:
    return json.dumps(text)  # a CSS/Playwright string literal


def _click(look: Look, selector: str) -> dict:
    return _centre(look(selector))


def _type_into(look: Look, selector: str, text: str) -> list[dict]:
    return [_click(look, selector), {"action": "type", "text": text}]


def _words_between(instruction: str, start: str, end: str) -> list[str]:
    body = instruction.split(start, 1)[1].rsplit(end, 1)[0]
    return [] if body == "nothing" else [w.strip() for w in body.split(",") if w.strip()]


def _checkboxes(instruction: str, look: Look) -> list[dict]:
    names = _words_between(instruction, "Select ", " and click Submit.")
    return [_click(look, f"#boxes label:text-is({_css_text(n)}) input") for n in names] + [_click(look, "#subbtn")]


def _number(instruction: str) -> str:
    found = re.search(r"#(\d+)", instruction)
    if found is None:
        raise OracleMiss(f"no number in {instruction!r}")
    return found.group(1)


def _case(instruction: str) -> str:
    text = _quoted(instruction)
    return text.upper() if "upper case" in instruction else text.lower()


def _dialog_button(instruction: str, look: Look) -> list[dict]:
    label = _quoted(instruction)
    if label == "x":
        return [_click(look, ".ui-dialog-titlebar-close")]
    return [_click(look, f".ui-dialog-buttonpane button:text-is({_css_text(label)})")]


def _focus_nth(instruction: str, look: Look) -> list[dict]:
    position = re.search(r"Focus into the (\w+) input", instruction)
    order = {"1st": 1, "2nd": 2, "3rd": 3}
    if position is None or position.group(1) not in order:
        raise OracleMiss(f"which textbox: {instruction!r}")
    return [_click(look, f"#area input >> nth={order[position.group(1)] - 1}")]


# Each: the instruction and a look at the page -> the actions in display pixels. A task is
# covered only when its solution can be read off the page before the first action: the script
# is fixed when the run starts.
SOLVERS: dict[str, Callable[[str, Look], list[dict]]] = {
    "click-test": lambda q, look: [_click(look, "#subbtn")],
    "click-test-2": lambda q, look: [_click(look, "#subbtn" if "ONE" in q else "#subbtn2")],
    "click-button": lambda q, look: [_click(look, f"#area button:text-is({_css_text(_quoted(q))})")],
    "click-button-sequence": lambda q, look: [_click(look, "#subbtn"), _click(look, "#subbtn2")],
    "click-link": lambda q, look: [_click(look, f"#area span.alink:text-is({_css_text(_quoted(q))})")],
    "click-dialog": lambda q, look: [_click(look, ".ui-dialog-titlebar-close")],
    "click-dialog-2": _dialog_button,
    "click-tab": lambda q, look: [_click(look, f"#area ul a[href='#tabs-{_number(q)}']")],
    "click-widget": lambda q, look: [_click(look, f"#area [data-type={_css_text(_quoted(q))}]")],
    "click-option": _checkboxes,  # one radio button, named the same way
    "click-checkboxes": _checkboxes,
    "focus-text": lambda q, look: [_click(look, "#tt")],
    "focus-text-2": _focus_nth,
    "enter-text": lambda q, look: _type_into(look, "#tt", _quoted(q)) + [_click(look, "#subbtn")],
    "enter-text-dynamic": lambda q, look: _type_into(look, "#tt", _quoted(q)) + [_click(look, "#subbtn")],
    "enter-text-2": lambda q, look: _type_into(look, "#tt", _case(q)) + [_click(look, "#subbtn")],
    "enter-password": lambda q, look: (_type_into(look, "#password", _quoted(q))
                                       + _type_into(look, "#verify", _quoted(q)) + [_click(look, "#subbtn")]),
    "login-user": lambda q, look: (_type_into(look, "#username", _quoted(q, 0))
                                   + _type_into(look, "#password", _quoted(q, 1)) + [_click(look, "#subbtn")]),
}


class Oracle:
    """The scripted solver of the tasks in SOLVERS: reads the page through page locate (the box
    a pointer action at its centre hits, in display pixels) and answers with a script of real
    pointer and keyboard actions, run as the episode's vision run (traced, filmed, checked)."""

    name = "oracle"

    def request(self, context: EpisodeContext) -> dict[str, Any]:
        solver = SOLVERS.get(context.task.id)
        if solver is None:
            raise OracleMiss(f"the oracle does not cover {context.task.id}")

        def look(selector: str) -> dict:
            found = context.episodes.locate(context.session_id, {"selector": selector, "timeout_ms": 2000})
            if not found.get("visible") or not found.get("box"):
                raise OracleMiss(f"{context.task.id}: {selector} is not visible ({context.instruction!r})")
            return found

        return {"model": "scripted", "script": solver(context.instruction, look)}

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
from vision.eval.tasks import EPISODE, NAME_MAX, Task, TaskError, TaskSet

PREFIX = "miniwob:"
# MiniWoB's own limit: the time-penalised reward is also reported against it.
MINIWOB_MAX_TIME_MS = 10_000
MARK = "#glassdesk-episode"
SHIM = """<script>
(function () {
  var query = core.QueryString;
  if (query.seed !== undefined) { Math.seedrandom(query.seed); }
  var startEpisodeReal = core.startEpisodeReal;
  core.startEpisodeReal = function () {
    // set at each start: a task's own script may set its limit after this one runs
    if (query.max_time !== undefined) { core.EPISODE_MAX_TIME = parseInt(query.max_time, 10); }
    return startEpisodeReal.apply(this, arguments);
  };
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
    # The spec names the set, but a long list of tasks would make a name past a set's bound.
    name = spec if len(spec) <= NAME_MAX else f"{PREFIX}{names[0]} and {len(names) - 1} other tasks"
    return TaskSet(name=name, tasks=[Task.model_validate({
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
    return json.dumps(text, ensure_ascii=False)  # a CSS/Playwright string literal (\uXXXX is no CSS escape)


def _click(look: Look, selector: str) -> dict:
    return _centre(look(selector))


def _type_into(look: Look, selector: str, text: str) -> list[dict]:
    return [_click(look, selector), {"action": "type", "text": text}]


def _words_between(instruction: str, start: str, end: str) -> list[str]:
    body = instruction.split(start, 1)[1].rsplit(end, 1)[0]
    return [] if body == "nothing" else [w.strip() for w in body.split(",") if w.strip()]


def _checkboxes(instruction: str, look: Look) -> list[dict]:
    names = _words_between(instruction, "Select ", " and click Submit.")
    return [_click(look, f"#area label:text-is({_css_text(n)}) input") for n in names] + [_click(look, "#subbtn")]


def _text(look: Look, selector: str) -> str:
    found = look(selector)
    value = found.get("value")
    return str(value) if value not in (None, "") else str(found.get("text") or "")


def _arithmetic(instruction: str, look: Look) -> list[dict]:
    problem = re.fullmatch(r"\s*(-?\d+)\s*([-+x])\s*(-?\d+)\s*=\s*", _text(look, "#math-problem"))
    if problem is None:
        raise OracleMiss("the math problem does not read as 'a op b ='")
    a, op, b = int(problem.group(1)), problem.group(2), int(problem.group(3))
    answer = a + b if op == "+" else a - b if op == "-" else a * b
    return _type_into(look, "#math-answer", str(answer)) + [_click(look, "#subbtn")]


def _algebra(instruction: str, look: Look) -> list[dict]:
    text = " ".join(_text(look, "#math-problem").split())
    if found := re.fullmatch(r"x ([-+]) (\d+) = (-?\d+)", text):
        op, digit, total = found.group(1), int(found.group(2)), int(found.group(3))
        answer = total - digit if op == "+" else total + digit
    elif found := re.fullmatch(r"(\d+) ([-+]) x = (-?\d+)", text):
        digit, op, total = int(found.group(1)), found.group(2), int(found.group(3))
        answer = total - digit if op == "+" else digit - total
    else:
        raise OracleMiss(f"the equation {text!r} is not one this solver reads")
    return _type_into(look, "#math-answer", str(answer)) + [_click(look, "#subbtn")]


def _nth_word(instruction: str, look: Look) -> list[dict]:
    position = re.search(r"the (\d+)(?:st|nd|rd|th) word", instruction)
    if position is None:
        raise OracleMiss(f"which word: {instruction!r}")
    words = _text(look, "#area p").split()
    word = re.sub(r"[^a-zA-Z]", "", words[int(position.group(1)) - 1])
    return _type_into(look, "#answer-input", word) + [_click(look, "#subbtn")]


def _table_value(instruction: str, look: Look) -> list[dict]:
    key = _words_between(instruction, "Enter the value of ", " into the text field and press Submit.")[0]
    value = _text(look, f"#tab td:text-is({_css_text(key)}) + td").strip()
    return _type_into(look, "#tt", value) + [_click(look, "#subbtn")]


def _odd_or_even(instruction: str, look: Look) -> list[dict]:
    rows = look(".row")["matches"]
    actions = []
    for row in range(rows):
        number = int(_text(look, f".row >> nth={row} >> .display-number").strip())
        actions.append(_click(look, f".row >> nth={row} >> button.{'odd' if number % 2 else 'even'}"))
    return actions + [_click(look, "#submit")]


def _spinner(instruction: str, look: Look) -> list[dict]:
    n = int(_words_between(instruction, "Select ", " with the spinner and hit Submit.")[0])
    arrow = _click(look, ".ui-spinner-up" if n > 0 else ".ui-spinner-down")
    return [dict(arrow) for _ in range(abs(n))] + [_click(look, "#subbtn")]


def _copy_paste(instruction: str, look: Look) -> list[dict]:
    return [_click(look, "#to-copy"), {"action": "key", "keys": ["ctrl+a", "ctrl+c"]},
            _click(look, "#answer-input"), {"action": "key", "keys": ["ctrl+v"]}, _click(look, "#subbtn")]


def _date(instruction: str, look: Look) -> list[dict]:
    month, day, year = _words_between(instruction, "Enter ", " as the date and hit submit.")[0].split("/")
    box = look("#tt")["box"]  # the month's segment, at the field's left, not the picker's icon at its right
    return [{"action": "click", "x": box["x"] + 12, "y": box["y"] + box["height"] // 2},
            {"action": "type", "text": f"{month}{day}{year}"}, _click(look, "#subbtn")]


def _time(instruction: str, look: Look) -> list[dict]:
    found = re.search(r"Enter (\d+):(\d{2}) ?([AP]M) as the time", instruction)
    if found is None:
        raise OracleMiss(f"which time: {instruction!r}")
    box = look("#tt")["box"]
    return [{"action": "click", "x": box["x"] + 10, "y": box["y"] + box["height"] // 2},
            {"action": "type", "text": f"{int(found.group(1)):02d}{found.group(2)}{found.group(3)[0]}"},
            _click(look, "#subbtn")]


def _grid_point(instruction: str, look: Look) -> list[dict]:
    point = re.search(r"[(]-?\d,-?\d[)]", instruction)
    if point is None:
        raise OracleMiss(f"which point: {instruction!r}")
    return [_click(look, f"circle[id={_css_text(point.group(0))}]")]


def _last_word(instruction: str, look: Look) -> list[dict]:
    word = re.sub(r"[^a-zA-Z0-9]", "", _text(look, "#text-area").split()[-1])
    return _type_into(look, "#answer-input", word) + [_click(look, "#subbtn")]


def _highlight(instruction: str, look: Look) -> list[dict]:
    return [{**_click(look, "#randomText"), "action": "triple_click"}, _click(look, "#subbtn")]  # the paragraph


def _choose(instruction: str, look: Look) -> list[dict]:
    # Chromium's list of a <select> is a popup of its own: typing the option's name picks it there
    name = _words_between(instruction, "Select ", " from the list and click Submit.")[0]
    return [_click(look, "#options"), {"action": "type", "text": name}, {"action": "key", "keys": ["Return"]},
            _click(look, "#area button")]


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


def _copy_from_nth(instruction: str, look: Look) -> list[dict]:
    found = re.search(r"from the (1st|2nd|3rd) text area", instruction)
    if found is None:
        raise OracleMiss(f"which text area: {instruction!r}")
    return [_click(look, f"#text-{found.group(1)[0]}"), {"action": "key", "keys": ["ctrl+a", "ctrl+c"]},
            _click(look, "#answer-input"), {"action": "key", "keys": ["ctrl+v"]}, _click(look, "#subbtn")]


# The rows of multi-layouts' and multi-orderings' movie search, whatever the layout: a field's row
# holds its label (a span, a div, a th; "Director Name", "Released Date") and its text box.
MOVIE_ROWS = "#area :is(p, div.row, tr, div.field, div.ui-entry)"


def _movie_search(instruction: str, look: Look) -> list[dict]:
    found = re.fullmatch(r"Search for (.+) movies directed by (.+) from year (\d+)\.", instruction.strip())
    if found is None:
        raise OracleMiss(f"which movies: {instruction!r}")
    genre, director, year = found.groups()
    rows = [(f'{MOVIE_ROWS}:has-text("Genre") input', genre), (f'{MOVIE_ROWS}:has-text("Director") input', director),
            (f'{MOVIE_ROWS}:not(:has-text("Genre")):not(:has-text("Director")) input', year)]
    return [a for selector, value in rows for a in _type_into(look, selector, value)] + [
        _click(look, "#area :is(button, .final, .ui-submit)")]


def _labelled_values(instruction: str, look: Look) -> list[dict]:
    actions = []
    for label, field in (("#ll1", "#tt1"), ("#ll2", "#tt2")):
        key = _text(look, label).strip().removesuffix(":")
        actions += _type_into(look, field, _text(look, f"#tab td:text-is({_css_text(key)}) + td").strip())
    return actions + [_click(look, "#subbtn")]


def _scroll_to_end(instruction: str, look: Look) -> list[dict]:
    end = "ctrl+End" if "to the bottom" in instruction else "ctrl+Home" if "to the top" in instruction else None
    if end is None:
        raise OracleMiss(f"which end: {instruction!r}")
    return [_click(look, "#text-area"), {"action": "key", "keys": [end]}, _click(look, "#subbtn")]


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
    "click-checkboxes-large": _checkboxes,
    "click-checkboxes-transfer": _checkboxes,
    "click-test-transfer": lambda q, look: [_click(look, "#subbtn" if "ONE" in q else "#subbtn2")],
    "unicode-test": lambda q, look: [_click(look, f"#area button:text-is({_css_text(_quoted(q))})")],
    "simple-arithmetic": _arithmetic,
    "simple-algebra": _algebra,
    "find-word": _nth_word,
    "read-table": _table_value,
    "grid-coordinate": _grid_point,
    "odd-or-even": _odd_or_even,
    "use-spinner": _spinner,
    "copy-paste": _copy_paste,
    "scroll-text": _last_word,
    "highlight-text": _highlight,
    "enter-date": _date,
    "enter-time": _time,
    "choose-list": _choose,
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
    "copy-paste-2": _copy_from_nth,
    "multi-orderings": _movie_search,
    "multi-layouts": _movie_search,
    "read-table-2": _labelled_values,
    "scroll-text-2": _scroll_to_end,
    # the captcha is one span a letter, each skewed: its text is the letters
    "text-transform": lambda q, look: (_type_into(look, "#tt", "".join(_text(look, "#captcha").split()))
                                       + [_click(look, "#subbtn")]),
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

"""`glassdesk eval` on real desktops: MiniWoB++'s own pages scored by their own reward with the
oracle acting through real input, episodes that never see each other's browser state, and an
episode whose desktop is deleted under its run tried again on a fresh one (vision.eval)."""

from __future__ import annotations

import json
import threading
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from vision.cli import main
from vision.cli.qa import embedded_server
from vision.client import GlassdeskClient
from vision.client.episodes import ClientEpisodes
from vision.eval import miniwob
from vision.eval.runner import FRESH, Evaluation
from vision.eval.tasks import parse_tasks

pytestmark = pytest.mark.x11

ASSETS = Path(__file__).parent.parent / "assets"


def test_the_oracle_scores_every_task_it_covers_by_the_pages_own_reward(tmp_path):
    out, report = tmp_path / "result.json", tmp_path / "junit.xml"
    code = main(["eval", "miniwob:oracle", "--model", "oracle", "--episodes", "1", "--parallel", "2",
                 "--fresh", "clear", "--data-dir", str(tmp_path / "data"), "-o", str(out), "--junit", str(report)])
    assert code == 0
    result = json.loads(out.read_text())
    episodes = result["episodes"]
    assert sorted(e["task"] for e in episodes) == sorted(miniwob.SOLVERS)
    missed = [(e["task"], e["status"], e["error"], e["checks"]) for e in episodes if e["outcome"] != "success"]
    assert not missed
    for episode in episodes:
        # the page's own verdict, read back: a raw reward of 1 within the raised time limit
        assert episode["reward"]["raw"] == 1.0 and 0 < episode["reward"]["reward"] <= 1.0, episode
        assert episode["claimed"] and episode["checks"][0]["passed"] and episode["trace_id"]
        assert episode["instruction"] and "START" not in episode["instruction"]
    suite = ET.fromstring(report.read_text()).find("testsuite")
    assert suite.get("failures") == "0" and len(suite.findall("testcase")) == len(miniwob.SOLVERS)
    assert (tmp_path / "data" / "traces" / episodes[0]["trace_id"]).is_dir()  # each episode's run, traced


class Leaky(BaseHTTPRequestHandler):
    """A page that says whether this browser was here before (a cookie, local storage), then marks
    it: an episode that inherits another's state sees "seen"."""

    def do_GET(self):  # noqa: N802
        page = b"""<!doctype html><title>leak</title><p id="state">?</p><script>
          var seen = document.cookie.includes('mark=1') || localStorage.getItem('mark');
          document.getElementById('state').textContent = seen ? 'seen' : 'fresh';
          document.cookie = 'mark=1; max-age=3600'; localStorage.setItem('mark', '1');
        </script>"""
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def leaky():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Leaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


class Waits:
    """A scripted agent that only waits; ``delete_first``: the first episode's desktop is deleted
    under its run, from another thread, as a crash of the session would end it."""

    name = "waiter"

    def __init__(self, client=None):
        self.client, self.deleted = client, []

    def request(self, context):
        if self.client is not None and not self.deleted:
            self.deleted.append(context.session_id)
            threading.Timer(1.0, lambda: self.client.session(context.session_id).delete()).start()
        return {"model": "scripted", "script": [{"action": "wait", "duration_ms": 500 if self.client is None else 1500}]
                * 3}


def tasks(url):
    return parse_tasks([{"id": "visit", "instruction": "wait", "start": {"url": url},
                         "expect": [{"selector": "#state", "assertion": {"type": "has_text", "expected": "fresh"}}]}],
                       "leak")


def test_episodes_never_see_each_others_browser_state_and_a_deleted_desktop_is_retried(leaky, tmp_path):
    with embedded_server(str(tmp_path / "data"), max_sessions=5, warm=2) as (base, _, token), \
            GlassdeskClient(base, token=token, timeout=300) as client:
        for fresh in FRESH:  # a new desktop, a worker's own reset, its browser cleared: never a carry-over
            episodes = Evaluation(ClientEpisodes(client), tasks(leaky), [Waits()], episodes_per_task=3, parallel=2,
                                  fresh=fresh).run()
            assert [e.outcome for e in episodes] == ["success"] * 3, (fresh, [e.checks for e in episodes])
            assert len({e.trace_id for e in episodes}) == 3
        assert client.sessions() == [] or all(s.id == "default" for s in client.sessions())
        agent = Waits(client)
        (episode,) = Evaluation(ClientEpisodes(client), tasks(leaky), [agent], retries=1).run()
        assert episode.outcome == "success" and len(episode.environment_errors) == 1, episode
        assert agent.deleted and client.session(agent.deleted[0]) is not None
        assert all(s.id != agent.deleted[0] for s in client.sessions())


class Scripted:
    """A scripted agent that does the same each episode."""

    def __init__(self, name, script):
        self.name, self.script = name, script

    def request(self, context):
        return {"model": "scripted", "script": self.script}


def test_an_osworld_task_that_maps_is_scored_by_its_own_check_in_episodes(tmp_path):
    """An OSWorld Chrome task file (its usual setup: Chrome with its DevTools port, socat, the page in
    a tab, the window activated; scored by the active tab's URL), loaded by `osworld:` and run as
    episodes: the agent that goes on succeeds, the one that only waits and says done fails."""
    from functools import partial
    from http.server import SimpleHTTPRequestHandler

    from vision.eval import osworld

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    pages = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(ASSETS / "osworld")))
    threading.Thread(target=pages.serve_forever, daemon=True).start()
    site = f"http://127.0.0.1:{pages.server_address[1]}"
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "next-step.json").write_text(json.dumps({
        "id": "next-step", "instruction": "Go on to the next step of the page open in Chrome.",
        "config": [
            {"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]}},
            {"type": "launch", "parameters": {"command": ["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]}},
            {"type": "chrome_open_tabs", "parameters": {"urls_to_open": [f"{site}/next.html"]}},
            {"type": "activate_window", "parameters": {"window_name": "Google Chrome"}}],
        "evaluator": {"func": "is_expected_active_tab", "result": {"type": "active_tab_info"},
                      "expected": {"type": "rule", "rules": {"type": "url", "url": f"{site}/done.html"}}}}))
    (tmp_path / "tasks" / "a-file.json").write_text(json.dumps({
        "id": "a-file", "instruction": "x", "config": [{"type": "execute", "parameters": {"command": "true"}}],
        "evaluator": {"func": "exact_match", "result": {"type": "vm_command_line"}}}))
    try:
        tasks, refused = osworld.load(f"osworld:{tmp_path / 'tasks'}")
        assert [t.id for t in tasks.tasks] == ["next-step"] and len(refused) == 1 and "execute" in refused[0]
        agents = [Scripted("goes-on", [{"action": "key", "keys": ["Return"]}]),
                  Scripted("waits", [{"action": "wait", "duration_ms": 300}])]
        with embedded_server(str(tmp_path / "data"), max_sessions=3, warm=1) as (base, _, token), \
                GlassdeskClient(base, token=token, timeout=300) as client:
            episodes = Evaluation(ClientEpisodes(client), tasks, agents, episodes_per_task=2).run()
    finally:
        pages.shutdown()
    outcomes = sorted((e.model, e.outcome, e.false_claim) for e in episodes)
    assert outcomes == [("goes-on", "success", False)] * 2 + [("waits", "failure", True)] * 2, \
        [(e.model, e.outcome, e.checks) for e in episodes]

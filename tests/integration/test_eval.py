"""`glassdesk eval` on real desktops: MiniWoB++'s own pages scored by their own reward with the
oracle acting through real input, episodes that never see each other's browser state, and an
episode whose desktop is deleted under its run tried again on a fresh one (vision.eval)."""

from __future__ import annotations

import json
import threading
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from vision.cli import main
from vision.cli.qa import embedded_server
from vision.client import GlassdeskClient
from vision.client.episodes import ClientEpisodes
from vision.eval import miniwob
from vision.eval.runner import FRESH, Evaluation
from vision.eval.tasks import parse_tasks

pytestmark = pytest.mark.x11


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

"""Tasks in OSWorld's JSON shape run end to end by OSWorld's own ``DesktopEnv`` (desktop-env 1.0.2)
on glassdesk sessions, through glassdesk's provider (vision.client.osworld) and its REST API: the
task's setup runs on the guest, the score is OSWorld's own getters and metrics, 0.0 before a
scripted pyautogui solution and 1.0 after it. Each task starts on a new session (the provider's
revert), as each OSWorld task starts from its VM's snapshot."""

from __future__ import annotations

import json
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from desktop.session.manager import SessionManager
from desktop.session.stack import free_port
from tests import osworld_harness
from tests.conftest import LiveServer, session_files
from tests.fakes.todomvc import TodoMvcServer

pytestmark = pytest.mark.x11

osworld_harness.install()

TASKS = Path(__file__).parent.parent / "assets" / "osworld"

# What a scripted agent does for each task, as DesktopEnv's pyautogui action space takes it: Python
# run on the guest after `import pyautogui` (pyautogui input for the editor and the browser).
SOLUTIONS = {
    "os-create-file": ["import pathlib; (pathlib.Path.home() / 'Desktop' / 'hello.txt')"
                       ".write_text('hello glassdesk\\n')"],
    "os-rename-file": ["import os; d = os.path.expanduser('~/notes'); os.rename(d + '/draft.txt', d + '/final.txt')"],
    "os-upload-and-count": ["import os; d = os.path.expanduser('~/data'); n = len(open(d + '/lines.txt').readlines()); "
                            "open(d + '/count.txt', 'w').write(f'{n}\\n')"],
    "os-make-directories": ["import os; [os.makedirs(os.path.expanduser(f'~/projects/{d}'))"
                            " for d in ('alpha', 'beta')]"],
    "os-download-checksum": ["import hashlib, os; d = open(os.path.expanduser('~/Downloads/lines.txt'), 'rb').read(); "
                             "open(os.path.expanduser('~/sum.txt'), 'w').write(hashlib.sha256(d).hexdigest())"],
    "editor-type-and-save": ["pyautogui.typewrite('buy milk\\n', interval=0.02)", "pyautogui.hotkey('ctrl', 's')"],
    "editor-replace-text": ["pyautogui.hotkey('ctrl', 'a'); pyautogui.typewrite('goodbye', interval=0.02)",
                            "pyautogui.hotkey('ctrl', 's')"],
    "calculator-sum": ["pyautogui.typewrite('12+30=', interval=0.05)"],
    "chrome-form-saved": ["pyautogui.typewrite('glassdesk', interval=0.02)", "pyautogui.press('enter')"],
    "chrome-next-page": ["pyautogui.press('enter')"],
    # Through the browser's own keys; scored by OSWorld's Chrome getters (over DevTools, and the
    # profile's files at Chrome's path).
    # A new tab's page (Chromium's third-party new-tab page) keeps the keyboard: ctrl+l to the address bar.
    "chrome-open-tab": ["pyautogui.hotkey('ctrl', 't'); time.sleep(1); pyautogui.hotkey('ctrl', 'l')",
                        "pyautogui.typewrite('{SITE}/next.html', interval=0.01); pyautogui.press('enter')"],
    "chrome-bookmark-page": ["pyautogui.hotkey('ctrl', 'd'); time.sleep(1)",
                             # the bubble's Folder box, its "Bookmarks bar", then Done
                             "pyautogui.press('tab'); pyautogui.press('b')",
                             "pyautogui.press('tab', presses=2, interval=0.2); pyautogui.press('enter')"],
    "chrome-show-bookmarks-bar": ["pyautogui.hotkey('ctrl', 'shift', 'b')"],
    # A real app (TodoMVC's React example, tests/fakes/todomvc.py): typed into its autofocused
    # field, then its first item's toggle reached with the keyboard (past "toggle all").
    "chrome-todomvc": ["pyautogui.typewrite('buy milk\\n', interval=0.02)",
                       "pyautogui.typewrite('feed the cat\\n', interval=0.02)",
                       "pyautogui.press('tab', presses=2, interval=0.1); pyautogui.press('space')"],
}
# Chromium writes Bookmarks and Preferences a few seconds after a change (its ImportantFileWriter
# waits up to 10 s to batch them), as Chrome does on OSWorld's own VMs: a score is read again until
# it holds or this much time has passed.
SCORE_SETTLES_S = 30


@pytest.fixture(scope="module")
def todomvc():
    with TodoMvcServer() as served:
        yield served.origin


@pytest.fixture(scope="module")
def site():
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(TASKS)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """glassdesk's API as `glassdesk up --allow-local-urls --allow-evaluate` makes it (the tasks' pages
    are local; OSWorld's Chrome getters need the browser's DevTools, which run code in pages) and a
    client of it, with a warm desktop kept for each task's new session."""
    from vision.app.service import Glassdesk
    from vision.client import GlassdeskClient
    from vision.config import VisionConfig
    from vision.http.app import Settings, create_app

    port = free_port()
    settings = Settings(token=None, port=port, allow_local_urls=True, allow_evaluate=True)
    with session_files() as root:
        manager = SessionManager(root=root, max_sessions=2, stack_config=settings.stack_config())
        app = Glassdesk.build(manager, data_dir=tmp_path_factory.mktemp("osworld-api"), config=VisionConfig(),
                              allow_local_urls=True, allow_evaluate=True)
        manager.keep_warm(1)
        try:
            with LiveServer(create_app(manager, settings, app), port=port) as server:
                with GlassdeskClient(server.url, timeout=120) as gd:
                    yield gd
        finally:
            manager.close()  # the tasks' sessions and their guests with it


@pytest.fixture(scope="module")
def env(client, tmp_path_factory):
    from vision.client.osworld import osworld_env

    made = osworld_env(client, action_space="pyautogui", require_a11y_tree=False,
                       cache_dir=str(tmp_path_factory.mktemp("osworld-cache")))
    yield made
    made.close()


@pytest.fixture(scope="module")
def places(site, todomvc) -> dict[str, str]:
    """What a task's {PLACEHOLDER}s stand for: the tasks' own pages, the real app, the assets."""
    return {"SITE": site, "TODOMVC": todomvc, "ASSETS": str(TASKS)}


def task(task_id: str, places: dict[str, str]) -> dict:
    text = (TASKS / f"{task_id}.json").read_text()
    for name, value in places.items():
        text = text.replace("{" + name + "}", value)
    return json.loads(text)


@pytest.mark.parametrize("task_id", sorted(SOLUTIONS))
def test_an_osworld_task_scores_nothing_before_its_solution_and_full_marks_after(env, places, task_id, client):
    started = time.monotonic()
    observation = env.reset(task_config=task(task_id, places))
    assert observation["screenshot"][:8] == b"\x89PNG\r\n\x1a\n"
    assert env.path_to_vm in {s.id for s in client.sessions()}  # the guest is a glassdesk session
    assert env.evaluate() == 0.0, f"{task_id} scored before anything was done ({time.monotonic() - started:.1f}s)"
    for action in SOLUTIONS[task_id]:
        env.step(action.replace("{SITE}", places["SITE"]), pause=0.5)
    assert settled_score(env) == 1.0, task_id


def settled_score(env) -> float:
    deadline = time.monotonic() + SCORE_SETTLES_S
    while (score := env.evaluate()) != 1.0 and time.monotonic() < deadline:
        time.sleep(1)
    return score


def test_each_task_starts_on_a_new_session_and_the_old_one_is_gone(env, places, client):
    env.reset(task_config=task("os-rename-file", places))
    env.step(SOLUTIONS["os-rename-file"][0], pause=0)
    first = client.session(env.path_to_vm).info().created_at
    env.reset(task_config=task("os-rename-file", places))  # the guest was used: reverted
    assert client.session(env.path_to_vm).info().created_at > first
    assert env.evaluate() == 0.0  # nothing of the last task's solution is left


def test_the_browsers_devtools_reach_the_harness_and_no_program_of_the_session(env, places, site, client):
    """What OSWorld's Chrome getters connect to: the session's own Chromium (the page glassdesk opened,
    Playwright's control kept), relayed out of its namespace to a port no program of the session
    reaches (through its proxy or straight), and gone with the guest."""
    import requests
    from playwright.sync_api import sync_playwright

    from vision.client.errors import ApiError

    env.reset(task_config=task("chrome-next-page", places))
    session = client.session(env.path_to_vm)
    guest = session.osworld_guest()
    assert guest.devtools_port > 0 and guest.problems == [], guest
    with sync_playwright() as p:
        browser = p.chromium.connect_over_cdp(f"http://{guest.host}:{guest.devtools_port}")
        urls = [page.url for context in browser.contexts for page in context.pages]
        browser.close()  # a harness's close only disconnects: the session's browser stays
    assert f"{site}/next.html" in urls
    assert session.page.state().url == f"{site}/next.html"  # and glassdesk still drives it
    probe = env.controller.run_bash_script(
        f"curl -sS -m 5 -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{guest.devtools_port}/json/version; echo; "
        f"curl -sS -m 5 --noproxy '*' -o /dev/null -w '%{{http_code}}' "
        f"http://127.0.0.1:{guest.devtools_port}/json/version")
    assert "200" not in probe["output"], probe
    calls = session.osworld_calls()  # the episode on record, over REST: the task's setup, ..., the probe
    launch = next(c for c in calls if c.route == "/setup/launch")
    assert launch.status == 200 and launch.summary == f"google-chrome {site}/next.html", launch
    assert (calls[-1].route, calls[-1].returncode) == ("/run_bash_script", probe["returncode"])
    session.close_osworld_guest()
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://{guest.host}:{guest.devtools_port}/json/version", timeout=5)
    with pytest.raises(ApiError) as closed:
        session.osworld_calls()
    assert closed.value.status == 404 and "POST /api/v1/sessions/" in str(closed.value)


def test_a_person_watches_the_episode_live_and_takes_it_over(env, places, client):
    """The episode's session has glassdesk's live view: a person connects to it (noVNC's protocol),
    takes the desktop over, and their pointer is what the guest reports; meanwhile the harness's
    actions are refused, and once the person hands back, they run again."""
    import requests

    from tests.fakes.rfb import RFBClient

    env.reset(task_config=task("os-create-file", places))
    session = client.session(env.path_to_vm)
    guest = session.osworld_guest()
    server = type("Server", (), {"port": urlsplit(client.base_url).port})
    viewer = RFBClient(server, session.live_view().token, session=session.id)
    try:
        assert viewer.handshake() == (1920, 1080)  # the episode's own display
    finally:
        viewer.close()
    control = session.takeover(True)
    person = RFBClient(server, control.token, session=session.id)
    try:
        person.handshake()
        person.pointer(901, 501)
        person.sync()
        deadline = time.monotonic() + 10
        while (where := requests.get(f"{guest.url}/cursor_position", timeout=30).json()) != [901, 501] \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        assert where == [901, 501]
        refused = requests.post(f"{guest.url}/execute", json={"command": ["true"]}, timeout=30)
        assert refused.status_code == 409, refused.text
    finally:
        person.close()
        session.takeover(False)
    ran = requests.post(f"{guest.url}/execute", json={"command": ["true"]}, timeout=30)
    assert ran.status_code == 200 and ran.json()["returncode"] == 0

"""OSWorld's guest contract on a real session, driven by OSWorld's own controllers (desktop-env
1.0.2 from PyPI: ``PythonController``, ``SetupController``), never by a re-implementation: their
pyautogui code really moves the pointer and types (the test page reports it), files are written and
read as the session's desktop user, and nothing they run reaches the server's files, another
session or the guest server itself (desktop.osworld)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import threading

import pytest
from PIL import Image

from desktop.browser.chromium import DEVTOOLS_PORT
from tests import osworld_harness
from tests.fakes.testpage import at

pytestmark = pytest.mark.x11

osworld_harness.install()
from desktop_env.controllers.python import PythonController  # noqa: E402
from desktop_env.controllers.setup import SetupController  # noqa: E402


@pytest.fixture(scope="module")
def glassdesk(manager, tmp_path_factory):
    """The application over the shared sessions, as `glassdesk up --allow-local-urls` makes it: a
    task's Chrome opens the tests' local pages."""
    from vision.app.service import Glassdesk
    from vision.config import VisionConfig

    app = Glassdesk.build(manager, data_dir=tmp_path_factory.mktemp("osworld-data"), config=VisionConfig(),
                          allow_local_urls=True)
    return app


@pytest.fixture(scope="module")
def guest(glassdesk, desk):
    yield glassdesk.desktops.osworld_guest(desk.id)
    glassdesk.desktops.close_osworld_guest(desk.id)


@pytest.fixture(scope="module")
def controller(guest):
    return PythonController(vm_ip=guest.host, server_port=guest.port)


@pytest.fixture
def setup(guest, tmp_path):
    return SetupController(vm_ip=guest.host, server_port=guest.port, cache_dir=str(tmp_path))


def test_the_guest_answers_once_per_session_on_loopback_and_says_what_it_lacks(glassdesk, desk, guest):
    assert guest.host == "127.0.0.1" and guest.url == f"http://127.0.0.1:{guest.port}"
    # make setup made the guest Python with pyautogui; this server does not allow page code, so it
    # serves no DevTools, and says so (test_osworld_tasks runs one that does)
    assert guest.devtools_port == 0 and len(guest.problems) == 1 and "--allow-evaluate" in guest.problems[0]
    assert glassdesk.desktops.osworld_guest(desk.id).port == guest.port  # the same server, asked again
    assert guest.port in glassdesk.desktops.manager.control_ports()  # no session may reach it


def test_the_screenshot_is_the_displays_with_its_pointer_and_the_tree_is_osworlds_xml(controller, glassdesk, desk):
    controller.execute_python_command("pyautogui.moveTo(700, 500)")
    image = Image.open(io.BytesIO(controller.get_screenshot()))
    assert image.format == "PNG" and image.size == (1920, 1080)
    # The pointer drawn in where it is (as osworld-server's screenshots show it); glassdesk's own
    # capture, taken right after, has none there.
    bare = Image.open(io.BytesIO(glassdesk.desktops.screenshot(desk.id).png)).convert("RGB")
    box = (700 - 8, 500 - 8, 700 + 32, 500 + 32)
    assert image.convert("RGB").crop(box).tobytes() != bare.crop(box).tobytes()
    tree = controller.get_accessibility_tree()
    assert tree.startswith("<desktop-frame") and "https://accessibility.ubuntu.example.org/ns/state" in tree
    assert controller.get_vm_screen_size() == {"width": 1920, "height": 1080}
    assert controller.get_vm_platform() == "Linux"


def test_pyautogui_code_really_clicks_and_types_where_it_says(controller, page, viewport):
    x, y = at(viewport, 300, 280)
    controller.execute_python_command(f"pyautogui.click({x}, {y})")
    click = page.wait_for(lambda e: e["type"] == "click")
    assert (click["screenX"], click["screenY"]) == (x, y)
    controller.execute_python_command("pyautogui.typewrite('hello osworld')")
    page.wait_for(lambda e: e["type"] == "input" and e["field"] == "hello osworld")


def test_an_action_that_changes_nothing_says_so_in_its_exit_code(controller):
    answer = controller.execute_python_command("import sys; sys.exit(3)")
    assert answer["status"] == "success" and answer["returncode"] == 3
    broken = controller.execute_python_command("pyautogui.no_such_function()")
    assert broken["returncode"] == 1 and "AttributeError" in broken["error"]


def test_files_are_written_read_and_listed_as_the_sessions_user(controller, setup, desk, tmp_path):
    script = controller.run_bash_script("mkdir -p ~/osworld && printf 'made by bash\\n' > ~/osworld/made.txt && id -u")
    assert script["status"] == "success", script
    assert int(script["output"].strip()) == desk.stack.user.uid != 0
    assert controller.get_file("~/osworld/made.txt") == b"made by bash\n"
    local = tmp_path / "report.bin"
    local.write_bytes(bytes(range(256)) * 40)
    setup.setup([{"type": "upload_file", "parameters": {"files": [
        {"local_path": str(local), "path": "~/osworld/sub/report.bin"}]}}])
    assert controller.get_file("~/osworld/sub/report.bin") == local.read_bytes()
    on_disk = desk.stack.home / "osworld" / "sub" / "report.bin"
    assert on_disk.stat().st_uid == desk.stack.user.uid  # written by the desktop user, not the server
    tree = controller.get_vm_directory_tree(str(desk.stack.home / "osworld"))
    assert sorted(c["name"] for c in tree["children"]) == ["made.txt", "sub"]
    assert controller.get_file("~/osworld/absent.txt") is None
    ran = controller.run_python_script("import os; print(os.path.expanduser('~'))")
    assert ran["status"] == "success" and ran["output"].strip() == str(desk.stack.home)


def test_what_it_runs_cannot_reach_the_servers_files_or_the_guest_itself(controller, glassdesk, guest, manager):
    secret = glassdesk.store.root / "secret.txt"  # a file of the server's (its data dir)
    secret.write_text("the server's own")
    os.chmod(secret, 0o600)
    assert controller.get_file(str(secret)) is None
    refused = controller.run_bash_script(f"cat {secret}")
    assert refused["returncode"] != 0 and "the server's own" not in refused["output"]
    # The guest server is the control plane: code on the desktop cannot drive it (through the
    # session's proxy, or straight, from its network namespace).
    probe = controller.run_bash_script(
        f"curl -sS -m 5 -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{guest.port}/platform; echo; "
        f"curl -sS -m 5 --noproxy '*' -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{guest.port}/platform")
    assert "200" not in probe["output"], probe
    # Nor the browser's DevTools: a server that refuses page code opens no DevTools port at all.
    devtools = controller.run_bash_script(
        f"curl -sS -m 5 --noproxy '*' -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{DEVTOOLS_PORT}/json/version")
    assert devtools["returncode"] == 7, devtools  # curl's "could not connect": nothing listens there


def test_a_setup_step_waits_for_its_verification_and_says_when_it_never_holds(setup, guest):
    """osworld-server's execute_with_verification, through SetupController's own config step: the
    command runs, then the check (run in the session like any command) is polled until it holds."""
    import requests

    setup.setup([{"type": "execute_with_verification", "parameters": {
        "command": ["sh", "-c", "(sleep 1; mkdir -p ~/osworld && touch ~/osworld/late) >/dev/null 2>&1 &"],
        "verification": {"command_success": "test -e ~/osworld/late"}, "max_wait_time": 20, "check_interval": 0.2}}])
    never = requests.post(f"{guest.url}/setup/execute_with_verification", timeout=30, json={
        "command": ["true"], "verification": {"window_exists": "no-such-window-42"}, "max_wait_time": 1,
        "check_interval": 0.2})
    assert never.status_code == 500, never.text
    assert never.json() | {"output": ""} == {"status": "verification_failed", "output": "", "error": "",
                                            "returncode": 0, "verification": "failed", "wait_time": 1.0}


def test_code_it_runs_reaches_the_network_only_as_the_sessions_policy_allows(controller, glassdesk, desk):
    """pyautogui code (any Python the harness sends) goes out through the session's policy proxy or
    not at all: a host the policy denies is refused and on record as blocked, never reached."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    hits = []

    class Counting(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    fetch = ("import urllib.request\ntry:\n    print(urllib.request.urlopen('{url}', timeout=10).status)\n"
             "except Exception as exc:\n    print(type(exc).__name__, exc)")
    before = glassdesk.desktops.network_policy(desk.id)
    try:
        allowed = controller.run_python_script(fetch.format(url=f"{url}/allowed"))
        assert allowed["output"].strip() == "200" and hits == ["/allowed"], allowed
        glassdesk.desktops.set_network_policy(desk.id, allow=None, deny=[f"127.0.0.1:{server.server_address[1]}"])
        after = max([b.seq for b in glassdesk.desktops.blocked_requests(desk.id)], default=0)
        denied = controller.run_python_script(fetch.format(url=f"{url}/denied"))
        assert "403" in denied["output"] and hits == ["/allowed"], denied
        blocked = glassdesk.desktops.blocked_requests(desk.id, after)
        assert [(b.reason, b.url) for b in blocked] == [("denied", f"{url}/denied")]
    finally:
        glassdesk.desktops.set_network_policy(desk.id, allow=before.allow, deny=before.deny)
        server.shutdown()


def test_a_window_that_is_not_there_is_said_not_found_never_activated(guest):
    import requests

    missing = requests.post(f"{guest.url}/setup/activate_window", json={"window_name": "no-such-window-42"}, timeout=30)
    assert (missing.status_code, missing.text) == (404, "Window no-such-window-42 not found")
    found = requests.post(f"{guest.url}/setup/activate_window", json={"window_name": "chromium", "by_class": True},
                          timeout=30)
    assert (found.status_code, found.text) == (200, "Window activated successfully")


def test_launching_chrome_opens_its_url_in_the_sessions_own_chromium(setup, page_server, desk):
    page_server.clear()
    setup.setup([{"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337",
                                                               page_server.url]}}])
    page_server.wait_for(lambda e: e.get("type") == "loaded")
    assert desk.page_url().startswith(page_server.url)
    assert len([w for w in desk.list_windows() if "chromium" in w.wm_class.lower()]) == 1


def test_another_sessions_files_are_out_of_reach_and_its_guest_closes_with_it(glassdesk, manager, controller):
    session = glassdesk.desktops.create("osworld-other")
    try:
        opened = glassdesk.desktops.osworld_guest(session.id)
        other = PythonController(vm_ip=opened.host, server_port=opened.port)
        assert other.run_bash_script("echo theirs > ~/private.txt")["status"] == "success"
        theirs = manager.get(session.id).stack.home / "private.txt"
        assert other.get_file(str(theirs)) == b"theirs\n"
        assert controller.get_file(str(theirs)) is None  # this session's guest, that session's file
        assert "theirs" not in controller.run_bash_script(f"cat {theirs}")["output"]
    finally:
        glassdesk.desktops.delete(session.id)
    with pytest.raises(subprocess.CalledProcessError):
        subprocess.run(["curl", "-sS", "-m", "3", f"http://127.0.0.1:{opened.port}/platform"], check=True,
                       capture_output=True)
    assert opened.port not in manager.control_ports()


def test_an_episode_is_filmed_with_a_chapter_per_action_and_every_call_is_on_record(controller, glassdesk, desk,
                                                                                    guest, tmp_path):
    """The episode's evidence: the guest's film (a second start refused, as in osworld-server) has
    a chapter for each acting call and for an action through glassdesk's own API meanwhile, a
    session recording made at the same time has the same, and the record lists each call. What is
    typed shows by its length only, in both."""
    import requests

    from desktop.actions import Move

    before = len(glassdesk.desktops.osworld_calls(desk.id))
    recording = glassdesk.recordings.recording_start(desk.id)
    controller.start_recording()
    again = requests.post(f"{guest.url}/start_recording", timeout=30)
    assert again.status_code == 400 and again.json()["message"] == "Recording is already in progress."
    controller.execute_python_command("pyautogui.moveTo(200, 200); time.sleep(1); pyautogui.moveTo(900, 600)")
    controller.execute_python_command("pyautogui.typewrite('hunter2')")
    glassdesk.desktops.perform(desk.id, Move(x=640, y=400))  # an action through the API, meanwhile
    film = tmp_path / "episode.mp4"
    controller.end_recording(str(film))
    stopped = requests.post(f"{guest.url}/end_recording", timeout=30)
    assert stopped.status_code == 400 and stopped.json()["message"] == "No recording in progress to stop."
    session_film = glassdesk.recordings.recording_stop(desk.id)
    assert recording.recording_id == session_film.recording_id

    probe = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=codec_type,width,height",
                            "-show_chapters", "-of", "json", str(film)], capture_output=True, text=True, check=True)
    shown = json.loads(probe.stdout)
    assert {"codec_type": "video", "width": 1920, "height": 1080} in shown["streams"]
    titles = [chapter["tags"]["title"] for chapter in shown["chapters"]]
    assert titles == ["1. osworld /execute: pyautogui.moveTo(200, 200); time.sleep(1); pyautogui.moveTo(900, 600)",
                      "2. osworld /execute: pyautogui.typewrite(<7 characters>)",
                      "3. move at (640, 400)"], titles
    chapters = glassdesk.recordings.file(session_film.recording_id, "chapters.vtt").read_text()
    for title in titles:
        assert title.partition(". ")[2] in chapters
    assert "hunter2" not in chapters

    calls = glassdesk.desktops.osworld_calls(desk.id)[before:]
    assert [(c.route, c.status) for c in calls] == [("/start_recording", 200), ("/start_recording", 400),
                                                   ("/execute", 200), ("/execute", 200), ("/end_recording", 200),
                                                   ("/end_recording", 400)]
    assert calls[3].summary == "pyautogui.typewrite(<7 characters>)" and calls[3].returncode == 0
    on_disk = [json.loads(line) for line in (guest_dir(glassdesk, desk) / "calls.jsonl").read_text().splitlines()]
    assert [c["route"] for c in on_disk[before:]] == [c.route for c in calls]
    assert "hunter2" not in (guest_dir(glassdesk, desk) / "calls.jsonl").read_text()


def guest_dir(glassdesk, desk):
    """The directory of the session's open guest (one per contract opened)."""
    (opened,) = sorted((glassdesk.desktops.osworld_dir / desk.id).iterdir())[-1:]
    return opened

"""The texts a step made appear, for real (vision/perception/effects.py): a scripted vision run clicks a button
that shows a message, the trace records the message (not the clock beside it), the export asserts
it and carries it as the step's effect; the replay is green, fails on the assertion when the page
no longer shows it, and a healed step that no longer shows it fails at the step. A native window
(xmessage) the same way, read by OCR."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
import yaml

from tests.fakes.qa_site import pixel
from vision.cli import main

pytestmark = pytest.mark.x11

MESSAGE = "Profile saved for ada"


def newest_run(services) -> dict:
    runs = services.qa.runs
    return runs.load(sorted(runs.list_ids())[-1]).result


@pytest.fixture(scope="module")
def saved(vision_api, desk, qa_site):
    """The scripted run that presses Save on /notify, and its trace's id."""
    desk.run_settled(lambda: desk.open_url(qa_site.url("/notify")))
    x, y = pixel(desk, "#save")
    r = vision_api.post("/api/v1/sessions/itest/vision/act", json={
        "instruction": "save the profile", "model": "scripted",
        "script": [{"action": "click", "x": x, "y": y}, {"action": "done"}]})
    assert r.status_code == 200 and r.json()["status"] == "done", r.text
    return r.json()["trace_id"]


def test_the_trace_records_the_message_a_click_showed(saved, vision_api):
    step = vision_api.get(f"/api/v1/traces/{saved}").json()["steps"][0]
    assert step["appeared_on"] == "page"
    assert MESSAGE in step["appeared"] and "Your profile" not in step["appeared"]  # it was there before
    assert len(step["appeared"]) == 2  # the message, and the time it was saved at


def export(vision_api, trace_id: str, fmt: str = "yaml") -> str:
    r = vision_api.get(f"/api/v1/traces/{trace_id}/export", params={"format": fmt})
    assert r.status_code == 200, r.text
    return r.text


def test_the_export_asserts_the_message_and_replays_green(saved, vision_api, tmp_path):
    text = export(vision_api, saved)
    steps = yaml.safe_load(text)["tests"][0]["verify_user_flow"]["steps"]
    assert steps == [
        {"action": "click", "role": "button", "name": "Save", "exact": True,
         "recorded": {**steps[0]["recorded"], "appeared": [MESSAGE]}},
        {"action": "assert", "text": MESSAGE, "exact": True, "assertion": {"type": "visible"}}]  # not the clock
    ts = export(vision_api, saved, "playwright-ts")
    assert f'await expect(page.getByText("{MESSAGE}", {{ exact: true }})).toBeVisible();' in ts
    path = tmp_path / "notify.yaml"
    path.write_text(text)
    assert main(["qa", str(path), "--url", str(vision_api.base_url)]) == 0


def replay(vision_api, saved, tmp_path, version: str) -> int:
    path = tmp_path / f"notify-v{version}.yaml"
    path.write_text(export(vision_api, saved).replace('/notify"', f'/notify?v={version}"'))
    return main(["qa", str(path), "--url", str(vision_api.base_url)])


def test_a_page_that_no_longer_shows_the_message_fails_on_its_assertion(saved, vision_api, tmp_path, services):
    assert replay(vision_api, saved, tmp_path, "3") == 1
    result = newest_run(services)
    assert result["failure_step"] == 2 and MESSAGE in result["failure_reason"], result["failure_reason"]
    assert result["heals"] == []


def test_a_healed_step_must_still_show_the_message(saved, vision_api, tmp_path, services):
    # The button renamed: healed by name, and the message it shows is the heal's effect.
    assert replay(vision_api, saved, tmp_path, "2") == 0
    heal = newest_run(services)["heals"][0]
    assert (heal["by"], heal["effect"]) == ("name", f"{MESSAGE!r} appeared"), heal
    # Renamed and showing nothing: the heal is caught at the step it healed, not only at the assertion.
    assert replay(vision_api, saved, tmp_path, "4") == 1
    result = newest_run(services)
    assert result["failure_step"] == 1, result["failure_reason"]
    assert "but the recorded effect did not happen: the page does not show" in result["failure_reason"]


# ----------------------------------------------------------------------------- a native window


class Dialogs:
    """xmessage dialogs on the session's display, started here (and ended here by their group)."""

    def __init__(self, desk):
        self.desk, self.started = desk, []

    def show(self, x: int, y: int, proceeds: bool, work_ms: int = 0) -> subprocess.Popen:
        """A dialog with a SHOW button; when ``proceeds``, its click shows a second one saying hello
        (lower down), else it only closes the dialog. ``work_ms``: how long the program works
        (starting processes, using the processor) between the two, as a slow one would."""
        stack = self.desk.stack
        code = 0 if proceeds else 1
        work = (f'end=$(($(date +%s%N) + {work_ms} * 1000000)); while [ $(date +%s%N) -lt $end ]; do :; done; '
                if work_ms else "")
        script = (f'xmessage -geometry +{x}+{y} -buttons SHOW:{code} "Replay this dialog" && {work}'
                  f'exec xmessage -geometry +{x}+{y + 150} "Hello from the other side"')
        process = subprocess.Popen([*stack.run_prefix(), "sh", "-c", script], start_new_session=True,
                                   env={**stack.env(), "DISPLAY": stack.display}, cwd="/")
        self.started.append(process)
        return process

    def close(self) -> None:
        for process in self.started:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            process.wait(10)


def wait_for_text(desk, text: str) -> tuple[int, int]:
    """Where ``text`` shows, the dialogs brought to the front (a window mapped while the browser
    has just been focused may open behind it)."""
    from vision.qa.screen_find import find_text_on_screen

    deadline = time.monotonic() + 20
    while True:
        try:
            desk.windows.raise_class("Xmessage")
        except Exception:  # not mapped yet: looked for again
            pass
        try:
            found = find_text_on_screen(desk.capture().png, text)
            return found.x, found.y
        except LookupError:
            assert time.monotonic() < deadline, f"{text!r} never showed"
            time.sleep(0.5)


def test_a_healed_click_on_a_native_window_must_still_show_what_it_showed(vision_api, desk, services, tmp_path):
    desk.run_settled(lambda: desk.open_url("about:blank"))  # nothing behind the dialog to read
    dialogs = Dialogs(desk)
    try:
        first = dialogs.show(300, 300, proceeds=True)
        button = wait_for_text(desk, "SHOW")
        r = vision_api.post("/api/v1/sessions/itest/vision/act", json={
            "instruction": "show the greeting", "model": "scripted",
            "script": [{"action": "click", "x": button[0], "y": button[1]}, {"action": "wait", "duration_ms": 500},
                       {"action": "done"}]})
        assert r.status_code == 200 and r.json()["status"] == "done", r.text
        step = vision_api.get(f"/api/v1/traces/{r.json()['trace_id']}").json()["steps"][0]
        assert step["spots"][0]["text"] == "SHOW" and step["appeared_on"] == "screen", step
        assert "Hello from the other side" in step["appeared"], step["appeared"]
        dialogs.close()
        assert first.poll() is not None
        suite = yaml.safe_load(export(vision_api, r.json()["trace_id"]))
        flow = suite["tests"][0]["verify_user_flow"]
        flow.pop("start_url", None)  # the dialog is the target, not a page
        suite["keep_state"] = True   # no fresh browser: it would come in front of the dialog
        suite["session"] = "itest"
        # The greeting first (a message says more than the new dialog's button or its title, also read)
        assert flow["steps"][0]["recorded"]["appeared"][0] == "Hello from the other side"
        assert {"action": "assert", "assertion": {"type": "screen_text_contains",
                                                  "expected": "Hello from the other side"}} in flow["steps"]
        flow["steps"] = [s for s in flow["steps"] if s["action"] == "click"]  # the effect check alone
        path = tmp_path / "native.yaml"
        path.write_text(yaml.safe_dump(suite, sort_keys=False))
        # Shown elsewhere, its button still greets: healed, and the greeting is the heal's effect.
        dialogs.show(900, 500, proceeds=True)
        wait_for_text(desk, "SHOW")
        assert main(["qa", str(path), "--url", str(vision_api.base_url)]) == 0
        heal = newest_run(services)["heals"][0]
        assert heal["by"] in ("ocr", "image") and heal["effect"].endswith("appeared"), heal
        dialogs.close()
        # Shown elsewhere, and the button found there only closes it: the heal landed on a spot that
        # no longer does what the recorded click did, and the step fails.
        dialogs.show(900, 500, proceeds=False)
        wait_for_text(desk, "SHOW")
        assert main(["qa", str(path), "--url", str(vision_api.base_url)]) == 1
        result = newest_run(services)
        assert result["failure_step"] == 1
        assert "the recorded effect did not happen: the screen (OCR) does not show 'Hello from the other side'" \
            in result["failure_reason"], result["failure_reason"]
        assert result["heals"][0]["effect"].startswith("did not happen"), result["heals"]
    finally:
        dialogs.close()


def test_a_click_is_answered_when_the_native_program_it_set_to_work_rests(desk):
    """The program clicked works for 600 ms before it shows its next window (a dialog that loads,
    an editor that opens a file; any program on a loaded machine): the screen is still all that
    time, and the answer still waits for the window, not for the stillness alone."""
    from desktop.actions import Click
    from vision.qa.screen_find import find_text_on_screen

    desk.run_settled(lambda: desk.open_url("about:blank"))
    dialogs = Dialogs(desk)
    try:
        dialogs.show(300, 300, proceeds=True, work_ms=600)
        x, y = wait_for_text(desk, "SHOW")
        done = desk.perform(Click(x=x, y=y))
        assert done.settled, done
        assert find_text_on_screen(done.frame.png, "Hello from the other side")  # raises when it is not there
    finally:
        dialogs.close()


# ------------------------------------------------------------------ a QA run's template images


def test_a_qa_runs_template_image_survives_its_export_and_replays(vision_api, desk, qa_site, services, tmp_path):
    """A flow that clicks an icon found by its template image: the run keeps the image as a file of
    its own (a record would omit it), and its export gives it back, so the suite replays."""
    import base64
    import io

    from PIL import Image

    desk.run_settled(lambda: desk.open_url(qa_site.url("/signup")))
    pad = pixel(desk, "#pad")
    x, y = pad[0] - 210 + 300 + 22, pad[1] - 90 + 100 + 22  # the red icon's centre (tests/fakes/qa_site.py)
    shot = Image.open(io.BytesIO(desk.capture().png)).convert("RGB").crop((x - 24, y - 24, x + 24, y + 24))
    out = io.BytesIO()
    shot.save(out, "PNG")
    template = base64.b64encode(out.getvalue()).decode()
    qa_site.clear()
    r = vision_api.post("/api/v1/sessions/itest/qa/verify_user_flow", json={
        "start_url": qa_site.url("/signup"), "steps": [{"action": "click", "image": template}]})
    assert r.status_code == 200 and r.json()["success"], r.text
    run_id = r.json()["test_run_id"]
    started = services.qa.runs.records(run_id)[0]
    assert template not in str(started)  # the record holds a reference, the run the file
    assert services.qa.runs.verify(run_id).ok
    text = vision_api.get(f"/api/v1/qa/runs/{run_id}/export", params={"format": "yaml"}).text
    assert yaml.safe_load(text)["tests"][0]["verify_user_flow"]["steps"][0]["image"] == template
    path = tmp_path / "icon.yaml"
    path.write_text(text)
    qa_site.clear()
    assert main(["qa", str(path), "--url", str(vision_api.base_url)]) == 0
    clicks = [e for e in qa_site.events if e.get("type") == "pad"]
    assert clicks and abs(clicks[-1]["x"] - 322) <= 6 and abs(clicks[-1]["y"] - 122) <= 6, clicks


# ------------------------------------------------------------------------------------- TodoMVC


def test_on_todomvc_the_new_todo_and_its_counter_are_asserted_and_catch_a_bug(vision_api, desk, tmp_path):
    """A real app: a scripted run adds a todo; its export asserts what the step made appear (the
    todo and the footer's count, both specific), replays green on the app, and fails on the app
    whose footer counts one item too many (tests/fakes/todomvc.py, counter_off_by_one)."""
    from tests.fakes.todomvc import TodoMvcServer

    with TodoMvcServer() as app:
        desk.run_settled(lambda: desk.open_url(app.origin + "/"))
        x, y = pixel(desk, "#new-todo")
        r = vision_api.post("/api/v1/sessions/itest/vision/act", json={
            "instruction": "add a todo", "model": "scripted",
            "script": [{"action": "click", "x": x, "y": y}, {"action": "type", "text": "buy milk"},
                       {"action": "key", "keys": ["Return"]}, {"action": "done"}]})
        assert r.status_code == 200 and r.json()["status"] == "done", r.text
        trace_id = r.json()["trace_id"]
        text = export(vision_api, trace_id)
        origin = app.origin
    steps = yaml.safe_load(text)["tests"][0]["verify_user_flow"]["steps"]
    asserted = [s["text"] for s in steps if s["action"] == "assert" and "text" in s]
    assert "buy milk" in asserted and "1 item left" in asserted, steps
    assert len(asserted) <= 3
    spec = export(vision_api, trace_id, "playwright-ts")
    assert 'await expect(page.getByText("1 item left", { exact: true })).toBeVisible();' in spec
    for bug, code in ((None, 0), ("counter_off_by_one", 1)):
        with TodoMvcServer(bug) as app:
            path = tmp_path / f"todo-{bug}.yaml"
            path.write_text(text.replace(origin, app.origin))
            assert main(["qa", str(path), "--url", str(vision_api.base_url)]) == code, bug

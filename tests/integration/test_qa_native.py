"""QA flows and a checked vision run on native programs as Debian ships them (galculator, mousepad),
their controls named as the desktop tree names them (`native: {app, role, name}`): a calculation
and the memory buttons' enabled states pass, and the same flow fails, saying what it saw, when what
it expects is changed; text filled into the editor reads back; a vision run's expectation on a
native control verifies it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.x11

SESSION = "qanative"
QA = f"/api/v1/sessions/{SESSION}/qa"


@pytest.fixture(scope="module")
def session(manager, vision_api):
    """A session of its own: its native windows must not cover the shared session's browser."""
    manager.create(SESSION)
    yield SESSION
    manager.delete(SESSION)


@pytest.fixture
def native_desk(session, vision_api):
    """The session with no program launched on it (a second galculator would make every button match
    twice), the browser's window up and in front before the test launches its own (the reset restarts
    the browser: its window coming up late would take the keyboard from the test's program)."""
    base = f"/api/v1/sessions/{session}"
    assert vision_api.post(f"{base}/reset").status_code == 200
    assert vision_api.post(f"{base}/desktop/open", json={"url": "about:blank"}).status_code == 200
    return session


def calc(name: str, **more) -> dict:
    return {"app": "galculator", "role": "toggle button", "name": name, "exact": True, **more}


DISPLAY = {"app": "galculator", "role": "text"}


def keys(*names: str) -> list[dict]:
    return [{"action": "click", "native": calc(name)} for name in names]


def calculation(expected: str, memory_name: str = "MS") -> dict:
    return {"timeout_ms": 60_000, "steps": [
        {"action": "launch", "command": "galculator"},
        {"action": "wait", "native": calc("="), "timeout_ms": 20_000},
        *keys("AC"),
        {"action": "assert", "native": calc("MR"), "assertion": {"type": "disabled"}},
        *keys("6", "*", "7", "="),
        {"action": "assert", "native": DISPLAY, "assertion": {"type": "has_text", "expected": expected}},
        {"action": "click", "native": calc(memory_name)},  # a menu button: its popup opens
        {"action": "click", "native": {"app": "galculator", "role": "menu item", "name": "save here"}},
        {"action": "assert", "native": calc("MR"), "assertion": {"type": "enabled"}},
        {"action": "assert", "native": {"app": "galculator", "role": "menu", "within": {"role": "menu bar"}},
         "assertion": {"type": "count", "count": 5}},
    ]}


def test_a_calculation_on_the_calculator_passes_step_by_step(vision_api, native_desk):
    body = vision_api.post(f"{QA}/verify_user_flow", json=calculation("42")).json()
    assert body["success"] is True, body.get("failure_reason")
    steps = {s["index"]: s for s in body["steps"]}
    six = next(s for s in steps.values() if s["name"] == "click toggle button '6' in galculator (exact)")
    assert six["detail"]["found_by"] == "native" and six["detail"]["landed"] is True
    assert six["detail"]["node"]["name"] == "6" and six["detail"]["node"]["application"] == "galculator"
    launched = steps[1]
    assert launched["name"] == "launch galculator" and launched["detail"]["pid"] > 0


@pytest.mark.parametrize("change, step, said", [
    ({"expected": "43"}, 9, "text in galculator: expected text '43'; saw text '42'"),
    ({"memory_name": "MSS"}, 10, "no control on the screen matches toggle button 'MSS' in galculator (exact)"),
])
def test_the_same_flow_fails_where_what_it_expects_changed_and_says_what_it_saw(vision_api, native_desk, change,
                                                                                step, said):
    flow = calculation(change.get("expected", "42"), change.get("memory_name", "MS"))
    for s in flow["steps"]:
        s.setdefault("timeout_ms", 1500)
    flow["steps"][1]["timeout_ms"] = 20_000
    body = vision_api.post(f"{QA}/verify_user_flow", json=flow).json()
    assert body["success"] is False and body["failure_step"] == step, body
    assert said in body["failure_reason"], body["failure_reason"]


def test_text_filled_into_the_editor_reads_back_and_a_secret_is_never_kept(vision_api, native_desk):
    area = {"app": "mousepad", "role": "text"}
    flow = {"timeout_ms": 60_000, "secrets": {"greeting": "Dear Ada"}, "steps": [
        {"action": "launch", "command": "mousepad"},
        {"action": "fill", "native": area, "value": "{{greeting}},", "timeout_ms": 20_000},
        {"action": "type", "native": area, "value": " hello"},
        {"action": "assert", "native": area, "assertion": {"type": "has_text", "expected": "Dear Ada, hello"}},
        {"action": "assert", "native": area, "assertion": {"type": "focused"}},
        {"action": "assert", "native": area, "assertion": {"type": "editable"}},
        {"action": "fill", "native": area, "value": "replaced"},
        {"action": "assert", "native": area, "assertion": {"type": "has_value", "expected": "replaced"}},
        {"action": "assert", "native": {"app": "mousepad", "role": "menu", "name": "Nowhere"}, "timeout_ms": 300,
         "assertion": {"type": "exists", "not": True}},
    ]}
    response = vision_api.post(f"{QA}/verify_user_flow", json=flow)
    body = response.json()
    assert body["success"] is True, body.get("failure_reason")
    assert body["steps"][1]["detail"]["typed"] == "(1 characters and {{greeting}})"
    assert "Dear Ada" not in response.text.replace("Dear Ada, hello", "")  # only where the flow itself says it


def test_a_vision_runs_expectation_on_a_native_control_verifies_it(vision_api, native_desk):
    base = f"/api/v1/sessions/{SESSION}"
    vision_api.post(f"{base}/desktop/launch", json={"command": "galculator"})
    found: dict = {}
    for _ in range(100):  # its window takes a moment to open
        found = vision_api.post(f"{base}/desktop/native/find", json={"target": calc("9")}).json()
        if found.get("count") == 1:
            break
    box = found["matches"][0]["box"]

    def run(expected: str) -> dict:
        return vision_api.post(f"{base}/vision/act", json={
            "instruction": "press 9", "model": "scripted",
            "script": [{"action": "click", "x": box[0] + box[2] // 2, "y": box[1] + box[3] // 2}, {"action": "done"}],
            "expect": [{"native": DISPLAY, "assertion": {"type": "has_text", "expected": expected},
                        "timeout_ms": 2000}]}).json()
    held = run("9")
    assert held["status"] == "done" and held["verified"] is True, held
    missed = run("9 and more")
    assert missed["verified"] is False and "expected text '9 and more'; saw text '99'" in str(missed), missed


def test_an_exported_run_on_the_calculator_replays_by_role_and_name_after_its_window_moved(vision_api,
                                                                                           native_desk):
    import yaml

    base = f"/api/v1/sessions/{SESSION}"
    vision_api.post(f"{base}/desktop/launch", json={"command": "galculator"})
    names = ("AC", "7", "+", "2", "=")
    boxes: dict[str, list[int]] = {}
    for _ in range(100):  # its window takes a moment to open
        found = [vision_api.post(f"{base}/desktop/native/find", json={"target": calc(n)}).json() for n in names]
        if all(f.get("count") == 1 for f in found):
            boxes = {n: f["matches"][0]["box"] for n, f in zip(names, found, strict=True)}
            break
    assert boxes, found
    run = vision_api.post(f"{base}/vision/act", json={
        "instruction": "compute 7 + 2", "model": "scripted",
        "script": [*({"action": "click", "x": b[0] + b[2] // 2, "y": b[1] + b[3] // 2} for b in boxes.values()),
                   {"action": "done"}],
        "expect": [{"native": DISPLAY, "assertion": {"type": "has_text", "expected": "9"}}]}).json()
    assert run["verified"] is True, run
    suite = yaml.safe_load(vision_api.get(f"/api/v1/traces/{run['trace_id']}/export",
                                          params={"format": "yaml"}).text)
    flow = suite["tests"][0]["verify_user_flow"]
    clicks = [s for s in flow["steps"] if s["action"] == "click"]
    assert [s["native"] for s in clicks] == [calc(n) for n in names]  # by program, role and name: no pixel
    assert all("x" not in s for s in clicks) and all(s["recorded"].get("text") or s["recorded"].get("image")
                                                     for s in clicks)
    assert flow["steps"][-1]["native"] == DISPLAY and flow["steps"][-1]["assertion"]["expected"] == "9"
    # The calculator dragged by its title bar, as a person would move it
    window = next(w for w in vision_api.get(f"{base}/desktop/windows").json() if "galculator" in w["wm_class"])
    grip = (window["x"] + window["width"] // 2, window["y"] - 12)
    vision_api.post(f"{base}/desktop/drag", json={"path": [{"x": grip[0], "y": grip[1]},
                                                           {"x": grip[0] - 500, "y": grip[1] - 250}]})
    moved = next(w for w in vision_api.get(f"{base}/desktop/windows").json() if w["id"] == window["id"])
    assert moved["x"] < window["x"] - 300, (window, moved)
    flow.pop("start_url", None)  # the calculator is the target, not a page: the browser stays behind
    replay = vision_api.post(f"{QA}/verify_user_flow", json=flow).json()
    assert replay["success"] is True, replay.get("failure_reason")
    assert replay["heals"] == []  # nothing to heal: each control found where its window is now
    acted = [s["detail"] for s in replay["steps"] if s["action"] == "click"]
    assert [d["node"]["name"] for d in acted] == list(names) and all(d["landed"] for d in acted)
    assert acted[1]["point"][0] < boxes["7"][0] - 300  # clicked where the 7 is now, not where it was
    # A control no longer named so (as if the program renamed it): healed by what was recorded at the click
    seven = next(s for s in flow["steps"] if s.get("native", {}).get("name") == "7")
    seven["native"]["name"] = "Seven"
    healed = vision_api.post(f"{QA}/verify_user_flow", json=flow).json()
    assert healed["success"] is True, healed.get("failure_reason")
    assert [h["by"] for h in healed["heals"]] in (["ocr"], ["image"]), healed["heals"]
    strict = vision_api.post(f"{QA}/verify_user_flow", json={**flow, "strict": True}).json()
    assert strict["success"] is False and "no control on the screen matches toggle button 'Seven'" in \
        strict["failure_reason"] and "strict: not healed" in strict["failure_reason"], strict["failure_reason"]

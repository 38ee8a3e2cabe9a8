"""desktop.x11.atspi.AccessibilityReader against stand-in reader programs (no bus, no X): answers
are read line by line, a reader that does not answer in time is ended and the next question starts
another, a pointer action's read never waits for a start or for another question, and a Python
without pyatspi is said."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from desktop.x11 import atspi
from desktop.x11.atspi import AccessibilityReader, AccessibilityUnavailable

STAND_IN = r"""
import json, sys, time, os
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    if request["op"] == "hang":
        time.sleep(60)
    print(json.dumps({"pid": os.getpid(), "op": request["op"]}), flush=True)
"""


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    walker = tmp_path / "walker.py"
    walker.write_text(STAND_IN)
    monkeypatch.setattr(atspi, "WALKER", walker)
    reader = AccessibilityReader(dict(os.environ), [], python=sys.executable)
    yield reader
    reader.close()


def test_questions_are_answered_by_one_reader_process(stand_in):
    first = stand_in.ask({"op": "tree"}, 10)
    second = stand_in.ask({"op": "ping"}, 10)
    assert first["op"] == "tree" and second["op"] == "ping" and first["pid"] == second["pid"]


def test_a_reader_that_does_not_answer_in_time_is_ended_and_the_next_question_starts_another(stand_in):
    before = stand_in.ask({"op": "ping"}, 10)["pid"]
    with pytest.raises(AccessibilityUnavailable, match="did not answer in time"):
        stand_in.ask({"op": "hang"}, 0.3)
    assert not stand_in.running
    assert stand_in.ask({"op": "ping"}, 10)["pid"] != before


def test_a_pointer_actions_read_never_starts_the_reader_nor_waits_for_another_question(stand_in):
    with pytest.raises(AccessibilityUnavailable, match="not started"):
        stand_in.ask({"op": "at"}, 5, start=False)
    assert not stand_in.running
    stand_in.warm()
    assert stand_in.running and stand_in.ask({"op": "at"}, 5, start=False)["op"] == "at"
    busy = threading.Thread(target=lambda: pytest.raises(AccessibilityUnavailable, stand_in.ask, {"op": "hang"}, 2))
    busy.start()
    try:
        while not stand_in._lock.locked():
            threading.Event().wait(0.01)
        with pytest.raises(AccessibilityUnavailable, match="another question"):
            stand_in.ask({"op": "at"}, 5, start=False)
    finally:
        busy.join()


def test_a_python_without_pyatspi_is_said():
    reader = AccessibilityReader(dict(os.environ), [], python=sys.executable)  # the server's: no pyatspi
    try:
        with pytest.raises(AccessibilityUnavailable, match="no accessibility library"):
            reader.ask({"op": "tree"}, 10)
    finally:
        reader.close()

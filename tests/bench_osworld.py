"""OSWorld's guest contract (issue 38; docs/osworld.md), timed through OSWorld's own controllers on a
server of its own: a pyautogui click sent to ``/execute`` and the ``/screenshot`` after it, against
the same click and screenshot over glassdesk's own REST in the same run (the ratio is the contract's
cost), and a reset between tasks (DesktopEnv's revert: a new session in the old one's place) with a
warm desktop waiting. tests.bench imports ``osworld`` for `make bench` (section "OSWorld").
"""

from __future__ import annotations

import tempfile
import time

ROUNDS = 20
RESETS = 5


def _timed(action, rounds: int = ROUNDS) -> list[float]:
    action()  # untimed first: connections, the first import of pyautogui's modules
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def osworld(bench) -> list:
    from statistics import median

    from tests import osworld_harness
    from tests.bench import Row

    osworld_harness.install()
    from desktop_env.controllers.python import PythonController

    from vision.cli.qa import embedded_server
    from vision.client import GlassdeskClient
    from vision.client.osworld import osworld_env

    with tempfile.TemporaryDirectory() as data, tempfile.TemporaryDirectory() as cache, \
            embedded_server(data, max_sessions=3, warm=1) as (base, _, token), \
            GlassdeskClient(base, token=token, timeout=300) as client:
        env = osworld_env(client, action_space="pyautogui", require_a11y_tree=False, cache_dir=cache)
        try:
            desk = client.session(env.path_to_vm)
            guest = desk.osworld_guest()
            controller = PythonController(vm_ip=guest.host, server_port=guest.port)
            points = iter([(400 + 10 * (i % 40), 500) for i in range(ROUNDS * 4)])

            def through_guest():
                x, y = next(points)
                controller.execute_python_command(f"pyautogui.click({x}, {y})")
                controller.get_screenshot()

            def through_rest():
                x, y = next(points)
                desk.click(x=x, y=y)
                desk.screenshot()

            guest_ms, rest_ms = _timed(through_guest), _timed(through_rest)
            resets = []
            task = {"id": "bench-reset", "instruction": "", "config": [{"type": "execute", "parameters": {
                "command": ["true"]}}], "evaluator": {"func": "infeasible"}}
            env.reset(task_config=task)  # a setup ran: the next reset reverts
            for _ in range(RESETS):
                time.sleep(8)  # the pool's next warm desktop is up, as between tasks of a real run
                started = time.perf_counter()
                env.reset(task_config=task)
                resets.append((time.perf_counter() - started) * 1000)
        finally:
            env.close()
    ratio = median(guest_ms) / median(rest_ms)
    return [
        Row("a pyautogui click via /execute, then /screenshot", "ms", guest_ms, note="OSWorld's PythonController"),
        Row("the same click and screenshot over glassdesk's REST", "ms", rest_ms, note="vision.client"),
        Row("the guest contract's round trip / REST's", "x", [ratio], "<= 1.5x", ratio <= 1.5,
            note="medians of the two rows above, same run"),
        Row("reset between tasks (revert: a new session), warm pool of 1", "ms", resets, "<= 1,000 ms median",
            median(resets) <= 1000, note="DesktopEnv.reset with a task whose setup ran before"),
    ]

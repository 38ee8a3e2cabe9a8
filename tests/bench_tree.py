"""The desktop tree's figures (issue 36; docs/desktop-tree.md): the whole desktop's tree (the bench
session's Chromium on the test page, galculator and mousepad as Debian ships them), warm; one native
window's tree; what the session's accessibility bus and its reader cost in memory and in a
session's start; and what --browser-accessibility (Chromium's own controls in the tree) costs,
against a session without it.
tests.bench imports ``tree``, ``bus_start`` and ``browser_controls`` for `make bench` (section
"Desktop tree").

Warm: the reader has been asked once before the samples, so its start (a Python with pyatspi) is
not in them; the first answer is told beside them.
"""

from __future__ import annotations

import time

from tests.answers import tree_nodes

SAMPLES = 15
# What the session's accessibility bus is made of (D-Bus starts them for the first GTK program).
BUS_PROCESSES = ("at-spi-bus-laun", "at-spi2-registr")


def _launched(service, session, program: str):
    service.launch(session.id, program, [])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        window = next((w for w in service.desktop_tree(session.id).windows if program in w.wm_class.lower()), None)
        if window is not None and window.nodes:
            return window
        time.sleep(0.2)
    raise RuntimeError(f"{program}'s window never showed its nodes")


def _bus_memory(session) -> dict[str, tuple[int, int]]:
    """{process: (count, PSS kB)} of the bus's processes and the reader, in ``session``."""
    from tests.bench import _leaders, session_pids
    from tests.bench_scale import _memory_kb, _read

    pids, _ = session_pids(session.stack.tag, _leaders(session))
    found: dict[str, tuple[int, int]] = {}
    for pid in pids:
        name = _read(f"/proc/{pid}/comm").strip()
        cmdline = _read(f"/proc/{pid}/cmdline")
        kind = ("the reader (python3 + pyatspi)" if "atspi_walker" in cmdline or "class Walker" in cmdline
                else "the accessibility bus's dbus-daemon" if name == "dbus-daemon" and "accessibility" in cmdline
                else name if name in BUS_PROCESSES else None)
        if kind is None:
            continue
        count, pss = found.get(kind, (0, 0))
        found[kind] = (count + 1, pss + _memory_kb(pid)[0])
    return found


def tree(bench) -> list:
    from desktop.actions import Move
    from desktop.service.desktop import DesktopService
    from tests.bench import Row, median, timed

    service = DesktopService(bench.manager)
    session = bench.session
    first_ms, _ = timed(lambda: service.desktop_tree(session.id))
    calculator = _launched(service, session, "galculator")
    _launched(service, session, "mousepad")
    session.run_settled(lambda: session.open_url(bench.page.url))  # Chromium in front, on the test page
    whole, nodes = [], 0
    for _ in range(SAMPLES):
        ms, answer = timed(lambda: service.desktop_tree(session.id))
        whole.append(ms)
        nodes = sum(1 for w in answer.windows for _ in tree_nodes(w.nodes))
    one = [timed(lambda: service.desktop_tree(session.id, window=calculator.id))[0] for _ in range(SAMPLES)]
    # The control under a pixel, as a pointer action reads it before it runs (on the calculator,
    # brought to the front): the window on top there, then the bus.
    service.focus(session.id, calculator.id)
    seven = next(n for n in tree_nodes(calculator.nodes) if n.name == "7")
    point = Move(x=seven.box[0] + seven.box[2] // 2, y=seven.box[1] + seven.box[3] // 2)
    found = session.settle.native_reads(point)[0]
    at_pixel = [timed(lambda: session.settle.native_reads(point))[0] for _ in range(SAMPLES)]
    # A native target found as a QA step or native/click finds it (galculator's windows only read),
    # and set-of-marks over the whole screen (the calculator in front, Chromium's page beside it).
    from desktop.models import NativeTarget

    seven_target = NativeTarget(app="galculator", role=seven.role, name="7", exact=True)
    found_native = [timed(lambda: service.native_find(session.id, seven_target))[0] for _ in range(SAMPLES)]
    marked = [timed(lambda: service.marks(session.id))[0] for _ in range(SAMPLES)]
    marks_count = len(service.marks(session.id, image=False).marks)
    memory = _bus_memory(session)
    bench.detail("The accessibility bus and its reader, per session", ["process", "count", "PSS MB"],
                 [[kind, str(count), f"{pss / 1024:.1f}"] for kind, (count, pss) in sorted(memory.items())],
                 note="PSS of each kind of process in the bench's session after the tree was read.")
    bus_mb = sum(pss for _, pss in memory.values()) / 1024
    rows = [
        Row("the whole desktop's tree (Chromium + galculator + mousepad), warm", "ms", whole, "<= 150 ms median",
            median(whole) <= 150, note=f"{nodes} native nodes; the first answer (reader started) "
                                                        f"{first_ms:.0f} ms"),
        Row("one native window's tree (galculator)", "ms", one, "<= 50 ms median", median(one) <= 50),
        Row("the control at a pixel on a native window (on the click path)", "ms", at_pixel, "<= 20 ms median",
            median(at_pixel) <= 20,
            note=f"found {found.describe() if found else 'nothing'}"),
        Row("a native target found (galculator's 7 by program, role and name)", "ms", found_native),
        Row("set-of-marks with its marked screenshot", "ms", marked, note=f"{marks_count} marks"),
        Row("the accessibility bus and its reader, PSS per session", "MB", [bus_mb]),
    ]
    for program in ("galculator", "mousepad"):
        for window in service.windows(session.id):
            if program in window.wm_class.lower() and window.pid:
                _end(window.pid)
    return rows


# A heavy page for the cost of Chromium's accessibility: 6,000 elements and a text area to type into.
HEAVY_PAGE = ("<html><body><textarea id=t style='position:fixed;left:10px;top:10px;width:600px;height:200px'>"
              "</textarea><ul style='margin-top:250px'>"
              + "".join(f"<li><a href='#{i}'>item {i}</a> <button>b{i}</button></li>" for i in range(3000))
              + "</ul></body></html>").encode()
TYPED = "abcdefghij " * 40  # 440 characters
BUS_STARTS = 4  # sessions started each way for the bus's share of a start


def browser_controls(bench) -> list:
    """--browser-accessibility against a session without it, one after the other, same page: the
    whole desktop's tree (Chromium's controls in it, or not), a heavy page's load and typing (the
    page's accessibility tree Chromium then keeps), a click on nothing in the page (the bus asked
    whether the pixel is the browser's own control) and a read of the toolbar's control at a pixel."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from desktop.service.desktop import DesktopService
    from desktop.session.manager import SessionManager
    from desktop.session.stack import StackConfig
    from tests.bench import Row, median
    from tests.conftest import session_files

    class Heavy(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(HEAVY_PAGE)))
            self.end_headers()
            self.wfile.write(HEAVY_PAGE)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Heavy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    figures: dict[bool, dict[str, list[float]]] = {}
    try:
        for on in (False, True):
            with session_files() as root:
                manager = SessionManager(root=root, max_sessions=1, stack_config=StackConfig(browser_accessibility=on))
                try:
                    figures[on] = _browser_figures(manager, DesktopService(manager), url)
                finally:
                    manager.close()
    finally:
        server.shutdown()
    off, on = figures[False], figures[True]

    def ratio(key: str) -> float:
        return median(on[key]) / median(off[key])

    def medians(key: str) -> str:
        return f"{median(on[key]):.0f} / {median(off[key]):.0f} ms median"

    return [
        Row("--browser-accessibility: the whole desktop's tree (Chromium's controls + the panel)", "ms", on["tree"],
            note=f"{on['nodes'][0]:.0f} native nodes; without it {median(off['tree']):.0f} ms "
                 f"({off['nodes'][0]:.0f} nodes)"),
        Row("--browser-accessibility: a 6,000-element page's load, with / without", "x", [ratio("load")],
            note=medians("load")),
        Row(f"--browser-accessibility: {len(TYPED)} characters typed into that page, with / without", "x",
            [ratio("typing")], note=medians("typing")),
        Row("--browser-accessibility: a click on nothing in the page, with / without", "x", [ratio("nothing")],
            note=medians("nothing") + " (the bus asked whether the pixel is the browser's own control)"),
        Row("--browser-accessibility: the browser's control at a pixel (the Reload button)", "ms", on["at"]),
    ]


def bus_start(bench) -> list:
    """What the session's accessibility bus adds to a session's start: sessions created one after
    the other, alternately as shipped and with NO_AT_BRIDGE=1 in their environment (no GTK program
    then asks D-Bus for the bus, so it is never started), each deleted before the next."""
    from unittest import mock

    from desktop.session.manager import SessionManager
    from desktop.session.stack import DesktopStack
    from tests.bench import Row, median, timed
    from tests.conftest import session_files

    shipped = DesktopStack.env
    starts: dict[bool, list[float]] = {True: [], False: []}
    with session_files() as root:
        manager = SessionManager(root=root, max_sessions=1)
        try:
            for index in range(2 * BUS_STARTS):
                bus = index % 2 == 0
                env = shipped if bus else lambda stack: {**shipped(stack), "NO_AT_BRIDGE": "1"}
                with mock.patch.object(DesktopStack, "env", env):
                    starts[bus].append(timed(lambda: manager.create(f"bench-bus-{index}"))[0])  # noqa: B023
                    manager.delete(f"bench-bus-{index}")  # noqa: B023 - called at once
        finally:
            manager.close()
    with_bus, without = median(starts[True]), median(starts[False])
    return [Row("a session's start with its accessibility bus / without (NO_AT_BRIDGE=1)", "x",
                [with_bus / without], note=f"{with_bus:.0f} / {without:.0f} ms median of {BUS_STARTS} each")]


def _browser_figures(manager, service, url: str) -> dict[str, list[float]]:
    from desktop.actions import Click, Type
    from tests.bench import timed

    session = manager.create("bench-browser-ui")
    pid = session.stack.browser.process.pid
    service.desktop_tree(session.id)  # the reader started
    session.run_settled(lambda: session.open_url("about:blank"))
    figures: dict[str, list[float]] = {"tree": [], "nodes": [], "load": [], "typing": [], "nothing": [], "at": []}
    for _ in range(SAMPLES):
        ms, answer = timed(lambda: service.desktop_tree(session.id))
        figures["tree"].append(ms)
    figures["nodes"].append(sum(1 for w in answer.windows for _ in tree_nodes(w.nodes)))
    for _ in range(3):
        figures["load"].append(timed(lambda: session.run_settled(lambda: session.open_url(url)))[0])
        session.perform(Click(x=300, y=100))  # into the text area
        figures["typing"].append(timed(lambda: session.perform(Type(text=TYPED)))[0])
    for index in range(SAMPLES):  # two spots apart: each click its own, never a double click's second
        nothing = Click(x=1500 + 100 * (index % 2), y=700)
        figures["nothing"].append(timed(lambda: session.perform(nothing))[0])  # noqa: B023 - called at once
    reload = next(n for w in service.desktop_tree(session.id).windows if w.pid == pid for n in tree_nodes(w.nodes)
                  if n.name == "Reload") if manager.stack_config.browser_accessibility else None
    if reload is not None:
        point = Click(x=reload.box[0] + reload.box[2] // 2, y=reload.box[1] + reload.box[3] // 2)
        figures["at"] = [timed(lambda: session.settle.browser_control(point))[0] for _ in range(SAMPLES)]
    return figures


def _end(pid: int) -> None:
    import os
    import signal

    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        pass

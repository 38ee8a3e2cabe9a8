"""Issue 33, item 5: the server's own memory over a long mixed load. ``python -m tests.bench_soak
[SECONDS]`` prints the figures; tests.bench imports ``soak`` for `make bench` (section "Soak").

A real ``glassdesk up`` (a subprocess with a data dir of its own, its default session) is driven by
three clients in this process, over real HTTP, for ``GLASSDESK_SOAK_S`` seconds (default 1800):
each round a pixel click with its screenshot, a screenshot, the page's state, a two-step scripted
vision run (a trace written), a QA flow on docs/qa/login.html served locally (a QA run written), the
trace list, /healthz and /metrics. Every 15 s the server process's resident memory (VmRSS), its
threads and its open files are read from /proc, with the number of requests answered so far.

The growth is the slope of a least-squares line of the resident memory against the requests, over
the samples after the first fifth of the run (the warm-up: imports, OCR models, caches filling to
their bounds), in MB per thousand requests. Target: under 1 MB per thousand (a leak of 1 KB a
request); threads and open files end where they were after the warm-up, +-5. Any 5xx, or an
answer that is not what it should be, is counted and named; nothing here asserts a speed.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx2

from desktop.session.stack import free_port
from tests.marks import GLASSDESK, server_env

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_S = 15
CLIENTS = 3
GROWTH_TARGET_MB = 1.0  # per thousand requests
FAILURES_KEPT, FAILURE_CHARS = 3, 600  # a failure's answer kept to be shown, of each kind
LOGIN_FLOW = [{"action": "fill", "label": "User", "value": "ada"},
              {"action": "fill", "selector": "#password", "value": "open sesame"},
              {"action": "click", "role": "button", "name": "Sign in"}]


@dataclass
class Sample:
    t: float
    requests: int
    rss_mb: float
    threads: int
    fds: int


@dataclass
class Soak:
    seconds: float
    samples: list[Sample] = field(default_factory=list)
    requests: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    # The first answers of each kind that were not what they should be, as they came: what a
    # failure was is lost with the soak's data dir otherwise.
    seen: dict[str, list[str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, what: str, ok: bool, answer: str = "") -> None:
        with self.lock:
            self.requests += 1
            if not ok:
                self.failures[what] = self.failures.get(what, 0) + 1
                if len(self.seen.setdefault(what, [])) < FAILURES_KEPT:
                    self.seen[what].append(answer[:FAILURE_CHARS])

    def growth_mb_per_k(self) -> float:
        """The least-squares slope of memory against requests after the warm-up, MB per thousand."""
        after = [s for s in self.samples if s.t >= self.seconds / 5] or self.samples
        if len(after) < 2:
            return 0.0
        n = len(after)
        mx = sum(s.requests for s in after) / n
        my = sum(s.rss_mb for s in after) / n
        var = sum((s.requests - mx) ** 2 for s in after)
        return 0.0 if var == 0 else 1000 * sum((s.requests - mx) * (s.rss_mb - my) for s in after) / var


def _status(pid: int) -> tuple[float, int, int]:
    """(VmRSS in MB, threads, open files) of a process."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["Threads"]),
            len(os.listdir(f"/proc/{pid}/fd")))


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format, *args) -> None:  # a line per request would bury the figures
        pass


def _docs_site() -> tuple[ThreadingHTTPServer, str]:
    handler = functools.partial(_Quiet, directory=str(ROOT / "docs" / "qa"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def _client_round(client: httpx2.Client, soak: Soak, site: str, n: int) -> None:
    s = "/api/v1/sessions/default"

    def call(what: str, method: str, path: str, check=lambda r: True, **kw) -> None:
        try:
            r = client.request(method, path, **kw)
            soak.count(what, r.status_code < 500 and check(r), f"{r.status_code} {r.text}")
        except httpx2.HTTPError as exc:
            soak.count(what, False, f"{type(exc).__name__}: {exc}")

    x, y = 900 + 40 * (n % 5), 700
    call("click", "POST", f"{s}/desktop/click?screenshot=true", lambda r: r.status_code in (200, 409),
         json={"x": x, "y": y})
    call("screenshot", "GET", f"{s}/desktop/screenshot", lambda r: r.status_code in (200, 409))
    call("page", "GET", f"{s}/page", lambda r: r.status_code in (200, 409))
    call("vision act", "POST", f"{s}/vision/act", lambda r: r.status_code in (200, 409),
         json={"instruction": "click and stop", "model": "scripted", "max_steps": 2,
               "script": [{"action": "click", "x": x, "y": y}, {"action": "done"}]})
    call("qa flow", "POST", f"{s}/qa/verify_user_flow",
         lambda r: r.status_code == 409 or (r.status_code == 200 and r.json().get("success") is True),
         json={"start_url": f"{site}/login.html", "steps": LOGIN_FLOW, "success_condition": {"text": "Welcome"}})
    call("traces", "GET", "/api/v1/traces", lambda r: r.status_code == 200)
    call("healthz", "GET", "/healthz", lambda r: r.status_code == 200)
    call("metrics", "GET", "/metrics", lambda r: r.status_code == 200)


def run(seconds: float) -> Soak:
    work = Path(tempfile.mkdtemp(prefix="glassdesk-soak-"))  # the data dir and the log; sessions in /tmp
    port = free_port()
    env = server_env({k: v for k, v in os.environ.items() if k not in ("GLASSDESK_TOKEN", "GLASSDESK_OWNER")},
                     uuid.uuid4().hex)
    env |= {"GLASSDESK_DATA_DIR": str(work / "data")}
    log = open(work / "server.log", "w")
    proc = subprocess.Popen([GLASSDESK, "up", "--port", str(port)], stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, env=env, cwd=work)
    site_server, site = _docs_site()
    soak = Soak(seconds)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"glassdesk up exited: {(work / 'server.log').read_text()[-2000:]}")
            try:
                if httpx2.get(f"{base}/healthz", timeout=5).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("glassdesk up did not answer /healthz in 180 s")
            time.sleep(0.5)
        start = time.monotonic()
        end = start + seconds
        stop = threading.Event()

        def client_loop() -> None:
            with httpx2.Client(base_url=base, timeout=120) as client:
                n = 0
                while not stop.is_set() and time.monotonic() < end:
                    _client_round(client, soak, site, n)
                    n += 1

        clients = [threading.Thread(target=client_loop, daemon=True) for _ in range(CLIENTS)]
        for c in clients:
            c.start()
        while time.monotonic() < end:
            rss, threads, fds = _status(proc.pid)
            soak.samples.append(Sample(time.monotonic() - start, soak.requests, rss, threads, fds))
            time.sleep(min(SAMPLE_S, max(0.0, end - time.monotonic())))
        stop.set()
        for c in clients:
            c.join(180)
        rss, threads, fds = _status(proc.pid)
        soak.samples.append(Sample(time.monotonic() - start, soak.requests, rss, threads, fds))
    finally:
        site_server.shutdown()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(90)
            except subprocess.TimeoutExpired:
                proc.kill()
        log.close()
        shutil.rmtree(work, ignore_errors=True)
    return soak


def soak(bench) -> list:
    """The rows of `make bench`'s section "Soak"."""
    from tests.bench import Row

    result = run(float(os.environ.get("GLASSDESK_SOAK_S", "1800")))
    warm = next((s for s in result.samples if s.t >= result.seconds / 5), result.samples[0])
    last = result.samples[-1]
    growth = result.growth_mb_per_k()
    steady = abs(last.threads - warm.threads) <= 5 and abs(last.fds - warm.fds) <= 5
    failed = sum(result.failures.values())
    return [
        Row("server memory growth after the warm-up", "MB/1k requests", [growth], f"< {GROWTH_TARGET_MB:g}",
            growth < GROWTH_TARGET_MB,
            note=f"{result.requests:,} requests in {result.seconds / 60:.0f} min from {CLIENTS} clients; resident "
                 f"{result.samples[0].rss_mb:.0f} MB at the start, {warm.rss_mb:.0f} after the warm-up, "
                 f"{last.rss_mb:.0f} at the end"),
        Row("server threads and open files, change from the warm-up", "count",
            [max(abs(last.threads - warm.threads), abs(last.fds - warm.fds))], "<= 5", steady,
            note=f"threads {warm.threads} -> {last.threads}, open files {warm.fds} -> {last.fds}"),
        Row("answers that were 5xx or not what they should be", "count", [failed], "0", failed == 0,
            note="; ".join(f"{k}: {v} (the first: {result.seen[k][0][:200]!r})"
                           for k, v in sorted(result.failures.items())) or "none"),
    ]


def main() -> int:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else float(os.environ.get("GLASSDESK_SOAK_S", "1800"))
    result = run(seconds)
    for s in result.samples:
        print(f"{s.t:7.0f} s  {s.requests:7d} requests  {s.rss_mb:7.1f} MB  {s.threads:4d} threads  {s.fds:4d} fds")
    print(f"growth after the warm-up: {result.growth_mb_per_k():.3f} MB per thousand requests; "
          f"failures: {result.failures or 'none'}")
    for what, answers in result.seen.items():
        for answer in answers:
            print(f"{what} failed: {answer}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""analyze_console_errors gives the same verdict on the same page, run after run: the browser's own
request for /favicon.ico (404 on a plain static server) is reported apart, never counted as the
page's error, whether or not it lands inside the listening time; a resource's failure can be
ignored by a pattern naming its URL."""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from vision.models.qa import AnalyzeConsoleRequest

pytestmark = pytest.mark.x11


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def static_site(tmp_path_factory):
    """A plain static server (no favicon: it answers 404, as most do), one page with a missing image."""
    root = tmp_path_factory.mktemp("static")
    (root / "index.html").write_text("<!doctype html><title>plain</title><p>no script error here</p>")
    (root / "broken.html").write_text('<!doctype html><title>broken</title><img src="/missing.png" alt="x">')
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_an_error_free_page_gets_the_same_verdict_20_times(services, desk, static_site):
    verdicts = []
    for _ in range(20):
        result = services.qa.analyze_console_errors(desk.id, AnalyzeConsoleRequest(url=f"{static_site}/index.html",
                                                                                 listen_ms=300))
        verdicts.append((result.has_errors, [e.message for e in result.errors]))
    assert verdicts == [(False, [])] * 20


def test_a_missing_resource_is_the_pages_error_and_a_pattern_on_its_url_ignores_it(services, desk, static_site):
    url = f"{static_site}/broken.html"
    failed = services.qa.analyze_console_errors(desk.id, AnalyzeConsoleRequest(url=url, listen_ms=300))
    assert failed.has_errors and any(e.source.endswith("/missing.png") for e in failed.errors), failed.errors
    ignored = services.qa.analyze_console_errors(desk.id, AnalyzeConsoleRequest(
        url=url, listen_ms=300, ignore_patterns=[r"/missing\.png$"]))
    assert not ignored.has_errors and ignored.ignored >= 1


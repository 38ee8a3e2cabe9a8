"""The API's docs page in a real browser with no network: Swagger UI from the pinned package lists
the operations, and its Authorize button makes "Try it out" pass the token check.

The server runs with a token; /docs and /openapi.json answer without it (vision.http.auth), every
operation still needs it. Every request the page makes that is not to this server is aborted by
Playwright's routing, so nothing from a CDN could make it work.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import pytest

from tests.conftest import LiveServer
from vision.http.app import Settings, create_app

TOKEN = "docs-test-token-7e2a"
WAIT_MS = 30_000
ARTIFACTS = Path(os.environ.get("GLASSDESK_ARTIFACTS") or "artifacts")
LIST = "#operations-sessions-list_sessions_api_v1_sessions_get"


@pytest.fixture(scope="module")
def locked(manager, services):
    with LiveServer(create_app(manager, Settings(token=TOKEN), services)) as live:
        yield live


@pytest.fixture
def offline_page(browser, locked):
    """A page whose every request to anywhere but the server is aborted (and recorded)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    ours = urlsplit(locked.url).netloc
    refused: list[str] = []

    def only_local(route):
        if urlsplit(route.request.url).netloc == ours:
            return route.continue_()
        refused.append(route.request.url)
        return route.abort()

    context.route("**/*", only_local)
    page.refused = refused
    yield page
    context.close()


def test_schema_and_docs_need_no_token_but_operations_do(locked):
    with httpx2.Client(base_url=locked.url) as client:
        schema = client.get("/openapi.json")
        assert (schema.status_code == 200
                and schema.json()["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer")
        docs = client.get("/docs")
        assert docs.status_code == 200 and "/docs/static/swagger-ui-bundle.js" in docs.text
        assert "cdn" not in docs.text.lower() and "https://" not in docs.text
        assert client.get("/docs/static/swagger-ui-bundle.js").status_code == 200
        assert client.get("/docs/static/../openapi.json").status_code in (401, 404)  # no way around the token
        assert client.get("/api/v1/sessions").status_code == 401
        assert client.get("/api/v1/sessions", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200


def execute(page) -> str:
    """Press Execute on the expanded operation; the status Swagger UI shows."""
    operation = page.locator(LIST)
    operation.locator("button.execute").click()
    status = operation.locator(".live-responses-table .response .response-col_status").first
    status.wait_for()
    text = status.inner_text().strip()
    operation.locator("button.btn-clear").click()  # so the next answer is a fresh one
    return text


def test_docs_list_the_operations_offline_and_authorize_works(offline_page, locked):
    page = offline_page
    page.goto(f"{locked.url}/docs")
    page.locator(".opblock").first.wait_for()
    operations = sum(len(ops) for ops in httpx2.get(f"{locked.url}/openapi.json").json()["paths"].values())
    assert page.locator(".opblock").count() == operations > 80
    assert page.locator('.opblock-summary-path'
                        '[data-path="/api/v1/sessions/{session_id}/desktop/screenshot"]').count() == 1

    page.locator(f"{LIST} .opblock-summary").click()
    page.locator(f"{LIST} button.try-out__btn").click()
    assert execute(page) == "401"

    page.locator(".auth-wrapper button.authorize").click()
    page.locator(".modal-ux input[type=text], .modal-ux input[type=password]").first.fill(TOKEN)
    page.locator(".modal-ux button.authorize").click()
    page.locator(".modal-ux button.btn-done").click()
    assert execute(page) == "200"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "docs-authorized.png"))
    assert all(urlsplit(url).hostname not in ("127.0.0.1", "localhost") for url in page.refused)

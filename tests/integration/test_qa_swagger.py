"""A request a real app sends, checked by a flow (issue 39): Swagger UI (the npm package
swagger-ui-dist, served as published but for the API description it loads, tests/fakes/todomvc.py)
given a bearer token in its Authorize dialog, then asked to try an operation. The flow's
wait_for_request sees the token in the request the app sent, fails on a wrong one, and shows it in
no record.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.fakes.todomvc import SWAGGER_UI, Bug, TodoMvcServer, require

QA = "/api/v1/sessions/itest/qa"
TOKEN = "glassdesk-swagger-t0k3n"
API = {"openapi": "3.0.3", "info": {"title": "Pets", "version": "1.0.0"}, "servers": [{"url": "/"}],
       "components": {"securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}}},
       "security": [{"bearerAuth": []}],
       "paths": {"/pets": {"get": {"operationId": "listPets", "summary": "List the pets",
                                   "responses": {"200": {"description": "the pets"}}}}}}
# The published initializer loads the public Petstore: this one loads the API above, from the same server.
LOCAL_API = Bug("swagger-initializer.js", 'url: "https://petstore.swagger.io/v2/swagger.json"',
                'url: "/openapi.json"', (), "the API description served here")


@pytest.fixture(scope="module")
def swagger(tmp_path_factory):
    root = tmp_path_factory.mktemp("swagger")
    shutil.copytree(require(SWAGGER_UI), root, dirs_exist_ok=True)
    (root / "openapi.json").write_text(json.dumps(API))
    (root / "pets").write_text('[{"name": "Rex"}]')
    with TodoMvcServer(root=root, patches=(LOCAL_API,)) as served:
        yield served


def flow(swagger, expected_token: str) -> dict:
    return {"start_url": f"{swagger.origin}/index.html", "secrets": {"token": TOKEN, "expected": expected_token},
            "steps": [
                {"action": "click", "selector": ".auth-wrapper button.authorize"},
                {"action": "fill", "selector": ".modal-ux input", "value": "{{token}}"},
                {"action": "click", "selector": ".modal-ux button.authorize"},
                {"action": "click", "selector": ".modal-ux button.btn-done"},
                {"action": "click", "selector": ".opblock-summary-control"},
                {"action": "click", "selector": ".try-out__btn"},
                {"action": "click", "selector": "button.execute"},
                {"action": "wait_for_request", "timeout_ms": 5000, "request": {
                    "url_matches": "/pets$", "method": "GET", "status": 200,
                    "headers": {"Authorization": "Bearer {{expected}}"}}},
            ]}


@pytest.mark.x11
def test_the_bearer_token_the_app_sent_is_checked_and_never_shown(vision_api, swagger):
    r = vision_api.post(f"{QA}/verify_user_flow", json=flow(swagger, TOKEN), timeout=180)
    assert r.status_code == 200 and r.json()["success"], r.text
    sent = r.json()["steps"][-1]["detail"]["request"]
    assert sent["url"] == f"{swagger.origin}/pets" and "authorization: Bearer [REDACTED]" in sent["headers"], sent
    assert "/openapi.json" in swagger.hits and "/swagger-ui-bundle.js" in swagger.hits  # the real app ran

    r = vision_api.post(f"{QA}/verify_user_flow", json=flow(swagger, "another-token"), timeout=180)
    assert r.status_code == 200 and not r.json()["success"], r.text
    assert r.json()["failure_step"] == 8
    assert "header authorization: sent 'Bearer [REDACTED]'" in r.json()["failure_reason"], r.text
    run = vision_api.get(f"/api/v1/qa/runs/{r.json()['test_run_id']}").text
    assert TOKEN not in r.text + run and "another-token" not in r.text + run

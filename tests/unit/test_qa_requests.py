"""A flow's request checks judged on recorded requests (vision.qa.requests), without a browser."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from desktop.browser.record import BODY_LIMIT, request_detail
from vision.models.qa import FlowStep, RequestCheck
from vision.qa.requests import at_path, body_values, first_match, problems, shown, shown_header

SYNC = {"seq": 7, "method": "POST", "url": "http://127.0.0.1:8000/api/sync?x=1", "status": 204, "failure": None}
DETAIL = {"headers": {"authorization": "Bearer s3cret", "content-type": "application/json"},
          "body": '{"user": {"name": "ada", "roles": ["admin", "dev"]}, "n": 2}'}


def test_the_first_request_not_yet_taken_whose_url_and_method_match_is_the_one():
    entries = [{"seq": 5, "method": "GET", "url": "http://h/api/sync"}, SYNC, SYNC | {"seq": 9}]
    check = RequestCheck(url_matches="/api/sync", method="post")
    assert first_match(check, entries, set())["seq"] == 7
    assert first_match(check, entries, {7})["seq"] == 9
    assert first_match(check, entries, {7, 9}) is None
    assert first_match(RequestCheck(url_matches="/api/sync$"), entries, set())["seq"] == 5  # any method; $ ends it


def test_every_difference_is_said_and_no_secret_is():
    check = RequestCheck(url_matches="sync", status=200, headers={"Authorization": "Bearer {{tok}}", "X-Mode": "fast"},
                         body={"user.name": "bob", "user.roles.1": "dev", "user.roles.5": "x", "n": 2})
    said = problems(check, SYNC, DETAIL, {"tok": "other"})
    assert said == ["status 200 expected; answered 204",
                    "header authorization: sent 'Bearer [REDACTED]'",
                    "header x-mode: not sent",
                    'body user.name: "ada", expected "bob"',
                    "body user.roles.5: not in the body"]
    assert "s3cret" not in str(said) and "other" not in str(said)
    holds = RequestCheck(url_matches="sync", status=204, headers={"authorization": "Bearer {{tok}}"},
                         body={"user.roles.0": "admin"})
    assert problems(holds, SYNC, DETAIL, {"tok": "s3cret"}) == []
    assert problems(holds, SYNC | {"status": None, "failure": "net::ERR_FAILED"}, DETAIL, {"tok": "s3cret"}) == [
        "status 204 expected; no answer (net::ERR_FAILED)"]
    assert "no longer kept" in problems(holds, SYNC, None, {"tok": "s3cret"})[0]


def test_a_plain_header_says_both_values_and_a_form_body_is_read_as_fields():
    check = RequestCheck(url_matches="token", headers={"content-type": "text/plain"}, body={"grant_type": "password"})
    detail = {"headers": {"content-type": "application/x-www-form-urlencoded"},
              "body": "grant_type=client_credentials&scope="}
    assert problems(check, SYNC, detail, {}) == [
        "header content-type: sent 'application/x-www-form-urlencoded', expected 'text/plain'",
        'body grant_type: "client_credentials", expected "password"']
    assert body_values("scope=&a=1", "application/x-www-form-urlencoded") == {"scope": "", "a": "1"}
    assert body_values("not json", "text/plain") is None and at_path(None, "a") is not None


def test_evidence_shows_a_credential_by_its_scheme_only():
    assert shown_header("Authorization", "Bearer abc") == "Bearer [REDACTED]"
    assert shown_header("cookie", "sid=abc") == "[REDACTED]"
    assert shown_header("accept", "*/*") == "*/*"
    assert shown(SYNC, DETAIL)["headers"] == ["authorization: Bearer [REDACTED]", "content-type: application/json"]


def test_what_is_read_of_a_request_is_bounded():
    kept = request_detail({"Authorization": "Bearer x", "X-Big": "v" * 20_000}, "b" * (BODY_LIMIT + 5))
    assert kept["headers"]["authorization"] == "Bearer x" and len(kept["headers"]["x-big"]) < 8_000
    assert len(kept["body"]) == BODY_LIMIT and request_detail({}, None) == {"headers": {}, "body": None}


def test_a_request_step_validates():
    step = FlowStep.model_validate({"action": "wait_for_request", "request": {"url_matches": "/api/sync$",
                                                                              "method": "POST", "status": 204}})
    assert step.heading() == "wait for a POST request to //api/sync$/ answered 204"
    for bad, says in (({"action": "wait_for_request"}, "wait_for_request needs `request`"),
                      ({"action": "wait_for_request", "request": {"url_matches": "("}}, "not a regular expression"),
                      ({"action": "click", "selector": "a", "request": {"url_matches": "a"}},
                       "request: only with action wait_for_request")):
        with pytest.raises(ValidationError, match=says):
            FlowStep.model_validate(bad)

"""The remote path's pure parts: backend choice, typed errors back from a session server, frames
from its PNGs, and the call route's encoding of arguments and answers."""

from __future__ import annotations

import io
import sys

import pytest
from PIL import Image

from desktop.errors import (
    ElementNotFound,
    GlassdeskError,
    InvalidAction,
    InvalidRequest,
    SessionBusy,
    SessionExists,
    SessionLimit,
    SessionNotFound,
    SessionUnavailable,
)
from desktop.models import Target
from desktop.ops import forwarded, of_service
from desktop.remote import calls
from desktop.remote.backends import create_backend
from desktop.remote.backends.base import labels
from desktop.remote.backends.manager import BackendSessions
from desktop.remote.desktop import RemoteDesktop, decode_error, frame_from_png
from desktop.service import desktop_service_class
from desktop.service.desktop import DesktopService
from desktop.service.page import PageService
from desktop.service.remote import RemotePages


def test_local_is_the_embedded_default_and_unknown_backends_are_refused():
    assert create_backend("local") is None
    with pytest.raises(InvalidRequest, match="use one of local, docker, kubernetes"):
        create_backend("podman")


def test_kubernetes_without_its_client_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "kubernetes", None)  # `import kubernetes` raises ImportError
    with pytest.raises(InvalidRequest, match="the kubernetes client is missing; pip install"):
        create_backend("kubernetes")


class _RecordingBackend:
    """A backend that only records what it is asked to start (nothing runs)."""
    name = "recording"

    def __init__(self):
        self.started: list[str] = []

    def owned(self) -> list[str]:
        return []

    def start(self, spec) -> str:
        self.started.append(spec.session_id)
        raise SessionUnavailable("this backend starts nothing")


def test_remote_registries_refuse_ids_as_local_ones_do_and_start_nothing():
    manager = BackendSessions(_RecordingBackend(), max_sessions=2, supervise_every_s=3600)
    try:
        manager.sessions["taken"] = RemoteDesktop("taken", handle="h", backend="recording")
        with pytest.raises(SessionExists, match="'taken' already exists") as exists:
            manager.create("taken")
        assert exists.value.code == "session_exists" and exists.value.status == 409
        with pytest.raises(InvalidAction, match="id: use 1-32 lower-case"):
            manager.create("Not An Id")
        manager.sessions["other"] = RemoteDesktop("other", handle="h2", backend="recording")
        with pytest.raises(SessionLimit):
            manager.create("third")
        assert manager.backend.started == [] and sorted(manager.sessions) == ["other", "taken"]
        with pytest.raises(SessionNotFound):
            manager.get("third")
    finally:
        manager._stop.set()


def test_a_session_manager_gets_the_local_service():
    class NotABackendManager:
        pass

    assert desktop_service_class(NotABackendManager()) is DesktopService


def test_labels_name_the_session_and_its_owner():
    assert labels("s1", "host-8080") == {"app.kubernetes.io/name": "glassdesk", "glassdesk.dev/role": "session",
                                         "glassdesk.dev/session": "s1", "glassdesk.dev/owner": "host-8080"}


def test_an_error_answer_comes_back_as_the_same_typed_error():
    exc = decode_error(409, {"error": {"code": "session_busy", "message": "busy with a click"}}, "3")
    assert type(exc) is SessionBusy and exc.message == "busy with a click" and exc.retry_after == 3
    assert type(decode_error(404, {"error": {"code": "element_not_found", "message": "no"}})) is ElementNotFound


def test_an_unknown_code_keeps_its_code_and_status_and_a_bodyless_answer_is_unavailable():
    exc = decode_error(418, {"error": {"code": "teapot", "message": "short and stout"}})
    assert type(exc) is GlassdeskError and (exc.code, exc.status) == ("teapot", 418)
    assert isinstance(decode_error(502, "<html>bad gateway</html>"), SessionUnavailable)


def test_a_frame_from_a_png_has_its_pixels_and_keeps_the_png():
    image = Image.new("RGB", (4, 2), (10, 20, 30))
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    frame = frame_from_png(buffer.getvalue())
    assert (frame.width, frame.height) == (4, 2)
    assert frame.bgra[:3] == bytes([30, 20, 10])  # BGRX, the layout of a capture
    assert frame.png == buffer.getvalue()  # never encoded again


def test_call_arguments_and_answers_round_trip_by_the_methods_own_types():
    wire = calls.encode_args(PageService, "click", (Target(selector="#go"),), {"button": "right"})
    assert wire["button"] == "right" and wire["target"]["selector"] == "#go"
    assert {k for k, v in wire["target"].items() if v not in (None, False)} == {"selector"}
    assert calls.decode_args(PageService, "click", wire)["target"] == Target(selector="#go")
    assert calls.decode_result(PageService, "screenshot", calls.encode_result(PageService, "screenshot", b"\x89PNG")) \
        == b"\x89PNG"
    assert calls.decode_result(PageService, "cursors", [3, 4]) == (3, 4)


def test_a_call_with_an_unknown_argument_is_refused():
    with pytest.raises(InvalidRequest, match="unknown argument"):
        calls.decode_args(PageService, "state", {"evil": 1})


def test_every_operation_of_the_catalogue_is_a_method_with_types_to_encode_by():
    for name in of_service("pages"):
        calls.signature(PageService, name)
    for name in forwarded("desktop"):
        calls.signature(DesktopService, name)
    assert "download_path" not in of_service("pages")  # a path on the session server's disk
    # An input goes to its REST route, whose answer brings the settled screen: never the call route.
    assert {"perform", "open", "launch"} <= set(of_service("desktop")) and not {"perform", "open", "launch"} & set(
        forwarded("desktop")) and "cursor" in forwarded("desktop")


def test_the_remote_pages_forward_every_page_operation_and_guard_those_that_act():
    """What a control plane may forward and what it refuses while a person or a run holds the
    session both come from the catalogue's declarations, not from lists kept beside them."""
    acting = {name for name, op in of_service("pages").items() if op.acts}
    assert acting == {"navigate", "new_tab", "activate_tab", "close_tab", "handle_dialog", "evaluate", "click", "hover",
                      "check", "drag", "press", "fill", "select", "upload", "clear_state", "show_targets", "type_text",
                      "blur"}
    for name in of_service("pages"):
        assert callable(getattr(RemotePages, name)), name

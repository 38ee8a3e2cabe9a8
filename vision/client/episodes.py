"""The evaluation's port (vision.eval.episodes.Episodes) over glassdesk's REST API, through this
client: a session per episode, the setup and the check as QA flows, the run as vision/act."""

from __future__ import annotations

from typing import Any

import httpx2

from vision.client.errors import ApiError
from vision.eval.episodes import FlowEpisodes
from vision.models import ActResult


class ClientEpisodes(FlowEpisodes):
    """Episodes over the REST API, through a GlassdeskClient."""

    # The server answering an error, or not answering at all: an environment's fault.
    UNREACHABLE = (ApiError, httpx2.HTTPError)

    def __init__(self, client: Any):
        self.client = client

    def _create(self, state: str | None) -> str:
        return self.client.create_session(**({"state": state} if state else {})).id

    def _delete(self, session_id: str) -> None:
        self.client.session(session_id).delete()

    def _recycle(self, session_id: str, how: str) -> None:
        session = self.client.session(session_id)
        if how == "reset":
            session.reset()
        else:
            session.page.clear_state()

    def _flow(self, session_id: str, body: dict[str, Any]) -> Any:
        return self.client.session(session_id).qa.verify_user_flow(**body)

    def _navigate(self, session_id: str, url: str, settle: bool) -> None:
        self.client.session(session_id).page.navigate(url=url, settle=settle)

    def _click(self, session_id: str, selector: str, glide: bool) -> None:
        self.client.session(session_id).page.click(selector=selector, glide=glide)

    def _text(self, session_id: str, selector: str) -> str:
        return str(self.client.session(session_id).page.content(format="text", selector=selector).content)

    def _act(self, session_id: str, request: dict[str, Any]) -> ActResult:
        return self.client.session(session_id).act(**request)

    def _locate(self, session_id: str, target: dict[str, Any]) -> dict[str, Any]:
        return self.client.session(session_id).page.locate(**target).model_dump()

"""The two transports: a blocking and an async client over the same routes (vision.client.routes).

Each only sends a ``Call`` and reads the answer; which route, which body and which type the answer
is were decided once, in the routes. httpx2 is the HTTP stack glassdesk and the model SDKs already
use, so the client adds no dependency.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from typing import Any

import httpx2

from vision.client.calls import Call, SseDecoder
from vision.client.errors import error_from_response
from vision.client.routes import Routes
from vision.settings import default_server

__all__ = ["AsyncGlassdeskClient", "GlassdeskClient"]

# A vision run or a QA flow may take minutes: the read timeout is the run's, not a request's.
DEFAULT_TIMEOUT = httpx2.Timeout(600.0, connect=10.0)


def _base_url(base_url: str | None) -> str:
    """The server: the argument, else as `glassdesk act` finds it (vision.settings.default_server)."""
    return (base_url or default_server(os.environ)).rstrip("/")


def _headers(token: str | None) -> dict[str, str]:
    token = token if token is not None else os.environ.get("GLASSDESK_TOKEN")
    return {"authorization": f"Bearer {token}"} if token else {}


def _request(call: Call) -> dict[str, Any]:
    return {"params": call.params, "json": call.json, "headers": call.headers}


def _check(response: httpx2.Response) -> httpx2.Response:
    if response.status_code >= 400:
        raise error_from_response(response.status_code, dict(response.headers), response.content)
    return response


class GlassdeskClient(Routes):
    """The glassdesk API, blocking. ``GlassdeskClient()`` talks to GLASSDESK_URL (or
    127.0.0.1:GLASSDESK_PORT, or :8080) with GLASSDESK_TOKEN when set; errors raise ``ApiError``.

        with GlassdeskClient() as gd:
            desk = gd.session()
            desk.click(200, 300)
    """

    def __init__(self, base_url: str | None = None, *, token: str | None = None,
                 timeout: httpx2.Timeout | float = DEFAULT_TIMEOUT, http_client: httpx2.Client | None = None):
        self.base_url = _base_url(base_url)
        self._http = http_client or httpx2.Client(base_url=self.base_url, headers=_headers(token), timeout=timeout)

    def _send(self, call: Call):
        return call.read(_check(self._http.request(call.method, call.path, **_request(call))))

    def _stream(self, call: Call, event: Callable[[str, str], Any]) -> Iterator[Any]:
        with self._http.stream(call.method, call.path, **_request(call)) as response:
            if response.status_code >= 400:
                response.read()
                _check(response)
            for kind, data in SseDecoder().decode(response.iter_lines()):
                yield event(kind, data)

    def _drive(self, plan: Generator[Call, Any, Any]):
        """Run a plan (a generator that yields Calls and is sent their answers) to its result."""
        try:
            call = next(plan)
            while True:
                call = plan.send(self._send(call))
        except StopIteration as done:
            return done.value

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> GlassdeskClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AsyncGlassdeskClient(Routes):
    """The same API for asyncio: every route method returns an awaitable of the same typed answer
    (``await desk.click(200, 300)``), and ``act_stream`` an async iterator."""

    def __init__(self, base_url: str | None = None, *, token: str | None = None,
                 timeout: httpx2.Timeout | float = DEFAULT_TIMEOUT, http_client: httpx2.AsyncClient | None = None):
        self.base_url = _base_url(base_url)
        self._http = http_client or httpx2.AsyncClient(base_url=self.base_url, headers=_headers(token),
                                                       timeout=timeout)

    async def _send(self, call: Call):
        return call.read(_check(await self._http.request(call.method, call.path, **_request(call))))

    async def _stream(self, call: Call, event: Callable[[str, str], Any]) -> AsyncIterator[Any]:
        async with self._http.stream(call.method, call.path, **_request(call)) as response:
            if response.status_code >= 400:
                await response.aread()
                _check(response)
            decoder = SseDecoder()
            async for line in response.aiter_lines():
                message = decoder.feed(line)
                if message is not None:
                    yield event(*message)
            end = decoder.feed("")  # a stream cut without its blank line still delivers its last message
            if end is not None:
                yield event(*end)

    async def _drive(self, plan: Generator[Call, Any, Any]):
        try:
            call = next(plan)
            while True:
                call = plan.send(await self._send(call))
        except StopIteration as done:
            return done.value

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncGlassdeskClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

"""An oversized body is refused with 413 body_too_large before anything parses it (no X needed)."""

from __future__ import annotations

import httpx2
from fastapi import FastAPI, Request

from tests.conftest import LiveServer
from vision.http.limits import BodyLimit


def make_app(seen: list[int]) -> FastAPI:
    app = FastAPI()

    @app.post("/echo")
    async def echo(request: Request) -> dict:
        body = await request.body()
        seen.append(len(body))
        return {"bytes": len(body)}

    app.add_middleware(BodyLimit, max_bytes=1000)
    return app


def test_a_declared_or_streamed_body_over_the_limit_is_413_and_never_reaches_the_route():
    seen: list[int] = []
    with LiveServer(make_app(seen)) as server, httpx2.Client(base_url=server.url) as client:
        assert client.post("/echo", content=b"x" * 1000).json() == {"bytes": 1000}
        declared = client.post("/echo", content=b"x" * 5000)
        assert declared.status_code == 413 and declared.json()["error"]["code"] == "body_too_large"

        def chunks():  # no Content-Length: chunked transfer, the limit is found while reading
            for _ in range(10):
                yield b"y" * 500

        streamed = client.post("/echo", content=chunks())
        assert streamed.status_code == 413 and streamed.json()["error"]["code"] == "body_too_large"
    assert seen == [1000]

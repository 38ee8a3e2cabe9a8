"""The MCP server through the SDK's own client, in memory: a call and what its answer holds."""

from __future__ import annotations

import base64
import io

import anyio
from mcp import Client
from mcp.types import ImageContent, TextContent
from PIL import Image


def run(server, fn):
    """Open a client on the server in memory, run ``fn(client)``, return its result."""
    async def main():
        async with Client(server) as client:
            return await fn(client)
    return anyio.run(main)


def call(server, name, arguments=None, **options):
    return run(server, lambda client: client.call_tool(name, arguments or {}, **options))


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


def image_of(result) -> Image.Image:
    images = [c for c in result.content if isinstance(c, ImageContent)]
    assert len(images) == 1, result.content
    assert images[0].mime_type == "image/png"
    return Image.open(io.BytesIO(base64.b64decode(images[0].data)))

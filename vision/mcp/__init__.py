"""The MCP server: tools that drive the VISIBLE desktop, over stdio and streamable HTTP.

An agent picks its tool from the catalog's wording, so every description opens with where the tool
acts, in a few words ("Acts on the VISIBLE desktop."); the server's instructions say once what that is:
the XFCE desktop a person watches live in noVNC. Which tools are listed is the profile's choice
(``profiles``: core, desktop, page, qa, all) less what the server's settings turn off.

One server definition is served two ways: ``glassdesk mcp`` (stdio, its own session manager, see
``stdio.run_stdio``) and ``/mcp`` on the API server (``server.mount_http``,
behind the same bearer token as the REST routes).

- ``tools``   the catalogue: each tool's name, wording and one call into the application service
- ``profiles`` which tools a profile lists (pure), and the schemas' compaction
- ``server``  error shaping (glassdesk's typed errors as tool errors), strict arguments (one a tool
              does not name is refused before anything runs), the notice of a re-started default
              session, and mounting at /mcp
- ``stdio``   ``glassdesk mcp``: serving over stdin/stdout, signals, cleanup

Images: every screenshot a tool returns is a full-resolution 1920x1080 PNG unless the caller asks
for ``scale`` or a ``region``. Coordinates the tools take are ALWAYS display pixels of the whole
1920x1080 screen, so with the full image one image pixel is one display pixel and the agent never
converts. That costs more tokens than a downscaled image would (a client may still downscale it for
its model); the agent can pass ``screenshot=false`` to an action, or ask ``desktop_screenshot`` for a
``scale``d, cropped or JPEG/WebP image, and the answer that comes with it says how to convert.
"""

from vision.mcp.server import GlassdeskMCP, build_server, error_message, mount_http

# Not ``stdio``: it is a door of its own (``glassdesk mcp``) that serves the viewer app, and the app
# mounts this package; re-exporting it here closed a circle.
__all__ = ["GlassdeskMCP", "build_server", "error_message", "mount_http"]

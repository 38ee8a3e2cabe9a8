"""OSWorld's guest contract on a glassdesk session (docs/osworld.md).

OSWorld's harness (``desktop-env`` on PyPI: ``DesktopEnv``, its ``PythonController`` and
``SetupController``, its getters) drives a guest machine through one small HTTP server on the guest
(xlang-ai's osworld-server): a screenshot, a command or pyautogui code run there, a file read or
written, the accessibility tree. Here a session serves the same requests and answers on a loopback
port of its own (``guest``: what each request does, always inside the session's isolation;
``server``: the routes and their per-session servers).
"""

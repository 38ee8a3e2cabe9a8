"""OSWorld's harness on glassdesk sessions: a provider for ``DesktopEnv`` (desktop-env on PyPI).

    from vision.client import GlassdeskClient
    from vision.client.osworld import osworld_env

    with GlassdeskClient("http://127.0.0.1:8080") as gd:
        env = osworld_env(gd, action_space="pyautogui")
        obs = env.reset(task_config=task)          # a task in OSWorld's JSON shape
        obs, reward, done, info = env.step("pyautogui.click(960, 540)")
        score = env.evaluate()
        env.close()

A guest VM is a glassdesk session; its guest server is the session's OSWorld guest contract
(desktop.osworld: ``POST /api/v1/sessions/{id}/osworld``). ``DesktopEnv`` picks its provider from a
fixed list by name, so ``osworld_env`` builds it with this provider in the place of the one the name
would pick, and with the cloud providers' habits ("docker": a fresh guest needs no revert; one a
task's setup used is reverted before the next task). Reverting is a new session of the same name,
from the saved state named by ``snapshot_name`` if there is one (a warm pool makes it quick).

The harness must run on the glassdesk host: the guest server listens on loopback only.
"""

from __future__ import annotations

import secrets
from contextlib import contextmanager
from typing import Any

from desktop_env.providers.base import Provider, VMManager

from vision.client.errors import ApiError

SNAPSHOT = "init_state"  # DesktopEnv's default snapshot name


class GlassdeskProvider(Provider):
    """``DesktopEnv``'s provider over a glassdesk server: a VM is a session, named by ``path_to_vm``."""

    def __init__(self, client, region: str | None = None):
        super().__init__(region)
        self.client = client

    def start_emulator(self, path_to_vm: str, headless: bool = True, os_type: str = "Ubuntu") -> None:
        if path_to_vm not in {info.id for info in self.client.sessions()}:
            self.client.create_session(id=path_to_vm, **self._state(SNAPSHOT))

    def get_ip_address(self, path_to_vm: str) -> str:
        """``host:server port:chromium port:vnc port:vlc port``, as DesktopEnv reads it: the guest
        server's port and the browser's DevTools (0 where the server does not relay them: the
        guest's ``problems`` say why); VNC and VLC are 0 (the live view is glassdesk's own)."""
        guest = self.client.session(path_to_vm).osworld_guest()
        return f"{guest.host}:{guest.port}:{guest.devtools_port}:0:0"

    def save_state(self, path_to_vm: str, snapshot_name: str) -> None:
        """The session's browser state (cookies, local storage) kept under ``snapshot_name``."""
        self.client.session(path_to_vm).save_state(snapshot_name)

    def revert_to_snapshot(self, path_to_vm: str, snapshot_name: str) -> str:
        """A new session in the old one's place: from the saved state ``snapshot_name`` when there is
        one, else a clean desktop (OSWorld's init_state). Everything the task left is gone with it."""
        self.stop_emulator(path_to_vm)
        self.client.create_session(id=path_to_vm, **self._state(snapshot_name))
        return path_to_vm

    def stop_emulator(self, path_to_vm: str, region: str | None = None, *args, **kwargs) -> None:
        """The session deleted; one already gone is what was asked."""
        try:
            self.client.session(path_to_vm).delete()
        except ApiError as exc:
            if exc.status != 404:
                raise

    def _state(self, name: str) -> dict[str, Any]:
        return {"state": name} if name in {state.name for state in self.client.states()} else {}


class GlassdeskVMManager(VMManager):
    """No registry to keep: a glassdesk server knows its sessions. A new VM is a new session name."""

    def initialize_registry(self, **kwargs) -> None:
        pass

    def add_vm(self, vm_path, **kwargs) -> None:
        pass

    def delete_vm(self, vm_path, **kwargs) -> None:
        pass

    def occupy_vm(self, vm_path, pid, **kwargs) -> None:
        pass

    def list_free_vms(self, **kwargs) -> list:
        return []

    def check_and_clean(self, **kwargs) -> None:
        pass

    def get_vm_path(self, **kwargs) -> str:
        return f"osworld-{secrets.token_hex(4)}"


@contextmanager
def _provider_in_place(manager: VMManager, provider: Provider):
    """DesktopEnv's factory answering with this provider while one DesktopEnv is made."""
    import desktop_env.desktop_env as module

    original = module.create_vm_manager_and_provider
    module.create_vm_manager_and_provider = lambda *args, **kwargs: (manager, provider)
    try:
        yield
    finally:
        module.create_vm_manager_and_provider = original


def osworld_env(client, *, session: str | None = None, **kwargs):
    """A ``DesktopEnv`` whose guest is a glassdesk session (``session``: its name; a new one by
    default). ``kwargs`` are DesktopEnv's own (action_space, require_a11y_tree, cache_dir...)."""
    from desktop_env.desktop_env import DesktopEnv

    provider = GlassdeskProvider(client)
    with _provider_in_place(GlassdeskVMManager(), provider):
        return DesktopEnv(provider_name="docker", path_to_vm=session, **kwargs)

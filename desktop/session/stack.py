"""The processes of one visible desktop: start order, readiness polling, supervision, teardown.

Order: Xvfb -> dbus -> XFCE -> Chromium -> x11vnc. Each step waits for a real readiness signal,
never a fixed sleep. Every process gets its own process group and an environment tag, so teardown
can find and end everything the session started, including the daemons XFCE and dbus fork off.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH
from desktop.browser.chromium import (
    DEVTOOLS_PORT,
    Browser,
    BrowserError,
    devtools_args,
    disable_features_switch,
    enable_features_switch,
    fence_preferences,
)
from desktop.browser.pages import PageRecord
from desktop.errors import StackError
from desktop.network import netns
from desktop.network.policy import NetworkPolicy, proxy_environment
from desktop.network.policy import chromium_args as network_args
from desktop.network.proxy import PolicyProxy
from desktop.x11 import cgroup
from desktop.x11.procs import OWNER_VAR, kill_group, pids_with_env, session_pids, this_process
from desktop.x11.user import (
    DesktopUser,
    desktop_users,
    ensure_x11_socket_dir,
    hand_over,
    isolation_problems,
    kill_all,
    remove_stale_ice_sockets,
    run_as_argv,
    share_traversal,
    unreachable_dir,
)
from desktop.x11.xauth import entries_for, new_cookie, server_authority, write_new

log = logging.getLogger("glassdesk.stack")

ASSETS = Path(__file__).parent.parent / "assets"
NOVNC_DIRS = (Path("/usr/share/novnc"), Path("/usr/share/webapps/novnc"))
TAG_VAR = "GLASSDESK_SESSION_TAG"
# Autostart entries that would add noise or dialogs to the desktop the model sees.
HIDDEN_AUTOSTART = ("xscreensaver", "light-locker", "xfce4-screensaver", "xfce4-power-manager",
                    "at-spi-dbus-bus", "xdg-user-dirs", "nm-applet", "blueman", "update-notifier",
                    "polkit-gnome-authentication-agent-1", "xfce4-notifyd")


# The desktop's backdrop: the plain colour of assets/xfce4-desktop.xml, painted on the root window
# (xsetroot) rather than by xfdesktop, which the session does not start (assets/xfce4-session.xml).
BACKDROP = "#2b384b"


# A whole-desktop restart that fails (a part killed again while it comes up, a slow start) is tried
# again after these pauses, then given up: the session is then failed with the reason, and a reset
# rebuilds it (desktop.session.manager.Session.reset).
RESTART_BACKOFF_S = (0.5, 1.0, 2.0)


# XFCE restarts a window manager that dies, but gives up after a few quick crashes (five, 1 s apart,
# with xfce4-session 4.18), leaving windows without a manager while the session looked ready. Once
# none has been seen for this long, the supervisor starts one itself (DesktopStack.check_window_manager).
WM_GRACE_S = 2.0
WINDOW_MANAGER = "xfwm4"


# The parts only the live view needs. Screenshots and input do not pass through them, so their
# death is healed without taking the session out of "ready" (desktop.session.manager.Session.heal).
VIEWER_PARTS = frozenset({"x11vnc"})


_LAYOUT: list[cgroup.Layout | None] = []  # detected once per process


def cgroup_layout() -> cgroup.Layout | None:
    """Where this server's sessions get their cgroups (desktop.x11.cgroup), None where it cannot."""
    if not _LAYOUT:
        _LAYOUT.append(cgroup.detect())
    return _LAYOUT[0]


def isolation() -> dict:
    """How this server keeps sessions apart, and what it cannot do here: for its start-up log and
    /healthz (docs/isolation.md). ``degraded`` lists each missing fence and how to get it."""
    layout = cgroup_layout()
    problems = isolation_problems()
    if os.geteuid() != 0:
        users = "server user"
    else:
        users = "per session" if desktop_users.accounts() else "shared"
    problem = cgroup.cgroup_problem(layout)
    network = netns.support()  # None: a network namespace per session (desktop.network.netns)
    return {"desktop_users": users, "cgroups": f"v{layout.version}" if layout else "none",
            "network": "browser_only" if network else "namespace",
            "degraded": [*problems, *([problem] if problem else []),
                         *([f"network: {network}; only Chromium is behind each session's network policy, other "
                            "programs on the desktop reach the network directly"] if network else [])]}


_REPORTED: list[bool] = []


def report_isolation() -> dict:
    """Log, once per process, what ``isolation()`` finds degraded; returns it."""
    found = isolation()
    if not _REPORTED:
        _REPORTED.append(True)
        for problem in found["degraded"]:
            log.warning("session isolation degraded: %s", problem)
    return found


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _tcp_banner(port: int, greeting_s: float = 5) -> bytes:
    """What a server on loopback ``port`` says first, its greeting waited for patiently. CI saw a
    listening x11vnc leave 1-second probes unanswered for 30 s on a loaded machine: each probe that
    gives up hands its single-threaded loop one more client to set up and drop."""
    with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
        sock.settimeout(greeting_s)
        return sock.recv(12)



def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def novnc_dir() -> Path:
    for path in NOVNC_DIRS:
        if (path / "vnc.html").exists():
            return path
    raise StackError("noVNC web client not found (install Debian's novnc package: docker/install-system-deps.sh)")


@dataclass
class Child:
    """One supervised process."""

    name: str
    popen: subprocess.Popen  # or, for Chromium, a desktop.browser.chromium.BrowserProcess
    log_path: Path
    restarts: int = 0

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None


def _pid_running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def tagged_pids(tag: str) -> list[int]:
    """Every live process whose environment carries this session's tag."""
    return pids_with_env(TAG_VAR, tag)


# What a desktop process may inherit from the server, by name: locale, time zone, the search path,
# who it runs as, and the one glassdesk variable a desktop process needs: the owner's mark
# (desktop.x11.procs.OWNER_VAR), by which the reaper finds it after a kill -9. The session's tag
# (TAG_VAR) is set by DesktopStack.env itself. No GLASSDESK_* by prefix: the server's own settings
# (GLASSDESK_SECRET_<NAME>, GLASSDESK_TOKEN, the backends' GLASSDESK_K8S_*, ...) are not the
# desktop's, and whatever is here can be read on the visible desktop. The server's switches are read
# by the server from its own environment (the pointer glide: desktop.x11.input.Executor).
INHERITED = frozenset({"PATH", "LANG", "LANGUAGE", "TZ", "USER", "LOGNAME", "SHELL", "TMPDIR", OWNER_VAR})


def desktop_environment(server_env: Mapping[str, str]) -> dict[str, str]:
    """The part of the server's environment a desktop process gets (pure)."""
    return {k: v for k, v in server_env.items() if k in INHERITED or k.startswith("LC_")}


@dataclass
class StackConfig:
    start_url: str = "about:blank"
    start_timeout: float = 30.0
    # The browser's own fences (desktop.browser.chromium.fence_preferences): may it open this
    # machine's pages (--allow-local-urls), may DevTools and typed javascript: run code in a page
    # (--allow-evaluate). Off unless the server is started so.
    local_pages: bool = False
    page_code: bool = False
    # Chromium's own controls (its toolbar, address bar, tabs, dialogs) on the accessibility bus, for
    # the desktop tree, native targets and set-of-marks (--browser-accessibility). Off by default: the
    # switch that exposes them also keeps the accessibility tree of every page, and on a page of 6,000
    # elements that made a load 1.2-3.4x and typing 1.6-2.3x as slow (docs/desktop-tree.md, measured).
    browser_accessibility: bool = False
    # The session's cgroup's limits (desktop.x11.cgroup): `glassdesk up --session-memory/--session-cpus`.
    limits: cgroup.Limits = field(default_factory=cgroup.Limits)
    # A network namespace per session, whose only way out is the session's policy proxy
    # (desktop.network.netns), whenever the server can make one (root); off only for tests that
    # need the old arrangement.
    network_namespace: bool = True


@dataclass
class DesktopStack:
    """One session's processes. ``start()`` brings them up; ``heal()`` restarts what died."""

    workdir: Path
    config: StackConfig = field(default_factory=StackConfig)
    tag: str = field(default_factory=lambda: secrets.token_hex(8))
    display: str = ""
    vnc_port: int = 0
    vnc_password: str = field(default_factory=lambda: secrets.token_urlsafe(6)[:8])
    view_password: str = field(default_factory=lambda: secrets.token_urlsafe(6)[:8])
    children: dict[str, Child] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)
    # Restarts by heal(): one per part restarted on its own, one per whole-desktop restart.
    restarts: int = 0
    # The parts the last heal() found dead and restarted: looked at under its lock, so what a
    # caller saw dead a moment before may be fewer (Chromium gone before the Xvfb it died with).
    last_healed: list[str] = field(default_factory=list)
    # The browser's network policy, and the ports it may never reach (read at each request):
    # desktop.network.policy, enforced by this session's desktop.network.proxy.
    network: NetworkPolicy = field(default_factory=NetworkPolicy)
    control_ports: Callable[[], Collection[int]] = frozenset
    # time.monotonic() when start() last brought it up (0: never): how a session claimed from the
    # warm pool (desktop.session.manager) shows it was up before it was asked for.
    started_at: float = 0.0

    def __post_init__(self):
        self.workdir = Path(self.workdir)
        self.home = self.workdir / "home"
        self.logs = self.workdir / "logs"
        self.profile = self.workdir / "chromium-profile"
        self.downloads = self.workdir / "downloads"
        # The page layer's copies of finished downloads, which it hashes and serves: the server's own
        # (0700), so the desktop user can neither read them nor put a link to another file there.
        self.downloaded = self.workdir / "downloaded"
        # The display's authority file (desktop.x11.xauth): its cookie, the desktop user's, 0600.
        self.xauthority = self.workdir / "xauthority"
        self._cookie = b""
        self.browser: Browser | None = None
        self.proxy: PolicyProxy | None = None
        # The session's network namespace (desktop.network.netns), made with the proxy and kept as
        # long: every desktop process but Xvfb runs in it. None when the server cannot make one.
        self.namespace: netns.SessionNamespace | None = None
        self.record = PageRecord()  # console, network, dialogs, downloads: across browser heals
        self._dbus_address = ""
        self._lock = threading.RLock()
        # Who the desktop runs as (desktop/x11/user.py): None while not started, and when it runs as
        # the server's own user. x11vnc always runs as the server's user.
        self.user: DesktopUser | None = None
        self._claimed = False  # the account is taken once, at the first start, and kept until close()
        self._stuck = False  # a process of the account would not die: keep it out of the pool
        # The session's cgroup (desktop.x11.cgroup): made at the first start, removed by close().
        self.cgroup: cgroup.SessionCgroup | None = None
        # The window manager XFCE started (its pid, found through /proc) and since when none is seen.
        self._wm_pid: int | None = None
        self._wm_missing_since: float | None = None

    # ---------------------------------------------------------------- environment

    def env(self) -> dict[str, str]:
        """The environment every process of this session runs in: an allowlist, never the server's.

        Whatever is in it can be read on the visible desktop (one ``env`` in a terminal puts it in
        the live view, the model's screenshots and the traces), so no API key or token may be.
        """
        env = desktop_environment(os.environ)
        env.update({
            TAG_VAR: self.tag,
            "DISPLAY": self.display,
            "XAUTHORITY": str(self.xauthority),  # no X client connects without the display's cookie
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "XDG_DATA_HOME": str(self.home / ".local/share"),
            "XDG_RUNTIME_DIR": str(self.workdir / "run"),
            "XDG_CURRENT_DESKTOP": "XFCE",
        })
        if self._dbus_address:
            env["DBUS_SESSION_BUS_ADDRESS"] = self._dbus_address
        if self.proxy is not None:
            # Proxy-aware programs (curl, wget, pip...) go through the session's policy. In the
            # session's network namespace nothing else is reachable; without one this is advice.
            env.update(proxy_environment(self.proxy.port))
        if self.user:
            env.update(USER=self.user.name, LOGNAME=self.user.name)
            # Temporary files of the session's own (Chromium's among them), 0700 to its account: in
            # the shared /tmp, names and any file made readable would be another session's to see.
            env["TMPDIR"] = str(self.workdir / "tmp")
        return env

    def _prepare_dirs(self) -> None:
        """The session's directory: the desktop's own parts (home, browser profile, downloads,
        runtime dir) belong to the desktop user; the logs and the VNC passwords stay the server's,
        unreadable by it (the workdir is 0710: it may pass through, not list)."""
        if not self._claimed:  # StackError when root and no account exists; DesktopUsersExhausted
            self.user = desktop_users.claim()
            self._claimed = True
        self.workdir.mkdir(parents=True, exist_ok=True)
        share_traversal(self.workdir, self.user)
        if self.user:
            blocked = unreachable_dir(self.workdir, self.user)
            if blocked:
                raise StackError(f"the desktop user {self.user.name!r} cannot reach {self.workdir}: "
                                 f"{blocked} is closed "
                                 "to it; keep session files under a directory it may pass through (a fresh one in "
                                 "/tmp, the default, is)")
            ensure_x11_socket_dir()
            remove_stale_ice_sockets()
        for own in (self.logs, self.downloaded):
            own.mkdir(exist_ok=True)
            own.chmod(0o700)
        self._make_desktop_dirs()
        # x11vnc: the first password gives control, the one after the marker only a view.
        # Created 0600, never readable for a moment: the desktop user may pass through the workdir.
        passwd = os.open(self.workdir / "vnc.passwd", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(passwd, "w") as fh:
            os.fchmod(fh.fileno(), 0o600)
            fh.write(f"{self.vnc_password}\n__BEGIN_VIEWONLY__\n{self.view_password}\n")

    def _make_desktop_dirs(self) -> None:
        """The desktop's own directories, each made, filled and handed over only when it is new:
        once it is the desktop user's, the server writes nothing where that user could have put links."""
        for path in (self.home, self.profile, self.downloads, self.workdir / "run", self.workdir / "tmp"):
            if path.exists():
                continue
            path.mkdir(mode=0o700)
            if path == self.home:
                self._seed_home()
            if self.user:
                hand_over(path, self.user)

    def _seed_home(self) -> None:
        xfconf = self.home / ".config/xfce4/xfconf/xfce-perchannel-xml"
        xfconf.mkdir(parents=True, exist_ok=True)
        for asset in ASSETS.glob("*.xml"):
            shutil.copy(asset, xfconf / asset.name)
        autostart = self.home / ".config/autostart"
        autostart.mkdir(parents=True, exist_ok=True)
        for name in HIDDEN_AUTOSTART:
            (autostart / f"{name}.desktop").write_text("[Desktop Entry]\nType=Application\nHidden=true\n")

    # The viewer parts run as the server's user: x11vnc reads vnc.passwd and holds both passwords
    # in its memory, which the desktop's account must not reach. It joins the session's cgroup all the same.
    SERVER_SIDE = frozenset({"x11vnc"})

    # Xvfb runs outside the session's network namespace: its clients reach it by its socket file,
    # and x11vnc (the server's, outside) reaches it too (desktop.network.netns).
    OUTSIDE_NAMESPACE = frozenset({"xvfb"}) | SERVER_SIDE

    def run_prefix(self, *, server_side: bool = False, outside_namespace: bool = False) -> list[str]:
        """The argv prefix every program of this session starts through: into the session's cgroup
        (as the server: the desktop user may not move itself), into its network namespace unless
        ``outside_namespace`` or ``server_side`` (nsenter: entering needs root too), then as the
        desktop user unless ``server_side``. Empty when none applies (not root, no cgroups)."""
        namespace = None if server_side or outside_namespace else self.namespace
        return [*(self.cgroup.enter_argv() if self.cgroup else []),
                *(namespace.argv() if namespace is not None else []),
                *([] if server_side else run_as_argv(self.user))]

    def _make_cgroup(self) -> None:
        layout = cgroup_layout()
        if self.cgroup is not None or layout is None:
            return
        me = this_process()
        try:
            self.cgroup = cgroup.SessionCgroup.create(layout, cgroup.owner_group(me.pid, me.start_time), self.tag,
                                                      self.config.limits)
        except OSError as exc:  # reported at start already if the file system is not writable
            log.warning("session %s gets no cgroup: %s", self.workdir.name, exc)

    def _spawn(self, name: str, argv: list[str], pass_fds: tuple[int, ...] = ()) -> Child:
        log_path = self.logs / f"{name}.log"
        argv = [*self.run_prefix(server_side=name in self.SERVER_SIDE,
                                 outside_namespace=name in self.OUTSIDE_NAMESPACE), *argv]
        # The log is opened here, by the server: the process writes to it but cannot open the
        # logs directory, nor read any other part's log.
        with open(log_path, "ab") as log_file:
            popen = subprocess.Popen(
                argv, env=self.env(), stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                start_new_session=True, pass_fds=pass_fds, cwd=self.home,
            )
        return self._supervise(name, popen, log_path)

    def _supervise(self, name: str, popen, log_path: Path) -> Child:
        previous = self.children.get(name)
        child = Child(name, popen, log_path, restarts=previous.restarts + 1 if previous else 0)
        self.children[name] = child
        return child

    def _fail(self, name: str, why: str) -> StackError:
        child = self.children.get(name)
        detail = _tail(child.log_path) if child else ""
        return StackError(f"{name} failed to start: {why}" + (f"\n--- {name} log ---\n{detail}" if detail else ""))

    def _await(self, name: str, predicate: Callable[[], object], what: str, timeout: float | None = None):
        child = self.children[name]
        deadline = time.monotonic() + (timeout or self.config.start_timeout)
        while True:
            if not child.alive:
                raise self._fail(name, f"exited with code {child.popen.returncode}")
            try:
                result = predicate()
            except Exception:
                result = None
            if result:
                return result
            if time.monotonic() > deadline:
                raise self._fail(name, f"not ready after {timeout or self.config.start_timeout:.0f}s ({what})")
            time.sleep(0.02)

    # ---------------------------------------------------------------- the parts, in order

    def _start_xvfb(self) -> None:
        # A fresh cookie each start, for whatever number Xvfb picks: only who can read this file
        # (the desktop user, the server) may connect (desktop.x11.xauth).
        cookie = self._cookie = new_cookie()
        write_new(self.xauthority, entries_for("", cookie), (self.user.uid, self.user.gid) if self.user else None)
        read_fd, write_fd = os.pipe()
        try:
            self._spawn("xvfb", ["Xvfb", "-displayfd", str(write_fd), "-auth", str(self.xauthority),
                                 "-screen", "0",
                                 f"{SCREEN_WIDTH}x{SCREEN_HEIGHT}x24", "-nolisten", "tcp",
                                 "-dpms", "-s", "0", "-noreset",
                                 # No GLX: with it every GL-aware client (xfce4-session, Xvfb
                                 # itself) loads Mesa's software driver and its LLVM, ~17 MB of
                                 # private memory each. Chromium draws through its own SwiftShader.
                                 "-extension", "GLX"], pass_fds=(write_fd,))
        finally:
            os.close(write_fd)
        # Xvfb picks a free display itself and writes its number once it accepts clients.
        with os.fdopen(read_fd) as pipe:
            number = pipe.readline().strip()
        if not number.isdigit():
            raise self._fail("xvfb", "did not report a display number")
        self.display = f":{number}"
        server_authority.add(self.display, cookie)  # this process's own connections (screenshots, input)
        self._run(["xsetroot", "-solid", BACKDROP])

    def _start_dbus(self) -> None:
        read_fd, write_fd = os.pipe()
        try:
            self._spawn("dbus", ["dbus-daemon", "--session", "--nofork", "--nopidfile",
                                 f"--address=unix:dir={self.workdir / 'run'}",
                                 f"--print-address={write_fd}"], pass_fds=(write_fd,))
        finally:
            os.close(write_fd)
        with os.fdopen(read_fd) as pipe:
            self._dbus_address = pipe.readline().strip()
        if not self._dbus_address:
            raise self._fail("dbus", "did not report its address")

    def _start_xfce(self) -> None:
        self._spawn("xfce", ["xfce4-session"])
        self._await("xfce", lambda: self._run(["wmctrl", "-m"]).returncode == 0, "a window manager")
        self._await("xfce", lambda: "xfce4-panel" in self._run(["wmctrl", "-l"]).stdout, "the panel")

    def browser_env(self) -> dict[str, str]:
        """The browser's environment: the session's, and with --browser-accessibility the variable
        without which Chromium does not join the accessibility bus (the switch alone is not enough)."""
        return {**self.env(), **({"ACCESSIBILITY_ENABLED": "1"} if self.config.browser_accessibility else {})}

    def chromium_args(self) -> list[str]:
        """Chromium's switches beyond Playwright's own defaults (desktop.browser.chromium)."""
        if self.proxy is None:  # never: start() makes it before the browser, and it is kept
            raise StackError("chromium: the session's policy proxy is not started")
        return [
            # Its own controls' nodes, which it builds only for a screen reader or with this switch.
            *(["--force-renderer-accessibility"] if self.config.browser_accessibility else []),
            "--force-device-scale-factor=1", "--start-maximized", "--window-position=0,0",
            "--hide-crash-restore-bubble", "--noerrdialogs",
            "--test-type",  # suppresses the "unsupported command-line flag" infobar
            disable_features_switch(),  # Playwright's and the memory savings of desktop.browser.chromium
            enable_features_switch(),
            *network_args(self.proxy.port),  # every request through the session's policy proxy
            *(devtools_args(self.devtools_port) if self.devtools_port else []),
        ]

    @property
    def devtools_port(self) -> int | None:
        """The port of the browser's DevTools inside the session's network namespace, or None.
        Only where page code is allowed (--allow-evaluate: DevTools run code in pages, as the
        devtools:// pages that fence lifts do) and only inside a namespace of the session's own:
        on the server's loopback every local process, another session's included, could drive
        this browser. Outside the session it is reached through desktop.network.relay alone."""
        return DEVTOOLS_PORT if self.config.page_code and self.namespace is not None else None

    def set_network(self, policy: NetworkPolicy) -> None:
        """The browser's network policy from now on; live connections it refuses end now."""
        self.network = policy
        if self.proxy is not None:
            self.proxy.set_policy(policy)

    def own_ports(self) -> set[int]:
        """This session's control-plane ports: the live view's and the proxy's."""
        return {p for p in (self.vnc_port, self.proxy.port if self.proxy else 0) if p}

    def chromium_sandbox(self) -> bool:
        # Chromium never runs as root (desktop/x11/user.py), so its sandbox stays on: Debian's build has
        # no setuid helper and uses unprivileged user namespaces. Where those are refused (Docker's
        # default seccomp profile, some kernels) this switch turns the sandbox off, loudly.
        if os.environ.get("GLASSDESK_CHROMIUM_NO_SANDBOX") == "1":
            log.warning("GLASSDESK_CHROMIUM_NO_SANDBOX=1: Chromium runs without its sandbox")
            return False
        return True

    def chromium_window(self) -> str | None:
        out = self._run(["xdotool", "search", "--onlyvisible", "--class", "chromium"]).stdout.split()
        return out[-1] if out else None

    def _start_chromium(self) -> None:
        if self.browser is not None:  # a healed browser: let go of the dead one's connection first
            self.browser.close()
        self.browser = Browser(self.profile, self.downloads, self.browser_env(), cwd=self.home,
                               argv_prefix=self.run_prefix(), owner=self.user, record=self.record,
                               downloaded=self.downloaded, blocks=self.proxy.blocked if self.proxy else None)
        log_path = self.logs / "chromium.log"
        try:
            process = self.browser.launch(self.chromium_args(), self.config.start_url,
                                          sandbox=self.chromium_sandbox(), timeout=self.config.start_timeout,
                                          fences=fence_preferences(local_pages=self.config.local_pages,
                                                                   page_code=self.config.page_code))
        except BrowserError as exc:
            log_path.write_text(str(exc))
            raise StackError(f"chromium failed to start: {exc}") from exc
        self._supervise("chromium", process, log_path)
        window = self._await("chromium", self.chromium_window, "a visible window")
        self._run(["wmctrl", "-i", "-r", window, "-b", "add,maximized_vert,maximized_horz"])
        self._await("chromium", lambda: self._window_at_origin(window), "the maximised window")

    def _window_at_origin(self, window: str) -> bool:
        out = self._run(["xdotool", "getwindowgeometry", "--shell", window]).stdout
        geometry = dict(line.split("=", 1) for line in out.split() if "=" in line)
        return geometry.get("X") == "0" and geometry.get("Y") == "0" and geometry.get("WIDTH") == str(SCREEN_WIDTH)

    def _start_x11vnc(self) -> None:
        # -nocursorshape: draw the pointer into the picture the viewer gets. noVNC otherwise takes
        # the cursor as a shape and shows it only under the viewer's own mouse, so the agent's
        # pointer would be invisible in the live view. (Screenshots never include the pointer.)
        # -localhost: x11vnc listens on loopback only, whatever address the server is bound to;
        # people reach it through the server's live-view relay (desktop.session.liveview, vision.http.viewer).
        self._spawn("x11vnc", ["x11vnc", "-display", self.display, "-rfbport", str(self.vnc_port),
                               "-localhost", "-passwdfile", str(self.workdir / "vnc.passwd"),
                               "-forever", "-shared", "-norc", "-quiet", "-noxrecord", "-nocursorshape",
                               # No remote control: by default any X client of the display (the
                               # untrusted desktop: xprop -root -set X11VNC_REMOTE ...) could tell
                               # this x11vnc, which runs as the server's user, to serve files or to
                               # listen beyond loopback.
                               "-safer", "-noremote", "-nocmds",
                               # Xvfb, run by the desktop's user, cannot attach the 0600 shared memory
                               # x11vnc (the server's user) makes: it reads the screen over the socket.
                               *(["-noshm"] if self.user else [])])
        self._await("x11vnc", lambda: _tcp_banner(self.vnc_port).startswith(b"RFB"), "its RFB port")

    def _start_wm(self) -> None:
        """A window manager of the supervisor's own, when XFCE no longer restarts its own."""
        self._spawn("wm", [WINDOW_MANAGER, "--replace"])
        self._await("wm", lambda: self._run(["wmctrl", "-m"]).returncode == 0, "a window manager")

    def _xfce_window_manager(self) -> int | None:
        """The pid of the window manager running in XFCE's process session, if one runs."""
        xfce = self.children.get("xfce")
        if xfce is None:
            return None
        for pid in session_pids({xfce.popen.pid}):
            try:
                with open(f"/proc/{pid}/stat", "rb") as fh:
                    name, state = fh.read().split(b" (", 1)[1].rsplit(b")", 1)
            except (OSError, IndexError, ValueError):
                continue
            if name.decode(errors="replace") == WINDOW_MANAGER and state.split()[0] not in (b"Z", b"X"):
                return pid
        return None

    def check_window_manager(self, now: float | None = None) -> str | None:
        """Start a window manager when XFCE has stopped restarting its own; what was done, or None.
        Cheap while the known one lives (one /proc read); looks through /proc only once it is gone."""
        if "wm" in self.children or "xfce" not in self.children:  # ours is supervised as a part
            return None
        now = time.monotonic() if now is None else now
        if self._wm_pid is not None and _pid_running(self._wm_pid):
            return None
        self._wm_pid = self._xfce_window_manager()
        if self._wm_pid is not None:
            self._wm_missing_since = None
            return None
        if self._wm_missing_since is None:
            self._wm_missing_since = now
            return None
        if now - self._wm_missing_since < WM_GRACE_S:
            return None
        with self._lock:
            self._start_wm()
            self._wm_missing_since = None
            return self._note(f"no window manager for {WM_GRACE_S:g}s (XFCE stopped restarting {WINDOW_MANAGER}); "
                              "started one")

    STARTERS = {"chromium": "_start_chromium", "x11vnc": "_start_x11vnc", "wm": "_start_wm"}

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> None:
        with self._lock:
            self._wm_pid = self._wm_missing_since = None
            self._prepare_dirs()
            self._make_cgroup()
            if self.proxy is None:  # kept through heals and resets: the browser's switches name its port
                self._make_namespace()
                self.proxy = PolicyProxy(self.network, self.control_ports, namespace=self.namespace).start()
            self.vnc_port = free_port()
            try:
                self._start_xvfb()
                self._start_dbus()
                self._start_xfce()
                self._start_chromium()
                self._start_x11vnc()
            except BaseException:
                self.stop()
                raise
            self.started_at = time.monotonic()

    def _make_namespace(self) -> None:
        """The session's own network namespace, when the server can make one (netns.support)."""
        if self.namespace is None and self.config.network_namespace and netns.support() is None:
            try:
                self.namespace = netns.SessionNamespace(netns.name_for(self.tag)).create()
            except (netns.NamespaceError, OSError, subprocess.SubprocessError) as exc:
                raise StackError(str(exc)) from exc

    def dead_parts(self) -> list[str]:
        return [name for name, child in list(self.children.items()) if not child.alive]

    def heal(self, parts: Collection[str] | None = None) -> list[str]:
        """Restart the parts that died (only those of ``parts``, if given). Returns what was done,
        for the session's event log.

        Chromium and x11vnc restart alone. If Xvfb, dbus or XFCE died the whole
        desktop is gone with them, so the stack restarts whole.
        """
        with self._lock:
            dead = [name for name in self.dead_parts() if parts is None or name in parts]
            self.last_healed = dead
            if not dead:
                return []
            if any(name not in self.STARTERS for name in dead):
                counts = {name: child.restarts for name, child in self.children.items()}
                attempts = self.rebuild()
                for name, child in self.children.items():  # each part's own restarts are kept
                    child.restarts = counts.get(name, 0)
                self.restarts += 1
                tries = f" (attempt {attempts})" if attempts > 1 else ""
                return [self._note(f"{', '.join(dead)} exited; restarted the whole desktop{tries}")]
            done = []
            for name in dead:
                code = self.children[name].popen.returncode
                kill_group(self.children[name].popen)
                getattr(self, self.STARTERS[name])()
                self.restarts += 1
                done.append(self._note(f"{name} exited (code {code}); restarted"))
            return done

    def rebuild(self, backoff_s: tuple[float, ...] = RESTART_BACKOFF_S) -> int:
        """Stop everything and start the whole desktop again, trying again after each pause of
        ``backoff_s`` when a start fails; the attempt that worked, or StackError with the last reason."""
        last: StackError | None = None
        for attempt in range(1, len(backoff_s) + 2):
            self.stop()
            self.children.clear()
            try:
                self.start()
                return attempt
            except StackError as exc:
                last = exc
                self._note(f"restart attempt {attempt} failed: {str(exc).splitlines()[0]}")
            if attempt <= len(backoff_s):
                time.sleep(backoff_s[attempt - 1])
        raise StackError(f"the desktop could not be restarted in {len(backoff_s) + 1} attempts; last: {last}")

    # Windows that belong to the desktop itself and stay through a reset.
    DESKTOP_WINDOW_CLASSES = ("xfce4-panel", "xfdesktop", "chromium")

    def reset(self) -> None:
        """Back to a fresh session without restarting the display: programs started on the desktop
        end and their windows close, and Chromium starts again on a new, empty profile (no history,
        cookies, form entries or saved logins; the clean preferences of desktop.browser.chromium)."""
        from desktop.x11.windows import parse_wmctrl

        with self._lock:
            # Programs `launch` started lead their own process sessions: end those sessions. One
            # that shed its tag (an empty environment) is still in the session's cgroup.
            parts = {child.popen.pid for child in self.children.values()}
            members = set(tagged_pids(self.tag)) | set(self.cgroup.pids() if self.cgroup else ())
            launched = members - set(session_pids(parts)) - parts
            for pid in launched | set(session_pids(launched)):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            # What was started from the desktop's own menus runs under XFCE: close its windows.
            for window in parse_wmctrl(self._run(["wmctrl", "-lGpx"]).stdout):
                if not window.wm_class.lower().startswith(self.DESKTOP_WINDOW_CLASSES):
                    self._run(["wmctrl", "-i", "-c", window.id])
            restarts = self.children["chromium"].restarts
            if self.browser is not None:
                self.browser.close()
            kill_group(self.children["chromium"].popen)
            shutil.rmtree(self.profile, ignore_errors=True)
            shutil.rmtree(self.downloads, ignore_errors=True)
            shutil.rmtree(self.downloaded, ignore_errors=True)
            self._make_desktop_dirs()
            self.downloaded.mkdir(mode=0o700)
            for ring in (self.record.console, self.record.network, self.record.dialogs, self.record.downloads):
                ring.clear()  # a fresh session has seen nothing (sequence numbers go on)
            self.record.origins.clear()  # a new profile keeps nothing of any origin
            if self.proxy is not None:
                self.proxy.blocked.clear()  # the policy itself stays: it is the session's, not the profile's
            self._start_chromium()
            self.children["chromium"].restarts = restarts  # a reset is asked for, not a crash healed
            self._note("reset: programs ended, Chromium restarted on a clean profile")

    def _note(self, text: str) -> str:
        self.events.append(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {text}")
        log.warning("session stack %s: %s", self.display, text)
        return text

    def stop(self) -> None:
        """End every process this session started, children of children included."""
        with self._lock:
            if self.browser is not None:
                self.browser.close()
            for child in reversed(list(self.children.values())):
                kill_group(child.popen)
            sids = {child.popen.pid for child in self.children.values()}
            for _ in range(3):
                pids = set(tagged_pids(self.tag)) | set(session_pids(sids))
                if not pids:
                    break
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                time.sleep(0.05)
            # What detached from all of the above (double fork, setsid, chdir /, an empty
            # environment) is still in the session's cgroup, and still runs as its account.
            if self.cgroup is not None:
                self.cgroup.kill()
            if self.user is not None and self.user.exclusive:
                try:
                    kill_all(self.user)
                except StackError as exc:  # a process stuck in the kernel: the account is not given back
                    log.warning("session %s: %s", self.workdir.name, exc)
                    self._stuck = True
            for child in self.children.values():
                if child.popen.poll() is None:
                    child.popen.wait(1)
            if self.display and self._cookie:
                server_authority.remove(self.display, self._cookie)

    def close(self) -> None:
        """Stop for good: also close the proxy, remove the network namespace and the cgroup, and
        give the account back."""
        self.stop()
        if self.proxy is not None:
            self.proxy.close()
        if self.namespace is not None:
            self.namespace.delete()
        with self._lock:
            if self.cgroup is not None:
                self.cgroup.remove()
                self.cgroup = None
            if self._claimed and not self._stuck:  # a later claim sees the account's processes anyway
                desktop_users.release(self.user)
                self._claimed = False

    def _run(self, argv: list[str], timeout: float = 5) -> subprocess.CompletedProcess:
        return subprocess.run(argv, env=self.env(), capture_output=True, text=True, timeout=timeout)

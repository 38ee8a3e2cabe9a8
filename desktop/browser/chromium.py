"""The session's Chromium: launched by Playwright on the session's display, spoken to over a pipe.

Why Playwright, over the pipe (``--remote-debugging-pipe``), rather than a DevTools TCP port:
- A TCP port on 127.0.0.1 has no authentication: any local process - another session's browser,
  a program the model launched - could drive this browser past the API's token. A pipe is only
  reachable by the process that started Chromium. (The one TCP port there is, for OSWorld's harness, listens
  inside the session's own network namespace, and only where page code is allowed:
  ``DEVTOOLS_PORT``.)
- It is the one DevTools connection the session owns; the page layer (state, content, console,
  network, dialogs, selector actions) builds on Playwright's API instead of hand-written CDP.
- It launches Debian's Chromium headed (``executable_path``), as the desktop user when the
  server is root (through ``argv_prefix``), with the session's own environment; we drop
  ``--enable-automation`` so no "controlled by automated software" bar shows.

One Playwright driver (a node process) serves every session of this process, on one event-loop
thread: a driver per session would cost ~50 MB each. Callers on any thread submit coroutines to
that loop and wait for them with a bound.

Supervision stays with the stack: :class:`BrowserProcess` looks like a ``Popen`` for Chromium's
main process (found by its profile directory in /proc), so a dead browser is seen and healed the
same way as any other part.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import stat
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from desktop.background import BackgroundLoop, Lazy
from desktop.browser.pages import Pages
from desktop.browser.record import PageRecord
from desktop.network.policy import WEBRTC_PREFERENCES
from desktop.x11.procs import owned_temp_dir
from desktop.x11.user import DesktopUser, open_without_links

T = TypeVar("T")

log = logging.getLogger("glassdesk.browser")

CHROMIUM = os.environ.get("GLASSDESK_CHROMIUM", "/usr/bin/chromium")

# Defaults of Playwright's that a person's browser does not have: the automation bar, and a
# browser that lets every page open windows.
# How Chromium titles its window: the active tab's title, then this.
WINDOW_SUFFIX = " - Chromium"

IGNORED_DEFAULT_ARGS = ["--enable-automation", "--disable-popup-blocking"]

# Chromium honours only the LAST --disable-features switch, and Playwright passes its own first:
# ours must repeat Playwright's list (its chromiumSwitches; tests/unit/test_browser_features.py
# checks the installed driver's list is all here) or those features would come back on.
PLAYWRIGHT_DISABLED_FEATURES = (
    "AvoidUnnecessaryBeforeUnloadCheckSync", "DestroyProfileOnBrowserClose", "HttpsUpgrades",
    "HttpsFirstBalancedModeAutoEnable", "LensOverlay", "MediaRouter", "PaintHolding",
    "ThirdPartyStoragePartitioning", "AvoidCorsURLLoaderRestartOnRedirect", "TcpPortRandomizationWin",
    "OptimizationHints", "NetworkTimeServiceQuerying", "AimEnabled", "PreconnectToSearch",
    "msForceBrowserSignIn", "msEdgeUpdateLaunchServicesPreferredVersion",
)
# What an idle session's browser need not keep in memory (issue 14; measured by
# tests/bench_scale.py, PSS of one more idle session):
# - the omnibox's WebUI popup (Chromium 156 renders the address bar's suggestion list as a page):
#   a whole renderer process, ~48 MB PSS, held from the start for a popup an agent rarely opens;
#   with these off the popup is drawn by the browser process itself (views), as before;
# - the preloading of the browser's other WebUI bubbles (tab search and the like) at start;
# - the spare renderer Chromium keeps started for the next navigation to a new site (~15 MB): a
#   new site's first navigation starts its renderer then, a few tens of ms.
MEMORY_DISABLED_FEATURES = (
    "WebUIOmniboxPopup", "WebUIOmniboxFullPopup", "WebUIOmniboxAimPopup", "PreloadTopChromeWebUI",
    "SpareRendererForSitePerProcess",
)


def disable_features_switch() -> str:
    """The one --disable-features switch the browser gets: Playwright's list and ours (pure)."""
    return "--disable-features=" + ",".join(dict.fromkeys(PLAYWRIGHT_DISABLED_FEATURES + MEMORY_DISABLED_FEATURES))


# The same for --enable-features. Playwright's: its screenshots on a new surface (unless the
# driver's PLAYWRIGHT_LEGACY_SCREENSHOT says otherwise) and no account lookups at start.
PLAYWRIGHT_ENABLED_FEATURES = ("CDPScreenshotNewSurface", "SkipListAccountsWithoutGaiaCookies")
# Ours: the network service in the browser process rather than a process of its own (~10 MB less
# per session). On Linux that process runs unsandboxed anyway (--service-sandbox-type=none), so
# no isolation is lost; the policy proxy still carries every request (--proxy-server).
MEMORY_ENABLED_FEATURES = ("NetworkServiceInProcess2",)


def enable_features_switch(env: Mapping[str, str] | None = None) -> str:
    """The one --enable-features switch the browser gets: Playwright's list and ours (pure but
    for reading the driver's environment switch)."""
    env = os.environ if env is None else env
    playwright = tuple(f for f in PLAYWRIGHT_ENABLED_FEATURES
                       if not (f == "CDPScreenshotNewSurface" and env.get("PLAYWRIGHT_LEGACY_SCREENSHOT")))
    return "--enable-features=" + ",".join(dict.fromkeys(playwright + MEMORY_ENABLED_FEATURES))

# The DevTools port a browser listens on, as OSWorld's guest has it (desktop.session.stack:
# DesktopStack.devtools_port says when).
DEVTOOLS_PORT = 9222


def devtools_args(port: int) -> list[str]:
    """DevTools on a TCP port of loopback too, beside the pipe Playwright keeps (pure). The
    browser serves both at once; Playwright's control is untouched."""
    return [f"--remote-debugging-port={port}", "--remote-debugging-address=127.0.0.1"]


# Written into the profile before every launch: a session's browser starts the same every time
# and keeps nothing a later run could trip over. Form history and autofill would put a dropdown
# over the very labels a model or OCR looks for on the second run of a form; the password
# manager, translate and first-run prompts would cover the page.
PREFERENCES: dict[str, Any] = {
    "autofill": {"enabled": False, "profile_enabled": False, "credit_card_enabled": False},
    "credentials_enable_service": False,
    "credentials_enable_autosignin": False,
    "profile": {"password_manager_enabled": False, "exit_type": "Normal", "exited_cleanly": True,
                "default_content_setting_values": {"notifications": 2, "geolocation": 2}},
    "translate": {"enabled": False},
    "browser": {"check_default_browser": False, "has_seen_welcome_page": True},
    "search": {"suggest_enabled": False},
    "signin": {"allowed": False},
    "session": {"restore_on_startup": 5},  # open the new-tab page, never restore the last tabs
    "webrtc": WEBRTC_PREFERENCES,  # the network policy: no UDP past the proxy (desktop.network.policy)
}


# What the browser refuses to open whatever opens it: the API's fences (desktop.x11.windows.check_url,
# evaluate_disabled) hold only for what comes through the API, and a model's keystrokes (ctrl+l and a
# typed URL, ctrl+shift+j) or a hostile page's instructions reach the browser below it. Chromium's
# URL blocklist, read from the profile's preferences, stops them there: the pages of this machine
# (file://, chrome://, view-source:) unless the server lets the API open them, and DevTools and
# typed javascript: URLs (code run in the page) unless it lets the API evaluate. The DevTools pipe
# Playwright drives the browser by is not a URL and stays open.
LOCAL_PAGES = ("file://*", "chrome://*", "chrome-untrusted://*", "view-source:*")
PAGE_CODE = ("devtools://*", "javascript:*")
# A new tab opens Chromium's own new-tab page (a chrome:// page showing nothing of this machine).
NEW_TAB_PAGES = ("chrome://newtab", "chrome://new-tab-page", "chrome://new-tab-page-third-party")


def fence_preferences(*, local_pages: bool, page_code: bool) -> dict[str, Any]:
    """The profile preferences of the browser's fences: ``local_pages`` and ``page_code`` say what
    the server allows (pure). Always the whole lists, so a change of setting replaces the old ones."""
    blocked = [*(() if local_pages else LOCAL_PAGES), *(() if page_code else PAGE_CODE)]
    allowed = [] if local_pages else list(NEW_TAB_PAGES)
    return {"policy": {"url_blocklist": blocked, "url_allowlist": allowed}}


def download_preferences(downloads: Path) -> dict[str, Any]:
    """Downloads go to the session's own folder without asking where (pure): a download a model or
    a page starts lands where the page layer looks for it, never in a directory of its choosing.
    (Playwright also routes the page layer's downloads there over DevTools; these cover the browser's
    own default and its "save as" starting point.)"""
    folder = str(downloads)
    return {"download": {"default_directory": folder, "prompt_for_download": False, "directory_upgrade": True},
            "savefile": {"default_directory": folder}}


# The fences every session shares, as Chromium enterprise policies (docker/chromium-policy.json,
# installed by docker/install-system-deps.sh): no extension installed from anywhere, downloads never
# ask where to go, no sign-in, sync, guest or added profiles. Chromium on Linux reads policies only
# from this machine-wide directory (Debian's build ignores the --policy switch), so what differs per
# session (the URL lists above) stays in each profile's preferences. DeveloperToolsAvailability is not
# among them: it also closes the DevTools pipe Playwright drives (Chromium then never answers it).
MANAGED_POLICY_FILE = Path("/etc/chromium/policies/managed/glassdesk.json")
MANAGED_POLICY_SOURCE = Path(__file__).resolve().parent.parent.parent / "docker" / "chromium-policy.json"


def managed_policy_problem(installed: Path = MANAGED_POLICY_FILE, source: Path = MANAGED_POLICY_SOURCE) -> str | None:
    """Why the shared policies are not in force, or None when they are (reads two files)."""
    try:
        wanted = json.loads(source.read_text())
    except (OSError, ValueError):
        return None  # an installed package without the docker/ directory: nothing to compare against
    try:
        present = json.loads(installed.read_text())
    except FileNotFoundError:
        return (f"{installed} is missing: sessions' browsers may install extensions and ask where to save "
                "downloads; install it as root with: bash docker/install-system-deps.sh")
    except (OSError, ValueError) as exc:
        return f"{installed} cannot be read ({exc}); install it again with: bash docker/install-system-deps.sh"
    differing = sorted(k for k, v in wanted.items() if present.get(k) != v)
    if differing:
        return (f"{installed} differs from docker/chromium-policy.json ({', '.join(differing)}); "
                "install it again with: bash docker/install-system-deps.sh")
    return None


_policy_warned = False


def warn_once_without_managed_policy() -> None:
    """Say at the first browser start, loudly, when the shared fences are not in force."""
    global _policy_warned
    if not _policy_warned:
        _policy_warned = True
        problem = managed_policy_problem()
        if problem:
            log.warning("browser fences degraded: %s", problem)


def merge_preferences(current: dict, wanted: dict) -> dict:
    """``current`` with every leaf of ``wanted`` set (pure)."""
    merged = dict(current)
    for key, value in wanted.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_preferences(merged[key], value)
        else:
            merged[key] = value
    return merged


def write_preferences(profile: Path, owner: DesktopUser | None = None, fences: dict | None = None) -> None:
    """Make the profile's preferences say what :data:`PREFERENCES` and ``fences`` say
    (:func:`fence_preferences`), keeping the rest (a healed
    browser keeps its profile; a crash must not bring up the restore-tabs bubble).

    The profile may be the desktop user's (``owner``, desktop/x11/user.py) while this runs as root: no
    link it put there is followed (directories opened relative to each other with O_NOFOLLOW), the
    file is replaced by rename rather than written through, and what is made is given to it."""
    profile_fd = os.open(profile, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        try:
            os.mkdir("Default", 0o700, dir_fd=profile_fd)
        except FileExistsError:
            pass
        else:
            if owner:
                os.chown("Default", owner.uid, owner.gid, dir_fd=profile_fd, follow_symlinks=False)
        default_fd = os.open("Default", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=profile_fd)
    finally:
        os.close(profile_fd)
    try:
        try:
            fd = open_without_links(profile, "Default", "Preferences")
            with os.fdopen(fd, "rb") as fh:
                current = json.loads(fh.read()) if stat.S_ISREG(os.fstat(fd).st_mode) else {}
        except (OSError, ValueError):
            current = {}
        wanted = merge_preferences(PREFERENCES, fences or {})
        data = json.dumps(merge_preferences(current if isinstance(current, dict) else {}, wanted)).encode()
        temp = f"Preferences.glassdesk-{os.getpid()}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=default_fd)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if owner:
                os.fchown(fh.fileno(), owner.uid, owner.gid)
        os.replace(temp, "Preferences", src_dir_fd=default_fd, dst_dir_fd=default_fd)
    finally:
        os.close(default_fd)


def is_browser_main(cmdline: list[str], profile: Path) -> bool:
    """Is this the browser process of ``profile`` (not a renderer, GPU or zygote helper)? (pure)"""
    return (f"--user-data-dir={profile}" in cmdline and not any(a.startswith("--type=") for a in cmdline)
            and bool(cmdline) and os.path.basename(cmdline[0]).startswith("chrom"))


def find_browser_pid(profile: Path) -> int | None:
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                # Chromium rewrites its own command line into one space-separated string.
                argv = fh.read().decode(errors="replace").replace("\0", " ").split()
        except OSError:
            continue
        if is_browser_main(argv, profile):
            return int(entry.name)
    return None


def _proc_state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0].decode()
    except OSError:
        return None


class BrowserProcess:
    """Chromium's main process, seen through /proc: enough of ``Popen`` for supervision.

    Playwright's driver is its parent and reaps it, so there is no exit code to read: a gone or
    zombie process answers ``poll()`` with -1.
    """

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and _proc_state(self.pid) in (None, "Z", "X"):
            self.returncode = -1
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        limit = timeout if timeout is not None else 1e9
        deadline = time.monotonic() + limit
        while (code := self.poll()) is None:
            if time.monotonic() > deadline:
                import subprocess
                raise subprocess.TimeoutExpired(f"chromium[{self.pid}]", limit)
            time.sleep(0.02)
        return code


# ------------------------------------------------------------------------- the shared driver


class _Driver(BackgroundLoop):
    """One Playwright driver and the event loop that speaks to it, for the whole process."""

    def __init__(self):
        super().__init__("glassdesk-browser",
                         lambda seconds: BrowserError(f"the browser did not answer within {seconds:.0f}s"))
        self._playwright = None
        self._temp: Path | None = None
        self._start_lock = asyncio.Lock()

    async def playwright(self):
        async with self._start_lock:
            if self._playwright is not None and self._temp is not None and not self._temp.is_dir():
                # The desktops' owner that the driver was started under has ended and removed its
                # root (an embedded server closed, another started in this process): every launch
                # would fail on the driver's vanished temp dir. Its browsers went with that owner.
                playwright, self._playwright = self._playwright, None
                with contextlib.suppress(Exception):
                    await playwright.stop()
            if self._playwright is None:
                from playwright.async_api import async_playwright

                self._temp = owned_temp_dir()
                with _driver_temp_dir(self._temp):
                    self._playwright = await async_playwright().start()
            return self._playwright


@contextlib.contextmanager
def _driver_temp_dir(path: Path | None):
    """TMPDIR set to ``path`` while the driver starts (it copies the environment then, and Playwright
    takes no environment for it). The driver makes a ``playwright-artifacts-*`` directory in its
    temp dir for each browser launch and removes it only on a clean close: a kill -9 of the server
    left one in /tmp for good. In the session root it goes with the root (desktop.session.ownership).
    Another thread spawning meanwhile would see the same TMPDIR: a directory of this user's, valid."""
    if path is None:
        yield
        return
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(path)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = before


driver = Lazy(_Driver)


# ------------------------------------------------------------------------------- one browser


class BrowserError(RuntimeError):
    """Chromium could not be started or did not answer."""


@dataclass
class Browser:
    """One session's Chromium. Methods are called from any thread; they run on the driver's loop."""

    profile: Path
    downloads: Path
    env: dict[str, str]
    cwd: Path
    argv_prefix: list[str] = field(default_factory=list)  # e.g. run as the desktop user
    owner: DesktopUser | None = None  # whose the profile is, when not this process's user
    # The session's record of console, network, dialogs and downloads: it outlives this process.
    record: PageRecord = field(default_factory=PageRecord)
    downloaded: Path | None = None  # where finished downloads are kept (default: ``downloads``)
    blocks: Any = None  # the session's policy proxy's BlockLog (desktop.network.policy), if it has one
    context: Any = None
    pages: Pages | None = None
    process: BrowserProcess | None = None

    def launch(self, args: list[str], start_url: str, *, sandbox: bool, timeout: float,
               fences: dict | None = None) -> BrowserProcess:
        warn_once_without_managed_policy()
        try:
            write_preferences(self.profile, self.owner,
                              merge_preferences(download_preferences(self.downloads), fences or {}))
        except OSError as exc:  # e.g. a link where the profile's Default directory should be
            raise BrowserError(f"the profile's preferences could not be written: {exc}") from exc
        self.downloads.mkdir(parents=True, exist_ok=True)
        executable = self._executable()
        try:
            driver().run(self._launch(executable, args, start_url, sandbox, timeout), timeout + 5)
        except Exception as exc:
            raise BrowserError(f"Chromium did not start: {exc}") from exc
        pid = find_browser_pid(self.profile)
        if pid is None:
            raise BrowserError("Chromium started but its process is not to be found")
        self.process = BrowserProcess(pid)
        return self.process

    def _executable(self) -> str:
        """A two-line script that starts Chromium in the session's home, through ``argv_prefix``
        when there is one: Playwright takes one executable path, not a command and a directory.
        The working directory is how the reaper (desktop.session.ownership) recognises the browser of a
        killed server's session: Chromium rewrites its environment, so the session's mark is lost."""
        import shlex

        script = self.profile.parent / "chromium-in-session"
        script.write_text(f"#!/bin/sh\ncd {shlex.quote(str(self.cwd))} || exit 1\n"
                          f"exec {shlex.join([*self.argv_prefix, CHROMIUM])} \"$@\"\n")
        script.chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        return str(script)

    async def _launch(self, executable: str, args: list[str], start_url: str, sandbox: bool, timeout: float):
        playwright = await driver().playwright()
        self.context = await playwright.chromium.launch_persistent_context(
            str(self.profile), executable_path=executable, headless=False, args=args,
            ignore_default_args=IGNORED_DEFAULT_ARGS, env=self.env, no_viewport=True,
            # Chromium saves each download here under a GUID name; the page layer copies it into
            # ``downloaded`` under its own name and deletes it (desktop.browser.downloads).
            chromium_sandbox=sandbox, downloads_path=str(self.downloads), accept_downloads=True,
            handle_sigint=False, handle_sigterm=False, handle_sighup=False, timeout=timeout * 1000,
        )
        self.pages = Pages(self.context, self.record, self.downloaded or self.downloads,
                           window_title=self._window_title, blocks=self.blocks)
        if start_url != "about:blank":  # Playwright opens about:blank; it takes no URL argument
            page = self.context.pages[0] if self.context.pages else await self.context.new_page()
            await page.goto(start_url, wait_until="commit", timeout=timeout * 1000)

    async def _window_title(self) -> str | None:
        """The active tab's title, as the window in front shows it ("<title> - Chromium"), or None
        when the window in front is not a browser's. A few ms; asked only when there are two tabs
        or more (desktop.browser.tabs.Tabs.front)."""
        try:
            process = await asyncio.create_subprocess_exec(
                "xdotool", "getactivewindow", "getwindowname", env=self.env,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        except OSError:
            return None
        try:
            out, _ = await asyncio.wait_for(process.communicate(), 2)
        except TimeoutError:
            process.kill()
            await process.wait()
            return None
        name = out.decode(errors="replace").rstrip("\n")
        return name[: -len(WINDOW_SUFFIX)] if name.endswith(WINDOW_SUFFIX) else None

    # -------------------------------------------------------------------- what the page layer uses

    def call(self, work: Callable[[Pages], Awaitable[T]], timeout: float) -> T:
        """Run ``work`` on this browser's pages, on the driver's loop, waiting at most ``timeout``."""
        pages = self.pages
        if pages is None:
            raise BrowserError("Chromium is not running")
        job = work(pages)
        if not isinstance(job, Coroutine):  # never: every work is an async function's (the loop takes nothing else)
            raise TypeError(f"a coroutine is required, not {job!r}")  # as run_coroutine_threadsafe raised
        return driver().run(job, timeout)

    def page_url(self) -> str | None:
        try:
            page = self.call(lambda pages: pages.front(), 3)
        except Exception:
            return None
        return page.url if page is not None else None

    def open_url(self, url: str, timeout: float = 10) -> None:
        """Navigate the tab in front; raises ValueError when the page cannot be opened, RuntimeError
        when the browser does not answer or goes away meanwhile."""
        from playwright.async_api import Error as PlaywrightError

        try:
            self.call(lambda pages: pages.navigate("goto", url, "commit", int(timeout * 1000)), timeout + 5)
        except (PlaywrightError, TimeoutError) as exc:
            raise BrowserError(f"Chromium could not open {url}: "
                               f"{(str(exc).splitlines() or ['no answer'])[0]}") from None

    def close(self) -> None:
        """End this browser: politely through Playwright, then for sure through its process group."""
        context, self.context, self.pages = self.context, None, None
        if context is not None:
            try:
                driver().run(context.close(), 5)
            except Exception:
                pass
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                self.process.wait(3)
            except Exception:
                log.warning("Chromium %s did not end", self.process.pid)

"""A real open-source app for the ported end-to-end suite (tests/qa/todomvc.yaml): TodoMVC's React
example, from the npm package ``todomvc`` (MIT, Addy Osmani, Sindre Sorhus, Pascal Hartig, Stephen
Sawchuk), served on 127.0.0.1 as it is or with one bug injected.

The packages are fetched once, by ``make test`` (``make todomvc``: ``python -m tests.fakes.todomvc
fetch``), with ``npm pack`` at a pinned version (or, without npm, the registry's tarball URL that npm
would download) and checked against a pinned SHA-256, into the ignored ``.cache/`` beside the
repository; the tests read them from there and never touch the network:

- ``todomvc`` 0.1.1: the app (examples/react, with its bower_components: React 0.12, its in-browser
  JSX transformer, director for the #/ routes; it keeps its todos in localStorage["react-todos"],
  the key Playwright's spec reads).
- ``create-playwright`` 1.17.132: the newest version that still ships assets/demo-todo-app.spec.ts,
  the suite ported; kept so a test can check the port names every one of its tests.
- ``swagger-ui-dist`` 5.35.0: Swagger UI's static bundle, served as published but for the API
  description it loads (tests/integration/test_qa_swagger.py).
- ``sortablejs`` 1.15.7: Sortable.js, under the test pages of its repository (tests/assets/sortablejs,
  served by ``sortable_root``), for the port of its TestCafe suite (tests/qa/sortable.yaml).

A bug is a small text substitution in one of the app's files, refused unless its text occurs in
that file exactly once, so a bug that no longer applies is an error, never a silently clean app.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import urllib.request
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache"


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    sha256: str
    keep: tuple[str, ...]  # the paths (under package/) extracted; the rest of the tarball is not needed

    @property
    def tarball(self) -> str:
        return f"{self.name}-{self.version}.tgz"

    @property
    def url(self) -> str:
        return f"https://registry.npmjs.org/{self.name}/-/{self.tarball}"

    @property
    def directory(self) -> Path:
        return CACHE / f"{self.name}-{self.version}"


APP = Package("todomvc", "0.1.1", "fd6f05a878cddee9b987ee449d8defa447d087d6b6ffc1d816bbb2cd64a6705f",
              ("license.md", "examples/react/"))
SPEC = Package("create-playwright", "1.17.132", "0137e9957c5cf993b7f2090d52cd214001e9ea40a94077db01b089ba59031e70",
               ("LICENSE", "package.json", "assets/demo-todo-app.spec.ts"))
# SortableJS, a real drag-and-drop library: its published test pages (copied from its repository
# into tests/assets/sortablejs/: the npm package ships none) load it from their parent directory.
SORTABLE = Package("sortablejs", "1.15.7", "66cbfc8fa18860783584fe0c346baf6cbf3399da72d23d21053425ba232abed4",
                   ("LICENSE", "Sortable.js"))
# Swagger UI, a real app that sends a request with the bearer token a person typed into its
# Authorize dialog (tests/integration/test_qa_swagger.py): its published static bundle.
SWAGGER_UI = Package("swagger-ui-dist", "5.35.0", "1b8e891893404ea4c3558b6a87e2a3e494e7eedba41168c2ece5800a391a6ea6",
                     ("LICENSE", "NOTICE", "index.html", "index.css", "swagger-ui.css", "swagger-ui-bundle.js",
                      "swagger-ui-standalone-preset.js", "swagger-initializer.js", "favicon-16x16.png",
                      "favicon-32x32.png"))
PACKAGES = (APP, SPEC, SORTABLE, SWAGGER_UI)

APP_ROOT = APP.directory / "examples" / "react"
SPEC_FILE = SPEC.directory / "assets" / "demo-todo-app.spec.ts"


class NotFetched(RuntimeError):
    pass


def require(package: Package = APP) -> Path:
    """The package's extracted directory; a clear error naming the command when it is missing."""
    if not (package.directory / ".verified").is_file():
        raise NotFetched(f"{package.name} {package.version} is not in {CACHE}: run `make todomvc` (or "
                         f"`python -m tests.fakes.todomvc fetch`, which needs the npm registry once)")
    return package.directory


def fetch(package: Package) -> Path:
    """``npm pack`` the pinned version, check its SHA-256, extract what is kept (idempotent)."""
    if (package.directory / ".verified").is_file():
        return package.directory
    CACHE.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as work:
        tgz = Path(work) / package.tarball
        if shutil.which("npm"):
            subprocess.run(["npm", "pack", "--silent", "--pack-destination", work, f"{package.name}@{package.version}"],
                           check=True, stdout=subprocess.DEVNULL, timeout=600)
        else:  # the same file npm pack would download (a fresh Debian has no npm); the pin checks it
            with urllib.request.urlopen(package.url, timeout=120) as answer:
                tgz.write_bytes(answer.read())
        digest = hashlib.sha256(tgz.read_bytes()).hexdigest()
        if digest != package.sha256:
            raise RuntimeError(f"{package.tarball}: sha256 {digest}, pinned {package.sha256}: refusing it")
        staged = Path(work) / "x"
        with tarfile.open(tgz) as tar:
            members = [m for m in tar.getmembers()
                       if (m.isfile() or m.isdir()) and any(m.name.removeprefix("package/").startswith(k)
                                                            for k in package.keep)]
            tar.extractall(staged, members=members, filter="data")  # "data": no path leaves `staged`
        (staged / "package" / ".verified").write_text(f"{package.tarball} sha256 {digest}\n")
        shutil.rmtree(package.directory, ignore_errors=True)
        (staged / "package").rename(package.directory)
    return package.directory


# ------------------------------------------------------------------------------------- bugs

@dataclass(frozen=True)
class Bug:
    file: str        # under examples/react
    old: str
    new: str
    caught_by: tuple[str, ...]  # the suite tests (by name) expected to fail on it: the ones run against it
    what: str


BUGS: dict[str, Bug] = {
    "counter_off_by_one": Bug(
        "js/footer.jsx", "<strong>{this.props.count}</strong>", "<strong>{this.props.count + 1}</strong>",
        ("New Todo › should append new items to the bottom of the list",
         "Counter › should display the current number of todo items"),
        "the footer counts one item more than are left"),
    "toggle_all_does_nothing": Bug(
        "js/app.jsx", "this.props.model.toggleAll(checked);", "void checked;",
        ("Mark all as completed › should allow me to mark all items as completed",),
        "Mark all as complete changes nothing"),
    "edit_not_trimmed": Bug(
        "js/todoItem.jsx", "var val = this.state.editText.trim();", "var val = this.state.editText;",
        ("Editing › should trim entered text",),
        # The page shows the same words (text is compared whitespace-normalised, as in Playwright):
        # the stored title, read by the spec's localStorage check, is what differs.
        "an edited title keeps its surrounding spaces"),
    "escape_saves": Bug(
        "js/todoItem.jsx", "this.setState({editText: this.props.todo.title});\n\t\t\t\tthis.props.onCancel(event);",
        "this.handleSubmit(event);",
        ("Editing › should cancel edits on escape",),
        "Escape saves the edit instead of cancelling it"),
    "clear_completed_removes_active": Bug(
        "js/todoModel.js", "return !todo.completed;", "return todo.completed;",
        ("Clear completed button › should remove completed items when clicked",),
        "Clear completed removes the active items and keeps the completed"),
    "active_filter_shows_completed": Bug(
        "js/app.jsx", "case app.ACTIVE_TODOS:\n\t\t\t\t\treturn !todo.completed;",
        "case app.ACTIVE_TODOS:\n\t\t\t\t\treturn todo.completed;",
        ("Routing › should allow me to display active items",),
        "#/active lists the completed items"),
}


# Not bugs: the new-todo field's id and the toggles' class renamed (a restyle), which a replay of a
# run recorded on the app heals over (tests/integration/test_qa_todomvc.py).
RENAMES: tuple[Bug, ...] = (
    Bug("js/app.jsx", 'id="new-todo"', 'id="add-todo"', (), "the new-todo field's id renamed"),
    Bug("js/todoItem.jsx", 'className="toggle"', 'className="tick"', (), "the toggles' class renamed"),
)


def patched(root: Path, bug: Bug) -> bytes:
    """The file of ``bug`` with its substitution made; an error unless ``old`` occurs exactly once."""
    text = (root / bug.file).read_text(encoding="utf-8")
    count = text.count(bug.old)
    if count != 1:
        raise ValueError(f"{bug.file}: the text to replace occurs {count} times, not once: {bug.old!r}")
    return text.replace(bug.old, bug.new).encode()


# ------------------------------------------------------------------------------------- serving

TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".jsx": "text/jsx; charset=utf-8", ".css": "text/css; charset=utf-8", ".png": "image/png",
         ".json": "application/json"}


class TodoMvcServer:
    """The React TodoMVC on 127.0.0.1 on a free port, its root the example's directory (the URL the
    suite names, http://127.0.0.1:8000/, with its own port). ``bug``: a key of BUGS, injected."""

    def __init__(self, bug: str | None = None, root: Path | None = None, patches: tuple[Bug, ...] = ()):
        if root is None:
            require(APP)
            root = APP_ROOT
        overrides = {}
        if bug is not None:
            overrides["/" + BUGS[bug].file] = patched(root, BUGS[bug])
        for patch in patches:  # changes that are not bugs (RENAMES: what a replay heals over)
            overrides["/" + patch.file] = patched(root, patch)
        self.bug = bug
        self.hits: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                path = unquote(urlsplit(self.path).path)
                if path == "/":
                    path = "/index.html"
                server.hits.append(path)
                body = overrides.get(path)
                if body is None:
                    file = (root / path.lstrip("/")).resolve()
                    if not file.is_relative_to(root.resolve()) or not file.is_file():
                        self.send_error(404)
                        return
                    body = file.read_bytes()
                self.send_response(200)
                self.send_header("content-type", TYPES.get(Path(path).suffix, "application/octet-stream"))
                self.send_header("content-length", str(len(body)))
                self.send_header("cache-control", "no-store")  # a bug served on a port must never be cached
                self.end_headers()
                self.wfile.write(body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> TodoMvcServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


SORTABLE_PAGES = REPO / "tests" / "assets" / "sortablejs"


def sortable_root(directory: Path) -> Path:
    """A directory laid out as SortableJS's repository is for its tests (``tests/*.html`` beside
    ``Sortable.js``), made in ``directory`` from the pinned package and the copied pages."""
    package = require(SORTABLE)
    shutil.copytree(SORTABLE_PAGES, directory / "tests", dirs_exist_ok=True)
    shutil.copy2(package / "Sortable.js", directory / "Sortable.js")
    return directory


def spec_test_names(spec: str) -> list[str]:
    """The spec's tests, in order, named as Playwright's reporters do: ``describe › test`` (pure)."""
    names, describe = [], None
    for line in spec.splitlines():
        if found := re.match(r"test\.describe\('([^']*)'", line):
            describe = found.group(1)
        elif found := re.match(r"\s+test\('([^']*)'", line):
            names.append(f"{describe} › {found.group(1)}")
    return names


def main(argv: list[str]) -> int:
    if argv[:1] != ["fetch"]:
        print("usage: python -m tests.fakes.todomvc fetch", file=sys.stderr)
        return 2
    for package in PACKAGES:
        print(f"{package.name} {package.version}: {fetch(package)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

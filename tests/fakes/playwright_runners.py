"""The real Playwright test runners the exported specs are run under (tests/integration/test_export.py):
``@playwright/test`` (npm) and pytest-playwright (PyPI), at pinned versions, kept in the ignored
``.cache/`` beside the repository, like the TodoMVC app (tests/fakes/todomvc.py).

Fetched once by ``make test`` (``make playwright-runners``: ``python -m tests.fakes.playwright_runners
fetch``); the tests read them from there and never touch the network. Neither downloads a browser:
the specs run the Debian Chromium (/usr/bin/chromium) through ``executablePath`` /
``executable_path``. pytest-playwright is installed into a directory of its own, not the venv: its
pytest plugin must not load in the project's own test run, only in the subprocess given that
directory on PYTHONPATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache"

PLAYWRIGHT_TEST = "1.65.1"  # @playwright/test (npm), and the playwright-core it pins
PYTEST_PLAYWRIGHT = ("pytest-playwright==0.10.0", "pytest-base-url==2.1.0", "python-slugify==8.0.4",
                     "text-unidecode==1.3")
NPM_DIR = CACHE / f"playwright-test-{PLAYWRIGHT_TEST}"
PY_DIR = CACHE / "pytest-playwright-0.10.0"
PLAYWRIGHT_CLI = NPM_DIR / "node_modules" / ".bin" / "playwright"
CHROMIUM = "/usr/bin/chromium"


class NotFetched(RuntimeError):
    pass


def require_npm() -> Path:
    if not (NPM_DIR / ".verified").is_file() or not PLAYWRIGHT_CLI.exists():
        raise NotFetched(f"@playwright/test {PLAYWRIGHT_TEST} is not in {NPM_DIR}: run `make playwright-runners` "
                         "(needs the npm registry once)")
    return NPM_DIR


def require_py() -> Path:
    if not (PY_DIR / ".verified").is_file():
        raise NotFetched(f"pytest-playwright is not in {PY_DIR}: run `make playwright-runners` (needs PyPI once)")
    return PY_DIR


def fetch() -> None:
    """Install both runners at their pinned versions (idempotent: quick when they are there)."""
    CACHE.mkdir(exist_ok=True)
    if not (NPM_DIR / ".verified").is_file():
        if not shutil.which("npm"):
            raise NotFetched("npm is needed once to install @playwright/test (apt-get install npm)")
        env = {**os.environ, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}  # the Debian Chromium is used
        subprocess.run(["npm", "install", "--prefix", str(NPM_DIR), "--no-audit", "--no-fund", "--loglevel=error",
                        "--save-exact", f"@playwright/test@{PLAYWRIGHT_TEST}"], check=True, env=env)
        version = subprocess.run([str(PLAYWRIGHT_CLI), "--version"], check=True, capture_output=True, text=True)
        if PLAYWRIGHT_TEST not in version.stdout:
            raise NotFetched(f"npm installed {version.stdout.strip()!r}, not {PLAYWRIGHT_TEST}")
        (NPM_DIR / ".verified").write_text(version.stdout)
    if not (PY_DIR / ".verified").is_file():
        # --no-deps: playwright and pytest are the venv's own; only the plugin and its two helpers here.
        subprocess.run([sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "-q", "--no-deps",
                        "--target", str(PY_DIR), *PYTEST_PLAYWRIGHT], check=True)
        (PY_DIR / ".verified").write_text("\n".join(PYTEST_PLAYWRIGHT) + "\n")


def main(argv: list[str]) -> int:
    if argv[:1] != ["fetch"]:
        print("usage: python -m tests.fakes.playwright_runners fetch", file=sys.stderr)
        return 2
    fetch()
    print(f"@playwright/test {PLAYWRIGHT_TEST} in {NPM_DIR}; {', '.join(PYTEST_PLAYWRIGHT)} in {PY_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

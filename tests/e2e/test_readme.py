"""The README's and docs' shell examples, run as written against a live server.

The convention (stated in an HTML comment at the top of README.md): every ```sh or ```bash block of
README.md and docs/*.md runs, in order, in one bash shell per file, against a live glassdesk server
with its desktop, with 127.0.0.1:8080 (or localhost:8080) replaced by that server's port, in a
scratch directory that has docs/ in it. Each command must exit 0, and each curl must get a status
below 400, unless the line after the command documents an error as
``# {"error": {...}}   (STATUS)``: then the answer must be exactly that body with that status.
A block whose fence is preceded by ``<!-- illustrative: why -->`` is not run; nothing else is
skipped. Blocks in other languages are not run.

The parsing is pure (``blocks``, ``commands``, ``script``) and tested here without a server.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from desktop.session.manager import SessionManager
from desktop.session.stack import free_port
from tests.conftest import LiveServer, session_files

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RUNNABLE = {"sh", "bash"}
FENCE = re.compile(r"^```\s*([\w+-]*)")
ILLUSTRATIVE = re.compile(r"^<!--\s*illustrative:\s*(.+?)\s*-->\s*$")
DOCUMENTED_ERROR = re.compile(r'^#\s*(\{"error".*\})\s+\((\d{3})\)\s*$')
PORT = re.compile(r"\b(127\.0\.0\.1|localhost):8080\b")


@dataclass
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    illustrative: str | None  # why it is not run, or None: it runs


@dataclass
class Command:
    block: Block
    line: int
    text: str
    error: tuple[int, dict] | None = None  # the documented error answer: status and body
    comments: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.block.path.name}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file, each with the reason it is illustrative, if any."""
    lines = path.read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        start, lang = i, match.group(1).lower()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines))
        previous = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marked = ILLUSTRATIVE.match(previous.strip())
        found.append(Block(path, start + 1, lang, "\n".join(lines[start + 1:end]), marked and marked.group(1)))
        i = end + 1
    return found


def _complete(text: str) -> bool:
    """Is ``text`` a whole shell command (quotes closed, no trailing line continuation)?"""
    if text.rstrip().endswith("\\"):
        return False
    try:
        shlex.split(text, comments=True)
    except ValueError:  # "No closing quotation": the command goes on on the next line
        return False
    return True


def commands(block: Block) -> list[Command]:
    """The block's commands, joined over continuation lines and open quotes; a comment line after
    a command that shows an error answer becomes that command's expectation."""
    found: list[Command] = []
    pending: list[str] = []
    start = 0
    for offset, line in enumerate(block.text.splitlines()):
        number = block.line + 1 + offset
        if not pending:
            stripped = line.strip()
            if not stripped:
                continue
            if stripped.startswith("#"):
                documented = DOCUMENTED_ERROR.match(stripped)
                if found and documented:
                    found[-1].error = (int(documented.group(2)), json.loads(documented.group(1)))
                elif found:
                    found[-1].comments.append(stripped)
                continue
            start = number
        pending.append(line)
        joined = "\n".join(pending)
        if _complete(joined):
            found.append(Command(block, start, joined))
            pending = []
    assert not pending, f"{block.path.name}:{block.line}: a command never ends: {pending}"
    return found


# curl, as the examples call it, also says its HTTP status on stderr (after the command's own -w).
CURL = "curl() { command curl \"$@\" -w '%{stderr}\\n@@status %{http_code}\\n'; }"


def script(cmds: list[Command], port: int) -> str:
    """One bash script: each command between markers on stdout and stderr, then its exit code."""
    parts = ["set -o pipefail", CURL]
    for index, command in enumerate(cmds):
        text = PORT.sub(lambda m: f"{m.group(1)}:{port}", command.text)
        parts += [f"printf '\\n@@cmd {index}\\n'; printf '\\n@@cmd {index}\\n' >&2", text,
                  f"printf '\\n@@rc {index} %d\\n' $? >&2"]
    return "\n".join(parts) + "\n"


def split(stream: str) -> dict[int, str]:
    """What each command wrote, by its index (the text after its marker)."""
    pieces = re.split(r"^@@cmd (\d+)$", stream, flags=re.M)
    return {int(pieces[i]): pieces[i + 1] for i in range(1, len(pieces), 2)}


def problems(cmds: list[Command], stdout: str, stderr: str) -> list[str]:
    """Every command that did not run as written, with why."""
    outputs, errors, found = split(stdout), split(stderr), []
    for index, command in enumerate(cmds):
        err = errors.get(index)
        if err is None:
            found.append(f"{command.where}: never ran: {command.text!r}")
            continue
        rc = re.search(rf"^@@rc {index} (\d+)$", err, re.M)
        statuses = [int(s) for s in re.findall(r"^@@status (\d{3})$", err, re.M)]
        out = outputs.get(index, "").strip()
        said = f"{command.text!r}\n  stdout: {out[:600]}\n  stderr: {re.sub(r'@@.*', '', err).strip()[:600]}"
        if rc is None or rc.group(1) != "0":
            found.append(f"{command.where}: exit {rc.group(1) if rc else '?'}: {said}")
        elif command.error is not None:
            status, body = command.error
            try:
                answer = json.loads(out)
            except ValueError:
                answer = out
            if statuses != [status] or answer != body:
                found.append(f"{command.where}: documented {status} {json.dumps(body)}, got {statuses} {said}")
        elif any(s >= 400 or s == 0 for s in statuses):
            found.append(f"{command.where}: HTTP {statuses}: {said}")
    return found


# ------------------------------------------------------------------------- the parsing, no server


def test_the_convention_is_stated_at_the_top_of_the_readme():
    head = (REPO / "README.md").read_text()[:3000]
    assert "tests/e2e/test_readme.py" in head and "illustrative:" in head


def test_commands_join_continuations_and_open_quotes_and_take_documented_errors(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text('\n'.join([
        "<!-- illustrative: needs a thing -->", "```sh", "thing --do", "```", "",
        "```sh", "A=1   # a comment", "curl -s -X POST $GD/x \\", "  -d '{\"a\":", "  1}'",
        '# {"error":{"code":"nope","message":"no"}}   (404)', "# [1, 2]", "echo done", "```",
        "```json", "{}", "```"]))
    found = blocks(doc)
    assert [(b.lang, b.illustrative) for b in found] == [("sh", "needs a thing"), ("sh", None), ("json", None)]
    cmds = commands(found[1])
    assert [c.text.splitlines()[0] for c in cmds] == ["A=1   # a comment", "curl -s -X POST $GD/x \\", "echo done"]
    assert cmds[1].error == (404, {"error": {"code": "nope", "message": "no"}}) and cmds[1].line == 8
    assert cmds[0].error is None and cmds[2].error is None
    assert "127.0.0.1:9999/x" in script([Command(found[1], 1, "curl http://127.0.0.1:8080/x")], 9999)


def test_problems_are_found(tmp_path):
    block = Block(tmp_path, 1, "sh", "", None)
    ok, failed, refused, documented = (Command(block, n, f"c{n}") for n in range(4))
    documented.error = (404, {"error": {"code": "x"}})
    stdout = "@@cmd 0\n{}\n@@cmd 1\n\n@@cmd 2\n{}\n@@cmd 3\n{\"error\": {\"code\": \"x\"}}\n"
    stderr = ("@@cmd 0\n@@status 200\n@@rc 0 0\n@@cmd 1\n@@rc 1 7\n@@cmd 2\n@@status 422\n@@rc 2 0\n"
              "@@cmd 3\n@@status 404\n@@rc 3 0\n")
    found = problems([ok, failed, refused, documented], stdout, stderr)
    assert len(found) == 2 and "exit 7" in found[0] and "HTTP [422]" in found[1]


# ------------------------------------------------------------------------- the examples, live


@pytest.fixture(scope="module")
def readme_server(tmp_path_factory):
    """glassdesk up as the README assumes it: a server with its default desktop started, on a port
    of its own, with its own sessions and data."""
    from vision.app.service import Glassdesk
    from vision.config import VisionConfig
    from vision.http.app import Settings, create_app

    with session_files() as root:
        manager = SessionManager(root=root, max_sessions=3)
        port = free_port()
        data = tmp_path_factory.mktemp("readme-data")
        glassdesk = Glassdesk.build(manager, data_dir=data, config=VisionConfig(), strip=False)
        glassdesk.desktops.session(None)  # as `glassdesk up` does before it prints its links
        try:
            with LiveServer(create_app(manager, Settings(token=None, port=port, data_dir=str(data)), glassdesk),
                            port=port) as server:
                yield server
        finally:
            manager.close()


RUNS = [(path, b) for path in DOCUMENTS for b in blocks(path) if b.lang in RUNNABLE]


@pytest.mark.x11
@pytest.mark.timeout(900)  # a desktop started, a vision run and a QA suite among the examples
@pytest.mark.parametrize("path", sorted({p for p, _ in RUNS}), ids=lambda p: p.name)
def test_the_examples_run_as_written(readme_server, path):
    cmds = [c for p, b in RUNS if p == path and b.illustrative is None for c in commands(b)]
    if not cmds:
        return  # every block of this file is marked illustrative, each saying why
    with tempfile.TemporaryDirectory(prefix="glassdesk-readme-") as scratch:
        os.symlink(REPO / "docs", Path(scratch) / "docs")
        env = {k: v for k, v in os.environ.items() if not k.startswith("GLASSDESK_")}
        env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
        # Files, not pipes: what an example starts in the background keeps them open after bash ends.
        out, err = Path(scratch) / ".stdout", Path(scratch) / ".stderr"
        with out.open("w") as stdout, err.open("w") as stderr:
            process = subprocess.Popen(["bash", "-c", script(cmds, readme_server.port)], cwd=scratch, env=env,
                                       stdout=stdout, stderr=stderr, start_new_session=True)
            try:
                process.wait(timeout=600)
            finally:  # what the examples started in the background (the example site) ends with them
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        stdout, stderr = out.read_text(errors="replace"), err.read_text(errors="replace")
    found = problems(cmds, stdout, stderr)
    assert not found, "\n\n".join(found)

"""One run, as the run viewer shows it: a vision trace or a QA run turned into one document (a
dict, JSON on the wire) that ``vision/static/run.js`` renders, live in the console (``/runs/{id}``,
its files fetched from the API) or offline (``offline_html``: the same page, script and style
inlined, the document embedded with its images and chapters as data: URIs).

One template, two modes: the live page and the report are the same renderer over the same
document, so what the report shows is what the viewer shows. A run still running is ``live`` in its
document; the page then asks for it again with the ETag ``run_etag`` makes from the run's files
(a 304 costs a directory listing, not the document rebuilt), until it is not.

The document, per step: its title, who acted (the agent, the operator, a QA step), its chapter in
the film (read off the receipt's chapters.vtt: each chapter's title starts ``step N:``), its
before and after images with marks in display pixels (click points, paths, boxes), the model's
words or the QA step's assertion, errors, the console and network failures recorded at that step,
heals and retries, and a failed visual comparison's baseline, current and diff images with each
recorded region boxed and what the approval API needs. Nothing is drawn that the record does not
hold: a mark is an action's recorded pixel, a box a recorded box, a chapter a cue of the file.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shlex
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH
from desktop.errors import GlassdeskError
from vision.errors import InvalidRequest, TraceCorruptError
from vision.evidence.export import FORMATS
from vision.evidence.qa_runs import corrupt_if_malformed, derive_meta, reading_run
from vision.evidence.report import describe_action, heal_line
from vision.models.qa import QaRun, StepResult, TestCase, VerifyReport
from vision.trace.files import atomic_write
from vision.trace.records import FINAL_STATUSES, StepRecord, Trace, TraceMeta, VerifyResult

__all__ = ["parse_vtt", "trace_view", "qa_view", "offline_html", "write_report", "qa_run_list", "run_etag",
           "RUN_ID", "Files"]

STATIC = Path(__file__).parents[1] / "static"
# A run id as both stores make them (vision.trace.files.new_trace_id): checked before any lookup.
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# An offline report inlines a film up to this size; a larger one is linked (its name, beside the file).
INLINE_VIDEO_MAX = 8 * 1024 * 1024
_MEDIA = {".png": "image/png", ".mp4": "video/mp4", ".webm": "video/webm", ".vtt": "text/vtt",
          ".json": "application/json"}


def data_uri(data: bytes, suffix: str) -> str:
    """A file inlined into an offline page, typed by its suffix."""
    return f"data:{_MEDIA.get(suffix, 'application/octet-stream')};base64,{base64.b64encode(data).decode()}"
_STEP_TITLE = re.compile(r"step (\d+):")


# ------------------------------------------------------------------------------------ chapters



# The export formats (vision.evidence.export.FORMATS) as the viewer's links, for a trace or a QA run alike.
EXPORT_LABELS = {"yaml": "glassdesk qa suite", "playwright-ts": "Playwright (TypeScript)",
                 "playwright-py": "Playwright (Python)"}


def _export_links(base: str) -> list[dict]:
    return [{"label": EXPORT_LABELS[fmt], "href": f"{base}/export?format={fmt}"} for fmt in FORMATS]


def _seconds(stamp: str) -> float:
    parts = stamp.strip().split(":")
    total = 0.0
    for part in parts:
        total = total * 60 + float(part)
    return total


def parse_vtt(text: str) -> list[dict[str, Any]]:
    """A WebVTT file's cues as ``{start, end, title}`` (pure): what the receipt wrote in
    chapters.vtt (desktop.x11.receipt.chapters_vtt), read back rather than recomputed."""
    cues = []
    for block in re.split(r"\r?\n\r?\n", text.strip()):
        lines = [line for line in block.splitlines() if line.strip()]
        for i, line in enumerate(lines):
            if "-->" in line:
                start, _, end = line.partition("-->")
                cues.append({"start": _seconds(start), "end": _seconds(end.split()[0]),
                             "title": " ".join(lines[i + 1:])})
                break
    return cues


def _chapter_of(cues: list[dict], index: int) -> dict | None:
    """The cue whose title is ``step <index>: ...``: the flow and the loop title their chapters so."""
    for cue in cues:
        match = _STEP_TITLE.match(cue["title"])
        if match and int(match.group(1)) == index:
            return cue
    return None


# ------------------------------------------------------------------------------------ files

class Files:
    """Where the page finds a run's files: API URLs (live), or the bytes inlined as data: URIs
    (offline), or names beside the report (a report written into the run's directory)."""

    def __init__(self, url: Callable[[str], str], read: Callable[[str], Path] | None = None, *,
                 mode: str = "live", link: Callable[[str], str] | None = None):
        self.url, self.read, self.mode, self.link = url, read, mode, link or url

    def src(self, name: str | None, *, video: bool = False) -> str | None:
        if not name:
            return None
        # A page opened from a file is an origin of its own: Chromium loads images and a film beside
        # it, but not a <track> (text tracks are fetched same-origin), so chapters and captions go inline.
        beside_track = self.mode == "beside" and name.endswith(".vtt")
        if (self.mode != "inline" and not beside_track) or self.read is None:
            return self.url(name)
        try:
            path = self.read(name)
            if video and path.stat().st_size > INLINE_VIDEO_MAX:
                return self.link(name)
            data = path.read_bytes()
        except (OSError, GlassdeskError):
            # A file gone from the run is shown as missing: the report of damaged evidence still
            # renders, and its evidence check says what is wrong.
            return None
        return data_uri(data, path.suffix)


def _film(video_name: str | None, chapters_name: str | None, captions_name: str | None, files: Files,
          chapters_text: str | None, *, sha256: str | None, note: str) -> dict | None:
    if not video_name:
        return None
    return {"src": files.src(video_name, video=True), "name": video_name,
            "type": "video/webm" if video_name.endswith(".webm") else "video/mp4",
            "chapters_src": files.src(chapters_name), "captions_src": files.src(captions_name),
            "chapters": parse_vtt(chapters_text) if chapters_text else [], "sha256": sha256, "note": note}


# ------------------------------------------------------------------------------------ marks

def _box(value: Any) -> list[int] | None:
    """[x0, y0, x1, y1] from a recorded box: a list, or {x, y, width, height}."""
    if isinstance(value, (list, tuple)) and len(value) == 4 and all(isinstance(v, (int, float)) for v in value):
        return [round(v) for v in value]
    if isinstance(value, dict) and all(isinstance(value.get(k), (int, float)) for k in ("x", "y", "width", "height")):
        return [round(value["x"]), round(value["y"]), round(value["x"] + value["width"]),
                round(value["y"] + value["height"])]
    return None


def action_marks(actions: list[dict]) -> list[dict]:
    """An agent's actions as marks in display pixels (pure): a numbered point where each pointer
    action landed, a drag's path, a zoom's region."""
    marks = []
    for number, action in enumerate(actions, 1):
        kind = str(action.get("action", ""))
        tip = f"{number}. {describe_action(action)}"
        points = [[p["x"], p["y"]] for p in action.get("path") or []]
        if not points and action.get("x") is not None and action.get("y") is not None:
            points = [[action["x"], action["y"]]]
        if len(points) > 1:  # a drag: its path, and where it was released
            marks.append({"kind": "path", "points": points, "tip": tip})
            marks.append({"kind": "point", "action": "end", "x": points[-1][0], "y": points[-1][1], "label": "",
                          "tip": tip})
        if points:
            marks.append({"kind": "point", "action": kind, "x": points[0][0], "y": points[0][1], "label": str(number),
                          "tip": tip})
        if region := action.get("region"):
            marks.append({"kind": "box", "box": [region["x0"], region["y0"], region["x1"], region["y1"]], "tip": tip})
    return marks


# ------------------------------------------------------------------------------------ vision runs


def _time(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def _ms(value: int | None) -> str:
    return "–" if value is None else f"{value:,} ms"


def _trace_step(step: StepRecord, files: Files, t0: datetime, cues: list[dict]) -> dict:
    operator = step.by == "operator"
    offset = max(0.0, (step.started_at - t0).total_seconds())
    if operator:
        facts = f"+{offset:.1f} s · by the operator, during a take-over"
    else:
        facts = (f"+{offset:.1f} s · model {_ms(step.model_ms)} · exec {_ms(step.exec_ms)} · settle "
                 f"{_ms(step.settle_ms)} · {step.usage.input_tokens:,} in / {step.usage.output_tokens:,} out tokens"
                 + (" · no visible effect: the screen did not change" if step.no_effect else "")
                 + (f" · expectations: {sum(bool(c.get('passed')) for c in step.checks)} of {len(step.checks)} "
                    "held after it" if step.checks else ""))
    marks = action_marks(step.actions)
    images = []
    for which, name, label in (("before", step.before_png, "Before: what the model saw, and where it acted"),
                               ("after", step.after_png, "After: the settled screen")):
        if name:
            images.append({"label": label, "which": which, "src": files.src(f"{step.index}/{which}"),
                           "width": SCREEN_WIDTH, "height": SCREEN_HEIGHT, "marks": marks})
    errors = [f"{step.error.code}: {step.error.message}"] if step.error else []
    errors += [f"{c.name} {c.id}: {c.error}" for c in step.tool_calls if c.error]
    errors += [f"{r.call_id}: {r.error or 'failed'}" for r in step.results if not r.ok]
    heals = [step.error.message] if step.error and step.error.code == "desktop_healed" else []
    actions = [describe_action(a) for a in step.actions]
    # A person's step is what they did; an agent's, what the model said it was doing.
    title = ("; ".join(actions) if operator else " ".join(step.text.split())[:160]) or "; ".join(actions) \
        or "(no action)"
    return {
        "index": step.index, "id": f"step-{step.index}", "by": step.by, "title": title,
        "status": "failed" if step.failed else "ok", "facts": facts, "url": step.url,
        "started_at": _time(step.started_at), "chapter": _chapter_of(cues, step.index),
        "images": images, "text_label": "Operator" if operator else "Model", "text": step.text,
        "reasoning": step.reasoning, "actions": actions,
        "executed": "\n".join(shlex.join(cmd) for cmd in step.argv),
        "outputs": [f"{r.call_id}: {r.output}" for r in step.results if r.output],
        "errors": errors, "heals": [{"text": h} for h in heals], "console": [], "network": [],
        "retries": 0, "comparisons": [],
    }


def trace_view(trace: Trace, verification: VerifyResult, files: Files, chapters_text: str | None = None) -> dict:
    """A vision run as the viewer's document (pure): ``files`` locates the step images (named
    ``<index>/<before|after>``) and the receipt's files; ``chapters_text`` is its chapters.vtt."""
    meta, steps = trace.meta, trace.steps
    seal = trace.video
    film = _film(seal.file if seal else None, seal.chapters_file if seal else None,
                 seal.captions_file if seal else None, files, chapters_text, sha256=seal.sha256 if seal else None,
                 note=(f"{seal.duration_s:.1f} s · {seal.chapters} chapters · {seal.clicks} clicks marked"
                       + "".join(f" · {n}" for n in seal.notes)) if seal else "")
    cues = film["chapters"] if film else []
    operator = sum(s.by == "operator" for s in steps)
    usage = meta.usage
    facts = [
        [f"{meta.steps}" + (f" / {meta.max_steps + operator}" if meta.max_steps else ""),
         f"steps ({operator} by the operator)" if operator else "steps"],
        [f"{meta.duration_s:.1f} s" if meta.duration_s is not None else "–", "duration"],
        [f"{usage.input_tokens:,} / {usage.output_tokens:,}", "input / output tokens"],
    ]
    if verification.ok:
        film_word = " and the video's" if seal is not None else ""
        # A finished run's meta.json (status, answer, instruction) is sealed too; a running one's is not yet.
        sealed = (", the run's record (meta.json, sealed) and no file beside them" if meta.finished_at is not None
                  else "; the run's record is sealed when it ends")
        evidence = {"ok": True, "text": f"Evidence verified: hash chain and screenshot SHA-256 of "
                                        f"{verification.steps_checked} steps{film_word} intact{sealed}."}
    else:
        where = f" at step {verification.broken_index}" if verification.broken_index is not None else ""
        evidence = {"ok": False, "text": f"Evidence broken{where}: {verification.reason}"}
    tid = quote(meta.trace_id)
    exports = _export_links(f"/api/v1/traces/{tid}")
    exports += [{"label": "JUnit XML", "href": f"/api/v1/traces/{tid}/junit.xml"},
                {"label": "trace JSON", "href": f"/api/v1/traces/{tid}"},
                {"label": "verify", "href": f"/api/v1/traces/{tid}/verify"}]
    return {
        "kind": "vision", "id": meta.trace_id, "title": meta.instruction,
        "status": shown_status(meta.status, verification.ok, meta.status not in FINAL_STATUSES,
                               checked=meta.verified is True),
        "live": meta.status not in FINAL_STATUSES,
        "verdict": run_verdict(meta),
        "subtitle": " · ".join(p for p in (f"vision run {meta.trace_id}", meta.model,
                                           f"session {meta.session_id}" if meta.session_id else "",
                                           f"started {meta.started_at.strftime('%Y-%m-%d %H:%M:%S UTC')}") if p),
        "facts": facts, "answer": meta.answer,
        "error": f"{meta.error.code}: {meta.error.message}" if meta.error else None,
        "evidence": evidence, "video": film, "exports": exports,
        "screen": [SCREEN_WIDTH, SCREEN_HEIGHT],
        "steps": [_trace_step(s, files, meta.started_at, cues) for s in steps],
    }


# ------------------------------------------------------------------------------------ QA runs


def _artifact_name(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("name")
    return value if isinstance(value, str) and value.endswith(".png") else None


def _heal(healed: dict, index: int, run: QaRun, files: Files, known: set[str]) -> dict:
    """A heal as the record has it, whatever its fields: its line, the images it names (artifacts
    of the run), its recorded and healed pixels and boxes."""
    marks = []
    for key, label in (("recorded_at", "recorded"), ("point", "healed")):
        point = healed.get(key)
        if isinstance(point, list) and len(point) == 2:
            marks.append({"kind": "point", "action": "heal", "x": point[0], "y": point[1], "label": label,
                          "tip": f"{label} pixel"})
    for key, label in (("recorded_box", "recorded"), ("box", "healed")):
        box = _box(healed.get(key))
        if box:
            marks.append({"kind": "box", "box": box, "tip": f"{label} box", "tone": label})
    images: list[dict] = []
    for key, value in healed.items():
        name = _artifact_name(value)
        if name and name in known:
            images.append({"label": f"heal: {key}", "src": files.src(name), "width": SCREEN_WIDTH,
                           "height": SCREEN_HEIGHT, "marks": []})  # the boxes are drawn into these images
    facts = {k: v for k, v in healed.items() if isinstance(v, (str, int, float)) and not _artifact_name(v)
             and k not in ("failed", "by", "matched")}
    return {"text": heal_line(index, healed), "facts": facts, "images": images, "marks": marks}


def _comparison(compared: dict, run: QaRun, files: Files, *, approvable: bool) -> list[dict]:
    """A visual comparison's shots: baseline, current and diff with every recorded region boxed."""
    out = []
    for shot in compared.get("shots") or []:
        regions = shot_regions(shot)
        boxes = [{"kind": "box", "box": r["box"], "tone": "region", "tip": f"a region of {r['pixels']} differing "
                  "pixels" + (" (the largest)" if i == 0 else "")} for i, r in enumerate(regions)]
        images = []
        for key, label in (("baseline_image", "Baseline"), ("current_image", "Current"), ("diff_image", "Difference")):
            name = _artifact_name(shot.get(key))
            if name:
                images.append({"label": label, "src": files.src(name), "marks": boxes, "natural": True})
        out.append({
            "name": shot.get("name"), "passed": bool(shot.get("passed")), "reason": shot.get("reason"),
            "diff_pixels": shot.get("diff_pixels", 0), "diff_percentage": shot.get("diff_percentage", 0.0),
            "regions": shot.get("regions", 0), "largest_region": shot.get("largest_region"),
            "boxed": len(boxes), "images": images,
        })
    if not out:
        return []
    return [{"baseline_id": compared.get("baseline_id"), "baseline_version": compared.get("baseline_version"),
             "passed": bool(compared.get("passed")), "reason": compared.get("reason"), "shots": out,
             "test_run_id": run.test_run_id, "approvable": approvable and not compared.get("passed")}]


def shot_regions(shot: dict) -> list[dict]:
    """A compared shot's regions to box (pure): ``diff_regions`` as recorded, or, in a record made
    before it was (it held only ``largest_region``), that one region. A region without a usable
    box is skipped rather than drawn somewhere."""
    listed = shot.get("diff_regions")
    if not isinstance(listed, list) or not listed:
        listed = [shot["largest_region"]] if isinstance(shot.get("largest_region"), dict) else []
    out = []
    for region in listed:
        box = _box(region.get("box")) if isinstance(region, dict) else None
        if box:
            out.append({"box": box, "pixels": region.get("pixels", 0)})
    return out


def _console_lines(entries: list | None) -> list[str]:
    lines = []
    for entry in entries or []:
        if isinstance(entry, dict):
            text = entry.get("text") or entry.get("message") or json.dumps(entry, ensure_ascii=False)
            lines.append(f"{entry.get('level') or entry.get('type') or ''}: {text}".strip(": ")[:500])
        else:
            lines.append(str(entry)[:500])
    return lines


def _network_lines(entries: list | None) -> list[str]:
    out = []
    for entry in entries or []:
        if isinstance(entry, dict):
            out.append(" ".join(str(entry.get(k)) for k in ("method", "status", "url", "error", "failure")
                                if entry.get(k) is not None)[:500])
        else:
            out.append(str(entry)[:500])
    return out


def _qa_step(run: QaRun, case: TestCase, step: StepResult, files: Files, cues: list[dict], known: set[str],
             several: int | None) -> dict:
    """``several``: the case's number when the run has more than one case with steps (their step
    numbers repeat, and a film's "step N" chapter cannot say which case it is), else None."""
    detail = dict(step.detail)
    marks = []
    point = detail.get("point")
    if isinstance(point, list) and len(point) == 2:
        marks.append({"kind": "point", "action": step.action, "x": point[0], "y": point[1], "label": str(step.index),
                      "tip": f"{step.action} at ({point[0]}, {point[1]})"})
    element_box = _box((detail.get("element") or {}).get("box")) if isinstance(detail.get("element"), dict) else None
    if element_box:
        marks.append({"kind": "box", "box": element_box, "tip": "the element acted on", "tone": "element"})
    heals = []
    healed = detail.get("healed")
    if isinstance(healed, dict):
        heals.append(_heal(healed, step.index, run, files, known))
        marks += heals[-1]["marks"]
    images = []
    for which, name, label in (("before", step.before, "Before"), ("after", step.after, "After")):
        if name:
            images.append({"label": label, "which": which, "src": files.src(name), "width": SCREEN_WIDTH,
                           "height": SCREEN_HEIGHT, "marks": marks if which == "before" else []})
    comparisons = _comparison(detail, run, files, approvable=step.status == "failed") \
        if detail.get("baseline_id") and detail.get("shots") else []
    shown = {"point", "element", "healed", "console", "network", "failed_requests", "shots"}
    rest = {k: v for k, v in detail.items() if k not in shown}
    if comparisons:
        rest = {k: v for k, v in rest.items() if k in ("baseline_id", "baseline_version", "diff_pixels", "limits")}
    prefix = f"{case.name} · " if several is not None else ""
    return {
        "index": step.index,
        "id": f"step-{step.index}" if several is None else f"case-{several}-step-{step.index}",
        "by": "qa", "title": f"{prefix}{step.name}", "status": step.status,
        "facts": f"{step.action} · {step.status} · {step.duration_ms:,} ms"
                 + (f" · {step.attempts} attempts" if step.attempts > 1 else ""),
        "chapter": _chapter_of(cues, step.index) if several is None else None, "images": images,
        "text_label": "Assertion" if step.action == "assert" else "Step", "text": step.name,
        "detail": json.dumps(rest, indent=1, ensure_ascii=False)[:4000] if rest else "",
        "errors": [step.failure_reason] if step.failure_reason else [],
        "console": _console_lines(detail.get("console")),
        "network": _network_lines(detail.get("network") or detail.get("failed_requests")),
        "heals": heals, "retries": max(0, step.attempts - 1), "comparisons": comparisons,
    }


def _verb_step(run: QaRun, case: TestCase, files: Files, cues: list[dict], compared: list[str]) -> dict:
    """A verb call with no flow steps: one step, its screenshots and its comparison."""
    result = run.result or {}
    comparisons = _comparison(result, run, files, approvable=run.status == "failed") \
        if run.verb == "compare_visual_regression" else []
    images: list[dict] = [{"label": name, "src": files.src(name), "marks": [], "natural": True}
              for name in case.screenshots if name not in compared]
    return {
        "index": 1, "id": "step-1", "by": "qa", "title": case.name, "status": case.status,
        "facts": f"{run.verb} · {case.status} · {case.duration_ms:,} ms", "chapter": _chapter_of(cues, 1),
        "images": images, "text_label": "Verb", "text": run.verb,
        "errors": [case.failure_reason] if case.failure_reason else [],
        "console": _console_lines(result.get("console_errors")) or _console_lines(case.console_logs),
        "network": _network_lines(result.get("failed_requests")), "heals": [], "retries": 0,
        "comparisons": comparisons, "detail": "",
    }


def qa_view(run: QaRun, verification: VerifyReport, files: Files, chapters_text: str | None = None) -> dict:
    """A QA run as the viewer's document (pure but for ``files``)."""
    known = {a.name for group in (run.artifacts.screenshots, run.artifacts.other, run.artifacts.videos) for a in group}
    video = run.artifacts.videos[0] if run.artifacts.videos else None
    tracks = {a.kind: a.name for a in run.artifacts.other if a.kind in ("chapters", "captions")}
    film = _film(video.name if video else None, tracks.get("chapters"), tracks.get("captions"), files, chapters_text,
                 sha256=video.sha256 if video else None, note="")
    cues = film["chapters"] if film else []
    several = sum(bool(c.steps) for c in run.test_cases) > 1
    compared = [_artifact_name(s.get(k)) for s in (run.result or {}).get("shots") or []
                for k in ("baseline_image", "current_image", "diff_image")]
    steps = []
    for number, case in enumerate(run.test_cases, 1):
        if case.steps:
            steps += [_qa_step(run, case, s, files, cues, known, number if several else None) for s in case.steps]
        else:
            steps.append(_verb_step(run, case, files, cues, [c for c in compared if c]))
    result = run.result or {}
    heals = [h for h in result.get("heals") or [] if isinstance(h, dict)]
    healed_steps = {s["index"] for s in steps if s["heals"]}
    for heal in heals:  # a heal the steps did not carry (the run's list): shown on its step
        index = heal.get("step")
        target = next((s for s in steps if s["index"] == index), None)
        if target is not None and index not in healed_steps:
            target["heals"].append(_heal(heal, target["index"], run, files, known))
    evidence = ({"ok": True, "text": f"Evidence verified: hash chain, meta and every artifact's SHA-256 intact "
                                     f"({verification.records_checked} records, {verification.files_checked} files)."}
                if verification.ok else {"ok": False, "text": "Evidence broken: " + "; ".join(verification.problems)})
    rid = quote(run.test_run_id)
    exports = []
    if run.verb == "verify_user_flow":
        exports = _export_links(f"/api/v1/qa/runs/{rid}")
    exports += [{"label": "JUnit XML", "href": f"/api/v1/qa/runs/{rid}/junit.xml"},
                {"label": "run JSON", "href": f"/api/v1/qa/runs/{rid}"},
                {"label": "verify", "href": f"/api/v1/qa/runs/{rid}/verify"}]
    reason = next((c.failure_reason for c in run.test_cases if c.failure_reason), None)
    return {
        "kind": "qa", "id": run.test_run_id, "title": run.name,
        "status": shown_status(run.status, verification.ok, run.status == "running"),
        "live": run.status == "running",
        "subtitle": " · ".join(p for p in (f"QA run {run.test_run_id}", run.verb,
                                           f"session {run.session_id}" if run.session_id else "",
                                           f"started {run.timestamp}") if p),
        # Running, no case is counted yet (its record comes at the end): the steps so far instead.
        "facts": [[str(len(steps)), "steps so far"], ["–", "duration"]] if run.status == "running" else
                 [[str(run.summary.total), "cases"], [str(run.summary.passed), "passed"],
                  [str(run.summary.failed + run.summary.error), "failed"],
                  [f"{(run.duration_ms or 0) / 1000:.1f} s", "duration"]],
        "answer": None, "error": reason if run.status != "passed" else None,
        "evidence": evidence, "video": film, "exports": exports, "screen": [SCREEN_WIDTH, SCREEN_HEIGHT],
        "steps": steps,
        "console": _console_lines(result.get("page_errors")),
    }


# ------------------------------------------------------------------------------------ services


def _read_text(path: Path | None) -> str | None:
    try:
        return path.read_text(encoding="utf-8") if path else None
    except (OSError, UnicodeDecodeError):
        return None


def vision_run_view(glassdesk, trace_id: str, mode: str = "live") -> dict:
    """``glassdesk``: vision.app.service.Glassdesk (not imported: it is the service this serves)."""
    trace = glassdesk.trace(trace_id)
    tid = quote(trace_id)

    def url(name: str) -> str:
        if "/" in name:
            index, which = name.split("/")
            return f"/api/v1/traces/{tid}/steps/{index}/{which}.png"
        return f"/api/v1/traces/{tid}/video/{quote(name)}"

    def read(name: str) -> Path:
        if "/" in name:
            index, which = name.split("/")
            return glassdesk.step_image(trace_id, int(index), which)
        return glassdesk.video_file(trace_id, name)

    chapters = None
    if trace.video is not None:
        try:
            chapters = _read_text(glassdesk.video_file(trace_id, trace.video.chapters_file))
        except Exception:  # a missing file: verify says so; the viewer shows the film without chapters
            chapters = None
    try:
        return trace_view(trace, glassdesk.verify(trace_id), Files(url, read, mode=mode), chapters)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        # A record that parses but has the wrong shape (an edited action): damaged evidence, not a fault.
        raise TraceCorruptError(f"trace {trace_id}: its records cannot be shown ({type(exc).__name__}: "
                                f"{str(exc)[:300]}); verifying the trace says where") from None


def qa_run_view(qa, test_run_id: str, mode: str = "live") -> dict:
    """``qa``: vision.qa.service.QaService (not imported: the loop imports this module for write_report)."""
    run = qa.run(test_run_id)
    rid = quote(test_run_id)

    def url(name: str) -> str:
        return f"/api/v1/qa/runs/{rid}/artifacts/{quote(name)}"

    chapters = next((a.name for a in run.artifacts.other if a.kind == "chapters"), None)
    text = None
    if chapters:
        try:
            text = _read_text(qa.artifact(test_run_id, chapters))
        except Exception:
            text = None
    files = Files(url, lambda name: qa.artifact(test_run_id, name), mode=mode)
    verification = qa.verify(test_run_id)
    if run.status == "running":
        run = with_steps_so_far(run, qa.runs.records(test_run_id))
    with reading_run(test_run_id), corrupt_if_malformed():  # a detail of the wrong shape: qa_run_corrupt
        view = qa_view(run, verification, files, text)
    _mark_approved(view, getattr(qa, "baselines", None))
    return view


def with_steps_so_far(run: QaRun, records: list[dict]) -> QaRun:
    """A running flow as far as it has gone (pure): its case record, which the steps are read from,
    is written only when the flow ends, but each step is recorded as it is done (a ``step`` record:
    vision.qa.flow), so a viewer watching the run shows those as the case's steps until then."""
    if run.test_cases:
        return run
    # The record's own ``index`` is its place in the manifest (RunWriter.record sets it over the
    # step's): a flow records each step once, in order, when it is done, so the nth step record is
    # step n.
    try:
        steps = [StepResult.model_validate({k: v for k, v in r.items() if k in StepResult.model_fields}
                                           | {"index": number})
                 for number, r in enumerate((r for r in records if r.get("kind") == "step"), 1)]
    except ValueError:  # a step record of the wrong shape: the finished run's record says what it is
        return run
    if not steps:  # a verb without steps (a comparison): its one step is shown when it is done
        return run
    # Constructed, not validated: "running" is no case's status in an answer, only here.
    case = TestCase.model_construct(name=run.name, status="running",  # type: ignore[arg-type]
                                    duration_ms=0, screenshots=[],
                                    console_logs=[], failure_reason=None, steps=steps)
    return run.model_copy(update={"test_cases": [case]})


def _mark_approved(view: dict, baselines) -> None:
    """A comparison whose run was approved already says so, with the version it became (read off
    the baseline's versions, ``approved_from``), rather than offering to approve it again."""
    for step in view["steps"]:
        for comparison in step["comparisons"]:
            try:
                versions = baselines.versions(comparison["baseline_id"]) if baselines is not None else []
            except GlassdeskError:  # the baseline is gone: nothing to approve into
                comparison["approvable"] = False
                continue
            done = next((v.version for v in versions if v.approved_from == comparison["test_run_id"]), None)
            if done is not None:
                comparison["approved_as"] = done
                comparison["approvable"] = False


def qa_run_list(qa, limit: int = 50) -> list[dict]:
    """The latest QA runs, newest first (their ids begin with their start time), each as its head
    says: for the console's list, every one opening in the viewer. A run whose records do not make
    a head is listed by id with the status ``corrupt``: the viewer and verify say what is wrong."""
    out = []
    for run_id in qa.runs.list_ids()[:max(1, min(limit, 500))]:
        try:
            meta = derive_meta(qa.runs.records(run_id))
        except Exception:
            meta = {"test_run_id": run_id, "status": "corrupt"}
        out.append({key: meta.get(key) for key in ("test_run_id", "verb", "name", "session_id", "timestamp",
                                                    "status", "duration_ms")})
    return out


def _listing(directory: Path) -> list[tuple]:
    """Each file of a directory as (name, inode, size, mtime): what changes when a record is appended
    (size), a file is replaced atomically (inode) or added (name)."""
    try:
        with os.scandir(directory) as entries:
            out = []
            for entry in entries:
                st = entry.stat(follow_symlinks=False)
                out.append((entry.name, st.st_ino, st.st_size, st.st_mtime_ns))
    except OSError:
        return []
    return sorted(out)


def run_etag(glassdesk, run_id: str) -> str | None:
    """A validator of ``run_view``'s document without building it: a hash of the listing of the
    run's directory (and, for a QA run, of the baselines', whose versions say whether a comparison
    was approved already). The document is a function of those files: a viewer polling a running
    run gets a 304 for the price of a directory listing, instead of the document rebuilt, every
    screenshot re-hashed by the evidence check, each second. None: no such run (the document's
    own lookup says why)."""
    if not RUN_ID.fullmatch(run_id or ""):
        return None
    try:
        trace_dir, run_dir = glassdesk.store.trace_dir(run_id), glassdesk.qa.runs.run_dir(run_id)
    except (GlassdeskError, ValueError):  # an id one store refuses (a dot): its lookup answers as it does
        return None
    if trace_dir.is_dir():
        parts: list = ["vision", _listing(trace_dir)]
    else:
        if not run_dir.is_dir():
            return None
        baselines = getattr(glassdesk.qa.baselines, "root", None)
        parts = ["qa", _listing(run_dir), _listing(baselines) if baselines else []]
    digest = hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]
    return f'"{digest}"'


def run_view(glassdesk, run_id: str, mode: str = "live") -> dict:
    """A vision run's or a QA run's document, by its id (both stores make ids the same way)."""
    from vision.errors import TraceNotFoundError

    if not RUN_ID.fullmatch(run_id or ""):
        raise InvalidRequest(f"{run_id!r} is not a run id")
    try:
        return vision_run_view(glassdesk, run_id, mode)
    except TraceNotFoundError:
        return qa_run_view(glassdesk.qa, run_id, mode)


# ------------------------------------------------------------------------------------ offline


def _script_json(view: dict) -> str:
    # Inside <script>, "</" would end the element and "<!--" open a comment: escaped in the JSON.
    return json.dumps(view, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e") \
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def offline_html(view: dict) -> str:
    """The viewer as one self-contained file: its page with the style and script inlined and the
    document embedded (pure but for reading the three static files)."""
    page = (STATIC / "run.html").read_text(encoding="utf-8")
    css = (STATIC / "run.css").read_text(encoding="utf-8")
    js = (STATIC / "run.js").read_text(encoding="utf-8").replace("</script", "<\\/script")
    icon = (STATIC / "favicon.svg").read_bytes()
    page = page.replace('href="/console/assets/favicon.svg"',
                        f'href="data:image/svg+xml;base64,{base64.b64encode(icon).decode()}"')
    page = page.replace('<link rel="stylesheet" href="/console/assets/run.css">', f"<style>{css}</style>")
    page = page.replace('<script type="module" src="/console/assets/run.js"></script>',
                        f'<script type="application/json" id="run-data">{_script_json(view)}</script>'
                        f'<script type="module">{js}</script>')
    title = f"{view.get('status', '')} · {str(view.get('title', ''))[:80]}"
    return page.replace("<title>glassdesk run</title>", f"<title>{_escape(title)}</title>")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# The statuses that claim success: shown only when the evidence behind them holds.
SUCCESS_STATUSES = frozenset({"done", "done_after_heal", "passed"})


def shown_status(claimed: str, verified: bool, running: bool, *, checked: bool = True) -> str:
    """The status a run's page shows in its badge (pure): what its record claims, unless it claims
    success and the evidence does not hold (or was not checked), or nothing checked the success
    itself (``checked``: a vision run's expectations held; a QA run's assertions are its checks):
    then "unverified" (a forged meta.json said "done" in green beside "Evidence broken"; a model's
    done on a form it typed nothing into said "done" in green). A failure is shown as claimed; a
    running run's record is not sealed yet and shows as it is."""
    return "unverified" if claimed in SUCCESS_STATUSES and not (verified and checked) and not running else claimed


def run_verdict(meta: TraceMeta) -> dict | None:
    """What was checked of a finished vision run when its model said done (pure): its expectations
    one by one, or, when it carried none, that its done is the model's word. None while it runs
    or when it ended before the model said done (its status says why)."""
    checks = [{"text": f"{c.get('check')}: {c.get('saw')}", "passed": bool(c.get("passed"))} for c in meta.checks]
    if meta.verified is True:
        return {"ok": True, "checks": checks,
                "text": f"Verified: {len(checks)} of {len(checks)} expectations held when the model said done."}
    if meta.verified is False:
        failed = sum(not c["passed"] for c in checks)
        return {"ok": False, "checks": checks,
                "text": f"Failed check: the model said done, but {failed} of {len(checks)} expectations did not hold."}
    if meta.status in SUCCESS_STATUSES:
        return {"ok": None, "checks": [],
                "text": "Unverified: the run carried no expectation (expect), so its done is the model's word."}
    return None


def write_report(store, trace_id: str) -> Path:
    """The offline viewer written into the trace's directory as ``report.html`` (``store``: a
    vision.trace.store.TraceStore): the screenshots, the film and its tracks are linked by their
    names beside it rather than inlined, so a report of every run costs no copy of its images."""
    trace = store.load(trace_id)
    names = {f"{s.index}/before": s.before_png for s in trace.steps} | \
        {f"{s.index}/after": s.after_png for s in trace.steps}

    def url(name: str) -> str:
        return quote(names.get(name) or name)

    chapters = None
    if trace.video is not None:
        chapters = _read_text(store.trace_dir(trace_id) / trace.video.chapters_file)
    files = Files(url, lambda name: store.trace_dir(trace_id) / Path(name).name, mode="beside")
    view = trace_view(trace, store.verify(trace_id), files, chapters)
    path = store.trace_dir(trace_id) / "report.html"
    atomic_write(path, offline_html(view).encode("utf-8"))
    return path

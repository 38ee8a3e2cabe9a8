"""Renderers of a trace for people and for CI: pure functions from (meta, steps) to text.

``render_html`` is one self-contained page (inline CSS, no scripts, no external resources) that
shows each step's screenshots with a marker where each pointer action landed, what the model said,
the actions in display pixels and the exact xdotool commands that ran. ``render_junit`` turns a run
into JUnit XML, one test case per step plus one for the outcome. The trace's report, served and
written beside it, is the run viewer's offline form (vision.runview); ``render_html`` is the
former static page, whose style and markers the QA suite report (vision.qa.runs) still uses.
"""

from __future__ import annotations

import html
import json
import re
import shlex
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

from desktop.actions import SCREEN_HEIGHT, SCREEN_WIDTH
from vision.trace.records import StepRecord, TraceMeta, VerifyResult, VideoSeal

#: (step index, "before" | "after") -> URL of that screenshot
ImageUrl = Callable[[int, str], str]


def api_image_url(trace_id: str) -> ImageUrl:
    """Screenshot URLs as the REST API serves them."""
    return lambda index, which: f"/api/v1/traces/{quote(trace_id)}/steps/{index}/{which}.png"


# ----------------------------------------------------------------------------------------- wording


def describe_action(action: dict[str, Any], *, redact: bool = False) -> str:
    """One readable line for an action dict in display pixels, e.g. ``ctrl+right click at (960, 540)``.

    ``redact`` leaves out what the page or the model wrote (typed text is only counted, an answer or
    a reason is dropped, long key lists are cut): for the on-desktop strip, which is in the
    screenshots, where a text-matching model must not find page words, and where secrets must not
    show."""
    rest = dict(action)
    kind = str(rest.pop("action", "?")).replace("_", " ")
    modifiers = rest.pop("modifiers", None) or []
    button = rest.pop("button", None)
    if button not in (None, "left"):
        kind = f"{button} {kind}"
    words = ["+".join([*modifiers, kind])]
    if "direction" in rest:
        words.append(f"{rest.pop('direction')} ×{rest.pop('amount', '?')}")
    if rest.get("x") is not None and rest.get("y") is not None:
        words.append(f"at ({rest.pop('x')}, {rest.pop('y')})")
    rest = {k: v for k, v in rest.items() if v is not None}
    if "path" in rest:
        path = rest.pop("path")
        points = [f"({p['x']}, {p['y']})" for p in path]
        words.append(" → ".join(points) if len(points) <= 4
                     else f"{points[0]} → {points[-1]} via {len(points) - 2} points")
    if "keys" in rest:
        keys = rest.pop("keys")
        keys = " ".join(keys) if isinstance(keys, list) else str(keys)
        words.append(keys[:40] if redact else keys)
    if "text" in rest:
        text = str(rest.pop("text"))
        if redact:
            words.append(f"{len(text)} character{'s' if len(text) != 1 else ''}")
        else:
            words.append(json.dumps(text if len(text) <= 200 else text[:200] + "…", ensure_ascii=False))
    if "duration_ms" in rest:
        words.append(f"{rest.pop('duration_ms') / 1000:g} s")
    if "region" in rest:
        r = rest.pop("region")
        words.append(f"[{r['x0']}, {r['y0']}, {r['x1']}, {r['y1']}]")
    if redact:
        rest = {k: v for k, v in rest.items() if k not in ("answer", "reason")}
    words += [f"{k}={v}" if k not in ("answer", "reason") else f"— {v}" for k, v in rest.items()]
    return " ".join(words)


def _summary(step: StepRecord) -> str:
    line = "; ".join(describe_action(a) for a in step.actions) or "no action"
    return line if len(line) <= 120 else line[:119] + "…"


def _ms(value: int | None) -> str:
    return "–" if value is None else f"{value:,} ms"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    minutes, secs = divmod(seconds, 60)
    return f"{int(minutes)} min {secs:.1f} s" if minutes else f"{secs:.1f} s"


def _pct(value: float, size: int) -> str:
    return f"{value / size * 100:.3f}%"


# ------------------------------------------------------------------------------------------- HTML

_CSS = """
*{box-sizing:border-box}
body{margin:0;background:#eef0f3;color:#1c2330;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,\
"Helvetica Neue",Arial,sans-serif}
header,main{max-width:1400px;margin:0 auto;padding:20px 28px}
header{padding-top:28px}
h1{font-size:22px;margin:0 0 6px;font-weight:650;white-space:pre-wrap;overflow-wrap:anywhere}
h2{font-size:17px;margin:0}
h3{font-size:12px;text-transform:uppercase;letter-spacing:.06em;color:#5b6472;margin:14px 0 4px}
.sub{color:#5b6472;font-size:13px}
.badge{display:inline-block;padding:1px 9px;border-radius:999px;font-size:12px;font-weight:650;color:#fff;\
background:#5b6472;vertical-align:middle}
.badge.done{background:#1a7f37}.badge.running{background:#0969da}.badge.cancelled{background:#6e7781}
.badge.failed,.badge.max_steps,.badge.budget_exceeded{background:#cf222e}.badge.needs_confirmation{background:#bf8700}
.badge.interrupted{background:#bc4c00}
.totals{display:flex;flex-wrap:wrap;gap:8px 28px;margin:14px 0 0;padding:0;list-style:none}
.totals li b{display:block;font-size:18px}
.totals li span{color:#5b6472;font-size:12px}
.box{border-radius:6px;padding:10px 14px;margin:14px 0 0;white-space:pre-wrap;overflow-wrap:anywhere}
.answer{background:#dafbe1;border:1px solid #9be9a8}
.error{background:#ffebe9;border:1px solid #ff8182;color:#82071e}
.verified{background:#ddf4ff;border:1px solid #80ccff}
.step{background:#fff;border:1px solid #d5d9df;border-radius:8px;margin:0 0 22px;overflow:hidden}
.step.failed{border-color:#ff8182;box-shadow:0 0 0 1px #ff8182}
.step>.head{display:flex;flex-wrap:wrap;align-items:baseline;gap:6px 16px;padding:10px 16px;\
border-bottom:1px solid #e4e7eb;background:#f8f9fb}
.metrics{color:#5b6472;font-size:13px;font-variant-numeric:tabular-nums}
.shots{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:12px;padding:12px 16px 0}
figure{margin:0}
figcaption{font-size:12px;color:#5b6472;margin:0 0 4px}
.shot{position:relative;line-height:0;border:1px solid #d5d9df;background:#000}
.shot img{display:block;width:100%;height:auto}
.shot svg{position:absolute;inset:0;width:100%;height:100%;pointer-events:none;overflow:visible}
.shot polyline{fill:none;stroke:#ff1744;stroke-width:3;stroke-linejoin:round;stroke-dasharray:8 4;\
filter:drop-shadow(0 0 1px #fff)}
.mark{position:absolute;width:24px;height:24px;transform:translate(-50%,-50%);\
border:2.5px solid #ff1744;border-radius:50%;
 box-shadow:0 0 0 1.5px rgba(255,255,255,.95),inset 0 0 0 1.5px rgba(255,255,255,.8);pointer-events:none}
/* crosshair ticks outside the ring: the exact point stays visible inside it */
.mark::before,.mark::after{content:"";position:absolute;left:50%;top:50%}
.mark::before{width:2px;height:40px;margin:-20px 0 0 -1px;background:linear-gradient(#ff1744 0 9px,\
transparent 9px 31px,#ff1744 31px)}
.mark::after{width:40px;height:2px;margin:-1px 0 0 -20px;background:linear-gradient(90deg,#ff1744 0 9px,\
transparent 9px 31px,#ff1744 31px)}
.mark.move{border-style:dashed}
.mark.scroll{border-color:#8250df}
.mark.scroll::before{background:linear-gradient(#8250df 0 9px,transparent 9px 31px,#8250df 31px)}
.mark.scroll::after{background:linear-gradient(90deg,#8250df 0 9px,transparent 9px 31px,#8250df 31px)}
.mark.scroll b{background:#8250df}
.mark.end{width:12px;height:12px;background:#ff1744}
.mark.end::before,.mark.end::after{content:none}
.mark b{position:absolute;left:18px;top:-17px;min-width:18px;padding:0 5px;border-radius:9px;\
background:#ff1744;color:#fff;
 font:700 12px/18px system-ui,sans-serif;text-align:center;box-shadow:0 0 0 1px #fff}
.region{position:absolute;border:2px dashed #0969da;background:rgba(9,105,218,.08);pointer-events:none}
.body{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:0 28px;padding:2px 16px 14px}
.words{white-space:pre-wrap;overflow-wrap:anywhere;margin:0}
.muted{color:#8c959f;font-style:italic}
ol.actions{margin:0;padding-left:24px}
ol.actions li{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px;overflow-wrap:anywhere}
pre{margin:0;padding:8px 10px;background:#f3f4f6;border:1px solid #e4e7eb;border-radius:6px;\
font:12.5px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;white-space:pre-wrap;overflow-wrap:anywhere}
.bad{color:#cf222e;font-weight:600}
.ok{color:#1a7f37}
details{margin:10px 0 0}
summary{cursor:pointer;color:#5b6472;font-size:13px}
footer{color:#8c959f;font-size:12px;text-align:center;padding:0 0 28px}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _mark(classes: str, x: int, y: int, tip: str, label: str) -> str:
    return (f'<span class="mark {_e(classes)}" style="left:{_pct(x, SCREEN_WIDTH)};top:{_pct(y, SCREEN_HEIGHT)}" '
            f'title="{tip}">{label}</span>')


def _overlay(actions: Sequence[dict[str, Any]]) -> str:
    """Markers over a screenshot, placed by percentage of the display so they scale with the image."""
    marks: list[str] = []
    lines: list[str] = []
    for number, action in enumerate(actions, 1):
        kind = str(action.get("action", ""))
        tip = _e(f"{number}. {describe_action(action)}")
        points = [(p["x"], p["y"]) for p in action.get("path") or []]
        if not points and action.get("x") is not None and action.get("y") is not None:
            points = [(action["x"], action["y"])]
        if len(points) > 1:
            coords = " ".join(f"{x},{y}" for x, y in points)
            lines.append(f'<polyline points="{coords}" vector-effect="non-scaling-stroke">'
                         f'<title>{tip}</title></polyline>')
            end = points[-1]
            marks.append(_mark(f"{kind} end", end[0], end[1], tip, ""))  # released here
            points = points[:1]  # pressed here
        for x, y in points:
            marks.append(_mark(kind, x, y, tip, f"<b>{number}</b>"))
        if region := action.get("region"):
            marks.append(f'<span class="region" title="{tip}" style="left:{_pct(region["x0"], SCREEN_WIDTH)};'
                         f'top:{_pct(region["y0"], SCREEN_HEIGHT)};'
                         f'width:{_pct(region["x1"] - region["x0"], SCREEN_WIDTH)};'
                         f'height:{_pct(region["y1"] - region["y0"], SCREEN_HEIGHT)}"></span>')
    svg = (f'<svg viewBox="0 0 {SCREEN_WIDTH} {SCREEN_HEIGHT}" preserveAspectRatio="none" aria-hidden="true">'
           f'{"".join(lines)}</svg>') if lines else ""
    return svg + "".join(marks)


def _shots(step: StepRecord, image_url: ImageUrl) -> str:
    figures = []
    for which, name, caption in (("before", step.before_png, "Before — what the model saw, and where it acted"),
                                 ("after", step.after_png, "After — the settled screen")):
        if not name:
            continue
        url = _e(image_url(step.index, which))
        figures.append(f'<figure><figcaption>{caption}</figcaption><div class="shot">'
                       f'<a href="{url}"><img src="{url}" alt="step {step.index} {which}" loading="lazy"></a>'
                       f'{_overlay(step.actions)}</div></figure>')
    return f'<div class="shots">{"".join(figures)}</div>' if figures else ""


def _step_html(step: StepRecord, image_url: ImageUrl, t0: datetime) -> str:
    # The first observation is taken just before the trace opens: never show a negative offset.
    offset = max(0.0, (step.started_at - t0).total_seconds())
    tokens = f"{step.usage.input_tokens:,} in / {step.usage.output_tokens:,} out tokens"
    size = f" · model image {step.model_image_size[0]}×{step.model_image_size[1]}" if step.model_image_size else ""
    metrics = (f"+{offset:.1f} s · model {_ms(step.model_ms)} · exec {_ms(step.exec_ms)} · "
               f"settle {_ms(step.settle_ms)}{' (' + ', '.join(step.settled_by) + ')' if step.settled_by else ''} · "
               f"{tokens}{size}")
    url = f'<div class="sub">{_e(step.url)}</div>' if step.url else ""

    operator = step.by == "operator"
    if operator:  # a person's input during a take-over: no model, no tokens, no xdotool
        metrics = f"+{offset:.1f} s · by the operator, during a take-over"
    left = ['<h3>Operator</h3>' if operator else '<h3>Model</h3>',
            f'<p class="words">{_e(step.text)}</p>' if step.text.strip() else '<p class="words muted">(no text)</p>']
    if step.reasoning.strip():
        left.append(f'<details><summary>Reasoning</summary><p class="words">{_e(step.reasoning)}</p></details>')
    if step.tool_calls:
        raw = json.dumps([c.model_dump() for c in step.tool_calls], indent=2, ensure_ascii=False)
        left.append(f'<details><summary>Raw calls, in model coordinates</summary><pre>{_e(raw)}</pre></details>')

    right = ['<h3>Actions, in display pixels</h3>']
    right.append('<ol class="actions">' + "".join(f"<li>{_e(describe_action(a))}</li>" for a in step.actions) + "</ol>"
                 if step.actions else '<p class="muted">(none)</p>')
    if step.argv:
        right.append('<h3>Executed</h3><pre>' + _e("\n".join(shlex.join(cmd) for cmd in step.argv)) + "</pre>")
    problems = [f"{c.name} {c.id}: {c.error}" for c in step.tool_calls if c.error]
    problems += [f"{r.call_id}: {r.error or 'failed'}" for r in step.results if not r.ok]
    if step.results:
        ok = sum(r.ok for r in step.results)
        right.append(f'<h3>Results</h3><p class="{"ok" if ok == len(step.results) else "bad"}">'
                     f'{ok} of {len(step.results)} calls succeeded</p>')
        outputs = [f"{r.call_id}: {r.output}" for r in step.results if r.output]
        if outputs:
            right.append(f'<pre>{_e(chr(10).join(outputs))}</pre>')
    error = ""
    if step.error or problems:
        text = "\n".join(([f"{step.error.code}: {step.error.message}"] if step.error else []) + problems)
        error = f'<div class="box error" style="margin:12px 16px 0">{_e(text)}</div>'

    return (f'<section class="step{" failed" if step.failed else ""}" id="step-{step.index}">'
            f'<div class="head"><h2>Step {step.index}{" · by the operator" if operator else ""}</h2>'
            f'<span class="metrics">{_e(metrics)}</span>{url}</div>'
            f'{error}{_shots(step, image_url)}'
            f'<div class="body"><div>{"".join(left)}</div><div>{"".join(right)}</div></div></section>')


def _video_html(video: VideoSeal | None, file_url: Callable[[str], str]) -> str:
    """A filmed run's receipt: the film with its chapters and captions, and the SHA-256 chained."""
    if video is None:
        return ""
    kind = "video/mp4" if video.format == "mp4" else "video/webm"
    return (f'<div class="box video"><video controls preload="metadata" style="width:100%;max-width:960px">'
            f'<source src="{_e(file_url(video.file))}" type="{kind}">'
            f'<track kind="chapters" src="{_e(file_url(video.chapters_file))}" srclang="en" default>'
            f'<track kind="captions" label="actions" src="{_e(file_url(video.captions_file))}" srclang="en">'
            f'</video><div class="sub">video {_e(video.file)} · {video.duration_s:.1f} s · {video.chapters} chapters · '
            f'{video.clicks} clicks marked · sha256 {_e(video.sha256)}'
            + "".join(f" · {_e(n)}" for n in video.notes) + "</div></div>")


def render_html(meta: TraceMeta, steps: Sequence[StepRecord], image_url: ImageUrl | None = None,
                verification: VerifyResult | None = None, video: VideoSeal | None = None,
                video_url: Callable[[str], str] | None = None) -> str:
    """The trace as one self-contained HTML page. ``image_url(index, which)`` locates screenshots
    (default: the REST API's URLs), ``video_url(name)`` the video receipt's files; ``verification``,
    if given, is shown in the header."""
    image_url = image_url or api_image_url(meta.trace_id)
    video_url = video_url or (lambda name: f"/api/v1/traces/{quote(meta.trace_id)}/video/{quote(name)}")
    by_operator = sum(s.by == "operator" for s in steps)
    usage = meta.usage
    model_ms = sum(s.model_ms or 0 for s in steps)
    exec_ms = sum((s.exec_ms or 0) + (s.settle_ms or 0) for s in steps)
    totals = [
        # The agent's budget plus the person's steps: the same count as the console's.
        (f"{meta.steps}" + (f" / {meta.max_steps + by_operator}" if meta.max_steps else ""),
         f"steps ({by_operator} by the operator)" if by_operator else "steps"),
        (_duration(meta.duration_s), "duration"),
        (f"{model_ms / 1000:.1f} s · {exec_ms / 1000:.1f} s", "in model · acting and settling"),
        (f"{usage.input_tokens:,} / {usage.output_tokens:,}", "input / output tokens"),
        (f"{usage.cache_read_tokens:,} / {usage.cache_write_tokens:,}", "cache read / write tokens"),
    ]
    boxes = []
    if meta.answer:
        boxes.append(f'<div class="box answer"><b>Answer:</b> {_e(meta.answer)}</div>')
    if meta.error:
        boxes.append(f'<div class="box error"><b>{_e(meta.error.code)}:</b> {_e(meta.error.message)}</div>')
    if verification is not None:
        if verification.ok:
            film = " and the video's" if video is not None else ""
            boxes.append(f'<div class="box verified">Evidence verified: hash chain and screenshot SHA-256 of '
                         f'{verification.steps_checked} steps{film} intact.</div>')
        else:
            where = f" at step {_e(verification.broken_index)}" if verification.broken_index is not None else ""
            boxes.append(f'<div class="box error"><b>Evidence broken{where}:</b> {_e(verification.reason)}</div>')
    started = meta.started_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    session = f" · session {_e(meta.session_id)}" if meta.session_id else ""
    head = (f'<header><div class="sub">glassdesk trace {_e(meta.trace_id)}{session} · started {started}</div>'
            f'<h1>{_e(meta.instruction)}</h1>'
            f'<div><span class="badge {_e(meta.status)}">{_e(meta.status.replace("_", " "))}</span> '
            f'<span class="sub">{_e(meta.model)}</span></div>'
            '<ul class="totals">' + "".join(f"<li><b>{_e(v)}</b><span>{_e(k)}</span></li>" for v, k in totals)
            + "</ul>" + "".join(boxes) + _video_html(video, video_url) + "</header>")
    body = ("".join(_step_html(s, image_url, meta.started_at) for s in steps)
            or '<p class="muted">No steps recorded.</p>')
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f'<title>{_e(meta.status)} · {_e(meta.instruction[:80])}</title><style>{_CSS}</style></head>'
            f'<body>{head}<main>{body}</main>'
            f'<footer>Coordinates are display pixels of a {SCREEN_WIDTH}×{SCREEN_HEIGHT} screen. '
            'Run the commands above with DISPLAY and XAUTHORITY (the session\'s xauthority file) set to replay a step.'
            '</footer></body></html>')


# ------------------------------------------------------------------------------------------ JUnit

_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _x(value: Any) -> str:
    """Text that XML 1.0 can hold: ElementTree escapes markup but passes control characters through."""
    return _XML_INVALID.sub("\ufffd", str(value))


def render_junit(meta: TraceMeta, steps: Sequence[StepRecord]) -> str:
    """JUnit XML: one testsuite for the trace, a testcase per step and one for the overall result.

    A step fails when it recorded an error or a call that did not succeed; the result case passes
    only when the run's status is ``done``.
    """
    suite_name = f"glassdesk.{meta.trace_id}"
    cases: list[ET.Element] = []
    for step in steps:
        case = ET.Element("testcase", classname=_x(suite_name), name=_x(f"step {step.index:04d}: {_summary(step)}"),
                          time=f"{(step.finished_at - step.started_at).total_seconds():.3f}")
        if step.failed:
            errors = ([f"{step.error.code}: {step.error.message}"] if step.error else []) + \
                     [f"{r.call_id}: {r.error or 'failed'}" for r in step.results if not r.ok]
            failure = ET.SubElement(case, "failure", message=_x(errors[0]),
                                    type=_x(step.error.code if step.error else "action_failed"))
            failure.text = _x("\n".join(errors))
        if step.text:
            ET.SubElement(case, "system-out").text = _x(step.text)
        cases.append(case)

    result = ET.Element("testcase", classname=_x(suite_name), name="result",
                        time=f"{meta.duration_s or 0:.3f}")
    if meta.status != "done":
        message = f"{meta.status}: {meta.error.message}" if meta.error else meta.status
        failure = ET.SubElement(result, "failure", message=_x(message),
                                type=_x(meta.error.code if meta.error else meta.status))
        failure.text = _x(message)
    if meta.answer:
        ET.SubElement(result, "system-out").text = _x(meta.answer)
    cases.append(result)

    failures = sum(case.find("failure") is not None for case in cases)
    counts = {"tests": str(len(cases)), "failures": str(failures), "errors": "0", "skipped": "0",
              "time": f"{meta.duration_s or 0:.3f}"}
    root = ET.Element("testsuites", name="glassdesk", **counts)
    suite = ET.SubElement(root, "testsuite", name=_x(suite_name),
                          timestamp=meta.started_at.strftime("%Y-%m-%dT%H:%M:%S"), **counts)
    properties = ET.SubElement(suite, "properties")
    for key, value in (("instruction", meta.instruction), ("model", meta.model), ("status", meta.status),
                       ("session_id", meta.session_id)):
        if value is not None:
            ET.SubElement(properties, "property", name=key, value=_x(value))
    suite.extend(cases)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)

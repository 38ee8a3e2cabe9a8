"""Words and JUnit for a trace: pure functions from actions, meta and steps to text.

``describe_action`` (desktop.actions.describe) is one readable line for an action (the viewer, the
strip, the MCP tools and the command line all say actions so); ``render_junit`` turns a run into
JUnit XML, one test case per step plus one for the outcome. A run's HTML report is the run
viewer's offline form (vision.evidence.runview).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Any

from desktop.actions import describe as describe_action
from vision.trace.records import StepRecord, TraceMeta

# ----------------------------------------------------------------------------------------- wording


def _summary(step: StepRecord) -> str:
    line = "; ".join(describe_action(a) for a in step.actions) or "no action"
    return line if len(line) <= 120 else line[:119] + "…"


# ------------------------------------------------------------------------------------------ JUnit

_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(value: Any) -> str:
    """Text that XML 1.0 can hold: ElementTree escapes markup but passes control characters through."""
    return _XML_INVALID.sub("\ufffd", str(value))


def render_junit(meta: TraceMeta, steps: Sequence[StepRecord]) -> str:
    """JUnit XML: one testsuite for the trace, a testcase per step and one for the overall result.

    A step fails when it recorded an error or a call that did not succeed; an expectation, a case of
    its own, when it did not hold; the result case passes only when the run's status is ``done``
    (property ``verified`` says whether anything was checked).
    """
    suite_name = f"glassdesk.{meta.trace_id}"
    cases: list[ET.Element] = []
    for step in steps:
        case = ET.Element("testcase", classname=xml_text(suite_name),
                          name=xml_text(f"step {step.index:04d}: {_summary(step)}"),
                          time=f"{(step.finished_at - step.started_at).total_seconds():.3f}")
        if step.failed:
            errors = ([f"{step.error.code}: {step.error.message}"] if step.error else []) + \
                     [f"{r.call_id}: {r.error or 'failed'}" for r in step.results if not r.ok]
            failure = ET.SubElement(case, "failure", message=xml_text(errors[0]),
                                    type=xml_text(step.error.code if step.error else "action_failed"))
            failure.text = xml_text("\n".join(errors))
        if step.text:
            ET.SubElement(case, "system-out").text = xml_text(step.text)
        cases.append(case)

    for number, check in enumerate(meta.checks, 1):  # the expectations, checked when the model said done
        case = ET.Element("testcase", classname=xml_text(suite_name), name=xml_text(f"expect {number}: "
                                                                                    f"{check.get('check')}"),
                          time=f"{(check.get('duration_ms') or 0) / 1000:.3f}")
        if not check.get("passed"):
            failure = ET.SubElement(case, "failure", message=xml_text(check.get("saw") or "did not hold"),
                                    type="expectation_failed")
            failure.text = xml_text(check.get("saw") or "did not hold")
        else:
            ET.SubElement(case, "system-out").text = xml_text(check.get("saw") or "held")
        cases.append(case)

    result = ET.Element("testcase", classname=xml_text(suite_name), name="result",
                        time=f"{meta.duration_s or 0:.3f}")
    if meta.status != "done":
        message = f"{meta.status}: {meta.error.message}" if meta.error else meta.status
        failure = ET.SubElement(result, "failure", message=xml_text(message),
                                type=xml_text(meta.error.code if meta.error else meta.status))
        failure.text = xml_text(message)
    said = [meta.answer] if meta.answer else []
    if meta.status == "done" and meta.verified is None:
        said.append("unverified: the run carried no expectation, so its done is the model's word")
    if said:
        ET.SubElement(result, "system-out").text = xml_text("\n".join(said))
    cases.append(result)

    failures = sum(case.find("failure") is not None for case in cases)
    counts = {"tests": str(len(cases)), "failures": str(failures), "errors": "0", "skipped": "0",
              "time": f"{meta.duration_s or 0:.3f}"}
    root = ET.Element("testsuites", {"name": "glassdesk"} | counts)
    suite = ET.SubElement(root, "testsuite", {"name": xml_text(suite_name),
                                              "timestamp": meta.started_at.strftime("%Y-%m-%dT%H:%M:%S")} | counts)
    properties = ET.SubElement(suite, "properties")
    verdict = {True: "verified", False: "failed_check", None: "unverified"}[meta.verified]
    for key, value in (("instruction", meta.instruction), ("model", meta.model), ("status", meta.status),
                       ("verified", verdict), ("session_id", meta.session_id)):
        if value is not None:
            ET.SubElement(properties, "property", name=key, value=xml_text(value))
    suite.extend(cases)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


def heal_line(index: int, healed: Mapping) -> str:
    """One line for a healed step (pure), e.g. ``healed step 4: role button named 'Create account'
    (exact) no longer matched; healed by locator: selector '#create'``."""
    line = (f"healed step {index}: {healed.get('failed')} no longer matched; healed by {healed.get('by')}: "
            f"{healed.get('matched')}")
    if healed.get("by") == "model":
        line += f" (healed by model {healed.get('model')})"
    if healed.get("effect"):
        line += f"; effect: {healed['effect']}"
    return line

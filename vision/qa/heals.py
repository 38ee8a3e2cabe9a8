"""A heal's evidence and its writing back (pure): the before and after images with both boxes drawn,
the one line every report gives a heal, and an exported suite rewritten with its healed targets.

A heal (vision.models.qa.Heal) is made by vision.qa.healing when a replayed step's own target no
longer matched and the step was re-targeted from what was recorded of it. Its images are the screen
as it was just before and just after the healed action, with the recorded box in orange and the
healed one in green; each is a new file of the run (kind ``heal``), never a change to the step's own
screenshots, so the plain evidence stays as it was taken.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

from PIL import Image, ImageDraw

from vision.evidence.report import heal_line

RECORDED_COLOUR = (227, 98, 9)   # orange: where the run found the element
HEALED_COLOUR = (26, 127, 55)    # green: where the replay found it instead
POINT_BOX = 24                   # the side of the box drawn round a recorded pixel with no box
LINE = 3


def _rect(box: Mapping | None, point: Sequence[int] | None) -> tuple[int, int, int, int] | None:
    if box and all(k in box for k in ("x", "y", "width", "height")):
        return int(box["x"]), int(box["y"]), int(box["x"]) + max(1, int(box["width"])), \
            int(box["y"]) + max(1, int(box["height"]))
    if point is not None and len(point) == 2:
        half = POINT_BOX // 2
        return int(point[0]) - half, int(point[1]) - half, int(point[0]) + half, int(point[1]) + half
    return None


def draw_boxes(png: bytes, recorded: tuple[int, int, int, int] | None,
               healed: tuple[int, int, int, int] | None) -> bytes:
    """The screenshot with the recorded box (orange, labelled "recorded") and the healed one (green,
    "healed") drawn on it, as PNG (pure)."""
    with Image.open(io.BytesIO(png)) as image:
        canvas = image.convert("RGB")
    draw = ImageDraw.Draw(canvas)
    for rect, colour, label in ((recorded, RECORDED_COLOUR, "recorded"), (healed, HEALED_COLOUR, "healed")):
        if rect is None:
            continue
        x0, y0, x1, y1 = rect
        draw.rectangle((x0 - LINE, y0 - LINE, x1 + LINE - 1, y1 + LINE - 1), outline=colour, width=LINE)
        # The label sits above the box (below it at the screen's top), on the box's colour.
        top = y0 - LINE - 14 if y0 - LINE - 14 >= 0 else y1 + LINE
        width = int(draw.textlength(label)) + 6
        draw.rectangle((x0 - LINE, top, x0 - LINE + width, top + 13), fill=colour)
        draw.text((x0 - LINE + 3, top + 1), label, fill=(255, 255, 255))
    out = io.BytesIO()
    canvas.save(out, "PNG")
    return out.getvalue()


def heal_images(before: bytes, after: bytes, heal: Mapping) -> tuple[bytes, bytes]:
    """The before and after images of a heal (``heal``: a Heal's fields), both boxes on each (pure)."""
    recorded = _rect(heal.get("recorded_box"), heal.get("recorded_at"))
    healed = _rect(heal.get("box"), heal.get("point"))
    return draw_boxes(before, recorded, healed), draw_boxes(after, recorded, healed)


# --------------------------------------------------------------------------------- writing back

# The fields of a step that say where it acts: replaced whole by the healed target.
TARGET_FIELDS = ("selector", "ref", "label", "text", "role", "name", "placeholder", "test_id", "alt", "title",
                 "exact", "has_text", "nth", "within", "image", "confidence", "x", "y")


def healed_step(step: dict, heal: Mapping) -> dict:
    """``step`` (a suite's flow step) on its healed target, its record kept (pure). A step healed
    onto a new pixel (by OCR, the template, the model) keeps its recorded text and image, and its
    recorded pixel and text box move with it: the next replay finds them where they now are."""
    target = dict(heal.get("target") or {})
    if not target:
        return step
    out = {k: v for k, v in step.items() if k not in TARGET_FIELDS}
    ordered = {"action": out.pop("action", step.get("action")), **target, **out}
    record = ordered.get("recorded")
    if isinstance(record, dict) and "x" in target and record.get("x") is not None:
        dx, dy = target["x"] - record["x"], target["y"] - record["y"]
        record = {**record, "x": target["x"], "y": target["y"]}
        if isinstance(record.get("text_box"), list) and len(record["text_box"]) == 4:
            x0, y0, x1, y1 = record["text_box"]
            record["text_box"] = [x0 + dx, y0 + dy, x1 + dx, y1 + dy]
        ordered["recorded"] = record
    return ordered


def healed_suite(text: str, heals: Mapping[int, Sequence[Mapping]], source: str) -> tuple[str, list[str]]:
    """A suite's YAML with the heals of its tests written in (``heals``: a test's 0-based position ->
    the heals of its passing run), and the lines that list them (pure). The suite is rewritten from
    its own text, so what the runner filled in (secrets from the environment, files read) is never
    written; the heals are listed at its head."""
    import yaml

    data = yaml.safe_load(text)
    listed = []
    for position, test_heals in sorted(heals.items()):
        test = data["tests"][position]
        flow = test.get("verify_user_flow") or {}
        steps = flow.get("steps") or []
        for heal in test_heals:
            index = int(heal["step"]) - 1
            if 0 <= index < len(steps) and isinstance(steps[index], dict):
                steps[index] = healed_step(steps[index], heal)
                listed.append(f"test {test.get('name') or position + 1!r}: {heal_line(int(heal['step']), heal)}")
    head = [f"# Healed by glassdesk qa --write-healed from {source}: {len(listed)} step(s) re-targeted."]
    head += [f"#   {line}" for line in listed]
    body = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120)
    return "\n".join(head) + "\n" + body, listed

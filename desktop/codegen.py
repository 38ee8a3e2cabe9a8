"""Playwright code for glassdesk's locators and actions, in TypeScript (@playwright/test) and Python
(pytest-playwright), as Playwright's own code generator would write it (pure: strings in, strings
out; tested without a browser).

Used for every action's answer (``playwright``: the code doing the same thing, next to the xdotool
argv) and by the exports (vision.evidence.export), so a locator is spelled one way everywhere.

Coordinates: a locator action needs none; ``page.mouse`` takes viewport CSS pixels, which an action
with a recorded element knows (``ElementAt.css_x``); without one, the display pixel is written
with a comment saying the page's own pixel was not known.
"""

from __future__ import annotations

import json
from typing import Literal

from desktop.models import ElementAt, Locating

Lang = Literal["ts", "py"]

# xdotool's key names (glassdesk's) -> Playwright's (keyboard.press); unlisted names pass as they are
# (letters, digits, F1.., and names both spell alike: Tab, Escape, Delete, Home, End).
KEY_NAMES = {
    "ctrl": "Control", "control": "Control", "shift": "Shift", "alt": "Alt", "super": "Meta", "meta": "Meta",
    "cmd": "Meta", "return": "Enter", "enter": "Enter", "backspace": "Backspace", "esc": "Escape",
    "escape": "Escape", "up": "ArrowUp", "down": "ArrowDown", "left": "ArrowLeft", "right": "ArrowRight",
    "page_up": "PageUp", "prior": "PageUp", "page_down": "PageDown", "next": "PageDown", "space": "Space",
    "tab": "Tab", "delete": "Delete", "home": "Home", "end": "End", "insert": "Insert",
}
WHEEL_PX = 100  # one wheel notch, in CSS px (Chromium's step)


def pw_key(chord: str) -> str:
    """A glassdesk chord (``ctrl+shift+a``, ``Return``) in Playwright's spelling (``Control+Shift+a``)."""
    return "+".join(KEY_NAMES.get(part.lower(), part) for part in chord.split("+"))


def lit(value: str, lang: Lang) -> str:
    """A string literal (JSON's escapes are valid TypeScript; repr is valid Python)."""
    return json.dumps(value) if lang == "ts" else repr(value)


def _bool(value: bool, lang: Lang) -> str:
    return ("true" if value else "false") if lang == "ts" else ("True" if value else "False")


def _opts(pairs: list[tuple[str, str, str]], lang: Lang) -> str:
    """Options as ``{ name: v }`` (TypeScript) or ``name=v`` keywords (Python); pairs: (ts name, py
    name, literal)."""
    if not pairs:
        return ""
    if lang == "ts":
        return "{ " + ", ".join(f"{ts}: {v}" for ts, _, v in pairs) + " }"
    return ", ".join(f"{py}={v}" for _, py, v in pairs)


def _call(name_ts: str, name_py: str, args: list[str], opts: list[tuple[str, str, str]], lang: Lang) -> str:
    parts = list(args)
    rendered = _opts(opts, lang)
    if rendered:
        parts.append(rendered)
    return f"{name_ts if lang == 'ts' else name_py}({', '.join(parts)})"


def locator(target: Locating, lang: Lang, root: str = "page") -> str:
    """The Playwright locator for a target, e.g. ``page.getByRole('button', { name: 'Save', exact:
    true })`` / ``page.get_by_role("button", name="Save", exact=True)``."""
    if target.within is not None:
        root = locator(target.within, lang, root)
    exact = [("exact", "exact", _bool(True, lang))] if target.exact else []
    if target.selector is not None:
        code = f"{root}.locator({lit(target.selector, lang)})"
    elif target.ref is not None:
        code = f"{root}.locator({lit('aria-ref=' + target.ref, lang)})"
    elif target.role is not None:
        opts = ([("name", "name", lit(target.name, lang))] + exact) if target.name is not None else []
        code = f"{root}." + _call("getByRole", "get_by_role", [lit(target.role, lang)], opts, lang)
    else:
        kinds = {"label": ("getByLabel", "get_by_label"), "placeholder": ("getByPlaceholder", "get_by_placeholder"),
                 "alt": ("getByAltText", "get_by_alt_text"), "title": ("getByTitle", "get_by_title"),
                 "text": ("getByText", "get_by_text"), "test_id": ("getByTestId", "get_by_test_id")}
        kind = next(k for k in kinds if getattr(target, k) is not None)
        ts, py = kinds[kind]
        code = f"{root}." + _call(ts, py, [lit(getattr(target, kind), lang)], [] if kind == "test_id" else exact,
                                  lang)
    if target.has_text is not None:
        code += "." + _call("filter", "filter", [], [("hasText", "has_text", lit(target.has_text, lang))], lang)
    if target.nth is not None:
        last = ".last()" if lang == "ts" else ".last"  # a method in TypeScript, a property in Python
        code += last if target.nth == -1 else f".nth({target.nth})"
    return code


def _aw(lang: Lang) -> str:
    return "await " if lang == "ts" else ""


def _end(lang: Lang) -> str:
    return ";" if lang == "ts" else ""


def _click_opts(action: dict, lang: Lang) -> list[tuple[str, str, str]]:
    opts = []
    if action.get("button", "left") != "left":
        opts.append(("button", "button", lit(action["button"], lang)))
    if action.get("action") == "triple_click":
        opts.append(("clickCount", "click_count", "3"))
    mods = action.get("modifiers") or []
    if mods:
        names = [lit(pw_key(m), lang) for m in mods]
        opts.append(("modifiers", "modifiers", "[" + ", ".join(names) + "]"))
    return opts


def _point(action: dict, element: ElementAt | None) -> tuple[float, float, bool]:
    """The action's point in viewport CSS px when the element says where the viewport is, else
    the display pixel (and False)."""
    x, y = action.get("x"), action.get("y")
    if action.get("action") == "drag":
        x, y = action["path"][0]["x"], action["path"][0]["y"]
    if element is not None:
        dx, dy = element.x - element.css_x, element.y - element.css_y
        if x is None or y is None:
            return element.css_x, element.css_y, True
        return x - dx, y - dy, True
    return (x if x is not None else 0), (y if y is not None else 0), False


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def action_code(action: dict, element: ElementAt | None, lang: Lang = "ts", *,
                text: str | None = None) -> list[str]:
    """Playwright lines doing what one glassdesk input action did (display pixels; ``element``:
    what was under its pixel, with verified locators). ``text``: a typed text's code literal when
    the caller has spelled it already (an export writes secrets as environment variables)."""
    name = action.get("action")
    aw, end = _aw(lang), _end(lang)
    target = element.locators[0] if element is not None and element.locators else None
    if name in ("click", "double_click", "triple_click") and target is not None:
        verb = "dblclick" if name == "double_click" else "click"
        return [f"{aw}{locator(target, lang)}.{_call(verb, verb, [], _click_opts(action, lang), lang)}{end}"]
    if name == "move" and target is not None:
        return [f"{aw}{locator(target, lang)}.hover(){end}"]
    x, y, known = _point(action, element)
    note = [] if known else [("// " if lang == "ts" else "# ") + "no page element recorded: a display pixel, as "
                                                                 "recorded (the page's own pixel was not known)"]
    at = f"{_num(x)}, {_num(y)}"
    if name in ("click", "double_click", "triple_click"):
        opts = _click_opts(action, lang)
        if name == "double_click":
            opts.append(("clickCount", "click_count", "2"))
        return note + [f"{aw}page.mouse.{_call('click', 'click', [_num(x), _num(y)], opts, lang)}{end}"]
    if name == "move":
        return note + [f"{aw}page.mouse.move({at}){end}"]
    if name in ("mouse_down", "mouse_up"):
        verb = "down" if name == "mouse_down" else "up"
        lines = [] if action.get("x") is None else [f"{aw}page.mouse.move({at}){end}"]
        opts = [("button", "button", lit(action["button"], lang))] if action.get("button", "left") != "left" else []
        return note + lines + [f"{aw}page.mouse.{_call(verb, verb, [], opts, lang)}{end}"]
    if name == "scroll":
        step = WHEEL_PX * int(action.get("amount", 3))
        dx, dy = {"down": (0, step), "up": (0, -step), "right": (step, 0), "left": (-step, 0)}[
            action.get("direction", "down")]
        lines = [f"{aw}page.mouse.move({at}){end}"] if action.get("x") is not None or target is not None else []
        return note + lines + [f"{aw}page.mouse.wheel({dx}, {dy}){end}"]
    if name == "drag":
        path = action["path"]
        # the viewport's place on the display (0, 0 where no element said)
        vx, vy = (element.x - element.css_x, element.y - element.css_y) if element is not None else (0.0, 0.0)
        lines = [f"{aw}page.mouse.move({_num(path[0]['x'] - vx)}, {_num(path[0]['y'] - vy)}){end}",
                 f"{aw}page.mouse.down(){end}"]
        lines += [f"{aw}page.mouse.move({_num(p['x'] - vx)}, {_num(p['y'] - vy)}){end}" for p in path[1:]]
        return note + lines + [f"{aw}page.mouse.up(){end}"]
    if name == "type":
        return [f"{aw}page.keyboard.type({text if text is not None else lit(action['text'], lang)}){end}"]
    if name == "key":
        keys = action.get("keys") or []
        keys = keys.split() if isinstance(keys, str) else keys
        return [f"{aw}page.keyboard.press({lit(pw_key(k), lang)}){end}" for k in keys]
    if name == "hold_key":
        key = lit(pw_key(action["keys"]), lang)
        wait = "page.waitForTimeout" if lang == "ts" else "page.wait_for_timeout"
        return [f"{aw}page.keyboard.down({key}){end}", f"{aw}{wait}({int(action.get('duration_ms', 500))}){end}",
                f"{aw}page.keyboard.up({key}){end}"]
    if name == "wait":
        wait = "page.waitForTimeout" if lang == "ts" else "page.wait_for_timeout"
        return [f"{aw}{wait}({int(action.get('duration_ms', 1000))}){end}"]
    return []


def answer_code(action: dict, element: ElementAt | None) -> str | None:
    """The ``playwright`` field of an action's answer: TypeScript, one statement a line."""
    lines = action_code(action, element, "ts")
    return "\n".join(lines) if lines else None

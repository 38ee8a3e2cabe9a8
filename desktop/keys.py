"""Key names: the aliases models and people use -> X keysyms that xdotool understands.

Pure functions, no X connection. A chord is written ``ctrl+shift+t``; a sequence of chords is a
list (or a whitespace-separated string, as Anthropic's models send them: ``"ctrl+a Delete"``).
Any real X keysym name (``KP_Enter``, ``XF86AudioMute``...) is accepted as is.
"""

from __future__ import annotations

import functools

# alias (lower case) -> keysym. Documented in docs/desktop-api.md, "Key names".
ALIASES: dict[str, str] = {
    # modifiers
    "ctrl": "Control_L", "control": "Control_L", "lctrl": "Control_L", "rctrl": "Control_R",
    "alt": "Alt_L", "option": "Alt_L", "lalt": "Alt_L", "ralt": "Alt_R", "altgr": "ISO_Level3_Shift",
    "shift": "Shift_L", "lshift": "Shift_L", "rshift": "Shift_R",
    "super": "Super_L", "cmd": "Super_L", "command": "Super_L", "win": "Super_L",
    "windows": "Super_L", "meta": "Super_L",
    # editing and navigation
    "enter": "Return", "return": "Return", "kp_enter": "KP_Enter",
    "esc": "Escape", "escape": "Escape",
    "tab": "Tab", "space": "space", "spacebar": "space",
    "backspace": "BackSpace", "back_space": "BackSpace",
    "delete": "Delete", "del": "Delete", "insert": "Insert", "ins": "Insert",
    "home": "Home", "end": "End",
    "pageup": "Prior", "page_up": "Prior", "pgup": "Prior", "prior": "Prior",
    "pagedown": "Next", "page_down": "Next", "pgdn": "Next", "next": "Next",
    "up": "Up", "down": "Down", "left": "Left", "right": "Right",
    "arrowup": "Up", "arrowdown": "Down", "arrowleft": "Left", "arrowright": "Right",
    "arrow_up": "Up", "arrow_down": "Down", "arrow_left": "Left", "arrow_right": "Right",
    "capslock": "Caps_Lock", "caps_lock": "Caps_Lock", "numlock": "Num_Lock",
    "printscreen": "Print", "print": "Print", "prtsc": "Print", "menu": "Menu",
    "pause": "Pause", "scrolllock": "Scroll_Lock",
    # symbols that cannot be written inside a chord
    "+": "plus", "plus": "plus", "-": "minus", "minus": "minus", " ": "space",
}

MODIFIER_KEYSYMS = frozenset(
    {"Control_L", "Control_R", "Alt_L", "Alt_R", "Shift_L", "Shift_R", "Super_L", "Super_R",
     "ISO_Level3_Shift", "Meta_L", "Meta_R"}
)


@functools.cache
def _xk():
    """python-xlib's keysym tables (data, no X connection), loaded on the first key name checked:
    a client that imports the action models to send them needs no part of Xlib until then."""
    from Xlib import XK

    XK.load_keysym_group("xf86")
    return XK


@functools.cache
def _latin1_names() -> dict[int, str]:
    """Latin-1 keysym values equal their code points: "/" -> "slash", "é" -> "eacute"."""
    return {value: attr[3:] for attr, value in vars(_xk()).items()
            if attr.startswith("XK_") and isinstance(value, int) and 0x20 <= value <= 0xFF}


def _char_keysym(char: str) -> str:
    if char.isascii() and char.isalnum():
        return char
    return _latin1_names().get(ord(char)) or f"U{ord(char):04X}"


class KeyNameError(ValueError):
    """A key name that is neither an alias nor an X keysym."""


def _is_keysym(name: str) -> bool:
    XK = _xk()
    if XK.string_to_keysym(name) != XK.NoSymbol:
        return True
    # python-xlib spells the XF86 keysyms "XF86_AudioMute"; X and xdotool take "XF86AudioMute" too.
    return name.startswith("XF86") and XK.string_to_keysym("XF86_" + name[4:]) != XK.NoSymbol


def keysym(name: str) -> str:
    """One key name -> its X keysym name. Raises KeyNameError with the offending name."""
    if not name:
        raise KeyNameError("empty key name")
    lowered = name.lower()
    if lowered in ALIASES:
        return ALIASES[lowered]
    if lowered.startswith("f") and lowered[1:].isdigit() and 1 <= int(lowered[1:]) <= 35:
        return f"F{int(lowered[1:])}"
    if len(name) == 1:
        return _char_keysym(name)
    if _is_keysym(name):
        return name
    # Case-insensitive match on real keysyms (models write "PAGE_DOWN", "Backspace"...).
    for candidate in (name.capitalize(), name.upper(), name.lower()):
        if _is_keysym(candidate):
            return candidate
    raise KeyNameError(f"unknown key name {name!r}; use an alias such as ctrl, enter, esc, "
                       "pageup, arrowleft, f5, or an X keysym such as KP_Enter")


def chord(spec: str) -> list[str]:
    """``"ctrl+shift+T"`` -> ``["Control_L", "Shift_L", "t"]``.

    With modifiers held, a lone upper-case letter means the key, not shift+key, as OpenAI's
    ``keypress {keys: ["CTRL", "A"]}`` does: it is lower-cased.
    """
    spec = spec.strip()
    if not spec:
        raise KeyNameError("empty key chord")
    if spec == "+":
        parts = ["+"]
    else:
        parts = spec.split("+")
        # "ctrl++" -> ["ctrl", "", ""]: the trailing empty pair was a literal "+".
        if spec.endswith("++"):
            parts = [*parts[:-2], "+"]
    if any(p == "" for p in parts):
        raise KeyNameError(f"malformed key chord {spec!r}")
    syms = [keysym(p) for p in parts]
    if len(syms) > 1 and any(s in MODIFIER_KEYSYMS for s in syms[:-1]):
        last = syms[-1]
        if len(last) == 1 and last.isalpha():
            syms[-1] = last.lower()
    return syms


def chords(keys: str | list[str]) -> list[list[str]]:
    """A key sequence -> a list of chords. A string is split on whitespace."""
    items = keys.split() if isinstance(keys, str) else [k for k in keys]
    if not items:
        raise KeyNameError("no keys given")
    return [chord(k) for k in items]


def xdotool_chord(syms: list[str]) -> str:
    """The chord as xdotool's ``key`` argument: ``Control_L+t``."""
    return "+".join(syms)

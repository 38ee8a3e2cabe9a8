"""The local, offline provider: "ocr" (name "ocr/rapidocr"). No model, no API key, no network.

It understands a small set of imperative instructions and grounds them on the text that OCR
(rapidocr, whose PP-OCR models ship inside the wheel) reads on the screenshot. It never guesses:
an instruction it cannot parse, or a text it cannot find exactly once, ends the run with a message
that says why.

Grammar (case-insensitive; quotes -- "...", '...', “...” -- are optional where the text is
unambiguous; several clauses joined by "then", ",", ";", "and" or ". " run in order)::

    click "<text>"            also: click on ..., left-click, tap "<text>", press the "<text>" button
    double-click "<text>"
    right-click "<text>"
    type "<text>"             types into whatever has the focus
    type "<text>" into "<label>"   also: in "<label>", enter/write ... into ...,
                                   fill "<label>" with "<text>"
    press <keys>              press enter, press ctrl+a, press ctrl+shift+t, press tab tab enter
    open <url>                also: go to / navigate to / visit <url>; in the focused Chromium
    scroll up|down|left|right [N]   N wheel notches (default 5), at the centre of the screen
    read the screen           also: what does the screen say, what is on the screen

Targets are grounded on the OCR lines by ``vision.perception.grounding.find_text``, and the field
for "type ... into <label>" is found by ``vision.perception.fields.field_point``; their docstrings
say how.

One intent runs per turn, so the loop settles and screenshots between steps and each target is
grounded on the fresh screen; OCR runs at most once per turn, only for intents that need it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from desktop import keys as keynames
from desktop.actions import Click, DoubleClick, Key, Scroll, Type, Wait
from vision.actions import Action, CallResult, Done, Fail, ToolCall
from vision.perception.fields import field_by_page, field_point
from vision.perception.grounding import FUZZY_THRESHOLD, GroundingError, find_text
from vision.perception.ocr import Line, OcrEngine, frame_array, read_text, shared_engine
from vision.providers.base import ModelTurn, Observation, Provider

DEFAULT_SCROLL = 5

SUPPORTED_FORMS = """\
Supported instructions (join several with "then", ",", ";" or "and"):
  click "<text>"  (also: double-click, right-click, tap "<text>", press "<text>" when it is no key name)
  type "<text>"  or  type "<text>" into "<label>"
  press <keys>  (e.g. press enter, press ctrl+a)
  open <url>  (e.g. open example.com)
  scroll up|down [N]
  read the screen  (or: what does the screen say)
Put text in quotes when it contains "and", "then", "in" or a comma."""


# ---------------------------------------------------------------------------------------------
# Parsing instructions


class InstructionError(ValueError):
    """The instruction is not in the grammar; the message lists the supported forms."""


IntentKind = Literal["click", "double_click", "right_click", "type", "press", "open", "scroll", "read"]


@dataclass(frozen=True)
class Intent:
    kind: IntentKind
    target: str | None = None      # click*: the text to click
    text: str | None = None        # type: what to type
    label: str | None = None       # type: the label of the field to type into
    keys: tuple[str, ...] = ()     # press: chords in order
    url: str | None = None         # open
    direction: str | None = None   # scroll
    amount: int | None = None      # scroll
    clause: str = field(default="", compare=False)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind}
        for name in ("target", "text", "label", "url", "direction", "amount"):
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        if self.keys:
            data["keys"] = list(self.keys)
        data["clause"] = self.clause
        return data


_QUOTE = re.compile(r'"([^"]*)"|“([^”]*)”|‘([^’]*)’|(?<!\w)\'([^\']*)\'(?!\w)')
_TOKEN = re.compile(r"\x00(\d+)\x00")
_SEP = re.compile(r"(\s*[,;]\s*(?:(?:and\s+)?then\s+)?|\s+and\s+then\s+|\s+then\s+|\s+and\s+|\.\s+(?:then\s+)?)", re.I)
_VERB = re.compile(r"(?:please\s+)?(?:double[- ]?click|right[- ]?click|left[- ]?click|click|tap|press|push|hit|"
                   r"type|write|enter|input|fill|open|go\s+to|navigate|visit|browse|scroll|read|what|ocr|transcribe)\b",
                   re.I)
_LEAD = re.compile(r"^(?:(?:please|now|first|next|finally|also|then|and)\s+)+", re.I)
_NOUNS = r"button|link|tab|icon|field|box|text\s*box|checkbox|input|option|item|entry|menu|label"
_FILLER = re.compile(rf"^(?:on|the|a|an|{_NOUNS})$", re.I)
_READ = re.compile(
    r"(?:read|transcribe|ocr)(?:\s+(?:out|me|back))?(?:\s+(?:all|everything))?(?:\s+(?:of\s+)?the)?"
    r"(?:\s+text)?(?:\s+(?:on|of|in)(?:\s+the)?)?(?:\s+(?:screen|page|display|desktop))?"
    r"|what(?:'s|\s+is)\s+(?:written\s+)?on\s+(?:the\s+)?(?:screen|page|display)"
    r"|what\s+(?:does|do)\s+(?:the\s+)?(?:screen|page|display)\s+(?:say|show|read)", re.I)
_CLICK = re.compile(r"(?P<verb>double[- ]?click|right[- ]?click|left[- ]?click|click|tap)"
                    r"(?:\s+on)?\s+(?P<rest>.+)", re.I)
_BUTTON = re.compile(r"(?:press|push|hit|click|tap)(?:\s+on)?\s+the\s+(?P<rest>.+?)\s+button", re.I)
_TYPE = re.compile(r"(?:type|write|enter|input)\s+(?P<rest>.+)", re.I)
_FILL = re.compile(r"fill(?:\s+in|\s+out)?\s+(?:the\s+)?(?P<label>.+?)\s+with\s+(?P<text>.+)", re.I)
_PRESS = re.compile(r"(?:press|hit|push)\s+(?P<keys>.+)", re.I)
_OPEN = re.compile(r"(?:open|go\s+to|navigate\s+to|visit|browse\s+to)\s+(?:the\s+)?"
                   r"(?:(?:url|page|site|website)\s+)?(?P<url>.+)", re.I)
_SCROLL = re.compile(r"scroll\s+(?:the\s+page\s+)?(?P<dir>up|down|left|right)"
                     r"(?:\s+(?:by\s+)?(?P<n>\d+)(?:\s+(?:times|notches|clicks|steps|lines))?)?", re.I)
_URL = re.compile(r"(?:(?:https?|file|ftp)://\S+|(?:about|chrome|data):\S+|"
                  r"(?:localhost|\d{1,3}(?:\.\d{1,3}){3}|(?:[\w-]+\.)+[a-z][\w-]*)(?::\d+)?(?:[/?#]\S*)?)", re.I)
_INTO = re.compile(r"\s+(?:into|in|to|on)\s+(?:the\s+)?(?P<label>.+)", re.I)
_FIELD_NOUN = re.compile(r"\s+(?:field|box|text\s*box|input|area)$", re.I)


def _mask(text: str) -> tuple[str, list[str]]:
    """Quoted spans -> \\x00N\\x00 tokens, so that separators and verbs inside quotes are inert."""
    quoted: list[str] = []

    def token(match: re.Match) -> str:
        quoted.append(next(g for g in match.groups() if g is not None))
        return f"\x00{len(quoted) - 1}\x00"

    return _QUOTE.sub(token, text), quoted


def _unmask(text: str, quoted: list[str], *, quotes: bool = False) -> str:
    q = '"' if quotes else ""
    return _TOKEN.sub(lambda m: q + quoted[int(m.group(1))] + q, text)


def _clauses(masked: str) -> list[str]:
    """Split on separators outside quotes; a piece that starts with no verb belongs to the one
    before it ("click Terms and Conditions" stays one clause)."""
    parts = _SEP.split(masked)
    clauses: list[str] = []
    for i in range(0, len(parts), 2):
        piece = _LEAD.sub("", parts[i].strip())
        if clauses and not _VERB.match(piece):
            clauses[-1] += parts[i - 1] + parts[i]
        elif piece:
            clauses.append(piece)
    return [c.strip() for c in clauses if c.strip()]


def _text_arg(masked: str, quoted: list[str], *, nouns: bool) -> str:
    """A clause argument -> plain text: a quoted text wins over the words around it ("the", "button");
    unquoted, a leading "the" and (after it) a trailing noun such as "button" are dropped."""
    masked = masked.strip()
    tokens = _TOKEN.findall(masked)
    if len(tokens) == 1:
        rest = _TOKEN.sub(" ", masked).split()
        if all(_FILLER.match(w) for w in rest):
            return quoted[int(tokens[0])]
    text = _unmask(masked, quoted).strip()
    if nouns:
        the = re.match(r"(?:on\s+)?the\s+(.+)", text, re.I)
        if the:
            text = the.group(1)
            text = re.sub(rf"\s+(?:{_NOUNS})$", "", text, flags=re.I) or text
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1]
    return text.strip()


def _names_no_key(spec: str) -> bool:
    """Whether ``press <spec>`` names no key at all: no chord (``+``), and not one of its words a key
    name (pure). Then it names something to click; a spec with one key in it stays keys, and an
    unknown name among them is refused as such."""
    words = [w for w in re.split(r"[\s,]+", spec.strip()) if w]
    if not words or "+" in spec:
        return False
    for word in words:
        try:
            keynames.chord(word)
            return False
        except keynames.KeyNameError:
            continue
    return True


def _keys(spec: str) -> tuple[str, ...]:
    """"ctrl + a", "Ctrl+A", "ctrl a", "the enter key", "tab, tab then enter" -> chords."""
    spec = re.sub(r"\s*\+\s*", "+", spec.strip())
    words = [w for w in re.split(r"[\s,]+", spec) if w and w.lower() not in ("then", "and", "the", "key", "keys")]
    chords: list[str] = []
    held: list[str] = []
    for word in words:
        if word.lower() in ("ctrl", "control", "alt", "shift", "super", "cmd", "meta", "win") and word != words[-1]:
            held.append(word)  # "ctrl a": a modifier written apart from its key still holds it
            continue
        chords.append("+".join([*held, word]))
        held = []
    if not chords:
        raise InstructionError("press needs a key, e.g. press enter or press ctrl+a")
    for chord in chords:
        try:
            keynames.chord(chord)
        except keynames.KeyNameError as exc:
            raise InstructionError(f"press {spec}: {exc}. To click a button by its text, say: "
                                   f"click \"{spec}\"") from None
    return tuple(chords)


def _parse_clause(masked: str, quoted: list[str]) -> Intent:
    clause = _unmask(masked, quoted, quotes=True)
    body = re.sub(r"[.!?]+$", "", masked.strip()).strip()
    body = re.sub(r"\s+please$", "", body, flags=re.I)

    def full(pattern: re.Pattern) -> re.Match | None:
        return pattern.fullmatch(body)

    if full(_READ):
        return Intent("read", clause=clause)
    if m := full(_BUTTON):
        return Intent("click", target=_text_arg(m["rest"], quoted, nouns=False), clause=clause)
    if m := full(_CLICK):
        verb = m["verb"].lower()
        kind: IntentKind = ("double_click" if verb.startswith("double") else "right_click" if verb.startswith("right")
                            else "click")
        target = _text_arg(m["rest"], quoted, nouns=True)
        if not target:
            raise InstructionError(f"'{clause}': what should be clicked? e.g. click \"Sign in\"")
        return Intent(kind, target=target, clause=clause)
    if re.fullmatch(r"(?:hit\s+|press\s+)?(?:enter|return)(?:\s+key)?", body, re.I):
        return Intent("press", keys=("enter",), clause=clause)
    if m := full(_FILL):
        return Intent("type", text=_text_arg(m["text"], quoted, nouns=False),
                      label=_FIELD_NOUN.sub("", _text_arg(m["label"], quoted, nouns=False)), clause=clause)
    if m := full(_TYPE):
        return _type_intent(m["rest"], quoted, clause)
    if m := full(_PRESS):
        spec = _unmask(m["keys"], quoted)
        if _names_no_key(spec):  # "press Submit", "press Sign in": a button, as a person reads it
            target = _text_arg(m["keys"], quoted, nouns=True)
            return Intent("click", target=target, clause=clause)
        return Intent("press", keys=_keys(spec), clause=clause)
    if m := full(_OPEN):
        url = _text_arg(m["url"], quoted, nouns=False)
        if not _URL.fullmatch(url):
            raise InstructionError(f"'{clause}': open needs a URL such as example.com or https://example.com/path; "
                                   "to click something on the screen, say: click \"<text>\"")
        return Intent("open", url=url, clause=clause)
    if m := full(_SCROLL):
        amount = int(m["n"]) if m["n"] else None
        if amount is not None and not 1 <= amount <= 50:
            raise InstructionError(f"'{clause}': scroll by 1 to 50 notches")
        return Intent("scroll", direction=m["dir"].lower(), amount=amount, clause=clause)
    raise InstructionError(f"cannot understand '{clause}'.\n{SUPPORTED_FORMS}")


def _type_intent(rest: str, quoted: list[str], clause: str) -> Intent:
    """type <text> [into|in <label>]: a quoted text ends where its quote ends; unquoted, the text
    ends at the last " into ", else the last " in "."""
    rest = rest.strip()
    lead = _TOKEN.match(rest)
    if lead:
        text, tail = quoted[int(lead.group(1))], rest[lead.end():]
        if not text:
            raise InstructionError(f"'{clause}': the text to type is empty")
        if tail.strip():
            into = _INTO.fullmatch(tail)
            if not into:
                raise InstructionError(f"cannot understand '{clause}': after the text, expected into \"<label>\".\n"
                                       f"{SUPPORTED_FORMS}")
            label = _text_arg(_FIELD_NOUN.sub("", into["label"]), quoted, nouns=False)
            return Intent("type", text=text, label=label, clause=clause)
        return Intent("type", text=text, clause=clause)
    split = None
    for word in ("into", "in"):
        found = [m for m in re.finditer(rf"\s+{word}\s+", rest, re.I)]
        if found:
            split = found[-1]
            break
    if split is None:
        text = _text_arg(rest, quoted, nouns=False)
        if not text:
            raise InstructionError(f"'{clause}': what should be typed? e.g. type \"hello\"")
        return Intent("type", text=text, clause=clause)
    label_part = re.sub(r"^the\s+", "", rest[split.end():], flags=re.I)
    label = _text_arg(_FIELD_NOUN.sub("", label_part), quoted, nouns=False)
    text = _text_arg(rest[:split.start()], quoted, nouns=False)
    if not text or not label:
        raise InstructionError(f"'{clause}': expected type \"<text>\" into \"<label>\"")
    return Intent("type", text=text, label=label, clause=clause)


def parse_instruction(text: str) -> list[Intent]:
    """An instruction -> the intents it asks for, in order. Raises InstructionError (with the
    supported forms) for anything outside the grammar: nothing is guessed."""
    if not text or not text.strip():
        raise InstructionError(f"the instruction is empty.\n{SUPPORTED_FORMS}")
    masked, quoted = _mask(" ".join(text.split()))
    clauses = _clauses(masked)
    if not clauses:
        raise InstructionError(f"the instruction is empty.\n{SUPPORTED_FORMS}")
    return [_parse_clause(c, quoted) for c in clauses]

# ---------------------------------------------------------------------------------------------
# The provider


class OcrProvider(Provider):
    """Runs a parsed instruction one intent per turn, grounding targets with OCR on each fresh screen.

    Options (all keyword, settable per model in glassdesk.toml): ``fuzzy`` the difflib ratio a
    fuzzy match needs (default 0.8); ``scroll_amount`` notches for "scroll down" without a number
    (default 5); ``retry_wait_ms`` how long to wait and look again when a target is missing -- the page
    may still be loading or rendering, after one of our own actions or at the run's start (a
    client-side app paints after its load; CI saw TodoMVC's field missed so) (default 1000; 0 fails
    at once);
    ``engine`` an object with ``read(image) -> list[Line]`` instead of the shared rapidocr engine.
    """

    sees_marks = False  # it reads the screen's text itself: drawn marks would cover it

    def __init__(self, instruction: str, *, model: str = "rapidocr", system: str = "",
                 fuzzy: float = FUZZY_THRESHOLD, scroll_amount: int = DEFAULT_SCROLL, retry_wait_ms: int = 1000,
                 engine: OcrEngine | None = None):
        super().__init__(instruction, model=model, system=system)
        self.name = f"ocr/{model}"
        if not 0.5 <= fuzzy <= 1.0:
            raise ValueError("fuzzy must be between 0.5 and 1.0")
        self.fuzzy = fuzzy
        self.scroll_amount = scroll_amount
        self.retry_wait_ms = retry_wait_ms
        self._engine = engine
        # The page's element under a pixel, from the turn's observation (None: pixels only).
        self._element_at: Callable[[int, int], Any] | None = None
        try:
            self.intents: list[Intent] = parse_instruction(instruction)
            self.parse_error: str | None = None
        except InstructionError as exc:
            self.intents, self.parse_error = [], str(exc)
        self._next = 0
        self._turns = 0
        self._waited = False
        self._answers: list[str] = []
        self._ocr_cache: tuple[Any, np.ndarray, list[Line]] | None = None

    @property
    def engine(self) -> OcrEngine:
        if self._engine is None:
            self._engine = shared_engine()
        return self._engine

    # -- one turn ---------------------------------------------------------------------------

    def turn(self, observation: Observation, results: list[CallResult], note: str | None = None) -> ModelTurn:
        frame = observation.frame
        self._element_at = observation.element_at
        self._turns += 1
        turn = ModelTurn(image_size=(frame.width, frame.height))
        if self.parse_error is not None:
            return self._fail(turn, "parse", {"instruction": self.instruction}, self.parse_error)
        failed = [r for r in results if not r.ok]
        if failed:
            return self._fail(turn, "step", {}, f"the previous step failed: {failed[0].error or 'unknown error'}")
        notes: list[str] = []
        lines: list[Line] | None = None
        while self._next < len(self.intents):
            intent = self.intents[self._next]
            if intent.kind == "read":
                lines = lines if lines is not None else self._ocr(frame)
                text = read_text(lines)
                self._answers.append(text)
                notes.append(f"read {len(lines)} lines of text")
                self._next += 1
                continue
            try:
                if intent.kind in ("click", "double_click", "right_click") or (intent.kind == "type" and intent.label):
                    lines = lines if lines is not None else self._ocr(frame)
                actions, said = self._plan(intent, frame, lines)
            except GroundingError as exc:
                if exc.not_found and self.retry_wait_ms > 0 and not self._waited:
                    # The screen may still be changing (after our own action, or a page the run
                    # started on still rendering): look once more.
                    self._waited = True
                    turn.text = "\n".join([*notes, f"{exc}; waiting {self.retry_wait_ms} ms and looking again"])
                    turn.calls = [self._call(intent.kind, intent.to_dict(), [Wait(duration_ms=self.retry_wait_ms)])]
                    return turn
                turn.text = "\n".join(notes)
                return self._fail(turn, intent.kind, intent.to_dict(), str(exc))
            except ValueError as exc:  # an action the desktop would refuse (e.g. text too long)
                turn.text = "\n".join(notes)
                return self._fail(turn, intent.kind, intent.to_dict(), f"{intent.clause}: {exc}")
            self._waited = False
            self._next += 1
            turn.text = "\n".join([*notes, said])
            turn.calls = [self._call(intent.kind, intent.to_dict(), actions)]
            return turn
        answer = "\n\n".join(self._answers) or None
        name = "read" if notes else "done"
        raw = self.intents[-1].to_dict() if notes and self.intents else {}
        turn.text = "\n".join(notes)
        turn.calls = [self._call(name, raw, [Done(answer=answer)])]
        return turn

    def _call(self, name: str, raw: dict[str, Any], actions: list[Action]) -> ToolCall:
        return ToolCall(f"ocr_{self._turns}", name, raw, actions=actions)

    def _fail(self, turn: ModelTurn, name: str, raw: dict[str, Any], reason: str) -> ModelTurn:
        turn.text = "\n".join(t for t in (turn.text, reason) if t)
        turn.calls = [self._call(name, raw, [Fail(reason=reason)])]
        return turn

    def _ocr(self, frame) -> list[Line]:
        """OCR of the frame, once: the same frame object, or one with identical pixels, reuses it."""
        return self._look(frame)[1]

    def _look(self, frame) -> tuple[np.ndarray, list[Line]]:
        cached = self._ocr_cache
        if cached is not None and (cached[0] is frame or frame.same_pixels(cached[0])):
            return cached[1], cached[2]
        image = frame_array(frame)
        lines = self.engine.read(image)
        self._ocr_cache = (frame, image, lines)
        return image, lines

    def _plan(self, intent: Intent, frame, lines: list[Line] | None) -> tuple[list[Action], str]:
        """An intent on this screen -> display-pixel actions and a sentence for the trace."""
        w, h = frame.width, frame.height

        def clamp(x: int, y: int) -> dict[str, int]:
            return {"x": min(max(x, 0), w - 1), "y": min(max(y, 0), h - 1)}

        if intent.kind in ("click", "double_click", "right_click"):
            match = find_text(lines or [], intent.target or "", fuzzy=self.fuzzy)
            at = clamp(*match.point)
            action: Action = (DoubleClick(**at) if intent.kind == "double_click"
                              else Click(button="right", **at) if intent.kind == "right_click" else Click(**at))
            kind = "exact" if match.how != "fuzzy" else f"fuzzy {match.score:.2f}"
            return [action], (f"{intent.kind.replace('_', '-')} '{intent.target}': OCR text '{match.text}' "
                              f"({kind}) at ({at['x']}, {at['y']})")
        if intent.kind == "type":
            text = intent.text or ""
            if not intent.label:
                return [Type(text=text)], f"type {len(text)} characters into the focused element"
            match = find_text(lines or [], intent.label, fuzzy=self.fuzzy)
            # A label that is part of a longer line ("Email address"): the field follows the line.
            image, _ = self._look(frame)
            label = match.line.box.union(match.box)
            spot = field_by_page(lines or [], label, self._element_at, (w, h), match.text) \
                if self._element_at is not None else None
            spot = spot or field_point(lines or [], label, image, (w, h))
            at = clamp(spot.x, spot.y)
            return [Click(**at), Type(text=text)], (f"type {len(text)} characters into the field labelled "
                                                    f"'{match.text}': click at ({at['x']}, {at['y']}) ({spot.how})")
        if intent.kind == "press":
            return [Key(keys=list(intent.keys))], f"press {' '.join(intent.keys)}"
        if intent.kind == "open":
            url = intent.url or ""
            return ([Key(keys=["ctrl+l"]), Type(text=url), Key(keys=["enter"])],
                    f"open {url} in the focused browser window (ctrl+l, type, enter)")
        if intent.kind == "scroll":
            amount = intent.amount if intent.amount is not None else self.scroll_amount
            return ([Scroll(direction=intent.direction or "down", amount=amount, **clamp(w // 2, h // 2))],
                    f"scroll {intent.direction} {amount} notches at the centre of the screen")
        raise AssertionError(f"unplanned intent {intent.kind}")

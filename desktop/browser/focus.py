"""Where typed text would go in the page in front, read just before a ``type`` runs.

A ``type`` sends X key events to whatever has the keyboard focus. When the page has it and its
focused element takes no text (the page itself after a click beside a field, a button, a link, a
checkbox), the text goes nowhere: the keys are lost, or a button's Enter submits a form. Nothing
on the screen says so (a run that clicked 3 px beside a field "typed" its text and said done).
So the session refuses such a ``type`` before a key is sent (desktop.errors.TypedIntoNothing),
naming the element that had the focus.

What it does not judge (``takes`` None: the typing goes ahead): a frame (its own document
decides), any other element a page may make take keys (a canvas, a div with a tabindex, a custom
role), and a page whose own code listens for keys where they go: a key listener on the focused
element, one of its ancestors, the document or the window (a game, a "press any key" page, a
list driven by the arrow keys), read with DevTools (DOMDebugger.getEventListeners). Only what is
known to take no text, where no code listens, is refused. Whether the browser's own UI holds the
keys (the address bar after ctrl+l) the page cannot say (Playwright emulates its focus): the
session does not ask after such a chord (desktop.session.settle.keeps_page_focus).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from desktop.browser.tabs import Tabs

# The focused element, through shadow roots, and whether it takes text: true (a text field, a
# text area, a select, an editable element, a text role), false (the document itself, a button, a
# link, a check box...), null (anything else, or the page without the keyboard focus).
TYPING_FOCUS = """() => {
  if (!document.hasFocus()) return {takes: null, element: 'outside the page'};
  let el = document.activeElement;
  while (el && el.shadowRoot && el.shadowRoot.activeElement) el = el.shadowRoot.activeElement;
  const describe = (e) => {
    const tag = e.tagName.toLowerCase();
    const name = (e.getAttribute('aria-label') || e.innerText || e.value || '').trim().replace(/\\s+/g, ' ');
    return `<${tag}${e.id ? ' id=' + e.id : ''}${e.type && tag === 'input' ? ' type=' + e.type : ''}>`
      + (name && tag !== 'body' && tag !== 'html' ? ` "${name.slice(0, 60)}"` : '');
  };
  if (!el || el === document.body || el === document.documentElement) {
    return {takes: false, element: 'the page itself (no element has the focus)'};
  }
  const tag = el.tagName.toLowerCase();
  const role = (el.getAttribute('role') || '').toLowerCase();
  const inert = el.disabled || el.readOnly;
  const TEXT_INPUTS = ['text', 'search', 'email', 'url', 'tel', 'password', 'number', 'date', 'time',
                       'datetime-local', 'month', 'week', ''];
  if (el.isContentEditable || ['textbox', 'searchbox', 'combobox', 'spinbutton'].includes(role)) {
    return {takes: true, element: describe(el)};
  }
  if (tag === 'textarea' || tag === 'select') return {takes: !inert, element: describe(el)};
  if (tag === 'input') {
    return {takes: TEXT_INPUTS.includes((el.getAttribute('type') || '').toLowerCase()) && !inert,
            element: describe(el)};
  }
  if (['button', 'a', 'summary'].includes(tag) || ['button', 'link', 'checkbox', 'radio', 'switch', 'tab',
                                                   'menuitem', 'option'].includes(role)) {
    return {takes: false, element: describe(el)};
  }
  return {takes: null, element: describe(el)};
}"""


KEY_EVENTS = frozenset({"keydown", "keypress", "keyup", "textInput"})
# The focused element, its ancestors, the document and the window: where a key's events go.
_KEY_PATH = """(() => {
  let el = document.activeElement;
  while (el && el.shadowRoot && el.shadowRoot.activeElement) el = el.shadowRoot.activeElement;
  const path = [];
  for (; el; el = el.parentElement || (el.getRootNode() instanceof ShadowRoot ? el.getRootNode().host : null)) {
    path.push(el);
  }
  return [...path, document, window];
})()"""
_GROUP = "glassdesk-typing-focus"


async def typing_focus(tabs: Tabs) -> dict | None:
    """``{takes, element}`` for the page in front (see TYPING_FOCUS); None with no page in front.
    A focus that takes no text is asked about its key listeners before it is said to."""
    page = await tabs.front()
    if page is None:
        return None
    found = await page.evaluate(TYPING_FOCUS)
    if not isinstance(found, dict):
        return None
    if found.get("takes") is False and await _listens_for_keys(tabs.devtools(page)):
        found = {**found, "takes": None, "listened": True}
    return found


async def _listens_for_keys(cdp) -> bool:
    """Whether page code listens for key events where typed keys go; True when it cannot be read
    (not known: not refused)."""
    if cdp is None:
        return True
    try:
        path = await cdp.send("Runtime.evaluate", {"expression": _KEY_PATH, "objectGroup": _GROUP})
        items = await cdp.send("Runtime.getProperties", {"objectId": path["result"]["objectId"],
                                                         "ownProperties": True})
        for item in items["result"]:
            object_id = (item.get("value") or {}).get("objectId")
            if not item["name"].isdigit() or object_id is None:
                continue
            listeners = await cdp.send("DOMDebugger.getEventListeners", {"objectId": object_id})
            if any(listener["type"] in KEY_EVENTS for listener in listeners["listeners"]):
                return True
        return False
    except Exception:
        return True
    finally:
        try:
            await cdp.send("Runtime.releaseObjectGroup", {"objectGroup": _GROUP})
        except Exception:
            pass

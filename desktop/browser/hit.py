"""What is under a display pixel in the browser, read just before the pointer acts there.

The session calls ``hit_test`` for every pointer action while Chromium is in front, before the
input runs (a click may remove what it clicked). The answer (``desktop.models.ElementAt``) is the
element a person would say they clicked: the deepest element at the point, or its nearest
interactive ancestor (the button around a label's span), with its role, accessible name, box in
display pixels, and a ranked list of locators, each kept only when Playwright's own locator engine
resolves it to exactly that element (``locator.evaluate_all`` against the element's handle). The
candidates are built by ``rank_locators`` (pure, tested without a browser); the role and name are
computed here by a small table (HTML-AAM's common cases), not by the browser's accessibility
tree, so a wrong guess is simply a candidate Playwright does not confirm, never a wrong record.

Never read: a field's value (it may be a typed secret).
"""

from __future__ import annotations

import asyncio
import secrets
import time

from desktop.browser.locate import locator_for, viewport_origin
from desktop.models import ROLES, ElementAt, Target, css_string

# The element a person means when the pixel is inside it: what acts on a click, or what names
# itself for tests. The deepest element at the point is kept when none of these is around it.
INTERACTIVE = ("a[href], button, input, select, textarea, summary, option, label, [role=button], [role=link], "
               "[role=checkbox], [role=radio], [role=tab], [role=menuitem], [role=option], [role=switch], "
               "[role=textbox], [role=combobox], [role=searchbox], [role=slider], [contenteditable=''], "
               "[contenteditable=true], [data-testid]")

# The element at a viewport point (CSS px), through open shadow roots, then the interactive
# ancestor around it. null over no element (the point is off the page).
_AT = """(x, y, interactive) => {
  let el = document.elementFromPoint(x, y);
  while (el && el.shadowRoot) {
    const inner = el.shadowRoot.elementFromPoint(x, y);
    if (!inner || inner === el) break;
    el = inner;
  }
  if (!el) return null;
  return el.closest(interactive) || el;
}"""

# What names the element. The accessible name follows the accname steps that matter in forms and
# apps: aria-labelledby, aria-label, a field's labels, alt, the content of a button/link/heading-
# like element, then title and placeholder. Its text is innerText, whitespace collapsed.
_DESCRIBE = """(el, testIdAttribute) => {
  const norm = s => (s || '').replace(/\\s+/g, ' ').trim();
  const tag = el.tagName.toLowerCase();
  const type = (el.getAttribute('type') || 'text').toLowerCase();
  const attr = n => { const v = el.getAttribute(n); return v === null ? null : norm(v) || null; };
  const implicit = () => {
    if (tag === 'a' || tag === 'area') return el.hasAttribute('href') ? 'link' : null;
    if (tag === 'button' || tag === 'summary') return 'button';
    if (tag === 'input') {
      if (['button', 'submit', 'reset', 'image'].includes(type)) return 'button';
      if (type === 'checkbox') return 'checkbox';
      if (type === 'radio') return 'radio';
      if (type === 'range') return 'slider';
      if (type === 'number') return 'spinbutton';
      if (type === 'search') return el.hasAttribute('list') ? 'combobox' : 'searchbox';
      if (['text', 'email', 'tel', 'url', 'password'].includes(type))
        return el.hasAttribute('list') ? 'combobox' : 'textbox';
      return null;
    }
    if (tag === 'select') return (el.multiple || el.size > 1) ? 'listbox' : 'combobox';
    if (tag === 'textarea') return 'textbox';
    if (/^h[1-6]$/.test(tag)) return 'heading';
    if (tag === 'img') return el.getAttribute('alt') === '' ? 'presentation' : 'img';
    const table = {li: 'listitem', ul: 'list', ol: 'list', nav: 'navigation', main: 'main', option: 'option',
                   dialog: 'dialog', form: 'form', table: 'table', tr: 'row', td: 'cell', th: 'columnheader',
                   p: 'paragraph', article: 'article', progress: 'progressbar', hr: 'separator'};
    return table[tag] || null;
  };
  const role = (attr('role') || '').split(' ')[0] || implicit();
  const labels = el.labels ? Array.from(el.labels).map(l => norm(l.innerText)).filter(Boolean) : [];
  const byIds = (attr('aria-labelledby') || '').split(' ').map(id => document.getElementById(id))
    .filter(Boolean).map(n => norm(n.innerText || n.textContent)).filter(Boolean).join(' ');
  const field = ['input', 'select', 'textarea'].includes(tag);
  const contentNamed = ['button', 'link', 'heading', 'tab', 'menuitem', 'option', 'checkbox', 'radio', 'switch',
                        'listitem', 'cell', 'columnheader'].includes(role);
  let name = byIds || attr('aria-label');
  if (!name && field) name = labels.join(' ') || null;
  if (!name && tag === 'input' && ['submit', 'reset', 'button'].includes(type))
    name = attr('value') || (type === 'submit' ? 'Submit' : type === 'reset' ? 'Reset' : null);
  if (!name && tag === 'img') name = attr('alt');
  if (!name && contentNamed && !field) name = norm(el.innerText || el.textContent) || null;
  if (!name) name = attr('title') || (field ? attr('placeholder') : null);
  const text = field ? null : norm(el.innerText).slice(0, 500) || null;
  const path = [];
  for (let n = el; n && n.nodeType === 1; n = n.parentElement) {
    if (n.id && document.querySelectorAll('#' + CSS.escape(n.id)).length === 1) {
      path.unshift('#' + CSS.escape(n.id));
      break;
    }
    let part = n.tagName.toLowerCase();
    const parent = n.parentElement;
    if (parent) {
      const same = Array.from(parent.children).filter(c => c.tagName === n.tagName);
      if (same.length > 1) part += ':nth-of-type(' + (same.indexOf(n) + 1) + ')';
    }
    path.unshift(part);
  }
  const r = el.getBoundingClientRect();
  return {tag, type: tag === 'input' ? type : null, role, name: name ? name.slice(0, 500) : null, text,
          label: labels[0] || null, placeholder: attr('placeholder'), alt: attr('alt'), title: attr('title'),
          test_id: attr(testIdAttribute), id: el.id || null, css: path.join(' > '),
          box: {x: r.x, y: r.y, width: r.width, height: r.height},
          window: {screenX, screenY, outerWidth, outerHeight, innerWidth, innerHeight}};
}"""

# Where the page keeps the element it was asked about, for the candidates' checks that follow: a
# name of this process's own (a page's script cannot count on it), a property no loop lists, and a
# WeakRef that keeps nothing alive once the page drops the element.
_KEPT = "__glassdesk_hit_" + secrets.token_hex(8)

# The whole read in one DevTools call (each round trip costs ~2 ms, and a pointer action waits for
# this one): the display pixel as a viewport point (the window's place plus the browser's frame
# around the viewport, as locate.viewport_origin), the element there, its description, the element
# kept for _SAME. null outside the viewport (the tab strip, the toolbar) or over no element.
_HIT = f"""([x, y, interactive, testIdAttribute, kept]) => {{
  const at = {_AT};
  const describe = {_DESCRIBE};
  const side = Math.floor((outerWidth - innerWidth) / 2);
  const cx = x - screenX - side, cy = y - screenY - (outerHeight - innerHeight - side);
  if (cx < 0 || cy < 0) return null;
  const el = at(cx, cy, interactive);
  if (!el) return null;
  let isKept = true;
  try {{
    Object.defineProperty(window, kept, {{value: new WeakRef(el), configurable: true, writable: true}});
  }} catch (e) {{
    isKept = false;  // a page that froze its window: no candidate can be confirmed against this element
  }}
  return {{...describe(el, testIdAttribute), css_x: cx, css_y: cy, kept: isKept}};
}}"""

# A candidate is kept when Playwright's engine resolves it to exactly the element _HIT kept.
_SAME = f"(els) => els.length === 1 && els[0] === window[{_KEPT!r}]?.deref()"

# The longest text used as a locator: a paragraph is not a name.
MAX_TEXT = 80


def rank_locators(info: dict) -> list[Target]:
    """The candidate locators of a described element, best first (pure).

    The order favours what survives a redesign: the role and accessible name a user perceives
    (Playwright's first advice), the test id a developer put there for tests, a field's label, its
    placeholder, an image's alt, the visible text, a title, the role alone, then CSS (an id, then
    the structural path), which a restyle breaks. String matches are exact: a candidate must name
    this element only.
    """
    out: list[Target] = []

    def add(**fields) -> None:
        try:
            target = Target(**fields)
        except ValueError:  # a role Playwright does not know, an empty string: no candidate
            return
        if target not in out:
            out.append(target)

    role, name = info.get("role"), info.get("name")
    if role in ROLES and name:
        add(role=role, name=name, exact=True)
    if info.get("test_id"):
        add(test_id=info["test_id"])
    if info.get("label"):
        add(label=info["label"], exact=True)
    if info.get("placeholder") and info.get("tag") in ("input", "textarea"):
        add(placeholder=info["placeholder"], exact=True)
    if info.get("alt"):
        add(alt=info["alt"], exact=True)
    text = info.get("text")
    if text and len(text) <= MAX_TEXT and role not in ("textbox", "combobox", "listbox"):
        add(text=text, exact=True)
    if info.get("title"):
        add(title=info["title"], exact=True)
    if role in ROLES and not name:
        add(role=role)
    if info.get("id"):
        add(selector="#" + css_ident(info["id"]))
    if info.get("css"):
        add(selector=info["css"])
    return out


def css_ident(value: str) -> str:
    """``value`` escaped as a CSS identifier (pure; CSS.escape's rules for the common cases)."""
    out = []
    for i, ch in enumerate(value):
        if ch.isalnum() and ch.isascii() or ch in "-_" or ord(ch) >= 0x80:
            if i == 0 and ch.isdigit() or (i == 1 and ch.isdigit() and value[0] == "-"):
                out.append(f"\\{ord(ch):x} ")
            else:
                out.append(ch)
        else:
            out.append("\\" + ch)
    return "".join(out)


async def hit_test(page, x: int, y: int, test_id_attribute: str = "data-testid") -> ElementAt | None:
    """The element under display pixel (x, y) of ``page`` (the tab in front) and its verified
    locators; None when the point is outside the viewport or over no element. Two waits on the
    page: the read itself (_HIT), then the candidates' checks side by side."""
    start = time.perf_counter()
    info = await page.evaluate(_HIT, [x, y, INTERACTIVE, test_id_attribute, _KEPT])
    if info is None:
        return None
    candidates = rank_locators(info)
    if test_id_attribute != "data-testid":
        # get_by_test_id reads the page's configured attribute; this one is named in CSS instead.
        candidates = [c if c.test_id is None else Target(selector=f"[{test_id_attribute}={css_string(c.test_id)}]")
                      for c in candidates]
    same = await asyncio.gather(*(_resolves_to(page, c) for c in candidates)) if info["kept"] \
        else [False] * len(candidates)
    locators = [c for c, ok in zip(candidates, same, strict=True) if ok]
    box = info["box"]
    origin = viewport_origin(info["window"])
    return ElementAt(
        x=x, y=y, css_x=info["css_x"], css_y=info["css_y"], tag=info["tag"], role=info["role"], name=info["name"],
        text=info["text"], box={"x": origin[0] + round(box["x"]), "y": origin[1] + round(box["y"]),
                                "width": round(box["width"]), "height": round(box["height"])},
        locators=locators, url=page.url, ms=round((time.perf_counter() - start) * 1000, 1))


async def _resolves_to(page, target: Target) -> bool:
    """Playwright's engine resolves ``target`` to exactly the element _HIT kept."""
    try:
        return bool(await locator_for(page, target).evaluate_all(_SAME))
    except Exception:  # a candidate the engine cannot parse is no candidate
        return False


# What a person can act on in the viewport, for set-of-marks (desktop.marks): the interactive elements
# (as INTERACTIVE, but for labels and test ids, which are not controls) that show at their own
# middle (not covered, not scrolled away), described as _DESCRIBE does, boxes in display px (the
# window's place plus the browser's frame, as viewport_origin), at most ``limit`` in document order.
MARKABLE = ("a[href], button, input:not([type=hidden]), select, textarea, summary, [role=button], [role=link], "
            "[role=checkbox], [role=radio], [role=tab], [role=menuitem], [role=option], [role=switch], "
            "[role=textbox], [role=combobox], [role=searchbox], [role=slider], [contenteditable=''], "
            "[contenteditable=true]")
_MARKS = f"""([markable, testIdAttribute, limit]) => {{
  const describe = {_DESCRIBE};
  const side = Math.floor((outerWidth - innerWidth) / 2), top = outerHeight - innerHeight - side;
  const marks = [];
  let more = false;
  for (const el of document.querySelectorAll(markable)) {{
    const r = el.getBoundingClientRect();
    const left = Math.max(r.left, 0), right = Math.min(r.right, innerWidth);
    const upper = Math.max(r.top, 0), lower = Math.min(r.bottom, innerHeight);
    if (right - left < 2 || lower - upper < 2) continue;
    const there = document.elementFromPoint((left + right) / 2, (upper + lower) / 2);
    if (!there || !(there === el || el.contains(there) || there.contains(el) && there.closest(markable) === el))
      continue;
    if (marks.length >= limit) {{ more = true; break; }}
    const d = describe(el, testIdAttribute);
    marks.push({{role: d.role, name: d.name, tag: d.tag,
                 box: [Math.round(screenX + side + left), Math.round(screenY + top + upper),
                       Math.round(right - left), Math.round(lower - upper)]}});
  }}
  return {{marks, more}};
}}"""


async def page_marks(page, limit: int) -> dict:
    """The marks of the tab in front (``_MARKS``): ``{"marks": [...], "more": bool}``."""
    return await page.evaluate(_MARKS, [MARKABLE, "data-testid", limit])

"""JavaScript dialogs (alert, confirm, prompt, beforeunload) of one browser process: the one left
open, its answer by the model, the operator or the session's dialog policy, and the operations a
dialog holds up. Every dialog is recorded in the session's PageRecord (desktop.browser.record).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, TypeVar

from desktop.browser.errors import DialogOpen, NoDialog, first_line
from desktop.models import DIALOG_MODES, DialogInfo, DialogMode

if TYPE_CHECKING:
    from desktop.browser.record import PageRecord

T = TypeVar("T")
def dialog_mode(value: str) -> DialogMode:
    """A dialog policy's mode, checked (pure); ValueError names the modes there are."""
    if value not in DIALOG_MODES:
        raise ValueError(f"dialog policy {value!r}: use one of {', '.join(DIALOG_MODES)}")
    return value  # type: ignore[return-value]


def dialog_info(dialog) -> DialogInfo | None:
    """What an answer says of an open dialog (None: there is none)."""
    if dialog is None:
        return None
    return DialogInfo(type=dialog.type, message=dialog.message, default_prompt=dialog.default_value)


class Dialogs:
    """The dialogs of one browser process's pages. Every method runs on the Playwright driver's loop."""

    def __init__(self, record: PageRecord):
        self.record = record
        self.current = None                    # the open JavaScript dialog, if any
        # page -> the record's entry of the dialog left open on it, until someone answers it
        self._unanswered: dict[Any, int] = {}
        # (page, future) of operations that stop waiting when a dialog opens on their page and holds it
        self._held: list[tuple[Any, asyncio.Future]] = []

    async def on_dialog(self, dialog) -> None:
        mode = self.record.dialog_policy
        entry = self.record.dialogs.add({"type": dialog.type, "message": dialog.message[:10_000],
                                         "default_prompt": dialog.default_value,
                                         "url": dialog.page.url if dialog.page else "",
                                         "handled": None, "by": None, "failure": None})
        if mode == "manual":
            self.current = dialog
            self._unanswered[dialog.page] = entry["seq"]
            for page, held in self._held:
                if page is dialog.page and not held.done():
                    held.set_result(dialog)
            return
        # Recorded before it is answered: the dialog's closing (closed, below) must find it answered.
        self.record.dialogs.update(entry["seq"], handled="accepted" if mode == "accept" else "dismissed",
                                   by="policy")
        try:
            if mode == "accept":
                # What OK does: a prompt gives the text its field holds, the default.
                await dialog.accept(dialog.default_value)
            else:
                await dialog.dismiss()
        except Exception as exc:  # the page or the browser went away meanwhile
            self.record.dialogs.update(entry["seq"], failure=first_line(exc))

    def closed(self, page, params) -> None:
        """DevTools says the dialog on ``page`` closed (Page.javascriptDialogClosed, heard on the
        page layer's own DevTools session, desktop.browser.pages.Pages._watch): a dialog answered on
        the screen (a click on its OK) closes without Playwright saying so."""
        if self.current is not None and self.current.page is page:
            self.current = None
        seq = self._unanswered.pop(page, None)
        if seq is not None:  # not answered through this layer: on the screen, by a click or a key
            self.record.dialogs.update(seq, handled="accepted" if params.get("result") else "dismissed",
                                       by="screen")

    def forget(self, page) -> None:
        """The page closed: its dialog closed with it."""
        if self.current is not None and self.current.page is page:
            self.current = None
        self._unanswered.pop(page, None)

    def refuse_if_open(self, doing: str) -> None:
        if self.current is not None:
            raise DialogOpen(f"a {self.current.type} dialog is open ({self.current.message[:200]!r}): it would "
                             f"swallow the {doing}; answer it first (page dialog: accept or dismiss)")

    async def unless_held(self, page, work: Awaitable[T]) -> T:
        """``work``, unless a dialog left open on ``page`` holds it up first: a navigation away from
        a page that asks before leaving (beforeunload), a page that opens an alert as it loads, an
        expression that calls confirm(). Then DialogOpen at once, rather than a wait for a timeout
        that only an answer can end; the work goes on, and finishes if the dialog is accepted."""
        task = asyncio.ensure_future(work)
        held = asyncio.get_running_loop().create_future()
        waiting = (page, held)
        self._held.append(waiting)
        try:
            await asyncio.wait({task, held}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the caller's own timeout: the work ends with it
            task.cancel()
            raise
        finally:
            self._held.remove(waiting)
            held.cancel()
        if task.done():
            return task.result()
        task.add_done_callback(lambda done: done.cancelled() or done.exception())  # its outcome is nobody's now
        dialog = held.result()
        raise DialogOpen(f"a {dialog.type} dialog opened ({dialog.message[:200]!r}) and holds the page; answer it "
                         "(page dialog: accept or dismiss)" + (": accepting leaves the page, dismissing stays"
                                                               if dialog.type == "beforeunload" else ""))

    async def handle(self, accept: bool, prompt_text: str | None) -> DialogInfo:
        dialog = self.current
        if dialog is None:
            raise NoDialog("no dialog is open")
        info = dialog_info(dialog)
        seq = self._unanswered.pop(dialog.page, None)
        if seq is not None:  # before the answer: the dialog's closing must find it answered (closed)
            self.record.dialogs.update(seq, handled="accepted" if accept else "dismissed", by="request")
        try:
            if accept:
                await dialog.accept(prompt_text) if prompt_text is not None else await dialog.accept()
            else:
                await dialog.dismiss()
        finally:
            # Only this one: the page may have opened the next dialog while the answer was on its way.
            if self.current is dialog:
                self.current = None
        return info

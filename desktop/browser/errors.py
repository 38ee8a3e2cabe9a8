"""The page layer's own failures, raised on the Playwright driver's loop; desktop.service.page maps
each to its typed error (desktop.errors) once."""

from __future__ import annotations


class NotFound(LookupError):
    """No element (or tab) answers to what was named."""


class Ambiguous(LookupError):
    """An action's locator matches more than one element (Playwright's strict mode): which one is
    the caller's to say."""


class Refused(ValueError):
    """The page or the browser would not do what was asked (a navigation that failed, an
    expression that threw, an option that is not there); the message says why."""


class TooLarge(Refused):
    """A value larger than one answer may carry."""


class BadSelector(Refused):
    """A selector the browser cannot parse."""


class DialogOpen(RuntimeError):
    """An open JavaScript dialog would swallow the action."""


class NoDialog(RuntimeError):
    """There is no dialog to answer."""


class Crashed(RuntimeError):
    """The tab in front crashed (its renderer died: the session's memory limit, a bug) and is being
    opened again; worth trying again in a moment."""


class PageTimeout(TimeoutError):
    """What was waited for did not happen in time."""


def first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]

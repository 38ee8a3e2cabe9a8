"""The whole catalogue: the desktop layer's operations (desktop.ops) and the vision layer's (the QA
verbs, vision.qa.ops; the session recordings, vision.recordings.ops; calibration,
vision.calibration.ops; evaluations, vision.eval.ops). The doors are generated from this one tuple."""

from __future__ import annotations

from desktop.ops import catalogue as desktop_catalogue
from desktop.ops.declare import Operation
from vision.calibration.ops import OPERATIONS as CALIBRATION
from vision.eval.ops import OPERATIONS as EVALS
from vision.qa.ops import OPERATIONS as QA
from vision.recordings.ops import OPERATIONS as RECORDINGS


def catalogue() -> tuple[Operation, ...]:
    return (*desktop_catalogue(), *QA, *RECORDINGS, *CALIBRATION, *EVALS)


def services(glassdesk) -> dict:
    """The service each operation's ``service`` names, of one application."""
    return {"desktop": glassdesk.desktops, "pages": glassdesk.desktops.pages, "qa": glassdesk.qa,
            "recordings": glassdesk.recordings, "calibration": glassdesk.calibration, "evals": glassdesk.evals}

"""Error codes of the vision layer, in the same shape as the desktop's (desktop.errors)."""

from desktop.errors import GlassdeskError, InvalidRequest

__all__ = ["BaselineConflict", "BaselineCorrupt", "BaselineNotFound", "InvalidRequest", "ModelUnavailable",
           "QaRunCorruptError", "QaRunNotFoundError", "TraceCorruptError", "TraceNotFoundError"]


class ModelUnavailable(GlassdeskError):
    """The model cannot be used as configured (no API key, unknown provider)."""

    code, status = "model_unavailable", 422


class TraceNotFoundError(GlassdeskError):
    code, status = "trace_not_found", 404


class TraceCorruptError(GlassdeskError):
    """A trace on disk no longer parses: GET .../verify says where."""

    code, status = "trace_corrupt", 500


class EvalNotFound(GlassdeskError):
    """No evaluation by that id, running or kept (vision.eval.service)."""

    code, status = "eval_not_found", 404


class QaRunNotFoundError(GlassdeskError):
    """No QA run by that id, or no artifact of that name in it."""

    code, status = "qa_run_not_found", 404


class QaRunCorruptError(GlassdeskError):
    """A QA run's records on disk no longer make a run (edited): its verify names what is wrong.
    A 409, not a 500: nothing failed in the server, the evidence asked for is damaged."""

    code, status = "qa_run_corrupt", 409


class BaselineNotFound(GlassdeskError):
    """No visual baseline with that id (or no such version, or no such screenshot in it)."""

    code, status = "baseline_not_found", 404


class BaselineCorrupt(GlassdeskError):
    """A baseline's files on disk no longer match the SHA-256 its metadata recorded."""

    code, status = "baseline_corrupt", 500


class BaselineConflict(GlassdeskError):
    """An approval that would not do what it says: the comparison was against a version that is no
    longer the latest, or that run was approved already."""

    code, status = "baseline_conflict", 409


class RecordingInProgress(GlassdeskError):
    """The session is already being filmed: one recording at a time per session."""

    code, status = "recording_in_progress", 409


class NotRecording(GlassdeskError):
    """Stopping a recording that was never started (or has already stopped)."""

    code, status = "not_recording", 409


class RecordingNotFound(GlassdeskError):
    """No session recording by that id, or no such file of it."""

    code, status = "recording_not_found", 404

"""Session recordings: a video receipt of a session's display between a start and a stop
(service.py: SessionRecordings), declared as operations of the catalogue (ops.py)."""

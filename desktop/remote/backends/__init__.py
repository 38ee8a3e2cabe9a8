"""Session backends: where each session's desktop runs.

``local`` is the embedded default (desktop.session.manager.SessionManager: processes of this server);
``docker`` runs each session as a container of the glassdesk image and ``kubernetes`` as a pod, each
a single-session glassdesk driven over HTTP (desktop.remote.desktop). ``process`` runs them as local
single-session servers: the tests' and developers' way to the remote path without a daemon.
"""

from __future__ import annotations

BACKENDS = ("local", "docker", "kubernetes")


def create_backend(name: str, **options):
    """The backend called ``name``; None for ``local`` (today's embedded sessions, unchanged)."""
    from desktop.errors import InvalidRequest

    if name == "local":
        return None
    if name == "process":
        from desktop.remote.backends.process import ProcessBackend

        return ProcessBackend(**options)
    if name == "docker":
        from desktop.remote.backends.docker import DockerBackend

        return DockerBackend(**options)
    if name == "kubernetes":
        from desktop.remote.backends.kubernetes import KubernetesBackend

        try:  # the backend imports the kubernetes client itself, only now
            return KubernetesBackend(**options)  # its settings from GLASSDESK_K8S_* (docs/scaling.md)
        except ImportError:
            raise InvalidRequest("backend kubernetes: the kubernetes client is missing; "
                                 "pip install -c constraints.txt kubernetes") from None
    raise InvalidRequest(f"backend {name!r}: use one of {', '.join(BACKENDS)}")

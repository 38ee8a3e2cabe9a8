"""The desktop's services: every operation's checks and error mapping, once, for a local or a
remote session."""


def desktop_service_class(manager):
    """DesktopService for local sessions; its remote form for a backend's (desktop.remote.backends)."""
    from desktop.remote.backends.manager import BackendSessions

    if isinstance(manager, BackendSessions):
        from desktop.service.remote import RemoteDesktopService

        return RemoteDesktopService
    from desktop.service.desktop import DesktopService

    return DesktopService

"""What a desktop process inherits from the server: an allowlist by name, so no secret reaches the desktop."""

from desktop.session.stack import desktop_environment
from desktop.x11.input import GLIDE_MS, Executor


def test_secrets_stay_with_the_server():
    server = {"PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_TIME": "C", "TZ": "UTC",
              "ANTHROPIC_API_KEY": "sk-ant-secret", "OPENAI_API_KEY": "sk-secret", "GLASSDESK_TOKEN": "t0ken",
              "AWS_SECRET_ACCESS_KEY": "aws", "https_proxy": "http://user:pw@proxy:3128",
              "GLASSDESK_POINTER_GLIDE_MS": "0", "GLASSDESK_OWNER": "mark", "DBUS_SESSION_BUS_ADDRESS": "x"}
    assert desktop_environment(server) == {"PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_TIME": "C", "TZ": "UTC",
                                           "GLASSDESK_OWNER": "mark"}


def test_no_glassdesk_variable_passes_by_its_prefix():
    """Only the owner's mark, which the reaper finds desktop processes by; a variable named like
    glassdesk's own (a secret for `glassdesk qa`, a backend's setting, one added later) stays out."""
    server = {"GLASSDESK_OWNER": "mark", "GLASSDESK_SECRET_PW": "hunter2", "GLASSDESK_K8S_NAMESPACE": "team-a",
              "GLASSDESK_DATA_DIR": "/srv/data", "GLASSDESK_CONFIG": "/etc/glassdesk.toml",
              "GLASSDESK_FORWARDED_ALLOW_IPS": "10.0.0.1", "GLASSDESK_SOMETHING_NEW": "x"}
    assert desktop_environment(server) == {"GLASSDESK_OWNER": "mark"}


def test_the_pointer_glide_is_the_servers_setting_not_the_desktops(monkeypatch):
    monkeypatch.setenv("GLASSDESK_POINTER_GLIDE_MS", "0")
    assert Executor({"DISPLAY": ":99"}).glide_ms == 0
    monkeypatch.delenv("GLASSDESK_POINTER_GLIDE_MS")
    assert Executor({"DISPLAY": ":99", "GLASSDESK_POINTER_GLIDE_MS": "0"}).glide_ms == GLIDE_MS

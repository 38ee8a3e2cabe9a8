"""What a desktop process inherits from the server: an allowlist, so no secret reaches the desktop."""

from desktop.session.stack import desktop_environment


def test_secrets_stay_with_the_server():
    server = {"PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_TIME": "C", "TZ": "UTC",
              "ANTHROPIC_API_KEY": "sk-ant-secret", "OPENAI_API_KEY": "sk-secret", "GLASSDESK_TOKEN": "t0ken",
              "AWS_SECRET_ACCESS_KEY": "aws", "https_proxy": "http://user:pw@proxy:3128",
              "GLASSDESK_POINTER_GLIDE_MS": "0", "GLASSDESK_OWNER": "mark", "DBUS_SESSION_BUS_ADDRESS": "x"}
    assert desktop_environment(server) == {"PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_TIME": "C", "TZ": "UTC",
                                           "GLASSDESK_POINTER_GLIDE_MS": "0", "GLASSDESK_OWNER": "mark"}

"""The desktop's services: every operation's checks and error mapping, once, for a local or a
remote session."""

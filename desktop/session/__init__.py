"""One session: its processes (stack), the Session and the manager of them all, and the live view's
tokens."""

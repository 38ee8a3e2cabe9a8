"""Sessions elsewhere: the Desktop port over a session server's API, the call route's codec, and
the backends that start them."""

"""The browser's network policy (pure) and the per-session proxy that enforces it."""

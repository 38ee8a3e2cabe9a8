"""The session's Chromium and the page layer over its DevTools pipe, one module per job."""

"""The parts of a session that speak to its X display: capture and settle, input, windows, the
desktop's user and processes, video."""

"""The run: the vision loop (loop.py: Runner, run control, the report of a run), what a step changed on
the screen and in the page (effects.py), the run's events (events.py: the bus) and whoever listens to
them (observers.py), and packs of runs worded per model family (packs.py)."""

"""Evaluations: tasks with checks, run as episodes on models, scored by the checks (docs/eval.md).

``tasks.py`` the task and the task set (pure); ``stats.py`` rates, intervals and the baseline's
comparison (pure); ``episodes.py`` the port an evaluation drives (a clean desktop, the task's setup,
the run, the check) and its implementation over the REST client; ``runner.py`` the episodes, K at a
time, environment errors retried apart; ``results.py`` the summary, JUnit and the saved result;
``miniwob.py`` MiniWoB++'s pages served locally, its tasks and its DOM oracle.
"""

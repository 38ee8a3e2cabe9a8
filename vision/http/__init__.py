"""The HTTP doors: the composition root (app), the runs, QA, executor, console and viewer routes,
auth and the schema."""

"""What a run leaves for a person and for CI, read from its stored evidence: words and JUnit
(report.py), the run viewer and its offline report (runview.py), and a trace made into a QA flow
(export.py). The stores themselves are vision.trace and vision.qa.runs."""

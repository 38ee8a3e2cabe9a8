"""The unit tier's shared fixtures."""

from __future__ import annotations

import pytest

from vision.trace.store import TraceStore


@pytest.fixture
def store(tmp_path) -> TraceStore:
    """A trace store in the test's own directory (test_qa_baselines' ``store`` is a BaselineStore)."""
    return TraceStore(tmp_path)

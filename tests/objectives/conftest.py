"""Shared by the objective tests: the registry as it was before each test (tests register their own)."""

import pytest

from bertkit.objectives import OBJECTIVES


@pytest.fixture(autouse=True)
def _clean_registry():
    before = dict(OBJECTIVES)
    yield
    OBJECTIVES.clear()
    OBJECTIVES.update(before)

"""The screen snapshots run in `make test`'s serial phase: syrupy finds a snapshot file that no
test uses any more only in a run without pytest-xdist (under xdist it reports none)."""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.serial)

"""The pytest plugin: `pytest --truva-db PATH` records every execution the tests make through the
API (`run_plan`, `run_plan_sync`, `call_tool`) into that store, labelled with the test's node id.

Off unless `--truva-db` is given; registered through the `pytest11` entry point. `truva-console
ls --db PATH --test NODEID` (or `test:NODEID` in the console's filter) lists one test's runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

TEST_LABEL = "test"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add `--truva-db PATH`."""
    group = parser.getgroup("truva", "truva-console recording")
    group.addoption(
        "--truva-db", metavar="PATH", default=None,
        help="record every truva-console API execution of this run into the debug store PATH, "
             "labelled test=<node id> (open it with truva-console --db PATH)",
    )  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    """Register the recorder when `--truva-db` is given."""
    db_path = config.getoption("truva_db")
    if db_path:
        config.pluginmanager.register(TestRunRecording(db_path), "truva-recording")


class TestRunRecording:
    """Holds one `Recording` for the session and labels each test's executions with its node id."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self, db_path: str) -> None:
        self.db_path = db_path
        self.executions = 0
        self.notice: str | None = None
        self._stack = contextlib.ExitStack()
        self._recording: Any = None

    def record(self, event: Any) -> None:
        """Count executions, then hand the event to the store recording."""
        if getattr(event, "kind", None) == "execution_started":
            self.executions += 1
        self._recording.record(event)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        from executor.api import record_runs
        from store.errors import StoreError
        from store.recording import Recording

        try:
            self._recording = self._stack.enter_context(Recording(self.db_path, telemetry=False))
        except StoreError as error:
            raise pytest.UsageError(f"--truva-db: {error}") from error
        self._stack.enter_context(record_runs(self))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Any) -> Iterator[None]:
        from executor.api import run_labels

        with run_labels({TEST_LABEL: item.nodeid}):
            return (yield)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self._stack.close()
        if self._recording is not None:
            self.notice = self._recording.exit_notice()

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminalreporter.write_line(
            f"truva: {self.executions} execution(s) recorded into {self.db_path} "
            f"(truva-console --db {self.db_path})"
        )
        if self.notice:
            terminalreporter.write_line(f"truva: {self.notice}")

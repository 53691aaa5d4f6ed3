"""`truva-console --samples` (the TUI on a temporary copy of the sample traces): the CLI twins
it shows and copies still work after the app has exited and its copy is gone."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path

import console.tui.app as tui_app_module
from store.queries import ExecutionFilter, open_store
from tests.support.plans import run_cli
from tests.support.tui import open_execution, screen_loaded, tui_app


def test_the_twins_of_the_sample_console_work_after_it_exits(monkeypatch) -> None:
    seen: dict[str, object] = {}

    def drive(db_path: Path, *, db_arg: str | None) -> int:
        """What the terminal user does: open an execution, copy its twin (Y), leave."""
        seen["db_path"] = db_path
        execution_id = (
            open_store(db_path).list_executions(ExecutionFilter()).executions[0].execution_id
        )

        async def session() -> None:
            app = tui_app(db_path, db_arg=db_arg, live_refresh=False)
            async with app.run_test(size=(120, 36)) as pilot:
                await screen_loaded(pilot)
                seen["list_twin"] = app.screen.twin_command
                screen = await open_execution(app, pilot, execution_id)
                await pilot.press("Y")
                seen["explain_twin"] = app.clipboard
                seen["sub_title"] = screen.sub_title

        asyncio.run(session())
        return 0

    monkeypatch.setattr(tui_app_module, "_run", drive)
    assert tui_app_module.run_app(None, samples=True) == 0
    assert not Path(seen["db_path"]).exists()  # the app's copy went with it
    explain = shlex.split(seen["explain_twin"])
    assert explain[:3] == ["truva-console", "--samples", "explain"]
    assert seen["sub_title"] == f"CLI: {seen['explain_twin']}"
    result = run_cli(*explain[1:])
    assert result.code == 0, result.stderr
    assert explain[3] in result.stdout
    listing = shlex.split(seen["list_twin"])
    assert listing[:3] == ["truva-console", "--samples", "ls"]
    result = run_cli(*listing[1:])
    assert result.code == 0, result.stderr
    assert explain[3] in result.stdout

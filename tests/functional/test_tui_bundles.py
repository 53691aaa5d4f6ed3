"""Export and import dialogs through Pilot, on the bundled sample store (real recorded runs)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from textual.widgets import Checkbox, Input, RadioButton

from console.samples import sample_execution_ids
from console.tui.app import TruvaConsoleApp
from console.tui.screens.bundle import ExportDialog, ImportDialog
from console.tui.screens.executions import ExecutionsScreen
from console.tui.widgets.tables import ExecutionTable
from store.bundle import read_bundle
from store.queries import open_store
from tests.support.demo_store import sample_store_copy
from tests.support.tui import dialog_done, screen_loaded, settle_until, shown, tui_app

SIZE = (120, 36)
MISCLASSIFIED_503 = sample_execution_ids()["scenario-d-misclassified-503"]
SAMPLE_COUNT = len(sample_execution_ids())


@pytest.fixture
def sample_db(tmp_path: Path) -> Path:
    return sample_store_copy(tmp_path / "samples.duckdb")


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def listed_ids(app: TruvaConsoleApp) -> list[str]:
    table = app.screen_stack[0].query_one(ExecutionTable)
    return [table.coordinate_to_cell_key((row, 0)).row_key.value for row in range(table.row_count)]


async def test_export_writes_a_bundle_of_the_highlighted_execution(
    sample_db: Path, in_tmp: Path
) -> None:
    app = tui_app(sample_db, db_arg="samples.duckdb", live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        app.screen.query_one(ExecutionTable).move_to_key(MISCLASSIFIED_503)
        await pilot.press("x")
        dialog = app.screen
        assert isinstance(dialog, ExportDialog)
        path_input = dialog.query_one("#export-path", Input)
        assert path_input.value == f"./{MISCLASSIFIED_503}.truva.zip"
        assert app.focused is path_input
        twin = f"truva-console --db samples.duckdb export {MISCLASSIFIED_503} " \
               f"-o ./{MISCLASSIFIED_503}.truva.zip"  # fmt: skip
        assert dialog.sub_title == f"CLI: {twin}"
        assert shown(dialog, "#export-twin") == f"CLI {twin}"
        await pilot.press("enter")
        await dialog_done(pilot, dialog)
        result = shown(dialog, "#export-result")
    assert result.startswith(f"wrote {MISCLASSIFIED_503}.truva.zip (")
    assert "bytes), secrets redacted" in result
    assert "1 execution · 1 step, 3 attempts, 0 LLM calls" in result
    bundle = read_bundle(in_tmp / f"{MISCLASSIFIED_503}.truva.zip")
    assert bundle.execution_ids == (MISCLASSIFIED_503,)
    assert bundle.manifest["execution_ids"] == [MISCLASSIFIED_503]
    assert bundle.redacted is True


async def test_export_all_listed_without_redaction_and_an_existing_file(
    sample_db: Path, in_tmp: Path
) -> None:
    (in_tmp / "executions.truva.zip").write_bytes(b"keep me")
    app = tui_app(sample_db, db_arg="samples.duckdb", live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        commands = {command.title: command for command in app.screen.palette_commands()}
        assert f"bundle: Export {MISCLASSIFIED_503}" in commands
        commands["bundle: Export all listed"].run()
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, ExportDialog)
        assert dialog.query_one("#scope-listed", RadioButton).value
        dialog.query_one("#export-redact", Checkbox).value = False
        await pilot.pause()
        assert dialog.sub_title == (
            "CLI: truva-console --db samples.duckdb export --all -o ./executions.truva.zip "
            "--no-redact"
        )
        await pilot.press("enter")
        await dialog_done(pilot, dialog)
        refused = shown(dialog, "#export-result")
        assert refused == ("executions.truva.zip: already exists "
                           "(tick “Overwrite an existing file” to overwrite it)")
        assert (in_tmp / "executions.truva.zip").read_bytes() == b"keep me"
        dialog.query_one("#export-overwrite", Checkbox).value = True
        await pilot.pause()
        assert dialog.sub_title.endswith("--no-redact --force")
        await pilot.click("#export-run")
        await dialog_done(pilot, dialog)
        written = shown(dialog, "#export-result")
        await pilot.press("escape")
        assert isinstance(app.screen, ExecutionsScreen)
    assert "secrets NOT redacted" in written and f"{SAMPLE_COUNT} executions ·" in written
    bundle = read_bundle(in_tmp / "executions.truva.zip")
    assert len(bundle.execution_ids) == SAMPLE_COUNT and bundle.redacted is False


async def test_import_into_a_fresh_store_lists_the_execution(
    sample_db: Path, tmp_path: Path, in_tmp: Path
) -> None:
    from store.bundle import export_bundle

    export_bundle(sample_db, in_tmp / "one.truva.zip", [MISCLASSIFIED_503])
    fresh = tmp_path / "fresh" / "debug.duckdb"
    app = tui_app(fresh, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        assert app.screen.page.total == 0
        await pilot.press("i")
        dialog = app.screen
        assert isinstance(dialog, ImportDialog)
        await pilot.press(*"one.truva.zip")
        assert dialog.sub_title == "CLI: truva-console import one.truva.zip"
        await pilot.press("enter")
        await dialog_done(pilot, dialog)
        result = shown(dialog, "#import-result")
        await settle_until(pilot, lambda: listed_ids(app) == [MISCLASSIFIED_503], "the list")
        await pilot.press("escape")
        assert app.screen.page.total == 1
    assert result.startswith("imported 1, skipped (already in the store) 0")
    assert f"imported: {MISCLASSIFIED_503}" in result
    assert open_store(fresh).get_execution(MISCLASSIFIED_503).steps[0].dispatch_count == 3


def _truncated(path: Path, good: Path) -> None:
    path.write_bytes(good.read_bytes()[:-200])


def _not_a_zip(path: Path, good: Path) -> None:
    path.write_text("hello, I am not a bundle\n")


def _no_manifest(path: Path, good: Path) -> None:
    with zipfile.ZipFile(good) as source, zipfile.ZipFile(path, "w") as archive:
        for info in source.infolist():
            if info.filename != "manifest.json":
                archive.writestr(info, source.read(info))


@pytest.mark.parametrize(
    ("make_bundle", "problem"),
    [
        (_not_a_zip, "not a truva bundle (not a zip archive); nothing was imported"),
        (_truncated, "nothing was imported"),
        (_no_manifest, "not a truva bundle (manifest.json is missing)"),
    ],
    ids=["not-a-zip", "truncated", "no-manifest"],
)  # fmt: skip
async def test_bad_bundle_shows_one_line_and_leaves_the_list(
    sample_db: Path, tmp_path: Path, in_tmp: Path, make_bundle, problem: str
) -> None:
    from store.bundle import export_bundle

    good = export_bundle(sample_db, tmp_path / "good.truva.zip", [MISCLASSIFIED_503]).path
    make_bundle(in_tmp / "bad.truva.zip", good)
    app = tui_app(sample_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        before = listed_ids(app)
        await pilot.press("i")
        dialog = app.screen
        dialog.query_one("#import-path", Input).value = "bad.truva.zip"
        await pilot.press("enter")
        await dialog_done(pilot, dialog)
        refused = shown(dialog, "#import-result")
        await pilot.press("escape")
        await screen_loaded(pilot)
        after = listed_ids(app)
    assert problem in refused and "\n" not in refused and "Traceback" not in refused
    assert after == before and len(before) == SAMPLE_COUNT
    assert open_store(sample_db).list_executions(limit=100).total == SAMPLE_COUNT

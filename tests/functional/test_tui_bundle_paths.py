"""Path completion in the export and import dialogs, and their messages naming the dialog's
controls rather than CLI flags."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from textual.widgets import Input

from console.samples import prepare_sample_store, sample_execution_ids
from console.tui.screens.bundle import ExportDialog, ImportDialog
from console.tui.widgets.path_suggester import complete_path
from tests.support.plans import run_cli
from tests.support.tui import dialog_done, screen_loaded, settle_until, shown, tui_app

SIZE = (120, 36)
EXPIRED_KEY = sample_execution_ids()["scenario-c-expired-key"]


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp_path as the current directory and $HOME, with a few bundles and decoys."""
    for directory in ("traces", "traces/old", "tmp-other", ".hidden"):
        (tmp_path / directory).mkdir()
    for file in ("traces/b.truva.zip", "traces/a.truva.zip", "traces/notes.txt",
                 "top.truva.zip"):  # fmt: skip
        (tmp_path / file).write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


COMPLETIONS = [
    ("relative_directory", "./tr", "./traces/"),
    ("bare_name", "tr", "traces/"),
    ("directories_before_bundles", "t", "tmp-other/"),
    ("bundle_file", "./to", "./top.truva.zip"),
    ("inside_a_directory_directories_first", "./traces/", "./traces/old/"),
    ("only_bundle_files", "./traces/", "./traces/old/"),
    ("bundle_by_prefix", "traces/a", "traces/a.truva.zip"),
    ("not_a_bundle_file", "traces/n", None),
    ("hidden_only_when_asked", "./.h", "./.hidden/"),
    ("home", "~/tra", "~/traces/"),
    ("no_match", "./zzz", None),
    ("missing_directory", "./nowhere/x", None),
    ("empty", "", None),
]


@pytest.mark.parametrize(("typed", "expected"), [case[1:] for case in COMPLETIONS],
                         ids=[case[0] for case in COMPLETIONS])  # fmt: skip
def test_complete_path(tree: Path, typed: str, expected: str | None) -> None:
    assert complete_path(typed, suffix=".truva.zip") == expected


def test_complete_path_of_an_absolute_path(tree: Path) -> None:
    assert complete_path(f"{tree}/tr", suffix=".truva.zip") == f"{tree}/traces/"


async def _type_and_accept(pilot, field: Input, typed: str) -> str:
    field.value = ""
    field.focus()
    await pilot.press(*typed)
    await settle_until(pilot, lambda: bool(field._suggestion), f"a suggestion for {typed!r}")
    await pilot.press("right")
    return field.value


async def _open_dialog(pilot, key: str, kind: type, field_id: str) -> tuple[object, Input]:
    """Press `key` on the list; the dialog of type `kind` and its path field."""
    await screen_loaded(pilot)
    await pilot.press(key)
    dialog = pilot.app.screen
    assert isinstance(dialog, kind)
    return dialog, dialog.query_one(field_id, Input)


async def test_export_path_completes_with_the_right_arrow(tree: Path) -> None:
    db = prepare_sample_store(tree / "samples.duckdb")
    app = tui_app(db, db_arg="samples.duckdb", live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        dialog, field = await _open_dialog(pilot, "x", ExportDialog, "#export-path")
        first = await _type_and_accept(pilot, field, "./tr")
        await pilot.press("a")
        await settle_until(pilot, lambda: bool(field._suggestion), "a bundle suggestion")
        await pilot.press("right")
        second = field.value
        hint = shown(dialog, "#export-result")
    assert (first, second) == ("./traces/", "./traces/a.truva.zip")
    assert "→ completes the path" in hint


async def test_import_path_completes_and_a_conflict_names_the_replace_checkbox(
    tree: Path,
) -> None:
    db = prepare_sample_store(tree / "samples.duckdb")
    exported = run_cli("--db", str(db), "export", EXPIRED_KEY, "-o", "traces/expired.truva.zip")
    assert exported.code == 0, exported.stderr
    with duckdb.connect(str(db)) as conn:  # the store's copy now differs from the bundle's
        conn.execute("UPDATE executions SET query = 'edited' WHERE execution_id = ?",
                     [EXPIRED_KEY])  # fmt: skip
    app = tui_app(db, db_arg="samples.duckdb", live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        dialog, field = await _open_dialog(pilot, "i", ImportDialog, "#import-path")
        completed = await _type_and_accept(pilot, field, "traces/e")
        await pilot.press("enter")
        await dialog_done(pilot, dialog)
        refused = " ".join(shown(dialog, "#import-result").split())
    assert completed == "traces/expired.truva.zip"
    assert f"execution {EXPIRED_KEY} is already in the store with different rows" in refused
    assert refused.endswith(
        "nothing was imported (tick “Replace executions the store holds with different rows” "
        "to overwrite it)"
    )
    assert "--replace" not in refused and "--force" not in refused

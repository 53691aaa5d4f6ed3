"""The one table of the console's actions: keys, titles, palette groups, tooltips, CLI twins.

Every screen's and widget's `BINDINGS`, the command palette's fixed commands and the F1 help
screen are generated from `ACTIONS`; a user keymap file overrides keys by action id (Textual's
`App.set_keymap`).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual.actions import parse
from textual.binding import Binding, BindingType

KEYMAP_FILE = "keymap.toml"


@dataclass(frozen=True, slots=True)
class ConsoleAction:
    """One action where it applies (`scope`): its binding, palette entry, help and CLI twin.

    `scope` names who owns the binding: `app`, a screen (`executions`, `execution`, `replay`,
    `whatif`, `lint`, `dialog`) or a pane widget (`table`, `filter`). `palette` is the palette
    title without its group (None: not in the palette); `cli` is what the CLI twin of the action
    is, if any.
    """

    id: str
    scope: str
    keys: str
    action: str
    title: str
    group: str
    tooltip: str
    cli: str = ""
    palette: str | None = None
    footer: bool = True
    key_display: str | None = None
    priority: bool = False


_TAB_TITLES = (
    ("tab-decision", "Decision"),
    ("tab-request", "Request"),
    ("tab-response", "Response"),
    ("tab-llm", "LLM"),
    ("tab-events", "Backoff & events"),
    ("tab-timeline", "Timeline"),
    ("tab-diff", "Diff"),
)
# The CLI twin of a tab, where one command prints what the tab shows.
_TAB_TWINS = {
    "tab-timeline": "truva-console explain EXECUTION STEP --timeline --attempt N",
    "tab-diff": "truva-console explain EXECUTION STEP  (its `changed` lines)",
}
_PANES = "Move focus to the {} pane (steps, attempts, detail; filter, list; …)"


def _zoom_action(scope: str, keys: str) -> ConsoleAction:
    return ConsoleAction("zoom-pane", scope, keys, "zoom_pane", "Zoom", "view",
                         "Maximise the focused pane, or restore it",
                         palette="Zoom the focused pane")  # fmt: skip


def _pane_actions(scope: str, *, zoom_keys: str) -> tuple[ConsoleAction, ...]:
    """`l` / `h` to the next / previous pane, and the zoom key, on a screen with panes."""
    return (
        ConsoleAction("focus-next-pane", scope, "l", "focus_pane(1)", "Next pane", "view",
                      _PANES.format("next"), footer=False),
        ConsoleAction("focus-previous-pane", scope, "h", "focus_pane(-1)", "Previous pane",
                      "view", _PANES.format("previous"), footer=False),
        _zoom_action(scope, zoom_keys),
    )  # fmt: skip


def _back_action(scope: str, tooltip: str, *, palette: str = "Back to executions",
                 keys: str = "escape") -> ConsoleAction:
    """The key that leaves a screen (`tooltip`: where to, and what it cancels on the way)."""
    return ConsoleAction("back", scope, keys, "back", "Back", "view", tooltip, palette=palette,
                         key_display="esc")  # fmt: skip


def _copy_cli_action(scope: str, key: str, command: str, usage: str = "") -> ConsoleAction:
    """The key that copies the screen's `truva-console COMMAND` twin (`usage`: its arguments)."""
    return ConsoleAction("copy-cli", scope, key, "copy_twin", "Copy CLI", "cli",
                         f"Copy the equivalent `truva-console {command}` command",
                         cli=f"truva-console {command}{usage}",
                         palette=f"Copy the {command} command",
                         key_display=key if key.isupper() else None)  # fmt: skip

ACTIONS: tuple[ConsoleAction, ...] = (
    # ---------------------------------------------------------------- everywhere
    ConsoleAction("help", "app", "f1,question_mark", "help", "Help", "view",
                  "Show the keys of the focused pane and screen, with their CLI twins",
                  palette="Keys of this pane", key_display="?"),
    ConsoleAction("quit", "app", "q", "quit", "Quit", "view", "Leave truva-console"),
    ConsoleAction("focus-next", "app", "tab", "focus_next", "Next", "view",
                  "Move focus to the next widget", footer=False),
    ConsoleAction("focus-previous", "app", "shift+tab", "focus_previous", "Previous", "view",
                  "Move focus to the previous widget", footer=False),
    # ---------------------------------------------------------------- panes
    ConsoleAction("open-row", "table", "enter", "select_cursor", "Open", "view",
                  "Open the highlighted row"),
    ConsoleAction("row-down", "table", "j", "cursor_down", "Down", "view",
                  "Move to the next row", footer=False),
    ConsoleAction("row-up", "table", "k", "cursor_up", "Up", "view",
                  "Move to the previous row", footer=False),
    ConsoleAction("row-first", "table", "g", "scroll_top", "First row", "view",
                  "Move to the first row", footer=False),
    ConsoleAction("row-last", "table", "G", "scroll_bottom", "Last row", "view",
                  "Move to the last row", footer=False),
    ConsoleAction("sort-column", "execution-table", "s", "sort_next", "Sort", "view",
                  "Sort this page by the next column (again: the one after)",
                  cli="truva-console ls --sort COLUMN[:asc|:desc]"),
    ConsoleAction("sort-reverse", "execution-table", "S", "sort_reverse", "Reverse", "view",
                  "Reverse the order of this page (newest first: oldest first)",
                  cli="truva-console ls --sort COLUMN:asc|desc", key_display="S"),
    ConsoleAction("leave-filter", "filter", "escape", "leave", "Leave filter", "filter",
                  "Go back to the table without applying the filter"),
    # ---------------------------------------------------------------- executions
    ConsoleAction("focus-filter", "executions", "slash", "focus_filter", "Filter", "filter",
                  "Edit the filter, e.g. status:failed rule:budget.attempts text:PARIS",
                  cli="truva-console ls --status/--rule/--text …", palette="Edit filter",
                  key_display="/"),
    ConsoleAction("refresh", "executions", "r", "refresh", "Refresh", "view",
                  "Query the store again now", palette="Refresh"),
    ConsoleAction("next-page", "executions", "n", "next_page", "Next page", "page",
                  "Show the next page of older executions", cli="truva-console ls --offset N",
                  palette="Next page"),
    ConsoleAction("previous-page", "executions", "p", "previous_page", "Prev page", "page",
                  "Show the previous page of newer executions",
                  cli="truva-console ls --offset N", palette="Previous page"),
    _copy_cli_action("executions", "y", "ls"),
    ConsoleAction("open-whatif", "executions", "w", "open_whatif", "What-if", "whatif",
                  "Re-decide the listed executions' recorded decisions under changed config",
                  cli="truva-console whatif --config KEY=VALUE [ls filters]",
                  palette="Policy what-if over the store", footer=False),
    ConsoleAction("open-lint", "executions", "c", "open_lint", "Contract", "lint",
                  "Grade each tool's error contract from its recorded responses",
                  cli="truva-console lint", palette="Tool contract report cards", footer=False),
    ConsoleAction("next-failed-execution", "executions", "f", "next_failed_execution",
                  "Next failed", "view",
                  "Move to the next execution that failed, partly or whole (failed, partial, "
                  "cancelled or interrupted), below the highlighted one",
                  cli="truva-console ls --status failed,partial,cancelled,interrupted",
                  palette="Next failed execution"),
    ConsoleAction("export-bundle", "executions", "x", "export", "Export", "bundle",
                  "Write the highlighted execution (or all listed) to a trace bundle",
                  cli="truva-console export EXECUTION... -o FILE"),
    ConsoleAction("import-bundle", "executions", "i", "import_bundle", "Import", "bundle",
                  "Load a trace bundle file into this store", cli="truva-console import FILE",
                  palette="Import file"),
    ConsoleAction("open-sql", "executions", "colon", "open_sql", "SQL", "sql",
                  "Run DuckDB SQL on the store; Enter on a result row opens its execution",
                  cli='truva-console sql "QUERY"', palette="Open the SQL screen",
                  key_display=":", footer=False),
    *_pane_actions("executions", zoom_keys="z,f11"),
    # ---------------------------------------------------------------- execution
    _back_action("execution", "Back to the executions list (or restore a zoomed pane)",
                 keys="escape,backspace"),
    ConsoleAction("refresh", "execution", "r", "refresh", "Refresh", "view",
                  "Query the store again now", palette="Refresh"),
    ConsoleAction("copy-focused", "execution", "y", "copy_focused", "Copy", "text",
                  "Copy the selected text, else the whole focused pane or tab",
                  cli="truva-console explain EXECUTION STEP", palette="Copy the focused text"),
    _copy_cli_action("execution", "Y", "explain", " EXECUTION STEP"),
    ConsoleAction("search-text", "execution", "ctrl+f", "search", "Search", "text",
                  "Find in the focused body or LLM text (or the active tab's)",
                  cli="truva-console explain EXECUTION STEP | grep -n TEXT",
                  palette="Search the focused text"),
    ConsoleAction("open-pager", "execution", "f3", "open_pager", "Pager", "text",
                  "Show the focused body, prompt, answer or tab in $PAGER (less -R)",
                  cli="truva-console explain EXECUTION STEP | less -R",
                  palette="Show the focused text in $PAGER"),
    ConsoleAction("open-editor", "execution", "f4", "open_editor", "Editor", "text",
                  "Open a read-only copy of the focused text in $EDITOR",
                  palette="Open the focused text in $EDITOR", footer=False),
    ConsoleAction("next-failed", "execution", "n,right_square_bracket", "next_failed",
                  "Next failed", "view", "Jump to the next failed attempt of this execution",
                  cli="truva-console explain EXECUTION", palette="Next failed attempt",
                  key_display="n"),
    ConsoleAction("previous-failed", "execution", "N,left_square_bracket", "previous_failed",
                  "Prev failed", "view",
                  "Jump to the previous failed attempt of this execution",
                  cli="truva-console explain EXECUTION", palette="Previous failed attempt",
                  footer=False, key_display="N"),
    ConsoleAction("replay-step", "execution", "R", "replay_step", "Replay step", "replay",
                  "Replay the selected step locally with edited tool responses",
                  cli="truva-console replay EXECUTION STEP --response N=FILE", key_display="R"),
    ConsoleAction("rerun-failed", "execution", "F", "rerun_failed", "Re-run failed", "execution",
                  "Run the failed, rejected and skipped steps again as a new execution, "
                  "reusing the results of the steps that succeeded",
                  cli="truva-console rerun EXECUTION", palette="Re-run failed steps",
                  key_display="F"),
    *(
        ConsoleAction(f"show-{tab_id}", "execution", str(number), f"show_tab('{tab_id}')",
                      title, "tab", f"Show the {title} tab of the attempt", palette=title,
                      footer=False, cli=_TAB_TWINS.get(tab_id, ""))
        for number, (tab_id, title) in enumerate(_TAB_TITLES, start=1)
    ),
    *_pane_actions("execution", zoom_keys="z,f11"),
    # ---------------------------------------------------------------- search bar (ctrl+f)
    ConsoleAction("search-next", "search", "enter,down", "jump(False)", "Next match", "text",
                  "Select the next match"),
    ConsoleAction("search-previous", "search", "shift+enter,up", "jump(True)",
                  "Previous match", "text", "Select the previous match"),
    ConsoleAction("search-close", "search", "escape", "close", "Close search", "text",
                  "Close the search and go back to the text", key_display="esc"),
    # ---------------------------------------------------------------- replay
    _back_action("replay", "Back to the execution (while a replay runs: cancel it)",
                 palette="Back to the execution"),
    ConsoleAction("run-replay", "replay", "ctrl+r", "run_replay", "Run replay", "replay",
                  "Replay the step with the edited responses, LLM mode and overrides",
                  cli="truva-console replay EXECUTION STEP …", palette="Run replay"),
    ConsoleAction("restore-response", "replay", "ctrl+t", "restore_response",
                  "Restore recorded", "replay",
                  "Put the recorded response of this dispatch back in the editor",
                  palette="Restore recorded response"),
    ConsoleAction("open-replay", "replay", "ctrl+o", "open_replay", "Open replay", "replay",
                  "Open the replay execution in the execution screen",
                  cli="truva-console explain REPLAY_EXECUTION"),
    _copy_cli_action("replay", "y", "replay", " EXECUTION STEP …"),
    _zoom_action("replay", "f11"),
    # ---------------------------------------------------------------- sql
    ConsoleAction("run-sql", "sql", "ctrl+enter,ctrl+j,f5", "run_query", "Run", "sql",
                  "Run the editor's SQL on the store, read-only, after ingesting the spool",
                  cli='truva-console sql "QUERY"', palette="Run the query", key_display="F5"),
    ConsoleAction("cancel-sql", "sql", "ctrl+c", "cancel_query", "Cancel", "sql",
                  "Interrupt the running query", palette="Cancel the running query",
                  priority=True),
    _back_action("sql", "Back to the executions list (while a query runs: cancel it)"),
    ConsoleAction("export-sql", "sql", "ctrl+s", "export_result", "Export", "sql",
                  "Write the query's whole result (not only the rows shown) to a CSV or "
                  "Parquet file", cli='truva-console sql --format csv|parquet -o FILE "QUERY"',
                  palette="Export the result to CSV or Parquet"),
    ConsoleAction("history-previous", "sql", "ctrl+up", "history(1)", "Older query", "sql",
                  "Put the previous query of the history in the editor",
                  palette="Previous query from the history", footer=False),
    ConsoleAction("history-next", "sql", "ctrl+down", "history(-1)", "Newer query", "sql",
                  "Put the next query of the history in the editor",
                  palette="Next query from the history", footer=False),
    _copy_cli_action("sql", "Y", "sql", ' "QUERY"'),
    *_pane_actions("sql", zoom_keys="f11"),
    # ---------------------------------------------------------------- dialogs
    ConsoleAction("close-dialog", "dialog", "escape", "close", "Close", "view",
                  "Close the dialog", key_display="esc"),
    # ---------------------------------------------------------------- what-if
    _back_action("whatif", "Back to the executions list (while a what-if runs: cancel it)"),
    ConsoleAction("run-whatif", "whatif", "ctrl+r", "run_whatif", "Run", "whatif",
                  "Re-decide the matching decisions with the config overrides",
                  cli="truva-console whatif --config KEY=VALUE [ls filters]",
                  palette="Run the what-if"),
    _copy_cli_action("whatif", "Y", "whatif", " --config KEY=VALUE [ls filters]"),
    ConsoleAction("copy-replay", "whatif", "R", "copy_replay", "Copy replay", "cli",
                  "Copy the `truva-console replay` command that finds out what the "
                  "highlighted change would have led to",
                  cli="truva-console replay EXECUTION STEP --config KEY=VALUE",
                  palette="Copy the replay command of the change", key_display="R"),
    *_pane_actions("whatif", zoom_keys="f11"),
    # ---------------------------------------------------------------- lint
    _back_action("lint", "Back to the executions list"),
    ConsoleAction("refresh", "lint", "r", "refresh", "Refresh", "view",
                  "Grade the store's responses again now", cli="truva-console lint",
                  palette="Refresh"),
    _copy_cli_action("lint", "Y", "lint"),
    *_pane_actions("lint", zoom_keys="z,f11"),
)  # fmt: skip

SCOPE_TITLES = {
    "app": "Everywhere",
    "table": "Table",
    "execution-table": "Executions table",
    "filter": "Filter bar",
    "executions": "Executions screen",
    "execution": "Execution screen",
    "replay": "Replay screen",
    "sql": "SQL screen",
    "dialog": "Dialog",
    "search": "Search bar",
    "whatif": "What-if screen",
    "lint": "Lint report screen",
}


def actions_of(scope: str) -> tuple[ConsoleAction, ...]:
    """The actions that `scope` owns, in table order."""
    return tuple(action for action in ACTIONS if action.scope == scope)


def bindings(scope: str) -> list[BindingType]:
    """The Textual bindings of `scope`, with ids (so a keymap can rebind them) and tooltips."""
    return [
        Binding(action.keys, action.action, action.title, show=action.footer, id=action.id,
                key_display=action.key_display, tooltip=action.tooltip,
                priority=action.priority)
        for action in actions_of(scope)
    ]  # fmt: skip


def action_ids() -> frozenset[str]:
    """Every action id a keymap may name."""
    return frozenset(action.id for action in ACTIONS)


def run_action(node: Any, action: ConsoleAction) -> Callable[[], object]:
    """A callback that runs `action` on `node` (a screen or widget), for the palette."""
    name, arguments = parse(action.action)[1:]
    method = getattr(node, f"action_{name}")
    return lambda: method(*arguments)


# -------------------------------------------------------------------------------- keymap


class KeymapError(ValueError):
    """A keymap file that cannot be used; the message is one line naming the file and key."""


def keymap_path(environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_CONFIG_HOME/truva-console/keymap.toml` (`~/.config` when the variable is unset)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "truva-console" / KEYMAP_FILE


def load_keymap(path: Path) -> dict[str, str]:
    """The `[keys]` table of `path`: action id → keys (`"f5"`, `"ctrl+l,f5"`); {} if no file.

    Raises KeymapError naming the file and the first entry that cannot be used.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as error:
        raise KeymapError(f"{path}: cannot be read: {error}") from error
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise KeymapError(f"{path}: not valid TOML: {error}") from error
    unknown_tables = sorted(set(document) - {"keys"})
    if unknown_tables:
        raise KeymapError(f"{path}: {unknown_tables[0]}: expected only a [keys] table")
    keys = document.get("keys", {})
    if not isinstance(keys, dict):
        raise KeymapError(f"{path}: keys: expected a [keys] table, got {keys!r}")
    known = action_ids()
    keymap: dict[str, str] = {}
    for action_id, value in keys.items():
        if action_id not in known:
            raise KeymapError(f"{path}: [keys] {action_id}: no such action (the F1 help and "
                              "docs/console.md list the action ids)")  # fmt: skip
        if not isinstance(value, str) or not value.strip():
            raise KeymapError(f'{path}: [keys] {action_id}: expected keys such as "f5" or '
                              f'"ctrl+l,f5", got {value!r}')  # fmt: skip
        keymap[action_id] = value.replace(" ", "")
    return keymap

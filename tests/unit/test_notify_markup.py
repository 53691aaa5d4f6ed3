"""Every notification the console builds from a value (a path, a problem, a CLI twin) is shown
as typed: Textual reads a notify message as markup unless `markup=False`, and a keymap
problem's `[keys]` vanished from it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TUI = Path(__file__).resolve().parents[2] / "console" / "tui"


def notify_calls() -> list[tuple[str, ast.Call]]:
    """Each `….notify(...)` call in console/tui whose message is not a string literal."""
    calls = []
    for path in sorted(TUI.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "notify" and node.args
                    and not isinstance(node.args[0], ast.Constant)):  # fmt: skip
                calls.append((f"{path.relative_to(TUI)}:{node.lineno}", node))
    return calls


CALLS = notify_calls()


def test_the_scan_finds_the_notifications() -> None:
    assert len(CALLS) > 15


@pytest.mark.parametrize("call", [call for _, call in CALLS], ids=[where for where, _ in CALLS])
def test_a_notification_of_a_value_is_not_read_as_markup(call: ast.Call) -> None:
    markup = [keyword.value for keyword in call.keywords if keyword.arg == "markup"]
    assert len(markup) == 1 and isinstance(markup[0], ast.Constant) and markup[0].value is False

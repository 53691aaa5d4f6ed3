"""The F1 help as text: key names a user types, and the CLI twin under the description on a
narrow terminal so the description keeps its width."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from console.tui.screens.help import NARROW_COLUMNS, help_renderable, key_text

KEYS = {
    "brackets": ("n,right_square_bracket", "n / ]"),
    "function-keys": ("f1,question_mark", "F1 / ?"),
    "ctrl": ("ctrl+f", "ctrl+f"),
    "escape": ("escape,backspace", "esc / backspace"),
    # found by an outside check: the SQL key was shown as `colon`
    "punctuation": ("colon,plus,minus,slash", ": / + / - / /"),
    "enter": ("enter", "enter"),
}


@pytest.mark.parametrize(("keys", "shown"), KEYS.values(), ids=KEYS.keys())
def test_key_text_names_keys_as_typed(keys: str, shown: str) -> None:
    assert key_text(keys) == shown


def _text(width: int) -> list[str]:
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    twin = {"copy-cli": "truva-console explain exec-1 step-3"}.get
    console.print(help_renderable("Keys", ["execution"], {}, twin, width=width))
    return console.export_text().splitlines()


def test_narrow_help_puts_the_twin_under_what_the_key_does() -> None:
    lines = _text(NARROW_COLUMNS - 20)
    header = next(line for line in lines if "what it does" in line)
    assert header.split() == ["key", "what", "it", "does", "(CLI", "twin)"]
    copy = next(i for i, line in enumerate(lines) if "Copy CLI:" in line)
    twin_line = next(line for line in lines[copy:] if "CLI: " in line and "Copy" not in line)
    assert twin_line.strip() == "CLI: truva-console explain exec-1 step-3"


def test_wide_help_has_a_twin_column() -> None:
    lines = _text(NARROW_COLUMNS + 40)
    header = next(line for line in lines if "what it does" in line)
    assert header.split() == ["key", "what", "it", "does", "CLI", "twin"]
    assert any("Copy CLI:" in line and "truva-console explain exec-1 step-3" in line
               for line in lines)  # fmt: skip

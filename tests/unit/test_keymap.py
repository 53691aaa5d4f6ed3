"""The user keymap file: each file that cannot be used is one line naming the file and entry."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.tui.actions import KeymapError, keymap_path, load_keymap

BAD_FILES = [
    ("not_toml", "[keys\n", "not valid TOML: "),
    ("unknown_action", '[keys]\nrefesh = "f5"\n',
     "[keys] refesh: no such action (the F1 help and docs/console.md list the action ids)"),
    ("not_a_string", "[keys]\nrefresh = 5\n",
     '[keys] refresh: expected keys such as "f5" or "ctrl+l,f5", got 5'),
    ("empty_keys", '[keys]\nrefresh = " "\n',
     "[keys] refresh: expected keys such as \"f5\" or \"ctrl+l,f5\", got ' '"),
    ("other_table", '[colors]\nrefresh = "f5"\n', "colors: expected only a [keys] table"),
    ("keys_not_a_table", 'keys = "f5"\n', "keys: expected a [keys] table, got 'f5'"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "text", "problem"), BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_a_bad_keymap_file_is_one_line_naming_the_entry(
    tmp_path: Path, name: str, text: str, problem: str
) -> None:
    path = tmp_path / "keymap.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(KeymapError) as raised:
        load_keymap(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: {problem}")
    assert "\n" not in message


def test_a_good_keymap_maps_action_ids_to_keys(tmp_path: Path) -> None:
    path = tmp_path / "keymap.toml"
    path.write_text('[keys]\nrefresh = "f5, ctrl+l"\nhelp = "f2"\n', encoding="utf-8")
    assert load_keymap(path) == {"refresh": "f5,ctrl+l", "help": "f2"}


def test_no_keymap_file_means_the_default_keys(tmp_path: Path) -> None:
    assert load_keymap(tmp_path / "missing.toml") == {}


@pytest.mark.parametrize(
    ("environ", "expected"),
    [({"XDG_CONFIG_HOME": "/cfg"}, Path("/cfg/truva-console/keymap.toml")),
     ({}, Path.home() / ".config" / "truva-console" / "keymap.toml")],
    ids=["xdg_config_home", "home_config"],
)  # fmt: skip
def test_the_keymap_file_lives_in_the_config_directory(environ, expected) -> None:
    assert keymap_path(environ) == expected

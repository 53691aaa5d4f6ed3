"""`--json` output is written whole, also when a recorded value holds a lone surrogate."""

from __future__ import annotations

import json

from console.cli.common import print_json


def test_non_ascii_text_is_written_as_is(capsys):
    print_json({"city": "Zürich"})
    out = capsys.readouterr().out
    assert '"Zürich"' in out
    assert json.loads(out) == {"city": "Zürich"}


def test_a_lone_surrogate_is_written_as_an_escape_not_a_traceback(capsys):
    print_json({"x": "\ud800", "city": "Zürich"})
    out = capsys.readouterr().out
    assert out.isascii()
    assert json.loads(out) == {"x": "\ud800", "city": "Zürich"}

"""A command's one error line stays readable whatever the value it quotes."""

from __future__ import annotations

import pytest

from console.exits import ERROR_LINE_CHARS, fail


def test_a_short_error_is_printed_whole(capsys: pytest.CaptureFixture[str]) -> None:
    assert fail("bad.zip: not a truva bundle; nothing was imported") == 2
    assert capsys.readouterr().err == (
        "truva-console: bad.zip: not a truva bundle; nothing was imported\n"
    )


def test_a_huge_error_keeps_its_start_and_end(capsys: pytest.CaptureFixture[str]) -> None:
    # A manifest naming a 10 MB execution id made a 10 MB line, the id repeated.
    message = f"b.zip: execution {'x' * 10_000_000} is listed twice; nothing was imported"
    fail(message)
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert len(err) < ERROR_LINE_CHARS + 100
    assert err.startswith("truva-console: b.zip: execution xxx")
    assert err.endswith("is listed twice; nothing was imported\n")
    assert "characters cut]" in err

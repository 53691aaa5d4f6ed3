"""LongTextArea: the TUI's text pane for megabyte prompts shows the same lines as Textual's."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from textual.document._document import Document
from textual.document._wrapped_document import WrappedDocument

import console.tui.widgets.long_text as long_text
from console.tui.widgets.long_text import (
    CountedWrappedDocument,
    JoinedOnceDocument,
    LongTextArea,
    fold_long_lines,
)

TEXTS = {
    "plain-lines": "first line\nsecond, longer line of text\nthird",
    "tabs-and-empty-lines": "a\tb\t\tc\n\n\tindented\n\nend\t",
    "one-long-line": "word " * 200,
    "empty": "",
    "trailing-newline": "one\ntwo\n",
}
WRAP_STATE = ("_wrap_offsets", "_tab_width_cache", "_offset_to_line_info",
              "_line_index_to_offsets")  # fmt: skip


@pytest.mark.parametrize("width", [0, 7, 30], ids=["no-wrap", "narrow", "wide"])
@pytest.mark.parametrize("text", TEXTS.values(), ids=TEXTS.keys())
def test_counted_wrap_builds_what_textuals_wrap_builds(text: str, width: int) -> None:
    textual = WrappedDocument(Document(text), tab_width=4)
    counted = CountedWrappedDocument(Document(text), tab_width=4)
    textual.wrap(width)
    counted.wrap(width)

    for name in WRAP_STATE:
        assert getattr(counted, name) == getattr(textual, name), name
    assert counted.height == textual.height
    assert counted.lines == textual.lines


def test_joined_text_follows_an_edit() -> None:
    document = JoinedOnceDocument("alpha\nbeta")
    assert document.text == "alpha\nbeta"

    document.replace_range((1, 0), (1, 4), "gamma")

    assert document.text == "alpha\ngamma"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("abc\nxy", "abc\nxy"), ("abcdefgh\nxy\n\nabcd", "abc\ndef\ngh\nxy\n\nabc\nd")],
    ids=["kept-as-is", "long-lines-cut"],
)
def test_fold_long_lines(text: str, expected: str) -> None:
    assert fold_long_lines(text, 3) == expected


class OnePane(App[None]):
    def compose(self) -> ComposeResult:
        yield LongTextArea(read_only=True, soft_wrap=True)


@pytest.mark.parametrize(
    ("chars", "soft_wrap"), [(900, True), (1_100, False)], ids=["short-wraps", "long-unwrapped"]
)
async def test_a_long_text_is_shown_unwrapped_with_every_character(
    monkeypatch, chars: int, soft_wrap: bool
) -> None:
    monkeypatch.setattr(long_text, "SOFT_WRAP_LIMIT_CHARS", 1_000)
    monkeypatch.setattr(long_text, "LONG_LINE_CHARS", 100)
    text = "".join(f"{i:04d} " for i in range(chars // 5)) + "\n" + "tail\tend"
    app = OnePane()
    async with app.run_test(size=(60, 12)) as pilot:
        area = app.query_one(LongTextArea)
        area.load_long_text(text)
        area.focus()
        await pilot.pause()
        for _ in range(20):
            await pilot.press("pagedown")
        await pilot.pause()

        assert area.soft_wrap is soft_wrap
        assert area.text.replace("\n", "") == text.replace("\n", "")
        assert area.wrapped_document.height == (
            WrappedDocument(Document(area.text), width=area.wrap_width, tab_width=4).height
        )
        assert area.cursor_location[0] == area.document.line_count - 1


async def test_a_text_past_the_background_size_is_prepared_in_a_thread(monkeypatch) -> None:
    monkeypatch.setattr(long_text, "BACKGROUND_LOAD_CHARS", 1_000)
    monkeypatch.setattr(long_text, "SOFT_WRAP_LIMIT_CHARS", 1_000)
    text = "\n".join(f"line {i:05d}" for i in range(500))
    app = OnePane()
    async with app.run_test(size=(60, 12)) as pilot:
        area = app.query_one(LongTextArea)
        area.load_long_text(text)
        placeholder = area.text
        await app.workers.wait_for_complete()
        await pilot.pause()
        shown, soft_wrap = area.text, area.soft_wrap
        heights = (area.document.line_count, area.wrapped_document.height, area.virtual_size.height)
    assert placeholder == f"Loading {len(text):,} characters…"
    assert shown == text and soft_wrap is False
    assert heights == (500, 500, 500)


async def test_a_text_prepared_in_a_thread_does_not_replace_a_later_one(monkeypatch) -> None:
    monkeypatch.setattr(long_text, "BACKGROUND_LOAD_CHARS", 1_000)
    app = OnePane()
    async with app.run_test(size=(60, 12)) as pilot:
        area = app.query_one(LongTextArea)
        area.load_long_text_from(lambda: "x" * 5_000, 5_000)  # superseded while in its thread
        area.load_long_text("the attempt selected since")
        await app.workers.wait_for_complete()
        await pilot.pause()
        shown = area.text
    assert shown == "the attempt selected since"

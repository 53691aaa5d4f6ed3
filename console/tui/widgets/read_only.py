"""A read-only TextArea that offers only the keys that work on it (no Cut, Paste, Undo…)."""

from __future__ import annotations

from textual.widgets import TextArea

# TextArea actions that change the text; a read-only area neither runs nor lists them.
EDITING_ACTIONS = frozenset({
    "delete_left", "delete_word_left", "delete_right", "delete_word_right", "cut", "paste",
    "delete_to_start_of_line", "delete_to_end_of_line_or_delete_line", "delete_line",
    "delete_to_end_of_line", "undo", "redo",
})  # fmt: skip


class ReadOnlyTextArea(TextArea):
    """A TextArea whose editing keys are hidden from the footer and the Keys panel while it is
    read-only; moving, selecting and copying stay."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Editing actions are off while `read_only` is set."""
        if self.read_only and action in EDITING_ACTIONS:
            return False
        return super().check_action(action, parameters)

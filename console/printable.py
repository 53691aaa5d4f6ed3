"""`printable`: text from tools, plans and LLMs made safe to show on a terminal.

A tool's body, a header or a plan `query` can hold ESC and other control characters that a
terminal would obey (set the window title, clear the screen, move the cursor). Every CLI output
and TUI cell shows such text through `printable`, which writes each control character visibly
as an escape (`\\x1b`, `\\r`, `\\u202e`) and keeps line breaks and tabs.
"""

from __future__ import annotations

import re

# C0 controls but tab and line feed, DEL, the C1 controls (0x9b is a one-byte CSI), and the
# bidirectional overrides and isolates that reorder what is shown.
_CONTROLS = [*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0)]
_BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_VISIBLE = {
    **{code: f"\\x{code:02x}" for code in _CONTROLS},
    0x0D: "\\r",
    **{code: f"\\u{code:04x}" for code in _BIDI},
}
_VISIBLE_ONE_LINE = {**_VISIBLE, 0x09: "\\t", 0x0A: "\\n"}
# `str.translate` looks every character up (~0.3 s for a 5 MB prompt); a text without any
# control character, nearly every one, is returned after one regex scan instead.
_ANY_CONTROL = re.compile("[" + "".join(f"\\u{code:04x}" for code in _VISIBLE) + "]")


def printable(text: str | None) -> str:
    """`text` with every control character written as a visible escape; line breaks kept."""
    if not text:
        return ""
    return text.translate(_VISIBLE) if _ANY_CONTROL.search(text) else text


def printable_line(text: str | None) -> str:
    """`printable`, with line breaks and tabs written as `\\n` and `\\t` too."""
    return text.translate(_VISIBLE_ONE_LINE) if text else ""

"""Words the CLI and the TUI share: counted nouns, one-line texts, what was sent and received."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# Characters str.splitlines() breaks on, escaped so one item stays on one output line.
_LINE_BREAKS = {
    "\r\n": "\\r\\n",
    "\n": "\\n",
    "\r": "\\r",
    "\v": "\\v",
    "\f": "\\f",
    "\x1c": "\\x1c",
    "\x1d": "\\x1d",
    "\x1e": "\\x1e",
    "\x85": "\\x85",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def counted(count: int | None, singular: str, plural: str | None = None) -> str:
    """`1 attempt`, `2 attempts`, `0 attempts`; `plural` for irregular nouns (`dispatches`)."""
    number = count or 0
    word = singular if number == 1 else (plural or f"{singular}s")
    return f"{number} {word}"


def on_one_line(text: str | None) -> str:
    """`text` with every line break written as its escape (`\\n`), so it prints as one line."""
    if not text:
        return ""
    for brk, escaped in _LINE_BREAKS.items():
        text = text.replace(brk, escaped)
    return text


_TRANSPORT_ERRORS = {
    "connect": "the connection failed",
    "timeout": "timed out",
    "reset": "the connection was reset",
    "protocol": "a protocol error",
    "cancelled": "cancelled in flight",
}


def reached_wire(dispatched: bool | None, transport_error: str | None) -> bool:
    """Whether a request was put on the wire: dispatched, and not refused while connecting."""
    return bool(dispatched) and transport_error != "connect"


def received_text(dispatched: bool | None, status: int | None, transport_error: str | None) -> str:
    """What came back for one attempt: `HTTP 400`, `no response (timed out)`, `not sent`."""
    if transport_error:
        what = _TRANSPORT_ERRORS.get(transport_error, f"{transport_error} error")
        if not reached_wire(dispatched, transport_error):
            return f"not sent ({what})"
        # A protocol error may follow an answer (bytes that are not HTTP, a body that does not
        # decode or passes max_response_body_bytes): something came back, nothing usable.
        answer = "no usable response" if transport_error == "protocol" else "no response"
        return f"{answer} ({what})"
    if not dispatched:
        return "not sent"
    if status is None or status == 0:
        return "no response recorded"
    return f"HTTP {status}"


def compact_json(value: Any) -> str:
    """`value` as one line of JSON, non-ASCII kept."""
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class SentParameters:
    """Attempts `first`..`last` in a row that sent (or, not sent, held) the same parameters."""

    first: int
    last: int
    dispatched: bool
    parameters: Any
    correction_layer: str | None

    @property
    def attempts_label(self) -> str:
        """`#2`, or `#1-#3` for a run of attempts."""
        return f"#{self.first}" if self.first == self.last else f"#{self.first}-#{self.last}"

    @property
    def verb(self) -> str:
        """`sent`, or `not sent` for attempts stopped before dispatch."""
        return "sent" if self.dispatched else "not sent"

    @property
    def note(self) -> str:
        """` (corrected by the analyzer layer)` when a correction produced these parameters."""
        if self.correction_layer:
            return f" (corrected by the {self.correction_layer} layer)"
        return ""


def sent_parameters(attempts: Iterable[Any]) -> list[SentParameters]:
    """The parameters each attempt sent, runs of identical ones merged, in attempt order.

    Each attempt needs `n`, `dispatched`, `parameters` and optionally `correction_layer` and
    `transport_error` (store records); a refused connection counts as not sent.
    """
    runs: list[SentParameters] = []
    for attempt in attempts:
        dispatched = reached_wire(attempt.dispatched, getattr(attempt, "transport_error", None))
        layer = getattr(attempt, "correction_layer", None)
        last = runs[-1] if runs else None
        if (
            last is not None
            and last.dispatched == dispatched
            and _same(last.parameters, attempt.parameters)
            and last.last == attempt.n - 1
            and not layer
        ):
            runs[-1] = SentParameters(
                last.first, attempt.n, dispatched, last.parameters, last.correction_layer
            )
        else:
            runs.append(SentParameters(attempt.n, attempt.n, dispatched, attempt.parameters, layer))
    return runs


def _same(left: Any, right: Any) -> bool:
    """Equal as JSON text, so `1` and `true` differ as they do on the wire."""
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)

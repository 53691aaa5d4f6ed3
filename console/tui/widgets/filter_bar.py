"""The filter bar of the executions screen and its `key:value` token language.

`status:failed rule:budget.attempts http:429 text:PARIS` means the same as
`truva-console ls --status failed --rule budget.attempts --http-status 429 --text PARIS`.
Words without a key are searched as text; quote values with spaces (`text:"unknown city"`).
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field, replace
from typing import ClassVar

from textual import on
from textual.binding import BindingType
from textual.message import Message
from textual.widgets import Input

from console.render.formats import ArgumentProblem, parse_time, unknown_rule
from console.tui.actions import bindings
from executor.contract import WARNING_CODES
from store.queries import ACTIONS, EXECUTION_STATUSES, ExecutionFilter

# token key -> (ExecutionFilter field, `ls` option)
FILTER_KEYS: dict[str, tuple[str, str]] = {
    "status": ("status", "--status"),
    "tool": ("tool", "--tool"),
    "capability": ("capability", "--capability"),
    "cap": ("capability", "--capability"),
    "action": ("action", "--action"),
    "rule": ("rule_id", "--rule"),
    "http": ("http_status", "--http-status"),
    "http_status": ("http_status", "--http-status"),
    "since": ("since", "--since"),
    "until": ("until", "--until"),
    "text": ("text", "--text"),
    "test": ("test", "--test"),
    "warn": ("warning", "--warning"),
    "warning": ("warning", "--warning"),
}


class FilterSyntaxError(ValueError):
    """A filter token that cannot be used; the message names the token and what is expected."""


@dataclass(frozen=True, slots=True)
class ParsedFilter:
    """A filter as typed, the ExecutionFilter it means, and the matching `ls` options."""

    text: str = ""
    filters: ExecutionFilter = field(default_factory=ExecutionFilter)
    ls_args: tuple[str, ...] = ()


def parse_filter(text: str, *, now: float | None = None) -> ParsedFilter:
    """Parse `status:failed rule:x text:PARIS` tokens; FilterSyntaxError names a bad token."""
    now = time.time() if now is None else now
    try:
        tokens = shlex.split(text)
    except ValueError as error:
        raise FilterSyntaxError(f"filter {text!r}: {error} (close the quote)") from None
    values: dict[str, str] = {}
    options: dict[str, str] = {}
    loose_words: list[str] = []
    for token in tokens:
        key, separator, value = token.partition(":")
        if not separator or key.lower() not in FILTER_KEYS:
            if separator and key.isidentifier():
                known = ", ".join(sorted(FILTER_KEYS))
                raise FilterSyntaxError(f"filter {token!r}: unknown key {key!r} (keys: {known})")
            loose_words.append(token)
            continue
        if not value:
            raise FilterSyntaxError(f"filter {token!r}: {key} needs a value, as in {key}:VALUE")
        name, option = FILTER_KEYS[key.lower()]
        if name in values:
            raise FilterSyntaxError(f"filter {token!r}: {key} is given twice")
        values[name], options[option] = value, value
    if loose_words:
        if "text" in values:
            raise FilterSyntaxError(
                f"filter {' '.join(loose_words)!r}: text is already given with text:; "
                "quote a value with spaces instead"
            )
        values["text"] = options["--text"] = " ".join(loose_words)
    filters = ExecutionFilter()
    for name, value in values.items():
        filters = replace(filters, **{name: _typed(name, value, now=now)})
    ordered = [option for _, option in FILTER_KEYS.values() if option in options]
    ls_args: list[str] = []
    for option in dict.fromkeys(ordered):
        ls_args += [option, options[option]]
    return ParsedFilter(text=text.strip(), filters=filters, ls_args=tuple(ls_args))


def _typed(name: str, value: str, *, now: float) -> str | int | float:
    """A token value checked and converted for the ExecutionFilter field `name`."""
    if name == "status" and not all(part in EXECUTION_STATUSES for part in value.split(",")):
        raise FilterSyntaxError(
            f"filter status:{value}: expected one of {', '.join(EXECUTION_STATUSES)}"
        )
    if name == "action" and value not in ACTIONS:
        raise FilterSyntaxError(f"filter action:{value}: expected one of {', '.join(ACTIONS)}")
    if name == "warning" and value not in ("any", *WARNING_CODES):
        raise FilterSyntaxError(
            f"filter warn:{value}: expected any or one of {', '.join(WARNING_CODES)}"
        )
    if name == "rule_id" and (problem := unknown_rule(value)):
        raise FilterSyntaxError(f"filter rule:{value}: {problem}")
    if name == "http_status":
        if not value.isdigit():
            raise FilterSyntaxError(f"filter http:{value}: expected a number such as 429")
        return int(value)
    if name in ("since", "until"):
        try:
            return parse_time(f"{name}:", value, now=now)
        except ArgumentProblem as error:
            raise FilterSyntaxError(f"filter {error}") from None
    return value


class FilterBar(Input):
    """A one-line filter input; Enter applies it, Escape leaves it."""

    ACTION_SCOPE = "filter"
    BINDINGS: ClassVar[list[BindingType]] = bindings("filter")

    @dataclass
    class FilterApplied(Message):
        """The user applied a filter that parsed."""

        parsed: ParsedFilter

    @dataclass
    class FilterRejected(Message):
        """The user applied a filter that does not parse; `problem` says why."""

        text: str
        problem: str

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(
            placeholder="filter: status:failed rule:budget.attempts http:429 text:PARIS "
            "(Enter applies, Esc leaves)",
            id=id,
        )
        self.tooltip = (
            "Keys: status, tool, capability, action, rule, http, since, until, text, test. "
            "Words without a key are searched as text."
        )

    @on(Input.Submitted)
    def _apply(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            parsed = parse_filter(event.value)
        except FilterSyntaxError as error:
            self.add_class("-invalid")
            self.post_message(self.FilterRejected(event.value, str(error)))
            return
        self.remove_class("-invalid")
        self.post_message(self.FilterApplied(parsed))

    def action_leave(self) -> None:
        """Move focus to the next widget (the table)."""
        self.screen.focus_next()

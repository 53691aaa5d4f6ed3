"""What `whatif` shows, as data: `truva-console whatif` prints it, the what-if screen draws it.

`whatif_view(report)` is the one computation of the headline, the notes, the before → after
table and the changed steps; `whatif_text(view)` is the CLI's layout of it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from console.whatif import CANNOT_KNOW, Change, Verdict, WhatIfReport, cannot_know
from console.words import counted, on_one_line

# Changed steps listed in the text output; --json (and the TUI) list all of them.
SHOWN_CHANGES = 50

# `{store}` is the store option the whatif was given (` --samples`, ` --db PATH`), or nothing.
REPLAY_HINT = (
    "Replay a step to find out: truva-console{store} replay EXECUTION STEP --config KEY=VALUE."
)


@dataclass(frozen=True, slots=True)
class TransitionRow:
    """One before → after pair of first changes, and in how many steps it happened."""

    before: Verdict
    after: Verdict
    count: int


@dataclass(frozen=True, slots=True)
class WhatIfView:
    """Everything `whatif` says about one report, in the order it says it."""

    overrides: dict[str, Any]
    headline: str
    changed_line: str
    follow_note: str | None
    transitions: tuple[TransitionRow, ...]
    changes: tuple[Change, ...]
    not_rerun_note: str | None
    incomplete_note: str | None
    unreadable_note: str | None
    cannot_know: str = CANNOT_KNOW


def config_arguments(overrides: Mapping[str, Any]) -> list[str]:
    """`KEY=VALUE` words for the overrides, values as JSON (as `--config` reads them)."""
    return [f"{key}={json.dumps(value)}" for key, value in overrides.items()]


def whatif_view(report: WhatIfReport, *, filtered: bool = False) -> WhatIfView:
    """The report as `whatif` shows it; `filtered`: the ls filters selected the executions."""
    config = ", ".join(config_arguments(report.overrides))
    against = f"config {config}" if config else "the recorded config (policy code regression check)"
    scope = counted(report.executions, "matching execution" if filtered else "execution")
    follow = None
    if report.after_earlier_change:
        follow = (f"{report.after_earlier_change} of them follow an earlier change in the same "
                  "step: a run under this config would not have met them as recorded")  # fmt: skip
    not_rerun = None
    if report.not_rerun:
        not_rerun = (
            f"{counted(report.not_rerun, 'decision')} not re-run: their rules, and the rules "
            "before them, read none of the changed keys, so they stay as recorded (run "
            "whatif without --config to check the policy code itself)"
        )
    incomplete = None
    if report.incomplete:
        incomplete = (
            f"not re-decided: {counted(report.incomplete, 'decision')} recorded by an older "
            f"version that did not keep every input (missing: "
            f"{', '.join(sorted(report.missing_inputs))})"
        )
    unreadable = None
    if report.unreadable:
        unreadable = (f"not re-decided: {counted(report.unreadable, 'decision')} whose inputs "
                      f"cannot be read, e.g. {on_one_line(report.first_unreadable)}")  # fmt: skip
    return WhatIfView(
        overrides=dict(report.overrides),
        headline=f"what-if under {against}: {counted(report.decisions, 'decision')} in "
        f"{scope} re-decided",
        changed_line=f"{counted(report.changed, 'decision')} would change, in "
        f"{counted(report.changed_steps, 'step')}",
        follow_note=follow,
        transitions=tuple(
            TransitionRow(before, after, count) for (before, after), count in report.transitions()
        ),
        changes=tuple(report.changes),
        not_rerun_note=not_rerun,
        incomplete_note=incomplete,
        unreadable_note=unreadable,
        cannot_know=cannot_know(report.overrides),
    )


def replay_arguments(change: Change, overrides: Mapping[str, Any]) -> list[str]:
    """The `replay` command words that find out what `change` would have led to."""
    arguments = ["replay", change.execution_id, change.step_id]
    for word in config_arguments(overrides):
        arguments += ["--config", word]
    return arguments


def whatif_text(view: WhatIfView, *, store_option: str = "") -> str:
    """The view as `truva-console whatif` prints it."""
    lines = [view.headline, f"  {view.changed_line}"]
    if view.follow_note:
        lines.append(f"  ({view.follow_note})")
    if view.transitions:
        lines.append("")
        lines.append("  first change in each step: before → after")
        for row in view.transitions:
            lines.append(f"    {row.count:>6}  {row.before} → {row.after}")
        lines.append("")
        lines.append("  the steps")
        for change in view.changes[:SHOWN_CHANGES]:
            lines.append(f"    {change.execution_id}  {change.step_id}  #{change.n}  "
                         f"{change.before} → {change.after}")  # fmt: skip
            lines.append(f"        {on_one_line(change.reason)}")
            lines.append(f"        {change.consequence}")
        if len(view.changes) > SHOWN_CHANGES:
            more = counted(len(view.changes) - SHOWN_CHANGES, "more step")
            lines.append(f"    … and {more} (--json lists all)")
    if view.not_rerun_note:
        lines += ["", f"  {view.not_rerun_note}"]
    if view.incomplete_note:
        lines += ["", f"  {view.incomplete_note}"]
    if view.unreadable_note:
        lines.append(f"  {view.unreadable_note}")
    lines += ["", f"  {view.cannot_know} {REPLAY_HINT.format(store=store_option)}"]
    return "\n".join(lines)

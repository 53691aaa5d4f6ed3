"""Times, durations, time arguments and lineage markers, written the same way by the CLI and the
TUI."""

from __future__ import annotations

import difflib
import math
import re
from datetime import UTC, datetime

from console.replay.setup import replayed_from
from executor.policy import ALL_RULES

RULE_IDS = tuple(rule.rule_id for rule in ALL_RULES)

_AGE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_AGE_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
# Times as UTC dates can show them: years 1 to 9999.
_EARLIEST_S = datetime(1, 1, 1, tzinfo=UTC).timestamp()
_LATEST_S = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()


class ArgumentProblem(ValueError):
    """A command-line value that cannot be used; the message names the option and value."""


def unknown_rule(rule_id: str) -> str | None:
    """None for a rule id of the policy's table; else what to say: `no rule is named 'x'`,
    with the nearest ids. A filter on a misspelt rule would match nothing and say nothing."""
    if rule_id in RULE_IDS:
        return None
    near = difflib.get_close_matches(rule_id, RULE_IDS, n=2, cutoff=0.6)
    hint = f"did you mean {' or '.join(near)}?" if near else "docs/rules.md lists them"
    return f"no rule is named {rule_id!r} ({hint})"


def parse_time(option: str, text: str, *, now: float) -> float:
    """Epoch seconds for an ISO date/time, epoch seconds, or an age before `now` (`30m`).

    The time must fall in the years 1 to 9999 (UTC); NaN and infinities are refused.
    """
    value = text.strip()
    age = _AGE.match(value)
    if age:
        return _in_range(option, text, now - float(age.group(1)) * _AGE_UNIT_S[age.group(2)])
    try:
        epoch_s = float(value)
    except ValueError:
        pass
    else:
        return _in_range(option, text, epoch_s)
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ArgumentProblem(
            f"{option} {text!r}: expected an ISO date/time (2026-01-31 or 2026-01-31T14:00Z), "
            "epoch seconds, or an age such as 30m, 2h, 7d"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return _in_range(option, text, moment.timestamp())


def _in_range(option: str, text: str, epoch_s: float) -> float:
    if not math.isfinite(epoch_s) or not _EARLIEST_S <= epoch_s <= _LATEST_S:
        raise ArgumentProblem(
            f"{option} {text!r}: expected a time between the years 1 and 9999 "
            f"(epoch seconds {_EARLIEST_S:.0f} to {_LATEST_S:.0f})"
        )
    return epoch_s


def format_time(epoch_s: float | None) -> str:
    """A UTC time to the second, like `2026-01-31 14:00:05Z`; `-` when unknown."""
    if epoch_s is None:
        return "-"
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def format_duration(duration_ms: float | None) -> str:
    """`532 ms`, `1.96 s` or `2m05s`; `-` when unknown."""
    if duration_ms is None:
        return "-"
    if duration_ms < 1000:
        return f"{duration_ms:.0f} ms"
    seconds = duration_ms / 1000
    if seconds < 60:
        return f"{seconds:.2f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m{rest:02d}s"


def lineage_marker(rerun_of: str | None, plan_path: str | None) -> str:
    """`↻ rerun of <id>  ` or `↻ replay of <id> <step>  `, shown before an execution's query."""
    if rerun_of:
        return f"↻ rerun of {rerun_of}  "
    replayed = replayed_from(plan_path)
    return f"↻ replay of {replayed}  " if replayed else ""


def labels_marker(labels: dict[str, str] | None) -> str:
    """`[test=<node id>]  ` before the query of a labelled execution, else nothing."""
    text = " ".join(f"{key}={value}" for key, value in sorted((labels or {}).items()))
    return f"[{text}]  " if text else ""

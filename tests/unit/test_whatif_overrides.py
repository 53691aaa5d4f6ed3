"""whatif's `--config` parser (CLI and TUI): which keys it takes, and its one-line refusals."""

from __future__ import annotations

import re

import pytest

from console.replay.edits import ReplayError
from console.tui.screens.whatif import parse_overrides as parse_screen_field
from console.whatif import parse_overrides
from executor.policy.redecide import REDECIDE_KEYS

# (the --config words, the refusal line, which names the key and the value as typed)
REFUSED = {
    "unused-key": (["timeout_s=5"],
                   "--config timeout_s=5: config key 'timeout_s' does not change a decision"),
    "unknown-key": (["max_attempt=5"],
                    "--config max_attempt=5: unknown config key 'max_attempt' (did you mean "
                    "'max_attempts'?"),
    "bad-value": (["max_attempts=x"], '--config max_attempts=x: expected an integer >= 1, got "x"'),
    "no-equals": (["max_attempts"], "--config max_attempts: expected KEY=VALUE"),
    "repeated-key": (["max_attempts=3", "jitter=false", "max_attempts=5"],
                     "--config max_attempts=5: max_attempts is already given by --config "
                     "max_attempts=3"),
}


@pytest.mark.parametrize(("words", "line"), REFUSED.values(), ids=REFUSED.keys())
def test_a_refused_override_names_the_word_as_typed(words, line) -> None:
    with pytest.raises(ReplayError) as refused:
        parse_overrides(words)
    assert str(refused.value).startswith(line)
    assert "\n" not in str(refused.value)


def test_the_screen_field_refuses_a_repeated_key_as_the_cli_does() -> None:
    with pytest.raises(ReplayError) as refused:
        parse_screen_field("max_attempts=3 max_attempts=5")
    assert str(refused.value) == (
        "--config max_attempts=5: max_attempts is already given by --config max_attempts=3"
    )


def test_every_key_listed_as_accepted_is_accepted() -> None:
    with pytest.raises(ReplayError) as refused:
        parse_overrides(["timeout_s=5"])
    listed = re.search(r"whatif accepts: (.*)\)$", str(refused.value))[1].split(", ")
    assert listed == list(REDECIDE_KEYS)
    assert "timeout_s" not in listed
    values = {"jitter": "false", "semantic_retry_enabled": "false",
              "semantic_retry_independent_steps": "false", "validation_feedback_enabled": "false",
              "error_analyzer_enabled": "false", "backoff_factor": "2.0"}
    for key in listed:
        assert key in parse_overrides([f"{key}={values.get(key, '2')}"])


def test_overrides_are_read_as_json() -> None:
    assert parse_overrides(["max_attempts=5", "jitter=false"]) == {
        "max_attempts": 5, "jitter": False,
    }

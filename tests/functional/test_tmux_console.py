"""The console in a real terminal: tmux runs `truva-console --samples`, keys go in with
`send-keys`, the screen comes back with `capture-pane`.

Checked here, as a user would: an execution opens on its failing step, F1 opens the help of the
focused pane, F3 hands the focused text to `$PAGER` (a fake pager that saves what it was given)
and the console comes back when the pager exits.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(
    TMUX is None, reason="tmux is not installed (apt-get install tmux; .ci/run installs it)"
)
CONSOLE = str(Path(sys.executable).with_name("truva-console"))
WAIT_S = 60.0


def _tmux(*args: str) -> str:
    return subprocess.run([TMUX, *args], capture_output=True, text=True, check=True,
                          timeout=30).stdout  # fmt: skip


class Terminal:
    """One detached tmux session running a command at 120×36."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.name = f"truva-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{key}={_quote(value)}" for key, value in env.items())
        _tmux("new-session", "-d", "-s", self.name, "-x", "120", "-y", "36",
              f"env {exports} {' '.join(_quote(part) for part in command)}")  # fmt: skip

    def screen(self) -> str:
        return _tmux("capture-pane", "-p", "-t", self.name)

    def keys(self, *keys: str) -> None:
        _tmux("send-keys", "-t", self.name, *keys)

    def wait_for(self, condition: Callable[[str], bool], what: str) -> str:
        deadline = time.monotonic() + WAIT_S
        while True:
            text = self.screen()
            if condition(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {WAIT_S:.0f} s for {what}; the screen shows:\n{text}")
            time.sleep(0.1)  # polling the terminal for a condition, not waiting a fixed time

    def close(self) -> None:
        subprocess.run([TMUX, "kill-session", "-t", self.name], capture_output=True, timeout=30)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


@pytest.fixture
def failing_sample() -> dict:
    """The newest failed sample execution, as `ls --json` lists it."""
    out = subprocess.run([CONSOLE, "--samples", "ls", "--json", "--status", "failed"],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    return json.loads(out)["executions"][0]


@pytest.fixture
def terminal(tmp_path: Path):
    pager = tmp_path / "pager.sh"
    pager.write_text(f"#!/bin/sh\ncat > {_quote(str(tmp_path / 'paged.txt'))}\n")
    pager.chmod(0o755)
    env = {"PAGER": str(pager), "TERM": "xterm-256color", "HOME": str(tmp_path),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "PATH": os.environ.get("PATH", "")}
    session = Terminal([CONSOLE, "--samples"], env)
    try:
        yield session
    finally:
        session.close()


def test_an_execution_opens_on_its_failing_step_and_f1_f3_work(terminal, failing_sample,
                                                                 tmp_path):
    execution_id = failing_sample["execution_id"]
    rule = failing_sample["last_failing_rule"]
    terminal.wait_for(lambda text: execution_id in text, "the executions list")
    terminal.keys("/")
    terminal.keys("-l", execution_id)
    terminal.keys("Enter")
    terminal.wait_for(lambda text: execution_id in text and text.count("\n") > 5,
                      "the filtered list")  # fmt: skip
    terminal.keys("Enter")
    opened = terminal.wait_for(lambda text: rule in text and "Decision" in text,
                               f"the execution screen showing {rule}")  # fmt: skip
    assert rule in opened  # the decisive attempt of the failing step is what the panel shows

    terminal.keys("F1")
    helped = terminal.wait_for(lambda text: "Help" in text or "help" in text, "the help screen")
    assert "F3" in helped or "pager" in helped.lower()
    terminal.keys("Escape")
    terminal.wait_for(lambda text: rule in text, "the execution screen again")

    terminal.keys("F3")
    paged = tmp_path / "paged.txt"
    deadline = time.monotonic() + WAIT_S
    while not (paged.exists() and paged.stat().st_size):
        assert time.monotonic() < deadline, f"F3 gave $PAGER nothing; screen:\n{terminal.screen()}"
        time.sleep(0.1)
    terminal.wait_for(lambda text: rule in text, "the console back after the pager")
    assert paged.read_text().strip()

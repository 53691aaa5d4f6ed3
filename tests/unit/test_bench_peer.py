"""`make bench-peer` skips with one line naming the step that could not install Phoenix."""

from __future__ import annotations

import subprocess

import pytest

from bench import bench_peer

NO_MATCH = "ERROR: No matching distribution found for arize-phoenix==20.26.1"


@pytest.mark.parametrize(
    ("failing", "reason"),
    [
        ("venv", "cannot install Arize Phoenix (python venv {venv}: Error: no space left)"),
        ("pip", f"cannot install Arize Phoenix (pip install arize-phoenix==20.26.1: {NO_MATCH})"),
    ],
    ids=["venv", "pip"],
)
def test_an_install_that_fails_is_the_reason_to_skip(monkeypatch, failing: str, reason: str):
    def run(command, **_):
        name = "venv" if "venv" in command else "pip"
        error = "Error: no space left" if name == "venv" else f"Collecting …\n{NO_MATCH}"
        code = 1 if name == failing else 0
        return subprocess.CompletedProcess(command, code, "", error if code else "")

    monkeypatch.delenv("PHOENIX_SERVE_BIN", raising=False)
    monkeypatch.setattr(bench_peer, "phoenix_bin", lambda: None)
    monkeypatch.setattr(bench_peer.subprocess, "run", run)
    monkeypatch.setattr(bench_peer.sys, "executable", "/usr/bin/python")
    binary, why = bench_peer.phoenix_binary()
    assert binary is None
    assert why == reason.format(venv=bench_peer.VENV)

"""Another process holding the DuckDB file, as harlequin or a notebook connection would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# How the store names that process: its /proc command name, the executable as started (`python`
# under `make test`'s `python -m pytest`, `python3` under `.venv/bin/pytest`), then `-c`.
HOLDER_NAME = f"{Path(sys.executable).name[:15]} -c"


def hold_file(db: Path) -> subprocess.Popen[str]:
    """A child python process keeping `duckdb.connect(db)` open until its stdin gets a line."""
    code = (
        "import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
        "print('locked', flush=True); sys.stdin.readline()"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "locked"
    return process


def release(process: subprocess.Popen[str]) -> None:
    """Let the holder exit (it releases the lock as it does) and wait for it."""
    assert process.stdin is not None
    if process.poll() is not None:
        return
    process.stdin.write("\n")
    process.stdin.flush()
    process.wait()

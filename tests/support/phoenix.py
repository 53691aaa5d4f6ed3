"""A local Arize Phoenix (`phoenix serve`) for the Phoenix test and `make bench-peer`.

Phoenix is heavy (a web app, SQLite, many dependencies), so it lives in its own venv,
`.venv-phoenix`, not in the dev extra; PHOENIX_SERVE_BIN may name any `phoenix` executable.
"""

from __future__ import annotations

import os
import selectors
import socket
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PHOENIX_VERSION = "20.26.1"
VENV = REPO / ".venv-phoenix"
INSTALL = (
    "python3 -m venv .venv-phoenix && "
    f".venv-phoenix/bin/pip install arize-phoenix=={PHOENIX_VERSION}"
)


def phoenix_bin() -> Path | None:
    """The configured or `.venv-phoenix` `phoenix` executable, if it exists."""
    configured = os.environ.get("PHOENIX_SERVE_BIN")
    candidate = Path(configured) if configured else VENV / "bin" / "phoenix"
    return candidate if candidate.is_file() else None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_phoenix(
    binary: Path, working_dir: Path, startup_s: float
) -> tuple[subprocess.Popen[str], str]:
    """`phoenix serve` on free loopback ports: the process and its base URL.

    Reads its output until it says it started (blocking on the pipe, not sleeping); raises
    RuntimeError with its last lines when it does not within `startup_s`.
    """
    port = free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(working_dir), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(free_port())}  # fmt: skip
    process = subprocess.Popen([str(binary), "serve"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)  # fmt: skip
    assert process.stdout is not None
    deadline = time.monotonic() + startup_s
    seen: list[str] = []
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(timeout=deadline - time.monotonic()):
                break
            line = process.stdout.readline()
            if not line:
                break
            seen.append(line)
            if "Application startup complete" in line:
                return process, f"http://127.0.0.1:{port}"
    stop_phoenix(process)
    raise RuntimeError(f"phoenix serve did not start: {''.join(seen[-20:])}")


def stop_phoenix(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()

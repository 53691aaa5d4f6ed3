"""The bundled sample traces: where they are, and a fresh store holding all of them."""

from __future__ import annotations

import tempfile
from pathlib import Path

from console.words import counted
from executor.eventlog import read_event_log

SAMPLE_SUFFIX = ".events.jsonl"
SAMPLE_DB_NAME = "samples.duckdb"
_PACKAGE_DIR = Path(__file__).resolve().parent
_INSTALLED_SAMPLES = _PACKAGE_DIR / "_sample_traces"


class SampleStoreError(RuntimeError):
    """The sample traces could not be found or replayed into a store."""


def checkout_sample_traces_dir() -> Path | None:
    """`sample_traces/` of the source checkout this package runs from, or None when installed."""
    root = _PACKAGE_DIR.parent
    candidate = root / "sample_traces"
    if candidate.is_dir() and (root / "pyproject.toml").is_file():
        return candidate
    return None


def sample_traces_dir() -> Path:
    """The checkout's `sample_traces/`, else the installed package data `_sample_traces/`."""
    return checkout_sample_traces_dir() or _INSTALLED_SAMPLES


def sample_trace_files() -> list[Path]:
    """Every sample event log (`*.events.jsonl`), sorted by name; empty when there are none."""
    directory = sample_traces_dir()
    if not directory.is_dir():
        return []
    return sorted(directory.glob(f"*{SAMPLE_SUFFIX}"))


def sample_execution_ids() -> dict[str, str]:
    """Each sample's execution id by its demo plan name (`scenario-b-rate-limit` → its id).

    Ids change on every re-recording; look them up here rather than writing them down.
    """
    ids = {}
    for path in sample_trace_files():
        started = next(iter(read_event_log(path)), None)
        if started is not None:
            ids[path.name.removesuffix(SAMPLE_SUFFIX)] = started.execution_id
    return ids


def prepare_sample_store(target: Path | None = None) -> Path:
    """Replay every sample trace into a new store and return its database path.

    `target` is the database file to create (it must not exist yet); by default a new temporary
    directory holds `samples.duckdb`, which the caller may delete when done.
    """
    from store.recorder import StoreRecorder

    files = sample_trace_files()
    if not files:
        raise SampleStoreError(f"no sample traces (*{SAMPLE_SUFFIX}) in {sample_traces_dir()}")
    if target is None:
        target = Path(tempfile.mkdtemp(prefix="truva-samples-")) / SAMPLE_DB_NAME
    elif target.exists():
        raise SampleStoreError(f"{target}: already exists; the sample store must be a new file")
    events = [event for path in files for event in read_event_log(path)]
    recorder = StoreRecorder(target)
    try:
        for event in events:
            recorder.record(event)
    finally:
        recorder.close()
    if recorder.last_error or recorder.dropped_events:
        raise SampleStoreError(
            f"{target}: replaying the sample traces failed: "
            f"{recorder.last_error or counted(recorder.dropped_events, 'event') + ' dropped'}"
        )
    return target

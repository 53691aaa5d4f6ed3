"""The journal's mapped append path: bytes on disk as written by `writev`, zeros left by a kill."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from store.connection import store_paths
from store.spool import (
    JOURNAL_MAGIC,
    Journal,
    WriterIdentity,
    journal_frame,
    journal_meta_frame,
    journal_name,
    read_segment,
    seal_orphaned_journals,
)

RECORDS = [
    (1, "execution_started", "exec-1", '{"a": 1}', None, b"body"),
    (2, "x", None, None, b"", None),
]
BIG = [(3, "attempt_dispatched", "exec-1", "{}", b"r" * 200_000, None)]

KILLED_WRITER = """
import os, signal, sys
from store.connection import store_paths
from store.spool import Journal, WriterIdentity, journal_name
paths = store_paths(sys.argv[1])
writer = WriterIdentity.for_this_process()
journal = Journal(paths, journal_name(writer, 1), writer)
journal.append([(1, "execution_started", "exec-1", "{}", None, b"kept")])
print(journal.size, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_sealed_journal_holds_exactly_its_frames(tmp_path: Path) -> None:
    paths = store_paths(tmp_path / "debug.duckdb")
    writer = WriterIdentity.for_this_process()
    journal = Journal(paths, journal_name(writer, 1), writer)
    journal.append(RECORDS)
    journal.append(BIG)  # past the first preallocated chunk
    sealed = journal.seal()
    expected = (
        JOURNAL_MAGIC + journal_meta_frame(writer) + journal_frame(RECORDS) + journal_frame(BIG)
    )
    assert sealed.read_bytes() == expected
    assert read_segment(sealed).column("seq").to_pylist() == [1, 2, 3]


def test_a_journal_is_written_where_the_file_system_cannot_preallocate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def cannot(*_: object) -> None:
        raise OSError(errno.EOPNOTSUPP, "not supported")

    monkeypatch.setattr(os, "posix_fallocate", cannot)
    paths = store_paths(tmp_path / "debug.duckdb")
    writer = WriterIdentity.for_this_process()
    journal = Journal(paths, journal_name(writer, 1), writer)
    journal.append(RECORDS)
    expected = JOURNAL_MAGIC + journal_meta_frame(writer) + journal_frame(RECORDS)
    assert journal.path.read_bytes() == expected
    assert journal.seal().read_bytes() == expected


def test_a_full_disk_fails_the_append_before_any_byte_is_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = store_paths(tmp_path / "debug.duckdb")
    writer = WriterIdentity.for_this_process()
    journal = Journal(paths, journal_name(writer, 1), writer)
    journal.append(RECORDS)

    def full(*_: object) -> None:
        raise OSError(errno.ENOSPC, "no space")

    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(OSError):
        journal.append(BIG)
    monkeypatch.undo()
    journal.append(RECORDS)
    assert read_segment(journal.seal()).column("seq").to_pylist() == [1, 2, 1, 2]


def test_a_frame_appended_before_a_sigkill_is_kept_and_the_zeros_after_it_are_the_end(
    tmp_path: Path,
) -> None:
    db = tmp_path / "debug.duckdb"
    done = subprocess.run(
        [sys.executable, "-c", KILLED_WRITER, str(db)],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[2],
    )  # fmt: skip
    assert done.returncode == -signal.SIGKILL, done.stderr
    paths = store_paths(db)
    (journal,) = paths.segments.iterdir()
    assert journal.stat().st_size > int(done.stdout)  # the preallocated, zero-filled tail
    seal_orphaned_journals(paths)
    (sealed,) = paths.segments.iterdir()
    table = read_segment(sealed)
    assert table.column("response_body").to_pylist() == [b"kept"]

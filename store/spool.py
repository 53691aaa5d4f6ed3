"""The spool beside a store: journals and segments awaiting ingest, and writer leases.

A recorder appends its events to its own journal (`<token>-<n>.journal`), one framed Arrow
batch per append, and at each flush fsyncs it and renames it to a segment
(`<token>-<n>.segment`), which any process may then ingest. A journal is read only by its
writer, or by anyone once its writer is dead; a torn last frame (a kill mid-append) is skipped.
Older spools hold `.arrow` segments (Arrow IPC files, written under a `.tmp` name, fsynced,
renamed); they are still read. A writer holds an exclusive `flock` on its lease file for as
long as it lives; the kernel drops the lock when the process dies, however it dies.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import mmap
import os
import socket
import struct
import uuid
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

from store.connection import StorePaths

try:  # the same CRC-32 as zlib's, computed several times faster (a pinned dependency)
    from zlib_ng.zlib_ng import crc32 as _crc32
except ImportError:  # pragma: no cover - without it, the standard library's
    _crc32 = zlib.crc32

log = logging.getLogger(__name__)

SEGMENT_SUFFIX = ".arrow"
SEALED_SUFFIX = ".segment"
JOURNAL_SUFFIX = ".journal"
TEMP_SUFFIX = ".tmp"
FAILED_SUFFIX = ".failed"
LEASE_SUFFIX = ".lease"


@dataclass(frozen=True, slots=True)
class WriterIdentity:
    """Who records: a random token per recorder, plus the process id and host for people."""

    token: str
    pid: int
    host: str

    @classmethod
    def for_this_process(cls) -> WriterIdentity:
        """A fresh identity for a recorder in this process."""
        return cls(token=uuid.uuid4().hex[:16], pid=os.getpid(), host=socket.gethostname())

    def to_metadata(self) -> dict[bytes, bytes]:
        """Arrow schema metadata naming the writer of a segment."""
        return {
            b"writer_token": self.token.encode(),
            b"writer_pid": str(self.pid).encode(),
            b"writer_host": self.host.encode(),
        }

    @classmethod
    def from_metadata(cls, metadata: dict[bytes, bytes] | None) -> WriterIdentity | None:
        """The writer recorded in a segment's schema metadata, if any."""
        if not metadata or b"writer_token" not in metadata:
            return None
        return cls(
            token=metadata[b"writer_token"].decode(),
            pid=int(metadata.get(b"writer_pid", b"0")),
            host=metadata.get(b"writer_host", b"").decode(),
        )


def segment_name(writer: WriterIdentity, segment_number: int) -> str:
    """`<token>-<number>.arrow`: names sort in write order within one writer."""
    return f"{writer.token}-{segment_number:010d}{SEGMENT_SUFFIX}"


def write_segment(paths: StorePaths, name: str, table: pa.Table) -> Path:
    """Write `table` as an Arrow IPC file under `name`, durably and atomically.

    On any failure (a full disk, say) the half-written file is deleted and the error raised.
    """
    paths.segments.mkdir(parents=True, exist_ok=True)
    final_path = paths.segments / name
    temp_path = paths.segments / (name + TEMP_SUFFIX)
    try:
        with temp_path.open("wb") as handle:
            with ipc.new_file(handle, table.schema) as writer:
                writer.write_table(table)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_path, final_path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp_path.unlink()
        raise
    try:
        _fsync_directory(paths.segments)
    except OSError as error:  # the segment is complete under its name; rewriting would repeat it
        log.warning("cannot fsync %s (%s)", paths.segments, error.strerror or error)
    return final_path


def read_segment(path: Path, *, dictionary_bodies: bool = False) -> pa.Table:
    """The table stored in a segment or journal file (its frames' rows, in order).

    With `dictionary_bodies`, a journal's body columns are dictionary arrays over the mapped
    file, copied only when taken and decoded (the ingest's way). Raises pa.ArrowException when
    the bytes are neither an Arrow IPC file nor a journal.
    """
    with path.open("rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            data: bytes | mmap.mmap = b""
        else:  # mapped, not read: the rows are copied once, into Arrow
            data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        if data[: len(JOURNAL_MAGIC)] == JOURNAL_MAGIC:
            return read_journal_bytes(data, name=path.name, dictionary_bodies=dictionary_bodies)
        return ipc.open_file(pa.py_buffer(data)).read_all()
    finally:
        if isinstance(data, mmap.mmap):
            with contextlib.suppress(BufferError):  # a view still held: closed when collected
                data.close()


def _spool_names(paths: StorePaths) -> list[str]:
    """The spool directory's file names in name order; none when it does not exist."""
    try:
        return sorted(os.listdir(paths.segments))
    except FileNotFoundError:
        return []


def ready_segments(paths: StorePaths) -> list[Path]:
    """Complete segments awaiting ingest, in name order (write order per writer)."""
    return [
        paths.segments / name
        for name in _spool_names(paths)
        if name.endswith((SEGMENT_SUFFIX, SEALED_SUFFIX))
    ]


# A journal starts with this magic; each frame is <u64 length><u32 crc32> then a payload whose
# first byte says what it holds: b"M" the writer's metadata (JSON), b"E" event records.
JOURNAL_MAGIC = b"TRUVAJ1\n"
_FRAME_HEADER = struct.Struct("<QI")
_SEQ = struct.Struct("<q")
_LENGTH = struct.Struct("<i")
_META = b"M"
_EVENTS = b"E"


def _frame(payload: bytes) -> bytes:
    return _FRAME_HEADER.pack(len(payload), _crc32(payload)) + payload


def journal_meta_frame(writer: WriterIdentity) -> bytes:
    """The frame naming the writer, first in every journal."""
    metadata = {key.decode(): value.decode() for key, value in writer.to_metadata().items()}
    return _frame(_META + json.dumps(metadata).encode())


def journal_frame(records: Iterable[tuple]) -> bytes:
    """One frame of segment records (seq, kind, execution id, payload, request, response body)."""
    return b"".join(journal_frame_parts(records))


# A value at least this long is written from its own buffer (one `writev` entry) rather than
# copied into the frame: a 20 KB body is never copied by the journal, only by the kernel.
_OWN_BUFFER_BYTES = 4096


def journal_frame_parts(records: Iterable[tuple]) -> list[bytes]:
    """The frame of `records` as consecutive buffers (the header first): their concatenation
    is `journal_frame(records)`; long values are the caller's own objects, not copies."""
    out: list[bytes] = []
    small = [_EVENTS]
    append, pack_seq, pack_length = small.append, _SEQ.pack, _LENGTH.pack
    for seq, *fields in records:
        append(pack_seq(seq))
        for value in fields:
            if value is None:
                append(_NO_VALUE)
                continue
            data = value.encode("utf-8", "replace") if isinstance(value, str) else value
            append(pack_length(len(data)))
            if len(data) >= _OWN_BUFFER_BYTES:
                out.append(b"".join(small))
                out.append(data)
                small = []
                append = small.append
            else:
                append(bytes(data))
    if small:
        out.append(b"".join(small))
    length, checksum = 0, 0
    for part in out:
        length += len(part)
        checksum = _crc32(part, checksum)
    return [_FRAME_HEADER.pack(length, checksum), *out]


_NO_VALUE = _LENGTH.pack(-1)
_TEXT_FIELDS = 3  # kind, execution id, payload; then the two bodies


class _JournalPieces:
    """Where each record's values lie in the journal's bytes, without copying them.

    `bounds` cuts the journal into consecutive pieces, alternately the bytes before a value
    and the value itself; each column lists its values' piece numbers (None for a null). One
    Arrow array over the whole journal, cut at `bounds`, then gives every column with one
    `take`: the values are copied once, by Arrow, not sliced one by one in Python.
    """

    def __init__(self, fields: int) -> None:
        self.seqs: list[int] = []
        self.bounds: list[int] = [0]
        self.columns: list[list[int | None]] = [[] for _ in range(fields)]

    def add_frame(self, data: bytes | mmap.mmap, start: int, end: int) -> None:
        """Note the records of the event frame whose payload is `data[start:end]`."""
        seqs, bounds, columns = self.seqs, self.bounds, self.columns
        unpack_seq, unpack_length = _SEQ.unpack_from, _LENGTH.unpack_from
        seq_size, length_size = _SEQ.size, _LENGTH.size
        offset = start + 1
        while offset < end:
            seqs.append(unpack_seq(data, offset)[0])
            offset += seq_size
            for column in columns:
                (length,) = unpack_length(data, offset)
                offset += length_size
                if length < 0:
                    column.append(None)
                    continue
                if offset + length > end:
                    raise ValueError("a record runs past its frame")
                column.append(len(bounds))
                bounds.append(offset)
                offset += length
                bounds.append(offset)
        if offset != end:
            raise ValueError("a record runs past its frame")

    def arrays(
        self, data: bytes | mmap.mmap, schema: pa.Schema, *, dictionary_bodies: bool = False
    ) -> list[pa.Array]:
        """The columns of `schema` (seq first): texts checked as UTF-8 by Arrow.

        With `dictionary_bodies`, each binary column is a dictionary array whose dictionary is
        the journal's pieces (over `data` itself) and whose indices are the column's piece
        numbers: nothing is copied until a reader takes the rows it needs and decodes them.
        """
        pieces = pa.LargeBinaryArray.from_buffers(
            pa.large_binary(),
            len(self.bounds) - 1,
            [None, pa.array(self.bounds, pa.int64()).buffers()[1], pa.py_buffer(data)],
        )
        arrays: list[pa.Array] = [pa.array(self.seqs, type=schema.field(0).type)]
        for column, item in zip(self.columns, list(schema)[1:], strict=True):
            indices = pa.array(column, pa.int64())
            if dictionary_bodies and pa.types.is_large_binary(item.type):
                arrays.append(pa.DictionaryArray.from_arrays(indices, pieces))
                continue
            values = pieces.take(indices)
            arrays.append(values if values.type == item.type else values.cast(item.type))
        return arrays


def read_journal_bytes(
    data: bytes | mmap.mmap, *, name: str = "journal", dictionary_bodies: bool = False
) -> pa.Table:
    """The records of every whole frame of a journal, in order; a torn last frame is skipped.

    A kill mid-append tears only the last frame: its bytes end early, or (power lost) its
    checksum fails with nothing after it. A frame whose checksum fails with bytes after it was
    written whole and changed since: that is damage, pa.ArrowInvalid, and the ingest keeps the
    file as `*.failed` rather than drop what follows the frame.

    With `dictionary_bodies` the body columns are dictionary arrays over `data` (see
    `_JournalPieces.arrays`). Raises pa.ArrowInvalid when the bytes are not a journal.
    """
    from store.ingest import SEGMENT_SCHEMA  # the segment columns are the ingest's

    if data[: len(JOURNAL_MAGIC)] != JOURNAL_MAGIC:
        raise pa.ArrowInvalid(f"{name}: not a journal (no magic)")
    pieces = _JournalPieces(len(SEGMENT_SCHEMA) - 1)
    metadata: dict[bytes, bytes] | None = None
    view = memoryview(data)
    offset = len(JOURNAL_MAGIC)
    damage: str | None = None
    while offset < len(data):
        header_end = offset + _FRAME_HEADER.size
        if header_end > len(data):
            break
        length, checksum = _FRAME_HEADER.unpack_from(data, offset)
        frame_end = header_end + length
        if frame_end > len(data):
            break  # torn: the last frame's bytes were never all written
        if _crc32(view[header_end:frame_end]) != checksum:
            if frame_end < len(data):
                damage = (
                    f"{name}: a damaged frame at byte {offset}: its checksum fails and "
                    f"{len(data) - frame_end} bytes follow it"
                )
            break  # damaged (DamagedJournal below), or the last frame, torn
        kind = data[header_end : header_end + 1]
        if kind == _META:
            written = json.loads(bytes(view[header_end + 1 : frame_end]))
            metadata = {k.encode(): v.encode() for k, v in written.items()}
        elif kind == _EVENTS:
            try:
                pieces.add_frame(data, header_end, frame_end)
            except (ValueError, struct.error) as error:
                raise pa.ArrowInvalid(f"{name}: a damaged frame at byte {offset}") from error
        offset = frame_end
    if offset < len(data) and damage is None:
        log.info("%s: skipped a torn frame at byte %d of %d", name, offset, len(data))
    try:
        arrays = pieces.arrays(data, SEGMENT_SCHEMA, dictionary_bodies=dictionary_bodies)
    except pa.ArrowInvalid as error:  # a text that is not UTF-8
        raise pa.ArrowInvalid(f"{name}: a damaged frame ({error})") from error
    table = pa.Table.from_arrays(arrays, names=SEGMENT_SCHEMA.names)
    table = table.replace_schema_metadata(metadata) if metadata else table
    if damage is not None:
        raise DamagedJournal(damage, table)
    return table


class DamagedJournal(pa.ArrowInvalid):
    """A journal with a damaged frame before its end; `table` holds the frames before it.

    A kill tears only the last frame, but a crash of the machine can leave an earlier page of
    an unsynced journal missing while later ones were written: the ingest takes the frames
    before the damage and keeps the whole file as `*.failed`."""

    def __init__(self, message: str, table: pa.Table) -> None:
        super().__init__(message)
        self.table = table


_IOV_MAX = 1024  # Linux's limit of buffers per writev


def _writev_all(descriptor: int, parts: list[bytes]) -> None:
    """Write the concatenation of `parts` at the end of the file, without joining them; a
    short write is continued where it stopped."""
    pending: list[bytes | memoryview] = [part for part in parts if len(part)]
    while pending:
        written = os.writev(descriptor, pending[:_IOV_MAX])
        done = 0
        while done < len(pending) and written >= len(pending[done]):
            written -= len(pending[done])
            done += 1
        pending = pending[done:]
        if written:
            pending[0] = memoryview(pending[0])[written:]


class Journal:
    """One writer's append-only journal file; appends cost a write, `sync()` an fsync."""

    def __init__(self, paths: StorePaths, name: str, writer: WriterIdentity) -> None:
        self.paths = paths
        self.path = paths.segments / name
        self.size = 0
        paths.segments.mkdir(parents=True, exist_ok=True)
        self._descriptor = os.open(
            self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o644
        )
        try:
            self._append(JOURNAL_MAGIC + journal_meta_frame(writer))
        except OSError:
            self.discard()
            raise
        self._empty_size = self.size

    def append(self, records: Iterable[tuple]) -> None:
        """Append `records` as one frame; on failure the file is cut back and the error raised."""
        self._append_parts(journal_frame_parts(records))

    def _append(self, data: bytes) -> None:
        self._append_parts([data])

    def _append_parts(self, parts: list[bytes]) -> None:
        try:
            _writev_all(self._descriptor, parts)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self._descriptor, self.size)
            raise
        self.size += sum(len(part) for part in parts)

    @property
    def has_frames(self) -> bool:
        """Whether anything beyond the magic was appended."""
        return self.size > self._empty_size

    def sync(self) -> None:
        """fsync the journal."""
        os.fsync(self._descriptor)

    def seal(self) -> Path:
        """fsync, close and rename to a segment that readers ingest; return its path."""
        self.sync()
        os.close(self._descriptor)
        self._descriptor = -1
        sealed = self.path.with_name(self.path.name[: -len(JOURNAL_SUFFIX)] + SEALED_SUFFIX)
        os.replace(self.path, sealed)
        try:
            _fsync_directory(self.paths.segments)
        except OSError as error:  # the segment is whole under its name
            log.warning("cannot fsync %s (%s)", self.paths.segments, error.strerror or error)
        return sealed

    def discard(self) -> None:
        """Close and delete a journal that holds no frame."""
        if self._descriptor >= 0:
            os.close(self._descriptor)
            self._descriptor = -1
        with contextlib.suppress(OSError):
            self.path.unlink()

    def close(self) -> None:
        """Close the file, leaving it for a reader to seal once this writer is gone."""
        if self._descriptor >= 0:
            os.close(self._descriptor)
            self._descriptor = -1


def journal_name(writer: WriterIdentity, segment_number: int) -> str:
    """`<token>-<number>.journal`, numbered with the writer's segments."""
    return f"{writer.token}-{segment_number:010d}{JOURNAL_SUFFIX}"


def seal_orphaned_journals(paths: StorePaths) -> set[str]:
    """Rename the journals of writers no living process holds to segments; return their tokens."""
    try:
        names = sorted(os.listdir(paths.segments))
    except FileNotFoundError:
        return set()
    tokens: set[str] = set()
    held: dict[str, bool] = {}
    for name in names:
        if not name.endswith(JOURNAL_SUFFIX):
            continue
        token = name.split("-", 1)[0]
        if token not in held:
            held[token] = _lease_is_held(paths, token)
        if held[token]:
            continue
        journal = paths.segments / name
        with contextlib.suppress(FileNotFoundError):
            os.replace(journal, journal.with_name(name[: -len(JOURNAL_SUFFIX)] + SEALED_SUFFIX))
            tokens.add(token)
    return tokens


def writer_segments(paths: StorePaths, writer: WriterIdentity) -> list[Path]:
    """This writer's segments and journals still in the spool."""
    return [
        paths.segments / name
        for name in _spool_names(paths)
        if name.startswith(writer.token + "-")
        and name.endswith((SEGMENT_SUFFIX, SEALED_SUFFIX, JOURNAL_SUFFIX))
    ]


def set_aside_segment(path: Path) -> Path:
    """Rename a segment that cannot be ingested to `*.failed`, keeping its bytes."""
    failed_path = path.with_name(path.name + FAILED_SUFFIX)
    os.replace(path, failed_path)
    return failed_path


def remove_files(paths: Iterable[Path]) -> list[Path]:
    """Delete files; return those now gone. One that cannot be deleted is logged and kept."""
    gone = []
    for path in paths:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as error:
            log.warning("cannot delete %s (%s); it is kept", path, error.strerror or error)
            continue
        gone.append(path)
    return gone


def _fsync_directory(directory: Path) -> None:
    """Make a rename in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_spool_directories(paths: StorePaths) -> None:
    """Make the spool's directories, or raise OSError naming the one that cannot be used: a
    file where a directory should be (NotADirectoryError), or one this process cannot write."""
    for directory in (paths.spool, paths.segments, paths.writers):
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except FileExistsError as error:  # exists, but is not a directory
            raise NotADirectoryError(
                errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(directory)
            ) from error
        if not os.access(directory, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(directory))


class WriterLease:
    """An exclusive flock on `writers/<token>.lease`, held while the recorder lives."""

    def __init__(self, paths: StorePaths, writer: WriterIdentity) -> None:
        self.paths = paths
        self.writer = writer
        self.path = paths.writers / (writer.token + LEASE_SUFFIX)
        paths.writers.mkdir(parents=True, exist_ok=True)
        temp_path = self.path.with_name(self.path.name + TEMP_SUFFIX)
        # Locked before it appears under its final name, so no one sees it unlocked.
        self._handle = temp_path.open("w")
        fcntl.flock(self._handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._handle.write(json.dumps({"pid": writer.pid, "host": writer.host}))
        self._handle.flush()
        os.replace(temp_path, self.path)

    def release(self) -> None:
        """Remove the lease file and drop the lock."""
        if self._handle.closed:
            return
        remove_files([self.path])
        self._handle.close()


def dead_writers(paths: StorePaths, tokens: Iterable[str | None]) -> set[str | None]:
    """The writer tokens among `tokens` whose lease is gone or no longer locked."""
    return {token for token in tokens if token is None or not _lease_is_held(paths, token)}


def orphaned_leases(paths: StorePaths) -> list[str]:
    """Tokens of lease files in the spool that no living process holds."""
    try:
        names = os.listdir(paths.writers)
    except FileNotFoundError:
        return []
    tokens = [name[: -len(LEASE_SUFFIX)] for name in names if name.endswith(LEASE_SUFFIX)]
    return [token for token in tokens if not _lease_is_held(paths, token)]


def reap_writer(paths: StorePaths, token: str) -> None:
    """Delete a dead writer's lease and its half-written (never renamed) segments."""
    remove_files([paths.writers / (token + LEASE_SUFFIX)])
    try:
        names = os.listdir(paths.segments)
    except FileNotFoundError:
        return
    remove_files(
        paths.segments / name
        for name in names
        if name.startswith(token + "-") and name.endswith(TEMP_SUFFIX)
    )


def _lease_is_held(paths: StorePaths, token: str) -> bool:
    """Whether a living process holds the lease of writer `token`."""
    lease_path = paths.writers / (token + LEASE_SUFFIX)
    try:
        handle = lease_path.open("r")
    except FileNotFoundError:
        return False
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return False

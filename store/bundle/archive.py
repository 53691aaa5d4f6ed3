"""Reading a bundle's zip archive safely: bounded sizes, safe member names, streamed members.

Every read is bounded by what the archive declares and by `BundleLimits`; the spans member is
walked as a JSON stream, so no member is ever held whole except the manifest.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import json
import queue
import re
import stat
import threading
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from store.bundle.format import (
    MANIFEST_MEMBER,
    MIB,
    README_MEMBER,
    SPANS_MEMBER,
    TABLES_FOLDER,
    BundleError,
    describe,
    reject_constant,
    store_table_specs,
)
from store.connection import first_line

READ_CHUNK = MIB


_DRIVE_LETTER = re.compile(r"^[A-Za-z]:")
_ZIP_MAGIC = b"PK\x03\x04"
_EMPTY_ZIP_MAGIC = b"PK\x05\x06"


@dataclass(frozen=True, slots=True)
class BundleLimits:
    """Bounds a bundle must stay within to be read.

    Uncompressed bytes in all (absolutely, and relative to the archive's size), members, the
    manifest's size, and one row's (or one span's) length, which bounds import memory.
    """

    max_total_bytes: int = 2 * 1024 * MIB
    max_ratio: int = 200
    ratio_floor_bytes: int = 64 * MIB
    max_members: int = 10_000
    max_manifest_bytes: int = 16 * MIB
    max_line_bytes: int = 64 * MIB


def refuse(path: Path, problem: str) -> BundleError:
    return BundleError(f"{path}: {problem}; nothing was imported")


def unsafe_member_reason(name: str) -> str | None:
    """Why a member name could escape the bundle or is not a plain file path, else None."""
    if not name:
        return "an empty name"
    if "\x00" in name or "\\" in name:
        return "a NUL or backslash in its name"
    if name.startswith("/") or _DRIVE_LETTER.match(name):
        return "an absolute path"
    parts = name.split("/")
    if ".." in parts:
        return "a '..' path component"
    if any(part in ("", ".") for part in parts):
        return "an empty or '.' path component"
    return None


def format_members() -> frozenset[str]:
    """The member names the bundle format has; any other member is refused."""
    tables = (spec.member for spec in store_table_specs())
    return frozenset({MANIFEST_MEMBER, README_MEMBER, SPANS_MEMBER, *tables})


def check_directory(
    path: Path, infos: Sequence[zipfile.ZipInfo], limits: BundleLimits, archive_bytes: int
) -> None:
    """Refuse member lists that are too long, unsafe, duplicated, exotic, foreign or too large.

    The uncompressed total the archive declares must stay within `max_total_bytes` and, beyond
    `ratio_floor_bytes`, within `max_ratio` times the archive's own size; every read is then
    bounded by those declarations.
    """
    if len(infos) > limits.max_members:
        raise refuse(path, f"{len(infos)} members, over the limit of {limits.max_members}")
    allowed = format_members()
    ratio_limit = max(limits.max_ratio * archive_bytes, limits.ratio_floor_bytes)
    seen: set[str] = set()
    total = 0
    for info in infos:
        for name in {info.filename, info.orig_filename}:
            reason = unsafe_member_reason(name)
            if reason:
                raise refuse(path, f"member {name!r} has an unsafe path ({reason})")
        name = info.filename
        if name in seen:
            raise refuse(path, f"member {name!r} appears twice")
        seen.add(name)
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise refuse(path, f"member {name!r} is a symbolic link")
        # Only the file-type bits count: writers such as zipfile.writestr set permissions alone.
        if info.is_dir() or (stat.S_IFMT(mode) and not stat.S_ISREG(mode)):
            raise refuse(path, f"member {name!r} is not a regular file")
        if name not in allowed:
            raise refuse(
                path,
                f"member {name!r} is not part of the bundle format (a bundle holds "
                f"{MANIFEST_MEMBER}, {README_MEMBER}, {TABLES_FOLDER}/<table>.jsonl and "
                f"{SPANS_MEMBER} only)",
            )
        if info.flag_bits & 0x1:
            raise refuse(path, f"member {name!r} is encrypted")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise refuse(
                path,
                f"member {name!r} uses compression method {info.compress_type} "
                "(expected stored or deflated)",
            )
        total += info.file_size
        if total > limits.max_total_bytes:
            raise refuse(
                path,
                f"its members declare over {limits.max_total_bytes} bytes uncompressed, "
                "over the limit",
            )
        if total > ratio_limit:
            raise refuse(
                path,
                f"its members declare over {ratio_limit} bytes uncompressed, over "
                f"{limits.max_ratio} times the {archive_bytes}-byte archive (a zip bomb? if you "
                "trust it, import it with --max-ratio N)",
            )


@contextlib.contextmanager
def member_stream(
    path: Path,
    archive: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    expected_size: int,
    digest: MemberDigest | None = None,
) -> Iterator[Callable[[int], bytes]]:
    """A `read(n)` over the member that refuses more bytes than `expected_size`.

    A thread reads ahead (inflate, CRC-32 and `digest`'s SHA-256 release the GIL, so they run
    beside the caller's decoding), at most `_READ_AHEAD` chunks. A damaged member (bad CRC, bad
    deflate data) is refused naming it, when the caller reaches the damage.
    """
    ahead = None
    try:
        ahead = _ReadAhead(path, archive, info, expected_size, digest)
        yield ahead.read
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, zlib.error) as error:
        raise refuse(path, f"member {info.filename!r} is damaged ({first_line(error)})") from error
    finally:
        if ahead is not None:
            ahead.close()


# Chunks read ahead of the caller (READ_CHUNK each): enough to keep the reader busy while the
# caller decodes one.
_READ_AHEAD = 2
_END = b""


class _ReadAhead:
    """A member's chunks, read in a thread into a bounded queue, handed out in order."""

    def __init__(
        self,
        path: Path,
        archive: zipfile.ZipFile,
        info: zipfile.ZipInfo,
        expected_size: int,
        digest: MemberDigest | None,
    ) -> None:
        self._path = path
        self._info = info
        self._expected_size = expected_size
        self._digest = digest
        self._chunks: queue.Queue[bytes | BaseException] = queue.Queue(_READ_AHEAD)
        self._stopped = threading.Event()
        self._chunk = b""
        self._offset = 0
        self._ended = False
        # The member is opened here, so an unreadable one fails in the caller's thread.
        self._handle = archive.open(info)
        self._thread = threading.Thread(
            target=self._read_all, name=f"read {info.filename}", daemon=True
        )
        self._thread.start()

    def _put(self, item: bytes | BaseException) -> bool:
        """Queue `item` unless the caller has stopped reading; False once it has."""
        while not self._stopped.is_set():
            try:
                self._chunks.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _read_all(self) -> None:
        total = 0
        try:
            while True:
                chunk = self._handle.read(min(READ_CHUNK, self._expected_size - total + 1))
                total += len(chunk)
                if total > self._expected_size:
                    self._put(
                        refuse(
                            self._path,
                            f"member {self._info.filename!r} holds more than the "
                            f"{self._expected_size} bytes it declares",
                        )
                    )
                    return
                if self._digest is not None:
                    self._digest.update(chunk)
                if not self._put(chunk) or not chunk:
                    return
        except BaseException as error:  # handed to the caller, in order
            self._put(error)

    def read(self, size: int) -> bytes:
        """At most `size` of the member's next bytes; b"" at its end."""
        if self._offset == len(self._chunk):
            if self._ended:
                return _END
            item = self._chunks.get()
            if isinstance(item, BaseException):
                self._ended = True
                raise item
            self._ended = not item
            self._chunk, self._offset = item, 0
        if self._offset == 0 and size >= len(self._chunk):
            self._offset = len(self._chunk)
            return self._chunk
        piece = self._chunk[self._offset : self._offset + size]
        self._offset += len(piece)
        return piece

    def close(self) -> None:
        """Stop the reader thread and close the member."""
        self._stopped.set()
        self._thread.join()
        self._handle.close()


def read_member(
    path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo, expected_size: int
) -> bytes:
    """The member's bytes (for the manifest only), reading at most `expected_size` + 1."""
    chunks = []
    with member_stream(path, archive, info, expected_size) as read:
        while chunk := read(READ_CHUNK):
            chunks.append(chunk)
    return b"".join(chunks)


class MemberDigest:
    """The size and SHA-256 of a member's bytes as they are read, checked against the manifest."""

    def __init__(self) -> None:
        self.size = 0
        self._sha256 = hashlib.sha256()

    def update(self, chunk: bytes) -> None:
        self.size += len(chunk)
        self._sha256.update(chunk)

    def check(self, path: Path, info: zipfile.ZipInfo, member: Mapping[str, Any]) -> None:
        """Refuse the member if what was read differs from the manifest's size or SHA-256."""
        check_digest(path, info, member, self.size, self._sha256.hexdigest())


def verify_member(
    path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo, member: Mapping[str, Any]
) -> None:
    """Check a member's size and SHA-256 against the manifest, reading it in chunks."""
    digest = MemberDigest()
    with member_stream(path, archive, info, member["size"], digest) as read:
        while read(READ_CHUNK):
            pass
    digest.check(path, info, member)


def check_digest(
    path: Path, info: zipfile.ZipInfo, member: Mapping[str, Any], size: int, found: str
) -> None:
    if size != member["size"]:
        raise refuse(
            path,
            f"member {info.filename!r} is {size} bytes, the manifest says "
            f"{member['size']} (truncated?)",
        )
    if found != member["sha256"]:
        raise refuse(
            path,
            f"member {info.filename!r} has SHA-256 {found[:12]}…, the manifest "
            f"says {member['sha256'][:12]}… (changed or damaged)",
        )


def open_archive(path: Path, limits: BundleLimits) -> zipfile.ZipFile:
    try:
        info = path.stat()
    except FileNotFoundError as error:
        raise BundleError(f"{path}: no such file") from error
    except OSError as error:
        raise BundleError(f"{path}: cannot read: {error.strerror}") from error
    if not stat.S_ISREG(info.st_mode):
        raise BundleError(f"{path}: not a regular file, expected a bundle (.zip)")
    if info.st_size > limits.max_total_bytes:
        raise refuse(
            path, f"the file is {info.st_size} bytes, over the limit of {limits.max_total_bytes}"
        )
    try:
        with path.open("rb") as handle:
            head = handle.read(4)
    except OSError as error:
        raise BundleError(f"{path}: cannot read: {error.strerror}") from error
    try:
        return zipfile.ZipFile(path)
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        EOFError,
        ValueError,
        OSError,
        NotImplementedError,
    ) as error:
        if head in (_ZIP_MAGIC, _EMPTY_ZIP_MAGIC):
            problem = "a truncated or damaged zip archive (its directory at the end is unreadable)"
        else:
            problem = "not a truva bundle (not a zip archive)"
        raise refuse(path, problem) from error


def member_lines(
    path: Path,
    archive: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    member: Mapping[str, Any],
    limits: BundleLimits,
    digest: MemberDigest | None = None,
) -> Iterator[tuple[int, str]]:
    """Each line of a table member as text, numbered from 1, read in bounded pieces (each
    piece fed to `digest` too, when given)."""
    where = info.filename
    with member_stream(path, archive, info, member["size"], digest) as read:
        pending = bytearray()
        number = 0
        while True:
            chunk = read(READ_CHUNK)
            if not chunk:
                break
            searched = len(pending)  # the bytes before the chunk hold no newline
            pending += chunk
            start = 0
            while (end := pending.find(b"\n", max(start, searched))) >= 0:
                number += 1
                if end - start > limits.max_line_bytes:  # a whole line within one piece
                    raise _row_over_limit(path, where, number, limits)
                yield number, _line_text(path, where, bytes(pending[start:end]))
                start = end + 1
            del pending[:start]
            if len(pending) > limits.max_line_bytes:  # a line still growing past the limit
                raise _row_over_limit(path, where, number + 1, limits)
        if pending:
            raise refuse(path, f"{where}: the last line has no newline (truncated?)")


def _row_over_limit(path: Path, where: str, number: int, limits: BundleLimits) -> BundleError:
    return refuse(
        path,
        f"{where} line {number} is over {limits.max_line_bytes} bytes, the limit for one row "
        "(raise it with --max-row-bytes N)",
    )


def _line_text(path: Path, where: str, line: bytes) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as error:
        raise refuse(path, f"{where} is not UTF-8 text") from error


class JsonStream:
    """JSON text read from a member in chunks; values are decoded with `raw_decode`.

    Only the containers being walked are streamed; each value decoded whole (a span, say) may
    be at most `max_value_bytes` long.
    """

    def __init__(self, path: Path, read: Callable[[int], bytes], max_value_bytes: int) -> None:
        self.path = path
        self._read = read
        self._max_value_bytes = max_value_bytes
        self._decoder = json.JSONDecoder(parse_constant=reject_constant)
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._text = ""
        self._pos = 0
        self._eof = False

    def _invalid(self) -> BundleError:
        return refuse(self.path, f"{SPANS_MEMBER} is not valid JSON")

    def _fill(self) -> bool:
        """Read one more chunk; False at the end of the member."""
        if self._eof:
            return False
        chunk = self._read(READ_CHUNK)
        try:
            text = self._utf8.decode(chunk, final=not chunk)
        except UnicodeDecodeError as error:
            raise self._invalid() from error
        self._text = self._text[self._pos :] + text
        self._pos = 0
        if not chunk:
            self._eof = True
        return True

    def peek(self) -> str:
        """The next character that is not whitespace, or "" at the end."""
        while True:
            while self._pos < len(self._text) and self._text[self._pos] in " \t\r\n":
                self._pos += 1
            if self._pos < len(self._text):
                return self._text[self._pos]
            if not self._fill():
                return ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise self._invalid()
        self._pos += 1

    def take(self, char: str) -> bool:
        """Consume `char` if it comes next."""
        if self.peek() == char:
            self._pos += 1
            return True
        return False

    def value(self) -> Any:
        """Decode the next whole value."""
        self.peek()
        while True:
            try:
                value, end = self._decoder.raw_decode(self._text, self._pos)
            except (ValueError, RecursionError) as error:
                if self._eof:
                    raise self._invalid() from error
                value, end = None, -1
            if end >= 0 and (end < len(self._text) or self._eof):
                self._pos = end
                return value
            waiting = len(self._text) - self._pos
            if waiting > self._max_value_bytes:
                raise refuse(
                    self.path,
                    f"{SPANS_MEMBER}: a value is over {self._max_value_bytes} bytes, the "
                    "limit for one span (raise it with --max-row-bytes N)",
                )
            # Read until the text waiting doubles, so a long value is decoded a few times only.
            while len(self._text) - self._pos < 2 * waiting and self._fill():
                pass
            if not self._eof and len(self._text) - self._pos <= waiting:
                self._fill()

    def members(self) -> Iterator[str]:
        """The keys of the object that starts next; the caller consumes each value."""
        self.expect("{")
        if self.take("}"):
            return
        while True:
            key = self.value()
            if not isinstance(key, str):
                raise self._invalid()
            self.expect(":")
            yield key
            if self.take(","):
                continue
            self.expect("}")
            return

    def items(self) -> Iterator[int]:
        """The indexes of the array that starts next; the caller consumes each item."""
        self.expect("[")
        if self.take("]"):
            return
        index = 0
        while True:
            yield index
            index += 1
            if self.take(","):
                continue
            self.expect("]")
            return

    def finish(self) -> None:
        if self.peek() != "":
            raise self._invalid()


# An OTLP/JSON document nests its spans as resourceSpans[].scopeSpans[].spans[].
_SPAN_NESTING = ("resourceSpans", "scopeSpans", "spans")


def count_spans(path: Path, stream: JsonStream) -> int:
    """The spans in an OTLP/JSON document, streamed; BundleError when its nesting is not OTLP's."""
    not_otlp = refuse(path, f"{SPANS_MEMBER} is not an OTLP/JSON document (no resourceSpans)")
    if stream.peek() != "{":
        stream.value()
        stream.finish()
        raise not_otlp
    count = _count_nested(path, stream, "", 0)
    stream.finish()
    if count is None:
        raise not_otlp
    return count


def _wrong(path: Path, stream: JsonStream, where: str, expected: str) -> BundleError:
    return refuse(
        path, f"{SPANS_MEMBER}: {where} is {describe(stream.value())}, expected {expected}"
    )


def _count_nested(path: Path, stream: JsonStream, where: str, depth: int) -> int | None:
    """The spans in the object that starts next, walking its `_SPAN_NESTING[depth]` list.

    A repeated key counts its last list. At the top a missing list, or one that is not a list,
    is None; below, a missing list holds no spans and anything but lists of objects is refused.
    """
    key_name = _SPAN_NESTING[depth]
    innermost = depth == len(_SPAN_NESTING) - 1
    count: int | None = None if depth == 0 else 0
    for key in stream.members():
        if key != key_name:
            stream.value()
            continue
        here = f"{where}.{key}" if where else key
        if stream.peek() != "[":
            if depth > 0:
                raise _wrong(path, stream, here, "a list")
            stream.value()
            count = None
            continue
        count = 0
        for index in stream.items():
            if innermost:
                stream.value()
                count += 1
                continue
            item = f"{here}[{index}]"
            if stream.peek() != "{":
                raise _wrong(path, stream, item, "an object")
            count += _count_nested(path, stream, item, depth + 1) or 0
    return count

"""Zip bombs and oversized members are refused in one line, in bounded memory, writing nothing.

The bombs are built with zipfile from a generator of zero-filled chunks, so the test files are
small and the tests fast; the import runs in a child process where its peak RSS is measured.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.bundle import BundleError, BundleLimits, import_bundle, read_bundle
from store.recorder import StoreRecorder
from tests.support.events_factory import small_execution
from tests.support.plans import run_cli

_MIB = 1024 * 1024
ROOT = Path(__file__).resolve().parents[2]
# Import memory must stay below this for any bundle (issue 8: "say < 300 MB").
PEAK_RSS_LIMIT_MIB = 300


def zero_chunks(size: int, chunk: bytes = b"\0" * _MIB) -> Iterator[bytes]:
    for _ in range(size // len(chunk)):
        yield chunk


@pytest.fixture(scope="module")
def small_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from store.bundle import export_bundle

    work = tmp_path_factory.mktemp("bombs")
    db = work / "source.duckdb"
    with StoreRecorder(db) as recorder:
        for event in small_execution("exec-bomb-0001"):
            recorder.record(event)
    path = work / "small.zip"
    export_bundle(db, path, None)
    return path


def with_member(
    source: Path, target: Path, name: str, chunks: Iterator[bytes], *, listed: bool = True
) -> Path:
    """`source` with member `name` replaced or added, its bytes streamed from `chunks`."""
    digest = hashlib.sha256()
    size = 0
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w", allowZip64=True) as new:
        info = zipfile.ZipInfo(name)
        info.compress_type = zipfile.ZIP_DEFLATED
        with new.open(info, "w", force_zip64=True) as handle:
            for chunk in chunks:
                digest.update(chunk)
                size += len(chunk)
                handle.write(chunk)
        manifest = json.loads(old.read("manifest.json"))
        members = [m for m in manifest["members"] if m["name"] != name]
        if listed:
            members.append({"name": name, "size": size, "sha256": digest.hexdigest()})
        manifest["members"] = members
        new.writestr("manifest.json", json.dumps(manifest), zipfile.ZIP_DEFLATED)
        for item in old.infolist():
            if item.filename not in ("manifest.json", name):
                new.writestr(item, old.read(item), zipfile.ZIP_DEFLATED)
    return target


def import_in_child(bundle: Path, db: Path) -> tuple[int, str, int]:
    """Exit code, stderr and peak RSS (MiB, VmHWM) of `truva-console import` in a child."""
    code = (
        "import sys\n"
        "from console.entry import main\n"
        "rc = main(sys.argv[1:])\n"
        "hwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM:'))\n"
        "print('PEAK', int(hwm.split()[1]) // 1024, file=sys.stderr)\n"
        "raise SystemExit(rc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, "import", str(bundle), "--db", str(db)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    *lines, peak = result.stderr.splitlines()
    return result.returncode, "\n".join(lines), int(peak.removeprefix("PEAK "))


@pytest.mark.serial  # a bound on peak RSS
def test_the_issue_bomb_an_extra_member_of_zeros_is_refused_in_bounded_memory(
    small_bundle: Path, tmp_path: Path
) -> None:
    bomb = with_member(small_bundle, tmp_path / "bomb.zip", "zeros.bin", zero_chunks(1100 * _MIB))
    db = tmp_path / "target.duckdb"

    code, stderr, peak_mib = import_in_child(bomb, db)

    assert bomb.stat().st_size < 2 * _MIB
    assert code == 2
    assert stderr == (
        f"truva-console: {bomb}: member 'zeros.bin' is not part of the bundle format (a bundle "
        "holds manifest.json, README.txt, tables/<table>.jsonl and spans.otlp.json only); "
        "nothing was imported"
    )
    assert peak_mib < PEAK_RSS_LIMIT_MIB
    assert not db.exists()


@pytest.mark.serial  # a bound on peak RSS
def test_a_table_member_of_zeros_is_refused_by_its_ratio_in_bounded_memory(
    small_bundle: Path, tmp_path: Path
) -> None:
    bomb = with_member(
        small_bundle, tmp_path / "bomb.zip", "tables/events.jsonl", zero_chunks(1100 * _MIB)
    )
    db = tmp_path / "target.duckdb"

    code, stderr, peak_mib = import_in_child(bomb, db)

    assert code == 2
    size = bomb.stat().st_size
    assert stderr == (
        f"truva-console: {bomb}: its members declare over {200 * size} bytes uncompressed, over "
        f"200 times the {size}-byte archive (a zip bomb? if you trust it, import it with "
        "--max-ratio N); nothing was imported"
    )
    assert peak_mib < PEAK_RSS_LIMIT_MIB
    assert not db.exists()


def test_an_unlisted_foreign_member_is_refused_before_anything_is_read(
    small_bundle: Path, tmp_path: Path
) -> None:
    bomb = with_member(
        small_bundle, tmp_path / "bomb.zip", "zeros.bin", zero_chunks(8 * _MIB), listed=False
    )

    with pytest.raises(BundleError, match=r"member 'zeros.bin' is not part of the bundle format"):
        read_bundle(bomb)


def test_the_absolute_bound_applies_below_the_ratio(small_bundle: Path, tmp_path: Path) -> None:
    bomb = with_member(
        small_bundle, tmp_path / "bomb.zip", "tables/events.jsonl", zero_chunks(8 * _MIB)
    )

    result = run_cli("import", str(bomb), "--db", str(tmp_path / "t.duckdb"),
                     "--max-bytes", str(4 * _MIB))  # fmt: skip

    assert result.code == 2
    assert f"its members declare over {4 * _MIB} bytes uncompressed, over the limit" in (
        result.stderr
    )


def test_a_row_longer_than_the_line_limit_is_refused_while_streaming(
    small_bundle: Path, tmp_path: Path
) -> None:
    bomb = with_member(
        small_bundle, tmp_path / "bomb.zip", "tables/events.jsonl", zero_chunks(4 * _MIB)
    )

    with pytest.raises(BundleError) as refused:
        import_bundle(tmp_path / "t.duckdb", bomb, limits=BundleLimits(max_line_bytes=_MIB))

    assert str(refused.value) == (
        f"{bomb}: tables/events.jsonl line 1 is over {_MIB} bytes, the limit for one row "
        "(raise it with --max-row-bytes N); "
        "nothing was imported"
    )
    assert not (tmp_path / "t.duckdb").exists()


def test_a_large_spans_document_is_counted_streaming(small_bundle: Path, tmp_path: Path) -> None:
    span = json.dumps({"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "x" * 200}).encode()

    def spans_document(count: int) -> Iterator[bytes]:
        yield b'{"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": ['
        for index in range(count):
            yield (b"," if index else b"") + span
        yield b"]}]}]}"

    bundle = with_member(small_bundle, tmp_path / "spans.zip", "spans.otlp.json",
                         spans_document(20_000))  # fmt: skip
    cut = b'{"resourceSpans": [{"scopeSpans": [{"spans": [{}, '
    truncated = with_member(small_bundle, tmp_path / "cut.zip", "spans.otlp.json", iter([cut]))

    assert read_bundle(bundle).span_count == 20_000
    with pytest.raises(BundleError, match=r"spans\.otlp\.json is not valid JSON"):
        read_bundle(truncated)

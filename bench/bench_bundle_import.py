"""Peak memory of `truva-console import` on zip bombs and on large real bundles.

    python bench/bench_bundle_import.py [--executions 400] [--body-kib 64] [--copies 10]
    python bench/bench_bundle_import.py --llm [--copies 10]

`--llm` uses `make bench`'s bundle instead (bench/measures.py: 4,000 LLM calls with 20 KB
prompts, redaction on): it prints the export and import times (wall and CPU) and the import's
peak RSS at 1x and at --copies x, nothing else.

Builds, in a temporary directory: a real bundle exported from a store of N recorded
executions (with response bodies of --body-kib), the same bundle with every execution copied
--copies times under new ids (to show the peak does not grow with the bundle), and crafted
bombs (an extra member of zeros, a listed table member of zeros), then imports each in a
child process and prints its exit code, first stderr line and peak RSS (VmHWM of the child).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_MIB = 1024 * 1024
_CHUNK = b"\0" * _MIB


def build_store(db: Path, executions: int, body_kib: int) -> None:
    from store.recorder import StoreRecorder
    from tests.support.events_factory import realistic_execution

    body = (b'{"success": true, "data": {"blob": "' + os.urandom(body_kib * 512).hex().encode()
            + b'"}}') if body_kib else None  # fmt: skip
    with StoreRecorder(db) as recorder:
        for index in range(executions):
            for event in realistic_execution(f"exec-{index:06d}", start_at=1.8e9 + index):
                if body and event.kind == "attempt_responded":
                    event = type(event)(**{**_fields(event), "response_body": body})
                recorder.record(event)


def _fields(event: object) -> dict:
    import dataclasses

    return {f.name: getattr(event, f.name) for f in dataclasses.fields(event) if f.init}


def add_zero_member(source: Path, target: Path, name: str, size: int, *, listed: bool) -> None:
    """Copy `source` with member `name` replaced or added: `size` zero bytes, deflated."""
    digest = hashlib.sha256()
    for _ in range(size // _MIB):
        digest.update(_CHUNK)
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w", allowZip64=True) as new:
        manifest = json.loads(old.read("manifest.json"))
        if listed:
            members = [m for m in manifest["members"] if m["name"] != name]
            members.append({"name": name, "size": size, "sha256": digest.hexdigest()})
            manifest["members"] = members
        new.writestr("manifest.json", json.dumps(manifest), zipfile.ZIP_DEFLATED)
        for info in old.infolist():
            if info.filename not in ("manifest.json", name):
                new.writestr(info, old.read(info), zipfile.ZIP_DEFLATED)
        info = zipfile.ZipInfo(name)
        info.compress_type = zipfile.ZIP_DEFLATED
        with new.open(info, "w", force_zip64=True) as handle:
            for _ in range(size // _MIB):
                handle.write(_CHUNK)


KEYS = ("execution_id", "call_id")


def copy_executions(source: Path, target: Path, copies: int) -> None:
    """`source` with every execution `copies` times, ids prefixed `c<k>-`, members streamed
    (hashed in a first pass, written in a second, so the manifest leads as in a bundle)."""
    with zipfile.ZipFile(source) as old:
        manifest = json.loads(old.read("manifest.json"))
        ids = manifest["execution_ids"]
        # Every row names its execution, and an LLM call's id is its key: both get the prefix.
        renames = [
            [(f'"{key}":"'.encode(), f'"{key}":"c{k}-'.encode()) for key in KEYS]
            for k in range(copies)
        ]

        def pieces(name: str):
            if not name.startswith("tables/"):
                yield old.read(name)  # README and spans (copied once; import only counts spans)
                return
            for pairs in renames:
                with old.open(name) as member:
                    for line in member:
                        for before, after in pairs:
                            line = line.replace(before, after)
                        yield line

        names = [m["name"] for m in manifest["members"]]
        for member in manifest["members"]:
            digest, size = hashlib.sha256(), 0
            for piece in pieces(member["name"]):
                digest.update(piece)
                size += len(piece)
            member.update(size=size, sha256=digest.hexdigest())
        manifest["execution_ids"] = [f"c{k}-{i}" for k in range(copies) for i in ids]
        for table in manifest["tables"]:
            table["rows"] *= copies
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED, allowZip64=True) as new:
            new.writestr("manifest.json", json.dumps(manifest, indent=2))
            for name in names:
                with new.open(name, "w", force_zip64=True) as handle:
                    for piece in pieces(name):
                        handle.write(piece)


# ru_maxrss survives fork and exec on Linux, so a child reads its own high-water mark instead.
PEAK_RSS_SOURCE = """
def peak_rss_kib():
    with open('/proc/self/status') as status:
        for line in status:
            if line.startswith('VmHWM:'):
                return int(line.split()[1])
    return 0
"""


def import_peak(bundle: Path, db: Path) -> tuple[int, str, float]:
    """Exit code, first stderr line and peak RSS (MiB) of importing `bundle` in a child."""
    code = (
        "import sys; from console.entry import main; rc = main(sys.argv[1:]); "
        "print(peak_rss_kib(), file=sys.stderr); raise SystemExit(rc)"
    )
    code = PEAK_RSS_SOURCE + code
    result = subprocess.run(
        [sys.executable, "-c", code, "import", str(bundle), "--db", str(db)],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    lines = result.stderr.strip().splitlines()
    peak_mib = int(lines[-1]) / 1024 if lines and lines[-1].isdigit() else float("nan")
    message = lines[0] if len(lines) > 1 else "(imported)"
    return result.returncode, message[:150], peak_mib


def build_bundle(output: Path, executions: int, body_kib: int) -> None:
    from store.bundle import export_bundle

    db = output.with_suffix(".duckdb")
    build_store(db, executions, body_kib)
    export_bundle(db, output, None)


def build_llm_bundle(output: Path) -> None:
    """`make bench`'s bundle (bench/measures.py), with its export timed (wall and CPU)."""
    import time

    from bench.measures import Size, bundle_source
    from store.bundle import export_bundle

    db, text_bytes = bundle_source(output.parent, Size.FULL)
    wall, cpu = time.perf_counter(), time.process_time()
    export_bundle(db, output, None, redact=True)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"export: {wall:.2f} s wall, {cpu:.2f} s CPU, {text_bytes / 1e6:.1f} MB of text")


def llm_main(copies: int) -> int:
    """Export and import `make bench`'s bundle; the import's peak RSS at 1x and `copies`x."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bundle = work / "bench-bundle.zip"
        subprocess.run([sys.executable, __file__, "--build-llm", str(bundle)], check=True,
                       cwd=ROOT)  # fmt: skip
        cases = {"bench bundle": bundle}
        if copies > 1:
            copied = work / "bench-copied.zip"
            copy_executions(bundle, copied, copies)
            cases[f"bench bundle × {copies}"] = copied
        for name, path in cases.items():
            with zipfile.ZipFile(path) as archive:
                uncompressed = sum(info.file_size for info in archive.infolist())
            rc, message, peak, wall, cpu = import_peak_timed(path, work / f"{len(name)}.duckdb")
            print(f"{name:24} {path.stat().st_size / _MIB:8.2f} MiB zipped, "
                  f"{uncompressed / _MIB:7.1f} MiB uncompressed: exit {rc}, import {wall:.2f} s "
                  f"wall, {cpu:.2f} s CPU, peak RSS {peak:7.1f} MiB  {message}")  # fmt: skip
    return 0


def import_peak_timed(bundle: Path, db: Path) -> tuple[int, str, float, float, float]:
    """`import_peak`, plus the child's wall and CPU seconds for the import itself."""
    code = (
        "import sys, time; from console.entry import main; "
        "w, c = time.perf_counter(), time.process_time(); rc = main(sys.argv[1:]); "
        "print(f'{time.perf_counter() - w} {time.process_time() - c}', file=sys.stderr); "
        "print(peak_rss_kib(), file=sys.stderr); raise SystemExit(rc)"
    )
    result = subprocess.run(
        [sys.executable, "-c", PEAK_RSS_SOURCE + code, "import", str(bundle), "--db", str(db)],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    lines = result.stderr.strip().splitlines()
    peak_mib = int(lines[-1]) / 1024 if lines and lines[-1].isdigit() else float("nan")
    wall, cpu = (float(x) for x in lines[-2].split()) if len(lines) > 1 else (0.0, 0.0)
    message = lines[0] if len(lines) > 2 else "(imported)"
    return result.returncode, message[:150], peak_mib, wall, cpu


def main() -> int:
    if sys.argv[1:2] == ["--build"]:
        build_bundle(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        return 0
    if sys.argv[1:2] == ["--build-llm"]:
        build_llm_bundle(Path(sys.argv[2]))
        return 0
    parser = argparse.ArgumentParser()
    parser.add_argument("--executions", type=int, default=400)
    parser.add_argument("--body-kib", type=int, default=64)
    parser.add_argument("--bomb-mib", type=int, default=1100)
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--llm", action="store_true", help="make bench's bundle instead")
    args = parser.parse_args()
    if args.llm:
        return llm_main(args.copies)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        real = work / "real.zip"
        small = work / "small.zip"
        subprocess.run(
            [sys.executable, __file__, "--build", str(real), str(args.executions),
             str(args.body_kib)], check=True, cwd=ROOT,
        )  # fmt: skip
        subprocess.run(
            [sys.executable, __file__, "--build", str(small), "10", "0"], check=True, cwd=ROOT
        )
        cases = {"real": real, "small real": small}
        if args.copies > 1:
            copied = work / "copied.zip"
            copy_executions(real, copied, args.copies)
            cases[f"real × {args.copies}"] = copied
        extra = work / "extra-member.zip"
        add_zero_member(small, extra, "zeros.bin", args.bomb_mib * _MIB, listed=True)
        cases["extra listed member of zeros"] = extra
        table = work / "table-bomb.zip"
        add_zero_member(small, table, "tables/events.jsonl", args.bomb_mib * _MIB, listed=True)
        cases["table member of zeros"] = table
        for bundle in [real, small, *([cases[f"real × {args.copies}"]] if args.copies > 1 else [])]:
            with zipfile.ZipFile(bundle) as archive:
                uncompressed = sum(info.file_size for info in archive.infolist())
            print(f"{bundle.name}: {bundle.stat().st_size / _MIB:.2f} MiB zipped, "
                  f"{uncompressed / _MIB:.1f} MiB uncompressed")  # fmt: skip
        for name, bundle in cases.items():
            rc, message, peak = import_peak(bundle, work / f"into-{abs(hash(name))}.duckdb")
            size = bundle.stat().st_size / _MIB
            print(f"{name:32} {size:8.2f} MiB  exit {rc}  peak RSS {peak:7.1f} MiB  {message}")
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"(this script's own peak: {own:.0f} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

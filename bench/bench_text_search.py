"""Search in a 5 MB body, as the TUI's ctrl+f does in its worker thread.

    python bench/bench_text_search.py [--mib 5] [--query "unknown city"]

Prints the time of `console.render.text_search.search_text` on a JSON-like text of --mib MiB
with a match every ~4 KiB, and of a search with no match; nothing is judged.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def build_text(mib: int) -> str:
    line = '  {"id": %d, "city": "Paris", "note": "' + "x" * 60 + '"},\n'
    lines = []
    size = 0
    index = 0
    while size < mib * 1024 * 1024:
        text = line % index
        if index % 50 == 0:
            text = text.replace("Paris", "Unknown City Tokio")
        lines.append(text)
        size += len(text)
        index += 1
    return "".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=5)
    parser.add_argument("--query", default="unknown city")
    args = parser.parse_args()
    from console.render.text_search import search_text

    text = build_text(args.mib)
    for query in (args.query, "no such words anywhere"):
        started = time.perf_counter()
        result = search_text(text, query)
        took_ms = (time.perf_counter() - started) * 1000
        print(f"{len(text) / 1048576:.1f} MiB, {text.count(chr(10))} lines, query {query!r}: "
              f"{result.summary(None)} in {took_ms:.1f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

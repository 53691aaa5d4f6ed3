"""A child process that ingests a store's spool and says when the batch's COMMIT begins.

Run as `python -m tests.support.ingest_child DB`: it prints `committing` once every row of the
batch is written inside the transaction (the statements left are the `ingested_segments` row
and the `COMMIT`, which checkpoints a big batch straight into the file), then `committed` when
the session is closed. A test kills it between the two.
"""

from __future__ import annotations

import sys
from typing import Any

import store.ingest.upsert as upsert
from store.queries import open_store


def main() -> int:
    write_staged = upsert.write_staged

    def announcing_write_staged(conn: Any, staged: Any) -> None:
        write_staged(conn, staged)
        print("committing", flush=True)

    upsert.write_staged = announcing_write_staged
    open_store(sys.argv[1]).refresh()
    print("committed", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""truva-console debug store: DuckDB schema, recorder, queries and trace bundles.

The public names below (docs/library.md) are imported on first use, so importing a submodule
stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from executor.lazy import lazy_attributes

# Public name -> the module that defines it. tests/unit/test_public_api.py pins this list.
_PUBLIC = {
    "Recording": "store.recording",
    "StoreRecorder": "store.recorder",
    "Store": "store.queries",
    "open_store": "store.queries",
    "ExecutionFilter": "store.queries",
    "ExecutionRow": "store.queries",
    "ExecutionDetail": "store.queries",
    "StepRecord": "store.queries",
    "AttemptRecord": "store.queries",
    "LLMCallRecord": "store.queries",
    "EventRecord": "store.queries",
    "StoreError": "store.errors",
}

__all__ = [
    "AttemptRecord",
    "EventRecord",
    "ExecutionDetail",
    "ExecutionFilter",
    "ExecutionRow",
    "LLMCallRecord",
    "Recording",
    "StepRecord",
    "Store",
    "StoreError",
    "StoreRecorder",
    "open_store",
]

if TYPE_CHECKING:
    from store.errors import StoreError
    from store.queries import (
        AttemptRecord,
        EventRecord,
        ExecutionDetail,
        ExecutionFilter,
        ExecutionRow,
        LLMCallRecord,
        StepRecord,
        Store,
        open_store,
    )
    from store.recorder import StoreRecorder
    from store.recording import Recording


__getattr__ = lazy_attributes("store", _PUBLIC, globals())

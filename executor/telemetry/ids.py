"""Span and trace ids derived from recorded ids: an id generator whose next ids can be set."""

from __future__ import annotations

import logging
import random
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

_logger = logging.getLogger(__name__)


class ExecutionTraceIds:
    """An id generator whose next trace and span ids can be set, so ids are derivable.

    The recorder sets `trace_id_for_execution(execution_id)` before it starts a root span and
    `span_id_for(...)` before every span; ids nobody set are random, as in `RandomIdGenerator`.
    """

    def __init__(self) -> None:
        self._next_trace_id: int | None = None
        self._next_span_id: int | None = None
        self._lock = threading.Lock()

    def use_next(self, trace_id_hex: str) -> None:
        """The next `generate_trace_id` call returns this id."""
        with self._lock:
            self._next_trace_id = int(trace_id_hex, 16)

    def use_next_span(self, span_id_hex: str) -> None:
        """The next `generate_span_id` call returns this id."""
        with self._lock:
            self._next_span_id = int(span_id_hex, 16)

    def generate_span_id(self) -> int:
        """The id set by `use_next_span`, once; else a random non-zero 64-bit span id."""
        with self._lock:
            chosen, self._next_span_id = self._next_span_id, None
        if chosen is not None:
            return chosen
        span_id = random.getrandbits(64)
        while span_id == 0:
            span_id = random.getrandbits(64)
        return span_id

    def is_trace_id_random(self) -> bool:
        """False: trace ids derived from execution ids are not random (W3C random flag unset)."""
        return False

    def generate_trace_id(self) -> int:
        """The id set by `use_next`, once; else a random non-zero 128-bit trace id."""
        with self._lock:
            chosen, self._next_trace_id = self._next_trace_id, None
        if chosen is not None:
            return chosen
        trace_id = random.getrandbits(128)
        while trace_id == 0:
            trace_id = random.getrandbits(128)
        return trace_id

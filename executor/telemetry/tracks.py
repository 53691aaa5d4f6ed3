"""What the recorder tracks per open execution, step and attempt span."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.trace import Span

_logger = logging.getLogger(__name__)


@dataclass(slots=True)
class AttemptTrack:
    """One attempt's span and what the recorder learned about it."""

    span: Span
    n: int
    attempt_number: int | None = None
    status: int | None = None
    response_body: bytes = b""
    transport_error_message: str | None = None
    correction_started_at: float | None = None
    correction_layer: str | None = None  # the layer whose correction this attempt sends
    ended: bool = False


@dataclass(slots=True)
class StepTrack:
    """One step's span and its attempts."""

    span: Span
    step_id: str
    started_at: float
    tool: str
    capability: str
    depends_on: tuple[str, ...] = ()
    execution_id: str = ""
    description: str | None = None
    dispatches: int = 0
    corrections_applied: int = 0
    attempts: dict[int, AttemptTrack] = field(default_factory=dict)
    ended: bool = False


@dataclass(slots=True)
class ExecutionTrack:
    """One execution's root span and its steps."""

    span: Span
    execution_id: str
    started_at: float
    step_count: int
    last_at: float
    steps: dict[str, StepTrack] = field(default_factory=dict)
    step_statuses: dict[str, str] = field(default_factory=dict)
    descriptions: dict[str, str] = field(default_factory=dict)

"""A lossless JSON Lines form of executor events: one event per line, read back as equal records.

This module is THE event codec: the event log, the store's spool (`event_fields`) and bundles
all turn events into JSON-able dicts, and back, here.

Each line is a JSON object whose `kind` names the event class (`executor.events`). Fields typed
`bytes` are written as `{"$bytes_b64": "<base64>"}`, fields typed as tuples as JSON arrays, and
a decision (`policy.Decision`) as `Decision.to_dict()`; all come back as they were. Every other
field must already be JSON-able, which the executor guarantees. A file may start with a header
line `{"kind": "event_log", "version": 1}`.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import os
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from executor import events as event_types
from executor.events import Event
from executor.policy import Decision

EVENT_LOG_VERSION = 1
HEADER_KIND = "event_log"
BYTES_KEY = "$bytes_b64"

EVENT_CLASSES: dict[str, type] = {
    cls.__dataclass_fields__["kind"].default: cls for cls in typing.get_args(event_types.Event)
}


class EventLogError(ValueError):
    """An event or event-log line that cannot be encoded or decoded; the message says where."""


def _field_kinds(cls: type) -> dict[str, str]:
    """Field name → "bytes", "tuple", "decision" or "plain", from the dataclass annotations."""
    hints = typing.get_type_hints(cls, vars(event_types))
    kinds = {}
    for name, hint in hints.items():
        union = typing.get_origin(hint) in (typing.Union, types.UnionType)
        options = typing.get_args(hint) if union else (hint,)
        if bytes in options:
            kinds[name] = "bytes"
        elif Decision in options:
            kinds[name] = "decision"
        elif any(option is tuple or typing.get_origin(option) is tuple for option in options):
            kinds[name] = "tuple"
        else:
            kinds[name] = "plain"
    return kinds


_FIELD_KINDS = {kind: _field_kinds(cls) for kind, cls in EVENT_CLASSES.items()}


@functools.cache
def _kept_fields(kind: str, omit: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(name, field kind) of each field of `kind` but `kind` itself and those in `omit`."""
    skipped = {"kind", *omit}
    return tuple(item for item in _FIELD_KINDS[kind].items() if item[0] not in skipped)


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def event_fields(event: Event, *, omit: Iterable[str] = ()) -> dict[str, Any]:
    """The fields of one event but `kind`, as JSON-able values, in field order.

    Bytes are written as `{"$bytes_b64": ...}`, tuples as lists and a decision as its dict;
    fields named in `omit` are left out (the store keeps bodies beside the payload). Raises
    EventLogError for an object that is not an executor event.
    """
    kind = getattr(event, "kind", None)
    if kind not in EVENT_CLASSES or type(event) is not EVENT_CLASSES[kind]:
        raise EventLogError(
            f"not an executor event: {type(event).__name__} (expected one of "
            f"{', '.join(cls.__name__ for cls in EVENT_CLASSES.values())})"
        )
    data: dict[str, Any] = {}
    for name, field_kind in _kept_fields(kind, tuple(omit)):
        value = getattr(event, name)
        if field_kind == "bytes" and isinstance(value, bytes | bytearray | memoryview):
            value = {BYTES_KEY: base64.b64encode(bytes(value)).decode("ascii")}
        elif field_kind == "tuple" and isinstance(value, tuple):
            value = list(value)
        elif field_kind == "decision" and isinstance(value, Decision):
            value = value.to_dict()
        data[name] = value
    return data


def event_to_dict(event: Event) -> dict[str, Any]:
    """The JSON-able dict of one event; raises EventLogError for a value JSON cannot hold."""
    fields_of_event = event_fields(event)
    data: dict[str, Any] = {"kind": event.kind, **fields_of_event}
    try:
        json.dumps(data, allow_nan=True)
    except (TypeError, ValueError) as error:
        raise EventLogError(
            f"{event.kind}: a field holds a value JSON cannot represent: {error}"
        ) from error
    return data


def event_from_dict(data: Mapping[str, Any]) -> Event:
    """The event `data` describes (as written by `event_to_dict`); raises EventLogError."""
    if not isinstance(data, Mapping):
        raise EventLogError(f"expected a JSON object, got {_describe(data)}")
    kind = data.get("kind")
    if kind not in EVENT_CLASSES:
        raise EventLogError(
            f"unknown event kind {_describe(kind)} (expected one of: {', '.join(EVENT_CLASSES)})"
        )
    cls = EVENT_CLASSES[kind]
    field_kinds = _FIELD_KINDS[kind]
    unknown = sorted(set(data) - set(field_kinds))
    if unknown:
        raise EventLogError(f"{kind}: unknown field {unknown[0]!r}")
    values: dict[str, Any] = {}
    for spec in fields(cls):
        name = spec.name
        if name == "kind":
            continue
        if name not in data:
            if spec.default is MISSING and spec.default_factory is MISSING:
                raise EventLogError(f"{kind}: missing field {name!r}")
            continue
        values[name] = _decoded_field(kind, name, field_kinds[name], data[name])
    return cls(**values)


def _decoded_field(kind: str, name: str, field_kind: str, value: Any) -> Any:
    if field_kind == "decision":
        try:
            return Decision.from_dict(value)
        except ValueError as error:
            raise EventLogError(f"{kind}.{name}: {error}") from error
    if field_kind == "bytes":
        if value is None:
            return None
        if not (
            isinstance(value, Mapping)
            and set(value) == {BYTES_KEY}
            and isinstance(value[BYTES_KEY], str)
        ):
            raise EventLogError(
                f"{kind}.{name}: expected {{{BYTES_KEY!r}: <base64 text>}}, got {_describe(value)}"
            )
        try:
            return base64.b64decode(value[BYTES_KEY], validate=True)
        except (binascii.Error, ValueError) as error:
            raise EventLogError(f"{kind}.{name}: invalid base64: {error}") from error
    if field_kind == "tuple":
        if value is None:
            return None
        if not isinstance(value, list):
            raise EventLogError(f"{kind}.{name}: expected a JSON array, got {_describe(value)}")
        return tuple(value)
    return value


def _line(data: Mapping[str, Any]) -> str:
    """One compact JSON line; non-ASCII stays as is unless it cannot be UTF-8 (lone surrogates)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=True)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(data, ensure_ascii=True, separators=(",", ":"), allow_nan=True)
    return text


def write_event_log(path: str | os.PathLike[str], events: Iterable[Event]) -> Path:
    """Write `events` as an event log at `path` (a header line, then one line per event).

    The file is written beside its final name and renamed into place, so a reader never sees half
    of it. Returns the path.
    """
    target = Path(path)
    lines = [_line({"kind": HEADER_KIND, "version": EVENT_LOG_VERSION})]
    for index, event in enumerate(events):
        try:
            lines.append(_line(event_to_dict(event)))
        except EventLogError as error:
            raise EventLogError(f"{target}: event {index}: {error}") from error
    partial = target.with_name(target.name + ".partial")
    partial.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(partial, target)
    return target


def read_event_log(path: str | os.PathLike[str]) -> list[Event]:
    """The events of the event log at `path`, in order; errors name the file and the line."""
    source = Path(path)
    try:
        content = source.read_bytes()
    except OSError as error:
        raise EventLogError(
            f"{source}: cannot read the event log: {error.strerror or error}"
        ) from error
    events: list[Event] = []
    for number, raw_line in enumerate(content.split(b"\n"), start=1):
        if not raw_line.strip():
            continue
        where = f"{source}:{number}"
        try:
            text = raw_line.decode("utf-8")
        except UnicodeDecodeError as error:
            raise EventLogError(
                f"{where}: not UTF-8 text (invalid byte 0x{raw_line[error.start]:02x})"
            ) from error
        try:
            data = json.loads(text)
        except ValueError as error:
            raise EventLogError(f"{where}: invalid JSON: {error}") from error
        if isinstance(data, dict) and data.get("kind") == HEADER_KIND:
            _check_header(where, data, first=not events)
            continue
        try:
            events.append(event_from_dict(data))
        except EventLogError as error:
            raise EventLogError(f"{where}: {error}") from error
        except TypeError as error:
            raise EventLogError(f"{where}: {error}") from error
    return events


def _check_header(where: str, header: Mapping[str, Any], *, first: bool) -> None:
    if not first:
        raise EventLogError(f"{where}: the event_log header may only be the first line")
    version = header.get("version")
    if version != EVENT_LOG_VERSION:
        raise EventLogError(
            f"{where}: event log version {_describe(version)} is not supported "
            f"(this truva-console reads version {EVENT_LOG_VERSION})"
        )

"""JSON-able dicts of frozen dataclasses, generated from their field types, and back.

`to_jsonable(obj)` writes every field: enums as their values, tuples and frozensets as lists,
mappings as (shallow) dicts, nested dataclasses as nested dicts. `from_jsonable(cls, data)`
reads that form back into an equal record, filling absent fields with their defaults, and
raises ValueError naming the field for an unknown key or a value of the wrong type.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import types
import typing
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, Self, TypeVar

T = TypeVar("T")

_UNION_ORIGINS = (typing.Union, types.UnionType)


@cache
def field_types(cls: type) -> dict[str, Any]:
    """Field name → resolved type hint, in declaration order, for the dataclass `cls`."""
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    return {item.name: hints[item.name] for item in dataclasses.fields(cls)}


_SCALARS = frozenset({str, int, float, bool, type(None)})


def to_jsonable(obj: Any) -> dict[str, Any]:
    """Every field of the dataclass instance `obj` as JSON-able values, in field order."""
    out: dict[str, Any] = {}
    for name, encode in _field_encoders(type(obj)):
        value = getattr(obj, name)
        out[name] = value if type(value) in _SCALARS else encode(value)
    return out


@cache
def _field_encoders(cls: type) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    """One encoder per field of `cls`, chosen once from its type hint (decisions are recorded
    at every attempt and re-decided by the million: no per-value type dispatch)."""
    return tuple((name, _encoder(hint)) for name, hint in field_types(cls).items())


@cache
def _encoder(hint: Any) -> Callable[[Any], Any]:
    options = _options(hint)
    if len(options) != 1:
        return _encode_any
    (kind,) = options
    origin = typing.get_origin(kind) or kind
    if isinstance(origin, type) and issubclass(origin, enum.Enum):
        return _encode_enum
    if isinstance(origin, type) and dataclasses.is_dataclass(origin):
        return _encode_record
    if origin in (tuple, list, frozenset, set):
        item = _encoder(_item_hint(kind))
        if origin in (frozenset, set):
            return lambda value: None if value is None else [
                item(member) for member in sorted(value, key=repr)
            ]
        return lambda value: None if value is None else [item(member) for member in value]
    if origin in (bool, int, float, str):
        return _encode_plain
    return _encode_any


def _encode_enum(value: Any) -> Any:
    return None if value is None else value.value


def _encode_record(value: Any) -> Any:
    return None if value is None else to_jsonable(value)


def _encode_plain(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def _encode_any(value: Any) -> Any:
    """Any value, dispatched on its runtime type (fields typed `Any` or with several types)."""
    if value is None:
        return None
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(value)
    if isinstance(value, tuple | list | frozenset | set):
        items = sorted(value, key=repr) if isinstance(value, frozenset | set) else value
        return [_encode_any(item) for item in items]
    if isinstance(value, Mapping):
        # Values are JSON already (parameters, headers): copied shallowly, so a deeply nested
        # value cannot exhaust the recursion limit here.
        return dict(value)
    return value


def _item_hint(hint: Any) -> Any:
    """The element type of a tuple/frozenset hint (`tuple[X, ...]`), else Any."""
    for option in _options(hint):
        args = typing.get_args(option)
        if args:
            return args[0]
    return Any


def _options(hint: Any) -> tuple[Any, ...]:
    if typing.get_origin(hint) in _UNION_ORIGINS:
        return tuple(arg for arg in typing.get_args(hint) if arg is not type(None))
    return (hint,)


def from_jsonable(cls: type[T], data: Mapping[str, Any], *, where: str | None = None) -> T:
    """The `cls` record `data` describes (as written by `to_jsonable`); raises ValueError."""
    label = where or cls.__name__
    if not isinstance(data, Mapping):
        raise ValueError(f"{label}: expected a JSON object, got {_describe(data)}")
    decoders = _field_decoders(cls)
    values: dict[str, Any] = {}
    for key, value in data.items():
        entry = decoders.get(key)
        if entry is None:
            raise ValueError(
                f"{label}: unknown field {key!r} (expected one of: {', '.join(decoders)})"
            )
        exact, decode = entry
        values[key] = value if type(value) in exact else decode(value, f"{label}.{key}")
    try:
        return cls(**values)
    except TypeError as error:
        raise ValueError(f"{label}: {error}") from error


@cache
def _field_decoders(cls: type) -> dict[str, tuple[frozenset[type], Callable[[Any, str], Any]]]:
    """Per field: the JSON types that need no conversion, and the decoder for the rest, chosen
    once from the field's type hint."""
    return {name: _decoder(hint) for name, hint in field_types(cls).items()}


_NONE = type(None)


@cache
def _decoder(hint: Any) -> tuple[frozenset[type], Callable[[Any, str], Any]]:
    def decode(value: Any, where: str) -> Any:
        return _decode(value, hint, where)

    options = _options(hint)
    if len(options) != 1 or options[0] is Any:
        return frozenset(), decode
    origin = typing.get_origin(options[0]) or options[0]
    exact: set[type] = {_NONE} if type(None) in typing.get_args(hint) else set()
    if origin in (bool, str, int):
        exact.add(origin)
    elif origin is float:
        exact.update((float, int))  # an integral JSON number is a valid float and stays an int
    elif origin in (Mapping, dict):
        return frozenset(exact), _decode_mapping
    elif isinstance(origin, type) and issubclass(origin, enum.Enum):
        return frozenset(exact), _enum_decoder(origin, decode)
    elif isinstance(origin, type) and dataclasses.is_dataclass(origin):
        return frozenset(exact), _record_decoder(origin, decode)
    elif origin in (tuple, frozenset) and _item_hint(options[0]) in (str, int, bool):
        return frozenset(exact), _array_decoder(origin, _item_hint(options[0]), decode)
    return frozenset(exact), decode


# Compiled decoders for the common shapes: the usual value is converted directly; anything else
# goes through `_decode`, which gives the same value or the same error.
def _enum_decoder(kind: type[enum.Enum], decode: Callable[[Any, str], Any]) -> Callable:
    def decode_enum(value: Any, where: str) -> Any:
        try:
            return kind(value)
        except ValueError:
            return decode(value, where)

    return decode_enum


def _record_decoder(kind: type, decode: Callable[[Any, str], Any]) -> Callable:
    def decode_record(value: Any, where: str) -> Any:
        if value is None:
            return decode(value, where)
        return from_jsonable(kind, value, where=where)

    return decode_record


def _array_decoder(
    origin: type, item: type, decode: Callable[[Any, str], Any]
) -> Callable[[Any, str], Any]:
    def decode_array(value: Any, where: str) -> Any:
        if type(value) is list and all(type(member) is item for member in value):
            return origin(value)
        return decode(value, where)

    return decode_array


def _decode_mapping(value: Any, where: str) -> Any:
    if value is None:
        raise ValueError(f"{where}: expected a JSON object, got null")
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected a JSON object, got {_describe(value)}")
    return dict(value)


def _decode(value: Any, hint: Any, where: str) -> Any:
    if value is None:
        if hint is Any or type(None) in typing.get_args(hint):
            return None
        raise ValueError(f"{where}: expected {_hint_name(hint)}, got null")
    options = _options(hint)
    if len(options) != 1:
        return value
    (kind,) = options
    origin = typing.get_origin(kind) or kind
    if kind is Any:
        return value
    if isinstance(origin, type) and issubclass(origin, enum.Enum):
        try:
            return origin(value)
        except ValueError as error:
            choices = ", ".join(str(member.value) for member in origin)
            raise ValueError(
                f"{where}: {_describe(value)} is not one of: {choices}"
            ) from error
    if dataclasses.is_dataclass(origin):
        return from_jsonable(origin, value, where=where)
    if origin in (tuple, frozenset):
        if not isinstance(value, list | tuple):
            raise ValueError(f"{where}: expected a JSON array, got {_describe(value)}")
        item_hint = _item_hint(kind)
        items = (_decode(item, item_hint, f"{where}[{i}]") for i, item in enumerate(value))
        return origin(items)
    if origin in (Mapping, dict):
        if not isinstance(value, Mapping):
            raise ValueError(f"{where}: expected a JSON object, got {_describe(value)}")
        return dict(value)
    if origin is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{where}: expected true or false, got {_describe(value)}")
        return value
    if origin is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{where}: expected an integer, got {_describe(value)}")
        return value
    if origin is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{where}: expected a number, got {_describe(value)}")
        return value
    if origin is str:
        if not isinstance(value, str):
            raise ValueError(f"{where}: expected a string, got {_describe(value)}")
        return value
    return value


def _hint_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint)


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class JsonRecord:
    """`to_dict()` and `from_dict()` for a frozen dataclass, generated from its fields.

    `from_dict` fills absent fields with their defaults and raises ValueError naming an unknown
    key or a value of the wrong type.
    """

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON-able values (`to_jsonable`)."""
        return to_jsonable(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The record `to_dict` wrote (`from_jsonable`)."""
        return from_jsonable(cls, data)

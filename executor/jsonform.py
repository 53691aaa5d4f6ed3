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
from collections.abc import Mapping
from functools import cache
from typing import Any, Self, TypeVar

T = TypeVar("T")

_UNION_ORIGINS = (typing.Union, types.UnionType)


@cache
def field_types(cls: type) -> dict[str, Any]:
    """Field name → resolved type hint, in declaration order, for the dataclass `cls`."""
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    return {item.name: hints[item.name] for item in dataclasses.fields(cls)}


def to_jsonable(obj: Any) -> dict[str, Any]:
    """Every field of the dataclass instance `obj` as JSON-able values, in field order."""
    return {
        name: _encode(getattr(obj, name), hint) for name, hint in field_types(type(obj)).items()
    }


def _encode(value: Any, hint: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(value)
    if isinstance(value, tuple | list | frozenset | set):
        item_hint = _item_hint(hint)
        items = sorted(value, key=repr) if isinstance(value, frozenset | set) else value
        return [_encode(item, item_hint) for item in items]
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
    hints = field_types(cls)
    unknown = [key for key in data if key not in hints]
    if unknown:
        raise ValueError(
            f"{label}: unknown field {unknown[0]!r} (expected one of: {', '.join(hints)})"
        )
    values = {
        name: _decode(data[name], hint, f"{label}.{name}")
        for name, hint in hints.items()
        if name in data
    }
    try:
        return cls(**values)
    except TypeError as error:
        raise ValueError(f"{label}: {error}") from error


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

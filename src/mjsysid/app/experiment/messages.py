"""The schema's findings told in the house's words: ``<file>: <key path> must be <expected>,
got <type> <value>``, ``<key path> is required (<what>)`` and ``<mapping> has unknown keys
[...]; allowed: [...]; did you mean 'max_iters' for 'max_iter'?``.

A validation error of pydantic names its place as a tuple (``("sequences", 0, "file")``,
with the member of a union in between); :func:`_spot` walks it through the models and the
file's own data to the key path, the type expected there and its :class:`~.nodes.Must`
words. One message is told: the first mistake in the file's order, with every unknown or
missing key of the same mapping.
"""

from __future__ import annotations

import difflib
import types
import typing
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal, get_args, get_origin

import annotated_types as at
from pydantic import BaseModel, Tag, ValidationError
from pydantic.fields import FieldInfo

from mjsysid.app.experiment.nodes import ExperimentError, Must, type_name
from mjsysid.util.errors import short_repr, yaml_number
from mjsysid.util.files import describe_yaml

_MISSING = object()  # the file has no value at this place
_VALUE_ERRORS = frozenset(  # the value has the right type, but is not allowed
    "greater_than greater_than_equal less_than less_than_equal finite_number too_short "
    "too_long string_pattern_mismatch literal_error nan".split()
)


@dataclass(frozen=True)
class _Spot:
    """A place in the file: its key path, the type expected there (``Annotated`` and
    ``None`` taken off), what it must be, its constraints and the file's value there."""

    path: str
    tp: Any
    must: Must
    meta: tuple[Any, ...]
    raw: Any
    whole: _Spot | None = None  # the enclosing key that tells mistakes as its own
    union: _Spot | None = None  # the union whose member this is


def _where(path: str, key: str | int) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))


def _unwrap(tp: Any, must: Must, meta: tuple[Any, ...]) -> tuple[Any, Must, tuple[Any, ...]]:
    """``tp`` without ``Annotated`` and ``| None``; outer words win over inner ones."""
    while True:
        if get_origin(tp) is Annotated:
            tp, *extras = get_args(tp)
            must = _words(extras).merged(must)
            for m in extras:
                meta += tuple(m.metadata) if isinstance(m, FieldInfo) else (m,)
            continue
        members = _members(tp)
        if members is None or len(members) != 1:
            return tp, must, meta
        tp = members[0]


def _words(metadata: Any) -> Must:
    """The :class:`Must` words of one ``Annotated`` (flattened: later ones are outer)."""
    must = Must()
    for m in metadata:
        if isinstance(m, Must):
            must = must.merged(m)
    return must


def _members(tp: Any) -> list[Any] | None:
    """The members of a union other than ``None`` (``None``: not a union), each without its
    ``Tag`` wrapper (a union told apart by a function)."""
    if get_origin(tp) in (typing.Union, types.UnionType):
        return [_bare(a) for a in get_args(tp) if a is not type(None)]
    return None


def _bare(tp: Any) -> Any:
    """A tagged member without its ``Tag`` wrapper (other members as they are)."""
    return get_args(tp)[0] if _tag_of(tp) is not None else tp


def _tag_of(tp: Any) -> str | None:
    """The ``Tag`` of a member of a union told apart by a function (``None``: none)."""
    if get_origin(tp) is Annotated:
        for m in tp.__metadata__:
            if isinstance(m, Tag):
                return m.tag
    return None


def _spot_at(path: str, tp: Any, metadata: tuple[Any, ...], raw: Any, parent: _Spot) -> _Spot:
    """The place at ``path`` of a value of type ``tp`` (with a field's ``metadata``)."""
    tp, must, meta = _unwrap(tp, _words(metadata), tuple(metadata))
    spot = _Spot(path, tp, must, meta, raw, parent.whole)
    return replace(spot, whole=spot) if must.whole and spot.whole is None else spot


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _by_alias(model: type[BaseModel]) -> dict[str, tuple[str, FieldInfo]]:
    return {(f.alias or name): (name, f) for name, f in model.model_fields.items()}


def _item(raw: Any, key: Any) -> Any:
    if isinstance(raw, dict):
        return raw.get(key, _MISSING)
    if isinstance(raw, list) and isinstance(key, int) and 0 <= key < len(raw):
        return raw[key]
    return _MISSING


def _step(spot: _Spot, seg: Any) -> _Spot | None:
    """The place ``seg`` leads to from ``spot`` (``None``: a key the mapping does not
    have); a union's member is a place of its own, at the same path."""
    tp = spot.tp
    if _is_model(tp):
        named = _by_alias(tp).get(seg)
        if named is None:
            return None
        f = named[1]
        return _spot_at(
            _where(spot.path, seg), f.annotation, tuple(f.metadata), _item(spot.raw, seg), spot
        )
    origin, args = get_origin(tp), get_args(tp)
    if origin is list:
        return _spot_at(_where(spot.path, seg), args[0], (), _item(spot.raw, seg), spot)
    if origin is dict:
        if seg == "[key]":
            return replace(spot, tp=args[0], must=Must("text"), meta=())
        return _spot_at(_where(spot.path, str(seg)), args[1], (), _item(spot.raw, seg), spot)
    members = _members(tp) or []
    member = _tagged(tp, seg) if _discriminated(tp) else _by_kind(members, spot.raw)
    if member is None:
        return None
    inner = _spot_at(spot.path, member, (), spot.raw, spot)
    return replace(inner, union=spot)


def _discriminated(tp: Any) -> bool:
    """A union of models (told apart by a ``Literal`` key, ``kind`` or ``law``)."""
    return all(_is_model(m) for m in _members(tp) or [None])


def _tagged(tp: Any, tag: Any) -> Any:
    """The member of a discriminated union tagged ``tag``, or whose ``Literal`` field holds
    it."""
    for a in get_args(tp):
        if _tag_of(a) == tag:
            return _bare(a)
    for m in _members(tp) or []:
        for f in m.model_fields.values():
            if get_origin(f.annotation) is Literal and tag in get_args(f.annotation):
                return m
    return None


def _tags(tp: Any, key: str) -> list[Any]:
    """The values of a discriminated union's ``key``, sorted."""
    tags: list[Any] = []
    for m in _members(tp) or []:
        f = _by_alias(m).get(key)
        if f is not None and get_origin(f[1].annotation) is Literal:
            tags += get_args(f[1].annotation)
    return sorted(tags)


def _kind(value: Any) -> str:
    """What a YAML value is: a mapping, a list, text, a number or a bool."""
    for kind, types_ in (("bool", bool), ("number", int | float), ("mapping", dict)):
        if isinstance(value, types_):
            return kind
    return "list" if isinstance(value, list) else ("text" if isinstance(value, str) else "other")


def _accepts(tp: Any) -> set[str]:
    tp = _unwrap(tp, Must(), ())[0]
    if _is_model(tp) or get_origin(tp) is dict:
        return {"mapping"}
    if get_origin(tp) is list:
        return {"list"}
    if get_origin(tp) is Literal:
        return {_kind(v) for v in get_args(tp)}
    kinds: dict[Any, set[str]] = {float: {"number"}, int: {"number"}, bool: {"bool"}}
    return kinds.get(tp, {"text"} if tp is str else set())


def _by_kind(members: list[Any], raw: Any) -> Any:
    """The member of a union that takes values of ``raw``'s kind (a mapping, a list, ...)."""
    found = [m for m in members if _kind(raw) in _accepts(m)]
    return found[0] if len(found) == 1 else None


def _spot(
    root: type[BaseModel], data: Any, loc: tuple[Any, ...], member: bool = False
) -> tuple[_Spot, bool]:
    """The place ``loc`` names, and whether the error is one member's of a union there
    (the value is not of that member's type: the union's own mistake; with ``member``, the
    member's place is returned all the same)."""
    spot = _Spot("", root, Must("a mapping"), (), data)
    for k, seg in enumerate(loc):
        nxt = _step(spot, seg)
        if nxt is None:
            return spot, False
        spot = nxt
        last = k == len(loc) - 1 and not member
        if last and spot.union is not None and not _discriminated(spot.union.tp):
            return spot.union, True
    return spot, False


@dataclass(frozen=True)
class _Mistake:
    """One error told: ``text``, or an unknown/missing ``key`` of the mapping at ``path``
    (those of one mapping are told together)."""

    path: str
    text: str = ""
    unknown: str | None = None
    missing: str | None = None
    allowed: tuple[str, ...] = ()
    union: bool = False


def _num(x: Any) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _said_by_type(spot: _Spot) -> str:
    tp = spot.tp
    if _is_model(tp) or get_origin(tp) is dict:
        return "a mapping"
    if get_origin(tp) is list:
        return "a list"
    if get_origin(tp) is Literal:
        return f"one of {list(get_args(tp))}"
    if _discriminated(tp):
        return "a mapping"
    if _members(tp):
        return " or ".join(
            _said_by_type(_spot_at(spot.path, m, (), spot.raw, spot)) for m in _members(tp) or []
        )
    return {float: "a number", int: "int", bool: "bool", str: "str"}.get(tp, "valid")


def _said_by_constraints(spot: _Spot) -> str:
    finite = any(isinstance(m, at.Predicate) for m in spot.meta) or any(
        getattr(m, "allow_inf_nan", True) is False for m in spot.meta
    )
    word = "an integer" if spot.tp is int else ("a finite number" if finite else "a number")
    lo: list[tuple[Any, str]] = [(m.gt, "(") for m in spot.meta if isinstance(m, at.Gt)]
    lo += [(m.ge, "[") for m in spot.meta if isinstance(m, at.Ge)]
    hi: list[tuple[Any, str]] = [(m.lt, ")") for m in spot.meta if isinstance(m, at.Lt)]
    hi += [(m.le, "]") for m in spot.meta if isinstance(m, at.Le)]
    if lo and hi:
        return f"{word} in {lo[0][1]}{_num(lo[0][0])}, {_num(hi[0][0])}{hi[0][1]}"
    if lo:
        return f"{word} {'>' if lo[0][1] == '(' else '>='} {_num(lo[0][0])}"
    if hi:
        return f"{word} {'<' if hi[0][1] == ')' else '<='} {_num(hi[0][0])}"
    return word


def _got(value: Any, spot: _Spot) -> str:
    if spot.tp is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)  # as the file's number is used
    return f"{type_name(value)} {short_repr(value)}"


def _yaml_hint(value: Any, spot: _Spot) -> str:
    if spot.tp is float and isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return ""
        return f" (YAML reads {value} as text: write {yaml_number(value)})"
    return ""


def _told(error: dict[str, Any], root: type[BaseModel], data: Any) -> _Mistake:
    """One pydantic error as a :class:`_Mistake`."""
    kind, loc, ctx = error["type"], tuple(error["loc"]), error.get("ctx") or {}
    if kind == "extra_forbidden":
        spot, _ = _spot(root, data, loc[:-1], member=True)
        allowed = tuple(_by_alias(spot.tp)) if _is_model(spot.tp) else ()
        return _Mistake(spot.path, unknown=str(loc[-1]), allowed=allowed)
    # a value of a union member's type but not allowed: the member's words tell it best
    spot, union = _spot(root, data, loc, member=kind in _VALUE_ERRORS - {"literal_error"})
    if kind == "missing":
        said = spot.must.required or spot.must.type or _said_by_type(spot)
        return _Mistake(spot.path.rpartition(".")[0], missing=f"{spot.path} is required ({said})")
    if kind == "said":
        return _Mistake(spot.path, ctx["text"].replace("{path}", spot.path))
    if kind == "mistake":
        where = _where(spot.path, ctx["key"])
        return _Mistake(where, f"{where} must be {ctx['expected']}, got {_got(ctx['got'], spot)}")
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        return _told_tag(kind, spot, str(ctx.get("discriminator", "")).strip("'"))
    return _told_value(error, spot, union)


def _told_tag(kind: str, spot: _Spot, key: str) -> _Mistake:
    """A discriminated union's key (``kind``, ``law``) missing or not one of its values."""
    where, said = _where(spot.path, key), f"one of {_tags(spot.tp, key)}"
    if kind == "union_tag_not_found":
        return _Mistake(spot.path, missing=f"{where} is required ({said})")
    return _Mistake(where, f"{where} must be {said}, got {_got(_item(spot.raw, key), spot)}")


def _told_value(error: dict[str, Any], spot: _Spot, union: bool) -> _Mistake:
    """A value of the wrong type, or of the right type but not allowed."""
    kind, value = error["type"], error.get("input")
    if spot.whole is not None:
        spot, union = spot.whole, True
    if union:
        value = spot.raw
    if kind == "too_short" and value == []:
        return _Mistake(spot.path, f"{spot.path} must be a non-empty list, got an empty list")
    said: str | None
    if kind in _VALUE_ERRORS or union:
        said = spot.must.value or spot.must.type
        if said is None and kind == "literal_error":
            said = str((error.get("ctx") or {}).get("expected"))
        said = said or _said_by_constraints(spot)
    else:
        said = (spot.must.type or _said_by_type(spot)) + _yaml_hint(value, spot)
    if spot.path:
        text = f"{spot.path} must be {said}, got {_got(value, spot)}"
    else:  # the whole file: told in words, never echoed (it may be any file)
        got = "nothing" if value is None else f"{type_name(value)} ({describe_yaml(value)})"
        text = f"the file must be {said}, got {got}"
    return _Mistake(spot.path, text, union=union)


def _shadowed(m: _Mistake, others: list[_Mistake]) -> bool:
    """A union's mistake is dropped when one of its members finds a deeper one."""
    return m.union and any(
        not o.union and (o.path == m.path or o.path.startswith((m.path + ".", m.path + "[")))
        for o in others
    )


def _keys_text(path: str, mistakes: list[_Mistake]) -> str:
    """The missing and unknown keys of the mapping at ``path``, in one message."""
    missing = [m.missing for m in mistakes if m.missing]
    unknown = sorted({m.unknown for m in mistakes if m.unknown is not None})
    parts = list(dict.fromkeys(missing))
    if unknown:
        known = sorted(next(m.allowed for m in mistakes if m.unknown is not None))
        close = {k: c for k in unknown if (c := difflib.get_close_matches(k, known, 1))}
        hint = "".join(f"; did you mean {c[0]!r} for {k!r}?" for k, c in close.items())
        parts.append(f"{path or 'top level'} has unknown keys {unknown}; allowed: {known}{hint}")
    return "; ".join(parts)


def schema_error(
    e: ValidationError, root: type[BaseModel], data: Any, source: str
) -> ExperimentError:
    """The first mistake ``e`` reports, as an :class:`ExperimentError` naming its key path."""
    mistakes = [_told(dict(err), root, data) for err in e.errors(include_url=False)]
    kept = [m for m in mistakes if not _shadowed(m, mistakes)] or mistakes
    first = kept[0]
    if first.text:
        return ExperimentError(f"{source}: {first.text}")
    same = [m for m in kept if not m.text and m.path == first.path]
    return ExperimentError(f"{source}: {_keys_text(first.path, same)}")

"""Column layouts of the :class:`~mjsysid.data.timeseries.TimeSeries` factories.

A layout is a list of ``(name, SignalType, width)`` in column order; :func:`consecutive_mapping`
turns it into a signal mapping that lays the signals out side by side from column 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import mujoco
import numpy as np

from mjsysid.data.signals import SignalType, _find, _names, _resolve_plain, _width
from mjsysid.data.timeseries_files import SignalMapping
from mjsysid.util.errors import must_be

Layout = list[tuple[str, SignalType, int]]


def unnamed_error(what: str, i: int, detail: str, arg: str) -> ValueError:
    """The error for an unnamed sensor/actuator met while mapping every one by default."""
    return ValueError(
        f"{what} {i}{detail} must have a name to be mapped by default, got an unnamed one; "
        f"name every {what} in the MJCF or pass {arg}=[...] explicitly"
    )


def _explicit_pair(
    model: mujoco.MjModel, item: Any, allowed: tuple[SignalType, ...]
) -> tuple[str, SignalType, int]:
    """Canonical name, type and object id of an explicit ``(name, SignalType)`` pair."""
    name, kind = item
    if not isinstance(kind, SignalType):
        raise TypeError(must_be(f"signal type of {name!r}", "a SignalType", kind))
    if kind not in allowed:
        raise ValueError(
            must_be(
                f"signal type of {name!r}",
                f"one of {[k.name for k in allowed]}",
                kind.name,
                "use TimeSeries.from_custom_map for CustomObs"
                if kind is SignalType.CustomObs
                else "",
            )
        )
    canonical, oid = _find(model, name, kind)
    return canonical, kind, oid


def _resolve_item(
    model: mujoco.MjModel,
    item: Any,
    allowed: tuple[SignalType, ...],
    plain_kind: SignalType | None,
) -> tuple[str, SignalType, int]:
    """Canonical name, type and object id of one entry of ``names``."""
    if isinstance(item, str):
        if plain_kind is None:
            return _resolve_plain(model, item)
        canonical, oid = _find(model, item, plain_kind)
        return canonical, plain_kind, oid
    if isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str):
        return _explicit_pair(model, item, allowed)
    raise TypeError(must_be("each name", "a string or a (name, SignalType) pair", item))


def model_layout(
    model: mujoco.MjModel,
    names: Iterable[str | tuple[str, SignalType]],
    allowed: tuple[SignalType, ...],
    plain_kind: SignalType | None,
) -> Layout:
    """``(canonical name, type, width)`` of each requested signal, in order.

    Args:
      model: Compiled model.
      names: Plain names (resolved by ``resolve_signal_name``, or as ``plain_kind``) or
        ``(name, SignalType)`` pairs; a single string is one name.
      allowed: Types an explicit pair may have.
      plain_kind: Type of every plain name, or ``None`` to resolve each.
    """
    if isinstance(names, str):
        names = [names]
    layout: Layout = []
    seen: dict[str, Any] = {}
    for item in names:
        canonical, kind, oid = _resolve_item(model, item, allowed, plain_kind)
        if canonical in seen:
            first, first_kind = seen[canonical]
            clash = (
                f"; the {first_kind.name} and the {kind.name} signal share the mapping key "
                f"{canonical!r}, so they cannot be in one series (put them in two series, or "
                "rename the sensor)"
                if first_kind is not kind
                else ""
            )
            raise ValueError(
                f"names must name each signal once, got {canonical!r} twice "
                f"(from {first!r} and {item!r}){clash}"
            )
        seen[canonical] = (item, kind)
        layout.append((canonical, kind, _width(model, kind, oid)))
    return layout


def sensor_layout(model: mujoco.MjModel) -> Layout:
    """Every sensor of ``model`` in model order (each must have a name)."""
    sensors = _names(model, mujoco.mjtObj.mjOBJ_SENSOR, model.nsensor)
    for i, s in enumerate(sensors):
        if not s:
            kind = mujoco.mjtSensor(int(model.sensor_type[i])).name
            raise unnamed_error("sensor", i, f" (type {kind})", "names")
    return [(s, SignalType.MjSensor, int(model.sensor_dim[i])) for i, s in enumerate(sensors)]


def control_layout(model: mujoco.MjModel) -> Layout:
    """Every actuator's control ``"<actuator>_ctrl"`` in model order (each must have a name)."""
    acts = _names(model, mujoco.mjtObj.mjOBJ_ACTUATOR, model.nu)
    for i, a in enumerate(acts):
        if not a:
            raise unnamed_error("actuator", i, "", "names")
    return [(f"{a}_ctrl", SignalType.MjCtrl, 1) for a in acts]


def _custom_item(item: Any) -> tuple[str, SignalType, int]:
    """``(name, type, width)`` of one entry of ``from_custom_map``'s ``signals``."""
    kind = SignalType.CustomObs
    if isinstance(item, str):
        name, width = item, 1
    elif isinstance(item, (tuple, list)) and len(item) == 2:
        name, width = item
    elif isinstance(item, (tuple, list)) and len(item) == 3 and isinstance(item[2], SignalType):
        name, width, kind = item
    else:
        raise TypeError(
            must_be(
                "each signal",
                "a name or a (name, width) pair or a (name, width, SignalType) triple",
                item,
            )
        )
    if not isinstance(name, str) or not name:
        raise TypeError(must_be("signal name", "a non-empty string", name))
    if isinstance(width, bool) or not isinstance(width, (int, np.integer)) or width < 1:
        raise ValueError(must_be(f"width of {name!r}", "a positive integer", width))
    return name, kind, int(width)


def custom_layout(signals: Iterable[Any]) -> Layout:
    """The layout of ``from_custom_map``: names (width 1), ``(name, width)`` pairs (CustomObs)
    or ``(name, width, SignalType)`` triples (any type, as ``mujoco.sysid`` takes them)."""
    if isinstance(signals, str):
        signals = [signals]
    layout: Layout = []
    seen: set[str] = set()
    for item in signals:
        name, kind, width = _custom_item(item)
        if name in seen:
            raise ValueError(f"signals must name each signal once, got {name!r} twice")
        seen.add(name)
        layout.append((name, kind, width))
    return layout


def consecutive_mapping(layout: Sequence[tuple[str, SignalType, int]]) -> SignalMapping:
    """Mapping that lays ``(name, type, width)`` signals out side by side from column 0."""
    out: SignalMapping = {}
    start = 0
    for name, kind, width in layout:
        idx = np.arange(start, start + width, dtype=np.intp)
        idx.flags.writeable = False
        out[name] = (kind, idx)
        start += width
    return out


def check_layout_width(ncols: int, layout: Sequence[tuple[str, SignalType, int]]) -> None:
    """Checks that the data has as many columns (``ncols``) as the layout's total width.

    The message lists each signal's width, a control under its actuator's name.
    """
    total = sum(w for _, _, w in layout)
    if ncols != total:
        suffix = "_ctrl"
        parts = [
            f"{n[: -len(suffix)] if k is SignalType.MjCtrl and n.endswith(suffix) else n}:{w}"
            for n, k, w in layout[:12]
        ]
        if len(layout) > 12:
            parts.append(f"... {len(layout) - 12} more")
        raise ValueError(
            f"data must have {total} columns ({', '.join(parts)}), got {ncols} (Total width "
            f"of signals ({total}) does not match data columns ({ncols}))"
        )

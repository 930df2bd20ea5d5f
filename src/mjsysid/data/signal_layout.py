"""Column layouts of the :class:`~mjsysid.data.timeseries.TimeSeries` factories.

A layout is a list of ``(name, SignalType, width)`` in column order; :func:`consecutive_mapping`
turns it into a signal mapping that lays the signals out side by side from column 0.

Signal mappings of a whole model: every sensor, every state entry, every control.

These are the mappings ``mujoco.sysid`` builds for a rollout (``TimeSeries.compute_all_*``):

* sensors: ``{sensor: (MjSensor, sensor_adr + arange(sensor_dim))}``, indices into
  ``sensordata``;
* states: indices into the stacked vector ``[qpos | qvel | act]`` (no time entry): a joint's
  ``"<joint>_qpos"`` (free 7, ball 4, hinge/slide 1 entries) and ``"<joint>_qvel"`` (6/3/1,
  offset by ``nq``), an actuator's activation ``"<actuator>_act"`` (offset by ``nq + nv``);
* controls: ``"<actuator>_ctrl"``: ``[actuator id]``, indices into ``ctrl``.

A free joint is keyed by its **body**'s name (also when the joint has a name of its own), as
``mujoco.sysid`` does; a body without a name falls back to the joint's name. Unnamed sensors,
joints and actuators have no key and are left out (their entries are simply not mapped).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import mujoco
import numpy as np

from mjsysid.data.signals import (
    QPOS_WIDTH,
    QVEL_WIDTH,
    SignalNameError,
    SignalType,
    find_signal,
    object_names,
    preview_names,
    resolve_plain_name,
    signal_width,
    unknown_signal,
)
from mjsysid.data.timeseries_files import SignalMapping
from mjsysid.util.errors import must_be

__all__ = [
    "compute_all_control_mapping",
    "compute_all_sensor_mapping",
    "compute_all_state_mappings",
    "state_entries",
]

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
    canonical, oid = find_signal(model, name, kind)
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
            return resolve_plain_name(model, item)
        canonical, oid = find_signal(model, item, plain_kind)
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
        layout.append((canonical, kind, signal_width(model, kind, oid)))
    return layout


def sensor_layout(model: mujoco.MjModel) -> Layout:
    """Every sensor of ``model`` in model order (each must have a name)."""
    sensors = object_names(model, mujoco.mjtObj.mjOBJ_SENSOR, model.nsensor)
    for i, s in enumerate(sensors):
        if not s:
            kind = mujoco.mjtSensor(int(model.sensor_type[i])).name
            raise unnamed_error("sensor", i, f" (type {kind})", "names")
    return [(s, SignalType.MjSensor, int(model.sensor_dim[i])) for i, s in enumerate(sensors)]


def control_layout(model: mujoco.MjModel) -> Layout:
    """Every actuator's control ``"<actuator>_ctrl"`` in model order (each must have a name)."""
    acts = object_names(model, mujoco.mjtObj.mjOBJ_ACTUATOR, model.nu)
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


_FREE = int(mujoco.mjtJoint.mjJNT_FREE)


def _block(start: int, width: int) -> np.ndarray:
    idx = np.arange(start, start + width, dtype=np.intp)
    idx.flags.writeable = False
    return idx


def joint_key_names(model: mujoco.MjModel) -> list[str]:
    """The name each joint's state is keyed by (``""`` for none), in joint order.

    The joint's name, except for a free joint: its body's name (the joint's name when the
    body has none).
    """
    joints = object_names(model, mujoco.mjtObj.mjOBJ_JOINT, model.njnt)
    bodies = object_names(model, mujoco.mjtObj.mjOBJ_BODY, model.nbody)
    out = []
    for j, jname in enumerate(joints):
        body = bodies[int(model.jnt_bodyid[j])]
        out.append((body or jname) if int(model.jnt_type[j]) == _FREE else jname)
    return out


def _add(out: SignalMapping, key: str, kind: SignalType, idx: np.ndarray) -> None:
    if key in out:
        raise ValueError(
            f"state names must be unique, got {key!r} twice (a free joint is keyed by its "
            "body's name: rename the body or the other joint)"
        )
    out[key] = (kind, idx)


def compute_all_state_mappings(
    model: mujoco.MjModel,
) -> tuple[SignalMapping, SignalMapping, SignalMapping, SignalMapping]:
    """``(qpos, qvel, act, ctrl)`` mappings of every named joint and actuator of ``model``.

    qpos/qvel/act indices point into ``[qpos | qvel | act]`` (length ``nq + nv + na``); ctrl
    indices into ``ctrl`` (see the module docstring for the names).
    """
    qpos: SignalMapping = {}
    qvel: SignalMapping = {}
    for j, base in enumerate(joint_key_names(model)):
        if not base:
            continue
        jtype = int(model.jnt_type[j])
        adr, dof = int(model.jnt_qposadr[j]), int(model.jnt_dofadr[j])
        _add(qpos, f"{base}_qpos", SignalType.MjStateQPos, _block(adr, QPOS_WIDTH[jtype]))
        _add(
            qvel, f"{base}_qvel", SignalType.MjStateQVel, _block(model.nq + dof, QVEL_WIDTH[jtype])
        )
    act: SignalMapping = {}
    for a, name in enumerate(object_names(model, mujoco.mjtObj.mjOBJ_ACTUATOR, model.nu)):
        if name and int(model.actuator_actadr[a]) >= 0:
            start = model.nq + model.nv + int(model.actuator_actadr[a])
            act[f"{name}_act"] = (
                SignalType.MjStateAct,
                _block(start, int(model.actuator_actnum[a])),
            )
    return qpos, qvel, act, compute_all_control_mapping(model)


def compute_all_sensor_mapping(model: mujoco.MjModel) -> SignalMapping:
    """``{sensor: (MjSensor, indices into sensordata)}`` of every named sensor, model order."""
    out: SignalMapping = {}
    for i, name in enumerate(object_names(model, mujoco.mjtObj.mjOBJ_SENSOR, model.nsensor)):
        if name:
            idx = _block(int(model.sensor_adr[i]), int(model.sensor_dim[i]))
            out[name] = (SignalType.MjSensor, idx)
    return out


def compute_all_control_mapping(model: mujoco.MjModel) -> SignalMapping:
    """``{"<actuator>_ctrl": (MjCtrl, [actuator id])}`` of every named actuator."""
    out: SignalMapping = {}
    for i, name in enumerate(object_names(model, mujoco.mjtObj.mjOBJ_ACTUATOR, model.nu)):
        if name:
            out[f"{name}_ctrl"] = (SignalType.MjCtrl, _block(i, 1))
    return out


def _free_joint_by_body(model: mujoco.MjModel, name: str, suffix: str) -> int:
    """Id of the free joint keyed ``name`` (``"<body>"`` or ``"<body><suffix>"``), else -1."""
    base = name[: -len(suffix)] if name.endswith(suffix) else name
    for j, key in enumerate(joint_key_names(model)):
        if key == base and int(model.jnt_type[j]) == _FREE:
            return j
    return -1


def state_entries(model: mujoco.MjModel, name: str, kind: SignalType) -> tuple[int, int]:
    """``(start, width)`` of a named state inside ``qpos``, ``qvel`` or ``act``.

    Args:
      model: Compiled model.
      name: For ``MjStateQPos``/``MjStateQVel``: a joint name, ``"<joint>_qpos"`` /
        ``"<joint>_qvel"``, or for a free joint its body's name (with or without the suffix,
        the key of :func:`compute_all_state_mappings`). For ``MjStateAct``: an actuator name
        or ``"<actuator>_act"``.
      kind: ``MjStateQPos``, ``MjStateQVel`` or ``MjStateAct``.

    Raises:
      KeyError: Unknown name (the message lists the known keys).
      ValueError: ``MjStateAct`` for an actuator without activation state.
    """
    if kind is SignalType.MjStateAct:
        _, aid = find_signal(model, name, kind)
        return int(model.actuator_actadr[aid]), int(model.actuator_actnum[aid])
    suffix = "_qpos" if kind is SignalType.MjStateQPos else "_qvel"
    try:
        _, jid = find_signal(model, name, kind)
    except SignalNameError:
        jid = _free_joint_by_body(model, name, suffix) if isinstance(name, str) else -1
        if jid < 0:
            keys = [k + suffix for k in joint_key_names(model) if k]
            raise unknown_signal("state", name, keys, f"(known: {preview_names(keys)})") from None
    jtype = int(model.jnt_type[jid])
    if kind is SignalType.MjStateQPos:
        return int(model.jnt_qposadr[jid]), QPOS_WIDTH[jtype]
    return int(model.jnt_dofadr[jid]), QVEL_WIDTH[jtype]

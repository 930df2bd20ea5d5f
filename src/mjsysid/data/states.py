"""The full-physics state vector: its layout and initial states.

A state is MuJoCo's ``mjSTATE_FULLPHYSICS`` vector (time, qpos, qvel, act, ...), the start of
every rollout and of every recorded sequence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.data.signal_layout import state_entries
from mjsysid.data.signals import SignalType
from mjsysid.util.errors import must_be, require_model

STATE_SPEC = mujoco.mjtState.mjSTATE_FULLPHYSICS


def state_size(model: mujoco.MjModel) -> int:
    """Length of the full-physics state vector (time, qpos, qvel, act, ...)."""
    return int(mujoco.mj_stateSize(model, STATE_SPEC.value))


def state_slices(model: mujoco.MjModel) -> dict[str, slice]:
    """Where ``time``, ``qpos``, ``qvel`` and ``act`` sit inside the full-physics state."""
    out, start = {}, 0
    for key, bit in (
        ("time", mujoco.mjtState.mjSTATE_TIME),
        ("qpos", mujoco.mjtState.mjSTATE_QPOS),
        ("qvel", mujoco.mjtState.mjSTATE_QVEL),
        ("act", mujoco.mjtState.mjSTATE_ACT),
    ):
        n = int(mujoco.mj_stateSize(model, bit.value))
        out[key] = slice(start, start + n)
        start += n
    return out


def full_physics_columns(model: mujoco.MjModel) -> np.ndarray:
    """``(nstate,)`` columns of ``mjSTATE_FULLPHYSICS`` in a ``Batch``'s state row
    (``mjSTATE_INTEGRATION``: every component in bit order)."""
    cols, offset = [], 0
    for bit in (1 << i for i in range(15)):
        size = mujoco.mj_stateSize(model, bit)
        if int(STATE_SPEC) & bit:
            cols.append(np.arange(offset, offset + size))
        offset += size
    return np.concatenate(cols).astype(np.intp)


_KIND = {
    "qpos": SignalType.MjStateQPos,
    "qvel": SignalType.MjStateQVel,
    "act": SignalType.MjStateAct,
}
_OWNER = {"qpos": "joint", "qvel": "joint", "act": "actuator"}


def _named_block(model: mujoco.MjModel, field: str, name: Any) -> tuple[int, int]:
    """``(start, width)`` of a ``{name: values}`` key in ``qpos``/``qvel``/``act``."""
    try:
        return state_entries(model, name, _KIND[field])
    except KeyError:
        obj = mujoco.mjtObj.mjOBJ_JOINT if field != "act" else mujoco.mjtObj.mjOBJ_ACTUATOR
        count = model.njnt if field != "act" else model.nu
        known = [mujoco.mj_id2name(model, obj, k) for k in range(count)]
        raise KeyError(
            f"{field}: the model has no {_OWNER[field]} named {name!r}; known: {known}"
        ) from None


def _from_mapping(
    model: mujoco.MjModel, field: str, values: Mapping[str, npt.ArrayLike], out: np.ndarray
) -> None:
    """Writes ``{name: values}`` into ``out`` (qpos, qvel or act), in place."""
    for name, v in values.items():
        adr, width = _named_block(model, field, name)
        arr = np.asarray(v, dtype=np.float64).reshape(-1)
        if arr.size != width:
            raise ValueError(must_be(f"{field}[{name!r}]", f"{width} values", arr))
        out[adr : adr + width] = arr


def _from_names(
    model: mujoco.MjModel, field: str, values: npt.ArrayLike, names: Any, out: np.ndarray
) -> None:
    """Writes the entries of the named states, side by side in ``values``, into ``out``."""
    if isinstance(names, str):
        names = [names]
    blocks = [(n, *state_entries(model, n, _KIND[field])) for n in names]
    total = sum(w for _, _, w in blocks)
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    if arr.size != total:
        parts = ", ".join(f"{n}:{w}" for n, _, w in blocks[:12])
        raise ValueError(
            must_be(
                field,
                f"an array of length {total} ({parts})",
                arr,
                f"Length of {field} and the entries of {field}_names must match",
            )
        )
    start = 0
    for _, adr, width in blocks:
        out[adr : adr + width] = arr[start : start + width]
        start += width


def _state_values(
    model: mujoco.MjModel,
    field: str,
    values: npt.ArrayLike | Mapping[str, npt.ArrayLike],
    names: Any,
    base: np.ndarray,
) -> np.ndarray:
    """``base`` (qpos0 or zeros) with ``values`` written in: a full vector, a ``{name:
    values}`` mapping, or the entries of ``names`` side by side."""
    out = base.copy()
    if names is not None:
        if isinstance(values, Mapping):
            raise TypeError(
                must_be(field, f"an array when {field}_names is given", type(values).__name__)
            )
        _from_names(model, field, values, names, out)
    elif isinstance(values, Mapping):
        _from_mapping(model, field, values, out)
    else:
        arr = np.asarray(values, dtype=np.float64).reshape(-1)
        if arr.size != base.size:
            raise ValueError(must_be(field, f"an array of length {base.size}", arr))
        out[:] = arr
    if not np.all(np.isfinite(out)):
        i = int(np.flatnonzero(~np.isfinite(out))[0])
        raise ValueError(f"{field} must be finite, got {field}[{i}]={float(out[i])!r}")
    return out


def create_initial_state(
    model: mujoco.MjModel,
    qpos: npt.ArrayLike | Mapping[str, npt.ArrayLike] | None = None,
    qvel: npt.ArrayLike | Mapping[str, npt.ArrayLike] | None = None,
    act: npt.ArrayLike | Mapping[str, npt.ArrayLike] | None = None,
    qpos_names: Sequence[str] | None = None,
    qvel_names: Sequence[str] | None = None,
    act_names: Sequence[str] | None = None,
    *,
    time: float = 0.0,
) -> np.ndarray:
    """Packs a full-physics state vector (``mjSTATE_FULLPHYSICS``) for a rollout.

    Each of ``qpos``, ``qvel`` and ``act`` is one of: the full vector (``(nq,)``, ``(nv,)``,
    ``(na,)``); a ``{name: values}`` mapping for a subset; or, with ``*_names``, the entries
    of the named states side by side (``mujoco.sysid``'s form). A name is a joint name,
    ``"<joint>_qpos"``/``"<joint>_qvel"`` (a free joint also by its body's name, the key of
    ``TimeSeries.compute_all_state_mappings``), or an actuator name / ``"<actuator>_act"``;
    it takes all entries of its joint (free 7/6, ball 4/3), where ``mujoco.sysid`` accepts
    one entry per name only. Entries not given keep ``model.qpos0`` / zeros.

    Args:
      model: The compiled model.
      qpos: Positions. Default ``qpos0``.
      qvel: Velocities (rad/s, m/s). Default zeros.
      act: Actuator activations. Default zeros.
      qpos_names: Names of the states ``qpos`` holds, in order.
      qvel_names: Names of the states ``qvel`` holds, in order.
      act_names: Names of the activations ``act`` holds, in order.
      time: Simulation time of the state (s).

    Returns:
      ``(nstate,)`` state vector.

    Raises:
      ValueError: A wrong length (with names: the message names each entry's width and says
        ``Length``), or non-finite values.
      KeyError: An unknown name.
    """
    require_model(model)
    data = mujoco.MjData(model)
    if qpos is not None:
        data.qpos[:] = _state_values(model, "qpos", qpos, qpos_names, model.qpos0)
    if qvel is not None:
        data.qvel[:] = _state_values(model, "qvel", qvel, qvel_names, np.zeros(model.nv))
    if act is not None:
        data.act[:] = _state_values(model, "act", act, act_names, np.zeros(model.na))
    if not np.isfinite(time):
        raise ValueError(must_be("time", "finite", time))
    data.time = float(time)
    state = np.empty(state_size(model))
    mujoco.mj_getState(model, data, state, STATE_SPEC.value)
    return state

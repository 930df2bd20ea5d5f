"""The full-physics state vector: its layout and initial states.

A state is MuJoCo's ``mjSTATE_FULLPHYSICS`` vector (time, qpos, qvel, act, ...), the start of
every rollout and of every recorded sequence.
"""

from __future__ import annotations

from collections.abc import Mapping

import mujoco
import numpy as np
import numpy.typing as npt

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


def _joint_values(
    model: mujoco.MjModel,
    field: str,
    values: npt.ArrayLike | Mapping[str, npt.ArrayLike],
    base: np.ndarray,
) -> np.ndarray:
    """Fills ``base`` (qpos or qvel) from a full vector or a ``{joint_name: value}`` mapping."""
    out = base.copy()
    if isinstance(values, Mapping):
        for jname, v in values.items():
            j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, jname)
            if j < 0:
                known = [model.joint(k).name for k in range(model.njnt)]
                raise KeyError(f"{field}: the model has no joint named {jname!r}; known: {known}")
            jtype = int(model.jnt_type[j])
            if field == "qpos":
                adr, width = int(model.jnt_qposadr[j]), {0: 7, 1: 4}.get(jtype, 1)
            else:
                adr, width = int(model.jnt_dofadr[j]), {0: 6, 1: 3}.get(jtype, 1)
            arr = np.asarray(v, dtype=np.float64).reshape(-1)
            if arr.size != width:
                raise ValueError(must_be(f"{field}[{jname!r}]", f"{width} values", arr))
            out[adr : adr + width] = arr
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
    act: npt.ArrayLike | None = None,
    *,
    time: float = 0.0,
) -> np.ndarray:
    """Packs a full-physics state vector (``mjSTATE_FULLPHYSICS``) for a rollout.

    Args:
      model: The compiled model.
      qpos: ``(nq,)`` positions, or ``{joint_name: values}`` for a subset (others keep
        ``model.qpos0``). Default ``qpos0``.
      qvel: ``(nv,)`` velocities (rad/s, m/s) or ``{joint_name: values}``. Default zeros.
      act: ``(na,)`` actuator activations. Default zeros.
      time: Simulation time of the state (s).

    Returns:
      ``(nstate,)`` state vector.
    """
    require_model(model)
    data = mujoco.MjData(model)
    data.qpos[:] = _joint_values(model, "qpos", model.qpos0 if qpos is None else qpos, model.qpos0)
    if qvel is not None:
        data.qvel[:] = _joint_values(model, "qvel", qvel, np.zeros(model.nv))
    if act is not None:
        data.act[:] = _joint_values(model, "act", act, np.zeros(model.na))
    if not np.isfinite(time):
        raise ValueError(must_be("time", "finite", time))
    data.time = float(time)
    state = np.empty(state_size(model))
    mujoco.mj_getState(model, data, state, STATE_SPEC.value)
    return state

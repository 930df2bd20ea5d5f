"""Initial states as parameters of the fit.

A simulation that starts from a measured (noisy) state carries that error through the whole
sequence. :func:`initial_state_params` makes the initial joint positions, velocities and
actuator activations of chosen sequences parameters of the fit (they need no recompile and
cost no extra rollouts: the rollout simply starts from the candidate state);
:func:`initial_state_overrides` gives the residual function the candidate start of each
sequence.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import mujoco
import numpy as np

from mjsysid.data.sequences import ModelSequences
from mjsysid.data.states import state_slices
from mjsysid.params.parameter import Parameter, ParameterDict
from mjsysid.util.errors import must_be

INITIAL_KINDS = ("initial_qpos", "initial_qvel", "initial_act")


def _scalar_joints(model: mujoco.MjModel, joints: Iterable[str] | None) -> list[int]:
    ok = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    if joints is None:
        return [j for j in range(model.njnt) if int(model.jnt_type[j]) in ok]
    out = []
    for name in joints:
        j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
        if j < 0:
            known = [model.joint(k).name for k in range(model.njnt)]
            raise KeyError(f"joints: the model has no joint named {name!r}; known: {known}")
        if int(model.jnt_type[j]) not in ok:
            raise ValueError(
                must_be(f"joints: {name!r}", "a hinge or slide joint", "a free or ball joint")
            )
        out.append(j)
    return out


def initial_state_params(
    models_sequences: ModelSequences | Sequence[ModelSequences],
    *,
    sequences: Iterable[str] | None = None,
    joints: Iterable[str] | None = None,
    qpos: bool = True,
    qvel: bool = True,
    qpos_margin: float = 0.2,
    qvel_margin: float = 2.0,
    act: bool | None = None,
    act_margin: float = 1.0,
) -> ParameterDict:
    """Parameters for the initial joint positions/velocities (and actuator activations) of
    recorded sequences.

    Args:
      models_sequences: Where the sequences live.
      sequences: Sequence names to include (default all).
      joints: Hinge/slide joint names (default all hinge and slide joints).
      qpos, qvel: Which parts of the state to estimate.
      qpos_margin: Bounds are the recorded initial value ± this (rad or m).
      qvel_margin: Same for velocities (rad/s or m/s).
      act: Also the activation of every actuator that has one (filter or integrator
        dynamics; default: when the model has any). A window of :func:`split_windows`
        starts from the activation simulated with the nominal model, which a fitted time
        constant changes.
      act_margin: Bounds for activations: the initial value ± this (actuator units).

    Returns:
      One parameter per sequence, joint and part, named
      ``"<model>/<sequence>/<joint>_qpos0"`` (``_qvel0``), and per actuator with an activation
      ``"<model>/<sequence>/<actuator>_act0"``; nominal = the recorded initial value.
    """
    ms_list = (
        [models_sequences]
        if isinstance(models_sequences, ModelSequences)
        else list(models_sequences)
    )
    wanted = None if sequences is None else set(sequences)
    out = ParameterDict()
    found: set[str] = set()
    for ms in ms_list:
        model = ms.model
        jids = _scalar_joints(model, joints)
        for name, x0, _, _ in ms.sequences():
            if wanted is not None and name not in wanted:
                continue
            found.add(name)
            label = f"{ms.name}/{name}"
            margins = (qpos_margin if qpos else None, qvel_margin if qvel else None)
            for p in _joint_params(model, label, x0, jids, margins):
                out.add(p)
            if model.na if act is None else act:
                for p in _activation_params(model, label, x0, act_margin):
                    out.add(p)
    if wanted is not None and wanted - found:
        raise KeyError(f"sequences {sorted(wanted - found)} are not recorded sequences")
    return out


def _joint_params(
    model: mujoco.MjModel,
    label: str,
    x0: np.ndarray,
    jids: list[int],
    margins: tuple[float | None, float | None],
) -> list[Parameter]:
    """Initial position and velocity parameters of the joints ``jids`` of sequence ``label``
    (initial state ``x0``); ``margins``: of the positions and velocities (``None``: not
    estimated)."""
    slices = state_slices(model)
    out = []
    for j in jids:
        jname = model.joint(j).name
        for part, margin, adr in (
            ("qpos", margins[0], slices["qpos"].start + int(model.jnt_qposadr[j])),
            ("qvel", margins[1], slices["qvel"].start + int(model.jnt_dofadr[j])),
        ):
            if margin is None:
                continue
            v = float(x0[adr])
            out.append(
                Parameter(
                    f"{label}/{jname}_{part}0",
                    v,
                    v - margin,
                    v + margin,
                    meta={"kind": f"initial_{part}", "target": label, "joint": jname},
                )
            )
    return out


def _activation_params(
    model: mujoco.MjModel, label: str, x0: np.ndarray, act_margin: float
) -> list[Parameter]:
    """Initial activation parameters of every actuator with an activation."""
    slices = state_slices(model)
    out = []
    for a in np.flatnonzero(model.actuator_actadr >= 0):
        aname = model.actuator(int(a)).name
        v = float(x0[slices["act"].start + int(model.actuator_actadr[a])])
        out.append(
            Parameter(
                f"{label}/{aname}_act0",
                v,
                v - act_margin,
                v + act_margin,
                meta={"kind": "initial_act", "target": label, "actuator": aname},
            )
        )
    return out


def initial_state_overrides(
    params: ParameterDict, model: mujoco.MjModel, label: str
) -> list[tuple[int, int]]:
    """``(state index, x index)`` pairs: where each initial-state parameter of ``label`` goes."""
    out = []
    slices = state_slices(model)
    i = 0
    for p in params.non_frozen():
        kind = p.meta.get("kind")
        if kind == "initial_act" and p.meta.get("target") == label:
            a = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, p.meta.get("actuator", ""))
            if a < 0 or model.actuator_actadr[a] < 0:
                raise KeyError(
                    f"parameter {p.name!r}: the model has no actuator with an activation named "
                    f"{p.meta.get('actuator')!r}"
                )
            out.append((slices["act"].start + int(model.actuator_actadr[a]), i))
        elif kind in INITIAL_KINDS and p.meta.get("target") == label:
            j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, p.meta.get("joint", ""))
            if j < 0:
                raise KeyError(
                    f"parameter {p.name!r}: the model has no joint named {p.meta.get('joint')!r}"
                )
            if kind == "initial_qpos":
                adr = slices["qpos"].start + int(model.jnt_qposadr[j])
            else:
                adr = slices["qvel"].start + int(model.jnt_dofadr[j])
            out.append((adr, i))
        i += p.size
    return out

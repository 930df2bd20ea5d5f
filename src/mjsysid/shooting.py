"""Initial-state estimation and multiple shooting.

A simulation that starts from a measured (noisy) state carries that error through the whole
sequence, and a long sequence of a sensitive system (a pendulum, a legged robot) drifts away
from the recording even with the right parameters. Two remedies, usable together:

* :func:`initial_state_params` makes the initial joint positions and velocities of chosen
  sequences parameters of the fit (they need no recompile and cost no extra rollouts: the
  rollout simply starts from the candidate state).
* :func:`split_windows` cuts each recording into shorter windows, each simulated from its own
  initial state (multiple shooting). Combined with :func:`initial_state_params` every window's
  start is estimated too; the physical parameters are shared by all windows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import mujoco
import numpy as np

from mjsysid._errors import must_be
from mjsysid.model_sequences import ModelSequences
from mjsysid.parameter import Parameter, ParameterDict
from mjsysid.recording import initial_state_from_sensors
from mjsysid.timeseries import TimeSeries
from mjsysid.trajectory import create_initial_state, state_slices

INITIAL_KINDS = ("initial_qpos", "initial_qvel")


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
) -> ParameterDict:
    """Parameters for the initial joint positions/velocities of recorded sequences.

    Args:
      models_sequences: Where the sequences live.
      sequences: Sequence names to include (default all).
      joints: Hinge/slide joint names (default all hinge and slide joints).
      qpos, qvel: Which parts of the state to estimate.
      qpos_margin: Bounds are the recorded initial value ± this (rad or m).
      qvel_margin: Same for velocities (rad/s or m/s).

    Returns:
      One parameter per sequence, joint and part, named
      ``"<model>/<sequence>/<joint>_qpos0"`` (``_qvel0``), nominal = the recorded initial value.
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
        slices = state_slices(model)
        jids = _scalar_joints(model, joints)
        for name, x0, _, _ in ms.sequences():
            if wanted is not None and name not in wanted:
                continue
            found.add(name)
            label = f"{ms.name}/{name}"
            for j in jids:
                jname = model.joint(j).name
                for part, use, adr, margin in (
                    ("qpos", qpos, slices["qpos"].start + int(model.jnt_qposadr[j]), qpos_margin),
                    ("qvel", qvel, slices["qvel"].start + int(model.jnt_dofadr[j]), qvel_margin),
                ):
                    if not use:
                        continue
                    v = float(x0[adr])
                    out.add(
                        Parameter(
                            f"{label}/{jname}_{part}0",
                            v,
                            v - margin,
                            v + margin,
                            meta={"kind": f"initial_{part}", "target": label, "joint": jname},
                        )
                    )
    if wanted is not None and wanted - found:
        raise KeyError(f"sequences {sorted(wanted - found)} are not recorded sequences")
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
        if kind in INITIAL_KINDS and p.meta.get("target") == label:
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


def split_windows(
    models_sequences: ModelSequences,
    window: float,
    *,
    overlap: float = 0.0,
    min_samples: int = 5,
) -> ModelSequences:
    """Multiple shooting: cuts every sequence into windows of ``window`` seconds.

    Each window becomes a sequence ``"<name>#<k>"`` simulated from the state measured at its
    start (joint positions and velocities from joint sensors or joint-state columns; the first
    window keeps the sequence's own initial state). Add :func:`initial_state_params` for the
    windows to estimate those starts as well.

    Args:
      models_sequences: The recordings.
      window: Window length (s).
      overlap: Overlap between consecutive windows (s), ``0 <= overlap < window``.
      min_samples: A trailing window with fewer samples is merged into the previous one.

    Raises:
      ValueError: Bad lengths, or a window start whose state cannot be read from the data.
    """
    if not window > 0:
        raise ValueError(must_be("window", "> 0 seconds", window))
    if not 0 <= overlap < window:
        raise ValueError(must_be("overlap", f"in [0, window={window})", overlap))
    ms = models_sequences
    model = ms.model
    names, x0s, ctrls, senss = [], [], [], []
    for name, x0, ctrl, meas in ms.sequences():
        t = meas.times
        starts = [t[0]]
        while starts[-1] + window - overlap < t[-1]:
            starts.append(starts[-1] + window - overlap)
        for k, s in enumerate(starts):
            keep = (t >= s - 1e-12) & (t <= s + window + 1e-12)
            if keep.sum() < min_samples:
                continue
            sub = TimeSeries(t[keep], meas.data[keep], meas.signal_mapping)
            if k == 0:
                start_state = x0.copy()
            else:
                qpos, qvel = initial_state_from_sensors(model, sub, fill=np.nan)
                missing = [
                    model.joint(j).name
                    for j in range(model.njnt)
                    if np.isnan(qpos[model.jnt_qposadr[j]]) or np.isnan(qvel[model.jnt_dofadr[j]])
                ]
                if missing:
                    raise ValueError(
                        f"split_windows: sequence {name!r} must measure the position and velocity "
                        f"of every joint to start a window from the data, got none for {missing}; "
                        "record jointpos/jointvel sensors or <joint>_qpos/_qvel columns"
                    )
                start_state = create_initial_state(model, qpos, qvel, time=float(sub.times[0]))
            names.append(f"{name}#{k}")
            x0s.append(start_state)
            ctrls.append(ctrl)
            senss.append(sub)
    return ModelSequences(ms.name, ms.spec, names, x0s, ctrls, senss)

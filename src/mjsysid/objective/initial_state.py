"""Initial states as parameters of the fit.

A simulation that starts from a measured (noisy) state carries that error through the whole
sequence. :func:`initial_state_params` makes the initial joint positions, velocities and
actuator activations of chosen sequences parameters of the fit (they need no recompile and
cost no extra rollouts: the rollout simply starts from the candidate state);
:func:`initial_state_overrides` gives the residual function the candidate start of each
sequence. :func:`law_state_params` does the same for the internal states of force laws (a
filter, a motor current), which no sensor shows: each sequence or shooting window then starts
its laws from estimated values instead of what the law computes from the recorded start.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import mujoco
import numpy as np

from mjsysid.data.sequences import ModelSequences
from mjsysid.data.states import state_slices
from mjsysid.data.timeseries import TimeSeries
from mjsysid.params.parameter import Parameter, ParameterDict
from mjsysid.sim.laws.core import ForceLaw, StepContext, law_values
from mjsysid.util.errors import must_be

#: The kinds of initial-state parameters: each belongs to one sequence (``meta["target"]``).
INITIAL_KINDS = ("initial_qpos", "initial_qvel", "initial_act", "initial_law_state")
#: The kind of a force law's internal-state start (:func:`law_state_params`).
LAW_STATE_KIND = "initial_law_state"


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


def nuisance_mask(params: ParameterDict) -> np.ndarray:
    """``(p,)`` the free entries that are nuisance states, not physics: the initial states
    of recorded sequences and shooting windows (kinds
    :data:`~mjsysid.objective.initial_state.INITIAL_KINDS`). The global stage holds them at
    their start values (the recorded state at each window start); the local fit estimates
    them."""
    if not isinstance(params, ParameterDict):
        raise TypeError(must_be("params", "a ParameterDict", type(params).__name__))
    free = params.non_frozen()
    if not free:
        return np.zeros(0, dtype=bool)
    return np.concatenate([np.full(p.size, p.meta.get("kind") in INITIAL_KINDS) for p in free])


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
        elif kind in INITIAL_KINDS and kind != LAW_STATE_KIND and p.meta.get("target") == label:
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


def law_state_rows(params: ParameterDict, label: str) -> list[tuple[str, str, slice]]:
    """``(law, state, rows of x)`` of each free law-state start of sequence ``label``
    (:func:`law_state_params`)."""
    out = []
    i = 0
    for p in params.non_frozen():
        if p.meta.get("kind") == LAW_STATE_KIND and p.meta.get("target") == label:
            out.append((str(p.meta["law"]), str(p.meta["state"]), slice(i, i + p.size)))
        i += p.size
    return out


def law_state_params(
    models_sequences: ModelSequences | Sequence[ModelSequences],
    laws: Sequence[ForceLaw],
    params: ParameterDict,
    margins: Mapping[str, Mapping[str, float]],
) -> ParameterDict:
    """Parameters for the starts of force laws' internal states in every recorded sequence
    (and shooting window: each is a sequence of :func:`~mjsysid.objective.windows.split_windows`).

    A law's internal state (a filter, a motor current) is not measured. Without these
    parameters every sequence starts it where :meth:`ForceLaw.initial_state` puts it from the
    recorded start (e.g. a filter at rest on the first command); with them the fit estimates
    it, like the window starts of the joints.

    Args:
      models_sequences: The recordings (windows already cut).
      laws: The force laws of the fit.
      params: Holds every law's parameters; their current values give the nominal starts.
      margins: ``{law name: {state: margin}}``: the states to estimate, each within
        ± margin (the state's units) of its nominal start.

    Returns:
      One parameter per sequence, law and state, named ``"<model>/<sequence>/<law>.<state>0"``
      (size: the state's), nominal: what the law's :meth:`~ForceLaw.initial_state` computes
      at the sequence's recorded start with the nominal values (the recorded state, the
      command, inputs and constants there).

    Raises:
      KeyError: ``margins`` names a law or state that does not exist.
      ValueError: A margin is not a positive finite number.
    """
    by_name = {law.name: law for law in laws}
    for lname, states in margins.items():
        if lname not in by_name:
            raise KeyError(f"margins: no force law named {lname!r}; laws: {sorted(by_name)}")
        for sname, margin in states.items():
            if sname not in by_name[lname].states:
                known = sorted(by_name[lname].states)
                raise KeyError(
                    f"margins: force law {lname!r} has no state {sname!r}; its states: {known}"
                )
            if not (isinstance(margin, int | float) and np.isfinite(margin) and margin > 0):
                raise ValueError(
                    must_be(f"margins[{lname!r}][{sname!r}]", "a positive number", margin)
                )
    ms_list = (
        [models_sequences]
        if isinstance(models_sequences, ModelSequences)
        else list(models_sequences)
    )
    out = ParameterDict()
    for ms in ms_list:
        bound = {n: by_name[n].bind(ms.model) for n in margins}
        for si, (name, x0, ctrl, _) in enumerate(ms.sequences()):
            inputs, constants = ms.law_data(si)
            for lname, states in margins.items():
                law = bound[lname]
                ctx = _start_context(ms.model, x0, ctrl, inputs, constants)
                ctx.values = law_values(law, params)
                start = law.initial_state(_own(ctx, law))
                for sname, margin in states.items():
                    v = np.asarray(start[sname], dtype=np.float64).reshape(-1)
                    out.add(
                        Parameter(
                            f"{ms.name}/{name}/{lname}.{sname}0",
                            v,
                            v - margin,
                            v + margin,
                            meta={"kind": LAW_STATE_KIND, "target": f"{ms.name}/{name}",
                                  "law": lname, "state": sname},
                        )
                    )  # fmt: skip
    return out


def _held(series: TimeSeries, t: float) -> np.ndarray:
    """The row of ``series`` held at time ``t`` (the last at or before it; the first before)."""
    k = int(np.searchsorted(series.times, t + 1e-12, side="right")) - 1
    return np.asarray(series.data_2d[max(k, 0)], dtype=np.float64)


def _start_context(
    model: mujoco.MjModel,
    x0: np.ndarray,
    ctrl: TimeSeries | None,
    inputs: TimeSeries | None,
    constants: Mapping[str, float],
) -> StepContext:
    """The :class:`StepContext` of one simulation at its recorded start ``x0`` (all inputs
    and constants; :func:`_own` narrows them to a law's)."""
    sl = state_slices(model)
    t = float(x0[0])
    u = np.zeros(model.nu) if ctrl is None else _held(ctrl, t)[: model.nu]
    row = {} if inputs is None else dict(zip(inputs.names, _held(inputs, t), strict=False))
    return StepContext(
        x0[sl["qpos"]][None].copy(), x0[sl["qvel"]][None].copy(), x0[sl["act"]][None].copy(),
        u[None].copy(), np.zeros((1, model.nv)), np.array([t]), float(model.opt.timestep),
        np.array([True]),
        inputs={k: np.array([v]) for k, v in row.items()},
        constants={k: np.array([float(v)]) for k, v in constants.items()},
    )  # fmt: skip


def _own(ctx: StepContext, law: ForceLaw) -> StepContext:
    """``ctx`` with only the inputs and constants ``law`` declares (a missing one is named)."""
    missing = [
        k for k in (*law.inputs, *law.constants) if k not in ctx.inputs and k not in ctx.constants
    ]
    if missing:
        raise KeyError(f"force law {law.name!r}: the recording gives no {missing} for its start")
    ctx.inputs = {k: ctx.inputs[k] for k in law.inputs}
    ctx.constants = {k: ctx.constants[k] for k in law.constants}
    return ctx

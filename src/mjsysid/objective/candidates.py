"""Rollouts of the distinct simulations of a batch of candidates.

All candidates × sequences of one ModelSequences (of equal length) run in one call of a
persistent multithreaded rollout with reused ``MjData`` (or of a custom rollout).

The compiled model of every candidate: pooled models edited in place, or compiled specs.

Each distinct candidate model is built once per ModelSequences: by writing values into a
pooled model reused between calls (``Parameter.model_modifier`` + ``mj_setConst``, only the
parameters whose values changed) when every active parameter offers that exact fast path,
else by running the spec modifiers on a private working spec and compiling it once.

Distinct simulations of a batch of candidates, and the simulations kept between calls.

Candidates that differ only in entries of ``x`` a sequence's simulation does not read share
one simulation (:func:`distinct_columns`); the simulations of the last small call (a trial
step) are kept (:class:`SimulationCache`) for the next one (the signal-only columns of the
finite-difference Jacobian that follows simulate that very point).

Counters of a residual function (for benchmarks and diagnostics).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import mujoco
import numpy as np

from mjsysid.data.sequences import ModelSequences
from mjsysid.objective.alignment import PreparedSequence
from mjsysid.objective.control_transform import ControlTransform
from mjsysid.objective.initial_state import LAW_STATE_KIND
from mjsysid.objective.layout import Layout, check_law_params
from mjsysid.objective.protocols import BuildModelFn, CustomRolloutFn
from mjsysid.params.apply import (
    WritePlan,
    compile_spec,
    mass_diagonal_index,
    refresh_constants,
    run_modifiers,
)
from mjsysid.params.parameter import Parameter, ParameterDict
from mjsysid.sim.batch import LawRollout
from mjsysid.sim.laws.core import ForceLaw, parameter_name, state_start_key
from mjsysid.sim.lockstep import LawData
from mjsysid.sim.rollout import BatchRollout
from mjsysid.sim.warp import WarpRollout
from mjsysid.util.cache import BoundedCache


@dataclass
class ResidualStats:
    """Counters for benchmarks and diagnostics (cumulative since creation; shared with the
    function's :meth:`~mjsysid.objective.residual.ResidualFunction.head` views). ``steps``:
    simulation steps of all rollouts (a head's rollouts are shorter)."""

    calls: int = 0
    candidates: int = 0
    simulated_candidates: int = 0
    rollouts: int = 0
    steps: int = 0
    compiles: int = 0
    model_edits: int = 0
    time_build: float = 0.0
    time_rollout: float = 0.0
    time_total: float = 0.0


SIM_CACHE = 4
"""Calls with at most this many distinct simulations per sequence keep them for the next."""


class DistinctColumns(NamedTuple):
    """Distinct columns of a matrix (see :func:`distinct_columns`).

    Attributes:
      first: ``(u,)`` index of the first column of each distinct value.
      inverse: ``(k,)`` index into ``first`` of every column.
      keys: The bytes of each distinct column.
    """

    first: np.ndarray
    inverse: np.ndarray
    keys: list[bytes]


Index = int | slice
"""Which simulations of a :class:`SimBatch` (:meth:`SimBatch.row`)."""


class SimBatch(NamedTuple):
    """Simulations of one sequence (leading axis: simulations; one simulation without it).

    Attributes:
      state: ``(u, nstep, nstate)`` raw MuJoCo states (one step ahead; ``None`` where not
        needed), sensordata: ``(u, nstep, nsensordata)``, ok: ``(u,)`` finite,
        x0: ``(u, nstate)`` initial states.
    """

    state: Any
    sensordata: np.ndarray
    ok: np.ndarray
    x0: np.ndarray

    def row(self, u: Index) -> SimBatch:
        """Simulation(s) ``u`` of the batch (views for an integer or a slice)."""
        return SimBatch(_rows(self.state, u), self.sensordata[u], self.ok[u], self.x0[u])


def _rows(a: np.ndarray | None, u: Index) -> np.ndarray | None:
    return None if a is None else a[u]


def distinct_columns(A: np.ndarray) -> DistinctColumns:
    """Distinct columns of ``A (m, k)`` in order of first appearance.

    Returns:
      ``(first, inverse, keys)``: ``(u,)`` index of the first column of each distinct value,
      ``(k,)`` index into ``first`` of every column, so ``A[:, first][:, inverse] == A``, and
      the bytes of each distinct column. Columns that are all distinct give
      ``first == inverse == arange(k)``.
    """
    if A.shape[1] == 1:  # a trial step: the common call, answered without the loop
        return DistinctColumns(np.zeros(1, np.intp), np.zeros(1, np.intp), [A.tobytes()])
    seen: dict[bytes, int] = {}
    first: list[int] = []
    inverse = np.empty(A.shape[1], dtype=np.intp)
    cols = np.ascontiguousarray(A.T)
    for j in range(cols.shape[0]):
        key = cols[j].tobytes()
        u = seen.get(key)
        if u is None:
            u = seen[key] = len(first)
            first.append(j)
        inverse[j] = u
    return DistinctColumns(np.asarray(first, dtype=np.intp), inverse, list(seen))


def sim_rows(
    pred: SimBatch | None,
    run: list[int],
    keys: list[bytes],
    cache: dict[bytes, SimBatch],
) -> list[SimBatch]:
    """Every distinct simulation of one sequence, in order: the ones simulated now (``run``,
    views into ``pred``) and the cached ones."""
    at = {u: j for j, u in enumerate(run)}
    return [
        pred.row(at[u]) if u in at and pred is not None else cache[key]
        for u, key in enumerate(keys)
    ]


def stacked(sims: list[SimBatch], with_state: bool) -> SimBatch:
    """The fields of ``sims`` stacked (new arrays); the states ``None`` unless asked.
    (``np.array`` of a list: the same copy as ``np.stack``, at less cost.)"""
    state = np.array([s[0] for s in sims]) if with_state else None
    sens, ok, x0 = (np.array([s[f] for s in sims]) for f in (1, 2, 3))
    return SimBatch(state, sens, ok, x0)


def _lead(sim: SimBatch, n: int) -> SimBatch:
    """The first ``n`` steps of ``sim`` (views)."""
    state = None if sim.state is None else sim.state[:n]
    return SimBatch(state, sim.sensordata[:n], sim.ok, sim.x0)


@dataclass
class SimulationCache:
    """The distinct simulations of the last small call, per sequence, by simulation key (the
    bytes of the sequence's rows of ``x``), for one parameter structure ``key``."""

    entries: dict[int, dict[bytes, SimBatch]] = field(default_factory=dict)
    key: tuple[object, ...] | None = None

    def clear(self) -> None:
        """Forgets every kept simulation."""
        self.entries = {}
        self.key = None

    def valid_for(self, key: tuple[object, ...] | None) -> dict[int, dict[bytes, SimBatch]]:
        """The kept simulations when they are of structure ``key`` (else none)."""
        return self.entries if self.key == key else {}

    def leading(
        self,
        key: tuple[object, ...] | None,
        wanted: Sequence[Iterable[bytes]],
        nsteps: Sequence[int],
    ) -> dict[int, dict[bytes, SimBatch]]:
        """The kept simulations of structure ``key`` among ``wanted[i]`` (simulation keys of
        sequence ``i``) cut to their first ``nsteps[i]`` steps: what a head of these
        sequences simulates from the same start with the same leading controls (MuJoCo is
        deterministic). Simulations that diverged are left out: their head may not have."""
        out: dict[int, dict[bytes, SimBatch]] = {}
        for i, sims in self.valid_for(key).items():
            cut = {
                k: _lead(sims[k], nsteps[i])
                for k in wanted[i]
                if k in sims and bool(np.all(sims[k].ok))
            }
            if cut:
                out[i] = cut
        return out

    def keep(
        self,
        per_seq: Sequence[DistinctColumns],
        preds: dict[int, SimBatch],
        mixed: dict[int, list[SimBatch]],
        key: tuple[object, ...] | None,
        copy: bool,
    ) -> None:
        """Keeps this call's simulations when every sequence has at most :data:`SIM_CACHE`.

        ``copy``: keep copies (code that may write into the predictions receives them), else
        views of this call's rollout arrays.
        """
        if not all(len(d.first) <= SIM_CACHE for d in per_seq):
            return
        self.entries = {}
        for i, d in enumerate(per_seq):
            sims: Iterable[SimBatch] = mixed.get(i) or [preds[i].row(u) for u in range(len(d.keys))]
            self.entries[i] = {
                k: SimBatch._make(None if a is None else a.copy() for a in sim) if copy else sim
                for k, sim in zip(d.keys, sims, strict=True)
            }
        self.key = key


_CONTROL_BATCHES = 8  # stacked control batches kept (by sequences and width)


def initial_states(
    seq: PreparedSequence, overrides: list[tuple[int, int]], X: np.ndarray
) -> np.ndarray:
    """``(k, nstate)`` initial states of ``seq`` for the columns of ``X`` (``overrides``:
    ``(state index, x index)`` of its initial-state parameters)."""
    x0 = np.repeat(seq.x0[None], X.shape[1], axis=0)
    for adr, row in overrides:
        x0[:, adr] = X[row]
    return x0


class CandidateRollouts:
    """Runs rollout groups; keeps the stacked recorded controls of recent batch shapes.

    Args:
      runner: The persistent rollout (shared with head views).
      custom_rollout: Replaces the built-in rollout.
      control_transform: Applied to the recorded controls of every candidate.
      stats: Counters (``rollouts``, ``steps``).
      force_laws: Applied by a :class:`~mjsysid.sim.batch.LawRollout` (their parameters'
        values per candidate).
      compiled_laws: Its ``compiled`` choice.

    Attributes:
      device: Simulates every group instead of the CPU rollouts (a view from
        :meth:`on_device`); ``None``: the CPU.
    """

    def __init__(
        self,
        runner: BatchRollout,
        custom_rollout: CustomRolloutFn | None,
        control_transform: ControlTransform | None,
        stats: ResidualStats,
        force_laws: Sequence[ForceLaw] = (),
        compiled_laws: bool | None = None,
    ) -> None:
        self.runner = runner
        self.lockstep = LawRollout(runner, force_laws, compiled_laws) if force_laws else None
        self.custom_rollout = custom_rollout
        self.control_transform = control_transform
        self.stats = stats
        self.device: WarpRollout | None = None
        self._devices: dict[str, WarpRollout] = {}  # shared by the views
        self._controls: BoundedCache[tuple[tuple[int, int], ...], np.ndarray]
        self._controls = BoundedCache(_CONTROL_BATCHES)

    def on_device(self, backend: str) -> CandidateRollouts:
        """The same rollouts on ``backend`` (``"warp"``: MuJoCo Warp worlds, the laws run
        between device steps); the device's compiled models are kept for later views."""
        engine = self._devices.get(backend)
        if engine is None:
            laws = self.lockstep.laws if self.lockstep is not None else ()
            engine = self._devices[backend] = WarpRollout(laws)
        out = copy.copy(self)
        out.device = engine
        return out

    def fresh(self) -> CandidateRollouts:
        """The same rollouts without kept controls (for a head view, whose are shorter)."""
        out = copy.copy(self)
        out._controls = BoundedCache(_CONTROL_BATCHES)
        return out

    def run_all(
        self,
        sequences: Sequence[PreparedSequence],
        base_models: Sequence[mujoco.MjModel],
        work: ParameterDict,
        X: np.ndarray,
        layout: Layout,
        col_models: list[list[mujoco.MjModel]],
        sim_cols: list[np.ndarray],
        cand_params: dict[int, ParameterDict],
        read_states: Sequence[bool],
    ) -> dict[int, SimBatch]:
        """Simulates the columns ``sim_cols[i]`` of ``X`` for every sequence ``i`` that has
        some, grouped by (ModelSequences, nstep); returns the batches by sequence.
        ``base_models``: the compiled model of each ModelSequences (for the control
        transform). ``read_states[i]``: sequence ``i``'s states are read (else the built-in
        rollout may leave them out: ``None``)."""
        preds: dict[int, SimBatch] = {}
        for mi, base in enumerate(base_models):
            seqs = [i for i, s in enumerate(sequences) if s.ms_index == mi and sim_cols[i].size]
            for nstep in sorted({sequences[i].nstep for i in seqs}):
                group = [i for i in seqs if sequences[i].nstep == nstep]
                self.run_group(
                    sequences,
                    group,
                    [[col_models[mi][j] for j in sim_cols[i]] for i in group],
                    [
                        initial_states(sequences[i], layout.overrides[i], X[:, sim_cols[i]])
                        for i in group
                    ],
                    [[cand_params[j] for j in sim_cols[i]] if cand_params else [] for i in group],
                    preds,
                    self.transformed_controls(sequences, work, layout, X, sim_cols, group, base),
                    record_states=any(read_states[i] for i in group),
                    law_values=self.candidate_law_values(
                        work,
                        layout,
                        X,
                        [sim_cols[i] for i in group],
                        [sequences[i].label for i in group],
                    ),
                )
        return preds

    def transformed_controls(
        self,
        sequences: Sequence[PreparedSequence],
        work: ParameterDict,
        layout: Layout,
        X: np.ndarray,
        sim_cols: list[np.ndarray],
        group: list[int],
        model: mujoco.MjModel,
    ) -> np.ndarray | None:
        """``(sum of candidates, nstep, nu)`` controls of a rollout group after the control
        transform, candidate by candidate (``None`` without a transform)."""
        ct = self.control_transform
        if ct is None:
            return None
        out = []
        for i in group:
            for j in sim_cols[i]:
                work.assign_checked_vector(X[:, j], layout.free)
                out.append(ct.apply(work, sequences[i].control, model))
        return np.stack(out)

    def candidate_law_values(
        self,
        work: ParameterDict,
        layout: Layout,
        X: np.ndarray,
        cols: list[np.ndarray],
        labels: list[str],
    ) -> list[dict[str, np.ndarray]] | None:
        """Per force law, ``{parameter: (sum of candidates, size)}`` values of the columns
        ``cols[g]`` of ``X`` for the sequences ``labels[g]`` (a frozen parameter's value for
        every candidate), and the starts of its internal states where the sequences have
        some (:func:`~mjsysid.objective.initial_state.law_state_params`; NaN rows: computed
        by the law); ``None`` without laws."""
        if self.lockstep is None:
            return None
        laws = self.lockstep.laws
        check_law_params(laws, work)

        def block(p: Parameter, c: np.ndarray) -> np.ndarray:
            """``(c.size, p.size)``: the values of ``p`` in the columns ``c`` of ``X``."""
            rows = layout.spans.get(p.name)
            return X[rows][:, c].T if rows is not None else np.repeat(p.value[None], c.size, 0)

        flat = np.concatenate(cols)
        out = [
            {k: block(work[parameter_name(law, k)], flat) for k in law.parameters} for law in laws
        ]
        if not any(law.states for law in laws):
            return out
        starts = {
            (str(p.meta["target"]), str(p.meta["law"]), str(p.meta["state"])): p
            for p in work.values()
            if p.meta.get("kind") == LAW_STATE_KIND
        }
        if not starts:
            return out
        first = np.cumsum([0] + [c.size for c in cols])
        for law, vals in zip(laws, out, strict=True):
            for state, size in law.states.items():
                given = np.full((first[-1], size), np.nan)
                for g, label in enumerate(labels):
                    p = starts.get((label, law.name, state))
                    if p is not None:
                        given[first[g] : first[g + 1]] = block(p, cols[g])
                vals[state_start_key(state)] = given
        return out

    def law_data(
        self, sequences: Sequence[PreparedSequence], key: tuple[tuple[int, int], ...]
    ) -> LawData:
        """The laws' recorded inputs, constants and command rows of the rollouts of ``key``
        (``(sequence, candidates)`` pairs), stacked like the controls."""
        assert self.lockstep is not None
        rows = [i for i, n in key for _ in range(n)]
        laws = self.lockstep.laws
        inputs = {
            name: np.stack([sequences[i].law_inputs[name] for i in rows])
            for name in dict.fromkeys(k for law in laws for k in law.inputs)
        }
        constants = {
            name: np.array([sequences[i].law_constants[name] for i in rows])
            for name in dict.fromkeys(k for law in laws for k in law.constants)
        }
        commands = [sequences[i].new_command for i in rows]
        new = None if any(c is None for c in commands) else np.stack(commands)  # type: ignore[arg-type]
        return LawData(inputs, constants, new)

    def _recorded_controls(
        self, sequences: Sequence[PreparedSequence], key: tuple[tuple[int, int], ...]
    ) -> np.ndarray:
        """The stacked recorded controls of ``key`` (``(sequence, candidates)`` pairs); they
        never change: the batch is kept for calls of the same widths."""
        ctrl = self._controls.get(key)
        if ctrl is None:
            ctrl = np.stack([sequences[i].control for i, n in key for _ in range(n)])
            ctrl.flags.writeable = False
            self._controls.put(key, ctrl)
        return ctrl

    def run_group(
        self,
        sequences: Sequence[PreparedSequence],
        group: list[int],
        models: list[list[mujoco.MjModel]],
        x0s: list[np.ndarray],
        cand_params: list[list[ParameterDict]],
        preds: dict[int, SimBatch],
        controls: np.ndarray | None = None,
        *,
        record_states: bool = True,
        law_values: list[dict[str, np.ndarray]] | None = None,
    ) -> None:
        """Simulates, in one call, sequence ``group[g]`` from ``x0s[g]`` with ``models[g]``
        (one per candidate) and stores its :class:`SimBatch` in ``preds``. ``controls``: the
        batch's controls when a control transform made them per candidate (default: each
        sequence's recorded controls). ``law_values``: per force law, its parameters' values
        per candidate (with force laws). ``record_states``: record the states (else the built-in
        rollout leaves them out, ``None``; the other rollouts return them all the same)."""
        counts = [len(m) for m in models]
        batch_models = [m for ms_ in models for m in ms_]
        x0 = np.concatenate(x0s)
        key = tuple(zip(group, counts, strict=True))
        ctrl = self._recorded_controls(sequences, key) if controls is None else controls
        self.stats.rollouts += len(batch_models)
        self.stats.steps += len(batch_models) * ctrl.shape[1]
        state: np.ndarray | None
        if self.custom_rollout is not None:
            state, sensordata, ok = self._custom(batch_models, ctrl, x0, cand_params)
        elif self.device is not None:
            laws = self.lockstep is not None and law_values is not None
            state, sensordata, ok = self.device.run(
                batch_models, x0, ctrl, law_values if laws else None,
                data=self.law_data(sequences, key) if laws else None, align=False,
            )  # fmt: skip
        elif self.lockstep is not None and law_values is not None:
            data = self.law_data(sequences, key)
            state, sensordata, ok = self.lockstep.run(
                batch_models, x0, ctrl, law_values, data=data, align=False
            )
        else:
            state, sensordata, ok = self.runner.run(
                batch_models, x0, ctrl, align=False, record_states=record_states
            )
        start = 0
        for i, n in key:
            sl = slice(start, start + n)
            start += n
            preds[i] = SimBatch(_rows(state, sl), sensordata[sl], ok[sl], x0[sl])

    def _custom(
        self,
        batch_models: list[mujoco.MjModel],
        ctrl: np.ndarray,
        x0: np.ndarray,
        cand_params: list[list[ParameterDict]],
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(state, sensordata, ok)`` of the custom rollout, states shifted like MuJoCo's."""
        assert self.custom_rollout is not None
        datas = self.runner.datas_for(batch_models[0])
        trajs = self.custom_rollout(
            batch_models,
            datas,
            ctrl.copy(),  # the caller's to keep or edit
            x0,
            [p for ps in cand_params for p in ps],
        )
        state = np.stack([t.state_array() for t in trajs])
        sensordata = np.stack([np.asarray(t.sensordata.data) for t in trajs])
        # custom rollouts return aligned states; store them shifted like MuJoCo's
        state = np.concatenate([state[:, 1:], state[:, -1:]], axis=1)
        ok = np.all(np.isfinite(state), axis=(1, 2)) & np.all(np.isfinite(sensordata), axis=(1, 2))
        return state, sensordata, ok


@dataclass
class _Slot:
    """A reusable candidate model and the free-parameter vector it currently holds."""

    model: mujoco.MjModel
    x: np.ndarray | None = None
    key: object = None


class _ModelPool:
    """The compiled-model fast path of one ModelSequences: its base model, the candidate
    models kept between calls (one per slot) and the scratch data of ``mj_setConst``."""

    def __init__(self, base: mujoco.MjModel) -> None:
        self.base = base
        self.slots: list[_Slot] = []
        self.set_const_data = mujoco.MjData(base)
        self.mass_diag = mass_diagonal_index(base)

    def edit(
        self,
        params: ParameterDict,
        slot: int,
        x: np.ndarray,
        layout: Layout,
        plan: WritePlan,
        key: object,
    ) -> mujoco.MjModel:
        """The model of ``slot`` edited to hold ``x`` (``layout.free`` values; ``plan``: the
        base model's elementwise writes): all of them on a new slot or another parameter
        structure ``key``, else only the parameters whose values differ."""
        free = layout.free
        while len(self.slots) <= slot:
            self.slots.append(_Slot(self.base.__copy__()))
        entry = self.slots[slot]
        if entry.x is None or entry.key != key or entry.x.shape != x.shape:
            if entry.x is not None:  # other parameters: start again from the base model, so
                entry.model = self.base.__copy__()  # no value of theirs is left behind
            others = [free[i] for i in plan.other]
        else:
            differs = x != entry.x
            if not differs.any():
                return entry.model
            others = []
            if plan.other:
                hit = np.zeros(len(free), dtype=bool)
                hit[layout.owner[differs]] = True
                others = [free[i] for i in plan.other if hit[i]]
        if others:  # their model_modifiers read the values from params
            params.assign_checked_vector(x, free)
        plan.write(entry.model, x, others)
        refresh_constants(entry.model, self.set_const_data, self.mass_diag)
        entry.x, entry.key = x.copy(), key
        return entry.model


class CandidateModels:
    """Builds the candidate models of a residual function (shared with its head views).

    Args:
      models_sequences: The ModelSequences (their compiled models are the pool's base).
      build_model: A custom ``build_model`` (``None``: the spec modifiers or the fast path).
      fast_model_edits: Allow the compiled-model fast path.
      stats: Counters (``compiles``, ``model_edits``).
    """

    def __init__(
        self,
        models_sequences: Sequence[ModelSequences],
        build_model: BuildModelFn | None,
        fast_model_edits: bool,
        stats: ResidualStats,
    ) -> None:
        self.models_sequences = list(models_sequences)
        self.build_model = build_model
        self.fast_model_edits = fast_model_edits
        self.stats = stats
        self._pools = [_ModelPool(ms.model) for ms in self.models_sequences]

    def for_columns(
        self,
        params: ParameterDict,
        X: np.ndarray,
        layout: Layout,
        key: object,
        specs: list[mujoco.MjSpec],
    ) -> list[list[mujoco.MjModel]]:
        """``[mi][j]``: the model of column ``j`` of ``X`` for ModelSequences ``mi``, one
        built per distinct model sub-vector (``key``: the parameter structure's)."""
        model_first, model_of, _ = distinct_columns(X[layout.model_mask])
        built: list[list[mujoco.MjModel]] = [[] for _ in self.models_sequences]
        for n, j in enumerate(model_first):
            for mi in range(len(self.models_sequences)):
                built[mi].append(self.build(params, mi, n, X[:, j], layout, key, specs))
        return [[built[mi][m] for m in model_of] for mi in range(len(built))]

    def build(
        self,
        params: ParameterDict,
        mi: int,
        slot: int,
        x: np.ndarray,
        layout: Layout,
        key: object,
        specs: list[mujoco.MjSpec],
    ) -> mujoco.MjModel:
        """The model of one candidate (the ``slot``-th distinct one of this call) for ``mi``.

        On the compiled-model fast path each slot keeps its model between calls, together
        with the parameter vector it holds. A new candidate is written in place (less work than
        copying a model): the parameters with an elementwise write (:class:`WritePlan`) all at
        once, the others only where their values differ; then ``mj_setConst``.
        """
        if self.build_model is not None or not (self.fast_model_edits and layout.model_edits):
            params.assign_checked_vector(x, layout.free)
            self.stats.compiles += 1
            if self.build_model is not None:
                return self.build_model(params, specs[mi])
            return compile_spec(run_modifiers(params, specs[mi]), params)
        self.stats.model_edits += 1
        return self._edit(params, mi, slot, x, layout, key)

    def _edit(
        self, params: ParameterDict, mi: int, slot: int, x: np.ndarray, layout: Layout, key: object
    ) -> mujoco.MjModel:
        """The fast path of :meth:`build`: the pooled model of ``slot`` edited to hold ``x``."""
        plan = layout.plans.get(mi)
        if plan is None:  # (its errors quote the parameters' values: this candidate's)
            params.assign_checked_vector(x, layout.free)
            plan = layout.plans[mi] = WritePlan(self.models_sequences[mi].model, layout.free)
        return self._pools[mi].edit(params, slot, x, layout, plan, key)

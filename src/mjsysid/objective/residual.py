"""The batched residual function.

For a parameter vector θ (one column of ``x``) and every recorded sequence, the residual is

    r(θ) = W · (y − ȳ(θ))        (stacked over ModelSequences, sequences, samples, columns)

where ``y`` is the measured data, ``ȳ(θ)`` the simulated prediction linearly interpolated at
the measured times, and ``W`` a diagonal weight: ``sensor_weights[signal] / rms(y column)``
(the RMS of each measured signal over all its columns makes signals of different units
comparable; ``normalize=False`` turns it off). The cost minimised by
:func:`mjsysid.fit.optimize` is ``½‖r‖²``; its value does not
depend on the sign convention.

Evaluation of ``k`` candidates (``x`` of shape ``(p, k)``) is batched:

1. Candidates that differ only in parameters without a model modifier (sensor delay, gain,
   bias, ...) share one simulation: only distinct *physics* sub-vectors are simulated, and
   the simulations of the last small call (a trial step) are kept for the next one (the
   signal-only columns of the Jacobian that follows).
2. Each distinct candidate model is built once per ModelSequences: by writing values into a
   pooled model reused between calls (``Parameter.model_modifier`` + ``mj_setConst``, only the
   parameters whose values changed) when every active parameter offers that exact fast path,
   else by running the spec modifiers on a private working spec and compiling it once.
3. All candidates × sequences of one ModelSequences (of equal length) run in one call of a
   persistent multithreaded rollout with reused ``MjData``.
4. Predictions are gathered and interpolated with index maps precomputed per sequence
   (:mod:`mjsysid.objective.alignment`), vectorised over candidates; a
   :class:`SignalTransform` gets all
   candidates of a sequence in one call.
"""

from __future__ import annotations

import copy
import fnmatch
import time as _time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.data.sequences import ModelSequences
from mjsysid.data.timeseries import TimeSeries
from mjsysid.objective.alignment import (
    PreparedSequence,
    head_samples,
    prepare_sequence,
    sequence_head,
)
from mjsysid.objective.control_transform import ControlTransform
from mjsysid.objective.initial_state import INITIAL_KINDS, initial_state_overrides
from mjsysid.objective.protocols import (
    BuildModelFn,
    CustomRolloutFn,
    ModifyResidualFn,
    batch_modifier,
)
from mjsysid.params.apply import (
    WritePlan,
    apply_param_modifiers,
    compile_spec,
    mass_diagonal_index,
    refresh_constants,
    run_modifiers,
    supports_model_edits,
)
from mjsysid.params.parameter import Parameter, ParameterDict, check_modifiers_present
from mjsysid.sim.rollout import BatchRollout, align_states
from mjsysid.util.errors import must_be


@dataclass
class _Slot:
    """A reusable candidate model and the free-parameter vector it currently holds."""

    model: mujoco.MjModel
    x: np.ndarray | None = None
    key: object = None


@dataclass
class _Layout:
    """What one parameter structure implies, computed once per structure.

    Attributes:
      free: The non-frozen parameters of the private working copy, in vector order.
      owner: ``(p,)`` index into ``free`` of every vector entry.
      model_mask: ``(p,)`` entries that change the model. sim_mask: entries that change the
        simulation (model entries and initial-state entries).
      model_edits: Every active modifier has an exact compiled-model fast path.
      overrides: Per sequence, ``(state index, x index)`` of its initial-state parameters.
      spans: Rows of ``x`` of each non-frozen parameter, by name.
      seq_rows: Per sequence, the rows of ``x`` its simulation depends on: the model and
        control-transform entries and its own initial-state entries (all simulation entries
        with a custom build_model or rollout).
      plans: :class:`WritePlan` per ModelSequences index (made on first use).
    """

    free: list[Parameter]
    owner: np.ndarray
    model_mask: np.ndarray
    sim_mask: np.ndarray
    model_edits: bool
    overrides: list[list[tuple[int, int]]]
    spans: dict[str, slice]
    seq_rows: list[np.ndarray]
    plans: dict[int, WritePlan] = field(default_factory=dict)


def _spans(sizes: list[int]) -> list[slice]:
    """Consecutive slices of the given sizes, from 0."""
    ends = np.cumsum(sizes).tolist()
    return [slice(e - n, e) for n, e in zip(sizes, ends, strict=True)]


_CONTROL_BATCHES = 8  # stacked control batches kept (by sequences and width)
_SIM_CACHE = 4  # calls with at most this many distinct simulations keep them for the next


def _distinct_columns(A: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[bytes]]:
    """Distinct columns of ``A (m, k)`` in order of first appearance.

    Returns:
      ``(first, inverse, keys)``: ``(u,)`` index of the first column of each distinct value,
      ``(k,)`` index into ``first`` of every column, so ``A[:, first][:, inverse] == A``, and
      the bytes of each distinct column. Columns that are all distinct give
      ``first == inverse == arange(k)``.
    """
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
    return np.asarray(first, dtype=np.intp), inverse, list(seen)


_LAYOUT_META = ("kind", "target", "joint", "actuator")
_INERTIAL_KINDS = ("body_mass", "body_mass_ipos", "body_inertia")


def _check_distinct_targets(params: ParameterDict) -> None:
    """Two free parameters must not set the same model quantity (which one wins would depend
    on the order of writes). Signal and control rules may overlap (a later rule overrides)."""
    seen: dict[tuple[str, ...], str] = {}
    for p in params.non_frozen():
        kind, target = p.meta.get("kind"), p.meta.get("target")
        if not isinstance(kind, str) or not isinstance(target, str) or p.modifier is None:
            continue
        what = ("body inertial", target) if kind in _INERTIAL_KINDS else (kind, target)
        other = seen.setdefault(what, p.name)
        if other != p.name:
            raise ValueError(
                f"parameters {other!r} and {p.name!r} both set the {what[0]} of {target!r}: "
                "keep one free (freeze or remove the other)"
            )


@dataclass
class ResidualStats:
    """Counters for benchmarks and diagnostics (cumulative since creation; shared with the
    function's :meth:`~ResidualFunction.head` views). ``steps``: simulation steps of all
    rollouts (a head's rollouts are shorter)."""

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


@dataclass(frozen=True)
class SequencePrediction:
    """Prediction of one sequence for one parameter vector (for plots and reports).

    Attributes:
      model_name, sequence_name: Where it comes from.
      predicted: Prediction on the simulation grid (measured signals only).
      measured: The recording (after enabled_observations).
      predicted_at_measured: The prediction as the residual compares it (for a custom
        residual, what it returned).
      measured_used: The measured series the residual compared against.
      residual: The residual block of this sequence.
      state: Full-physics states on the simulation grid, ``(nstep, nstate)``.
      control: Controls on the simulation grid, ``(nstep, nu)``.
    """

    model_name: str
    sequence_name: str
    predicted: TimeSeries
    measured: TimeSeries
    predicted_at_measured: TimeSeries
    measured_used: TimeSeries
    residual: np.ndarray
    state: np.ndarray
    control: np.ndarray


class ResidualFunction:
    """Callable ``residual_fn(x, params)``; see :func:`build_residual_fn`.

    Attributes:
      models_sequences: The ModelSequences it was built from.
      stats: :class:`ResidualStats` counters.
      last_divergence: Messages about candidates whose simulation diverged in the last call
        (their residual columns are NaN).
    """

    def __init__(
        self,
        models_sequences: Sequence[ModelSequences],
        *,
        modify_residual: ModifyResidualFn | None,
        custom_rollout: CustomRolloutFn | None,
        build_model: BuildModelFn | None,
        sensor_weights: Mapping[str, npt.ArrayLike] | None,
        enabled_observations: Sequence[str] | None,
        normalize: bool | str,
        control_interpolation: str,
        nthread: int | None,
        fast_model_edits: bool,
        control_transform: ControlTransform | None = None,
    ) -> None:
        self.models_sequences = list(models_sequences)
        self.control_transform = control_transform
        if control_transform is not None:
            for ms in self.models_sequences:
                control_transform.validate(ms.model)
        self.modify_residual = modify_residual
        self.custom_rollout = custom_rollout
        self.build_model = build_model
        self.sensor_weights = dict(sensor_weights or {})
        if isinstance(enabled_observations, str):
            raise TypeError(
                must_be(
                    "enabled_observations",
                    "a list of signal names",
                    enabled_observations,
                    f"pass [{enabled_observations!r}]",
                )
            )
        self.enabled_observations = (
            None if enabled_observations is None else list(enabled_observations)
        )
        self.normalize = normalize
        self.control_interpolation = control_interpolation
        self.fast_model_edits = fast_model_edits
        self.stats = ResidualStats()
        self.last_divergence: list[str] = []
        self._work: ParameterDict | None = None
        self._pool: list[list[_Slot]] = [[] for _ in self.models_sequences]
        self._work_key: tuple[object, ...] | None = None
        self._layout: _Layout | None = None
        # per sequence: simulation key (bytes of its rows of x) -> (raw_state, sensordata, ok, x0)
        self._sim_cache: dict[int, dict[bytes, tuple[np.ndarray, ...]]] = {}
        self._sim_cache_key: tuple[object, ...] | None = None
        self._controls: dict[tuple[tuple[int, int], ...], np.ndarray] = {}
        self._runner = BatchRollout(nthread)
        self._work_specs = [ms.spec.copy() for ms in self.models_sequences]
        self._set_const_data = [mujoco.MjData(ms.model) for ms in self.models_sequences]
        self._mass_diag = [mass_diagonal_index(ms.model) for ms in self.models_sequences]
        # A custom residual scales its own: the built-in scale is only computed (and an
        # all-zero signal refused, here rather than at the first call) as a SignalTransform
        # will; another custom residual normalises as it likes.
        transform = batch_modifier(modify_residual)
        own_scale = (
            self.normalize
            if modify_residual is None
            else (transform.normalize if transform is not None else False)
        )
        self._sequences = [
            prepare_sequence(
                self.models_sequences,
                mi,
                si,
                enabled_observations=self.enabled_observations,
                control_interpolation=self.control_interpolation,
                sensor_weights=self.sensor_weights,
                normalize=own_scale,
                custom_residual=self.modify_residual is not None,
            )
            for mi, ms in enumerate(self.models_sequences)
            for si in range(len(ms))
        ]
        self._check_names()
        batched = batch_modifier(modify_residual)
        self._measured_names = list(dict.fromkeys(n for s in self._sequences for n in s.meas.names))
        self._widths = {n: len(s.meas.columns(n)) for s in self._sequences for n in s.meas.names}
        if batched is not None:
            batched.validate_signals(self._measured_names, widths=self._widths)
        # Block starts in the residual; a custom residual's sizes are known after one call.
        sizes = [s.meas.data.size if modify_residual is None else 0 for s in self._sequences]
        self._offsets = np.cumsum([0, *sizes])

    # -- construction -----------------------------------------------------------------------
    def _check_names(self) -> None:
        available = sorted({n for s in self._sequences for n in s.meas.names})
        for key, w in self.sensor_weights.items():
            if not isinstance(key, str) or not key:
                raise TypeError(must_be("sensor_weights keys", "signal names or patterns", key))
            try:
                arr = np.asarray(w, dtype=np.float64)
            except (TypeError, ValueError):
                arr = np.array(np.nan)
            if not np.all(np.isfinite(arr)) or np.any(arr < 0):
                raise ValueError(must_be(f"sensor_weights[{key!r}]", "finite and >= 0", w))
        unknown = [
            k for k in self.sensor_weights if not any(fnmatch.fnmatchcase(n, k) for n in available)
        ]
        if unknown:
            raise KeyError(
                f"sensor_weights names {unknown} match no measured signal; measured signals: "
                f"{available}"
            )

    def clear_cache(self) -> None:
        """Forgets the simulations kept from the last small call (for timing full calls)."""
        self._sim_cache = {}
        self._sim_cache_key = None

    def check_params(self, params: ParameterDict) -> None:
        """Checks, before any simulation, that the parameters a SignalTransform or the
        ControlTransform reads exist (with valid sizes)."""
        batched = batch_modifier(self.modify_residual)
        if batched is not None:
            batched.validate_signals(self._measured_names, params, self._widths)
        if self.control_transform is not None:
            for ms in self.models_sequences:
                self.control_transform.validate(ms.model, params)

    # -- evaluation -------------------------------------------------------------------------
    def _masks(self, params: ParameterDict) -> tuple[np.ndarray, np.ndarray]:
        """Entries of ``x`` that change the model, and those that change the simulation.

        Parameters with a model modifier change both; initial-state parameters and those of
        the control transform only change the simulation; parameters without either (sensor
        delay, gain, bias) change neither. With a custom build_model or rollout every entry
        is assumed to matter.
        """
        ps = params.non_frozen()
        if self.build_model is not None or self.custom_rollout is not None:
            everything = np.ones(params.size, dtype=bool)
            return everything, everything
        if not ps:
            return np.zeros(0, dtype=bool), np.zeros(0, dtype=bool)
        model = np.concatenate([np.full(p.size, p.modifier is not None) for p in ps])
        init = np.concatenate([np.full(p.size, p.meta.get("kind") in INITIAL_KINDS) for p in ps])
        return model, model | init | self._control_mask(params)

    def _control_mask(self, params: ParameterDict) -> np.ndarray:
        """Entries of ``x`` the control transform reads."""
        names = set(self.control_transform.parameter_names if self.control_transform else ())
        return np.concatenate(
            [np.full(p.size, p.name in names) for p in params.non_frozen()] or [np.zeros(0, bool)]
        )

    def _initial_overrides(self, params: ParameterDict) -> list[list[tuple[int, int]]]:
        """Per sequence, ``(state index, x index)`` of each initial-state parameter of it.

        Raises:
          KeyError: An initial-state parameter names no recorded sequence.
        """
        out = [
            initial_state_overrides(params, self.models_sequences[seq.ms_index].model, seq.label)
            for seq in self._sequences
        ]
        labels = {seq.label for seq in self._sequences}
        unknown = [
            p.name
            for p in params.non_frozen()
            if p.meta.get("kind") in INITIAL_KINDS and p.meta.get("target") not in labels
        ]
        if unknown:
            raise KeyError(
                f"initial-state parameters {unknown} name no recorded sequence; "
                f"sequences: {sorted(labels)}"
            )
        return out

    def _initial_state(self, layout: _Layout, i: int, X: np.ndarray) -> np.ndarray:
        """``(k, nstate)`` initial states of sequence ``i`` for the columns of ``X``."""
        x0 = np.repeat(self._sequences[i].x0[None], X.shape[1], axis=0)
        for adr, row in layout.overrides[i]:
            x0[:, adr] = X[row]
        return x0

    def _build_model(
        self, params: ParameterDict, mi: int, slot: int, x: np.ndarray, layout: _Layout
    ) -> mujoco.MjModel:
        """The model of one candidate (the ``slot``-th distinct one of this call) for ``mi``.

        On the compiled-model fast path each slot keeps its model between calls, together
        with the parameter vector it holds. A new candidate is written in place (less work than
        copying a model): the parameters with an elementwise write (:class:`WritePlan`) all at
        once, the others only where their values differ; then ``mj_setConst``.
        """
        ms = self.models_sequences[mi]
        if self.build_model is not None or not (self.fast_model_edits and layout.model_edits):
            params._assign_checked_vector(x, layout.free)
            self.stats.compiles += 1
            if self.build_model is not None:
                return self.build_model(params, self._work_specs[mi])
            return compile_spec(run_modifiers(params, self._work_specs[mi]), params)
        self.stats.model_edits += 1
        free = layout.free
        pool = self._pool[mi]
        while len(pool) <= slot:
            pool.append(_Slot(ms.model.__copy__()))
        entry = pool[slot]
        plan = layout.plans.get(mi)
        if plan is None:  # (its errors quote the parameters' values: this candidate's)
            params._assign_checked_vector(x, free)
            plan = layout.plans[mi] = WritePlan(ms.model, free)
        if entry.x is None or entry.key != self._work_key or entry.x.shape != x.shape:
            if entry.x is not None:  # other parameters: start again from the base model, so
                entry.model = ms.model.__copy__()  # no value of theirs is left behind
            others = [free[i] for i in plan.other]
        else:
            differs = x != entry.x
            if not differs.any():
                return entry.model
            hit = np.zeros(len(free), dtype=bool)
            hit[layout.owner[differs]] = True
            others = [free[i] for i in plan.other if hit[i]]
        if others:  # their model_modifiers read the values from params
            params._assign_checked_vector(x, free)
        plan.write(entry.model, x, others)
        refresh_constants(entry.model, self._set_const_data[mi], self._mass_diag[mi])
        entry.x, entry.key = x.copy(), self._work_key
        return entry.model

    def _work_params(self, params: ParameterDict) -> ParameterDict:
        """A private copy of ``params`` reused across calls while their structure is the same."""
        key = tuple(
            (
                p.name,
                p.frozen,
                id(p.modifier),
                id(p.model_modifier),
                p.min_value.tobytes(),  # bounds matter: a SignalTransform's window uses them
                p.max_value.tobytes(),
                p.value.tobytes() if p.frozen else p.size,
                # what the meta says a parameter acts on (an initial state's sequence...)
                *map(p.meta.get, _LAYOUT_META),
            )
            for p in params.values()
        )
        if self._work_key != key:
            check_modifiers_present(params.values(), "residual_fn")
            _check_distinct_targets(params)
            work = params.copy()
            # Values written by an earlier structure's modifiers must not stay behind (a
            # parameter now frozen or gone keeps the spec's own value): start from the specs.
            self._work_specs = [ms.spec.copy() for ms in self.models_sequences]
            free = work.non_frozen()
            model_mask, sim_mask = self._masks(work)
            overrides = self._initial_overrides(work)  # raises before anything is kept
            if self.build_model is not None or self.custom_rollout is not None:
                seq_rows = [np.flatnonzero(sim_mask) for _ in overrides]
            else:
                shared = np.flatnonzero(model_mask | self._control_mask(work))
                seq_rows = [np.union1d(shared, [r for _, r in ov]) for ov in overrides]
            layout = _Layout(
                free,
                np.repeat(np.arange(len(free)), [p.size for p in free]),
                model_mask,
                sim_mask,
                supports_model_edits(work),
                overrides,
                dict(zip([p.name for p in free], _spans([p.size for p in free]), strict=True)),
                [rows.astype(np.intp) for rows in seq_rows],
            )
            self._work, self._work_key, self._layout = work, key, layout
        assert self._work is not None
        return self._work

    def _check_x(self, x: npt.ArrayLike, params: ParameterDict) -> np.ndarray:
        if not isinstance(params, ParameterDict):
            raise TypeError(
                must_be("residual_fn: params", "a ParameterDict", type(params).__name__)
            )
        arr = np.asarray(x, dtype=np.float64)
        p = params.size
        if arr.ndim == 1:
            arr = arr[:, None]
        if arr.ndim != 2 or arr.shape[0] != p:
            raise ValueError(
                must_be(
                    "residual_fn: x",
                    f"shape ({p},) or ({p}, k) for the {p} free parameter values",
                    np.asarray(x),
                    hint=f"got shape {np.shape(x)}",
                )
            )
        if not np.all(np.isfinite(arr)):
            raise ValueError("residual_fn: x must be finite, got non-finite entries")
        return arr

    def __call__(self, x: npt.ArrayLike, params: ParameterDict) -> np.ndarray:
        """Residuals for ``x`` of shape ``(p,)`` -> ``(n,)``, or ``(p, k)`` -> ``(n, k)``.

        The caller's ``params`` are not modified (a private copy receives each candidate).
        Candidates whose simulation diverges get NaN columns (see :attr:`last_divergence`).
        """
        flat = np.ndim(x) == 1
        out = self._evaluate(self._check_x(x, params), params, details=False)[0]
        return np.ascontiguousarray(out[:, 0]) if flat else out

    def predict(
        self,
        x: npt.ArrayLike | ParameterDict | None = None,
        params: ParameterDict | npt.ArrayLike | None = None,
    ) -> list[SequencePrediction]:
        """Detailed prediction of every sequence at ``x`` (``None``: the current values).

        The arguments come in the order of :meth:`__call__` (``x, params``). The older order
        ``predict(params)`` / ``predict(params, x)`` still works: a :class:`ParameterDict`
        given first is taken as ``params``.
        """
        if isinstance(x, ParameterDict):  # predict(params[, x]): the older argument order
            x, params = params, x
        if not isinstance(params, ParameterDict):
            raise TypeError(must_be("params", "a ParameterDict", params))
        xv = params.as_vector() if x is None else np.asarray(x, dtype=np.float64)
        return self._evaluate(self._check_x(xv, params)[:, :1], params, details=True)[1]

    def _evaluate(
        self, X: np.ndarray, params: ParameterDict, details: bool
    ) -> tuple[np.ndarray, list[SequencePrediction]]:
        t_start = _time.perf_counter()
        k = X.shape[1]
        work = self._work_params(params)
        layout = self._layout
        assert layout is not None
        free = layout.free
        self.stats.calls += 1
        self.stats.candidates += k
        self.last_divergence = []
        nseq = len(self._sequences)
        # Distinct simulations, per sequence: a sequence depends on the model entries of x and
        # on its own initial-state entries only (so the start of one multiple-shooting window
        # does not re-simulate the others). Sequences with the same rows share the work.
        distinct: dict[bytes, tuple[np.ndarray, np.ndarray, list[bytes]]] = {}
        per_seq = []
        for rows in layout.seq_rows:
            key = rows.tobytes()
            if key not in distinct:
                distinct[key] = _distinct_columns(X[rows])
            per_seq.append(distinct[key])
        # Simulations of the last small call (trial steps) are reused: the signal-only columns
        # of the next finite-difference Jacobian simulate that very point.
        cacheable = self.build_model is None and self.custom_rollout is None
        cache = self._sim_cache if cacheable and self._sim_cache_key == self._work_key else {}
        run = [
            [u for u, key in enumerate(keys) if key not in cache.get(i, {})]
            for i, (_, _, keys) in enumerate(per_seq)
        ]
        ran = {int(per_seq[i][0][u]) for i in range(nseq) for u in run[i]}  # columns of X
        sim_rows = X[layout.sim_mask]
        self.stats.simulated_candidates += len({sim_rows[:, j].tobytes() for j in ran})
        # 1. Models, one per distinct model sub-vector and ModelSequences; every column gets
        # its model (the cached ones too: modify_residual receives it).
        t0 = _time.perf_counter()
        model_first, model_of, _ = _distinct_columns(X[layout.model_mask])
        built: list[list[mujoco.MjModel]] = [[] for _ in self.models_sequences]
        for n, j in enumerate(model_first):
            for mi in range(len(self.models_sequences)):
                built[mi].append(self._build_model(work, mi, n, X[:, j], layout))
        col_models = [[built[mi][m] for m in model_of] for mi in range(len(built))]
        cand_params: dict[int, ParameterDict] = {}
        if self.custom_rollout is not None:
            for j in sorted(ran):
                work._assign_checked_vector(X[:, j], free)
                cand_params[j] = work.copy()
        self.stats.time_build += _time.perf_counter() - t0
        # 2. Rollouts, grouped by (ModelSequences, nstep).
        preds: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        t0 = _time.perf_counter()
        sim_cols = [per_seq[i][0][run[i]] for i in range(nseq)]  # columns of X simulated
        for mi in range(len(self.models_sequences)):
            seqs = [i for i, s in enumerate(self._sequences) if s.ms_index == mi and run[i]]
            for nstep in sorted({self._sequences[i].nstep for i in seqs}):
                group = [i for i in seqs if self._sequences[i].nstep == nstep]
                self._rollout_group(
                    mi,
                    group,
                    [[col_models[mi][j] for j in sim_cols[i]] for i in group],
                    [self._initial_state(layout, i, X[:, sim_cols[i]]) for i in group],
                    [[cand_params[j] for j in sim_cols[i]] if cand_params else [] for i in group],
                    preds,
                    self._transformed_controls(work, X, sim_cols, group, mi),
                )
        transform = batch_modifier(self.modify_residual)
        custom = self.modify_residual is not None and transform is None
        mixed: dict[int, list[tuple[np.ndarray, ...]]] = {}  # sims of sequences partly cached
        for i in range(nseq):
            if len(run[i]) < len(per_seq[i][0]):
                mixed[i] = self._sim_rows(preds.get(i), run[i], per_seq[i][2], cache[i])
                # the states are stacked only where they are read
                need = details or custom or bool(self._sequences[i].state_cols.size)
                preds[i] = self._stacked(mixed[i], need)
            if not preds[i][2].all():  # simulated now or kept from the last call
                self.last_divergence += [
                    f"{self._sequences[i].label}: simulation diverged for candidate {u}"
                    for u in np.flatnonzero(~preds[i][2])
                ]
        if cacheable and all(len(first) <= _SIM_CACHE for first, _, _ in per_seq):
            # Views of this call's fresh rollout arrays, unless code that may write into the
            # predictions receives them (a custom modify_residual, predict's caller).
            mine = not (details or custom)
            self._sim_cache = {}
            for i, (_, _, keys) in enumerate(per_seq):
                sims = mixed.get(i) or [tuple(a[u] for a in preds[i]) for u in range(len(keys))]
                self._sim_cache[i] = {
                    key: sim if mine else tuple(a.copy() for a in sim)
                    for key, sim in zip(keys, sims, strict=True)
                }
            self._sim_cache_key = self._work_key
        self.stats.time_rollout += _time.perf_counter() - t0
        # 3. Residual blocks, sequence by sequence, written into one (k, n) array.
        out: np.ndarray | None = None
        if self.modify_residual is None:
            out = np.empty((k, int(self._offsets[-1])))
        elif transform is not None and not details and self._offsets[-1] > 0:
            # block sizes known from an earlier call: each block is written in place
            # (a block of another size is computed apart, and the blocks concatenated)
            out = np.empty((k, int(self._offsets[-1])))
        in_place = out is not None
        blocks_out: list[np.ndarray] = []  # (m_seq, k) each, custom residuals only
        details_out: list[SequencePrediction] = []
        for si, seq in enumerate(self._sequences):
            raw_state, sensordata, ok, x0_seq = preds[si]
            inverse = per_seq[si][1]  # row of the sequence's simulations for each column
            P = self._gather(seq, raw_state, sensordata, x0_seq)
            if self.modify_residual is None:
                assert out is not None
                if seq.on_grid:
                    at_meas = P if seq.identity_grid else P[:, seq.interp_i]
                else:
                    at_meas = (
                        P[:, seq.interp_i] * (1.0 - seq.interp_w)[None, :, None]
                        + P[:, np.minimum(seq.interp_i + 1, seq.nstep - 1)]
                        * seq.interp_w[None, :, None]
                    )
                lo, hi = int(self._offsets[si]), int(self._offsets[si + 1])
                target = out[:, lo:hi].reshape(k, *seq.meas.data.shape)
                if len(ok) == k:  # k distinct simulations: inverse == arange(k)
                    np.subtract(seq.meas.data[None], at_meas, out=target)
                    target *= seq.scale
                else:
                    target[...] = ((seq.meas.data[None] - at_meas) * seq.scale)[inverse]
                if not ok.all():
                    out[np.flatnonzero(~ok[inverse]), lo:hi] = np.nan
                if details:
                    block = ((seq.meas.data - at_meas[0]) * seq.scale).reshape(-1)
                    if not ok[0]:
                        block[:] = np.nan
                    state0 = align_states(raw_state[0], x0_seq[0])
                    details_out.append(
                        self._details(seq, P[0], at_meas[0], seq.meas, block, state0)
                    )
                continue
            if transform is not None and not details:  # batched: same values, less per call
                view = None
                if out is not None:
                    view = out[:, int(self._offsets[si]) : int(self._offsets[si + 1])]
                block = transform.batch_residuals(
                    work,
                    lambda name: (
                        X[layout.spans[name]].T
                        if name in layout.spans
                        else np.repeat(work[name].value[None], k, axis=0)
                    ),
                    inverse,
                    P,
                    seq.grid,
                    seq.meas.signal_mapping,
                    seq.meas,
                    self.sensor_weights,
                    view,
                    seq.rms_ref,
                )
                if not ok.all():
                    block[~ok[inverse]] = np.nan
                in_place = in_place and block is view
                blocks_out.append(block.T)
                continue
            state = align_states(raw_state, x0_seq)
            cols: list[np.ndarray] = []
            for j in range(k):
                u = inverse[j]
                work._assign_checked_vector(X[:, j], free)
                pred_ts = TimeSeries._unchecked(seq.grid, P[u], seq.meas.signal_mapping)
                extra = {} if transform is None else {"rms_reference": seq.rms_ref}
                res, pred_used, meas_used = self.modify_residual(
                    work,
                    pred_ts,
                    seq.meas,
                    col_models[seq.ms_index][j],
                    details,
                    state=TimeSeries._unchecked(seq.grid, state[u], None),
                    sensor_weights=self.sensor_weights,
                    **extra,
                )
                r = np.asarray(res, dtype=np.float64).reshape(-1)
                if not ok[u]:
                    r = np.full_like(r, np.nan)
                cols.append(r)
                if details and j == 0:
                    details_out.append(
                        self._details(seq, P[u], None, meas_used, r, state[u], pred_used)
                    )
            sizes = {c.size for c in cols}
            if len(sizes) > 1:
                raise ValueError(
                    must_be(
                        "modify_residual output",
                        "the same length for every candidate (it must not depend on parameter "
                        "values)",
                        sorted(sizes),
                    )
                )
            blocks_out.append(np.stack(cols, axis=1))
        if in_place:  # the default residual, or every transform block written in place
            assert out is not None
            result = out.T
        else:
            self._offsets = np.cumsum([0] + [b.shape[0] for b in blocks_out])
            result = np.concatenate(blocks_out, axis=0) if blocks_out else np.zeros((0, k))
        self.stats.time_total += _time.perf_counter() - t_start
        return result, details_out

    @staticmethod
    def _gather(
        seq: PreparedSequence, raw_state: np.ndarray, sensordata: np.ndarray, x0: np.ndarray
    ) -> np.ndarray:
        """Predicted measured columns on the simulation grid, ``(n_unique, nstep, D)``."""
        if seq.all_sensors:
            return sensordata
        P = np.empty((sensordata.shape[0], seq.nstep, seq.meas.data.shape[1]))
        P[:, :, seq.sens_cols] = sensordata[:, :, seq.sens_src]
        if seq.state_cols.size:
            P[:, 0, seq.state_cols] = x0[:, seq.state_src]
            P[:, 1:, seq.state_cols] = raw_state[:, :-1, seq.state_src]
        return P

    @staticmethod
    def _sim_rows(
        pred: tuple[np.ndarray, ...] | None,
        run: list[int],
        keys: list[bytes],
        cache: dict[bytes, tuple[np.ndarray, ...]],
    ) -> list[tuple[np.ndarray, ...]]:
        """``(raw_state, sensordata, ok, x0)`` of every distinct simulation of one sequence,
        in order: the ones simulated now (``run``, views into ``pred``) and the cached ones."""
        at = {u: j for j, u in enumerate(run)}
        return [
            tuple(a[at[u]] for a in pred) if u in at and pred is not None else cache[key]
            for u, key in enumerate(keys)
        ]

    @staticmethod
    def _stacked(
        sims: list[tuple[np.ndarray, ...]], with_state: bool
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
        """The fields of ``sims`` stacked (new arrays); the states ``None`` unless asked.
        (``np.array`` of a list: the same copy as ``np.stack`` at a third of its cost.)"""
        state = np.array([s[0] for s in sims]) if with_state else None
        sens, ok, x0 = (np.array([s[f] for s in sims]) for f in (1, 2, 3))
        return state, sens, ok, x0

    def _transformed_controls(
        self,
        work: ParameterDict,
        X: np.ndarray,
        sim_cols: list[np.ndarray],
        group: list[int],
        mi: int,
    ) -> np.ndarray | None:
        """``(sum of candidates, nstep, nu)`` controls of a rollout group after the control
        transform, candidate by candidate (``None`` without a transform)."""
        ct = self.control_transform
        if ct is None:
            return None
        layout = self._layout
        assert layout is not None
        model = self.models_sequences[mi].model
        out = []
        for i in group:
            for j in sim_cols[i]:
                work._assign_checked_vector(X[:, j], layout.free)
                out.append(ct.apply(work, self._sequences[i].control, model))
        return np.stack(out)

    def _rollout_group(
        self,
        mi: int,
        group: list[int],
        models: list[list[mujoco.MjModel]],
        x0s: list[np.ndarray],
        cand_params: list[list[ParameterDict]],
        preds: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
        controls: np.ndarray | None = None,
    ) -> None:
        """Simulates, in one call, sequence ``group[g]`` from ``x0s[g]`` with ``models[g]``
        (one per candidate) and stores ``(raw_state, sensordata, ok, x0)`` in ``preds``.
        ``controls``: the batch's controls when a control transform made them per candidate
        (default: each sequence's recorded controls)."""
        counts = [len(m) for m in models]
        batch_models = [m for ms_ in models for m in ms_]
        x0 = np.concatenate(x0s)
        key = tuple(zip(group, counts, strict=True))
        ctrl = self._controls.get(key) if controls is None else controls
        if ctrl is None:  # controls never change: keep the batch for calls of the same widths
            ctrl = np.stack([self._sequences[i].control for i, n in key for _ in range(n)])
            ctrl.flags.writeable = False
            if len(self._controls) >= _CONTROL_BATCHES:
                self._controls.pop(next(iter(self._controls)))
            self._controls[key] = ctrl
        self.stats.rollouts += len(batch_models)
        self.stats.steps += len(batch_models) * ctrl.shape[1]
        if self.custom_rollout is not None:
            datas = self._runner.datas_for(batch_models[0])
            trajs = self.custom_rollout(
                batch_models,
                datas,
                ctrl.copy(),  # the caller's to keep or edit
                x0,
                [p for ps in cand_params for p in ps],
            )
            state = np.stack([t.state for t in trajs])
            sensordata = np.stack([t.sensordata for t in trajs])
            # custom rollouts return aligned states; store them shifted like MuJoCo's
            state = np.concatenate([state[:, 1:], state[:, -1:]], axis=1)
            ok = np.all(np.isfinite(state), axis=(1, 2)) & np.all(
                np.isfinite(sensordata), axis=(1, 2)
            )
        else:
            state, sensordata, ok = self._runner.run(batch_models, x0, ctrl, align=False)
        start = 0
        for i, n in key:
            sl = slice(start, start + n)
            start += n
            preds[i] = (state[sl], sensordata[sl], ok[sl], x0[sl])

    def _details(
        self,
        seq: PreparedSequence,
        P: np.ndarray,
        at_meas: np.ndarray | None,
        meas_used: TimeSeries,
        r: np.ndarray,
        state: np.ndarray,
        pred_used: TimeSeries | None = None,
    ) -> SequencePrediction:
        ms = self.models_sequences[seq.ms_index]
        predicted = TimeSeries._unchecked(seq.grid, P, seq.meas.signal_mapping)
        if pred_used is None:
            assert at_meas is not None
            pred_used = TimeSeries._unchecked(seq.meas.times, at_meas, seq.meas.signal_mapping)
        return SequencePrediction(
            ms.name,
            ms.sequence_name[seq.seq_index],
            predicted,
            seq.meas,
            pred_used,
            meas_used,
            r,
            state,
            seq.control,
        )

    # -- diagnostics ------------------------------------------------------------------------
    def describe_index(self, i: int) -> str:
        """Which model, sequence, signal and time residual entry ``i`` belongs to."""
        b = int(np.searchsorted(self._offsets, i, side="right") - 1)
        if b < 0 or b >= len(self._sequences):
            return f"residual entry {i}"
        seq = self._sequences[b]
        local = i - int(self._offsets[b])
        ncol = seq.meas.data.shape[1]
        if (
            self.modify_residual is None
            or self._offsets[b + 1] - self._offsets[b] == seq.meas.data.size
        ):
            row, col = divmod(local, ncol)
            if row < seq.meas.times.size:
                return (
                    f"{seq.label}, signal {seq.column_labels[col]!r} at t="
                    f"{seq.meas.times[row]:.6g} s"
                )
        return f"{seq.label}, residual entry {local}"

    def signal_groups(self) -> np.ndarray | None:
        """``(n,)`` id of the measured signal behind each residual entry (default residual only).

        Used to estimate one noise variance per signal for confidence intervals.
        """
        if self.modify_residual is not None:
            return None
        ids: dict[str, int] = {}
        parts = []
        for seq in self._sequences:
            col_ids = np.empty(seq.meas.data.shape[1], dtype=np.int64)
            assert seq.meas.signal_mapping is not None
            for sig, (_, cols) in seq.meas.signal_mapping.items():
                col_ids[cols] = ids.setdefault(sig, len(ids))
            parts.append(np.tile(col_ids, seq.meas.times.size))
        return np.concatenate(parts)

    @property
    def sequence_labels(self) -> list[str]:
        """``"model/sequence"`` for every sequence, in residual order."""
        return [s.label for s in self._sequences]

    @property
    def block_offsets(self) -> np.ndarray:
        """Start of each sequence's block in the residual vector (length nseq + 1)."""
        return self._offsets.copy()

    def simulates(self, params: ParameterDict) -> bool:
        """Whether a free parameter of ``params`` changes the simulation (else one rollout
        per sequence serves every candidate: sensor delays, gains and biases only)."""
        return bool(self._masks(params)[1].any())

    def head_samples(self, fraction: float, delays: tuple[float, float] = (0.0, 0.0)) -> list[int]:
        """Measured samples each sequence keeps in :meth:`head` ``(fraction)``, in order;
        with ``delays = (lo, hi)`` (s), only those that every delay in that range can read
        (a :class:`SignalTransform` drops the others)."""
        return [head_samples(seq.meas.times, float(fraction), delays) for seq in self._sequences]

    def supports_horizons(self, params: ParameterDict | None = None) -> bool:
        """Whether horizon stages (:meth:`head`) can help a fit: no custom rollout and no
        custom residual but a :class:`~mjsysid.objective.protocols.BatchResidualModifier`'s
        ``apply`` (custom code never receives shortened series unasked), and, with
        ``params``, a free parameter that changes the simulation (signal-only fits simulate
        once in all)."""
        built_in = self.modify_residual is None or batch_modifier(self.modify_residual)
        if not built_in or self.custom_rollout is not None:
            return False
        return params is None or self.simulates(params)

    def horizon_samples(self, fraction: float, params: ParameterDict | None = None) -> list[int]:
        """Measured samples each sequence keeps in :meth:`head` ``(fraction)`` that every
        delay the bounds of ``params`` allow can read (a batched modifier such as a
        :class:`SignalTransform` reads the prediction at ``t - delay``)."""
        batched = batch_modifier(self.modify_residual)
        delays = (0.0, 0.0)
        if batched is not None and params is not None:
            delays = batched.delay_bounds(params)
        return self.head_samples(fraction, delays)

    def head(self, fraction: float) -> ResidualFunction:
        """The residual of the first ``fraction`` of every sequence (a horizon stage).

        Each sequence keeps its measured samples up to ``t0 + fraction·(t_last − t0)``, with
        the same column weights, so the built-in residual of the head is the leading part of
        this one's (a ``modify_residual`` receives the shortened series; a
        :class:`SignalTransform` normalises by their RMS). The head shares this function's
        candidate models, rollout threads and :attr:`stats`; use one at a time.
        ``fraction = 1`` returns this function itself.

        Raises:
          ValueError: ``fraction`` is not in ``(0, 1]``, or a sequence would keep fewer than 2
            samples.
        """
        if not (
            isinstance(fraction, int | float | np.floating)
            and not isinstance(fraction, bool)
            and 0.0 < fraction <= 1.0
        ):
            raise ValueError(must_be("fraction", "a number in (0, 1]", fraction))
        if fraction == 1.0:
            return self
        view = copy.copy(self)
        view._sequences = [sequence_head(seq, float(fraction)) for seq in self._sequences]
        sizes = [s.meas.data.size if self.modify_residual is None else 0 for s in view._sequences]
        view._offsets = np.cumsum([0, *sizes])
        view._sim_cache, view._sim_cache_key = {}, None
        view._controls = {}
        view.last_divergence = []
        return view

    def close(self) -> None:
        """Stops the rollout threads (of the function :meth:`head` was called on, too)."""
        self._runner.close()

    def __repr__(self) -> str:
        return (
            f"ResidualFunction({len(self.models_sequences)} ModelSequences, "
            f"{len(self._sequences)} sequences)"
        )


def build_residual_fn(
    models_sequences: Sequence[ModelSequences] | ModelSequences,
    modify_residual: ModifyResidualFn | None = None,
    custom_rollout: CustomRolloutFn | None = None,
    build_model: BuildModelFn = apply_param_modifiers,
    sensor_weights: Mapping[str, npt.ArrayLike] | None = None,
    enabled_observations: Sequence[str] | None = None,
    *,
    normalize: bool | str = True,
    control_interpolation: str = "zoh",
    nthread: int | None = None,
    fast_model_edits: bool = True,
    control_transform: ControlTransform | None = None,
) -> ResidualFunction:
    """Builds the batched residual function ``residual_fn(x, params)``.

    Args:
      models_sequences: One or more :class:`ModelSequences`; their residuals are stacked.
      modify_residual: Custom residual per sequence and candidate (e.g.
        ``SignalTransform.apply``); see :class:`mjsysid.objective.protocols.ModifyResidualFn`.
      custom_rollout: Replaces the built-in batched rollout (see
        :class:`mjsysid.CustomRolloutFn`); must return time-aligned trajectories.
      build_model: ``build_model(params, spec) -> MjModel``. The default,
        :func:`apply_param_modifiers`, is run on a private working copy of each spec (no copy
        per call) and uses the compiled-model fast path where every active parameter has one.
        A custom function receives the private working spec.
      sensor_weights: ``{signal name or fnmatch pattern: weight}`` (scalar, or one per column
        of the signal); a signal matched by several keys gets the product.
      enabled_observations: Signal names to use; the others are ignored.
      normalize: ``True`` or ``"signal"`` (default): divide each measured signal by its RMS
        over all its columns (:func:`~mjsysid.signal_modifier.signal_rms`; an all-zero signal
        is then an error); ``"column"``: by each column's RMS
        (:func:`~mjsysid.signal_modifier.column_rms`; can converge faster on orientation
        sensors, but amplifies near-constant noisy columns); ``False``: no normalisation.
      control_interpolation: ``"zoh"`` (zero-order hold, default: what hardware does between
        commands) or ``"linear"``.
      nthread: Rollout threads (default: all available CPUs).
      fast_model_edits: Allow the compiled-model fast path.
      control_transform: Deadbands, direction-dependent gains and offsets applied to the
        recorded controls of every candidate before its rollout
        (:class:`~mjsysid.objective.control_transform.ControlTransform`); its patterns must match
        actuators of every model.

    Returns:
      A :class:`ResidualFunction`. Unknown names in ``sensor_weights`` or
      ``enabled_observations`` fail here, not at the first evaluation.
    """
    if isinstance(models_sequences, ModelSequences):
        models_sequences = [models_sequences]
    ms_list = list(models_sequences)
    if not ms_list or not all(isinstance(m, ModelSequences) for m in ms_list):
        raise TypeError(
            must_be("models_sequences", "a non-empty list of ModelSequences", models_sequences)
        )
    names = [m.name for m in ms_list]
    if len(set(names)) != len(names):
        raise ValueError(must_be("models_sequences", "ModelSequences with unique names", names))
    if normalize not in (True, False, "signal", "column"):
        raise ValueError(must_be("normalize", "True, False, 'signal' or 'column'", normalize))
    if modify_residual is not None and normalize not in (True, "signal"):
        raise ValueError(
            must_be(
                "normalize",
                "the default with a modify_residual (it scales its own residual)",
                normalize,
                "Pass it to the transform instead: SignalTransform(normalize=...)",
            )
        )
    if control_interpolation not in ("zoh", "linear"):
        raise ValueError(
            must_be("control_interpolation", "'zoh' or 'linear'", control_interpolation)
        )
    if control_transform is not None and not isinstance(control_transform, ControlTransform):
        raise TypeError(
            must_be("control_transform", "a ControlTransform or None", control_transform)
        )
    for what, fn in (
        ("modify_residual", modify_residual),
        ("custom_rollout", custom_rollout),
        ("build_model", build_model),
    ):
        if fn is not None and not callable(fn):
            raise TypeError(must_be(what, "callable or None", fn))
    return ResidualFunction(
        ms_list,
        modify_residual=modify_residual,
        custom_rollout=custom_rollout,
        build_model=None if build_model is apply_param_modifiers else build_model,
        sensor_weights=sensor_weights,
        enabled_observations=enabled_observations,
        normalize=normalize,
        control_interpolation=control_interpolation,
        nthread=nthread,
        fast_model_edits=fast_model_edits,
        control_transform=control_transform,
    )


def residual_cost(r: np.ndarray) -> float:
    """``½‖r‖²``."""
    return 0.5 * float(np.dot(r, r))


__all__ = ["ResidualFunction", "SequencePrediction", "build_residual_fn"]

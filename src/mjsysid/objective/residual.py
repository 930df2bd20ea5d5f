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
   signal-only columns of the Jacobian that follows; :mod:`mjsysid.objective.candidates`).
2. Each distinct candidate model is built once per ModelSequences
   (:mod:`mjsysid.objective.candidates`): by writing values into a pooled model reused
   between calls when every active parameter offers that exact fast path, else by running
   the spec modifiers on a private working spec and compiling it once.
3. All candidates × sequences of one ModelSequences (of equal length) run in one call of a
   persistent multithreaded rollout with reused ``MjData``
   (:mod:`mjsysid.objective.candidates`).
4. Predictions are gathered and interpolated with index maps precomputed per sequence
   (:mod:`mjsysid.objective.alignment`, :mod:`mjsysid.objective.predictions`), vectorised
   over candidates; a :class:`SignalTransform` gets all candidates of a sequence in one call
   (:mod:`mjsysid.objective.predictions`).
"""

from __future__ import annotations

import copy
import fnmatch
import time as _time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.data.sequences import ModelSequences
from mjsysid.objective.alignment import (
    PreparedSequence,
    head_samples,
    prepare_sequence,
    sequence_head,
)
from mjsysid.objective.candidates import (
    CandidateModels,
    CandidateRollouts,
    DistinctColumns,
    ResidualStats,
    SimBatch,
    SimulationCache,
    distinct_columns,
    sim_rows,
    stacked,
)
from mjsysid.objective.control_transform import ControlTransform
from mjsysid.objective.layout import (
    Layout,
    ParameterStructure,
    check_law_params,
    checked_laws,
    describe_entry,
    law_parameter_names,
    masks,
    signal_ids,
)
from mjsysid.objective.levels import LevelBracket, threshold_brackets
from mjsysid.objective.predictions import (
    SequenceBlock,
    SequencePrediction,
    batched_block,
    custom_block,
    default_block,
    gather,
)
from mjsysid.objective.protocols import (
    BatchResidualModifier,
    BuildModelFn,
    CustomRolloutFn,
    ModifyResidualFn,
    batch_modifier,
)
from mjsysid.params.apply import apply_param_modifiers
from mjsysid.params.parameter import ParameterDict
from mjsysid.sim.laws.core import ForceLaw
from mjsysid.sim.lockstep import bind_laws
from mjsysid.sim.rollout import ROLLOUTS, BatchRollout
from mjsysid.util.errors import must_be
from mjsysid.util.limits import check_limit


@dataclass
class _CallPlan:
    """Which simulations one call needs (step 1 of an evaluation).

    Attributes:
      per_seq: Per sequence, the distinct columns of its rows of ``x`` (its simulations).
      run: Per sequence, the distinct simulations not found in the cache (to run now).
      cache: The kept simulations valid for this call, per sequence.
      cacheable: This call's simulations may be kept (no custom build_model or rollout).
    """

    per_seq: list[DistinctColumns]
    run: list[list[int]]
    cache: dict[int, dict[bytes, SimBatch]]
    cacheable: bool

    def sim_cols(self) -> list[np.ndarray]:
        """Per sequence, the columns of ``x`` simulated now."""
        return [d.first[r] for d, r in zip(self.per_seq, self.run, strict=True)]


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
        force_laws: Sequence[ForceLaw] = (),
        compiled_laws: bool | None = None,
    ) -> None:
        self.models_sequences = list(models_sequences)
        self.force_laws = checked_laws(force_laws, self.models_sequences, custom_rollout)
        self.control_transform = control_transform
        if control_transform is not None:
            for ms in self.models_sequences:
                control_transform.validate(ms.model)
        self.modify_residual = modify_residual
        # the batched form of a SignalTransform's apply, found once (the runtime protocol
        # check reads every member of the protocol: tens of microseconds a call)
        self._batched = batch_modifier(modify_residual)
        self.custom_rollout = custom_rollout
        self.build_model = build_model
        self.sensor_weights = dict(sensor_weights or {})
        self.enabled_observations = _observation_names(enabled_observations)
        self.normalize = normalize
        self.control_interpolation = control_interpolation
        self.fast_model_edits = fast_model_edits
        self.compiled_laws = compiled_laws
        self.stats = ResidualStats()
        self.last_divergence: list[str] = []
        self._structure = ParameterStructure(
            self.models_sequences,
            build_model is not None or custom_rollout is not None,
            control_transform,
            [ms.spec.copy() for ms in self.models_sequences],
            law_names=law_parameter_names(self.force_laws),
        )
        self._sim_cache = SimulationCache()
        # a head view's: the whole data's kept simulations, whose leading steps it reuses
        self._whole_cache: SimulationCache | None = None
        self._runner = BatchRollout(nthread)
        self._models = CandidateModels(
            self.models_sequences, build_model, fast_model_edits, self.stats
        )
        self._rollouts = CandidateRollouts(
            self._runner,
            custom_rollout,
            control_transform,
            self.stats,
            self.force_laws,
            compiled_laws,
        )
        self._sequences = _prepared_sequences(
            self.models_sequences,
            modify_residual,
            enabled_observations=self.enabled_observations,
            control_interpolation=control_interpolation,
            sensor_weights=self.sensor_weights,
            normalize=normalize,
        )
        _check_sensor_weights(self.sensor_weights, self._sequences)
        self._measured_names = list(dict.fromkeys(n for s in self._sequences for n in s.meas.names))
        self._widths = {n: len(s.meas.columns(n)) for s in self._sequences for n in s.meas.names}
        if self._batched is not None:
            self._batched.validate_signals(self._measured_names, widths=self._widths)
        self._offsets = self._block_offsets(self._sequences)

    # -- construction -----------------------------------------------------------------------
    def _block_offsets(self, sequences: list[PreparedSequence]) -> np.ndarray:
        """Block starts in the residual; a custom residual's sizes are known after one call."""
        sizes = [s.meas.data.size if self.modify_residual is None else 0 for s in sequences]
        return np.cumsum([0, *sizes])

    def clear_cache(self) -> None:
        """Forgets the simulations kept from the last small call (for timing full calls; a
        head's: the whole data's too, whose leading steps it reuses)."""
        self._sim_cache.clear()
        if self._whole_cache is not None:
            self._whole_cache.clear()

    def check_params(self, params: ParameterDict) -> None:
        """Checks, before any simulation, that the parameters a SignalTransform or the
        ControlTransform reads exist (with valid sizes)."""
        if self._batched is not None:
            self._batched.validate_signals(self._measured_names, params, self._widths)
        if self.control_transform is not None:
            for ms in self.models_sequences:
                self.control_transform.validate(ms.model, params)
        check_law_params(self.force_laws, params)

    # -- evaluation -------------------------------------------------------------------------
    def __call__(self, x: npt.ArrayLike, params: ParameterDict) -> np.ndarray:
        """Residuals for ``x`` of shape ``(p,)`` -> ``(n,)``, or ``(p, k)`` -> ``(n, k)``.

        The caller's ``params`` are not modified (a private copy receives each candidate).
        Candidates whose simulation diverges get NaN columns (see :attr:`last_divergence`).
        """
        flat = np.ndim(x) == 1
        out = self._evaluate(x, params, details=False)[0]
        return np.ascontiguousarray(out[:, 0]) if flat else out

    def predict(
        self, x: npt.ArrayLike | None = None, params: ParameterDict | None = None
    ) -> list[SequencePrediction]:
        """Detailed prediction of every sequence at ``x`` (``None``: the current values).

        The arguments come in the order of :meth:`__call__`: ``predict(x, params)``, or
        ``predict(None, params)`` for the values ``params`` holds.
        """
        if isinstance(x, ParameterDict):
            raise TypeError(
                must_be("x", "a parameter vector or None (call predict(None, params))", x)
            )
        if not isinstance(params, ParameterDict):
            raise TypeError(must_be("params", "a ParameterDict", params))
        xv = params.as_vector() if x is None else np.asarray(x, dtype=np.float64)
        return self._evaluate(xv, params, details=True)[1]

    def _evaluate(
        self, x: npt.ArrayLike, params: ParameterDict, details: bool
    ) -> tuple[np.ndarray, list[SequencePrediction]]:
        """Residual columns of ``x (p, k)`` (or ``(p,)``), and with ``details`` the predictions
        of column 0 only: plan the simulations, build the models, simulate, assemble the
        blocks."""
        t_start = _time.perf_counter()
        if not isinstance(params, ParameterDict):
            raise TypeError(
                must_be("residual_fn: params", "a ParameterDict", type(params).__name__)
            )
        work, layout = self._structure.update(params, self._sequences)
        X = _checked_x(x, layout.owner.size)
        if details:
            X = X[:, :1]
        k = X.shape[1]
        self.stats.calls += 1
        self.stats.candidates += k
        self.last_divergence = []
        transform = self._batched
        exposed = details or (self.modify_residual is not None and transform is None)
        # the states are recorded where they are read: measured states, or exposed
        read_states = [exposed or bool(seq.state_cols.size) for seq in self._sequences]
        plan = self._plan_call(X, layout, read_states)
        t0 = _time.perf_counter()
        col_models = self._models.for_columns(
            work, X, layout, self._structure.key, self._structure.specs
        )
        cand_params = self._candidate_params(work, X, layout, plan)
        self.stats.time_build += _time.perf_counter() - t0
        t0 = _time.perf_counter()
        preds = self._simulate(work, X, layout, plan, col_models, cand_params, exposed, read_states)
        self.stats.time_rollout += _time.perf_counter() - t0
        result, details_out = self._blocks(
            work, X, layout, plan, preds, col_models, details, transform
        )
        self.stats.time_total += _time.perf_counter() - t_start
        return result, details_out

    def _plan_call(self, X: np.ndarray, layout: Layout, read_states: list[bool]) -> _CallPlan:
        """The distinct simulations per sequence, and those the cache does not hold.

        A sequence depends on the model entries of x and on its own initial-state entries
        only (so the start of one multiple-shooting window does not re-simulate the others).
        Sequences with the same rows share the work. Simulations of the last small call
        (trial steps) are reused: the signal-only columns of the next finite-difference
        Jacobian simulate that very point. ``read_states[i]``: sequence ``i``'s states are read,
        so a kept simulation without them does not serve it.
        """
        distinct: dict[bytes, DistinctColumns] = {}
        per_seq = []
        for rows in layout.seq_rows:
            key = rows.tobytes()
            if key not in distinct:
                distinct[key] = distinct_columns(X[rows])
            per_seq.append(distinct[key])
        cacheable = self.build_model is None and self.custom_rollout is None
        cache = self._sim_cache.valid_for(self._structure.key) if cacheable else {}
        if cacheable and self._whole_cache is not None:  # a head: the whole data's lead too
            wanted = [
                [k for k in d.keys if k not in cache.get(i, {})] for i, d in enumerate(per_seq)
            ]
            nsteps = [seq.nstep for seq in self._sequences]
            lead = self._whole_cache.leading(self._structure.key, wanted, nsteps)
            cache = {i: {**lead.get(i, {}), **cache.get(i, {})} for i in {*lead, *cache}}
        if any(read_states) and cache:
            cache = {
                i: {k: s for k, s in sims.items() if s.state is not None}
                if read_states[i]
                else sims
                for i, sims in cache.items()
            }
        run = [
            [u for u, key in enumerate(d.keys) if key not in cache.get(i, {})]
            for i, d in enumerate(per_seq)
        ]
        ran = {int(per_seq[i].first[u]) for i in range(len(per_seq)) for u in run[i]}
        sim_rows_x = X[layout.sim_mask]
        self.stats.simulated_candidates += len({sim_rows_x[:, j].tobytes() for j in ran})
        return _CallPlan(per_seq, run, cache, cacheable)

    def _candidate_params(
        self, work: ParameterDict, X: np.ndarray, layout: Layout, plan: _CallPlan
    ) -> dict[int, ParameterDict]:
        """A copy of the parameters of every simulated column (for a custom rollout only)."""
        cand_params: dict[int, ParameterDict] = {}
        if self.custom_rollout is not None:
            ran = {
                int(d.first[u]) for d, run in zip(plan.per_seq, plan.run, strict=True) for u in run
            }
            for j in sorted(ran):
                work.assign_checked_vector(X[:, j], layout.free)
                cand_params[j] = work.copy()
        return cand_params

    def _simulate(
        self,
        work: ParameterDict,
        X: np.ndarray,
        layout: Layout,
        plan: _CallPlan,
        col_models: list[list[mujoco.MjModel]],
        cand_params: dict[int, ParameterDict],
        exposed: bool,
        read_states: list[bool],
    ) -> dict[int, SimBatch]:
        """Every sequence's distinct simulations: run now or taken from the cache; keeps
        this call's for the next when it is small. ``exposed``: code that may write into the
        predictions receives them (a custom modify_residual, predict's caller).
        ``read_states[i]``: sequence ``i``'s states are read (else they may be left out)."""
        preds = self._rollouts.run_all(
            self._sequences,
            [ms.model for ms in self.models_sequences],
            work,
            X,
            layout,
            col_models,
            plan.sim_cols(),
            cand_params,
            read_states,
        )
        mixed: dict[int, list[SimBatch]] = {}  # sims of sequences partly cached
        for i, d in enumerate(plan.per_seq):
            if len(plan.run[i]) < len(d.first):
                mixed[i] = sim_rows(preds.get(i), plan.run[i], d.keys, plan.cache[i])
                preds[i] = stacked(mixed[i], read_states[i])
            if not preds[i].ok.all():  # simulated now or kept from the last call
                self.last_divergence += [
                    f"{self._sequences[i].label}: simulation diverged for candidate {u}"
                    for u in np.flatnonzero(~preds[i].ok)
                ]
        if plan.cacheable:
            # views of this call's fresh rollout arrays, unless exposed
            self._sim_cache.keep(plan.per_seq, preds, mixed, self._structure.key, copy=exposed)
        return preds

    def _blocks(
        self,
        work: ParameterDict,
        X: np.ndarray,
        layout: Layout,
        plan: _CallPlan,
        preds: dict[int, SimBatch],
        col_models: list[list[mujoco.MjModel]],
        details: bool,
        transform: BatchResidualModifier | None,
    ) -> tuple[np.ndarray, list[SequencePrediction]]:
        """Residual blocks, sequence by sequence, written into one ``(k, n)`` array where
        their sizes are known (else concatenated); ``(n, k)`` result and predictions."""
        k = X.shape[1]
        out = self._block_buffer(k, transform is not None and not details)
        in_place = out is not None
        blocks_out: list[np.ndarray] = []  # (m_seq, k) each, custom residuals only
        details_out: list[SequencePrediction] = []
        for si, seq in enumerate(self._sequences):
            sim, inverse = preds[si], plan.per_seq[si].inverse
            P = gather(seq, sim.state, sim.sensordata, sim.x0)
            ms = self.models_sequences[seq.ms_index] if details else None
            span = slice(int(self._offsets[si]), int(self._offsets[si + 1]))
            if self.modify_residual is None:
                assert out is not None
                pred = default_block(out, span, seq, P, sim, inverse, ms)
                if pred is not None:
                    details_out.append(pred)
            elif transform is not None and not details:  # batched: same values, less per call
                view = None if out is None else out[:, span]
                b = SequenceBlock(work, X, layout, seq, P, sim, inverse, self.sensor_weights)
                block = batched_block(transform, b, view)
                in_place = in_place and block is view
                blocks_out.append(block.T)
            else:
                assert self.modify_residual is not None
                b = SequenceBlock(work, X, layout, seq, P, sim, inverse, self.sensor_weights)
                block, pred = custom_block(
                    self.modify_residual, transform is not None, b, col_models[seq.ms_index], ms
                )
                blocks_out.append(block)
                if pred is not None:
                    details_out.append(pred)
        if in_place:  # the default residual, or every transform block written in place
            assert out is not None
            return out.T, details_out
        self._offsets = np.cumsum([0] + [b.shape[0] for b in blocks_out])
        result = np.concatenate(blocks_out, axis=0) if blocks_out else np.zeros((0, k))
        return result, details_out

    def _block_buffer(self, k: int, batched: bool) -> np.ndarray | None:
        """The ``(k, n)`` array the blocks are written into where their sizes are known: the
        built-in residual's, and a batched modifier's after an earlier call (a block of
        another size is then computed apart, and the blocks concatenated)."""
        if self.modify_residual is None or (batched and self._offsets[-1] > 0):
            return np.empty((k, int(self._offsets[-1])))
        return None

    # -- diagnostics ------------------------------------------------------------------------
    def describe_index(self, i: int) -> str:
        """Which model, sequence, signal and time residual entry ``i`` belongs to."""
        return describe_entry(self._sequences, self._offsets, i, self.modify_residual is None)

    def signal_groups(self) -> np.ndarray | None:
        """``(n,)`` id of the measured signal behind each residual entry (default residual only).

        Used to estimate one noise variance per signal for confidence intervals.
        """
        return None if self.modify_residual is not None else signal_ids(self._sequences)

    def threshold_brackets(self, params: ParameterDict) -> list[LevelBracket]:
        """The ranges the recorded command levels determine the force laws' command
        thresholds to (:mod:`mjsysid.objective.levels`), per model's laws and recordings."""
        out: list[LevelBracket] = []
        for m, ms in enumerate(self.models_sequences):
            controls = [s.control for s in self._sequences if s.ms_index == m]
            if controls and self.force_laws:
                out += threshold_brackets(bind_laws(self.force_laws, ms.model), controls, params)
        return out

    @property
    def sequence_labels(self) -> list[str]:
        """``"model/sequence"`` for every sequence, in residual order."""
        return [s.label for s in self._sequences]

    @property
    def block_offsets(self) -> np.ndarray:
        """Start of each sequence's block in the residual vector (length nseq + 1)."""
        return cast(np.ndarray, self._offsets.copy())

    def simulates(self, params: ParameterDict) -> bool:
        """Whether a free parameter of ``params`` changes the simulation (else one rollout
        per sequence serves every candidate: sensor delays, gains and biases only)."""
        st = self._structure
        return bool(masks(params, custom=st.custom, control_names=st.control_names())[1].any())

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
        built_in = self.modify_residual is None or self._batched
        if not built_in or self.custom_rollout is not None:
            return False
        return params is None or self.simulates(params)

    def horizon_samples(self, fraction: float, params: ParameterDict | None = None) -> list[int]:
        """Measured samples each sequence keeps in :meth:`head` ``(fraction)`` that every
        delay the bounds of ``params`` allow can read (a batched modifier such as a
        :class:`SignalTransform` reads the prediction at ``t - delay``)."""
        batched = self._batched
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
        candidate models, rollout threads and :attr:`stats`; use one at a time. At a point
        this function simulated in its last small call (a staged fit's stage starts where the
        whole data was just evaluated), the head cuts those simulations to its steps instead
        of running them again: MuJoCo is deterministic, so they are the head's own.
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
        view._offsets = self._block_offsets(view._sequences)
        view._structure = copy.copy(self._structure)  # its own current structure
        view._sim_cache = SimulationCache()
        view._whole_cache = self._sim_cache
        view._rollouts = self._rollouts.fresh()
        view.last_divergence = []
        return view

    def head_rows(self, fraction: float) -> np.ndarray | None:
        """The entries of this residual that are the residual of :meth:`head` ``(fraction)``,
        in order (:class:`~mjsysid.objective.protocols.HeadRowsResidualFn`): each sequence's
        first measured samples, when the residual is the built-in one (no
        ``modify_residual``: a :class:`SignalTransform` normalises a head by its own RMS; no
        custom rollout or model builder) and every kept sample is read from the simulation
        as in the whole sequence (a last kept sample between two grid instants is read from
        the earlier one in a head). ``None`` otherwise.
        """
        custom = (self.modify_residual, self.custom_rollout, self.build_model)
        if any(hook is not None for hook in custom):
            return None
        parts = self.head(fraction)._sequences
        rows = []
        for start, seq, part in zip(self._offsets[:-1], self._sequences, parts, strict=True):
            n = part.interp_i.size
            same_w = seq.on_grid or np.array_equal(part.interp_w, seq.interp_w[:n])
            if not (same_w and np.array_equal(part.interp_i, seq.interp_i[:n])):
                return None
            rows.append(int(start) + np.arange(part.meas.data.size))
        return np.concatenate(rows) if rows else np.zeros(0, dtype=np.intp)

    def on_backend(self, backend: str) -> ResidualFunction:
        """This residual with its rollouts on ``backend``: ``"cpu"`` returns this function
        itself; ``"warp"`` a view whose candidates are simulated as MuJoCo Warp worlds on
        Warp's default device (:class:`~mjsysid.sim.warp.WarpRollout`: float32, for
        populations, not for finite differences; the ``warp`` extra). The view shares this
        function's candidate models and :attr:`stats` (use one at a time).

        Raises:
          ValueError: An unknown backend, or a custom rollout (which runs on the CPU).
          ImportError: ``"warp"`` without MuJoCo Warp installed.
        """
        if backend not in ROLLOUTS:
            raise ValueError(must_be("backend", f"one of {list(ROLLOUTS)}", backend))
        if backend == "cpu":
            return self
        if self.custom_rollout is not None:
            raise ValueError(
                must_be("a residual function on the Warp backend", "no custom_rollout", "one")
            )
        view = copy.copy(self)
        view._sim_cache = SimulationCache()
        view._rollouts = self._rollouts.on_device(backend)
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


def _prepared_sequences(
    models_sequences: list[ModelSequences],
    modify_residual: ModifyResidualFn | None,
    *,
    enabled_observations: list[str] | None,
    control_interpolation: str,
    sensor_weights: Mapping[str, npt.ArrayLike],
    normalize: bool | str,
) -> list[PreparedSequence]:
    """Every sequence prepared (:func:`prepare_sequence`), in residual order.

    A custom residual scales its own: the built-in scale is only computed (and an
    all-zero signal refused, here rather than at the first call) as a SignalTransform
    will; another custom residual normalises as it likes.
    """
    transform = batch_modifier(modify_residual)
    own_scale = (
        normalize
        if modify_residual is None
        else (transform.normalize if transform is not None else False)
    )
    return [
        prepare_sequence(
            models_sequences,
            mi,
            si,
            enabled_observations=enabled_observations,
            control_interpolation=control_interpolation,
            sensor_weights=sensor_weights,
            normalize=own_scale,
            custom_residual=modify_residual is not None,
        )
        for mi, ms in enumerate(models_sequences)
        for si in range(len(ms))
    ]


def _checked_x(x: npt.ArrayLike, p: int) -> np.ndarray:
    """``x`` as a finite ``(p, k)`` float array for ``p`` free parameter values."""
    arr = np.asarray(x, dtype=np.float64)
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
    check_limit("max_candidates", arr.shape[1], "residual_fn: x: candidates (columns k)")
    if not np.isfinite(arr).all():
        raise ValueError("residual_fn: x must be finite, got non-finite entries")
    return arr


def _check_sensor_weights(
    sensor_weights: Mapping[str, npt.ArrayLike], sequences: Sequence[PreparedSequence]
) -> None:
    """Every key of ``sensor_weights`` is a pattern matching a measured signal, every weight
    finite and >= 0."""
    available = sorted({n for s in sequences for n in s.meas.names})
    for key, w in sensor_weights.items():
        if not isinstance(key, str) or not key:
            raise TypeError(must_be("sensor_weights keys", "signal names or patterns", key))
        try:
            arr = np.asarray(w, dtype=np.float64)
        except (TypeError, ValueError):
            arr = np.array(np.nan)
        if not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise ValueError(must_be(f"sensor_weights[{key!r}]", "finite and >= 0", w))
    unknown = [k for k in sensor_weights if not any(fnmatch.fnmatchcase(n, k) for n in available)]
    if unknown:
        raise KeyError(
            f"sensor_weights names {unknown} match no measured signal; measured signals: "
            f"{available}"
        )


def _observation_names(enabled_observations: Sequence[str] | None) -> list[str] | None:
    """``enabled_observations`` as a list (``None``: every signal).

    Raises:
      TypeError: A single string was given.
    """
    if isinstance(enabled_observations, str):
        raise TypeError(
            must_be(
                "enabled_observations",
                "a list of signal names",
                enabled_observations,
                f"pass [{enabled_observations!r}]",
            )
        )
    return None if enabled_observations is None else list(enabled_observations)


def _checked_models_sequences(
    models_sequences: Sequence[ModelSequences] | ModelSequences,
) -> list[ModelSequences]:
    """A non-empty list of ModelSequences with unique names (one is made a list)."""
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
    return ms_list


def _check_options(
    normalize: object,
    modify_residual: ModifyResidualFn | None,
    control_interpolation: object,
    control_transform: object,
) -> None:
    """The options of :func:`build_residual_fn` that take one of a few values."""
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


def _check_callables(modify_residual: object, custom_rollout: object, build_model: object) -> None:
    """The custom functions of :func:`build_residual_fn` are callable (or ``None``)."""
    for what, fn in (
        ("modify_residual", modify_residual),
        ("custom_rollout", custom_rollout),
        ("build_model", build_model),
    ):
        if fn is not None and not callable(fn):
            raise TypeError(must_be(what, "callable or None", fn))


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
    force_laws: Sequence[ForceLaw] = (),
    compiled_laws: bool | None = None,
) -> ResidualFunction:
    """Builds the batched residual function ``residual_fn(x, params)``.

    Args:
      models_sequences: One or more :class:`ModelSequences`; their residuals are stacked.
      modify_residual: Custom residual per sequence and candidate (e.g.
        ``SignalTransform.apply``); see :class:`mjsysid.objective.protocols.ModifyResidualFn`.
      custom_rollout: Replaces the built-in batched rollout (a :class:`mjsysid.CustomRolloutFn`;
        must return time-aligned trajectories).
      build_model: ``build_model(params, spec) -> MjModel``, run on a private working copy of
        each spec. The default, :func:`apply_param_modifiers`, uses the compiled-model fast
        path where every active parameter has one.
      sensor_weights: ``{signal name or fnmatch pattern: weight}`` (scalar, or one per column
        of the signal); a signal matched by several keys gets the product.
      enabled_observations: Signal names to use; the others are ignored.
      normalize: ``True``/``"signal"`` (default): divide each measured signal by its RMS over
        its columns (:func:`~mjsysid.signal_modifier.signal_rms`); ``"column"``: by each
        column's RMS (:func:`~mjsysid.signal_modifier.column_rms`); ``False``: none.
      control_interpolation: ``"zoh"`` (zero-order hold, default) or ``"linear"``.
      nthread: Rollout threads (default: all CPUs).
      fast_model_edits: The compiled-model fast path.
      control_transform: Deadbands, direction-dependent gains and offsets applied to every
        candidate's recorded controls (a :class:`mjsysid.ControlTransform`).
      force_laws: :class:`~mjsysid.sim.laws.core.ForceLaw` s applied as ``qfrc_applied``
        before every step; ``params`` holds their parameters (docs/force-laws.md).
      compiled_laws: Run the laws compiled with MuJoCo's step
        (:mod:`mjsysid.sim.compiled`, Numba): ``None`` (default) whenever every law has a
        kernel and Numba is installed, ``False`` never (the NumPy lock steps), ``True``
        always (an error naming what is missing otherwise).

    Returns:
      A :class:`ResidualFunction` (unknown weight or observation names fail here).
    """
    ms_list = _checked_models_sequences(models_sequences)
    _check_options(normalize, modify_residual, control_interpolation, control_transform)
    _check_callables(modify_residual, custom_rollout, build_model)
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
        force_laws=force_laws,
        compiled_laws=compiled_laws,
    )


def residual_cost(r: np.ndarray) -> float:
    """``½‖r‖²``."""
    return 0.5 * float(np.dot(r, r))


def build_options(rf: ResidualFunction) -> dict[str, Any]:
    """The keyword arguments of :func:`build_residual_fn` (``nthread`` aside) that made
    ``rf``: to build the same residual over other sequences (held-out data) or on another
    machine (a Dask worker). ``build_model`` is left out where it is the default."""
    options: dict[str, Any] = {
        "modify_residual": rf.modify_residual,
        "custom_rollout": rf.custom_rollout,
        "sensor_weights": rf.sensor_weights,
        "enabled_observations": rf.enabled_observations,
        "normalize": rf.normalize,
        "control_interpolation": rf.control_interpolation,
        "fast_model_edits": rf.fast_model_edits,
        "control_transform": rf.control_transform,
        "force_laws": rf.force_laws,
        "compiled_laws": rf.compiled_laws,
    }
    if rf.build_model is not None:
        options["build_model"] = rf.build_model
    return options


__all__ = ["ResidualFunction", "SequencePrediction", "build_options", "build_residual_fn"]

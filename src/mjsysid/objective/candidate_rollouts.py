"""Rollouts of the distinct simulations of a batch of candidates.

All candidates × sequences of one ModelSequences (of equal length) run in one call of a
persistent multithreaded rollout with reused ``MjData`` (or of a custom rollout).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import mujoco
import numpy as np

from mjsysid.objective.alignment import PreparedSequence
from mjsysid.objective.control_transform import ControlTransform
from mjsysid.objective.law_checks import check_law_params
from mjsysid.objective.layout import Layout
from mjsysid.objective.protocols import CustomRolloutFn
from mjsysid.objective.residual_stats import ResidualStats
from mjsysid.objective.sim_cache import SimBatch
from mjsysid.params.parameter import ParameterDict
from mjsysid.sim.force_laws import ForceLaw
from mjsysid.sim.law_params import parameter_name
from mjsysid.sim.lockstep import LockstepRollout
from mjsysid.sim.rollout import BatchRollout

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
      force_laws: Applied by a lock-step rollout (their parameters' values per candidate).
    """

    def __init__(
        self,
        runner: BatchRollout,
        custom_rollout: CustomRolloutFn | None,
        control_transform: ControlTransform | None,
        stats: ResidualStats,
        force_laws: Sequence[ForceLaw] = (),
    ) -> None:
        self.runner = runner
        self.lockstep = LockstepRollout(runner, force_laws) if force_laws else None
        self.custom_rollout = custom_rollout
        self.control_transform = control_transform
        self.stats = stats
        self._controls: dict[tuple[tuple[int, int], ...], np.ndarray] = {}

    def fresh(self) -> CandidateRollouts:
        """The same rollouts without kept controls (for a head view, whose are shorter)."""
        out = copy.copy(self)
        out._controls = {}
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
    ) -> dict[int, SimBatch]:
        """Simulates the columns ``sim_cols[i]`` of ``X`` for every sequence ``i`` that has
        some, grouped by (ModelSequences, nstep); returns the batches by sequence.
        ``base_models``: the compiled model of each ModelSequences (for the control
        transform)."""
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
                    law_values=self.law_values(work, layout, X, [sim_cols[i] for i in group]),
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

    def law_values(
        self, work: ParameterDict, layout: Layout, X: np.ndarray, cols: list[np.ndarray]
    ) -> list[dict[str, np.ndarray]] | None:
        """Per force law, ``{parameter: (sum of candidates, size)}`` values of the columns
        ``cols`` of ``X`` (a frozen parameter's value for every candidate); ``None`` without
        laws."""
        if self.lockstep is None:
            return None
        check_law_params(self.lockstep.laws, work)
        flat = np.concatenate(cols)
        out = []
        for law in self.lockstep.laws:
            vals = {}
            for key in law.parameters:
                name = parameter_name(law, key)
                rows = layout.spans.get(name)
                vals[key] = (
                    X[rows][:, flat].T
                    if rows is not None
                    else np.repeat(work[name].value[None], flat.size, axis=0)
                )
            out.append(vals)
        return out

    def _recorded_controls(
        self, sequences: Sequence[PreparedSequence], key: tuple[tuple[int, int], ...]
    ) -> np.ndarray:
        """The stacked recorded controls of ``key`` (``(sequence, candidates)`` pairs); they
        never change: the batch is kept for calls of the same widths."""
        ctrl = self._controls.get(key)
        if ctrl is None:
            ctrl = np.stack([sequences[i].control for i, n in key for _ in range(n)])
            ctrl.flags.writeable = False
            if len(self._controls) >= _CONTROL_BATCHES:
                self._controls.pop(next(iter(self._controls)))
            self._controls[key] = ctrl
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
        law_values: list[dict[str, np.ndarray]] | None = None,
    ) -> None:
        """Simulates, in one call, sequence ``group[g]`` from ``x0s[g]`` with ``models[g]``
        (one per candidate) and stores its :class:`SimBatch` in ``preds``. ``controls``: the
        batch's controls when a control transform made them per candidate (default: each
        sequence's recorded controls). ``law_values``: per force law, its parameters' values
        per candidate (with force laws)."""
        counts = [len(m) for m in models]
        batch_models = [m for ms_ in models for m in ms_]
        x0 = np.concatenate(x0s)
        key = tuple(zip(group, counts, strict=True))
        ctrl = self._recorded_controls(sequences, key) if controls is None else controls
        self.stats.rollouts += len(batch_models)
        self.stats.steps += len(batch_models) * ctrl.shape[1]
        if self.custom_rollout is not None:
            state, sensordata, ok = self._custom(batch_models, ctrl, x0, cand_params)
        elif self.lockstep is not None and law_values is not None:
            state, sensordata, ok = self.lockstep.run(
                batch_models, x0, ctrl, law_values, align=False
            )
        else:
            state, sensordata, ok = self.runner.run(batch_models, x0, ctrl, align=False)
        start = 0
        for i, n in key:
            sl = slice(start, start + n)
            start += n
            preds[i] = SimBatch(state[sl], sensordata[sl], ok[sl], x0[sl])

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

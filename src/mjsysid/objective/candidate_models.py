"""The compiled model of every candidate: pooled models edited in place, or compiled specs.

Each distinct candidate model is built once per ModelSequences: by writing values into a
pooled model reused between calls (``Parameter.model_modifier`` + ``mj_setConst``, only the
parameters whose values changed) when every active parameter offers that exact fast path,
else by running the spec modifiers on a private working spec and compiling it once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from mjsysid.data.sequences import ModelSequences
from mjsysid.objective.layout import Layout
from mjsysid.objective.protocols import BuildModelFn
from mjsysid.objective.residual_stats import ResidualStats
from mjsysid.objective.sim_cache import distinct_columns
from mjsysid.params.apply import (
    WritePlan,
    compile_spec,
    mass_diagonal_index,
    refresh_constants,
    run_modifiers,
)
from mjsysid.params.parameter import ParameterDict


@dataclass
class _Slot:
    """A reusable candidate model and the free-parameter vector it currently holds."""

    model: mujoco.MjModel
    x: np.ndarray | None = None
    key: object = None


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
        self._pool: list[list[_Slot]] = [[] for _ in self.models_sequences]
        self._set_const_data = [mujoco.MjData(ms.model) for ms in self.models_sequences]
        self._mass_diag = [mass_diagonal_index(ms.model) for ms in self.models_sequences]

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
        self,
        params: ParameterDict,
        mi: int,
        slot: int,
        x: np.ndarray,
        layout: Layout,
        key: object,
    ) -> mujoco.MjModel:
        """The fast path of :meth:`build`: the pooled model of ``slot`` edited to hold ``x``."""
        ms = self.models_sequences[mi]
        free = layout.free
        pool = self._pool[mi]
        while len(pool) <= slot:
            pool.append(_Slot(ms.model.__copy__()))
        entry = pool[slot]
        plan = layout.plans.get(mi)
        if plan is None:  # (its errors quote the parameters' values: this candidate's)
            params.assign_checked_vector(x, free)
            plan = layout.plans[mi] = WritePlan(ms.model, free)
        if entry.x is None or entry.key != key or entry.x.shape != x.shape:
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
            params.assign_checked_vector(x, free)
        plan.write(entry.model, x, others)
        refresh_constants(entry.model, self._set_const_data[mi], self._mass_diag[mi])
        entry.x, entry.key = x.copy(), key
        return entry.model

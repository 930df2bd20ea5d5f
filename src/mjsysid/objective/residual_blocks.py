"""The residual block of one sequence for all candidates of a call.

Three forms: the built-in residual ``(y − ȳ)·scale`` written in place into the caller's
``(k, n)`` array (:func:`default_block`), a batched modifier's block for all candidates at once
(:func:`batched_block`), and a custom ``modify_residual`` called candidate by candidate
(:func:`custom_block`). Rows of the candidates whose simulation diverged are NaN.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mujoco
import numpy as np

from mjsysid.data.sequences import ModelSequences
from mjsysid.data.timeseries import TimeSeries
from mjsysid.objective.alignment import PreparedSequence
from mjsysid.objective.layout import Layout
from mjsysid.objective.predictions import SequencePrediction, at_measured, sequence_prediction
from mjsysid.objective.protocols import BatchResidualModifier, ModifyResidualFn
from mjsysid.objective.sim_cache import SimBatch
from mjsysid.params.parameter import ParameterDict
from mjsysid.sim.rollout import align_states
from mjsysid.util.errors import must_be


def default_block(
    out: np.ndarray,
    span: slice,
    seq: PreparedSequence,
    P: np.ndarray,
    sim: SimBatch,
    inverse: np.ndarray,
    details: ModelSequences | None,
) -> SequencePrediction | None:
    """Writes ``(y − ȳ)·scale`` of every candidate into ``out[:, span]`` (``out``: ``(k, n)``).

    Args:
      P: ``(u, nstep, D)`` predictions of the distinct simulations ``sim``.
      inverse: ``(k,)`` simulation of each candidate.
      details: The sequence's ModelSequences when the prediction of candidate 0 is wanted.
    """
    k = out.shape[0]
    at_meas = at_measured(seq, P)
    ok = sim.ok
    target = out[:, span].reshape(k, *seq.meas.data.shape)
    if len(ok) == k:  # k distinct simulations: inverse == arange(k)
        np.subtract(seq.meas.data[None], at_meas, out=target)
        target *= seq.scale
    else:
        target[...] = ((seq.meas.data[None] - at_meas) * seq.scale)[inverse]
    if not ok.all():
        out[np.flatnonzero(~ok[inverse]), span] = np.nan
    if details is None:
        return None
    block = ((seq.meas.data - at_meas[0]) * seq.scale).reshape(-1)
    if not ok[0]:
        block[:] = np.nan
    state0 = align_states(sim.state[0], sim.x0[0])
    return sequence_prediction(details, seq, P[0], at_meas[0], seq.meas, block, state0)


def batched_block(
    transform: BatchResidualModifier,
    work: ParameterDict,
    X: np.ndarray,
    layout: Layout,
    seq: PreparedSequence,
    P: np.ndarray,
    sim: SimBatch,
    inverse: np.ndarray,
    sensor_weights: Mapping[str, Any],
    view: np.ndarray | None,
) -> np.ndarray:
    """``(k, m)`` block of a batched modifier (``view``: where to write it, if its size is
    known); the same values as its ``apply`` candidate by candidate, at less cost."""
    k = X.shape[1]
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
        sensor_weights,
        view,
        seq.rms_ref,
    )
    if not sim.ok.all():
        block[~sim.ok[inverse]] = np.nan
    return block


def custom_block(
    modify_residual: ModifyResidualFn,
    batched: bool,
    work: ParameterDict,
    X: np.ndarray,
    layout: Layout,
    seq: PreparedSequence,
    P: np.ndarray,
    sim: SimBatch,
    inverse: np.ndarray,
    models: list[mujoco.MjModel],
    sensor_weights: Mapping[str, Any],
    details: ModelSequences | None,
) -> tuple[np.ndarray, SequencePrediction | None]:
    """``(m, k)`` block of a custom ``modify_residual`` called for every candidate (``models``:
    the candidates' models; ``batched``: it is a batched modifier's ``apply``, which also gets
    the normalisation reference), and the prediction of candidate 0 when ``details``.

    Raises:
      ValueError: The block length differs between candidates.
    """
    state = align_states(sim.state, sim.x0)
    extra = {"rms_reference": seq.rms_ref} if batched else {}
    cols: list[np.ndarray] = []
    pred: SequencePrediction | None = None
    for j in range(X.shape[1]):
        u = inverse[j]
        work.assign_checked_vector(X[:, j], layout.free)
        pred_ts = TimeSeries.trusted(seq.grid, P[u], seq.meas.signal_mapping)
        res, pred_used, meas_used = modify_residual(
            work,
            pred_ts,
            seq.meas,
            models[j],
            details is not None,
            state=TimeSeries.trusted(seq.grid, state[u], None),
            sensor_weights=sensor_weights,
            **extra,
        )
        r = np.asarray(res, dtype=np.float64).reshape(-1)
        if not sim.ok[u]:
            r = np.full_like(r, np.nan)
        cols.append(r)
        if details is not None and j == 0:
            pred = sequence_prediction(details, seq, P[u], None, meas_used, r, state[u], pred_used)
    sizes = {c.size for c in cols}
    if len(sizes) > 1:
        raise ValueError(
            must_be(
                "modify_residual output",
                "the same length for every candidate (it must not depend on parameter values)",
                sorted(sizes),
            )
        )
    return np.stack(cols, axis=1), pred

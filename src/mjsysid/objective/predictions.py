"""Predictions of the measured columns: gathered from the rollouts, read at measured times.

The index maps (:class:`~mjsysid.objective.alignment.PreparedSequence`) are precomputed per
sequence; every function here is vectorised over the candidates (leading axis).

The residual block of one sequence for all candidates of a call.

Three forms: the built-in residual ``(y − ȳ)·scale`` written in place into the caller's
``(k, n)`` array (:func:`default_block`), a batched modifier's block for all candidates at once
(:func:`batched_block`), and a custom ``modify_residual`` called candidate by candidate
(:func:`custom_block`). Rows of the candidates whose simulation diverged are NaN.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import mujoco
import numpy as np

from mjsysid.data.sequences import ModelSequences
from mjsysid.data.timeseries import TimeSeries
from mjsysid.objective.alignment import PreparedSequence
from mjsysid.objective.candidates import SimBatch
from mjsysid.objective.layout import Layout
from mjsysid.objective.protocols import BatchResidualModifier, ModifyResidualFn
from mjsysid.params.parameter import ParameterDict
from mjsysid.sim.rollout import align_states
from mjsysid.util.errors import must_be


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


def gather(
    seq: PreparedSequence, raw_state: np.ndarray, sensordata: np.ndarray, x0: np.ndarray
) -> np.ndarray:
    """Predicted measured columns on the simulation grid, ``(n_unique, nstep, D)``.

    ``raw_state`` is MuJoCo's (one step ahead): the state at grid instant ``k > 0`` is
    ``raw_state[k - 1]``, at instant 0 the initial state ``x0``.
    """
    if seq.all_sensors:
        return sensordata
    P = np.empty((sensordata.shape[0], seq.nstep, seq.meas.data.shape[1]))
    P[:, :, seq.sens_cols] = sensordata[:, :, seq.sens_src]
    if seq.state_cols.size:
        P[:, 0, seq.state_cols] = x0[:, seq.state_src]
        P[:, 1:, seq.state_cols] = raw_state[:, :-1, seq.state_src]
    return P


def at_measured(seq: PreparedSequence, P: np.ndarray) -> np.ndarray:
    """``P (u, nstep, D)`` linearly interpolated at the measured times, ``(u, N, D)``:
    ``ȳ(t) = (1 − w)·ȳ[i] + w·ȳ[i+1]`` (rows only when every time is a grid instant)."""
    if seq.on_grid:
        return P if seq.identity_grid else P[:, seq.interp_i]
    return cast(
        np.ndarray,
        P[:, seq.interp_i] * (1.0 - seq.interp_w)[None, :, None]
        + P[:, np.minimum(seq.interp_i + 1, seq.nstep - 1)] * seq.interp_w[None, :, None],
    )


def sequence_prediction(
    ms: ModelSequences,
    seq: PreparedSequence,
    P: np.ndarray,
    at_meas: np.ndarray | None,
    meas_used: TimeSeries,
    r: np.ndarray,
    state: np.ndarray,
    pred_used: TimeSeries | None = None,
) -> SequencePrediction:
    """The :class:`SequencePrediction` of one candidate: ``P (nstep, D)`` on the grid,
    ``at_meas (N, D)`` at the measured times (or ``pred_used``, what a custom residual
    compared), the residual block ``r`` and the aligned states ``(nstep, nstate)``."""
    predicted = TimeSeries.trusted(seq.grid, P, seq.meas.signal_mapping)
    if pred_used is None:
        assert at_meas is not None
        pred_used = TimeSeries.trusted(seq.meas.times, at_meas, seq.meas.signal_mapping)
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


@dataclass(frozen=True)
class SequenceBlock:
    """What one sequence's residual block is made from, for a batch of ``k`` candidates.

    Attributes:
      work: The residual's private parameter copy (values are assigned candidate by
        candidate). X: ``(p, k)`` the candidates. layout: Where each parameter sits in ``X``.
      seq: The prepared sequence. P: ``(u, nstep, nsensor)`` predictions of its ``u`` distinct
        simulations. sim: Those simulations. inverse: ``(k,)`` candidate -> simulation.
      sensor_weights: The residual's per-signal weights.
    """

    work: ParameterDict
    X: np.ndarray
    layout: Layout
    seq: PreparedSequence
    P: np.ndarray
    sim: SimBatch
    inverse: np.ndarray
    sensor_weights: Mapping[str, Any]


def batched_block(
    transform: BatchResidualModifier, b: SequenceBlock, view: np.ndarray | None
) -> np.ndarray:
    """``(k, m)`` block of a batched modifier (``view``: where to write it, if its size is
    known); the same values as its ``apply`` candidate by candidate, at less cost."""
    k = b.X.shape[1]
    block = transform.batch_residuals(
        b.work,
        lambda name: (
            b.X[b.layout.spans[name]].T
            if name in b.layout.spans
            else np.repeat(b.work[name].value[None], k, axis=0)
        ),
        b.inverse,
        b.P,
        b.seq.grid,
        b.seq.meas.signal_mapping,
        b.seq.meas,
        b.sensor_weights,
        view,
        b.seq.rms_ref,
    )
    if not b.sim.ok.all():
        block[~b.sim.ok[b.inverse]] = np.nan
    return block


def custom_block(
    modify_residual: ModifyResidualFn,
    batched: bool,
    b: SequenceBlock,
    models: list[mujoco.MjModel],
    details: ModelSequences | None,
) -> tuple[np.ndarray, SequencePrediction | None]:
    """``(m, k)`` block of a custom ``modify_residual`` called for every candidate (``models``:
    the candidates' models; ``batched``: it is a batched modifier's ``apply``, which also gets
    the normalisation reference), and the prediction of candidate 0 when ``details``.

    Raises:
      ValueError: The block length differs between candidates.
    """
    seq, P, sim, inverse, work = b.seq, b.P, b.sim, b.inverse, b.work
    state = align_states(sim.state, sim.x0)
    extra = {"rms_reference": seq.rms_ref} if batched else {}
    cols: list[np.ndarray] = []
    pred: SequencePrediction | None = None
    for j in range(b.X.shape[1]):
        u = inverse[j]
        work.assign_checked_vector(b.X[:, j], b.layout.free)
        pred_ts = TimeSeries.trusted(seq.grid, P[u], seq.meas.signal_mapping)
        res, pred_used, meas_used = modify_residual(
            work,
            pred_ts,
            seq.meas,
            models[j],
            details is not None,
            state=TimeSeries.trusted(seq.grid, state[u], None),
            sensor_weights=b.sensor_weights,
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

"""Predictions of the measured columns: gathered from the rollouts, read at measured times.

The index maps (:class:`~mjsysid.objective.alignment.PreparedSequence`) are precomputed per
sequence; every function here is vectorised over the candidates (leading axis).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mjsysid.data.sequences import ModelSequences
from mjsysid.data.timeseries import TimeSeries
from mjsysid.objective.alignment import PreparedSequence


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
    return (
        P[:, seq.interp_i] * (1.0 - seq.interp_w)[None, :, None]
        + P[:, np.minimum(seq.interp_i + 1, seq.nstep - 1)] * seq.interp_w[None, :, None]
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

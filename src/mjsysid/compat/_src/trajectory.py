"""``mujoco.sysid._src.trajectory``: trajectories, sequences, initial states, the rollout
and the peer's array helpers.

:class:`ModelSequences` takes the peer's ``allow_missing_sensors`` (mjsysid always lets the
measured data hold a subset of the sensors, so it changes nothing). :func:`sysid_rollout`
is mjsysid's: it uses every control row and stamps sensor row ``k`` at ``t_k``, the instant
it was read (the peer stamps ``t_k + dt``; docs/coming-from-mujoco-sysid.md). The array
helpers exist for code that calls them directly:

* :func:`timeseries2array` stacks control series and, like the peer, **drops the last row**
  (``n`` control rows -> ``n − 1`` steps).
* :func:`sequence2array` stacks initial states.
* :func:`arrays2traj` turns ``mujoco.rollout.rollout`` outputs into trajectories; unlike the
  peer it stamps sensor row ``k`` at ``control_times[k]`` (not ``+ dt``).
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.data.sequences import ModelSequences as _CoreModelSequences
from mjsysid.data.states import create_initial_state
from mjsysid.data.timeseries import SignalMapping, TimeSeries
from mjsysid.sim.rollout import align_states, sysid_rollout
from mjsysid.sim.trajectory import SystemTrajectory, TrajectorySeries, state_signal_mapping
from mjsysid.util.errors import must_be

__all__ = [
    "ModelSequences",
    "SystemTrajectory",
    "arrays2traj",
    "create_initial_state",
    "sequence2array",
    "sysid_rollout",
    "timeseries2array",
]


class ModelSequences(_CoreModelSequences):
    """:class:`mjsysid.ModelSequences` with the peer's 7th argument,
    ``allow_missing_sensors`` (kept as an attribute; it changes nothing here)."""

    def __init__(
        self,
        name: str,
        spec: mujoco.MjSpec,
        sequence_name: str | Sequence[str],
        initial_state: npt.ArrayLike | Sequence[npt.ArrayLike],
        control: TimeSeries | Sequence[TimeSeries] | None,
        sensordata: TimeSeries | Sequence[TimeSeries],
        allow_missing_sensors: bool = False,
    ) -> None:
        super().__init__(name, spec, sequence_name, initial_state, control, sensordata)  # type: ignore[arg-type]
        self.allow_missing_sensors = bool(allow_missing_sensors)


def timeseries2array(
    control_signal: TimeSeries | Sequence[TimeSeries],
) -> tuple[np.ndarray, np.ndarray]:
    """``(control (nbatch, n − 1, nu), times (nbatch, n − 1))`` from one or more control
    series of ``n`` rows each (the last row dropped, as in ``mujoco.sysid``).

    Raises:
      ValueError: Series of different lengths, or fewer than 2 rows.
    """
    series = [control_signal] if isinstance(control_signal, TimeSeries) else list(control_signal)
    lengths = {len(ts) for ts in series}
    if len(lengths) != 1 or min(lengths) < 2:
        raise ValueError(must_be("control_signal", "series of one length >= 2", sorted(lengths)))
    ctrl = np.stack([np.asarray(ts.data).reshape(len(ts), -1)[:-1] for ts in series])
    times = np.stack([ts.times[:-1] for ts in series])
    return ctrl, times


def sequence2array(initial_states: npt.ArrayLike | Sequence[npt.ArrayLike]) -> np.ndarray:
    """``(nbatch, nstate)`` from one state ``(nstate,)`` or a sequence of them."""
    arr = np.asarray(initial_states, dtype=np.float64)
    return arr[None] if arr.ndim == 1 else np.stack([np.asarray(s, np.float64) for s in arr])


def arrays2traj(
    models: Sequence[mujoco.MjModel],
    initial_states: np.ndarray,
    control: np.ndarray,
    control_times: np.ndarray,
    state: np.ndarray,
    sensordata: np.ndarray,
    signal_mapping: SignalMapping | None = None,
    state_mapping: SignalMapping | None = None,
    ctrl_mapping: SignalMapping | None = None,
) -> list[SystemTrajectory]:
    """Trajectories from raw rollout arrays.

    Args:
      models: ``nbatch`` models.
      initial_states: ``(nbatch, nstate)``.
      control: ``(nbatch, nstep, nu)``. control_times: ``(nbatch, nstep)`` (s).
      state: ``(nbatch, nstep, nstate)`` as ``mujoco.rollout.rollout`` returns it (the state
        after each step); it is re-aligned so row ``k`` is the state at ``control_times[k]``.
      sensordata: ``(nbatch, nstep, nsensordata)``, row ``k`` read at ``control_times[k]``.
      signal_mapping, state_mapping, ctrl_mapping: Mappings of the series (default: the
        model's sensors, :func:`~mjsysid.sim.trajectory.state_signal_mapping`, one control
        per actuator).
    """
    aligned = align_states(np.asarray(state), np.asarray(initial_states))
    out = []
    for i, m in enumerate(models):
        t = np.asarray(control_times[i], dtype=np.float64)
        smap = signal_mapping or TimeSeries.from_names(t, sensordata[i], m).signal_mapping
        cmap = ctrl_mapping or TimeSeries.from_control_names(t, control[i], m).signal_mapping
        xmap = state_mapping or state_signal_mapping(m)
        out.append(
            SystemTrajectory.from_series(
                m,
                TrajectorySeries.trusted(t, np.asarray(control[i]), cmap),
                TrajectorySeries.trusted(t, np.asarray(sensordata[i]), smap),
                np.asarray(initial_states[i], dtype=np.float64),
                TrajectorySeries.trusted(t, aligned[i], xmap),
            )
        )
    return out

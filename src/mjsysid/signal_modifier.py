"""The low-level signal functions under the name the API specification gives them.

``from mjsysid import signal_modifier`` (or ``mjsysid._src.signal_modifier``) is
:mod:`mjsysid.objective.signal_ops`: delays, gains, biases, weighted differences and
normalisation of :class:`~mjsysid.TimeSeries`.

Two functions differ from ``mujoco.sysid``'s of the same name: :func:`apply_delay` refuses to
extrapolate and :func:`apply_delayed_ts_window` keeps mjsysid's window; ``mjsysid.apply_delay``
and ``mjsysid.apply_delayed_ts_window`` at top level have the peer's conventions
(:mod:`mjsysid.objective.peer_signals`).
"""

from mjsysid.objective.signal_ops import (
    apply_bias,
    apply_delay,
    apply_delayed_ts_window,
    apply_gain,
    apply_resample_and_delay,
    apply_time_window,
    column_rms,
    delay_window,
    get_sensor_indices,
    normalize_residual,
    prepare_sensor_weights,
    signal_rms,
    weighted_diff,
)

__all__ = [
    "apply_bias",
    "apply_delay",
    "apply_delayed_ts_window",
    "apply_gain",
    "apply_resample_and_delay",
    "apply_time_window",
    "column_rms",
    "delay_window",
    "get_sensor_indices",
    "normalize_residual",
    "prepare_sensor_weights",
    "signal_rms",
    "weighted_diff",
]

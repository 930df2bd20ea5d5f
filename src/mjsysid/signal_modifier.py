"""The low-level signal functions under the name the API specification gives them.

``from mjsysid import signal_modifier`` is :mod:`mjsysid.objective.signal_ops`: delays, gains,
biases, weighted differences and normalisation of :class:`~mjsysid.TimeSeries`. (Peer code
reaches the peer's conventions through :mod:`mjsysid.compat`, whose
``_src.signal_modifier`` keeps them.)
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

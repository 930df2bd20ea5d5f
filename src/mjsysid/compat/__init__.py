"""The door for code written for ``mujoco.sysid``: ``import mjsysid.compat as sysid``.

Every top-level name of ``mujoco.sysid`` 4.0.1 is here with the peer's argument orders,
defaults, return types and permissiveness, and its private modules are real modules under the
same paths (``from mjsysid.compat._src.trajectory import timeseries2array``,
``from mjsysid.compat._src import signal_modifier``), so a peer script runs after one changed
import. Underneath it is mjsysid: the same batched rollouts, fits, intervals and report.

What differs from the peer on purpose (its bugs are not reproduced: time stamps, the state
mapping, ...) and what the other door, ``import mjsysid``, does differently is in
docs/coming-from-mujoco-sysid.md. The core of mjsysid never imports this package.
"""

from mjsysid.compat._src import model_modifier, parameter, signal_modifier
from mjsysid.compat._src.io import save_results
from mjsysid.compat._src.model_modifier import (
    apply_body_inertia,
    apply_dgain,
    apply_param_modifiers,
    apply_param_modifiers_spec,
    apply_pdgain,
    apply_pgain,
    body_inertia_param,
    remove_visuals,
)
from mjsysid.compat._src.optimize import calculate_intervals, optimize
from mjsysid.compat._src.parameter import InertiaType, Parameter, ParameterDict
from mjsysid.compat._src.plotting import render_rollout
from mjsysid.compat._src.residual import (
    BuildModelFn,
    CustomRolloutFn,
    ModifyResidualFn,
    build_residual_fn,
    construct_ts_from_defaults,
    model_residual,
    residual,
)
from mjsysid.compat._src.signal_modifier import (
    apply_bias,
    apply_delay,
    apply_delayed_ts_window,
    apply_gain,
    apply_resample_and_delay,
    get_sensor_indices,
    normalize_residual,
    weighted_diff,
)
from mjsysid.compat._src.signal_transform import SignalTransform
from mjsysid.compat._src.timeseries import SignalType, TimeSeries
from mjsysid.compat._src.trajectory import (
    ModelSequences,
    SystemTrajectory,
    create_initial_state,
    sysid_rollout,
)
from mjsysid.compat.report.defaults import default_report

__all__ = [
    "BuildModelFn",
    "CustomRolloutFn",
    "InertiaType",
    "ModelSequences",
    "ModifyResidualFn",
    "Parameter",
    "ParameterDict",
    "SignalTransform",
    "SignalType",
    "SystemTrajectory",
    "TimeSeries",
    "apply_bias",
    "apply_body_inertia",
    "apply_delay",
    "apply_delayed_ts_window",
    "apply_dgain",
    "apply_gain",
    "apply_param_modifiers",
    "apply_param_modifiers_spec",
    "apply_pdgain",
    "apply_pgain",
    "apply_resample_and_delay",
    "body_inertia_param",
    "build_residual_fn",
    "calculate_intervals",
    "construct_ts_from_defaults",
    "create_initial_state",
    "default_report",
    "get_sensor_indices",
    "model_modifier",
    "model_residual",
    "normalize_residual",
    "optimize",
    "parameter",
    "remove_visuals",
    "render_rollout",
    "residual",
    "save_results",
    "signal_modifier",
    "sysid_rollout",
    "weighted_diff",
]

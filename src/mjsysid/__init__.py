"""mjsysid: system identification for MuJoCo models.

The public API; it only re-exports. The implementation lives in one subpackage per pipeline
stage (see docs/architecture.md): ``params`` -> ``data`` -> ``sim`` -> ``objective`` ->
``fit`` -> ``output``, with ``app`` (command line, experiment files, demo) on top.

``import mjsysid as sysid`` also offers every top-level name of ``mujoco.sysid``
(docs/coming-from-mujoco-sysid.md). Two signal functions have the peer's conventions here
and mjsysid's stricter ones in :mod:`mjsysid.signal_modifier`: ``apply_delay`` (holds the end
values) and ``apply_delayed_ts_window`` (the peer's window).
"""

from mjsysid import signal_modifier
from mjsysid._src import _model_modifier as model_modifier
from mjsysid._src import _parameter as parameter
from mjsysid._version import __version__
from mjsysid.data.peer_stamps import PeerTimestampWarning
from mjsysid.data.recording import (
    Recording,
    initial_state_from_sensors,
    load_recording,
    write_recording,
)
from mjsysid.data.sequences import ModelSequences
from mjsysid.data.states import create_initial_state
from mjsysid.data.timeseries import (
    DtStatistics,
    SignalType,
    TimeSeries,
    resolve_signal_name,
    signal_source_indices,
)
from mjsysid.fit.confidence import Confidence
from mjsysid.fit.intervals import calculate_intervals
from mjsysid.fit.lm import LMOptions, LMResult, levenberg_marquardt
from mjsysid.fit.optimize import (
    OptimizeResult,
    fd_jacobian,
    optimize,
    sweep_parameter,
)
from mjsysid.objective.control_transform import ControlTransform
from mjsysid.objective.initial_state import initial_state_params
from mjsysid.objective.peer_residual import construct_ts_from_defaults, model_residual, residual
from mjsysid.objective.peer_signals import apply_delay, apply_delayed_ts_window
from mjsysid.objective.protocols import (
    BuildModelFn,
    CustomRolloutFn,
    ModelModifierFn,
    ModifierFn,
    ModifyResidualFn,
)
from mjsysid.objective.residual import ResidualFunction, SequencePrediction, build_residual_fn
from mjsysid.objective.signal_ops import (
    apply_bias,
    apply_gain,
    apply_resample_and_delay,
    get_sensor_indices,
    normalize_residual,
    weighted_diff,
)
from mjsysid.objective.signal_transform import SignalTransform
from mjsysid.objective.windows import split_windows
from mjsysid.output import report
from mjsysid.output.plotting import OffscreenRenderingError, plot_sensor_comparison, render_rollout
from mjsysid.output.report import default_report
from mjsysid.output.results import Results, load_results, save_results
from mjsysid.params.apply import (
    ModifierError,
    apply_dgain,
    apply_param_modifiers,
    apply_param_modifiers_spec,
    apply_pdgain,
    apply_pgain,
    remove_visuals,
)
from mjsysid.params.inertia import (
    InertiaType,
    apply_body_inertia,
    body_inertia_param,
    full_inertia_from_model,
)
from mjsysid.params.kinds import make_parameter
from mjsysid.params.parameter import Parameter, ParameterDict
from mjsysid.sim.rollout import RolloutDivergedError, SystemTrajectory, sysid_rollout
from mjsysid.sim.trajectory import TrajectorySeries

__all__ = [
    "BuildModelFn",
    "Confidence",
    "ControlTransform",
    "CustomRolloutFn",
    "DtStatistics",
    "InertiaType",
    "LMOptions",
    "LMResult",
    "ModelModifierFn",
    "ModelSequences",
    "ModifierError",
    "ModifierFn",
    "ModifyResidualFn",
    "OffscreenRenderingError",
    "OptimizeResult",
    "Parameter",
    "ParameterDict",
    "PeerTimestampWarning",
    "Recording",
    "ResidualFunction",
    "Results",
    "RolloutDivergedError",
    "SequencePrediction",
    "SignalTransform",
    "SignalType",
    "SystemTrajectory",
    "TimeSeries",
    "TrajectorySeries",
    "__version__",
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
    "fd_jacobian",
    "full_inertia_from_model",
    "get_sensor_indices",
    "initial_state_from_sensors",
    "initial_state_params",
    "levenberg_marquardt",
    "load_recording",
    "load_results",
    "make_parameter",
    "model_modifier",
    "model_residual",
    "normalize_residual",
    "optimize",
    "parameter",
    "plot_sensor_comparison",
    "remove_visuals",
    "render_rollout",
    "report",
    "residual",
    "resolve_signal_name",
    "save_results",
    "signal_modifier",
    "signal_source_indices",
    "split_windows",
    "sweep_parameter",
    "sysid_rollout",
    "weighted_diff",
    "write_recording",
]

"""mjsysid: system identification for MuJoCo models.

The public API; implementation lives in the submodules.
"""

from mjsysid import signal_modifier
from mjsysid.control_transform import ControlTransform
from mjsysid.inertia import (
    InertiaType,
    apply_body_inertia,
    body_inertia_param,
    full_inertia_from_model,
)
from mjsysid.intervals import calculate_intervals
from mjsysid.lm import LMOptions, LMResult, levenberg_marquardt
from mjsysid.model_modifier import (
    ModifierError,
    apply_dgain,
    apply_param_modifiers,
    apply_param_modifiers_spec,
    apply_pdgain,
    apply_pgain,
    remove_visuals,
)
from mjsysid.model_sequences import ModelSequences
from mjsysid.optimize import (
    OptimizeResult,
    fd_jacobian,
    optimize,
    sweep_parameter,
)
from mjsysid.param_kinds import make_parameter
from mjsysid.parameter import Parameter, ParameterDict
from mjsysid.plotting import OffscreenRenderingError, plot_sensor_comparison, render_rollout
from mjsysid.protocols import (
    BuildModelFn,
    CustomRolloutFn,
    ModelModifierFn,
    ModifierFn,
    ModifyResidualFn,
)
from mjsysid.recording import (
    Recording,
    initial_state_from_sensors,
    load_recording,
    write_recording,
)
from mjsysid.report import default_report
from mjsysid.residual import ResidualFunction, SequencePrediction, build_residual_fn
from mjsysid.results import Confidence, Results, load_results, save_results
from mjsysid.shooting import initial_state_params, split_windows
from mjsysid.signal_transform import SignalTransform
from mjsysid.timeseries import (
    DtStatistics,
    SignalType,
    TimeSeries,
    resolve_signal_name,
    signal_source_indices,
)
from mjsysid.trajectory import (
    RolloutDivergedError,
    SystemTrajectory,
    create_initial_state,
    sysid_rollout,
)

__version__ = "0.1.0"

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
    "Recording",
    "ResidualFunction",
    "Results",
    "RolloutDivergedError",
    "SequencePrediction",
    "SignalTransform",
    "SignalType",
    "SystemTrajectory",
    "TimeSeries",
    "apply_body_inertia",
    "apply_dgain",
    "apply_param_modifiers",
    "apply_param_modifiers_spec",
    "apply_pdgain",
    "apply_pgain",
    "body_inertia_param",
    "build_residual_fn",
    "calculate_intervals",
    "create_initial_state",
    "default_report",
    "fd_jacobian",
    "full_inertia_from_model",
    "initial_state_from_sensors",
    "initial_state_params",
    "levenberg_marquardt",
    "load_recording",
    "load_results",
    "make_parameter",
    "optimize",
    "plot_sensor_comparison",
    "remove_visuals",
    "render_rollout",
    "resolve_signal_name",
    "save_results",
    "signal_modifier",
    "signal_source_indices",
    "split_windows",
    "sweep_parameter",
    "sysid_rollout",
    "write_recording",
]

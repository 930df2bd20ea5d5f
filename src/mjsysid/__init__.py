"""mjsysid: system identification for MuJoCo models.

The public API; it only re-exports. The implementation lives in one subpackage per pipeline
stage (see docs/architecture.md): ``params`` -> ``data`` -> ``sim`` -> ``objective`` ->
``fit`` -> ``output``, with ``app`` (command line, experiment files, demo) on top.
"""

from mjsysid import signal_modifier
from mjsysid._version import __version__
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
from mjsysid.objective.protocols import (
    BuildModelFn,
    CustomRolloutFn,
    ModelModifierFn,
    ModifierFn,
    ModifyResidualFn,
)
from mjsysid.objective.residual import ResidualFunction, SequencePrediction, build_residual_fn
from mjsysid.objective.signal_transform import SignalTransform
from mjsysid.objective.windows import split_windows
from mjsysid.output import report
from mjsysid.output.plotting import OffscreenRenderingError, plot_sensor_comparison, render_rollout
from mjsysid.output.report import default_report
from mjsysid.output.results import Results, load_results, save_results
from mjsysid.params import apply as model_modifier
from mjsysid.params import parameter
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
    "__version__",
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
    "model_modifier",
    "optimize",
    "parameter",
    "plot_sensor_comparison",
    "remove_visuals",
    "render_rollout",
    "report",
    "resolve_signal_name",
    "save_results",
    "signal_modifier",
    "signal_source_indices",
    "split_windows",
    "sweep_parameter",
    "sysid_rollout",
    "write_recording",
]

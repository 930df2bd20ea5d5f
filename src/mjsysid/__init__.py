"""mjsysid: system identification for MuJoCo models.

The public API of the API specification, one meaning per name; it only re-exports. The
implementation lives in one subpackage per pipeline stage (see docs/architecture.md):
``params`` -> ``data`` -> ``sim`` -> ``objective`` -> ``fit`` -> ``output``, with ``app``
(command line, experiment files) on top and ``lab`` (demo, planner, evaluation, capture
hardware) beside it.

Code written for ``mujoco.sysid`` has its own door, the :mod:`mjsysid.compat` package (the
peer's argument orders, return types and conventions; docs/coming-from-mujoco-sysid.md);
nothing here imports it.
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
from mjsysid.data.timing import PeerTimestampWarning
from mjsysid.fit.confidence import Confidence
from mjsysid.fit.intervals import calculate_intervals
from mjsysid.fit.jacobian import fd_jacobian, sweep_parameter
from mjsysid.fit.lm import LMOptions, LMResult, levenberg_marquardt
from mjsysid.fit.optimize import optimize
from mjsysid.fit.options import FitOptions, GlobalSearchOptions, ThresholdProfileOptions
from mjsysid.fit.result import OptimizeResult
from mjsysid.fit.status import Status
from mjsysid.objective.control_transform import ControlTransform
from mjsysid.objective.initial_state import initial_state_params, law_state_params
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
    apply_delay,
    apply_delayed_ts_window,
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
from mjsysid.sim.laws.core import (
    ForceLaw,
    LawParameter,
    StepContext,
    force_law_params,
    laws_from_params,
    register_law,
)
from mjsysid.sim.laws.friction import (
    CoulombFriction,
    JointFriction,
    QuadraticDrag,
    StribeckFriction,
    ViscousFriction,
)
from mjsysid.sim.laws.joint import ActuatedLaw, JointLaw
from mjsysid.sim.laws.motors import CommandTorque, RobotYamlMotor
from mjsysid.sim.laws.runtime import LawRuntime
from mjsysid.sim.laws.servos import CurrentServo, PositionServo
from mjsysid.sim.rollout import RolloutDivergedError, SystemTrajectory, sysid_rollout
from mjsysid.sim.trajectory import TrajectorySeries

__all__ = [
    "ActuatedLaw",
    "BuildModelFn",
    "CommandTorque",
    "Confidence",
    "ControlTransform",
    "CoulombFriction",
    "CurrentServo",
    "CustomRolloutFn",
    "DtStatistics",
    "FitOptions",
    "ForceLaw",
    "GlobalSearchOptions",
    "InertiaType",
    "JointFriction",
    "JointLaw",
    "LMOptions",
    "LMResult",
    "LawParameter",
    "LawRuntime",
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
    "PositionServo",
    "QuadraticDrag",
    "Recording",
    "ResidualFunction",
    "Results",
    "RobotYamlMotor",
    "RolloutDivergedError",
    "SequencePrediction",
    "SignalTransform",
    "SignalType",
    "Status",
    "StepContext",
    "StribeckFriction",
    "SystemTrajectory",
    "ThresholdProfileOptions",
    "TimeSeries",
    "TrajectorySeries",
    "ViscousFriction",
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
    "create_initial_state",
    "default_report",
    "fd_jacobian",
    "force_law_params",
    "full_inertia_from_model",
    "get_sensor_indices",
    "initial_state_from_sensors",
    "initial_state_params",
    "law_state_params",
    "laws_from_params",
    "levenberg_marquardt",
    "load_recording",
    "load_results",
    "make_parameter",
    "normalize_residual",
    "optimize",
    "plot_sensor_comparison",
    "register_law",
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
    "weighted_diff",
    "write_recording",
]

"""Experiment files: a whole identification problem in one YAML file.

Example (paths are relative to the experiment file)::

    schema_version: 1
    name: arm
    model: arm.xml                  # MJCF, or URDF (loaded through MjSpec)
    sequences:
      - name: run1
        file: run1.npz              # .npz or .csv, see mjsysid.recording
        # optional: time: t, time_scale: 0.001 (s per unit: ms), control: {actuator: column},
        #           sensors: {signal: column(s)},
        #           initial_state: {qpos: [...] or {joint: value}, qvel: ...},
        #           ignore_columns: [column, ...]  (read, deliberately not used)
      - name: check
        file: run3.npz
        holdout: true               # not fitted: simulated to validate the fit
    parameters:
      - {kind: body_mass, target: link1}                  # bounds from the kind's defaults
      - {kind: joint_damping, target: j1, min: 0.0, max: 1.0}
      - {kind: sensor_delay, target: "*_pos", max: 0.05}
    optimizer: {method: lm, max_iters: 100}   # also xtol, gtol, ftol (>= 0; 0: off), eps, horizons
    # (horizons: auto (default), none (one stage) or fractions such as [0.3, 1.0];
    #  global: cmaes, with population, budget, sigma, seed, tol_spread: a CMA-ES stage first;
    #  or starts: 8: local fits from the nominal and 7 points drawn in the bounds)
    residual: {normalize: true, sensor_weights: {j1_pos: 2.0}}
    shooting: {window: 1.0, overlap: 0.2}     # optional: multiple shooting, see below
    executor: 4                               # optional: a local Dask cluster of 4 workers,
    #   or tcp://host:8786 (a running scheduler), or {workers: 4, threads_per_worker: 1}
    export: {urdf: arm.urdf}                  # optional: the URDF the MJCF was made from;
    #   the results folder also gets its identified copy (inertials, damping, friction, limits)

Names. ``name`` (default: the experiment file's name) and every ``sequences[i].name``
(default ``seq<i>``) must be plain file names: non-empty, without ``/``, ``\\``, ``..`` or NUL
(the identified model is written as ``<name>.xml`` inside the results folder, and a name
must not lead out of it).

Columns. Column names must be unique, and every column of a recording must be used: the
time column, the controls, the sensors (default: every model sensor and joint state with a
column of its name), or ``initial_qpos``/``initial_qvel``. A column named like a model
sensor that has no column (``j1_poss`` for ``j1_pos``) is an error; other unused columns are
collected in :attr:`Experiment.warnings` (``mjsysid fit`` prints them). List deliberately
unused columns under ``ignore_columns`` (see :func:`mjsysid.data.recording.load_recording`).

Multiple shooting (``shooting:``, optional; what :func:`mjsysid.split_windows` and
:func:`mjsysid.initial_state_params` do in Python):

* ``window`` (s, finite, > 0): cut every sequence into windows of this length, named
  ``<sequence>#<k>``, each simulated from the state measured at its start (see
  :func:`mjsysid.split_windows` for what the recordings must measure). Without ``window``
  the sequences are not cut.
* ``overlap`` (s, ``0 <= overlap < window``, default 0): overlap of consecutive windows.
* ``estimate_initial_state`` (bool, default true): add the initial joint positions and
  velocities of every window (or of every sequence, without ``window``) to the parameters
  (``<name>/<sequence>#<k>/<joint>_qpos0``, ``..._qvel0``), within ``qpos_margin`` (rad or
  m, default 0.2) and ``qvel_margin`` (rad/s or m/s, default 2.0) of the measured values.
* ``estimate_activation`` (bool, default: when the model has actuator activations): with
  ``estimate_initial_state``, also every window's initial activations (``..._act0``); false
  keeps the activations simulated with the nominal model (a filter state that cancels with
  the window-start velocities makes a degenerate direction).

Intervals (``confidence:``, optional): ``method`` (``linear``, the default, or ``bootstrap``:
a block bootstrap over the sequences or windows, for correlated residuals or a model that
misses, see :func:`mjsysid.fit.confidence.compute_confidence`), ``draws`` (integer >= 2,
default 200), ``seed`` (integer, default 0) and ``steps`` (Gauss-Newton steps per refit,
integer >= 1, default 1).

Parameter kinds: those of :mod:`mjsysid.params.kinds` plus ``body_mass``, ``body_mass_ipos``
and ``body_inertia`` (10-D pseudo-inertia). The ``sensor_*`` kinds build a
:class:`~mjsysid.SignalTransform` (``apply_to: predicted|measured`` for gains
and biases), the ``control_*`` kinds a :class:`~mjsysid.ControlTransform`
on the actuators their ``target`` pattern matches, in file order; ``control_deadband`` and
``control_gain`` take ``direction: both|positive|negative`` (one parameter per side, named
``<target>_deadband_pos`` etc. by default). A mistake is a :class:`ExperimentError` naming the
key path (``parameters[3].max``), what was expected and what was found.
"""

from __future__ import annotations

import difflib
import hashlib
import math
import os
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from mjsysid.data.recording import check_time_gap, initial_state_from_sensors, load_recording
from mjsysid.data.robot_logs import LogSource
from mjsysid.data.sequences import ModelSequences
from mjsysid.data.states import create_initial_state
from mjsysid.data.timeseries import SignalType
from mjsysid.data.timing import TimingWarning
from mjsysid.fit.executors import executor_options
from mjsysid.fit.global_search import GlobalSearchOptions
from mjsysid.fit.options import FitOptions
from mjsysid.objective.control_transform import ControlTransform
from mjsysid.objective.initial_state import initial_state_params
from mjsysid.objective.residual import ResidualFunction, build_residual_fn
from mjsysid.objective.signal_transform import SignalTransform
from mjsysid.objective.windows import split_windows
from mjsysid.params.inertia import InertiaType, body_inertia_param
from mjsysid.params.kinds import KINDS, make_parameter
from mjsysid.params.parameter import Parameter, ParameterDict
from mjsysid.sim.force_laws import law_from_config
from mjsysid.sim.law_params import force_law_params
from mjsysid.util.errors import short_repr
from mjsysid.util.files import read_yaml
from mjsysid.util.limits import check_limit, set_limits
from mjsysid.util.model_files import model_files
from mjsysid.util.progress import Progress

EXPERIMENT_SCHEMA_VERSION = 1
INERTIA_KINDS = {
    "body_mass": InertiaType.Mass,
    "body_mass_ipos": InertiaType.MassIpos,
    "body_inertia": InertiaType.Pseudo,
}
SIGNAL_KINDS = ("sensor_delay", "sensor_gain", "sensor_bias")
CONTROL_KINDS = ("control_deadband", "control_gain", "control_offset")
ALL_KINDS = sorted(set(KINDS) | set(INERTIA_KINDS))


class ExperimentError(ValueError):
    """A mistake in an experiment file; the message starts with the key path."""


def _where(path: str, key: str | int) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else key)


def _type_name(value: Any) -> str:
    return type(value).__name__ if value is not None else "nothing"


def _is_float_text(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class _Node:
    """A mapping with its key path, for precise error messages."""

    def __init__(self, data: Any, path: str, source: str) -> None:
        if not isinstance(data, dict):
            raise ExperimentError(
                f"{source}: {path or 'the file'} must be a mapping, got "
                f"{_type_name(data)} {short_repr(data)}"
            )
        self.data, self.path, self.source = data, path, source
        self.used: set[str] = set()

    def err(self, key: str | int, expected: str, got: Any) -> ExperimentError:
        return ExperimentError(
            f"{self.source}: {_where(self.path, key)} must be {expected}, got "
            f"{_type_name(got)} {short_repr(got)}"
        )

    def get(
        self,
        key: str,
        kind: type | tuple[type, ...],
        default: Any = None,
        *,
        required: bool = False,
        expected: str | None = None,
    ) -> Any:
        self.used.add(key)
        if key not in self.data:
            if required:
                raise ExperimentError(
                    f"{self.source}: {_where(self.path, key)} is required ({expected or 'missing'})"
                )
            return default
        value = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            names = expected or " or ".join(k.__name__ for k in kinds)
            if float in kinds and isinstance(value, str) and _is_float_text(value):
                names += f" (YAML reads {value} as text: write it with a dot, e.g. 1.0e-3)"
            raise self.err(key, names, value)
        return value

    def child(self, key: str, required: bool = False) -> _Node | None:
        value = self.get(key, dict, None, required=required, expected="a mapping")
        return None if value is None else _Node(value, _where(self.path, key), self.source)

    def finish(self, allowed: Iterable[str] | None = None) -> None:
        """Unknown keys are an error: those not read so far, or not in ``allowed`` (to check
        before work that a misspelt key would mislead, e.g. ``timescale``)."""
        known = self.used if allowed is None else set(allowed)
        unknown = sorted(set(self.data) - known)
        if unknown:
            close = {k: m for k in unknown if (m := difflib.get_close_matches(k, known, 1))}
            hint = "".join(f"; did you mean {m[0]!r} for {k!r}?" for k, m in close.items())
            raise ExperimentError(
                f"{self.source}: {self.path or 'top level'} has unknown keys "
                f"{unknown}; allowed: {sorted(known)}{hint}"
            )


_SEQUENCE_KEYS = (
    "name",
    "holdout",
    "file",
    "control",
    "sensors",
    "ignore_columns",
    "time",
    "time_scale",
    "time_range",
    "initial_state",
    "command_timing",
    "retime",
    "resample",
    "jitter_tolerance",
    "source",
)


def _numbers(node: _Node, key: str, size: int | None = None) -> np.ndarray | None:
    raw = node.get(key, (int, float, list), None, expected="a number or a list of numbers")
    if raw is None:
        return None
    values = raw if isinstance(raw, list) else [raw]
    out = []
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, int | float | str):
            raise node.err(f"{key}[{i}]" if isinstance(raw, list) else key, "a number", v)
        try:
            f = float(v)
        except ValueError:
            raise node.err(key, "numbers", raw) from None
        if math.isnan(f):
            raise node.err(key, "numbers (not NaN)", raw)
        out.append(f)
    arr = np.array(out)
    if size is not None and arr.size not in (1, size):
        raise node.err(key, f"1 or {size} numbers", raw)
    return arr


@dataclass
class Experiment:
    """A loaded, validated experiment.

    Attributes:
      path: The experiment file. name: Experiment name.
      spec: The model spec. model: Its compiled nominal model.
      sequences: The data as a :class:`ModelSequences`.
      params: The parameters to identify.
      transform: Sensor delay/gain/bias transform (``None`` without such parameters).
      residual_options: Keyword arguments for :func:`build_residual_fn`.
      optimizer: Backend. max_iters: Iteration limit. optimizer_options: The other options
        the file gives (keywords of :func:`~mjsysid.fit.optimize.optimize`).
      fit_options: The ``optimizer:`` section as one validated
        :class:`~mjsysid.fit.options.FitOptions` (the three attributes above, together).
      shooting: The validated ``shooting:`` options (``None`` without that key).
      warnings: Things worth telling the user that are not errors (unused recording
        columns), one line each, starting with the file and key path.
      files: The files read: the experiment, the model with every file it includes or
        names (meshes, height fields, textures), the recordings (see :meth:`fingerprints`).
      search: The optimizer section's outer stages as keywords of
        :func:`~mjsysid.fit.optimize.optimize`: ``{"global_search": {...}}`` (``global:
        cmaes`` and its options) or ``{"starts": N}`` (empty: the local fit alone).
      export_urdf: The ``export: {urdf: FILE}`` key: the URDF the model was made from (its
        joints are the model's); the results folder gets its identified copy.
      confidence: The ``confidence:`` key as keywords of
        :func:`~mjsysid.fit.confidence.compute_confidence` (empty: linearised intervals).
      executor: The ``executor:`` key as keyword arguments of
        :func:`mjsysid.fit.distributed.make_executor` (``None``: evaluate on this process's
        threads).
    """

    path: Path
    name: str
    spec: mujoco.MjSpec
    model: mujoco.MjModel
    sequences: ModelSequences
    params: ParameterDict
    transform: SignalTransform | None
    residual_options: dict[str, Any] = field(default_factory=dict)
    optimizer: str = "lm"
    max_iters: int = 100
    optimizer_options: dict[str, Any] = field(default_factory=dict)
    shooting: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    fit_options: FitOptions | None = None
    executor: dict[str, Any] | None = None
    search: dict[str, Any] = field(default_factory=dict)
    holdout: ModelSequences | None = None
    export_urdf: Path | None = None
    confidence: dict[str, Any] = field(default_factory=dict)

    def fingerprints(self) -> dict[str, str]:
        """``{absolute path: SHA-256}`` of :attr:`files`, to tell later whether the inputs of
        a fit changed (``mjsysid report`` checks them against the fit's)."""
        return {str(f.resolve()): _sha256(f) for f in self.files}

    def build_residual_fn(self) -> ResidualFunction:
        """The residual function this experiment describes (``residual.normalize`` goes to
        the signal transform when there is one: it scales its own residual)."""
        return self._residual_on(self.sequences)

    def build_holdout_residual_fn(
        self, sequences: ModelSequences | None = None
    ) -> ResidualFunction | None:
        """A residual function built like :meth:`build_residual_fn`, on the held-out
        sequences (or on ``sequences``); ``None`` without any."""
        data = self.holdout if sequences is None else sequences
        return None if data is None else self._residual_on(data)

    def _residual_on(self, data: ModelSequences) -> ResidualFunction:
        options = dict(self.residual_options)
        if self.transform is None:
            return build_residual_fn([data], **options)
        self.transform.normalize = options.pop("normalize", True)
        return build_residual_fn([data], modify_residual=self.transform.apply, **options)


_FILE_NAME = "a plain file name (non-empty, without '/', '\\', '..' or NUL)"


def _check_file_name(source: str, key: str, value: str, default_from: str = "") -> None:
    """Rejects names that could leave the results folder once used as a file name."""
    bad = (
        not value
        or value.strip() in ("", ".")
        or any(c in value for c in ("/", "\\", "\0", os.sep))
        or ".." in value
    )
    if bad:
        origin = f" (taken from {default_from}; set {key}: explicitly)" if default_from else ""
        raise ExperimentError(
            f"{source}: {key} must be {_FILE_NAME}, got {_type_name(value)} "
            f"{short_repr(value)}{origin}"
        )


def _positive_number(node: _Node, key: str, default: float | None) -> float | None:
    value = node.get(key, float, default, expected="a number")
    if value is not None and not (math.isfinite(value) and value > 0):
        raise node.err(key, "a finite number > 0", value)
    return value


def _state_signals(model: mujoco.MjModel, meas: Any) -> set[str]:
    """Measured signals that give joint positions or velocities (read for window starts)."""
    out = set()
    for name, (stype, _) in (meas.signal_mapping or {}).items():
        if stype in (SignalType.MjStateQPos, SignalType.MjStateQVel):
            out.add(name)
        elif stype == SignalType.MjSensor and int(model.sensor_type[model.sensor(name).id]) in (
            int(mujoco.mjtSensor.mjSENS_JOINTPOS),
            int(mujoco.mjtSensor.mjSENS_JOINTVEL),
        ):
            out.add(name)
    return out


def _shooting_options(top: _Node) -> dict[str, Any] | None:
    node = top.child("shooting")
    if node is None:
        return None
    window = _positive_number(node, "window", None)
    overlap = node.get("overlap", float, None, expected="a number of seconds")
    if overlap is not None:
        if window is None:
            raise ExperimentError(
                f"{node.source}: shooting.overlap needs shooting.window (the window length "
                f"in seconds), got overlap {overlap!r} without a window"
            )
        if not (math.isfinite(overlap) and 0 <= overlap < window):
            raise node.err("overlap", f"a number of seconds in [0, window={window:g})", overlap)
    opts = {
        "window": window,
        "overlap": 0.0 if overlap is None else overlap,
        "estimate_initial_state": node.get("estimate_initial_state", bool, True),
        "qpos_margin": _positive_number(node, "qpos_margin", 0.2),
        "qvel_margin": _positive_number(node, "qvel_margin", 2.0),
    }
    if "estimate_activation" in node.data:  # (absent: as before, when the model has any)
        opts["estimate_activation"] = node.get("estimate_activation", bool)
    node.finish()
    return opts


def bundled_examples() -> dict[str, Path]:
    """Names and experiment files of the examples shipped with mjsysid."""
    root = Path(str(resources.files("mjsysid") / "examples"))
    return {p.parent.name: p for p in sorted(root.glob("*/experiment.yaml"))}


def resolve_experiment_path(name: str | Path) -> Path:
    """A file path, or ``example:<name>`` for a bundled example."""
    text = str(name)
    if text.startswith("example:"):
        examples = bundled_examples()
        key = text.split(":", 1)[1]
        if key not in examples:
            raise ExperimentError(f"example must be one of {sorted(examples)}, got {key!r}")
        return examples[key]
    return Path(name)


ProgressFactory = Callable[[str], Progress | None]
"""``factory(label)``: the :data:`~mjsysid.util.progress.Progress` of one counted step of
loading (``label`` says what, e.g. ``"reading 'run.csv'"``), or ``None`` to count nothing.
What it returns may have a ``close()`` (as a :class:`~mjsysid.util.progress.ProgressBar`
has), called when the step ends, also after an error."""


def load_experiment(path: str | Path, *, progress: ProgressFactory | None = None) -> Experiment:
    """Reads and validates an experiment file; loads the model and the recordings.

    Args:
      path: The experiment file (or ``example:<name>``).
      progress: A :data:`ProgressFactory`: ``progress("reading '<file>'")`` per recording
        counts its csv rows (the command line's bar on stderr). Default: nothing counted.

    Raises:
      ExperimentError: A mistake in the file (names the key path).
      FileNotFoundError: The experiment, model or a recording file does not exist.
    """
    path = resolve_experiment_path(path)
    top, name = _read_top(path)
    _limits(top, str(path))
    shooting = _shooting_options(top)
    ld = _load_model(top, path)
    ld.progress = progress
    # Parameters first: a frozen one with a nominal is that value in the model the data are
    # read against and every fit runs on (a frozen parameter is not written by the fit).
    params, transform, control, fixed = _parameters(top, ld.spec, ld.model, ld.source)
    if fixed:
        _apply_fixed(ld, fixed)
    sequences, holdout = _sequences(top, ld, name, shooting)
    if shooting is not None and shooting.get("window") is not None and transform is not None:
        _warn_uncorrected_starts(ld, sequences, transform)
    if shooting is not None:
        sequences, state_params = _apply_shooting(sequences, shooting, ld.source)
        try:
            params.update(state_params)
        except ValueError as e:
            raise ExperimentError(f"{ld.source}: shooting: {e}") from None
    _limited(
        "max_parameters", len(params), f"{ld.source}: parameters (window initial states included)"
    )
    residual_options = _residual_options(top, control)
    _force_laws(top, ld.model, params, residual_options)
    fit, fit_given, search = _fit_options(top, ld.source)
    executor = _executor(top, ld.source)
    export_urdf = _export_urdf(top, ld)
    confidence = _confidence_options(top)
    top.finish()
    return Experiment(
        path,
        name,
        ld.spec,
        ld.model,
        sequences,
        params,
        transform,
        residual_options,
        fit.optimizer,
        int(fit.max_iters),
        fit_given,
        shooting,
        ld.warnings,
        ld.files,
        fit_options=fit,
        executor=executor,
        search=search,
        holdout=holdout,
        export_urdf=export_urdf,
        confidence=confidence,
    )


def _confidence_options(top: _Node) -> dict[str, Any]:
    """The ``confidence:`` key as keywords of :func:`~mjsysid.fit.confidence.compute_confidence`."""
    node = top.child("confidence")
    if node is None:
        return {}
    method = node.get("method", str, "linear")
    if method not in ("linear", "bootstrap"):
        raise node.err("method", "linear or bootstrap", method)
    opts: dict[str, Any] = {"method": method}
    for key, least in (("draws", 2), ("seed", 0), ("steps", 1)):
        value = node.get(key, int, None, expected=f"an integer >= {least}")
        if value is not None:
            if value < least:
                raise node.err(key, f"an integer >= {least}", value)
            opts[key] = value
    node.finish()
    return opts


def _limits(top: _Node, source: str) -> None:
    """The ``limits:`` key: raises (or lowers) named limits of :mod:`mjsysid.util.limits`
    for this process."""
    value = top.get("limits", dict, None, expected="a mapping of limit names to numbers")
    if value is not None:
        try:
            set_limits(value, f"{source}: limits")
        except ValueError as e:
            raise ExperimentError(str(e)) from None


def _limited(name: str, value: float, what: str) -> None:
    """:func:`check_limit` raising an :class:`ExperimentError`."""
    try:
        check_limit(name, value, what)
    except ValueError as e:
        raise ExperimentError(str(e)) from None


def _check_span(node: _Node, times: np.ndarray, rec_file: Path, ld: _Loading) -> float:
    """The simulated steps of one recording, checked against ``max_steps``."""
    what = f"{ld.source}: {node.path} ({str(rec_file)!r})"
    try:
        check_time_gap(times, what)  # load_recording checks it too; time_range can hide it
    except ValueError as e:
        raise ExperimentError(str(e)) from None
    dt = float(ld.model.opt.timestep)
    span = float(times[-1] - times[0]) if times.size else 0.0
    steps = span / dt
    _limited(
        "max_steps",
        steps,
        f"{what}: simulated steps (time span {span:.6g} s after time_scale / timestep {dt:g} s)",
    )
    return steps


def _executor(top: _Node, source: str) -> dict[str, Any] | None:
    """The ``executor:`` key: a scheduler address, a worker count or a mapping."""
    value = top.get("executor", (str, int, dict), None)
    if value is None:
        return None
    try:
        return executor_options(value, f"{source}: executor")
    except (TypeError, ValueError) as e:
        raise ExperimentError(str(e)) from None


def _export_urdf(top: _Node, ld: _Loading) -> Path | None:
    """The ``export: {urdf: FILE}`` key, checked: a URDF whose moving joints are joints of
    the model (added to the files read)."""
    node = top.child("export")
    if node is None:
        return None
    name = node.get("urdf", str, required=True, expected="the URDF the model was made from")
    node.finish()
    file = ld.base / name
    if file.suffix.lower() != ".urdf":
        raise node.err("urdf", "a .urdf file", name)
    if not file.is_file():
        raise FileNotFoundError(f"{ld.source}: export.urdf: no such file {str(file)!r}")
    try:
        robot = ET.parse(file).getroot()
    except ET.ParseError as e:
        raise ExperimentError(f"{ld.source}: export.urdf: {str(file)!r} is not XML: {e}") from None
    moving = {j.get("name", "") for j in robot.iter("joint") if j.get("type") != "fixed"}
    missing = sorted(moving - {ld.model.joint(j).name for j in range(ld.model.njnt)})
    if robot.tag != "robot" or missing:
        got = f"joints {missing} the model lacks" if missing else f"a <{robot.tag}> root"
        raise ExperimentError(
            f"{ld.source}: export.urdf must be the URDF the model was made from (a <robot> "
            f"whose moving joints are the model's joints), got {got}"
        )
    ld.files.append(file)
    return file


def _read_top(path: Path) -> tuple[_Node, str]:
    """The file's top-level mapping (schema version checked) and the experiment's name."""
    source = str(path)
    if path.suffix.lower() in (".xml", ".mjcf", ".urdf"):
        raise ExperimentError(
            f"{source}: this is a model file; give an experiment file (YAML) that names the "
            "model, the recordings and the parameters (see `mjsysid examples` and the README's "
            "experiment file)"
        )
    top = _Node(read_yaml(path), "", source)
    version = top.get("schema_version", int, EXPERIMENT_SCHEMA_VERSION)
    if version > EXPERIMENT_SCHEMA_VERSION:
        raise ExperimentError(
            f"{source}: schema_version must be <= {EXPERIMENT_SCHEMA_VERSION}, "
            f"got {version}; upgrade mjsysid"
        )
    name = top.get("name", str, path.stem)
    _check_file_name(
        source, "name", name, "" if "name" in top.data else f"the file name {path.name!r}"
    )
    return top, name


@dataclass
class _Loading:
    """What loading an experiment has gathered so far: the file's ``source`` (for messages)
    and folder (``base``), the model, the files read and the warnings."""

    source: str
    base: Path
    spec: mujoco.MjSpec
    model: mujoco.MjModel
    files: list[Path]
    warnings: list[str] = field(default_factory=list)
    steps: float = 0.0  # simulated steps of the sequences read so far
    progress: ProgressFactory | None = None  # (load_experiment's progress)


def _load_model(top: _Node, path: Path) -> _Loading:
    source, base = str(path), path.parent
    model_file = base / top.get(
        "model", str, required=True, expected="a path to an MJCF or URDF file"
    )
    if not model_file.is_file():
        raise FileNotFoundError(f"{source}: model: no such file {str(model_file)!r}")
    try:
        spec = mujoco.MjSpec.from_file(str(model_file))
        model = spec.compile()
    except ValueError as e:
        raise ExperimentError(f"{source}: model: {str(model_file)!r} does not load: {e}") from e
    # Every file the model reads (includes, meshes, height fields, textures) is an input.
    return _Loading(source, base, spec, model, [path, *model_files(model_file)])


def _apply_fixed(ld: _Loading, fixed: list[Parameter]) -> None:
    """Writes the frozen parameters' nominal values into the model and recompiles it."""
    for p in fixed:
        assert p.modifier is not None  # (fixed holds model parameters only)
        p.modifier(ld.spec, p)
    try:
        ld.model = ld.spec.compile()
    except ValueError as e:
        names = [p.name for p in fixed]
        raise ExperimentError(
            f"{ld.source}: parameters: the model does not compile with the frozen values of "
            f"{names}: {e}"
        ) from None


@dataclass
class _Sequence:
    """One loaded ``sequences[i]`` entry."""

    name: str
    x0: np.ndarray
    control: Any
    sensors: Any
    from_sample: bool  # its initial state is one measured sample
    holdout: bool = False  # not fitted: simulated for validation only


def _sequences(
    top: _Node, ld: _Loading, name: str, shooting: dict[str, Any] | None
) -> tuple[ModelSequences, ModelSequences | None]:
    """The fitted sequences and the held-out ones (``holdout: true``; ``None`` without)."""
    raw_seqs = top.get("sequences", list, required=True, expected="a list of recordings")
    if not raw_seqs:
        raise ExperimentError(f"{ld.source}: sequences must be a non-empty list, got an empty list")
    seqs = [_load_sequence(_Node(raw, f"sequences[{i}]", ld.source), i, ld) for i, raw in
            enumerate(raw_seqs)]  # fmt: skip
    from_samples = [f"sequences[{i}]" for i, sq in enumerate(seqs) if sq.from_sample]
    if shooting is None and from_samples:
        ld.warnings.append(
            f"{ld.source}: the initial state of {from_samples} is read from the first sample "
            "of the sensors and held fixed, so its measurement noise biases the fit; add "
            "shooting: {estimate_initial_state: true} to fit it as well (or give "
            "initial_qpos / initial_qvel columns or initial_state: qpos)"
        )
    fitted = [sq for sq in seqs if not sq.holdout]
    if not fitted:
        raise ExperimentError(
            f"{ld.source}: sequences must have at least one sequence to fit, got every one "
            "marked holdout: true (remove holdout: from one of them)"
        )
    held = [sq for sq in seqs if sq.holdout]
    return _model_sequences(name, ld, fitted), (_model_sequences(name, ld, held) if held else None)


def _model_sequences(name: str, ld: _Loading, seqs: list[_Sequence]) -> ModelSequences:
    try:
        return ModelSequences(
            name,
            ld.spec,
            [sq.name for sq in seqs],
            [sq.x0 for sq in seqs],
            [sq.control for sq in seqs],
            [sq.sensors for sq in seqs],
        )
    except (KeyError, ValueError) as e:
        raise ExperimentError(f"{ld.source}: sequences: {e}") from None


def _recording_file(node: _Node, ld: _Loading) -> Path:
    raw_file = node.get("file", str, required=True, expected="a .npz or .csv path")
    rec_file = ld.base / raw_file
    is_log = "source" in node.data  # a robot log may be a bag folder
    if not (rec_file.is_file() or (is_log and rec_file.is_dir())):
        what = "is not a file" if rec_file.exists() else "no such file"
        rel = "" if Path(raw_file).is_absolute() else ", relative to the experiment file"
        raise FileNotFoundError(
            f"{ld.source}: {node.path}.file: {what} {str(rec_file.absolute())!r} "
            f"(the file says {raw_file!r}{rel})"
        )
    return rec_file


def _timing_options(node: _Node) -> dict[str, Any]:
    """``command_timing``, ``retime``, ``resample``, ``jitter_tolerance`` and ``source`` of
    one ``sequences[i]`` entry, as keywords of :func:`~mjsysid.data.recording.load_recording`
    (see docs/timing.md and docs/robot-logs.md)."""
    out: dict[str, Any] = {}
    timing = node.get(
        "command_timing",
        (str, int, float),
        None,
        expected="'held', 'before' or a latency in seconds",
    )
    if timing is not None:
        out["command_timing"] = timing
    retime = node.get("retime", (bool, int, float), None, expected="true or a period (s)")
    if retime is not None:
        out["retime"] = retime
    for key in ("resample", "jitter_tolerance"):
        value = _positive_number(node, key, None)
        if value is not None:
            out[key] = value
    if "source" in node.data:
        out["source"] = _log_source(node)
    return out


def _log_source(node: _Node) -> LogSource:
    """The ``source:`` mapping of a robot log (MCAP file or ROS 2 bag)."""
    src = node.child("source")
    assert src is not None  # the caller saw the key
    fields = {
        "format": src.get("format", str, None),
        "stamp": src.get("stamp", str, "", expected="'header' or 'receive'"),
        "columns": src.get("columns", dict, {}),
        "joint_states": src.get("joint_states", str, None),
        "joints": src.get("joints", dict, None),
        "grid": src.get("grid", (str, int, float), None),
    }
    src.finish()
    try:
        return LogSource(**fields)
    except (TypeError, ValueError) as e:
        raise ExperimentError(f"{src.source}: {src.path}: {e}") from None


def _read_recording(node: _Node, rec_file: Path, ld: _Loading) -> Any:
    """The recording of one ``sequences[i]`` entry, read with its column options."""
    cmap = node.get("control", dict, None)
    smap = node.get("sensors", dict, None)
    ignore = node.get("ignore_columns", list, [], expected="a list of column names")
    for k, c in enumerate(ignore):
        if not isinstance(c, str):
            raise node.err(f"ignore_columns[{k}]", "a column name (str)", c)
    time_key = node.get("time", str, None)
    time_scale = node.get("time_scale", (int, float), None, expected="a number (s per unit)")
    time_range = node.get(
        "time_range", list, None, expected="[start, end] in seconds (null for an open end)"
    )
    timing = _timing_options(node)
    bar = ld.progress(f"reading {rec_file.name!r}") if ld.progress is not None else None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", TimingWarning)
            rec = load_recording(
                rec_file,
                ld.model,
                time=time_key,
                time_scale=time_scale,
                control=cmap,
                sensors=smap,
                ignore_columns=ignore,
                time_range=None if time_range is None else tuple(time_range),
                progress=bar,
                **timing,
            )
        for w in caught:
            if issubclass(w.category, TimingWarning):
                ld.warnings.append(f"{ld.source}: {node.path}: {w.message}")
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return rec
    except KeyError as e:
        raise ExperimentError(f"{ld.source}: {node.path}: {e.args[0]}") from None
    except ValueError as e:
        raise ExperimentError(f"{ld.source}: {node.path}: {e}") from None
    finally:
        close = getattr(bar, "close", None)
        if callable(close):
            close()


def _recording_warnings(node: _Node, rec: Any, rec_file: Path, ld: _Loading) -> None:
    notes = list(rec.notes)
    if rec.control is not None:
        notes += _outside_ctrlrange(ld.model, rec.control.data)
    ld.warnings += [f"{ld.source}: {node.path} ({str(rec_file)!r}): {n}" for n in notes]
    if rec.unused_columns:
        ld.warnings.append(
            f"{ld.source}: {node.path} ({str(rec_file)!r}): {rec.unused_message()}; list "
            f"them under {node.path}.ignore_columns if that is intended"
        )


def _load_sequence(node: _Node, i: int, ld: _Loading) -> _Sequence:
    node.finish(_SEQUENCE_KEYS)  # before reading the recording with a misspelt option
    seq_name = node.get("name", str, f"seq{i}")
    _check_file_name(ld.source, f"{node.path}.name", seq_name)
    holdout = node.get("holdout", bool, False, expected="true or false")
    rec_file = _recording_file(node, ld)
    # a bag folder is fingerprinted file by file
    ld.files += (
        sorted(p for p in rec_file.rglob("*") if p.is_file()) if rec_file.is_dir() else [rec_file]
    )
    rec = _read_recording(node, rec_file, ld)
    ld.steps += _check_span(node, np.asarray(rec.times), rec_file, ld)
    _limited("max_total_steps", ld.steps, f"{ld.source}: sequences: simulated steps in total")
    _recording_warnings(node, rec, rec_file, ld)
    init = node.child("initial_state")
    from_sample = rec.initial_qpos is None and (init is None or "qpos" not in init.data)
    qpos, qvel = _initial_state(rec, init, ld)
    node.finish()
    try:
        x0 = create_initial_state(ld.model, qpos, qvel, time=float(rec.times[0]))
    except (KeyError, ValueError) as e:
        msg = e.args[0] if isinstance(e, KeyError) else str(e)
        raise ExperimentError(
            f"{ld.source}: {node.path}: initial state (initial_qpos / "
            f"initial_qvel of {str(rec_file)!r}, or initial_state:): "
            f"{msg}"
        ) from None
    return _Sequence(seq_name, x0, rec.control, rec.sensordata, from_sample, holdout)


def _initial_state(rec: Any, init: _Node | None, ld: _Loading) -> tuple[Any, Any]:
    """``(qpos, qvel)`` to start from: the sensors' first sample, the recording's
    ``initial_qpos``/``initial_qvel`` columns, or the entry's ``initial_state:``."""
    model = ld.model
    qpos, qvel = initial_state_from_sensors(model, rec.sensordata)
    if rec.initial_qpos is not None:
        qpos = rec.initial_qpos
    if rec.initial_qvel is not None:
        qvel = rec.initial_qvel
    if init is None:
        return qpos, qvel
    for key in ("qpos", "qvel"):
        v = init.get(key, (list, dict), None)
        if v is None:
            continue
        try:
            full = create_initial_state(model, **{key: v})
        except (KeyError, ValueError) as e:
            raise ExperimentError(f"{ld.source}: {init.path}.{key}: {e}") from None
        if key == "qpos":
            qpos = full[slice(1, 1 + model.nq)]
        else:
            qvel = full[slice(1 + model.nq, 1 + model.nq + model.nv)]
    init.finish()
    return qpos, qvel


def _warn_uncorrected_starts(
    ld: _Loading, sequences: ModelSequences, transform: SignalTransform
) -> None:
    first = sequences.sequences()[0][3]
    corrected = transform.signals_with_parameters(first.names)
    starts = [n for n in corrected if n in _state_signals(ld.model, first)]
    if starts:
        ld.warnings.append(
            f"{ld.source}: shooting: the window starts are read from the raw measurements of "
            f"{starts}, which sensor parameters also correct (delay, gain or bias): the "
            "starts do not get that correction; estimate_initial_state (with wide enough "
            "qpos_margin/qvel_margin) can absorb a small one"
        )


def _residual_options(top: _Node, control: ControlTransform | None) -> dict[str, Any]:
    """Keyword arguments for :func:`build_residual_fn` from ``residual:``."""
    residual_options: dict[str, Any] = {}
    if control is not None:
        residual_options["control_transform"] = control
    res = top.child("residual")
    if res is None:
        return residual_options
    norm = res.get("normalize", (bool, str), True, expected="true, false, 'signal' or 'column'")
    if norm not in (True, False, "signal", "column"):
        raise res.err("normalize", "true, false, 'signal' or 'column'", norm)
    residual_options["normalize"] = norm
    weights = res.get("sensor_weights", dict, None)
    if weights is not None:
        for k, v in weights.items():
            if isinstance(v, bool) or not isinstance(v, int | float | list):
                raise res.err(f"sensor_weights.{k}", "a number or list of numbers", v)
        residual_options["sensor_weights"] = weights
    enabled = res.get("enabled_observations", list, None)
    if enabled is not None:
        residual_options["enabled_observations"] = enabled
    interp = res.get("control_interpolation", str, "zoh")
    if interp not in ("zoh", "linear"):
        raise res.err("control_interpolation", "'zoh' or 'linear'", interp)
    residual_options["control_interpolation"] = interp
    res.finish()
    return residual_options


def _force_laws(
    top: _Node, model: mujoco.MjModel, params: ParameterDict, options: dict[str, Any]
) -> None:
    """``force_laws:``, a list of laws (``law:`` one of :data:`mjsysid.sim.force_laws.LAWS`,
    ``name``, ``joint``, the law's options, and ``nominal``/``min``/``max`` mappings and a
    ``frozen`` list by parameter): adds their parameters to ``params`` and the laws to the
    residual ``options``."""
    raw = top.get("force_laws", list, None, expected="a list of force laws")
    if raw is None:
        return
    laws = []
    for i, entry in enumerate(raw):
        node = _Node(entry, f"force_laws[{i}]", top.source)
        values = {k: node.get(k, dict, {}, expected="a mapping") for k in ("nominal", "min", "max")}
        frozen = node.get("frozen", list, [], expected="a list of parameter names")
        config = {k: v for k, v in entry.items() if k not in ("nominal", "min", "max", "frozen")}
        try:
            law = law_from_config(config).bind(model)
            new = force_law_params(
                law,
                values["nominal"],
                min_value=values["min"],
                max_value=values["max"],
                frozen=frozen,
            )
            for p in new:
                params.add(p)
        except (KeyError, TypeError, ValueError) as e:
            raise ExperimentError(f"{top.source}: force_laws[{i}]: {e}") from None
        laws.append(law_from_config(config))
    options["force_laws"] = laws


_MAX_ITERS = 100  # an experiment's default iteration limit


_SEARCH_KEYS = ("global", "population", "budget", "sigma", "seed", "tol_spread", "starts")


def _fit_options(top: _Node, source: str) -> tuple[FitOptions, dict[str, Any], dict[str, Any]]:
    """The ``optimizer:`` section as :class:`FitOptions`, the options it gives besides
    ``method`` and ``max_iters`` (:attr:`Experiment.optimizer_options`), and its outer
    stages (:attr:`Experiment.search`)."""
    opt = top.child("optimizer")
    if opt is None:
        return FitOptions(max_iters=_MAX_ITERS), {}, {}
    opt.finish(FitOptions.MAPPING_KEYS + _SEARCH_KEYS)
    local = {k: v for k, v in opt.data.items() if k not in _SEARCH_KEYS}
    where = f"{source}: {opt.path}"
    try:
        fit = FitOptions.from_mapping(local, where=where, max_iters=_MAX_ITERS)
    except ValueError as e:
        raise ExperimentError(str(e)) from None
    return fit, fit.given(local), _search_options(opt, where)


def _search_options(opt: _Node, where: str) -> dict[str, Any]:
    """``global: cmaes`` (with ``population``, ``budget``, ``sigma``, ``seed``,
    ``tol_spread``) or ``starts: N``, as keywords of :func:`~mjsysid.fit.optimize.optimize`
    (plain YAML values: ``run.yaml`` records them)."""
    given = {k: opt.data[k] for k in _SEARCH_KEYS if k in opt.data}
    starts = given.pop("starts", None)
    if starts is not None:
        if given:
            raise opt.err("starts", "given without global: and its options", starts)
        if isinstance(starts, bool) or not isinstance(starts, int) or starts < 1:
            raise opt.err("starts", "a positive integer", starts)
        return {"starts": starts}
    if not given:
        return {}
    if "global" not in given:
        raise opt.err("global", "cmaes, with population/budget/sigma/seed/tol_spread", None)
    try:
        GlobalSearchOptions.from_mapping(given)
    except (TypeError, ValueError) as e:
        raise ExperimentError(f"{where}: {e}") from None
    return {"global_search": given}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _apply_shooting(
    sequences: ModelSequences, opts: dict[str, Any], source: str
) -> tuple[ModelSequences, ParameterDict]:
    """The windows (or the sequences themselves) and their initial-state parameters."""
    if opts["window"] is not None:
        _check_window_count(sequences, opts, source)
        try:
            sequences = split_windows(sequences, opts["window"], overlap=opts["overlap"])
        except (KeyError, ValueError) as e:
            msg = e.args[0] if isinstance(e, KeyError) else str(e)
            raise ExperimentError(f"{source}: shooting.window: {msg}") from None
    if not opts["estimate_initial_state"]:
        return sequences, ParameterDict()
    try:
        state = initial_state_params(
            sequences,
            qpos_margin=opts["qpos_margin"],
            qvel_margin=opts["qvel_margin"],
            act=opts.get("estimate_activation"),
        )
    except (KeyError, ValueError) as e:
        msg = e.args[0] if isinstance(e, KeyError) else str(e)
        raise ExperimentError(f"{source}: shooting.estimate_initial_state: {msg}") from None
    if not len(state):
        raise ExperimentError(
            f"{source}: shooting.estimate_initial_state: the model must have a hinge or slide "
            "joint whose initial state can be estimated, got none; set it to false"
        )
    return sequences, state


def _check_window_count(sequences: ModelSequences, opts: dict[str, Any], source: str) -> None:
    """Refuses more shooting windows than ``max_windows`` before any window is cut."""
    stride = opts["window"] - opts["overlap"]
    count = 0.0
    for _, _, _, meas in sequences.sequences():
        times = np.asarray(meas.times)
        span = float(times[-1] - times[0]) if times.size else 0.0
        count += max(1.0, math.ceil(span / stride))
    _limited(
        "max_windows",
        count,
        f"{source}: shooting.window: {opts['window']!r} s with overlap {opts['overlap']!r} s "
        "gives windows",
    )


def _outside_ctrlrange(model: mujoco.MjModel, control: np.ndarray) -> list[str]:
    """One line per limited actuator whose recorded commands ``(N, nu)`` (actuator order)
    leave its ``ctrlrange``: MuJoCo clamps them, silently, before any dynamics."""
    out = []
    for i in np.flatnonzero(model.actuator_ctrllimited):
        lo, hi = (float(v) for v in model.actuator_ctrlrange[i])
        u = control[:, i]
        tol = 1e-9 * max(1.0, abs(lo), abs(hi))
        bad = (u < lo - tol) | (u > hi + tol)
        if bad.any():
            far = float(u[bad][np.argmax(np.abs(u[bad] - 0.5 * (lo + hi)))])
            out.append(
                f"the commands of actuator {model.actuator(i).name!r} leave its ctrlrange "
                f"[{lo:g}, {hi:g}] in {int(bad.sum())} of {u.size} samples (up to {far:g}), "
                "where MuJoCo clamps them; check their units (duty cycle or PWM counts?) "
                "against the model's ctrlrange"
            )
    return out


def _parameters(
    top: _Node, spec: mujoco.MjSpec, model: mujoco.MjModel, source: str
) -> tuple[ParameterDict, SignalTransform | None, ControlTransform | None, list[Parameter]]:
    """``(params, signal transform, control transform, fixed)``: ``fixed`` are the frozen
    model parameters given a ``nominal``, whose value the model must take."""
    raw = top.get("parameters", list, required=True, expected="a list of parameters")
    if not raw:
        raise ExperimentError(f"{source}: parameters must be a non-empty list, got an empty list")
    acc = _ParameterSet()
    for i, entry in enumerate(raw):
        node = _Node(entry, f"parameters[{i}]", source)
        kind = node.get("kind", str, required=True, expected=f"one of {ALL_KINDS}")
        if kind not in ALL_KINDS:
            raise node.err("kind", f"one of {ALL_KINDS}", kind)
        target = node.get(
            "target", str, required=True, expected="the element name or sensor pattern"
        )
        pname = node.get("name", str, None)
        frozen = node.get("frozen", bool, False)
        pname, direction = _name_and_direction(node, kind, target, pname)
        p = _make_parameter(node, kind, target, pname, frozen, spec, model)
        _set_prior(node, p)
        if kind in SIGNAL_KINDS:
            acc.add_signal_op(node, kind, target, p)
        if kind in CONTROL_KINDS:
            acc.add_control_op(node, kind, target, p, direction, model)
        node.finish()
        try:
            acc.params.add(p)
        except ValueError as e:
            raise ExperimentError(f"{source}: {node.path}.name: {e}") from None
        if frozen and p.modifier is not None and "nominal" in node.data:
            acc.fixed.append(p)
    return (
        acc.params,
        acc.transform if acc.used_transform else None,
        acc.control if acc.control.parameter_names else None,
        acc.fixed,
    )


def _set_prior(node: _Node, p: Parameter) -> None:
    """The entry's ``prior: {mean, std}`` on ``p`` (``mean`` left out: the nominal; each a
    number or one per entry): a MAP fit toward it (:mod:`mjsysid.fit.prior`)."""
    prior = node.child("prior")
    if prior is None:
        return
    prior.finish(("mean", "std"))
    if "std" not in prior.data:
        raise ExperimentError(
            f"{node.source}: {prior.path}.std is required (the prior's standard deviation, in "
            "the parameter's units)"
        )
    std = _numbers(prior, "std", p.size)
    mean = _numbers(prior, "mean", p.size)
    try:
        p.prior = {"std": std} if mean is None else {"mean": mean, "std": std}
    except ValueError as e:
        raise ExperimentError(f"{node.source}: {prior.path}: {e}") from None


@dataclass
class _ParameterSet:
    """What :func:`_parameters` gathers: the parameters, the signal and control transforms
    their ``sensor_*``/``control_*`` kinds build, and the frozen ones with a nominal."""

    params: ParameterDict = field(default_factory=ParameterDict)
    transform: SignalTransform = field(default_factory=SignalTransform)
    used_transform: bool = False
    control: ControlTransform = field(default_factory=ControlTransform)
    n_control: int = 0  # operations of the control transform so far (their order matters)
    fixed: list[Parameter] = field(default_factory=list)

    def add_signal_op(self, node: _Node, kind: str, target: str, p: Parameter) -> None:
        apply_to = node.get("apply_to", str, "predicted")
        if apply_to not in ("predicted", "measured"):
            raise node.err("apply_to", "'predicted' or 'measured'", apply_to)
        if kind == "sensor_delay":
            self.transform.delay(target, p.name)
        elif kind == "sensor_gain":
            self.transform.gain(target, p.name, target=apply_to)
        else:
            self.transform.bias(target, p.name, target=apply_to)
        self.used_transform = True

    def add_control_op(
        self,
        node: _Node,
        kind: str,
        target: str,
        p: Parameter,
        direction: str,
        model: mujoco.MjModel,
    ) -> None:
        op = kind.split("_", 1)[1]
        one = ControlTransform()
        if op == "offset":
            one.offset(target, p.name)
            self.control.offset(target, p.name)
        else:
            getattr(one, op)(target, p.name, direction)
            getattr(self.control, op)(target, p.name, direction)
        try:
            one.validate(model)
        except ValueError as e:
            raise ExperimentError(f"{node.source}: {node.path}.target: {e}") from None
        # what a controller needs to apply the identified transform (saved with the values)
        p.meta.update(direction=direction, order=self.n_control)
        self.n_control += 1


def _name_and_direction(
    node: _Node, kind: str, target: str, pname: str | None
) -> tuple[str | None, str]:
    """The entry's name (``pname``, or a default per side for one-sided control kinds) and
    its ``direction``."""
    direction = "both"
    if kind == "control_offset" and "direction" in node.data:
        raise node.err("direction", "absent: an offset has no direction", node.data["direction"])
    if kind in ("control_deadband", "control_gain"):
        direction = node.get("direction", str, "both")
        if direction not in ("both", "positive", "negative"):
            raise node.err("direction", "'both', 'positive' or 'negative'", direction)
        if pname is None and direction != "both":
            pname = f"{target}_{kind.split('_', 1)[1]}_{direction[:3]}"
    return pname, direction


def _make_parameter(
    node: _Node,
    kind: str,
    target: str,
    pname: str | None,
    frozen: bool,
    spec: mujoco.MjSpec,
    model: mujoco.MjModel,
) -> Parameter:
    try:
        if kind in INERTIA_KINDS:
            return _inertia_parameter(node, kind, target, pname, frozen, spec, model)
        return make_parameter(
            kind,
            model,
            target,
            name=pname,
            nominal=_numbers(node, "nominal"),
            min_value=_numbers(node, "min"),
            max_value=_numbers(node, "max"),
            frozen=frozen,
        )
    except ExperimentError:
        raise
    except (KeyError, ValueError, TypeError) as e:
        msg = e.args[0] if isinstance(e, KeyError) else str(e)
        raise ExperimentError(f"{node.source}: {node.path}: {msg}") from None


def _inertia_parameter(
    node: _Node,
    kind: str,
    target: str,
    pname: str | None,
    frozen: bool,
    spec: mujoco.MjSpec,
    model: mujoco.MjModel,
) -> Parameter:
    p = body_inertia_param(
        spec,
        model,
        target,
        INERTIA_KINDS[kind],
        node.get("scale_rot_inertia", bool, True),
        param_name=pname,
        frozen=frozen,
    )
    nominal = _numbers(node, "nominal", p.size)
    lo, hi = _numbers(node, "min", p.size), _numbers(node, "max", p.size)
    if nominal is None and lo is None and hi is None:
        return p
    ones = np.ones(p.size)
    return Parameter(
        p.name,
        p.nominal if nominal is None else nominal * ones,
        p.min_value if lo is None else lo * ones,
        p.max_value if hi is None else hi * ones,
        frozen=frozen,
        modifier=p.modifier,
        model_modifier=p.model_modifier,
        meta=p.meta,
    )

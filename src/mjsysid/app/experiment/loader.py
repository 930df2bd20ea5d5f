"""The loaded experiment (:class:`Experiment`) and :func:`load_experiment`, which reads an
experiment file key group by key group (the file format: :mod:`mjsysid.app.experiment`).

The examples shipped with mjsysid (``src/mjsysid/examples/<name>/experiment.yaml``) and
``example:<name>`` paths.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import mujoco

from mjsysid.app.experiment.model import apply_fixed, export_urdf_file, load_model_file
from mjsysid.app.experiment.nodes import (
    ExperimentError,
    Loading,
    ProgressFactory,
    apply_limits,
    check_file_name,
    within_limit,
)
from mjsysid.app.experiment.options import (
    confidence_options,
    executor_keys,
    fit_options_of,
    force_laws_of,
    residual_options_of,
)
from mjsysid.app.experiment.parameters import parameters_of
from mjsysid.app.experiment.schema import ExperimentFile, check_version, read_file
from mjsysid.app.experiment.sequences import sequences_of
from mjsysid.app.experiment.shooting import shoot, shooting_options
from mjsysid.data.sequences import ModelSequences
from mjsysid.fit.options import FitOptions
from mjsysid.objective.initial_state import law_state_params
from mjsysid.objective.levels import coarse_level_notes
from mjsysid.objective.residual import ResidualFunction, build_residual_fn
from mjsysid.objective.signal_transform import SignalTransform
from mjsysid.output.portable import AssetMode
from mjsysid.params.parameter import ParameterDict
from mjsysid.sim.batch import law_engine_note
from mjsysid.util.files import read_yaml


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
      command_timing: Each sequence's declared ``command_timing`` by its name (``"held"``
        where none is declared).
      notes: Facts about the loading worth telling, not problems (what a recording's
        ``command_timing`` did at its edges, a retime's largest row move, clock rate
        changes and gaps), one line each.
      warnings: Things worth telling the user that are not errors (unused recording
        columns), one line each, starting with the file and key path.
      files: The files read: the experiment, the model with every file it includes or
        names (meshes, height fields, textures), the recordings (see :meth:`fingerprints`).
      search: The optimizer section's outer stages as keywords of
        :func:`~mjsysid.fit.optimize.optimize`: ``{"global_search": {...}}`` (``global:
        cmaes`` and its options) or ``{"starts": N}`` (empty: the local fit alone).
      export_urdf: The ``export: {urdf: FILE}`` key: the URDF the model was made from (its
        joints are the model's); the results folder gets its identified copy.
      export_assets: The ``export: {assets: copy|absolute}`` key (default ``"copy"``): how
        the written models name their meshes, textures and height fields
        (:mod:`mjsysid.output.portable`).
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
    export_assets: AssetMode = "copy"
    notes: list[str] = field(default_factory=list)
    command_timing: dict[str, Any] = field(default_factory=dict)

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


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
    top, name, ld = _read_top(path)
    apply_limits(top.limits, str(path))
    shooting = shooting_options(top.shooting)
    ld.progress = progress
    # Parameters first: a frozen one with a nominal is that value in the model the data are
    # read against and every fit runs on (a frozen parameter is not written by the fit).
    params, transform, control, fixed = parameters_of(top.parameters, ld.spec, ld.model, ld.source)
    if fixed:
        apply_fixed(ld, fixed)
    sequences, holdout = sequences_of(top.sequences, ld, name, shooting)
    if shooting is not None:
        sequences = shoot(ld, sequences, shooting, params, transform)
    residual_options = residual_options_of(top.residual, control)
    margins = force_laws_of(top.force_laws, ld.model, params, residual_options, ld.source)
    ld.notes += _threshold_notes(sequences, residual_options, params, ld.source)
    if margins:
        params.update(_law_state_params(sequences, residual_options, params, margins, ld.source))
    within_limit(
        "max_parameters", len(params), f"{ld.source}: parameters (window initial states included)"
    )
    fit, fit_given, search = fit_options_of(top.optimizer, ld.source)
    executor = executor_keys(top.executor, ld.source)
    export_urdf = export_urdf_file(top.export, ld)
    confidence = confidence_options(top.confidence)
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
        export_assets=top.export.assets if top.export is not None else "copy",
        notes=ld.notes,
        command_timing=ld.command_timing,
    )


def _threshold_notes(
    sequences: ModelSequences, residual_options: dict[str, Any], params: ParameterDict, source: str
) -> list[str]:
    """The notes on the force laws, prefixed with the file: their command thresholds whose
    recorded levels are coarse (:func:`~mjsysid.objective.levels.coarse_level_notes`) and
    why they will not run compiled (:func:`~mjsysid.sim.batch.law_engine_note`)."""
    laws = [law.bind(sequences.model) for law in residual_options.get("force_laws", [])]
    if not laws:
        return []
    engine = law_engine_note(laws)
    controls = [
        ctrl.data[:, sequences.control_columns(i)]
        for i, (_, _, ctrl, _) in enumerate(sequences.sequences())
        if ctrl is not None
    ]
    notes = coarse_level_notes(laws, controls, params) + ([engine] if engine else [])
    return [f"{source}: force_laws: {n}" for n in notes]


def _law_state_params(
    sequences: ModelSequences,
    residual_options: dict[str, Any],
    params: ParameterDict,
    margins: dict[str, dict[str, float]],
    source: str,
) -> ParameterDict:
    """The starts of the laws' internal states in every sequence or window
    (``force_laws[i].estimate_states``)."""
    try:
        return law_state_params(sequences, residual_options["force_laws"], params, margins)
    except (KeyError, ValueError) as e:
        msg = e.args[0] if isinstance(e, KeyError) else str(e)
        raise ExperimentError(f"{source}: force_laws: estimate_states: {msg}") from None


def _read_top(path: Path) -> tuple[ExperimentFile, str, Loading]:
    """The file's keys, validated against the schema, the experiment's name and its model.

    The model is read first, as the file names it (the rest of the file needs it): a model
    that does not load is told before the other keys are checked."""
    source = str(path)
    if path.suffix.lower() in (".xml", ".mjcf", ".urdf"):
        raise ExperimentError(
            f"{source}: this is a model file; give an experiment file (YAML) that names the "
            "model, the recordings and the parameters (see `mjsysid examples` and the README's "
            "experiment file)"
        )
    data = read_yaml(path)
    check_version(data, source)
    model = data.get("model") if isinstance(data, dict) else None
    ld = load_model_file(model, path) if isinstance(model, str) else None
    top = read_file(data, source)
    name = path.stem if top.name is None else top.name
    check_file_name(
        source, "name", name, "" if top.name is not None else f"the file name {path.name!r}"
    )
    return top, name, ld or load_model_file(top.model, path)

"""Saving and loading identification results (YAML + npz, never pickle).

A results folder holds::

    params_x_0.yaml      initial parameters (schema, bounds, values, metadata)
    params_x_hat.yaml    identified parameters
    result.npz           x, residual, Jacobian, gradient, per-iteration objective/candidates
    confidence.npz       covariance, confidence half-widths (and ends), method and caveats
    confidence.yaml      the same per parameter, human readable
    <model>.xml          the identified model of every ModelSequences
    assets/              copies of the asset files the models name (meshes, textures, ...;
                         with assets="copy", the default: see mjsysid.output.portable)
    result.yaml          summary (status, message, costs, versions) and the file list

Every file is written atomically and ``result.yaml`` is written last, so a folder without it
(or with a file missing from its list) is an incomplete save and :func:`load_results` says so.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import yaml

from mjsysid.data.sequences import ModelSequences
from mjsysid.fit.confidence import Confidence, compute_confidence
from mjsysid.fit.prior import PriorRows
from mjsysid.fit.result import FitHistory, OptimizeResult, StageSummary, ThresholdProfile
from mjsysid.fit.status import Status, StepTrial
from mjsysid.fit.whiteness import Whiteness
from mjsysid.output.export import export_files, recording_constants
from mjsysid.output.portable import AssetMode, PortableAssets, check_asset_mode
from mjsysid.params.apply import apply_param_modifiers_spec
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import must_be, short_repr
from mjsysid.util.files import atomic_write_files, load_npz, npz_bytes, read_yaml
from mjsysid.util.mjcf_text import spec_xml
from mjsysid.util.results_files import (
    CONFIDENCE_NPZ,
    CONFIDENCE_YAML,
    PARAMS_X0,
    PARAMS_X_HAT,
    RESULT_NPZ,
    RESULT_YAML,
)

RESULTS_SCHEMA_VERSION = 1

# Keys of result.yaml: (check, what it must be).
_NUMBER = (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number")
_INT = (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer")
_STR = (lambda v: isinstance(v, str), "a string")
_SUMMARY_KEYS = {
    "schema": _STR,
    "schema_version": _INT,
    "optimizer": _STR,
    "status": _STR,
    "success": (lambda v: isinstance(v, bool), "true or false"),
    "message": _STR,
    "initial_cost": _NUMBER,
    "cost": _NUMBER,
    "nit": _INT,
    "nfev": _INT,
    "njev": _INT,
    "wall_time": _NUMBER,
    "parameter_names": (
        lambda v: isinstance(v, list) and all(isinstance(n, str) for n in v),
        "a list of names",
    ),
    "models": (lambda v: isinstance(v, dict), "a mapping"),
    "sequences": (lambda v: isinstance(v, dict), "a mapping"),
    "versions": (lambda v: isinstance(v, dict), "a mapping"),
    "files": (
        lambda v: isinstance(v, list) and all(isinstance(n, str) for n in v),
        "a list of file names",
    ),
}
_OPTIONAL_KEYS = {
    "converged": (  # issue #31: said in every file (older folders: success)
        lambda v: isinstance(v, bool),
        "true or false",
    ),
    "stop_reason": _STR,  # why a fit that did not converge stopped
    "stages": (  # horizon stages of the fit (optimize(horizons=...))
        lambda v: isinstance(v, list) and all(isinstance(st, dict) for st in v),
        "a list of mappings",
    ),
    "step_trial": (  # the Gauss-Newton step left, tried (mjsysid.fit.status.StepTrial)
        lambda v: (
            isinstance(v, dict)
            and {"cost", "fractions", "predicted", "actual", "step_se"} <= set(v)
        ),
        "a mapping of cost, fractions, predicted, actual and step_se",
    ),
    "threshold_profile": (  # the deadzones' profile (mjsysid.fit.thresholds.ThresholdProfile)
        lambda v: isinstance(v, dict) and {"kept", "fit_cost", "sweeps", "evaluations"} <= set(v),
        "a mapping of kept, fit_cost, sweeps and evaluations",
    ),
    "prior": (  # the prior rows of a MAP fit (mjsysid.fit.prior.PriorRows.to_dict)
        lambda v: isinstance(v, dict) and {"columns", "mean", "std", "names"} <= set(v),
        "a mapping of columns, mean, std and names",
    ),
}


def _check_summary(summary: dict[str, Any], where: Path) -> None:
    allowed = {**_SUMMARY_KEYS, **_OPTIONAL_KEYS}
    unknown = sorted(set(summary) - set(allowed))
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}; allowed: {sorted(allowed)}")
    for key, (ok, expected) in allowed.items():
        if key not in summary:
            if key in _OPTIONAL_KEYS:
                continue
            raise ValueError(f"{where}: missing required key {key!r}")
        if not ok(summary[key]):
            raise ValueError(must_be(f"{where}: {key}", expected, summary[key]))


@dataclass
class Results:
    """Everything :func:`load_results` reads back."""

    folder: Path
    initial_params: ParameterDict
    opt_params: ParameterDict
    result: OptimizeResult
    confidence: Confidence
    model_files: dict[str, Path]
    summary: dict[str, Any]


def _versions() -> dict[str, str]:
    from mjsysid._version import __version__

    return {
        "mjsysid": __version__,
        "mujoco": mujoco.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


def _dump(data: Any) -> bytes:
    return yaml.safe_dump(data, sort_keys=False).encode("utf-8")


def _check_save_arguments(
    models_sequences: Any, initial_params: Any, opt_params: Any, opt_result: Any
) -> list[ModelSequences]:
    """The list of ModelSequences; TypeError/ValueError for the first bad argument."""
    ms_list = (
        [models_sequences]
        if isinstance(models_sequences, ModelSequences)
        else list(models_sequences)
        if isinstance(models_sequences, list | tuple)
        else []
    )
    if not ms_list or not all(isinstance(m, ModelSequences) for m in ms_list):
        raise TypeError(
            must_be(
                "models_sequences", "a ModelSequences or a non-empty list of them", models_sequences
            )
        )
    if not isinstance(opt_result, OptimizeResult):
        raise TypeError(must_be("opt_result", "an OptimizeResult", type(opt_result).__name__))
    for what, params in (("initial_params", initial_params), ("opt_params", opt_params)):
        if not isinstance(params, ParameterDict):
            raise TypeError(must_be(what, "a ParameterDict", type(params).__name__))
        if params.get_non_frozen_parameter_names() != list(opt_result.parameter_names):
            raise ValueError(
                must_be(
                    f"{what}: free parameters",
                    f"those of opt_result {list(opt_result.parameter_names)}",
                    params.get_non_frozen_parameter_names(),
                )
            )
    return ms_list


def _result_npz(opt_result: OptimizeResult) -> bytes:
    h = opt_result.history
    return npz_bytes(
        {
            "x": opt_result.x,
            "fun": opt_result.fun,
            "jac": opt_result.jac,
            "grad": opt_result.grad,
            "objective": np.asarray(h.objective, dtype=np.float64),
            "candidate": np.stack(h.candidate) if h.candidate else np.zeros((0, opt_result.x.size)),
            "schema_version": np.array(RESULTS_SCHEMA_VERSION),
        }
    )


def _confidence_files(conf: Confidence, alpha: float) -> dict[str, bytes]:
    assert conf.at_bound is not None
    arrays = {
        "covariance": conf.covariance,
        "half_widths": conf.half_widths,
        "alpha": np.array(alpha),
        "converged": np.array(conf.converged),
        "at_bound": conf.at_bound,
    }
    if conf.determined_by is not None:  # a MAP fit: what determined each parameter
        arrays["determined_by"] = np.array(conf.determined_by, dtype=str)
    arrays["method"] = np.array(conf.method, dtype=str)
    arrays["notes"] = np.array(list(conf.notes), dtype=str).reshape(-1)
    if conf.interval is not None:  # a bootstrap's percentile ends, (p, 2)
        arrays["interval"] = np.asarray(conf.interval, dtype=np.float64)
    arrays["stop_reason"] = np.array(conf.stop_reason, dtype=str)
    w = conf.whiteness
    if w is not None:  # Durbin-Watson per signal (issue #31)
        arrays["whiteness_signals"] = np.array(list(w.durbin_watson), dtype=str).reshape(-1)
        arrays["whiteness_dw"] = np.array(list(w.durbin_watson.values()), dtype=np.float64)
        arrays["whiteness_pooled"] = np.array(w.pooled)
        arrays["whiteness_samples"] = np.array(w.samples)
        arrays["whiteness_judged"] = np.array(w.judged)
    return {
        CONFIDENCE_NPZ: npz_bytes(arrays),
        CONFIDENCE_YAML: _dump(conf.to_dict()),
    }


def _summary(
    opt_result: OptimizeResult,
    ms_list: Sequence[ModelSequences],
    models: dict[str, str],
    assets: Sequence[str] = (),
) -> dict[str, Any]:
    """The contents of ``result.yaml`` (``assets``: the copied asset files, listed with the
    files so that a folder moved without them is told incomplete)."""
    return {
        "schema": "mjsysid.results",
        "schema_version": RESULTS_SCHEMA_VERSION,
        "optimizer": opt_result.optimizer,
        "status": opt_result.status.value,
        "success": opt_result.success,
        "converged": opt_result.success,
        **({} if opt_result.success else {"stop_reason": opt_result.message}),
        "message": opt_result.message,
        "initial_cost": float(opt_result.initial_cost),
        "cost": float(opt_result.cost),
        "nit": int(opt_result.nit),
        "nfev": int(opt_result.nfev),
        "njev": int(opt_result.njev),
        "wall_time": float(opt_result.wall_time),
        "parameter_names": list(opt_result.parameter_names),
        **({"stages": [st.summary() for st in opt_result.stages]} if opt_result.stages else {}),
        **({"prior": opt_result.prior.to_dict()} if opt_result.prior is not None else {}),
        **(
            {"step_trial": opt_result.step_trial.summary()}
            if opt_result.step_trial is not None
            else {}
        ),
        **(
            {"threshold_profile": opt_result.threshold_profile.summary()}
            if opt_result.threshold_profile is not None
            else {}
        ),
        "models": models,
        "sequences": {ms.name: list(ms.sequence_name) for ms in ms_list},
        "versions": _versions(),
        "files": [
            PARAMS_X0,
            PARAMS_X_HAT,
            RESULT_NPZ,
            CONFIDENCE_NPZ,
            CONFIDENCE_YAML,
            *models.values(),
            *assets,
        ],
    }


def save_results(
    experiment_results_folder: str | Path,
    models_sequences: Sequence[ModelSequences] | ModelSequences,
    initial_params: ParameterDict,
    opt_params: ParameterDict,
    opt_result: OptimizeResult,
    residual_fn: Any = None,
    *,
    alpha: float = 0.05,
    confidence: Confidence | None = None,
    model_files: Mapping[str, str | Path] | None = None,
    assets: AssetMode = "copy",
) -> Path:
    """Writes parameters, result, confidence intervals and identified models to a folder.

    Args:
      experiment_results_folder: Created if missing (``str`` or ``Path``).
      models_sequences: The data the fit used; one ``<name>.xml`` is written per entry.
      initial_params, opt_params: Before and after the fit.
      opt_result: From :func:`optimize`.
      residual_fn: Used for per-signal noise estimates in the intervals (optional).
      alpha: Significance level of the intervals.
      confidence: The intervals, when already computed (at level ``1 - alpha``, with
        ``params=opt_params``); default: computed here.
      model_files: The source file of each model by name (optional): a URDF one also gets an
        identified ``<name>.urdf``. ``identified.yaml`` (every identified value with its
        unit) and ``robot.yaml`` (the hobby robot-config schema) are always written; see
        :mod:`mjsysid.output.export`.
      assets: How the written models name their asset files (meshes, textures, height
        fields): ``"copy"`` (default) copies them into ``assets/`` of the folder, which then
        loads wherever it is moved; ``"absolute"`` names the source files by their absolute
        paths (see :mod:`mjsysid.output.portable`).

    Returns:
      The folder path.

    Raises:
      OSError: The folder cannot be created or written (message names the path).
      FileNotFoundError: With ``assets="copy"``, an asset file the model names is missing.
    """
    check_asset_mode(assets)
    ms_list = _check_save_arguments(models_sequences, initial_params, opt_params, opt_result)
    conf = confidence
    if conf is None or conf.at_bound is None:
        conf = compute_confidence(opt_result, residual_fn, alpha, opt_params)
    identified = {ms.name: apply_param_modifiers_spec(opt_params, ms.spec.copy()) for ms in ms_list}
    return write_results(
        Path(experiment_results_folder), ms_list, initial_params, opt_params, opt_result,
        conf, identified, model_files, assets,
    )  # fmt: skip


def write_results(
    folder: Path,
    ms_list: Sequence[ModelSequences],
    initial_params: ParameterDict,
    opt_params: ParameterDict,
    opt_result: OptimizeResult,
    confidence: Confidence,
    identified: Mapping[str, mujoco.MjSpec],
    model_files: Mapping[str, str | Path] | None = None,
    assets: AssetMode = "copy",
) -> Path:
    """Writes a results folder of numbers already computed (it computes nothing): the
    parameters, the result, the intervals, the identified spec of every model (``identified``,
    by name, its asset files named as ``assets`` says) and the export files; ``result.yaml``
    last. Returns the folder."""
    files: dict[str, bytes] = {
        PARAMS_X0: _dump(initial_params.to_dict()),
        PARAMS_X_HAT: _dump(opt_params.to_dict()),
        RESULT_NPZ: _result_npz(opt_result),
    }
    files.update(_confidence_files(confidence, confidence.alpha))
    models: dict[str, str] = {}
    portable = PortableAssets(assets)
    specs = {ms.name: portable.spec(identified[ms.name]) for ms in ms_list}
    for ms in ms_list:
        files[f"{ms.name}.xml"] = spec_xml(specs[ms.name]).encode("utf-8")  # every digit
        models[ms.name] = f"{ms.name}.xml"
    constants = {ms.name: recording_constants(ms) for ms in ms_list}
    files.update(export_files(opt_params, specs, model_files, portable, constants))
    files.update(portable.files)
    files[RESULT_YAML] = _dump(_summary(opt_result, ms_list, models, sorted(portable.files)))
    # Nothing in the folder changes until every file is on disk; result.yaml goes in last.
    return atomic_write_files(folder, files, commit=RESULT_YAML)


def _read_summary(folder: Path) -> dict[str, Any]:
    """``result.yaml`` of ``folder``, checked (FileNotFoundError, ValueError)."""
    if not folder.is_dir():
        raise FileNotFoundError(f"no such results folder: {str(folder)!r}")
    summary_path = folder / RESULT_YAML
    if not summary_path.is_file():
        raise FileNotFoundError(
            f"{str(folder)!r} has no result.yaml: it is not a results folder, or saving was "
            "interrupted before it finished"
        )
    summary = read_yaml(summary_path)
    if not isinstance(summary, dict) or summary.get("schema") != "mjsysid.results":
        # (a mapping or nothing: read_yaml refuses the rest) told by its keys, never quoted
        got = "an empty file"
        if summary is not None:
            keys = ", ".join(short_repr(str(k), 30) for k in list(summary)[:8])
            more = f" and {len(summary) - 8} more" if len(summary) > 8 else ""
            got = f"a mapping with keys [{keys}]{more}, no 'schema: mjsysid.results'"
        raise ValueError(f"{summary_path} must be an mjsysid results summary, got {got}")
    version = summary.get("schema_version")
    if not isinstance(version, int) or version > RESULTS_SCHEMA_VERSION:
        shown = version if isinstance(version, int) else f"a {type(version).__name__}"
        raise ValueError(
            f"{summary_path}: schema_version must be <= {RESULTS_SCHEMA_VERSION}, got "
            f"{shown}; upgrade mjsysid to read it"
        )
    _check_summary(summary, summary_path)
    missing = [f for f in summary["files"] if not (folder / f).is_file()]
    if missing:
        raise ValueError(f"{str(folder)!r} is incomplete: missing {missing}")
    return summary


def _check_shapes(folder: Path, z: dict[str, Any], c: dict[str, Any], names: Sequence[str]) -> None:
    """ValueError when the arrays do not fit the parameter names and residual count."""
    p = len(names)
    n = int(np.asarray(z["fun"]).size)
    for file, arrays, shapes in (
        (RESULT_NPZ, z, {"x": (p,), "fun": (n,), "jac": (n, p), "grad": (p,)}),
        (
            CONFIDENCE_NPZ,
            c,
            {
                "half_widths": (p,),
                "covariance": (p, p),
                "at_bound": (p,),
                "determined_by": (p,),
                "interval": (p, 2),
                "alpha": (),
                "method": (),
            },
        ),
    ):
        for key, shape in shapes.items():
            if key in arrays and np.shape(arrays[key]) != shape:
                raise ValueError(
                    must_be(
                        f"{folder / file}: {key}",
                        f"shape {shape} ({p} parameter names, {n} residuals)",
                        arrays[key],
                        f"got shape {np.shape(arrays[key])}; the folder is inconsistent",
                    )
                )
    if not np.all(np.isfinite(z["x"])):
        raise ValueError(f"{folder / 'result.npz'}: x must be finite, got {z['x']!r}")


def _optimize_result(
    summary: dict[str, Any], z: dict[str, Any], names: list[str]
) -> OptimizeResult:
    cand = z.get("candidate", np.zeros((0, len(names))))
    return OptimizeResult(
        x=z["x"],
        cost=float(summary["cost"]),
        fun=z["fun"],
        jac=z["jac"],
        grad=z["grad"],
        status=Status(summary["status"]),
        success=bool(summary["success"]),
        message=str(summary["message"]),
        nfev=int(summary["nfev"]),
        njev=int(summary["njev"]),
        nit=int(summary["nit"]),
        initial_cost=float(summary["initial_cost"]),
        wall_time=float(summary["wall_time"]),
        parameter_names=names,
        optimizer=str(summary["optimizer"]),
        history=FitHistory(
            [float(c) for c in z.get("objective", np.zeros(0))], [np.asarray(c) for c in cand]
        ),
        stages=[StageSummary.from_summary(st) for st in summary.get("stages", [])],
        prior=PriorRows.from_dict(summary["prior"]) if summary.get("prior") else None,
        step_trial=(
            StepTrial.from_summary(summary["step_trial"]) if summary.get("step_trial") else None
        ),
        threshold_profile=(
            ThresholdProfile.from_summary(summary["threshold_profile"])
            if summary.get("threshold_profile")
            else None
        ),
    )


def _confidence(c: dict[str, Any], x: np.ndarray, names: list[str], success: bool) -> Confidence:
    """The :class:`Confidence` of ``confidence.npz`` (``c``); a folder from before the
    bootstrap (no ``method``, ``notes`` or ``interval``) gives linearised intervals."""
    return Confidence(
        names,
        x,
        c["half_widths"],
        c["covariance"],
        float(c["alpha"]),
        converged=bool(c["converged"]) if "converged" in c else success,
        at_bound=np.asarray(c["at_bound"], dtype=int) if "at_bound" in c else None,
        determined_by=[str(b) for b in c["determined_by"]] if "determined_by" in c else None,
        notes=[str(n) for n in c["notes"]] if "notes" in c else [],
        interval=np.asarray(c["interval"], dtype=np.float64) if "interval" in c else None,
        method=str(c["method"]) if "method" in c else "linear",
        whiteness=_whiteness(c),
        stop_reason=str(c["stop_reason"]) if "stop_reason" in c else "",
    )


def _whiteness(c: dict[str, Any]) -> Whiteness | None:
    """The residual's whiteness kept in ``confidence.npz`` (``None``: an older folder)."""
    if "whiteness_dw" not in c:
        return None
    names = [str(n) for n in np.atleast_1d(c["whiteness_signals"])]
    dw = [float(d) for d in np.atleast_1d(c["whiteness_dw"])]
    return Whiteness(
        dict(zip(names, dw, strict=True)),
        float(c["whiteness_pooled"]),
        int(c["whiteness_samples"]),
        judged=bool(c["whiteness_judged"]) if "whiteness_judged" in c else True,
    )


def load_results(folder: str | Path) -> Results:
    """Reads a folder written by :func:`save_results`.

    Raises:
      FileNotFoundError: No such folder, or no ``result.yaml`` (an incomplete save).
      ValueError: A file listed in ``result.yaml`` is missing or malformed, or a newer schema.
    """
    folder = Path(folder)
    summary = _read_summary(folder)
    z = load_npz(folder / RESULT_NPZ, required=("x", "fun", "jac", "grad"))
    c = load_npz(folder / CONFIDENCE_NPZ, required=("covariance", "half_widths", "alpha"))
    names = list(summary["parameter_names"])
    _check_shapes(folder, z, c, names)
    result = _optimize_result(summary, z, names)
    conf = _confidence(c, z["x"], names, result.success)
    return Results(
        folder=folder,
        initial_params=ParameterDict.load_from_disk(folder / PARAMS_X0),
        opt_params=ParameterDict.load_from_disk(folder / PARAMS_X_HAT),
        result=result,
        confidence=conf,
        model_files={k: folder / v for k, v in summary.get("models", {}).items()},
        summary=summary,
    )

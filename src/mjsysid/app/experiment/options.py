"""The option keys of an experiment file: ``residual:``, ``force_laws:``, ``optimizer:``
(the local fit and its outer stages), ``executor:`` and ``confidence:``."""

from __future__ import annotations

from typing import Any

import mujoco

from mjsysid.app.experiment.nodes import ExperimentError, _Node
from mjsysid.fit.executors import executor_options
from mjsysid.fit.global_search import GlobalSearchOptions
from mjsysid.fit.options import FitOptions
from mjsysid.objective.control_transform import ControlTransform
from mjsysid.params.parameter import ParameterDict
from mjsysid.sim.force_laws import law_from_config
from mjsysid.sim.law_params import force_law_params


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


def _executor(top: _Node, source: str) -> dict[str, Any] | None:
    """The ``executor:`` key: a scheduler address, a worker count or a mapping."""
    value = top.get("executor", (str, int, dict), None)
    if value is None:
        return None
    try:
        return executor_options(value, f"{source}: executor")
    except (TypeError, ValueError) as e:
        raise ExperimentError(str(e)) from None


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

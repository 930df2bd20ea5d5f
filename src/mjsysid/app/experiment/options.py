"""The option keys of an experiment file: ``residual:``, ``force_laws:``, ``optimizer:``
(the local fit and its outer stages), ``executor:`` and ``confidence:``."""

from __future__ import annotations

import dataclasses
import itertools
import typing
from typing import Annotated, Any, Literal

import mujoco
from pydantic import ConfigDict, Discriminator, Field, Tag, create_model, model_validator

from mjsysid.app.experiment.nodes import (
    ExperimentError,
    Keys,
    Must,
    Numbers,
    Positive,
    PositiveInt,
    mistake,
)
from mjsysid.fit.options import METHODS, OPTIMIZERS, SCALES, FitOptions, GlobalSearchOptions
from mjsysid.objective.control_transform import ControlTransform
from mjsysid.params.parameter import ParameterDict
from mjsysid.sim.laws.core import force_law_params, law_from_config, library_laws
from mjsysid.sim.rollout import ROLLOUTS


class ResidualKeys(Keys):
    """``residual:`` keywords of :func:`~mjsysid.objective.residual.build_residual_fn`."""

    normalize: Annotated[
        bool | Literal["signal", "column"], Must("true, false, 'signal' or 'column'")
    ] = True
    sensor_weights: dict[str, Annotated[Numbers, Must("a number or list of numbers")]] | None = None
    enabled_observations: list[str] | None = None
    control_interpolation: Literal["zoh", "linear"] = "zoh"


def residual_options_of(
    keys: ResidualKeys | None, control: ControlTransform | None
) -> dict[str, Any]:
    """Keyword arguments for :func:`build_residual_fn` from ``residual:``."""
    residual_options: dict[str, Any] = {}
    if control is not None:
        residual_options["control_transform"] = control
    if keys is not None:
        given = keys.model_dump(exclude_none=True)
        residual_options.update({k: v for k, v in given.items() if k != "control_interpolation"})
        residual_options["control_interpolation"] = keys.control_interpolation
    return residual_options


_LAW_VALUES = ("nominal", "min", "max", "frozen", "estimate_states")


_LawValues = Annotated[dict[str, Numbers], Must("a mapping of parameter names to numbers")]
_LawNames = Annotated[list[str], Must("a list of parameter names")]
_LawStates = Annotated[
    dict[str, Annotated[float, Field(gt=0, allow_inf_nan=False)]],
    Must("a mapping of the law's state names to margins (numbers > 0)"),
]


def _law_keys(name: str, cls: type) -> Any:
    """The keys of one ``force_laws[i]`` entry of library law ``name``: its options (the
    fields of the law's dataclass) and the values of its parameters by name."""
    hints = typing.get_type_hints(cls)
    fields: dict[str, Any] = {
        f.name: (hints[f.name], ... if f.default is dataclasses.MISSING else f.default)
        for f in dataclasses.fields(cls)
        if f.compare  # (the others are set by bind)
    }
    fields |= {"nominal": (_LawValues, {}), "min": (_LawValues, {}), "max": (_LawValues, {})}
    fields |= {"estimate_states": (_LawStates, {})}
    law: Any = Literal[name]
    return create_model(
        f"{cls.__name__}Keys",
        __base__=Keys,
        __doc__=(cls.__doc__ or "").split("\n")[0],
        law=(law, ...),
        **fields,
        frozen=(_LawNames, []),
    )


_LIBRARY_LAWS = library_laws()


class UserLawKeys(Keys):
    """A force law of your own: ``law: "package.module:ClassName"``, its options (checked by
    the class) and the values of its parameters by name."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)
    law: Annotated[
        str,
        Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$"),
        Must(
            value=f"a library law ({', '.join(sorted(_LIBRARY_LAWS))}) or a class of your own "
            "as 'package.module:ClassName'"
        ),
    ]
    name: str
    nominal: _LawValues = Field(default_factory=dict)
    min: _LawValues = Field(default_factory=dict)
    max: _LawValues = Field(default_factory=dict)
    frozen: _LawNames = Field(default_factory=list)
    estimate_states: _LawStates = Field(default_factory=dict)


def _law_tag(value: Any) -> str:
    """Which model checks a ``force_laws[i]`` entry: its library law, or a user's."""
    law = value.get("law") if isinstance(value, dict) else getattr(value, "law", None)
    return law if isinstance(law, str) and law in _LIBRARY_LAWS else "user"


if typing.TYPE_CHECKING:
    ForceLaw = Any
else:
    _TAGGED = [Annotated[_law_keys(k, cls), Tag(k)] for k, cls in sorted(_LIBRARY_LAWS.items())]
    ForceLaw = Annotated[
        typing.Union[tuple([*_TAGGED, Annotated[UserLawKeys, Tag("user")]])],  # noqa: UP007
        Discriminator(_law_tag),
    ]
ForceLaws = Annotated[list[ForceLaw], Must("a list of force laws")]
"""The ``force_laws:`` key."""


def force_laws_of(
    laws: list[Any] | None,
    model: mujoco.MjModel,
    params: ParameterDict,
    options: dict[str, Any],
    source: str,
) -> dict[str, dict[str, float]]:
    """``force_laws:``, a list of laws (``law:`` a library law,
    :func:`~mjsysid.sim.laws.core.library_laws`, or a class of the user's own by import path;
    ``name``, the law's options, and ``nominal``/``min``/``max`` mappings and a
    ``frozen`` list by parameter): adds their parameters to ``params`` and the laws to the
    residual ``options``. Returns ``{law: {state: margin}}`` of the internal states whose
    starts the fit estimates (``estimate_states``)."""
    if laws is None:
        return {}
    out = []
    margins: dict[str, dict[str, float]] = {}
    for i, keys in enumerate(laws):
        config = keys.model_dump(exclude=set(_LAW_VALUES))
        try:
            law = law_from_config(config).bind(model)
            new = force_law_params(
                law,
                keys.nominal,
                min_value=keys.min,
                max_value=keys.max,
                frozen=keys.frozen,
            )
            for p in new:
                params.add(p)
        except (KeyError, TypeError, ValueError, ImportError) as e:
            raise ExperimentError(f"{source}: force_laws[{i}]: {e}") from None
        out.append(law_from_config(config))
        if keys.estimate_states:
            margins[law.name] = dict(keys.estimate_states)
    options["force_laws"] = out
    return margins


_MAX_ITERS = 100  # an experiment's default iteration limit
_SEARCH_KEYS = ("global", "population", "budget", "sigma", "seed", "tol_spread", "scale", "starts")
_HORIZONS = "'auto', 'none' or increasing fractions in (0, 1], e.g. [0.3, 1.0]"
_Fraction = Annotated[float, Field(gt=0, le=1)]


class ThresholdProfileKeys(Keys):
    """``optimizer: threshold_profile:`` as a mapping
    (:class:`~mjsysid.fit.options.ThresholdProfileOptions`)."""

    keep: PositiveInt | None = None
    iterations: PositiveInt | None = None
    sweeps: PositiveInt | None = None
    margin: Annotated[float, Field(ge=0, lt=1)] | None = None


class OptimizerKeys(Keys):
    """``optimizer:`` the local fit (:class:`~mjsysid.fit.options.FitOptions`) and its outer
    stages: a CMA-ES stage first (``global: cmaes`` and its options) or ``starts``."""

    method: Annotated[
        Literal[OPTIMIZERS], Must(f"one of {list(OPTIMIZERS)}")  # type: ignore[valid-type]
    ] = "lm"
    max_iters: Annotated[int, Field(ge=0), Must("int", "a non-negative integer")] = _MAX_ITERS
    xtol: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 1e-8
    gtol: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 1e-8
    ftol: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 1e-4
    eps: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 1.5e-8
    horizons: Annotated[
        Literal["auto", "none"] | _Fraction | list[_Fraction], Must(_HORIZONS, whole=True)
    ] = "auto"
    global_: Annotated[
        Literal[METHODS] | None,  # type: ignore[valid-type]
        Field(alias="global"),
        Must("cmaes, with population/budget/sigma/seed/tol_spread/scale"),
    ] = None
    population: Annotated[int, Field(ge=2)] | None = None
    budget: PositiveInt | None = None
    sigma: Annotated[float, Field(gt=0, le=1)] | None = None
    seed: Annotated[int, Field(ge=0)] | None = None
    tol_spread: Annotated[float, Field(ge=0, lt=1)] | None = None
    scale: (
        Annotated[
            Literal[SCALES], Must(f"one of {list(SCALES)}")  # type: ignore[valid-type]
        ]
        | None
    ) = None
    starts: PositiveInt | None = None
    threshold_profile: Annotated[
        bool | ThresholdProfileKeys,
        Must("true, false or a mapping with keep, iterations, sweeps, margin"),
    ] = True
    rollout: Annotated[
        Literal[ROLLOUTS], Must(f"one of {list(ROLLOUTS)}")  # type: ignore[valid-type]
    ] = "cpu"

    @model_validator(mode="after")
    def _one_outer_stage(self) -> OptimizerKeys:
        given = self.model_dump(include=set(_SEARCH_KEYS) | {"global_"}, exclude_none=True)
        if isinstance(self.horizons, list):
            _increasing_horizons(self.horizons)
        if self.starts is not None and len(given) > 1:
            raise mistake("starts", "given without global: and its options", self.starts)
        if given and self.starts is None and self.global_ is None:
            raise mistake(
                "global", "cmaes, with population/budget/sigma/seed/tol_spread/scale", None
            )
        return self


def _increasing_horizons(values: list[float]) -> None:
    if not all(b > a for a, b in itertools.pairwise(values)):
        raise mistake("horizons", _HORIZONS, values)


def fit_options_of(
    keys: OptimizerKeys | None, source: str
) -> tuple[FitOptions, dict[str, Any], dict[str, Any]]:
    """The ``optimizer:`` section as :class:`FitOptions`, the options it gives besides
    ``method`` and ``max_iters`` (:attr:`Experiment.optimizer_options`), and its outer
    stages (:attr:`Experiment.search`)."""
    if keys is None:
        return FitOptions(max_iters=_MAX_ITERS), {}, {}
    given = keys.model_dump(by_alias=True, exclude_unset=True)
    local = {k: v for k, v in given.items() if k not in (*_SEARCH_KEYS, "rollout")}
    where = f"{source}: optimizer"
    try:
        fit = FitOptions.from_mapping(local, where=where, max_iters=_MAX_ITERS)
    except ValueError as e:
        raise ExperimentError(str(e)) from None
    return fit, fit.given(local), _search_options(given, where)


def _search_options(given: dict[str, Any], where: str) -> dict[str, Any]:
    """``global: cmaes`` (with ``population``, ``budget``, ``sigma``, ``seed``,
    ``tol_spread``, ``scale``) or ``starts: N``, as keywords of
    :func:`~mjsysid.fit.optimize.optimize` (plain YAML values: ``run.yaml`` records them)."""
    search = {k: given[k] for k in _SEARCH_KEYS if k in given}
    device = {"rollout": given["rollout"]} if given.get("rollout", "cpu") != "cpu" else {}
    if "starts" in search:
        return {"starts": search["starts"], **device}
    if not search:
        return device
    try:
        GlobalSearchOptions.from_mapping(search)
    except (TypeError, ValueError) as e:
        raise ExperimentError(f"{where}: {e}") from None
    return {"global_search": search, **device}


class ExecutorKeys(Keys):
    """``executor:`` as a mapping (:func:`~mjsysid.fit.distributed.make_executor`)."""

    workers: PositiveInt | None = None
    scheduler: str | None = None
    threads_per_worker: PositiveInt | None = None
    timeout: Positive | None = None


Executor = Annotated[
    str | PositiveInt | ExecutorKeys,
    Must("a scheduler address, a worker count, or {workers: N} / {scheduler: address}"),
]
"""The ``executor:`` key."""


def executor_keys(value: str | int | ExecutorKeys | None, source: str) -> dict[str, Any] | None:
    """The ``executor:`` key: a scheduler address, a worker count or a mapping."""
    if value is None:
        return None
    if isinstance(value, ExecutorKeys):
        value = value.model_dump(exclude_unset=True)  # type: ignore[assignment]
    try:
        from mjsysid.fit.distributed import executor_options  # (Dask: only when asked for)

        return executor_options(value, f"{source}: executor")
    except (TypeError, ValueError) as e:
        raise ExperimentError(str(e)) from None


class ConfidenceKeys(Keys):
    """``confidence:`` keywords of :func:`~mjsysid.fit.confidence.compute_confidence`."""

    method: Annotated[
        Literal["auto", "linear", "hac", "bootstrap"], Must("auto, linear, hac or bootstrap")
    ] = "auto"
    draws: Annotated[int, Field(ge=2), Must("an integer >= 2")] | None = None
    seed: Annotated[int, Field(ge=0), Must("an integer >= 0")] | None = None
    steps: Annotated[int, Field(ge=1), Must("an integer >= 1")] | None = None


def confidence_options(keys: ConfidenceKeys | None) -> dict[str, Any]:
    """The ``confidence:`` key as keywords of :func:`~mjsysid.fit.confidence.compute_confidence`."""
    return {} if keys is None else keys.model_dump(exclude_none=True)

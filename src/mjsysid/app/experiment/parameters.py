"""The ``parameters:`` key: the kinds an entry may name, the parameters they make (inertia
kinds included), their priors, and the signal and control transforms of the ``sensor_*`` and
``control_*`` kinds."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Annotated, Literal

import mujoco
import numpy as np
from pydantic import Field

from mjsysid.app.experiment.nodes import ExperimentError, Keys, Must, Numbers, as_numbers
from mjsysid.objective.control_transform import ControlTransform
from mjsysid.objective.signal_transform import SignalTransform
from mjsysid.params.inertia import body_inertia_param
from mjsysid.params.kinds import (
    ALL_KINDS,
    CONTROL_KINDS,
    INERTIA_KINDS,
    KINDS,
    SIGNAL_KINDS,
    make_parameter,
)
from mjsysid.params.parameter import Parameter, ParameterDict

_MODEL_KINDS = tuple(
    k for k in ALL_KINDS if k not in (*INERTIA_KINDS, *SIGNAL_KINDS, *CONTROL_KINDS)
)


class PriorKeys(Keys):
    """``prior:`` of a parameter: a MAP fit toward ``mean`` (default: the nominal)."""

    mean: Numbers | None = None
    std: Annotated[
        Numbers, Must(required="the prior's standard deviation, in the parameter's units")
    ]


class _Entry(Keys):
    """The keys every ``parameters[i]`` entry has."""

    kind: str
    target: Annotated[str, Must("the element name or sensor pattern")]
    name: str | None = None
    frozen: bool = False
    nominal: Numbers | None = None
    min: Numbers | None = None
    max: Numbers | None = None
    prior: PriorKeys | None = None


class InertiaEntry(_Entry):
    """A body's mass, mass and centre, or 10-D pseudo-inertia."""

    kind: Literal[tuple(INERTIA_KINDS)]  # type: ignore[valid-type]
    scale_rot_inertia: bool = True


class ModelEntry(_Entry):
    """A field of the model: joint, actuator, geom or pair attributes."""

    kind: Literal[_MODEL_KINDS]  # type: ignore[valid-type]


class DelayEntry(_Entry):
    """A sensor's delay (a :class:`~mjsysid.SignalTransform`)."""

    kind: Literal["sensor_delay"]


class SensorEntry(_Entry):
    """A sensor's gain or bias, on the prediction or on the measurement."""

    kind: Literal["sensor_gain", "sensor_bias"]
    apply_to: Literal["predicted", "measured"] = "predicted"


class DirectedEntry(_Entry):
    """A command's deadband or gain (a :class:`~mjsysid.ControlTransform`), on both sides or
    on one (one parameter per side)."""

    kind: Literal["control_deadband", "control_gain"]
    direction: Literal["both", "positive", "negative"] = "both"


class OffsetEntry(_Entry):
    """A command's offset."""

    kind: Literal["control_offset"]
    direction: Annotated[None, Must("absent: an offset has no direction")] = None


Entry = Annotated[
    InertiaEntry | ModelEntry | DelayEntry | SensorEntry | DirectedEntry | OffsetEntry,
    Field(discriminator="kind"),
]
Parameters = Annotated[list[Entry], Field(min_length=1), Must("a list of parameters")]
"""The ``parameters:`` key."""


def parameters_of(
    entries: list[Entry], spec: mujoco.MjSpec, model: mujoco.MjModel, source: str
) -> tuple[ParameterDict, SignalTransform | None, ControlTransform | None, list[Parameter]]:
    """``(params, signal transform, control transform, fixed)``: ``fixed`` are the frozen
    model parameters given a ``nominal``, whose value the model must take."""
    acc = _ParameterSet()
    for i, entry in enumerate(entries):
        where = f"{source}: parameters[{i}]"
        p = _make_parameter(entry, where, spec, model)
        _set_prior(entry.prior, p, where)
        if isinstance(entry, DelayEntry | SensorEntry):
            acc.add_signal_op(entry, p)
        if isinstance(entry, DirectedEntry | OffsetEntry):
            acc.add_control_op(entry, p, where, model)
        try:
            acc.params.add(p)
        except ValueError as e:
            raise ExperimentError(f"{where}.name: {e}") from None
        if entry.frozen and p.modifier is not None and entry.nominal is not None:
            acc.fixed.append(p)
    return (
        acc.params,
        acc.transform if acc.used_transform else None,
        acc.control if acc.control.parameter_names else None,
        acc.fixed,
    )


def _set_prior(prior: PriorKeys | None, p: Parameter, where: str) -> None:
    """The entry's ``prior: {mean, std}`` on ``p`` (``mean`` left out: the nominal; each a
    number or one per entry): a MAP fit toward it (:mod:`mjsysid.fit.prior`)."""
    if prior is None:
        return
    std = as_numbers(prior.std, f"{where}.prior.std", p.size)
    mean = as_numbers(prior.mean, f"{where}.prior.mean", p.size)
    try:
        p.prior = {"std": std} if mean is None else {"mean": mean, "std": std}
    except ValueError as e:
        raise ExperimentError(f"{where}.prior: {e}") from None


@dataclass
class _ParameterSet:
    """What :func:`parameters_of` gathers: the parameters, the signal and control transforms
    their ``sensor_*``/``control_*`` kinds build, and the frozen ones with a nominal."""

    params: ParameterDict = field(default_factory=ParameterDict)
    transform: SignalTransform = field(default_factory=SignalTransform)
    used_transform: bool = False
    control: ControlTransform = field(default_factory=ControlTransform)
    n_control: int = 0  # operations of the control transform so far (their order matters)
    fixed: list[Parameter] = field(default_factory=list)

    def add_signal_op(self, entry: DelayEntry | SensorEntry, p: Parameter) -> None:
        if isinstance(entry, DelayEntry):
            self.transform.delay(entry.target, p.name)
        elif entry.kind == "sensor_gain":
            self.transform.gain(entry.target, p.name, target=entry.apply_to)
        else:
            self.transform.bias(entry.target, p.name, target=entry.apply_to)
        self.used_transform = True

    def add_control_op(
        self,
        entry: DirectedEntry | OffsetEntry,
        p: Parameter,
        where: str,
        model: mujoco.MjModel,
    ) -> None:
        op, target = entry.kind.split("_", 1)[1], entry.target
        direction = entry.direction if isinstance(entry, DirectedEntry) else "both"
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
            raise ExperimentError(f"{where}.target: {e}") from None
        # what a controller needs to apply the identified transform (saved with the values)
        p.meta.update(direction=direction, order=self.n_control)
        self.n_control += 1


def _name(entry: Entry) -> str | None:
    """The entry's name, or a default per side for one-sided control kinds."""
    if entry.name is None and isinstance(entry, DirectedEntry) and entry.direction != "both":
        return f"{entry.target}_{entry.kind.split('_', 1)[1]}_{entry.direction[:3]}"
    return entry.name


def _make_parameter(
    entry: Entry, where: str, spec: mujoco.MjSpec, model: mujoco.MjModel
) -> Parameter:
    try:
        if isinstance(entry, InertiaEntry):
            return _inertia_parameter(entry, where, spec, model)
        return make_parameter(
            entry.kind,
            model,
            entry.target,
            name=_name(entry),
            nominal=as_numbers(entry.nominal, f"{where}.nominal"),
            min_value=as_numbers(entry.min, f"{where}.min"),
            max_value=as_numbers(entry.max, f"{where}.max"),
            frozen=entry.frozen,
        )
    except ExperimentError:
        raise
    except KeyError as e:
        hint = "" if "did you mean" in str(e.args[0]) else _close_element(entry, model)
        raise ExperimentError(f"{where}: {e.args[0]}{hint}") from None
    except (ValueError, TypeError) as e:
        raise ExperimentError(f"{where}: {e}") from None


_COUNTS = {"joint": "njnt", "actuator": "nu", "geom": "ngeom", "pair": "npair", "body": "nbody"}


def _close_element(entry: Entry, model: mujoco.MjModel) -> str:
    """``"; did you mean 'elbow'?"`` for a target that names no element of its kind's type
    (empty without a close name)."""
    element = "body" if isinstance(entry, InertiaEntry) else KINDS[entry.kind].element
    if element not in _COUNTS:
        return ""
    obj = mujoco.mjtObj.__members__[f"mjOBJ_{element.upper()}"]
    count = int(getattr(model, _COUNTS[element]))
    names = [mujoco.mj_id2name(model, obj, i) or "" for i in range(count)]
    if entry.target in names:
        return ""
    close = difflib.get_close_matches(entry.target, [n for n in names if n], 1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _inertia_parameter(
    entry: InertiaEntry, where: str, spec: mujoco.MjSpec, model: mujoco.MjModel
) -> Parameter:
    p = body_inertia_param(
        spec,
        model,
        entry.target,
        INERTIA_KINDS[entry.kind],
        entry.scale_rot_inertia,
        param_name=entry.name,
        frozen=entry.frozen,
    )
    nominal = as_numbers(entry.nominal, f"{where}.nominal", p.size)
    lo = as_numbers(entry.min, f"{where}.min", p.size)
    hi = as_numbers(entry.max, f"{where}.max", p.size)
    if nominal is None and lo is None and hi is None:
        return p
    ones = np.ones(p.size)
    return Parameter(
        p.name,
        p.nominal if nominal is None else nominal * ones,
        p.min_value if lo is None else lo * ones,
        p.max_value if hi is None else hi * ones,
        frozen=entry.frozen,
        modifier=p.modifier,
        model_modifier=p.model_modifier,
        meta=p.meta,
    )

"""The ``parameters:`` key: the kinds an entry may name, the parameters they make (inertia
kinds included), their priors, and the signal and control transforms of the ``sensor_*`` and
``control_*`` kinds."""

from __future__ import annotations

from dataclasses import dataclass, field

import mujoco
import numpy as np

from mjsysid.app.experiment.nodes import ExperimentError, _Node, _numbers
from mjsysid.objective.control_transform import ControlTransform
from mjsysid.objective.signal_transform import SignalTransform
from mjsysid.params.inertia import InertiaType, body_inertia_param
from mjsysid.params.kinds import KINDS, make_parameter
from mjsysid.params.parameter import Parameter, ParameterDict

INERTIA_KINDS = {
    "body_mass": InertiaType.Mass,
    "body_mass_ipos": InertiaType.MassIpos,
    "body_inertia": InertiaType.Pseudo,
}
SIGNAL_KINDS = ("sensor_delay", "sensor_gain", "sensor_bias")
CONTROL_KINDS = ("control_deadband", "control_gain", "control_offset")
ALL_KINDS = sorted(set(KINDS) | set(INERTIA_KINDS))


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

"""What a force law is: the protocol, its parameters, what it sees at one step, how the laws
of a run take one step in order (:func:`start_laws`, :func:`run_laws`), and how a saved
description becomes a law again.

A force law is what MuJoCo cannot express of an actuator or a joint (a servo's own position
loop, a driver's deadzone, friction that depends on the direction or on the load), written as
one vectorised step over a whole batch of simulations. Before every MuJoCo step of every
simulation of a batch (:mod:`mjsysid.sim.lockstep`), each law, in order:

* reads the state ``q, v, act`` and the controls ``ctrl`` about to be applied, the recorded
  inputs it declared (:attr:`ForceLaw.inputs`: a servo's goal position, a torque-enable flag,
  a supply voltage, held since their last recorded row), the per-recording constants
  (:attr:`ForceLaw.constants`: a firmware gain, a load mass) and its own internal state
  (:attr:`ForceLaw.states`: a filter, a held command, a motor current);
* adds its generalized forces to ``force`` (written to ``data.qfrc_applied``), may change
  ``ctrl`` (a driver's deadzone, a limit switch cutting the command), and returns its next
  internal state.

This is exactly a simulator that calls the law, writes ``data.ctrl`` and
``data.qfrc_applied`` and calls ``mj_step`` (:func:`mjsysid.sim.lockstep.reference_rollout`
is that loop, and the runtime a user's simulator calls,
:class:`mjsysid.sim.laws.runtime.LawRuntime`, does it).

A law's parameters are declared with their size, unit and default bounds
(:class:`LawParameter`); the fit gives every simulation of a batch its candidate's values,
``values[name]`` of shape ``(batch, size)``. Laws are first-class everywhere: their
parameters are :class:`~mjsysid.params.parameter.Parameter` s of kind ``"law:<law>"`` whose
``meta`` holds the law's :meth:`~ForceLaw.config`, so a saved parameter file alone rebuilds
the laws (:func:`laws_from_params`), a user's own law class included: its config names it by
import path (``"mypackage.motors:PwmMotor"``, :func:`law_class`).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.params.parameter import KindBinding, Parameter, ParameterDict, register_kind
from mjsysid.util.errors import must_be

Values = Mapping[str, np.ndarray]
State = dict[str, np.ndarray]

__all__ = [
    "ForceLaw",
    "LawParameter",
    "State",
    "StepContext",
    "Values",
    "force_law_params",
    "is_law_param",
    "law_class",
    "law_from_config",
    "law_name",
    "law_values",
    "laws_from_params",
    "library_laws",
    "parameter_name",
    "register_law",
    "run_laws",
    "start_laws",
    "state_start_key",
]


@dataclass(frozen=True)
class LawParameter:
    """How one parameter of a law is declared.

    Attributes:
      size: Entries (2 for a pair ``(positive direction, negative direction)``).
      unit: SI unit, written as it reads (``"N·m/A"``, ``"Ω"``, ``"s"``; ``"1"``: none).
      lower, upper: Default bounds (a fit may narrow them; a physical quantity that cannot be
        negative has ``lower = 0``).
      doc: What it is, in a few words (saved files and reports show it).
      actuator_field: ``(field, column)`` of the law's actuator that the parameter's mean
        also sets natively (``("gear", 0)``: MuJoCo's gear is the mean of a per-direction
        pair), so that the identified MJCF holds it; ``None``: the law alone reads it.
      command_threshold: The parameter is a threshold on the law's command ``|u|`` (entry 0
        for ``u >= 0``, entry 1 for ``u < 0``): the recorded command levels determine it only
        to the range between the levels around it, and its interval says so
        (:mod:`mjsysid.objective.levels`).
    """

    size: int = 1
    unit: str = "1"
    lower: float = 0.0
    upper: float = math.inf
    doc: str = ""
    actuator_field: tuple[str, int] | None = None
    command_threshold: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
            raise ValueError(must_be("LawParameter.size", "a positive integer", self.size))
        if not self.lower <= self.upper:
            raise ValueError(
                must_be("LawParameter bounds", "lower <= upper", (self.lower, self.upper))
            )
        if not isinstance(self.command_threshold, bool):
            raise TypeError(
                must_be("LawParameter.command_threshold", "True or False", self.command_threshold)
            )
        if self.command_threshold and self.size not in (1, 2):
            raise ValueError(
                must_be(
                    "LawParameter.size of a command_threshold",
                    "1 or 2 (entry 0 for commands >= 0, entry 1 for commands < 0)",
                    self.size,
                )
            )


@dataclass
class StepContext:
    """What every law sees at one step of a batch of ``b`` simulations.

    Arrays are views of the engine's buffers for this step: a law adds its generalized forces
    to :attr:`force` and may write :attr:`ctrl`; it must not write the others.

    Attributes:
      q, v, act: ``(b, nq)``, ``(b, nv)``, ``(b, na)`` the state before the step.
      ctrl: ``(b, nu)`` the controls about to be applied (the recorded ones, after the
        command transforms and the laws before this one).
      force: ``(b, nv)`` the generalized forces applied during the step
        (``qfrc_applied``), the laws' sum.
      time: ``(b,)`` the time of the state (s).
      dt: The timestep (s).
      new_command: ``(b,)`` whether a recorded command row starts at this step (a held
        command is renewed; a limit switch's cut ends).
      inputs: ``{name: (b,)}`` the recorded inputs the law declared, held since their last
        row.
      constants: ``{name: (b,)}`` the per-recording constants the law declared.
      values: ``{parameter: (b, size)}`` the law's parameter values (short names).
      state: ``{name: (b, n)}`` the law's internal state before the step.
      bias, passive, inertia: ``(b, nv)`` the joint-space dynamics at the state
        (:mod:`mjsysid.sim.laws.dynamics`), given when a law of the run says
        :attr:`ForceLaw.dynamics`; ``None`` otherwise.
    """

    q: np.ndarray
    v: np.ndarray
    act: np.ndarray
    ctrl: np.ndarray
    force: np.ndarray
    time: np.ndarray
    dt: float
    new_command: np.ndarray
    inputs: Values = field(default_factory=dict)
    constants: Values = field(default_factory=dict)
    values: Values = field(default_factory=dict)
    state: Values = field(default_factory=dict)
    bias: np.ndarray | None = None
    passive: np.ndarray | None = None
    inertia: np.ndarray | None = None


@runtime_checkable
class ForceLaw(Protocol):
    """A vectorised force law (see the module docstring).

    Attributes:
      name: Unique name; its parameters are called ``f"{name}_{parameter}"``.
      parameters: ``{parameter: LawParameter}`` of the values :meth:`step` reads.
      states: ``{state: size}`` of its internal state (empty for a stateless law).
      inputs: The recorded inputs it reads (names of columns of the recording's
        ``inputs``, :attr:`mjsysid.ModelSequences.inputs`).
      constants: The per-recording constants it reads
        (:attr:`mjsysid.ModelSequences.constants`).
      dynamics: Whether it reads the joint-space dynamics (:attr:`StepContext.bias`,
        ``passive``, ``inertia``; they cost a partial forward pass per step).
    """

    @property
    def name(self) -> str: ...

    @property
    def parameters(self) -> Mapping[str, LawParameter]: ...

    @property
    def states(self) -> Mapping[str, int]: ...

    @property
    def inputs(self) -> tuple[str, ...]: ...

    @property
    def constants(self) -> tuple[str, ...]: ...

    @property
    def dynamics(self) -> bool: ...

    def bind(self, model: mujoco.MjModel) -> ForceLaw:
        """The law with its joints and actuators resolved in ``model`` (a copy)."""
        ...

    def initial_state(self, ctx: StepContext) -> State:
        """The internal state at the start of a rollout (``ctx`` at the first step)."""
        ...

    def step(self, ctx: StepContext) -> State:
        """Adds this step's forces to ``ctx.force`` (may change ``ctx.ctrl``) and returns the
        internal state after the step."""
        ...

    def config(self) -> dict[str, Any]:
        """JSON-able description (``"law"``: its name or import path, and its options) that
        :func:`law_from_config` turns back into the law."""
        ...


# -- the registry of law classes --------------------------------------------------------------
_LIBRARY: dict[str, type] = {}


def clamp(x: npt.ArrayLike, lo: npt.ArrayLike, hi: npt.ArrayLike) -> np.ndarray:
    """``np.clip(x, lo, hi)`` by :func:`numpy.maximum` then :func:`numpy.minimum`: the same
    values (NaN kept), without ``np.clip``'s Python dispatch, which costs more than the work
    itself on a batch of a few dozen rows (a law runs once per physics step)."""
    return np.minimum(np.maximum(x, lo), hi)


def register_law(name: str, cls: type) -> None:
    """Registers a library law class under ``name`` (its configs say ``"law": name``) and its
    parameters' kind ``"law:<name>"`` (a loaded parameter gets its native writes back,
    :func:`bind_law_param`)."""
    _LIBRARY[name] = cls
    register_kind(f"law:{name}", KindBinding("force law", bind_law_param))


def library_laws() -> dict[str, type]:
    """``{name: class}`` of the library's laws (what a config may name without a module)."""
    importlib.import_module("mjsysid.sim.laws")  # registers the library
    return dict(_LIBRARY)


def law_name(cls: type) -> str:
    """What a config calls ``cls``: its library name, or its import path
    ``"module:Class"``."""
    for name, known in _LIBRARY.items():
        if known is cls:
            return name
    return f"{cls.__module__}:{cls.__qualname__}"


def law_class(name: str) -> type:
    """The law class a config names: a library name, or ``"module:Class"`` (imported).

    Raises:
      KeyError: Neither (the library names are listed).
      ImportError: The module cannot be imported, or has no such class (both named).
    """
    if name not in _LIBRARY and ":" not in name:
        importlib.import_module("mjsysid.sim.laws")  # registers the library
    if name in _LIBRARY:
        return _LIBRARY[name]
    module_name, _, attr = name.partition(":")
    if not attr:
        raise KeyError(
            f"unknown force law {name!r}: a library law ({sorted(_LIBRARY)}) or a class of "
            "your own as 'package.module:ClassName'"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ImportError(
            f"force law {name!r}: cannot import module {module_name!r} ({e}); install it or "
            "put it on the Python path of this process (and of every Dask worker)"
        ) from e
    cls: Any = module
    for part in attr.split("."):
        cls = getattr(cls, part, None)
        if cls is None:
            raise ImportError(f"force law {name!r}: module {module_name!r} has no {attr!r}")
    if not isinstance(cls, type):
        raise ImportError(must_be(f"force law {name!r}", "a class", cls))
    return cls


def law_from_config(config: Mapping[str, Any]) -> ForceLaw:
    """The law that ``config`` (from :meth:`ForceLaw.config`) describes.

    Raises:
      KeyError, ImportError: ``config["law"]`` names no law (see :func:`law_class`).
      TypeError: Its options are not the class's.
    """
    if not isinstance(config, Mapping) or not isinstance(config.get("law"), str):
        raise KeyError(must_be("force law config", "a mapping with 'law': a name", config))
    cls = law_class(str(config["law"]))
    options = {k: v for k, v in config.items() if k != "law"}
    law = cls(**options)
    if not isinstance(law, ForceLaw):
        raise TypeError(must_be(f"force law {config['law']!r}", "a ForceLaw", type(law).__name__))
    return law


# -- parameters -------------------------------------------------------------------------------
#: Prefix of the entries of a law's values that hold given starts of its internal states.
_START = "start:"


def state_start_key(state: str) -> str:
    """The key of a law's values that holds given starts of its internal state ``state``:
    ``(batch, size)``, NaN rows keep what :meth:`ForceLaw.initial_state` computes. The fit
    puts the estimated starts of every sequence or shooting window there
    (:func:`mjsysid.objective.initial_state.law_state_params`)."""
    return _START + state


def parameter_name(law: ForceLaw, key: str) -> str:
    """The full name of parameter ``key`` of ``law``: ``f"{law.name}_{key}"``."""
    return f"{law.name}_{key}"


def force_law_params(
    law: ForceLaw,
    nominal: Mapping[str, npt.ArrayLike],
    *,
    min_value: Mapping[str, npt.ArrayLike] | None = None,
    max_value: Mapping[str, npt.ArrayLike] | None = None,
    frozen: Iterable[str] = (),
) -> list[Parameter]:
    """The parameters of ``law``, one per entry of ``law.parameters``.

    Args:
      law: The force law.
      nominal: ``{parameter: value}`` (a scalar is repeated to the parameter's size).
      min_value, max_value: Bounds by parameter (default: the law's
        :attr:`LawParameter.lower` and :attr:`LawParameter.upper`).
      frozen: Parameters kept fixed.

    Raises:
      KeyError: A nominal is missing, or a key names no parameter of the law (both listed).
    """
    specs = dict(law.parameters)
    unknown = sorted(set(nominal) - set(specs))
    missing = sorted(set(specs) - set(nominal))
    if unknown or missing:
        raise KeyError(
            f"force law {law.name!r}: nominal values needed for {sorted(specs)}; "
            f"missing {missing}, unknown {unknown}"
        )
    lo, hi, fixed = dict(min_value or {}), dict(max_value or {}), set(frozen)
    config = law.config()
    kind = config["law"]
    out: list[Parameter] = []
    for key, spec in specs.items():
        n = spec.size
        meta = {
            "kind": f"law:{kind}",
            "target": law.name,
            "field": key,
            "unit": spec.unit,
            "law": config,
        }
        out.append(
            Parameter(
                parameter_name(law, key),
                np.broadcast_to(np.asarray(nominal[key], float), (n,)).copy(),
                np.broadcast_to(np.asarray(lo.get(key, spec.lower), float), (n,)).copy(),
                np.broadcast_to(np.asarray(hi.get(key, spec.upper), float), (n,)).copy(),
                frozen=key in fixed,
                meta=meta,
            )
        )
        _attach_native(out[-1], spec, config)
    return out


def is_law_param(p: Parameter) -> bool:
    """Whether ``p`` is a force law's parameter."""
    kind = p.meta.get("kind")
    return isinstance(kind, str) and kind.startswith("law:")


def laws_from_params(params: ParameterDict) -> list[ForceLaw]:
    """The laws described by the law parameters of ``params``, in first-seen order.

    Raises:
      KeyError, ImportError: A config names no law (a user's law whose module is not
        importable here: the message says which).
    """
    laws: dict[str, ForceLaw] = {}
    for p in params.values():
        if is_law_param(p) and p.meta["target"] not in laws:
            laws[p.meta["target"]] = law_from_config(p.meta["law"])
    return list(laws.values())


def law_values(law: ForceLaw, params: ParameterDict) -> dict[str, np.ndarray]:
    """``{parameter: (1, size)}`` current values of ``law``'s parameters in ``params``."""
    return {k: params[parameter_name(law, k)].value[None] for k in law.parameters}


def bind_law_param(p: Parameter) -> None:
    """A loaded law parameter's modifiers: none (it acts through the law), or the native
    write its law declares for it (:attr:`LawParameter.actuator_field`)."""
    p.modifier = None
    p.model_modifier = None
    config = p.meta.get("law")
    try:
        law = law_from_config(config) if isinstance(config, Mapping) else None
    except (KeyError, ImportError, TypeError, ValueError):
        return  # the law itself reports this when the laws are rebuilt
    if law is None:
        return
    spec = law.parameters.get(str(p.meta.get("field")))
    if spec is not None:
        _attach_native(p, spec, law.config())


def _attach_native(p: Parameter, spec: LawParameter, config: Mapping[str, Any]) -> None:
    """Gives ``p`` the spec and model writes of ``spec.actuator_field`` on the law's
    actuator (``config["actuator"]``): the mean of its value."""
    if spec.actuator_field is None:
        return
    name = str(config.get("actuator", ""))
    attr, col = spec.actuator_field

    def modifier(s: mujoco.MjSpec, param: Parameter) -> None:
        element = s.actuator(name)
        if element is None:
            raise KeyError(f"force law parameter {param.name!r}: no actuator {name!r} in the spec")
        values = np.array(getattr(element, attr), dtype=np.float64)
        values[col] = float(np.mean(param.value))
        setattr(element, attr, values)

    def model_modifier(m: mujoco.MjModel, param: Parameter) -> None:
        i = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_ACTUATOR, name)
        if i < 0:
            raise KeyError(f"force law parameter {param.name!r}: no actuator {name!r} in the model")
        getattr(m, f"actuator_{attr}")[i, col] = float(np.mean(param.value))

    p.modifier, p.model_modifier = modifier, model_modifier


# -- running laws at one step ----------------------------------------------------------------
def _law_context(
    law: ForceLaw,
    ctx: StepContext,
    vals: Mapping[str, np.ndarray],
    state: State,
    inputs: Mapping[str, np.ndarray],
    constants: Mapping[str, np.ndarray],
) -> StepContext:
    """``ctx`` as ``law`` sees it: its values, state, inputs and constants."""
    ctx.values, ctx.state = vals, state
    ctx.inputs = {k: inputs[k] for k in law.inputs}
    ctx.constants = {k: constants[k] for k in law.constants}
    return ctx


def start_laws(
    laws: Sequence[ForceLaw],
    ctx: StepContext,
    values: Sequence[Mapping[str, np.ndarray]],
    inputs: Mapping[str, np.ndarray],
    constants: Mapping[str, np.ndarray],
) -> list[State]:
    """Every law's initial internal state at ``ctx`` (the first step, before any law ran):
    what :meth:`ForceLaw.initial_state` computes, replaced row by row where the law's values
    give a start (:func:`~mjsysid.sim.laws.core.state_start_key`, a finite row)."""
    out = []
    for law, vals in zip(laws, values, strict=True):
        state = law.initial_state(_law_context(law, ctx, vals, {}, inputs, constants))
        for name in law.states:
            given = vals.get(state_start_key(name))
            if given is not None:
                given = np.asarray(given, dtype=np.float64).reshape(len(ctx.time), -1)
                set_rows = np.asarray(np.isfinite(given).all(axis=1))
                state = {**state, name: np.where(set_rows[:, None], given, state[name])}
        out.append(state)
    return out


def run_laws(
    laws: Sequence[ForceLaw],
    ctx: StepContext,
    values: Sequence[Mapping[str, np.ndarray]],
    states: list[State],
    inputs: Mapping[str, np.ndarray],
    constants: Mapping[str, np.ndarray],
) -> None:
    """One step of every law, in order, on ``ctx`` (their forces added to ``ctx.force``,
    ``ctx.ctrl`` changed as they change it); ``states`` replaced by the next ones.

    ``inputs`` and ``constants`` hold every law's by name; each law sees its own.
    """
    for i, (law, vals) in enumerate(zip(laws, values, strict=True)):
        states[i] = law.step(_law_context(law, ctx, vals, states[i], inputs, constants))

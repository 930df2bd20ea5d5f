"""Parameters: named, bounded values that know how to apply themselves to a model.

A :class:`Parameter` holds a 1-D float value (a scalar is a length-1 array, so modifiers read
``p.value[0]``), its nominal value and its box bounds. A :class:`ParameterDict` stacks the
values of its non-frozen parameters into the one vector ``x`` that the optimizer sees.

Frozen parameters are invisible to the optimizer: they are left out of ``as_vector``,
``update_from_vector``, ``get_bounds`` and ``randomize``, and their modifiers are not called
(the model keeps whatever its spec says for that quantity).
"""

from __future__ import annotations

import copy as _copy
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

import mujoco
import numpy as np
import numpy.typing as npt
import yaml

from mjsysid.params.prior import Prior, as_prior
from mjsysid.params.tables import comparison_table, text_table
from mjsysid.util.errors import finite_real, first_outside, must_be, short_repr
from mjsysid.util.files import atomic_write_text, read_yaml

PARAMS_SCHEMA = "mjsysid.parameters"
PARAMS_SCHEMA_VERSION = 1


class ModifierFn(Protocol):
    """Writes a parameter's current value into an ``MjSpec``.

    Called as ``modifier(spec, param)``; ``param.value`` is a 1-D float array. A modifier must
    set absolute values (``joint.damping[0] = p.value[0]``), never accumulate
    (``*= p.value[0]``): mjsysid calls it many times on the same working spec.
    """

    def __call__(self, spec: mujoco.MjSpec, param: Parameter, /) -> None: ...


class ModelModifierFn(Protocol):
    """Optional fast path: writes a parameter's value into a compiled ``MjModel``.

    Called as ``model_modifier(model, param)`` on a private compiled model. It must have
    exactly the effect the spec modifier plus a recompile would have (mjsysid calls
    ``mj_setConst`` afterwards to refresh derived constants), and it must write every field it
    can change, whatever the value: the residual function reuses its candidate models and
    rewrites only the parameters whose values changed. One that also implements
    :class:`~mjsysid.params.targets.FieldWriter` is written in batches, without being called.
    """

    def __call__(self, model: mujoco.MjModel, param: Parameter, /) -> None: ...


_PLAIN = (str, int, float, bool, type(None))


def _copy_plain(value: Any) -> Any:
    """A deep copy of ``value``: dicts, lists and tuples of plain scalars are copied directly
    (a parameter's metadata: several times faster than :func:`copy.deepcopy`, which a fit
    calls for every parameter it copies); anything else by :func:`copy.deepcopy`."""
    if isinstance(value, _PLAIN):
        return value
    if type(value) is dict:
        return {k: _copy_plain(v) for k, v in value.items()}
    if type(value) is list:
        return [_copy_plain(v) for v in value]
    if type(value) is tuple:
        return tuple(_copy_plain(v) for v in value)
    return _copy.deepcopy(value)


@dataclass(frozen=True)
class KindBinding:
    """How parameters of one ``meta.kind`` get their modifiers back from ``meta`` alone
    (when a saved parameter file is loaded).

    Attributes:
      element: What ``meta.target`` names (``"joint"``, ``"body"``, ``"sensor pattern"``), for
        error messages.
      bind: ``bind(param)`` sets ``param.modifier`` and ``param.model_modifier``.
    """

    element: str
    bind: Callable[[Parameter], None]


# The kind registry: filled by the modules that define kinds (mjsysid.params.kinds and
# mjsysid.params.inertia, both imported by the mjsysid.params package).
_KINDS: dict[str, KindBinding] = {}


def register_kind(kind: str, binding: KindBinding) -> None:
    """Makes ``meta.kind == kind`` known to :meth:`ParameterDict.load`."""
    _KINDS[kind] = binding


def registered_kind(kind: object) -> KindBinding | None:
    """The binding registered for ``kind`` (``None`` for an unknown or missing kind)."""
    return _KINDS.get(kind) if isinstance(kind, str) else None


def _has_bool(value: Any) -> bool:
    """Whether ``value`` is or holds a boolean (``np.asarray([True, 0.5])`` hides it)."""
    if isinstance(value, bool | np.bool_):
        return True
    if isinstance(value, list | tuple):
        return any(_has_bool(v) for v in value)
    return False


def as_number_vector(what: str, value: Any) -> np.ndarray:
    """``value`` (a number or a sequence of numbers) as a 1-D float64 array.

    Booleans and strings are errors, not ``1.0`` or a parsed number: ``nominal=True`` or
    ``min_value="0"`` is a mistake that a silent conversion would hide.

    Raises:
      ValueError: ``value`` is not a number or a sequence of numbers, or has more than one
        dimension. The message starts with ``what``.
    """
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError):  # ragged nesting
        raw = None
    if raw is None or raw.dtype.kind not in "iuf" or _has_bool(value):
        raise ValueError(must_be(what, "a number or a sequence of numbers", value))
    if raw.ndim > 1:
        raise ValueError(must_be(what, "a scalar or a 1-D array", raw))
    return raw.astype(np.float64).reshape(-1)


def _as_vector(name: str, field: str, value: npt.ArrayLike) -> np.ndarray:
    return as_number_vector(f"parameter {name!r}: {field}", value)


def _check_flag(what: str, value: Any) -> bool:
    """``value`` as a ``bool``; anything but ``True``/``False`` (``"no"`` is truthy) is an error."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(must_be(what, "True or False", value))
    return bool(value)


class Parameter:
    """A named value with bounds and an optional modifier callback.

    Args:
      name: Unique name within a :class:`ParameterDict`.
      nominal: Starting (and reset) value; a scalar or a 1-D sequence.
      min_value: Lower bound, same shape as ``nominal`` (``-inf`` allowed, not NaN).
      max_value: Upper bound, same shape as ``nominal`` (``+inf`` allowed, not NaN).
      frozen: Exclude from optimization; the modifier is then never called. ``True`` or
        ``False`` (a string such as ``"no"`` is an error, not truthy).
      modifier: ``modifier(spec, param)`` writes ``param.value`` into an ``MjSpec``
        (see :class:`mjsysid.ModifierFn`). ``None`` for parameters that act only on
        signals (delay, gain, bias) or inside a custom residual.
      model_modifier: Optional fast path that writes the value into a compiled ``MjModel``
        with the same effect as ``modifier`` plus a recompile.
      meta: JSON-able description saved with the parameter (for example
        ``{"kind": "joint_damping", "target": "hinge1"}``); known kinds let a saved file
        re-create the modifier on load.
      prior: Optional Gaussian prior (a nominal or CAD value and how sure it is): a
        :class:`~mjsysid.params.prior.Prior`, ``{"mean": ..., "std": ...}`` (``mean`` left out:
        the nominal) or ``(mean, std)``; each a number or one per entry, ``std > 0``. A free
        parameter with a prior makes :func:`mjsysid.fit.optimize` a MAP fit
        (:mod:`mjsysid.fit.prior`). Saved with the parameter.

    The value may later be set outside the bounds (see :attr:`value`); the bounds constrain
    the fit, and :func:`mjsysid.fit.optimize` checks them again (they are plain arrays that can
    be changed in place).

    Raises:
      ValueError: When a number is not a number (booleans and strings are refused), shapes
        differ, the nominal is not finite, a bound is NaN, ``min_value > max_value`` (or
        equal, unless frozen), the nominal is out of bounds, or the prior is malformed
        (see :func:`~mjsysid.params.prior.as_prior`).
      TypeError: ``frozen`` is not ``True`` or ``False``.
    """

    #: A free parameter needs ``min_value < max_value`` (equal bounds mean a fixed value: freeze
    #: it). :class:`mjsysid.compat.Parameter` accepts equal bounds, as ``mujoco.sysid`` does.
    REQUIRE_OPEN_BOX = True

    __slots__ = (
        "_frozen",
        "_prior",
        "_value",
        "max_value",
        "meta",
        "min_value",
        "model_modifier",
        "modifier",
        "name",
        "nominal",
    )

    def __init__(
        self,
        name: str,
        nominal: npt.ArrayLike,
        min_value: npt.ArrayLike,
        max_value: npt.ArrayLike,
        frozen: bool = False,
        modifier: ModifierFn | None = None,
        *,
        model_modifier: ModelModifierFn | None = None,
        meta: Mapping[str, Any] | None = None,
        prior: Prior | Mapping[str, Any] | tuple[Any, Any] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(must_be("Parameter name", "a non-empty string", name))
        self.name = name
        self.nominal = _as_vector(name, "nominal", nominal)
        self.min_value = _as_vector(name, "min_value", min_value)
        self.max_value = _as_vector(name, "max_value", max_value)
        self._frozen = _check_flag(f"parameter {name!r}: frozen", frozen)
        if modifier is not None and not callable(modifier):
            raise ValueError(must_be(f"parameter {name!r}: modifier", "callable or None", modifier))
        if model_modifier is not None and not callable(model_modifier):
            raise ValueError(
                must_be(f"parameter {name!r}: model_modifier", "callable or None", model_modifier)
            )
        self.modifier = modifier
        self.model_modifier = model_modifier
        self.meta: dict[str, Any] = dict(meta or {})
        _check_plain(f"parameter {name!r}: meta", self.meta)
        self._validate()
        self._value = self.nominal.copy()
        self._prior: Prior | None = None
        self.prior = prior

    def _validate(self) -> None:
        n, lo, hi = self.nominal, self.min_value, self.max_value
        where = f"parameter {self.name!r}"
        if n.size == 0:
            raise ValueError(must_be(f"{where}: nominal", "non-empty", n))
        if lo.shape != n.shape or hi.shape != n.shape:
            raise ValueError(
                f"{where}: nominal, min_value and max_value must have the same shape, got "
                f"{n.shape}, {lo.shape} and {hi.shape}"
            )
        if not np.all(np.isfinite(n)):
            raise ValueError(must_be(f"{where}: nominal", "finite", n))
        for field, b in (("min_value", lo), ("max_value", hi)):
            if np.any(np.isnan(b)):
                raise ValueError(
                    must_be(f"{where}: {field}", "a number (+-inf allowed), not NaN", b)
                )
        bad = np.flatnonzero(lo > hi)
        if bad.size:
            i = bad[0]
            raise ValueError(
                f"{where}: min_value must be <= max_value, got min_value[{i}]={float(lo[i])!r} > "
                f"max_value[{i}]={float(hi[i])!r}"
            )
        if self.REQUIRE_OPEN_BOX and not self.frozen:
            eq = np.flatnonzero(lo == hi)
            if eq.size:
                i = eq[0]
                raise ValueError(
                    f"{where}: min_value must be < max_value for a non-frozen parameter, got "
                    f"both equal to {float(lo[i])!r} at index {i}. Freeze it to keep it fixed "
                    "(frozen: true in an experiment file, frozen=True in Python)"
                )
        i = first_outside(n, lo, hi)
        if i is not None:
            raise ValueError(
                f"{where}: nominal must lie within [min_value, max_value], got nominal[{i}]="
                f"{float(n[i])!r} outside [{float(lo[i])!r}, {float(hi[i])!r}]"
            )

    # -- value access -------------------------------------------------------------------------
    @property
    def frozen(self) -> bool:
        """Whether the optimizer leaves this parameter out (``True``/``False`` only).

        Unfreezing a parameter whose bounds are equal (``min_value == max_value``, allowed
        only while frozen) is an error: widen the bounds first.
        """
        return self._frozen

    @frozen.setter
    def frozen(self, flag: bool) -> None:
        flag = _check_flag(f"parameter {self.name!r}: frozen", flag)
        if self.REQUIRE_OPEN_BOX and not flag:
            eq = np.flatnonzero(self.min_value == self.max_value)
            if eq.size:
                i = int(eq[0])
                raise ValueError(
                    f"parameter {self.name!r}: min_value must be < max_value for a non-frozen "
                    f"parameter, got both equal to {float(self.min_value[i])!r} at index {i}; "
                    "widen the bounds before unfreezing it"
                )
        self._frozen = flag

    @property
    def prior(self) -> Prior | None:
        """The Gaussian prior on this parameter, or ``None``.

        Set it to a :class:`~mjsysid.params.prior.Prior`, a mapping ``{"mean", "std"}``
        (``mean`` defaults to the nominal), a pair ``(mean, std)`` or ``None``; it is checked
        (finite mean, ``std > 0``, one number or one per entry).
        """
        return self._prior

    @prior.setter
    def prior(self, value: Prior | Mapping[str, Any] | tuple[Any, Any] | None) -> None:
        self._prior = as_prior(value, self.size, f"parameter {self.name!r}", self.nominal)

    @property
    def value(self) -> np.ndarray:
        """Current value, a 1-D float64 array of length :attr:`size` (mutable in place).

        Setting it checks the shape and finiteness, not the bounds: a value outside them is a
        legal state (a simulated truth, a point of a sweep), but :func:`mjsysid.fit.optimize`
        refuses to start from one, naming the parameter. A value written in place
        (``p.value[0] = ...``) is not checked here; ``optimize`` checks it too.
        """
        return cast(np.ndarray, self._value)

    @value.setter
    def value(self, new: npt.ArrayLike) -> None:
        arr = _as_vector(self.name, "value", new)
        if arr.shape != self.nominal.shape:
            raise ValueError(must_be(f"parameter {self.name!r}: value", f"shape {self.shape}", arr))
        if not np.all(np.isfinite(arr)):
            raise ValueError(must_be(f"parameter {self.name!r}: value", "finite", arr))
        self._value = arr

    @property
    def shape(self) -> tuple[int]:
        """Shape of :attr:`value`, always ``(size,)``."""
        return (self.nominal.size,)

    @property
    def size(self) -> int:
        """Number of scalar entries."""
        return int(self.nominal.size)

    def as_vector(self) -> np.ndarray:
        """A copy of the current value."""
        return cast(np.ndarray, self._value.copy())

    def as_nominal_vector(self) -> np.ndarray:
        """A copy of the nominal value, shape ``(size,)``."""
        return cast(np.ndarray, self.nominal.copy())

    def update_from_vector(self, vector: npt.ArrayLike) -> None:
        """Sets the value from a vector of length :attr:`size`."""
        self.value = vector

    def apply_modifier(self, spec: mujoco.MjSpec) -> None:
        """Runs ``modifier(spec, self)``; does nothing without a modifier (frozen or not:
        skipping frozen parameters is :func:`mjsysid.apply_param_modifiers`' business)."""
        if self.modifier is not None:
            self.modifier(spec, self)

    def move_off_bound(self, fraction: float = 0.05, at_bound_tol: float = 1e-3) -> None:
        """Moves value entries that sit on a bound into the interior (the value, not the
        nominal).

        An entry within ``at_bound_tol·(hi − lo)`` of ``lo`` becomes ``lo + fraction·(hi − lo)``,
        one that close to ``hi`` becomes ``hi − fraction·(hi − lo)``; the others keep their
        value. A fit started on a bound can stall there (a projected step of zero length).
        Entries with an infinite bound are left alone (there is no width to take a fraction of).

        Raises:
          ValueError: ``fraction`` not in ``[0, 0.5]`` or ``at_bound_tol`` negative.
        """
        if not (finite_real(fraction) and 0.0 <= fraction <= 0.5):
            raise ValueError(must_be("move_off_bound: fraction", "a number in [0, 0.5]", fraction))
        if not (finite_real(at_bound_tol) and at_bound_tol >= 0.0):
            raise ValueError(must_be("move_off_bound: at_bound_tol", "a number >= 0", at_bound_tol))
        lo, hi = self.min_value, self.max_value
        with np.errstate(invalid="ignore"):
            width = hi - lo
            finite = np.isfinite(width)
            near_lo = finite & (self._value - lo <= at_bound_tol * width)
            near_hi = finite & (hi - self._value <= at_bound_tol * width) & ~near_lo
        value = self._value.copy()
        value[near_lo] = lo[near_lo] + fraction * width[near_lo]
        value[near_hi] = hi[near_hi] - fraction * width[near_hi]
        self._value = value

    def get_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """``(min_value, max_value)`` copies."""
        return self.min_value.copy(), self.max_value.copy()

    def reset(self) -> None:
        """Restores the nominal value."""
        self._value = self.nominal.copy()

    def sample(self, rng: np.random.Generator | None = None) -> np.ndarray:
        """Draws a value uniformly within the bounds and returns it, shape ``(size,)``.

        :attr:`value` is left as it is (as ``mujoco.sysid`` does); assign the draw to use it,
        or call :meth:`ParameterDict.randomize`.

        Raises:
          ValueError: If a bound is infinite (a uniform draw is then undefined).
        """
        if not (np.all(np.isfinite(self.min_value)) and np.all(np.isfinite(self.max_value))):
            raise ValueError(
                f"parameter {self.name!r}: sample needs finite bounds, got min_value="
                f"{short_repr(self.min_value)}, max_value={short_repr(self.max_value)}"
            )
        rng = np.random.default_rng() if rng is None else rng
        return np.asarray(rng.uniform(self.min_value, self.max_value), dtype=np.float64)

    def copy(self) -> Parameter:
        """A deep copy of the arrays; callbacks are shared (they are stateless functions)."""
        new = _copy.copy(self)
        for attr in ("nominal", "min_value", "max_value", "_value"):
            object.__setattr__(new, attr, getattr(self, attr).copy())
        new.meta = _copy_plain(self.meta)
        return new

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form used by the YAML files (no callbacks)."""
        out: dict[str, Any] = {
            "name": self.name,
            "value": self._value.tolist(),
            "nominal": self.nominal.tolist(),
            "min_value": [_yaml_float(v) for v in self.min_value],
            "max_value": [_yaml_float(v) for v in self.max_value],
            "frozen": self.frozen,
        }
        if self._prior is not None:
            out["prior"] = self._prior.to_dict()
        meta = dict(self.meta)
        if self.modifier is not None and "kind" not in meta:
            meta["modifier"] = "custom"  # not saved: a loaded parameter must say it lacks one
        if meta:
            out["meta"] = meta
        return out

    def __repr__(self) -> str:
        flag = ", frozen" if self.frozen else ""
        return (
            f"Parameter({self.name!r}, value={short_repr(self._value)}, "
            f"bounds=[{short_repr(self.min_value)}, {short_repr(self.max_value)}]{flag})"
        )


def _check_plain(where: str, value: Any) -> None:
    """Raises unless ``value`` is YAML/JSON plain data (what ``meta`` is saved as)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(must_be(f"{where} keys", "strings", k))
            _check_plain(f"{where}[{k!r}]", v)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_plain(f"{where}[{i}]", v)
    elif value is not None and type(value) not in (str, int, float, bool):
        raise TypeError(
            must_be(
                where,
                "plain data (str, int, float, bool, None, list, dict)",
                type(value).__name__,
                "convert numpy values with float() / .tolist()",
            )
        )


def _yaml_float(v: float) -> float | str:
    return float(v) if math.isfinite(v) else (".inf" if v > 0 else "-.inf")


def _from_yaml_float(v: Any) -> float:
    if isinstance(v, str) and v.lower() in (".inf", "inf", "+.inf", "-.inf", "-inf"):
        return -math.inf if v.startswith("-") else math.inf
    return float(v)


def check_modifiers_present(params: Iterable[Parameter], where: str) -> None:
    """Raises when a free parameter was saved with a custom modifier and loaded without it
    (callbacks are not saved): it would silently change nothing."""
    lost = [
        p.name
        for p in params
        if not p.frozen and p.modifier is None and p.meta.get("modifier") == "custom"
    ]
    if lost:
        raise ValueError(
            f"{where}: parameters {lost} were saved with custom modifiers and loaded without "
            "them (callbacks are not saved); set p.modifier again, or load the values into the "
            "ParameterDict that has them (ParameterDict.load_values)"
        )


class ParameterDict:
    """An ordered collection of parameters, flattened into one optimizer vector.

    The vector ``x`` is the concatenation of the values of the non-frozen parameters, in the
    order they were added. Iterating yields parameter names, like a ``dict``.

    Args:
      parameters: The parameters, in vector order: an iterable of :class:`Parameter`, or a
        mapping ``{name: Parameter}`` as ``mujoco.sysid`` takes it (each key must be its
        parameter's name: two names for one parameter would break saving and loading).

    Raises:
      ValueError: A key differs from its parameter's name, or two parameters share a name.
      TypeError: An entry is not a :class:`Parameter`.
    """

    #: The class :meth:`from_dict` (and so :meth:`load_from_disk`) builds parameters with.
    PARAMETER: type[Parameter] = Parameter

    def __init__(
        self, parameters: Iterable[Parameter] | Mapping[str, Parameter] | None = None
    ) -> None:
        self._params: dict[str, Parameter] = {}
        if isinstance(parameters, Mapping):
            for key, p in parameters.items():
                if isinstance(p, Parameter) and key != p.name:
                    raise ValueError(
                        must_be(
                            f"ParameterDict: the key {key!r}",
                            f"the name of its parameter ({p.name!r})",
                            key,
                            "one parameter must not have two names; rename the key or the "
                            "parameter",
                        )
                    )
                self.add(p)
            return
        for p in parameters or ():
            self.add(p)

    # -- container protocol -------------------------------------------------------------------
    def add(self, param: Parameter) -> Parameter:
        """Adds ``param``; a second parameter with the same name is an error."""
        if not isinstance(param, Parameter):
            raise TypeError(must_be("ParameterDict.add: param", "a Parameter", param))
        if param.name in self._params:
            raise ValueError(
                f"ParameterDict already has a parameter named {param.name!r}; names must be unique"
            )
        self._params[param.name] = param
        return param

    def update(self, pdict: ParameterDict | Iterable[Parameter]) -> None:
        """Adds every parameter of ``pdict`` (names must not clash)."""
        items = pdict.values() if isinstance(pdict, ParameterDict) else pdict
        for p in items:
            self.add(p)

    def __getitem__(self, name: str) -> Parameter:
        try:
            return self._params[name]
        except KeyError:
            raise KeyError(
                f"no parameter named {name!r}; known parameters: {list(self._params)}"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._params

    def __len__(self) -> int:
        return len(self._params)

    def __iter__(self) -> Iterator[str]:
        return iter(self._params)

    def keys(self) -> list[str]:
        return list(self._params)

    def values(self) -> list[Parameter]:
        return list(self._params.values())

    def items(self) -> list[tuple[str, Parameter]]:
        return list(self._params.items())

    def non_frozen(self) -> list[Parameter]:
        """The parameters the optimizer sees, in vector order."""
        return [p for p in self._params.values() if not p.frozen]

    @property
    def size(self) -> int:
        """Length of :meth:`as_vector`."""
        return sum(p.size for p in self.non_frozen())

    # -- vector view --------------------------------------------------------------------------
    def _in_vector_order(self, include_frozen: bool) -> list[Parameter]:
        """The non-frozen parameters, then (``include_frozen``) the frozen ones, each in the
        order they were added."""
        free = self.non_frozen()
        if not include_frozen:
            return free
        return free + [p for p in self._params.values() if p.frozen]

    def as_vector(self, include_frozen: bool = False) -> np.ndarray:
        """Concatenated values of all non-frozen parameters, shape ``(size,)``; with
        ``include_frozen`` the frozen ones follow (in the order they were added)."""
        parts = [p.value for p in self._in_vector_order(include_frozen)]
        return np.concatenate(parts) if parts else np.zeros(0)

    def as_nominal_vector(self, include_frozen: bool = False) -> np.ndarray:
        """Like :meth:`as_vector`, with the nominal values."""
        parts = [p.nominal for p in self._in_vector_order(include_frozen)]
        return np.concatenate(parts) if parts else np.zeros(0)

    def update_from_vector(self, vector: npt.ArrayLike) -> None:
        """Writes ``vector`` (the optimizer's ``x``, shape ``(size,)``) back into the
        non-frozen parameters.

        Like :attr:`Parameter.value`, the values are checked for shape and finiteness, not
        against the bounds (see there).
        """
        x = vector
        try:
            arr = np.asarray(x)
        except (TypeError, ValueError):
            arr = np.asarray(None)
        if arr.dtype.kind not in "iuf" or _has_bool(x):
            raise ValueError(
                must_be("update_from_vector: x", f"an array of {self.size} numbers", x)
            )
        arr = arr.astype(np.float64)
        if arr.ndim != 1 or arr.size != self.size:
            raise ValueError(
                must_be(
                    "update_from_vector: x",
                    f"a 1-D array of length {self.size} (one entry per non-frozen scalar)",
                    arr,
                )
            )
        if not np.all(np.isfinite(arr)):
            i = int(np.flatnonzero(~np.isfinite(arr))[0])
            raise ValueError(
                f"update_from_vector: x must be finite, got x[{i}]={float(arr[i])!r} "
                f"({self.get_non_frozen_parameter_names()[i]})"
            )
        i = 0
        for p in self.non_frozen():
            p._value = arr[i : i + p.size].copy()
            i += p.size

    def assign_checked_vector(self, x: np.ndarray, free: list[Parameter]) -> None:
        """``update_from_vector`` for a ``(size,)`` float vector the caller already validated.

        ``free`` is :meth:`non_frozen`, computed once by the caller (the residual's hot loop
        writes every candidate this way).
        """
        i = 0
        for p in free:
            n = p.nominal.size
            p._value = x[i : i + n].copy()
            i += n

    def get_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """``(lower, upper)`` arrays of shape ``(size,)``."""
        ps = self.non_frozen()
        if not ps:
            return np.zeros(0), np.zeros(0)
        return (
            np.concatenate([p.min_value for p in ps]),
            np.concatenate([p.max_value for p in ps]),
        )

    def randomize(self, rng: np.random.Generator | None = None) -> None:
        """Sets every non-frozen parameter to a uniform draw within its bounds."""
        rng = np.random.default_rng() if rng is None else rng
        for p in self.non_frozen():
            p._value = p.sample(rng)

    def sample(self, rng: np.random.Generator | None = None) -> np.ndarray:
        """Uniform draws of the non-frozen parameters within their bounds, in vector order,
        shape ``(size,)``; the values are left as they are (:meth:`randomize` sets them).

        Raises:
          ValueError: A non-frozen parameter has an infinite bound.
        """
        rng = np.random.default_rng() if rng is None else rng
        parts = [p.sample(rng) for p in self.non_frozen()]
        return np.concatenate(parts) if parts else np.zeros(0)

    def move_off_bounds(self, fraction: float = 0.05, at_bound_tol: float = 1e-3) -> ParameterDict:
        """:meth:`Parameter.move_off_bound` on every non-frozen parameter; returns ``self``
        (``optimize(params.move_off_bounds(), ...)``)."""
        for p in self.non_frozen():
            p.move_off_bound(fraction, at_bound_tol)
        return self

    def reset(self) -> None:
        """Restores every parameter (frozen ones too) to its nominal value."""
        for p in self._params.values():
            p.reset()

    def copy(self) -> ParameterDict:
        """Deep copy of values; modifier callables are kept."""
        return type(self)(p.copy() for p in self._params.values())

    def get_non_frozen_parameter_names(self) -> list[str]:
        """One label per entry of :meth:`as_vector`; arrays expand to ``name[i]``."""
        out: list[str] = []
        for p in self.non_frozen():
            out.extend([p.name] if p.size == 1 else [f"{p.name}[{i}]" for i in range(p.size)])
        return out

    # -- text tables --------------------------------------------------------------------------
    def get_parameter_info(self) -> str:
        """A plain-text table of every parameter: ``Name Size Shape Frozen`` (Yes/No)."""
        rows = [
            [p.name, str(p.size), str(p.shape), "Yes" if p.frozen else "No"]
            for p in self._params.values()
        ]
        return "Parameter Information:\n" + text_table(["Name", "Size", "Shape", "Frozen"], rows)

    def compare_parameters(
        self,
        init_params: npt.ArrayLike,
        predicted_params: npt.ArrayLike,
        measured_params: npt.ArrayLike | None = None,
        sig_digits: int = 4,
    ) -> str:
        """A plain-text table comparing start, fit and (when known) true values.

        One row per entry of :meth:`as_vector` (``b[0]``, ``b[1]`` for an array parameter):
        Parameter, Initial, Nominal, Identified, Lower, Upper, Abs Err, Abs Del, Rel Err,
        Rel Del, then ``RMSE: <x>`` (root mean square of ``Identified − measured``; empty
        without ``measured_params``) and ``RMS Delta: <x>`` (of ``Identified − Initial``).
        Relative columns divide by ``|measured|`` / ``|Initial|`` ("-" where that is 0).
        No colours, as plain text for a log or a file.

        Args:
          init_params, predicted_params, measured_params: ``(size,)`` vectors.
          sig_digits: Significant digits of the numbers (``>= 1``).
        """
        labels = self.get_non_frozen_parameter_names()
        lo, hi = self.get_bounds()
        return comparison_table(
            labels,
            {
                "init": init_params,
                "nominal": self.as_nominal_vector(),
                "predicted": predicted_params,
                "lower": lo,
                "upper": hi,
                "measured": measured_params,
            },
            sig_digits,
        )

    # -- files --------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": PARAMS_SCHEMA,
            "schema_version": PARAMS_SCHEMA_VERSION,
            "parameters": [p.to_dict() for p in self._params.values()],
        }

    def save_to_disk(self, path: str | Path) -> None:
        """Writes the parameters (schema, bounds, values, metadata) to a YAML file atomically."""
        atomic_write_text(path, yaml.safe_dump(self.to_dict(), sort_keys=False))

    @classmethod
    def from_dict(cls, data: Any, source: str = "parameters") -> ParameterDict:
        """Builds a dict from :meth:`to_dict` output, or from the peer's YAML layout.

        Known ``meta.kind`` values re-create their modifiers (see :mod:`mjsysid.params.kinds`).
        """
        entries = _parse_entries(data, source)
        out = cls()
        for k, e in enumerate(entries):
            p = cls.PARAMETER(
                e["name"],
                e["nominal"],
                e["min_value"],
                e["max_value"],
                frozen=e["frozen"],
                meta=e.get("meta"),
                prior=e.get("prior"),
            )
            p.value = e["value"]
            bad = np.flatnonzero((p.value < p.min_value) | (p.value > p.max_value))
            if bad.size:
                i = int(bad[0])
                at = f" at index {i}" if p.size > 1 else ""
                raise ValueError(
                    f"{source}: parameters[{k}].value must lie within [{float(p.min_value[i])!r}, "
                    f"{float(p.max_value[i])!r}], got {float(p.value[i])!r}{at}"
                )
            out.add(p)
        for p in out.values():
            binding = registered_kind(p.meta.get("kind"))
            if binding is not None:
                binding.bind(p)
        return out

    @classmethod
    def load_from_disk(cls, path: str | Path) -> ParameterDict:
        """Reads a file written by :meth:`save_to_disk` (or by ``mujoco.sysid``).

        To continue a fit with your own modifiers, use :meth:`load_values` on the dict that
        has them.
        """
        return cls.from_dict(read_yaml(path), source=str(path))

    def load_values(self, path: str | Path, *, strict: bool = True) -> None:
        """Restores values (and frozen flags) saved in ``path`` into this dict, by name.

        Modifiers, bounds and metadata of this dict are kept. With ``strict`` (default) the file
        must hold exactly this dict's names.

        Raises:
          KeyError: A name is missing on either side (``strict``).
          ValueError: A saved value has the wrong length or lies outside this dict's bounds.
        """
        loaded = ParameterDict.load_from_disk(path)
        if strict and set(loaded) != set(self):
            missing, extra = sorted(set(self) - set(loaded)), sorted(set(loaded) - set(self))
            raise KeyError(
                f"{path}: saved parameters must match this ParameterDict, missing {missing}, "
                f"unexpected {extra}"
            )
        for name in loaded:
            if name not in self:
                continue
            mine, saved = self[name], loaded[name]
            if saved.size != mine.size:
                raise ValueError(
                    must_be(f"{path}: {name}.value", f"length {mine.size}", saved.value)
                )
            v = saved.value
            if np.any(v < mine.min_value) or np.any(v > mine.max_value):
                raise ValueError(
                    f"{path}: {name}.value must lie within [{short_repr(mine.min_value)}, "
                    f"{short_repr(mine.max_value)}], got {short_repr(v)}"
                )
            mine.value = v
            mine.frozen = saved.frozen

    def __repr__(self) -> str:
        lines = [f"ParameterDict({len(self)} parameters, {self.size} free values)"]
        for p in self._params.values():
            lines.append(f"  {p!r}")
        return "\n".join(lines)


_ENTRY_KEYS = {
    "name", "value", "nominal", "min_value", "max_value", "frozen", "meta", "prior",
}  # fmt: skip


def _parse_entries(data: Any, source: str) -> list[dict[str, Any]]:
    """Validates the YAML structure and returns one dict per parameter."""
    if not isinstance(data, dict):
        raise ValueError(must_be(f"{source}", "a YAML mapping", type(data).__name__))
    raw = _raw_entries(data, source) if "schema_version" in data else _peer_entries(data, source)
    return [_parse_entry(entry, f"{source}: parameters[{i}]") for i, entry in enumerate(raw)]


def _raw_entries(data: dict[str, Any], source: str) -> list[Any]:
    """The ``parameters`` list of a versioned file (schema and version checked)."""
    version = data["schema_version"]
    if data.get("schema", PARAMS_SCHEMA) != PARAMS_SCHEMA:
        raise ValueError(must_be(f"{source}: schema", repr(PARAMS_SCHEMA), data["schema"]))
    if isinstance(version, bool) or not isinstance(version, int) or version > PARAMS_SCHEMA_VERSION:
        raise ValueError(
            f"{source}: schema_version must be an integer <= {PARAMS_SCHEMA_VERSION}, got "
            f"{version!r}; the file was written by a newer mjsysid, upgrade to read it"
        )
    unknown = set(data) - {"schema", "schema_version", "parameters"}
    if unknown:
        raise ValueError(f"{source}: unknown top-level keys {sorted(unknown)}")
    raw = data.get("parameters")
    if not isinstance(raw, list):
        raise ValueError(must_be(f"{source}: parameters", "a list", raw))
    return raw


def _peer_entries(data: dict[str, Any], source: str) -> list[Any]:
    """The peer writes ``{name: {name, nominal, value, min_value, max_value, frozen}}``."""
    raw = []
    for key, entry in data.items():
        if not isinstance(entry, dict):
            raise ValueError(must_be(f"{source}: {key}", "a mapping of parameter fields", entry))
        raw.append({"name": key, **entry})
    return raw


def _parse_entry(entry: Any, where: str) -> dict[str, Any]:
    """One checked parameter entry with its defaults filled in (``value``, ``frozen``)."""
    if not isinstance(entry, dict):
        raise ValueError(must_be(where, "a mapping", entry))
    unknown = set(entry) - _ENTRY_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}; allowed: {sorted(_ENTRY_KEYS)}")
    for key in ("name", "nominal", "min_value", "max_value"):
        if key not in entry:
            raise ValueError(f"{where}: missing required key {key!r}")
    if not isinstance(entry["name"], str):
        raise ValueError(must_be(f"{where}.name", "a string", entry["name"]))
    e = dict(entry)
    for key in ("min_value", "max_value"):
        vals = e[key] if isinstance(e[key], list) else [e[key]]
        try:
            e[key] = [_from_yaml_float(v) for v in vals]
        except (TypeError, ValueError):
            raise ValueError(must_be(f"{where}.{key}", "numbers", e[key])) from None
    e.setdefault("value", e["nominal"])
    frozen = e.setdefault("frozen", False)
    if not isinstance(frozen, bool):
        raise ValueError(must_be(f"{where}.frozen", "true or false", frozen))
    _check_entry_meta(e.get("meta"), where)
    return e


def _check_entry_meta(meta: Any, where: str) -> None:
    """``meta`` is a mapping; a registered kind needs a ``target`` element name."""
    if meta is not None and not isinstance(meta, dict):
        raise ValueError(must_be(f"{where}.meta", "a mapping", meta))
    if meta and "kind" in meta and not isinstance(meta.get("target"), str):
        binding = registered_kind(meta["kind"])
        element = (
            binding.element
            if binding
            else ("body" if str(meta["kind"]).startswith("body_") else None)
        )
        if element is not None:
            raise ValueError(
                must_be(f"{where}.meta.target", f"a {element} name", meta.get("target"))
            )

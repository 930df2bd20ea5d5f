"""Declarative measurement model: sensor delays, gains and biases, weights, sensor selection.

``SignalTransform.apply`` is a :class:`mjsysid.ModifyResidualFn`. For one sequence it

1. crops the measured series to the window in which every allowed delay reads the prediction
   inside its span (see :mod:`mjsysid.signal_modifier`),
2. resamples the prediction at the measured times, each signal delayed by its parameter,
3. applies gains (to the prediction or to the measurement) and biases,
4. returns ``(y − ȳ)·w / rms(y)`` (RMS of each windowed measured signal, as the default
   residual does).

Patterns use :mod:`fnmatch` syntax (``"*_pos"``) and are matched against the measured signal
names; a pattern matching nothing is an error, raised when the residual function is built.

Speed. Everything that does not depend on the candidate's parameter *values* (the signals kept by
:meth:`SignalTransform.enable_sensors`, the delay window, the per-signal RMS, the weights, the
columns every delay, gain and bias rule touches) is compiled once into a plan
(:mod:`mjsysid.objective.signal_plan`) per (measured series, prediction grid, delay bounds, sensor
weights) and cached on the transform (the last :data:`_MAX_PLANS` plans). A call then costs one
interpolation per distinct delay value, the gains and biases in place and one weighted difference.
:meth:`SignalTransform.batch_residuals` does the same for all candidates of a sequence at once (what
the residual function calls): one plan lookup, one interpolation per distinct (simulation, delays)
pair. The results are those of the section-8 functions (:mod:`mjsysid.signal_modifier`) applied one
by one, to the last bit.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import mujoco
import numpy as np

from mjsysid.data.timeseries import TimeSeries
from mjsysid.objective.signal_plan import (
    Plan,
    PlanRules,
    Rule,
    batch_delays,
    batch_gains_and_biases,
    batch_read,
    build_plan,
    delays_of,
    gains_and_biases,
    match_signals,
    read_delayed,
)
from mjsysid.params.parameter import Parameter, ParameterDict
from mjsysid.util.errors import must_be

_TARGETS = ("predicted", "measured")
_MAX_PLANS = 64
"""How many compiled plans a :class:`SignalTransform` keeps (oldest dropped first)."""

_Rule = Rule  # the older name (pickles of a transform refer to it)


def _param_name(param: Parameter | str, what: str) -> str:
    if isinstance(param, Parameter):
        return param.name
    if isinstance(param, str) and param:
        return param
    raise TypeError(
        must_be(f"SignalTransform.{what}: param", "a Parameter or a parameter name", param)
    )


class SignalTransform:
    """Sensor delays, gains, biases, selection and weights, applied after each rollout.

    The transform stores parameter *names*; the values used are those of the candidate being
    evaluated (the ``params`` passed to :meth:`apply`).

    Args:
      normalize: How the residual of each measured column is scaled, as
        :func:`mjsysid.build_residual_fn`'s ``normalize`` does for the built-in residual:
        ``True`` / ``"signal"`` (default: by the RMS of its signal), ``"column"`` (by its own
        RMS) or ``False`` (not at all). The RMS is that of the windowed measurement.
    """

    def __init__(self, normalize: bool | str = True) -> None:
        self._delays: list[Rule] = []
        self._gains: list[Rule] = []
        self._biases: list[Rule] = []
        self._enabled: list[str] | None = None
        self._weights: dict[str, Any] = {}
        self._plans: dict[tuple[Any, ...], Plan] = {}
        self.normalize = normalize

    @property
    def normalize(self) -> bool | str:
        """The residual scaling (see the class docstring); settable."""
        return self._normalize

    @normalize.setter
    def normalize(self, value: bool | str) -> None:
        ok = isinstance(value, bool) or value in ("signal", "column")
        if not ok:
            raise ValueError(
                must_be("SignalTransform: normalize", "True, False, 'signal' or 'column'", value)
            )
        self._normalize = value
        self._changed()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_plans"] = {}  # plans hold weak references and are rebuilt on demand
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._plans = {}

    def _changed(self) -> SignalTransform:
        self._plans.clear()
        return self

    # -- declaration ------------------------------------------------------------------------
    def delay(self, pattern: str, param: Parameter | str) -> SignalTransform:
        """Delays the predicted signals matching ``pattern`` by the value of ``param`` (one
        number, seconds). A later rule overrides an earlier one for the signals both match
        (``delay("*", "d_all").delay("imu_*", "d_imu")``)."""
        self._delays.append(Rule(self._pattern(pattern, "delay"), _param_name(param, "delay")))
        return self._changed()

    def gain(
        self, pattern: str, param: Parameter | str, target: str = "predicted"
    ) -> SignalTransform:
        """Multiplies matching signals of ``target`` ("predicted" or "measured") by the value."""
        self._gains.append(
            Rule(
                self._pattern(pattern, "gain"),
                _param_name(param, "gain"),
                self._target(target, "gain"),
            )
        )
        return self._changed()

    def bias(
        self, pattern: str, param: Parameter | str, target: str = "predicted"
    ) -> SignalTransform:
        """Adds the value to matching signals of ``target`` ("predicted" or "measured")."""
        self._biases.append(
            Rule(
                self._pattern(pattern, "bias"),
                _param_name(param, "bias"),
                self._target(target, "bias"),
            )
        )
        return self._changed()

    def enable_sensors(
        self, sensor_names: Iterable[str] | None = None, *, names: Iterable[str] | None = None
    ) -> SignalTransform:
        """Uses only these signals (names or patterns) in the residual.

        ``sensor_names`` is ``mujoco.sysid``'s keyword; ``names=`` (mjsysid's former keyword)
        still works. Returns the transform (the peer returns ``None``).
        """
        if (sensor_names is None) == (names is None):
            raise TypeError("enable_sensors() takes sensor_names (or names=), exactly one")
        names = sensor_names if names is None else names
        assert names is not None
        if isinstance(names, str):
            raise TypeError(
                must_be(
                    "SignalTransform.enable_sensors: names",
                    "a list of names or patterns",
                    names,
                    f"pass [{names!r}]",
                )
            )
        self._enabled = [self._pattern(n, "enable_sensors") for n in names]
        return self._changed()

    def set_sensor_weights(self, weights: Mapping[str, Any]) -> SignalTransform:
        """Per-signal weights ``{name_or_pattern: weight}`` (scalar or per column)."""
        if not isinstance(weights, Mapping):
            raise TypeError(
                must_be("set_sensor_weights: weights", "a mapping {pattern: weight}", weights)
            )
        for k, v in weights.items():
            self._pattern(k, "set_sensor_weights")
            try:
                arr = np.asarray(v, dtype=np.float64)
            except (TypeError, ValueError):
                arr = np.array(np.nan)
            if not np.all(np.isfinite(arr)) or np.any(arr < 0) or arr.ndim > 1:
                raise ValueError(
                    must_be(f"set_sensor_weights[{k!r}]", "finite numbers >= 0 (scalar or 1-D)", v)
                )
        self._weights.update(weights)
        return self._changed()

    @staticmethod
    def _pattern(pattern: str, what: str) -> str:
        if not isinstance(pattern, str) or not pattern:
            raise TypeError(
                must_be(f"SignalTransform.{what}: pattern", "a non-empty string", pattern)
            )
        return pattern

    @staticmethod
    def _target(target: str, what: str) -> str:
        if target not in _TARGETS:
            raise ValueError(
                must_be(f"SignalTransform.{what}: target", "'predicted' or 'measured'", target)
            )
        return target

    def signals_with_parameters(self, names: Sequence[str]) -> list[str]:
        """The signals among ``names`` that a delay, gain or bias rule matches."""
        rules = (*self._delays, *self._gains, *self._biases)
        return [n for n in names if any(fnmatch.fnmatchcase(n, r.pattern) for r in rules)]

    @property
    def parameter_names(self) -> list[str]:
        """Names of the parameters the transform reads."""
        return list(dict.fromkeys(r.param for r in (*self._delays, *self._gains, *self._biases)))

    # -- validation -------------------------------------------------------------------------
    def validate_signals(
        self,
        names: Sequence[str],
        params: ParameterDict | None = None,
        widths: Mapping[str, int] | None = None,
    ) -> None:
        """Checks that every pattern matches a measured signal (and parameter names exist).

        Called by :func:`build_residual_fn` with the measured signal names, so mistakes
        surface before any simulation.
        """
        rules = (
            [("delay", r) for r in self._delays]
            + [("gain", r) for r in self._gains]
            + [("bias", r) for r in self._biases]
        )
        for kind, rule in rules:
            if not match_signals(rule.pattern, names):
                raise ValueError(
                    f"SignalTransform.{kind}({rule.pattern!r}, {rule.param!r}): the pattern must "
                    f"match at least one measured signal, got none; measured signals: {list(names)}"
                )
            if params is not None and rule.param not in params:
                raise KeyError(f"SignalTransform.{kind}: no parameter named {rule.param!r}")
            if kind == "delay" and params is not None and params[rule.param].size != 1:
                raise ValueError(
                    must_be(
                        f"SignalTransform.delay({rule.pattern!r}, {rule.param!r}): the parameter",
                        "one value (a delay in s)",
                        f"{params[rule.param].size} values",
                    )
                )
        for pat in (self._enabled or []) + list(self._weights):
            if not match_signals(pat, names):
                raise ValueError(
                    f"SignalTransform: pattern {pat!r} must match at least one measured "
                    f"signal, got none; measured signals: {list(names)}"
                )
        for pat, value in self._weights.items():
            size = np.size(value)
            for n in match_signals(pat, names):
                width = (widths or {}).get(n, size)
                if size not in (1, width):
                    raise ValueError(
                        must_be(
                            f"weights[{pat!r}]",
                            f"a scalar or {width} values (one per column)",
                            value,
                        )
                    )

    # -- evaluation -------------------------------------------------------------------------
    def delay_bounds(self, params: ParameterDict) -> tuple[float, float]:
        """``(lo, hi)`` (s): the smallest lower and largest upper bound of the delay
        parameters in ``params`` (0 always included); the recording is windowed to what
        every delay in that range can read."""
        lo, hi = 0.0, 0.0
        for rule in self._delays:
            p = params[rule.param]
            lo, hi = min(lo, float(p.min_value[0])), max(hi, float(p.max_value[0]))
        return lo, hi

    def apply(
        self,
        params: ParameterDict,
        sensordata_predicted: TimeSeries,
        sensordata_measured: TimeSeries,
        model: mujoco.MjModel,
        return_pred_all: bool = False,
        state: TimeSeries | None = None,
        sensor_weights: Mapping[str, Any] | None = None,
        rms_reference: TimeSeries | None = None,
    ) -> tuple[np.ndarray, TimeSeries, TimeSeries]:
        """Residual ``(y − ȳ)·w / rms(y)`` of one sequence, shape ``(N_window, D)``.

        ``rms_reference``: the series whose RMS normalises instead of the windowed measurement
        (a multiple-shooting window's whole recording, see
        :attr:`mjsysid.ModelSequences.rms_reference`).

        Returns:
          ``(residual, predicted, measured)``: the residual and the aligned series used.
        """
        del model, return_pred_all, state
        pred = sensordata_predicted
        plan = self._plan(params, pred, sensordata_measured, sensor_weights, rms_reference)
        pdata = pred.data if plan.select is None else pred.data[:, plan.select]
        out = read_delayed(plan, pdata, delays_of(plan, params))
        mdata = np.array(plan.mdata, dtype=np.float64) if plan.meas_ops else plan.mdata
        gains_and_biases(plan, params, out, mdata)
        meas_ts = plan.meas_ts
        if plan.meas_ops:
            meas_ts = TimeSeries.trusted(plan.times, mdata, plan.meas_mapping)
        residual = np.subtract(mdata, out)
        residual *= plan.scale
        assert meas_ts is not None
        return residual, TimeSeries.trusted(plan.times, out, plan.pred_mapping_out), meas_ts

    def batch_residuals(
        self,
        params: ParameterDict,
        values: Callable[[str], np.ndarray],
        which: np.ndarray,
        predictions: np.ndarray,
        grid: np.ndarray,
        mapping: Any,
        sensordata_measured: TimeSeries,
        sensor_weights: Mapping[str, Any] | None = None,
        out: np.ndarray | None = None,
        rms_reference: TimeSeries | None = None,
    ) -> np.ndarray:
        """:meth:`apply`'s residuals of ``k`` candidates of one sequence, flattened.

        The batched form the residual function uses: one plan lookup, one interpolation per
        distinct (simulation, delay values) pair (the columns of a finite-difference Jacobian
        that change a gain or a bias reuse the read of the reference candidate), and the gains,
        biases and weighted difference as array operations over all candidates.

        Args:
          params: The parameters (their bounds set the delay window, as in :meth:`apply`).
          values: ``values(name)``: ``(k, size)`` value of parameter ``name`` per candidate.
          which: ``(k,)`` index of each candidate's simulation in ``predictions``.
          predictions: ``(u, nstep, D)`` predicted signals on ``grid`` (``(nstep,)`` times),
            columns as ``mapping`` says.
          sensordata_measured: The recording. sensor_weights: As for :meth:`apply`.
          out: A ``(k, m)`` array (a view into the caller's residual) to write the result
            into; ignored when ``m`` is not this window's size.
          rms_reference: As for :meth:`apply`.

        Returns:
          ``(k, m)``: row ``j`` equals ``apply(...)[0].reshape(-1)`` for candidate ``j``
          (``out`` when it was used).
        """
        k = which.size
        pred0 = TimeSeries.trusted(grid, predictions[0], mapping)
        plan = self._plan(params, pred0, sensordata_measured, sensor_weights, rms_reference)
        rows, cols = plan.mdata.shape
        delays = batch_delays(plan, values, k)
        # gains and biases on a contiguous array (broadcast over a strided view they cost
        # twice as much); the weighted difference then goes to the caller's ``out``
        flat = out if out is not None and out.shape == (k, rows * cols) else None
        out = np.empty((k, rows, cols))
        batch_read(plan, delays, which, predictions, out)
        mdata = np.repeat(plan.mdata[None], k, axis=0) if plan.meas_ops else plan.mdata[None]
        batch_gains_and_biases(plan, values, out, mdata)
        dest = out if flat is None else flat.reshape(k, rows, cols)
        np.subtract(mdata, out, out=dest)
        dest *= plan.scale
        return out.reshape(k, rows * cols) if flat is None else flat

    # -- plans ------------------------------------------------------------------------------
    def _plan(
        self,
        params: ParameterDict,
        pred: TimeSeries,
        meas: TimeSeries,
        sensor_weights: Mapping[str, Any] | None,
        rms_reference: TimeSeries | None = None,
    ) -> Plan:
        """The cached plan for these series, delay bounds and weights (built on a miss)."""
        lo, hi = self.delay_bounds(params)
        pt = pred.times
        wkey: tuple[Any, ...] = ()
        if sensor_weights:
            arrays = [(k, np.asarray(v, dtype=np.float64)) for k, v in sensor_weights.items()]
            wkey = tuple((k, a.shape, a.tobytes()) for k, a in arrays)
        key = (
            id(meas),
            id(pred.signal_mapping),
            pred.data.shape[1],
            pt.shape[0],
            float(pt[0]),
            float(pt[-1]),
            lo,
            hi,
            wkey,
            id(rms_reference),
        )
        plans = self._plans
        plan = plans.get(key)
        if plan is not None and plan.matches(pred, meas) and plan.rms_of is rms_reference:
            return plan
        plan = self._build_plan(pred, meas, lo, hi, sensor_weights, rms_reference)
        plans[key] = plan
        while len(plans) > _MAX_PLANS:
            try:
                del plans[next(iter(plans))]
            except (KeyError, RuntimeError, StopIteration):  # pragma: no cover - races
                break
        return plan

    def _build_plan(
        self,
        pred: TimeSeries,
        meas: TimeSeries,
        lo: float,
        hi: float,
        sensor_weights: Mapping[str, Any] | None,
        rms_reference: TimeSeries | None = None,
    ) -> Plan:
        """Compiles the plan of these series from the current declarations (:func:`build_plan`)."""
        rules = PlanRules(
            self._delays, self._gains, self._biases, self._enabled, self._weights, self.normalize
        )
        return build_plan(rules, pred, meas, lo, hi, sensor_weights, rms_reference)

    def __repr__(self) -> str:
        return (
            f"SignalTransform(delays={len(self._delays)}, gains={len(self._gains)}, "
            f"biases={len(self._biases)}, enabled={self._enabled})"
        )

"""Declarative measurement model: sensor delays, gains and biases, weights, sensor selection.

``SignalTransform.apply`` is a :class:`mjsysid.protocols.ModifyResidualFn`. For one sequence it

1. crops the measured series to the window in which every allowed delay reads the prediction
   inside its span (see :mod:`mjsysid.signal_modifier`),
2. resamples the prediction at the measured times, each signal delayed by its parameter,
3. applies gains (to the prediction or to the measurement) and biases,
4. returns ``(y − ȳ)·w / rms(y)`` (RMS of each windowed measured signal, as the default
   residual does).

Patterns use :mod:`fnmatch` syntax (``"*_pos"``) and are matched against the measured signal
names; a pattern matching nothing is an error, raised when the residual function is built.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

from mjsysid._errors import must_be
from mjsysid.parameter import Parameter, ParameterDict
from mjsysid.signal_modifier import (
    apply_bias,
    apply_delayed_ts_window,
    apply_gain,
    apply_resample_and_delay,
    signal_rms,
)
from mjsysid.timeseries import TimeSeries

_TARGETS = ("predicted", "measured")


@dataclass(frozen=True)
class _Rule:
    pattern: str
    param: str
    target: str = "predicted"


def _param_name(param: Parameter | str, what: str) -> str:
    if isinstance(param, Parameter):
        return param.name
    if isinstance(param, str):
        return param
    raise TypeError(
        must_be(f"SignalTransform.{what}: param", "a Parameter or parameter name", param)
    )


class SignalTransform:
    """Sensor delays, gains, biases, selection and weights, applied after each rollout.

    The transform stores parameter *names*; the values used are those of the candidate being
    evaluated (the ``params`` passed to :meth:`apply`).
    """

    def __init__(self) -> None:
        self._delays: list[_Rule] = []
        self._gains: list[_Rule] = []
        self._biases: list[_Rule] = []
        self._enabled: list[str] | None = None
        self._weights: dict[str, Any] = {}

    # -- declaration ------------------------------------------------------------------------
    def delay(self, pattern: str, param: Parameter | str) -> SignalTransform:
        """Delays the predicted signals matching ``pattern`` by ``param.value[0]`` seconds."""
        self._delays.append(_Rule(self._pattern(pattern, "delay"), _param_name(param, "delay")))
        return self

    def gain(
        self, pattern: str, param: Parameter | str, target: str = "predicted"
    ) -> SignalTransform:
        """Multiplies matching signals of ``target`` ("predicted" or "measured") by the value."""
        self._gains.append(
            _Rule(
                self._pattern(pattern, "gain"),
                _param_name(param, "gain"),
                self._target(target, "gain"),
            )
        )
        return self

    def bias(
        self, pattern: str, param: Parameter | str, target: str = "predicted"
    ) -> SignalTransform:
        """Adds the value to matching signals of ``target`` ("predicted" or "measured")."""
        self._biases.append(
            _Rule(
                self._pattern(pattern, "bias"),
                _param_name(param, "bias"),
                self._target(target, "bias"),
            )
        )
        return self

    def enable_sensors(self, names: Iterable[str]) -> SignalTransform:
        """Uses only these signals (names or patterns) in the residual."""
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
        return self

    def set_sensor_weights(self, weights: Mapping[str, Any]) -> SignalTransform:
        """Per-signal weights ``{name_or_pattern: weight}`` (scalar or per column)."""
        for k, v in weights.items():
            arr = np.asarray(v, dtype=np.float64)
            if not np.all(np.isfinite(arr)) or np.any(arr < 0):
                raise ValueError(must_be(f"set_sensor_weights[{k!r}]", "finite and >= 0", v))
        self._weights.update(weights)
        return self

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

    @property
    def parameter_names(self) -> list[str]:
        """Names of the parameters the transform reads."""
        return list(dict.fromkeys(r.param for r in (*self._delays, *self._gains, *self._biases)))

    # -- validation -------------------------------------------------------------------------
    @staticmethod
    def _match(pattern: str, names: Sequence[str]) -> list[str]:
        return [n for n in names if fnmatch.fnmatchcase(n, pattern)]

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
            if not self._match(rule.pattern, names):
                raise ValueError(
                    f"SignalTransform.{kind}({rule.pattern!r}, {rule.param!r}): the pattern must "
                    f"match at least one measured signal, got none; measured signals: {list(names)}"
                )
            if params is not None and rule.param not in params:
                raise KeyError(f"SignalTransform.{kind}: no parameter named {rule.param!r}")
        for pat in (self._enabled or []) + list(self._weights):
            if not self._match(pat, names):
                raise ValueError(
                    f"SignalTransform: pattern {pat!r} must match at least one measured "
                    f"signal, got none; measured signals: {list(names)}"
                )
        for pat, value in self._weights.items():
            size = np.size(value)
            for n in self._match(pat, names):
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
    def _delay_bounds(self, params: ParameterDict) -> tuple[float, float]:
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
    ) -> tuple[np.ndarray, TimeSeries, TimeSeries]:
        """Residual ``(y − ȳ)·w / rms(y)`` of one sequence, shape ``(N_window, D)``.

        Returns:
          ``(residual, predicted, measured)``: the residual and the aligned series used.
        """
        del model, return_pred_all, state
        pred, meas = sensordata_predicted, sensordata_measured
        names = meas.names
        if self._enabled is not None:
            keep = [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in self._enabled)]
            meas, pred = meas.slice_by_name(keep), pred.slice_by_name(keep)
            names = keep
        lo, hi = self._delay_bounds(params)
        meas = apply_delayed_ts_window(meas, pred, lo, hi)
        rms = signal_rms(meas, "SignalTransform")  # of the raw, windowed measurement
        delays: dict[str, float] = {}
        for rule in self._delays:
            for n in self._match(rule.pattern, names):
                delays[n] = float(params[rule.param].value[0])
        pred = apply_resample_and_delay(pred, meas.times, 0.0, delays)
        for rules, fn in ((self._gains, apply_gain), (self._biases, apply_bias)):
            for rule in rules:
                for n in self._match(rule.pattern, names):
                    if rule.target == "predicted":
                        pred = fn(pred, n, params[rule.param])
                    else:
                        meas = fn(meas, n, params[rule.param])
        w = np.ones(meas.data.shape[1])
        for table in (self._weights, sensor_weights or {}):
            for pat, value in table.items():
                for n in self._match(pat, names):
                    w[meas.columns(n)] *= np.asarray(value, dtype=np.float64)
        residual = (meas.data - pred.data) * (w / rms)
        return residual, pred, meas

    def __repr__(self) -> str:
        return (
            f"SignalTransform(delays={len(self._delays)}, gains={len(self._gains)}, "
            f"biases={len(self._biases)}, enabled={self._enabled})"
        )

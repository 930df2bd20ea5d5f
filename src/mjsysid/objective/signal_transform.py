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
(:class:`Plan`, below) per (measured series, prediction grid, delay bounds, sensor
weights) and cached on the transform (the last :data:`_MAX_PLANS` plans). A call then costs one
interpolation per distinct delay value, the gains and biases in place and one weighted difference.
:meth:`SignalTransform.batch_residuals` does the same for all candidates of a sequence at once (what
the residual function calls): one plan lookup, one interpolation per distinct (simulation, delays)
pair. The results are those of the section-8 functions (:mod:`mjsysid.signal_modifier`) applied one
by one, to the last bit.

The compiled plan of a :class:`~mjsysid.objective.signal_transform.SignalTransform`.

Everything that does not depend on the candidate's parameter *values* (the signals kept by
``enable_sensors``, the delay window, the per-signal RMS, the weights, the columns every delay,
gain and bias rule touches) is compiled once into a :class:`Plan` per (measured series,
prediction grid, delay bounds, sensor weights). A call then costs one interpolation per
distinct delay value, the gains and biases in place and one weighted difference; the batched
form (:func:`batch_residuals`) one interpolation per distinct (simulation, delays) pair. The
results are those of the section-8 functions (:mod:`mjsysid.signal_modifier`) applied one by
one, to the last bit.
"""

from __future__ import annotations

import fnmatch
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import mujoco
import numpy as np

from mjsysid.data.timeseries import TimeSeries
from mjsysid.objective.signal_ops import (
    apply_delayed_ts_window,
    check_inside,
    column_rms,
    signal_rms,
)
from mjsysid.params.parameter import Parameter, ParameterDict
from mjsysid.util.cache import BoundedCache
from mjsysid.util.errors import did_you_mean, must_be

Index = slice | np.ndarray


@dataclass(frozen=True)
class Rule:
    """One delay, gain or bias rule: the signals matching ``pattern`` get parameter ``param``,
    on the ``target`` series ("predicted" or "measured")."""

    pattern: str
    param: str
    target: str = "predicted"


@dataclass(frozen=True)
class PlanRules:
    """The declarations of a transform a plan is compiled from.

    Attributes:
      delays, gains, biases: The rules, in declaration order.
      enabled: Patterns of the signals kept (``None``: all).
      weights: The transform's own ``{pattern: weight}``.
      normalize: ``True`` / ``"signal"``, ``"column"`` or ``False``.
    """

    delays: Sequence[Rule]
    gains: Sequence[Rule]
    biases: Sequence[Rule]
    enabled: Sequence[str] | None
    weights: Mapping[str, Any]
    normalize: bool | str


def match_signals(pattern: str, names: Sequence[str]) -> list[str]:
    """The ``names`` matching the fnmatch ``pattern``, in order."""
    return [n for n in names if fnmatch.fnmatchcase(n, pattern)]


def as_index(cols: Sequence[int] | np.ndarray) -> Index:
    """``cols`` as a slice when they are ascending with a constant step (views, no gathers)."""
    c = np.asarray(cols, dtype=np.intp).reshape(-1)
    if c.size == 1:
        return slice(int(c[0]), int(c[0]) + 1)
    if c.size > 1:
        step = int(c[1] - c[0])
        if step > 0 and np.all(np.diff(c) == step):
            return slice(int(c[0]), int(c[-1]) + 1, step)
    return c


Reader = tuple[Index, Index | None, np.ndarray | None, np.ndarray | None] | None
"""``(rows, next rows, w, 1 − w)`` of a linear interpolation; ``(rows, None, None, None)`` when
every weight is 0 (a plain copy of rows); ``None`` for a one-sample prediction."""
_MISSING = object()  # (a cached reader may be ``None``)
MAX_READERS = 16
"""How many delay values a plan keeps the interpolation rows and weights of."""
FULL_WIDTH = 1 << 16
"""Up to this many ``N x D`` elements, cached weights are stored at full width: numpy
multiplies two ``(N, D)`` arrays faster than an ``(N, D)`` by an ``(N, 1)`` one when ``D`` is
small. The zero-delay weights and the ``w / rms`` scale always are."""


class Plan:
    """Everything ``SignalTransform.apply`` needs that does not depend on parameter values.

    Built for one measured series, one prediction grid and mapping, one pair of delay bounds
    and one set of sensor weights (the cache key); holds the measured series weakly.
    """

    __slots__ = (
        "dts",
        "main",
        "mdata",
        "meas_mapping",
        "meas_ops",
        "meas_ref",
        "meas_ts",
        "ncol",
        "ops",
        "pred_mapping",
        "pred_mapping_out",
        "pred_times",
        "q_hi",
        "q_lo",
        "readers",
        "rms_of",
        "scale",
        "select",
        "sources",
        "times",
        "zero",
    )

    def __init__(self) -> None:
        self.meas_ref: weakref.ref[TimeSeries] | None = None
        self.rms_of: TimeSeries | None = None  # the series normalising, when not the data
        self.pred_times = np.zeros(0)
        self.dts = np.zeros(0)  # pred_times[k + 1] - pred_times[k]
        self.pred_mapping: Any = None
        self.select: Index | None = None  # prediction columns kept (enable_sensors)
        self.ncol = 0  # columns of the output (of the prediction after ``select``)
        self.times = np.zeros(0)  # windowed measured times = where the prediction is read
        self.mdata = np.zeros((0, 0))  # windowed measured data (read-only)
        self.meas_ts: TimeSeries | None = None  # the windowed measured series
        self.meas_mapping: Any = None
        self.pred_mapping_out: Any = None
        self.scale = np.zeros((0, 0))  # weight / RMS of each column, on every row
        # (delay parameter or None for 0, columns), the columns of each signal with that delay
        self.sources: list[tuple[str | None, Index]] = []
        self.main = 0  # the source with most columns: its read becomes the output array
        # One per gain or bias rule: (is_gain, parameter, columns of all its signals,
        # [(signal, columns, width)], on the prediction). A scalar value edits all columns at
        # once; a vector one signal at a time.
        self.ops: list[tuple[bool, str, Index, list[tuple[str, Index, int]], bool]] = []
        self.meas_ops = False  # some gain or bias edits the measurement (then copied)
        self.q_lo = self.q_hi = 0.0
        self.zero: Reader = None
        self.readers: BoundedCache[float, Reader] = BoundedCache(MAX_READERS)

    def matches(self, pred: TimeSeries, meas: TimeSeries) -> bool:
        ref = self.meas_ref
        return (
            ref is not None
            and ref() is meas
            and self.pred_mapping is pred.signal_mapping
            and (self.pred_times is pred.times or np.array_equal(self.pred_times, pred.times))
        )

    def reader(self, d: float) -> Reader:
        """Rows and weights reading the prediction at ``times − d`` (``None``: one sample).

        The arithmetic of :func:`mjsysid.signal_modifier.apply_resample_and_delay`; cached per
        delay value (a finite-difference Jacobian reuses a few values many times).
        """
        if d == 0.0 and self.zero is not None:
            return self.zero
        hit = self.readers.get(d, _MISSING)
        if hit is not _MISSING:
            return hit  # type: ignore[return-value]
        q = self.times - d
        if q[0] < self.q_lo or q[-1] > self.q_hi:  # q is increasing: its ends decide
            check_inside(self.pred_times, q, f"apply_resample_and_delay (delay {d!r} s)")
        pt = self.pred_times
        if pt.size == 1:
            return None
        i = pt.searchsorted(q, side="right")
        i -= 1
        np.minimum(i, pt.size - 2, out=i)
        np.maximum(i, 0, out=i)
        ip1 = i + 1
        w = ((q - pt[i]) / self.dts[i])[:, None]
        n = i.size
        if d == 0.0 or n * self.ncol <= FULL_WIDTH:
            w = np.repeat(w, self.ncol, axis=1)
        rows: tuple[Index, Index]
        if int(i[-1]) - int(i[0]) == n - 1 and np.all(np.diff(i) == 1):
            rows = slice(int(i[0]), int(i[0]) + n), slice(int(i[0]) + 1, int(i[0]) + n + 1)
        else:
            rows = i, ip1
        out: Reader
        if not np.any(w):  # every time on a grid instant: a copy of rows, no arithmetic
            out = (rows[0], None, None, None)
        else:
            out = (rows[0], rows[1], w, 1.0 - w)
        return self.readers.put(d, out)

    def read(self, pdata: np.ndarray, reader: Reader, out: np.ndarray | None = None) -> np.ndarray:
        """Every column of ``pdata (..., nstep, D)`` interpolated by ``reader``: a new
        ``(..., N, D)`` array, or ``out`` (of that shape) written (leading axes: candidates
        read at once)."""
        if reader is None:
            rows = pdata[..., :1, :]
            if out is None:
                return np.repeat(rows, self.times.size, axis=-2)
            out[...] = rows
            return out
        i, ip1, w, omw = reader
        if ip1 is None or w is None or omw is None:
            if isinstance(i, np.ndarray):  # rows are in range: "clip" only spares a buffer
                return pdata.take(i, axis=-2, out=out, mode="clip")
            if out is None:
                return cast(np.ndarray, pdata[..., i, :].copy())
            out[...] = pdata[..., i, :]
            return out
        if isinstance(i, np.ndarray) and isinstance(ip1, np.ndarray):
            a = pdata.take(i, axis=-2, out=out, mode="clip")
            a *= omw
            b = pdata.take(ip1, axis=-2)
            b *= w
        else:  # consecutive rows: views, no gathers
            a = np.multiply(pdata[..., i, :], omw, out=out)
            b = pdata[..., ip1, :] * w
        a += b
        return a


def check_width(is_gain: bool, name: str | None, width: int, v: np.ndarray) -> None:
    if v.size not in (1, width):
        raise ValueError(
            must_be(
                f"{'gain' if is_gain else 'bias'} value for {name!r}", f"1 or {width} entries", v
            )
        )


def build_plan(
    rules: PlanRules,
    pred: TimeSeries,
    meas: TimeSeries,
    lo: float,
    hi: float,
    sensor_weights: Mapping[str, Any] | None,
    rms_reference: TimeSeries | None = None,
) -> Plan:
    """Compiles, in the order the section-8 functions would run, what does not change.

    Args:
      rules: The transform's declarations.
      pred: A prediction on the simulation grid (its times and mapping are the plan's).
      meas: The recording (held weakly). lo, hi: The delay bounds (s).
      sensor_weights: The residual function's weights (after the transform's own).
      rms_reference: The series whose RMS normalises instead of the windowed measurement.
    """
    plan = Plan()
    plan.meas_ref = weakref.ref(meas)
    plan.rms_of = rms_reference
    plan.pred_times = pred.times
    plan.pred_mapping = pred.signal_mapping
    names = meas.names
    pred_sel = pred
    if rules.enabled is not None:
        enabled = rules.enabled
        keep = [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in enabled)]
        meas, pred_sel = meas.slice_by_name(keep), pred.slice_by_name(keep)
        if rms_reference is not None:
            rms_reference = rms_reference.slice_by_name(keep)
        names = keep
        plan.select = as_index(
            np.concatenate([pred.columns(n) for n in keep]) if keep else np.zeros(0, int)
        )
    meas_w = apply_delayed_ts_window(meas, pred_sel, lo, hi)
    rms = _rms(rules.normalize, meas_w, meas_w if rms_reference is None else rms_reference)
    _delay_sources(plan, rules.delays, names, pred_sel)
    _gain_bias_ops(plan, rules, names, pred_sel, meas_w)
    w = np.ones(meas_w.data.shape[1])
    for table in (rules.weights, sensor_weights or {}):
        for pat, value in table.items():
            for n in match_signals(pat, names):
                w[meas_w.columns(n)] *= np.asarray(value, dtype=np.float64)
    plan.scale = np.repeat((w / rms)[None, :], meas_w.data.shape[0], axis=0)
    _finish(plan, pred, pred_sel, meas, meas_w)
    return plan


def _rms(normalize: bool | str, meas_w: TimeSeries, of: TimeSeries) -> np.ndarray:
    """``(D,)`` RMS dividing each column of the windowed ``meas_w`` (of the series ``of``:
    the raw measurement or the reference)."""
    if normalize is False:
        return np.ones(meas_w.data.shape[1])
    if normalize == "column":
        return column_rms(of, "SignalTransform")
    return signal_rms(of, "SignalTransform")


def _delay_sources(
    plan: Plan, delays: Sequence[Rule], names: Sequence[str], pred_sel: TimeSeries
) -> None:
    """``plan.sources`` (the columns of each delay parameter, ``None`` for 0) and
    ``plan.main`` (the source with most columns).

    Raises:
      KeyError: A delayed measured signal is not in the prediction.
    """
    delay_of: dict[str, str] = {}
    for rule in delays:
        for n in match_signals(rule.pattern, names):
            delay_of[n] = rule.param
    unknown = sorted(set(delay_of) - set(pred_sel.names))
    if unknown:
        raise KeyError(
            f"sensor_delays names {unknown} are not signals of the series {pred_sel.names}"
        )
    groups: dict[str | None, list[int]] = {}
    for name in pred_sel.names:
        groups.setdefault(delay_of.get(name), []).extend(pred_sel.columns(name).tolist())
    mapped = {c for cs in groups.values() for c in cs}
    rest = [c for c in range(pred_sel.data.shape[1]) if c not in mapped]
    if rest:
        groups.setdefault(None, []).extend(rest)
    plan.sources = [(pname, as_index(cols)) for pname, cols in groups.items() if cols]
    if not plan.sources:  # no columns at all
        plan.sources = [(None, slice(0, 0))]
    sizes = [len(groups.get(pname, ())) for pname, _ in plan.sources]
    plan.main = sizes.index(max(sizes))


def _gain_bias_ops(
    plan: Plan, rules: PlanRules, names: Sequence[str], pred_sel: TimeSeries, meas_w: TimeSeries
) -> None:
    """``plan.ops``: one per gain or bias rule matching a signal, gains first."""
    for is_gain, table in ((True, rules.gains), (False, rules.biases)):
        for rule in table:
            on_pred = rule.target == "predicted"
            series = pred_sel if on_pred else meas_w
            signals = [(n, series.columns(n)) for n in match_signals(rule.pattern, names)]
            if not signals:
                continue
            all_cols = as_index(np.concatenate([c for _, c in signals]))
            per_signal = [(n, as_index(c), c.size) for n, c in signals]
            plan.ops.append((is_gain, rule.param, all_cols, per_signal, on_pred))
    plan.meas_ops = any(not op[4] for op in plan.ops)


def _finish(
    plan: Plan, pred: TimeSeries, pred_sel: TimeSeries, meas: TimeSeries, meas_w: TimeSeries
) -> None:
    """The windowed measurement (read-only), the mappings and the reading range."""
    plan.times = meas_w.times
    plan.mdata = meas_w.data.view()
    plan.mdata.flags.writeable = False
    if meas_w is not meas:  # our own copy: keep it from being edited through the result
        meas_w.data.flags.writeable = False
    plan.meas_ts = meas_w
    plan.meas_mapping = meas_w.signal_mapping
    plan.pred_mapping_out = pred_sel.signal_mapping
    plan.ncol = pred_sel.data.shape[1]
    pt = pred.times
    tol = 1e-9 * max(pt[-1] - pt[0], 1.0)
    plan.q_lo, plan.q_hi = pt[0] - tol, pt[-1] + tol
    plan.dts = pt[1:] - pt[:-1]
    plan.zero = plan.reader(0.0)


def delays_of(plan: Plan, params: ParameterDict) -> tuple[float, ...]:
    """The delay value of every source of ``plan`` (s; 0 for the undelayed one)."""
    return tuple(
        0.0 if pname is None else float(params[pname].value[0]) for pname, _ in plan.sources
    )


def read_delayed(
    plan: Plan, pdata: np.ndarray, ds: tuple[float, ...], out: np.ndarray | None = None
) -> np.ndarray:
    """The prediction ``(..., nstep, D)`` read at the measured times, each signal at its
    own delay ``ds`` (one per source; one interpolation per distinct value): a new
    ``(..., N, D)`` array, or ``out`` written."""
    # Readers are fetched first, in signal order, so a delay out of range is reported as
    # apply_resample_and_delay would.
    readers = {d: plan.reader(d) for d in ds}
    d_main = ds[plan.main]
    out = plan.read(pdata, readers[d_main], out)
    reads = {d_main: out}
    for (_, cols), d in zip(plan.sources, ds, strict=True):
        if d != d_main:
            y = reads.get(d)
            if y is None:
                y = reads[d] = plan.read(pdata, readers[d])
            out[..., cols] = y[..., cols]
    return out


def gains_and_biases(
    plan: Plan, params: ParameterDict, pred: np.ndarray, mdata: np.ndarray
) -> None:
    """Gains, then biases, in declaration order, in place on ``pred`` or ``mdata``."""
    for is_gain, pname, all_cols, signals, on_pred in plan.ops:
        v = params[pname].value
        target = pred if on_pred else mdata
        for name, cols, width in [(None, all_cols, 1)] if v.size == 1 else signals:
            check_width(is_gain, name, width, v)
            if is_gain:
                target[:, cols] *= v
            else:
                target[:, cols] += v


def batch_delays(plan: Plan, values: Callable[[str], np.ndarray], k: int) -> np.ndarray:
    """``(k, sources)`` delay of every source of ``plan`` per candidate (``values(name)``:
    ``(k, size)`` values of parameter ``name``)."""
    delays = np.zeros((k, len(plan.sources)))
    for c, (pname, _) in enumerate(plan.sources):
        if pname is not None:
            delays[:, c] = values(pname)[:, 0]
    return delays


def batch_read(
    plan: Plan, delays: np.ndarray, which: np.ndarray, predictions: np.ndarray, out: np.ndarray
) -> None:
    """Writes into ``out (k, N, D)`` the prediction of every candidate read at its delays:
    one batched read per distinct delay vector, over the distinct simulations it needs
    (``which``: ``(k,)`` simulation of each candidate in ``predictions (u, nstep, D)``)."""
    groups: dict[bytes, list[int]] = {}
    for j in range(which.size):
        groups.setdefault(delays[j].tobytes(), []).append(j)
    for js in groups.values():
        at: dict[int, int] = {}  # simulation -> its row in this group's read
        inv = [at.setdefault(int(which[j]), len(at)) for j in js]
        sims = list(at)
        if sims == list(range(predictions.shape[0])):
            pdata = predictions
        elif len(sims) == 1:
            pdata = predictions[sims[0] : sims[0] + 1]
        else:
            pdata = predictions[sims]
        if plan.select is not None:
            pdata = pdata[..., plan.select]
        ds = tuple(delays[js[0]].tolist())
        n, j0 = len(sims), js[0]
        if js[:n] == list(range(j0, j0 + n)) and inv[:n] == list(range(n)):
            # the group's first candidates are its simulations, in order: read them in
            # place, then copy their rows to the group's other candidates
            read_delayed(plan, pdata, ds, out[j0 : j0 + n])
            for j, row in zip(js[n:], inv[n:], strict=True):
                out[j] = out[j0 + row]
        else:
            out[js] = read_delayed(plan, pdata, ds)[inv]


def batch_gains_and_biases(
    plan: Plan, values: Callable[[str], np.ndarray], out: np.ndarray, mdata: np.ndarray
) -> None:
    """Gains, then biases, of ``k`` candidates in place on ``out (k, N, D)`` or ``mdata``.

    Per candidate and column, 1 (gain) or 0 (bias) where the rule does not apply: one pass
    over whole rows costs less than one over a few columns of each row, and x·1 and x + 0
    leave every value as it was. Up to :data:`FULL_WIDTH` elements per candidate the values
    are repeated over the rows first (as the plan's weights are): numpy broadcasts a
    ``(k, 1, D)`` array over ``N`` rows one short row at a time.
    """
    k, rows, cols = out.shape
    full = rows * cols <= FULL_WIDTH
    for is_gain, pname, all_cols, signals, on_pred in plan.ops:
        v = values(pname)
        target = out if on_pred else mdata
        vb = np.full((k, 1, cols), 1.0 if is_gain else 0.0)
        for name, cols_, width in [(None, all_cols, 1)] if v.shape[1] == 1 else signals:
            check_width(is_gain, name, width, v[0])
            vb[:, 0, cols_] = v
        if full:
            vb = np.repeat(vb, rows, axis=1)
        if is_gain:
            target *= vb
        else:
            target += vb


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
        self._plans: BoundedCache[tuple[Any, ...], Plan] = BoundedCache(_MAX_PLANS)
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

    def __setstate__(self, state: dict[str, Any]) -> None:
        # plans hold weak references: a copy starts with none (a pickle of an older version
        # holds a plain dict here)
        self.__dict__.update(state)
        self._plans = BoundedCache(_MAX_PLANS)

    def _changed(self) -> SignalTransform:
        self._plans.clear()
        return self

    # -- declaration ------------------------------------------------------------------------
    def delay(self, pattern: str, param: Parameter | str) -> SignalTransform:
        """Delays the predicted signals matching ``pattern`` by the value of ``param`` (one
        number, seconds). A later rule overrides an earlier one for the signals both match
        (``delay("*", "d_all").delay("imu_*", "d_imu")``)."""
        return self._add_rule(self._delays, "delay", pattern, param)

    def gain(
        self, pattern: str, param: Parameter | str, target: str = "predicted"
    ) -> SignalTransform:
        """Multiplies matching signals of ``target`` ("predicted" or "measured") by the value."""
        return self._add_rule(self._gains, "gain", pattern, param, target)

    def bias(
        self, pattern: str, param: Parameter | str, target: str = "predicted"
    ) -> SignalTransform:
        """Adds the value to matching signals of ``target`` ("predicted" or "measured")."""
        return self._add_rule(self._biases, "bias", pattern, param, target)

    def _add_rule(
        self,
        rules: list[Rule],
        what: str,
        pattern: str,
        param: Parameter | str,
        target: str = "predicted",
    ) -> SignalTransform:
        """Appends the checked rule ``what`` (``"delay"``, ``"gain"``, ``"bias"``) to ``rules``."""
        rule = Rule(
            self._pattern(pattern, what), _param_name(param, what), self._target(target, what)
        )
        rules.append(rule)
        return self._changed()

    def enable_sensors(self, sensor_names: Iterable[str]) -> SignalTransform:
        """Uses only these signals (names or patterns) in the residual; returns the
        transform."""
        if isinstance(sensor_names, str):
            raise TypeError(
                must_be(
                    "SignalTransform.enable_sensors: sensor_names",
                    "a list of names or patterns",
                    sensor_names,
                    f"pass [{sensor_names!r}]",
                )
            )
        self._enabled = [self._pattern(n, "enable_sensors") for n in sensor_names]
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
                    f"{did_you_mean(rule.pattern, names)}"
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
                    f"signal, got none; measured signals: {list(names)}{did_you_mean(pat, names)}"
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
        plan = self._plans.get(key)
        if plan is not None and plan.matches(pred, meas) and plan.rms_of is rms_reference:
            return plan
        plan = build_plan(self._rules(), pred, meas, lo, hi, sensor_weights, rms_reference)
        return self._plans.put(key, plan)

    def _rules(self) -> PlanRules:
        """The current declarations, as :func:`build_plan` compiles them."""
        return PlanRules(
            self._delays, self._gains, self._biases, self._enabled, self._weights, self.normalize
        )

    def __repr__(self) -> str:
        return (
            f"SignalTransform(delays={len(self._delays)}, gains={len(self._gains)}, "
            f"biases={len(self._biases)}, enabled={self._enabled})"
        )

"""The compiled plan of a :class:`~mjsysid.objective.signal_transform.SignalTransform`.

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mjsysid.data.timeseries import TimeSeries
from mjsysid.objective.signal_ops import (
    apply_delayed_ts_window,
    check_inside,
    column_rms,
    signal_rms,
)
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import must_be

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
        self.readers: dict[float, Reader] = {}

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
        readers = self.readers
        if d in readers:
            return readers[d]
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
        readers[d] = out
        while len(readers) > MAX_READERS:
            try:
                del readers[next(iter(readers))]
            except (KeyError, RuntimeError, StopIteration):  # pragma: no cover - races
                break
        return out

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
                return pdata[..., i, :].copy()
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
    leave every value as it was.
    """
    k, _, cols = out.shape
    for is_gain, pname, all_cols, signals, on_pred in plan.ops:
        v = values(pname)
        target = out if on_pred else mdata
        vb = np.full((k, 1, cols), 1.0 if is_gain else 0.0)
        for name, cols_, width in [(None, all_cols, 1)] if v.shape[1] == 1 else signals:
            check_width(is_gain, name, width, v[0])
            vb[:, 0, cols_] = v
        if is_gain:
            target *= vb
        else:
            target += vb

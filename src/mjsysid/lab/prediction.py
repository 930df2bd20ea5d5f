"""Held-out multi-step prediction: scoring and comparing identified models of any kind.

One long open-loop run is a poor judge of a model of a chaotic system (a pendulum): two fits
with the same error can get opposite verdicts. Here a model is judged on many short runs:

1. **Windows from recorded states.** The held-out sequences are cut, for each horizon ``H``
   (default 0.1, 0.5 and 2 s), into windows of ``H`` seconds, each simulated from the
   recorded state at its start (:func:`~mjsysid.objective.windows.split_windows`: measured
   positions and velocities, unmeasured velocities from a local fit; the recordings' samples
   between grid times are compared with the prediction interpolated to them, as in the fit).
   The activations of filter or integrator actuators, which no sensor shows, come from an
   open-loop simulation of the whole sequence with the model itself (their dynamics are
   driven by the commands only).
2. **Any model kind.** Every model is simulated by the residual function of its own
   experiment (an :class:`ExperimentLike`, such as ``mjsysid.app.experiment.Experiment``)
   with its identified parameters: native MuJoCo parameters, control and sensor transforms,
   force laws and user laws alike, on its own state layout (models with different state
   sizes are compared on the same recordings). The residuals are weighted and normalised as
   the fit's.
3. **Scores.** For horizon ``H`` and window ``w`` the score is the mean squared residual
   ``e_w``; the model's score is ``mean_w e_w`` with its standard error
   ``std_w(e_w) / sqrt(W)``.
4. **Information criteria on an effective sample size.** Residuals of a multi-step
   prediction are autocorrelated; counting every sample as independent overstates the
   evidence. With ``rho`` the lag-1 autocorrelation of the residuals (pooled over windows
   and signals), ``n_eff = n (1 - rho) / (1 + rho)`` (the AR(1) variance-inflation factor;
   Bayley & Hammersley 1946, Bretherton et al. 1999, eq. 31), and
   ``AIC = n_eff ln(SSR/n) + 2k``, ``BIC = n_eff ln(SSR/n) + k ln(n_eff)`` (Burnham &
   Anderson 2002, sec. 2.2), ``k`` the model's fitted values (initial states left out).
5. **A verdict only when it is clear.** Model ``A`` is better than ``B`` when, at every
   horizon where their difference is significant, it favours ``A`` (at least one such
   horizon), and BIC on the primary horizon (0.5 s) agrees. A difference is significant when
   the mean paired difference of window scores exceeds 2 standard errors (of the paired
   differences over windows) and 5 % of the larger score. Otherwise: "no clear difference".
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import mujoco
import numpy as np

from mjsysid.data.sequences import ModelSequences
from mjsysid.data.states import create_initial_state, state_slices
from mjsysid.objective.predictions import SequencePrediction
from mjsysid.objective.windows import split_windows
from mjsysid.util.errors import must_be

if TYPE_CHECKING:
    from mjsysid.objective.residual import ResidualFunction
    from mjsysid.params.parameter import ParameterDict

__all__ = [
    "DEFAULT_HORIZONS",
    "MIN_RELATIVE",
    "PRIMARY_HORIZON",
    "SIGNIFICANCE",
    "ExperimentLike",
    "HorizonScore",
    "PairVerdict",
    "PredictionScore",
    "compare_pair",
    "effective_sample_size",
    "format_scores",
    "information_criteria",
    "lag1_autocorrelation",
    "on_model",
    "score_prediction",
    "verdict",
]


class ExperimentLike(Protocol):
    """What scoring asks of a model's experiment (``mjsysid.app.experiment.Experiment`` is
    one): its name, model and data, and a residual function built like its fit's on
    other sequences (its force laws, transforms, weights and normalisation)."""

    @property
    def name(self) -> str: ...

    @property
    def spec(self) -> mujoco.MjSpec: ...

    @property
    def model(self) -> mujoco.MjModel: ...

    @property
    def sequences(self) -> ModelSequences: ...

    def build_holdout_residual_fn(
        self, sequences: ModelSequences | None = None
    ) -> ResidualFunction | None: ...


DEFAULT_HORIZONS = (0.1, 0.5, 2.0)
"""Window lengths (s) of the prediction."""

PRIMARY_HORIZON = 0.5
"""The horizon whose BIC must agree with a verdict (the nearest one given)."""

SIGNIFICANCE = 2.0
"""A difference must exceed this many standard errors."""

MIN_RELATIVE = 0.05
"""... and this fraction of the larger score."""


def lag1_autocorrelation(blocks: Sequence[np.ndarray]) -> float:
    """``rho = sum r_t r_{t+1} / sum r_t^2`` pooled over ``blocks`` (each ``(T,)`` or
    ``(T, m)``: time along axis 0, columns separate); NaNs dropped; 0 without pairs."""
    num = den = 0.0
    for b in blocks:
        r = np.asarray(b, dtype=np.float64)
        r = r.reshape(r.shape[0], -1)
        r = np.where(np.isfinite(r), r, 0.0)
        num += float(np.sum(r[1:] * r[:-1]))
        den += float(np.sum(r * r))
    return num / den if den > 0 else 0.0


def effective_sample_size(n: int, rho: float) -> float:
    """``n (1 - rho) / (1 + rho)`` clipped to ``[1, n]`` (``rho <= 0`` gives ``n``)."""
    if n < 1:
        raise ValueError(must_be("n", "a count >= 1", n))
    rho = min(max(float(rho), 0.0), 0.999999)
    return float(min(max(n * (1.0 - rho) / (1.0 + rho), 1.0), n))


def information_criteria(ssr: float, n: int, n_eff: float, k: int) -> tuple[float, float]:
    """``(AIC, BIC)`` on ``n_eff`` effective samples of ``n`` residuals (see the module
    docstring; ``ssr > 0``)."""
    if not (ssr > 0 and n > 0 and n_eff > 0 and k >= 0):
        raise ValueError(must_be("(ssr, n, n_eff, k)", "positive (k >= 0)", (ssr, n, n_eff, k)))
    base = n_eff * math.log(ssr / n)
    return base + 2.0 * k, base + k * math.log(n_eff)


@dataclass(frozen=True)
class HorizonScore:
    """One model at one horizon.

    Attributes:
      horizon: Window length (s).
      windows: ``(W,)`` mean squared residual of each window.
      n: Residuals compared. ssr: Their sum of squares.
      rho: Lag-1 autocorrelation of the residuals. n_eff: Effective sample size.
      aic, bic: :func:`information_criteria`.
    """

    horizon: float
    windows: np.ndarray
    n: int
    ssr: float
    rho: float
    n_eff: float
    aic: float
    bic: float

    @property
    def mean(self) -> float:
        """Mean window score."""
        return float(np.mean(self.windows))

    @property
    def diverged(self) -> int:
        """Windows whose simulation diverged (scored ``inf``)."""
        return int(np.count_nonzero(~np.isfinite(self.windows)))

    @property
    def se(self) -> float:
        """Standard error of :attr:`mean` over the windows (``inf`` with one window or a
        diverged one)."""
        w = self.windows.size
        if w < 2 or self.diverged:
            return math.inf
        return float(np.std(self.windows, ddof=1) / math.sqrt(w))

    def as_dict(self) -> dict[str, Any]:
        """The JSON/YAML form."""
        return {
            "horizon": self.horizon,
            "windows": int(self.windows.size),
            "mean": self.mean,
            "se": self.se,
            "diverged": self.diverged,
            "n": self.n,
            "rho": self.rho,
            "n_eff": self.n_eff,
            "aic": self.aic,
            "bic": self.bic,
        }


@dataclass(frozen=True)
class PredictionScore:
    """One model on the held-out data: ``label``, fitted values ``k``, one score a horizon."""

    label: str
    k: int
    horizons: tuple[HorizonScore, ...]
    state_size: int = 0

    def at(self, horizon: float) -> HorizonScore:
        """The score at the horizon nearest to ``horizon``."""
        return min(self.horizons, key=lambda h: abs(h.horizon - horizon))

    def as_dict(self) -> dict[str, Any]:
        """The JSON/YAML form."""
        return {
            "label": self.label,
            "k": self.k,
            "state_size": self.state_size,
            "horizons": [h.as_dict() for h in self.horizons],
        }


def on_model(data: ModelSequences, exp: ExperimentLike) -> ModelSequences:
    """The recordings of ``data`` as sequences of ``exp``'s model, each started from the
    recorded positions and velocities on that model's own state layout (activations zero:
    the first window's are replaced by the model's own simulation, see
    :func:`score_prediction`).

    Raises:
      ValueError: The models' joints differ (``nq``/``nv``), or the model has actuators and
        the data no commands.
    """
    model, source = exp.model, data.model
    if (model.nq, model.nv) != (source.nq, source.nv):
        raise ValueError(
            must_be(
                f"the model of {exp.name!r}",
                f"the joints of the data's model (nq = {source.nq}, nv = {source.nv})",
                f"nq = {model.nq}, nv = {model.nv}",
            )
        )
    src, names, x0s, ctrls, senss, inputs, consts = state_slices(source), [], [], [], [], [], []
    for i, (name, x0, ctrl, meas) in enumerate(data.sequences()):
        if model.nu and ctrl is None:
            raise ValueError(
                must_be(f"sequence {name!r}", "commands for the model's actuators", None)
            )
        x = np.asarray(x0)
        start = create_initial_state(model, x[src["qpos"]], x[src["qvel"]], time=float(x[0]))
        law_inputs, constants = data.law_data(i)
        names.append(name)
        x0s.append(start)
        ctrls.append(ctrl if model.nu else None)
        senss.append(meas)
        inputs.append(law_inputs)
        consts.append(constants)
    return ModelSequences(
        exp.sequences.name, exp.spec, names, x0s, ctrls, senss, inputs=inputs, constants=consts
    )


def _act_from_simulation(
    exp: ExperimentLike, params: ParameterDict, base: ModelSequences, windows: ModelSequences
) -> ModelSequences:
    """``windows`` with every start activation read from an open-loop simulation of its
    whole sequence with the model and ``params``."""
    model = base.model
    sl = state_slices(model)
    preds = _predict(exp, params, base)
    states = {p.sequence_name: np.asarray(p.state) for p in preds}
    x0s = []
    for name, x0, _, _ in windows.sequences():
        s = states[name.rsplit("#", 1)[0]]
        k = int(np.clip(np.searchsorted(s[:, 0], float(x0[0]) + 1e-9) - 1, 0, len(s) - 1))
        x = np.array(x0, dtype=np.float64)
        x[sl["act"]] = s[k, sl["act"]]
        x0s.append(x)
    return dataclasses.replace(windows, initial_state=x0s)


def _predict(
    exp: ExperimentLike, params: ParameterDict, data: ModelSequences
) -> list[SequencePrediction]:
    """The predictions of ``data`` with ``exp``'s residual options at ``params``."""
    rf = exp.build_holdout_residual_fn(data)
    assert rf is not None
    try:
        return rf.predict(None, params)
    finally:
        rf.close()


def _horizon_score(
    exp: ExperimentLike, params: ParameterDict, windows: ModelSequences, horizon: float
) -> HorizonScore:
    preds = _predict(exp, params, windows)
    blocks = [_by_time(p) for p in preds]
    # a window whose simulation diverged (NaN residuals) scores inf
    scores = np.array(
        [float(np.mean(np.square(b))) if np.isfinite(b).all() else np.inf for b in blocks if b.size]
    )
    flat = np.concatenate([b.ravel() for b in blocks])
    flat = flat[np.isfinite(flat)]
    n, ssr = int(flat.size), float(flat @ flat)
    rho = lag1_autocorrelation(blocks)
    n_eff = effective_sample_size(max(n, 1), rho)
    aic, bic = information_criteria(max(ssr, np.finfo(float).tiny), max(n, 1), n_eff, _k(params))
    return HorizonScore(horizon, scores, n, ssr, rho, n_eff, aic, bic)


def _by_time(pred: Any) -> np.ndarray:
    """A sequence's residual block as ``(T, m)``: time along axis 0 (the block is row-major
    over the measured samples; ``(n, 1)`` where a custom residual has another length)."""
    r = np.asarray(pred.residual, dtype=np.float64).ravel()
    rows = len(pred.measured_used.times)
    return r.reshape(rows, -1) if rows and r.size % rows == 0 else r.reshape(-1, 1)


def _k(params: ParameterDict) -> int:
    return int(params.size)


def score_prediction(
    label: str,
    exp: ExperimentLike,
    params: ParameterDict,
    data: ModelSequences,
    horizons: Sequence[float] = DEFAULT_HORIZONS,
) -> PredictionScore:
    """The multi-step prediction scores of one model (see the module docstring).

    Args:
      label: Its name.
      exp: Its experiment (model, force laws, transforms).
      params: Its identified parameters (initial states of its fit are left out here).
      data: The held-out recordings (of any model with the same joints).
      horizons: Window lengths (s).
    """
    from mjsysid.fit.validation import model_parameters

    if not horizons or any(not (math.isfinite(h) and h > 0) for h in horizons):
        raise ValueError(must_be("horizons", "positive finite seconds", horizons))
    params = model_parameters(params)
    base = on_model(data, exp)
    out = []
    for h in horizons:
        windows = split_windows(base, float(h), min_samples=3)
        if base.model.na:
            windows = _act_from_simulation(exp, params, base, windows)
        out.append(_horizon_score(exp, params, windows, float(h)))
    nstate = exp.model.nq + exp.model.nv + exp.model.na
    return PredictionScore(label, _k(params), tuple(out), nstate)


@dataclass(frozen=True)
class PairVerdict:
    """Two models compared: ``better`` (a label, or ``None``: no clear difference) and why."""

    a: str
    b: str
    better: str | None
    reason: str

    def sentence(self) -> str:
        """``'A' is better than 'B': ...`` or ``no clear difference between ...: ...``."""
        if self.better is None:
            return f"no clear difference between {self.a!r} and {self.b!r}: {self.reason}"
        worse = self.b if self.better == self.a else self.a
        return f"{self.better!r} is better than {worse!r}: {self.reason}"


def _difference(a: HorizonScore, b: HorizonScore) -> tuple[float, float]:
    """``(mean, standard error)`` of ``a - b`` over windows (paired when they match)."""
    if a.windows.size == b.windows.size and a.windows.size > 1:
        d = a.windows - b.windows
        return float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.size))
    return a.mean - b.mean, math.hypot(a.se, b.se)


def compare_pair(
    a: PredictionScore, b: PredictionScore, primary: float = PRIMARY_HORIZON
) -> PairVerdict:
    """The verdict rule of the module docstring for models ``a`` and ``b``."""
    favours: list[str] = []
    parts = []
    for ha, hb in zip(a.horizons, b.horizons, strict=True):
        if math.isinf(ha.mean) != math.isinf(hb.mean):  # one diverged: the other is better
            favours.append(b.label if math.isinf(ha.mean) else a.label)
            parts.append(f"{ha.horizon:g} s: {favours[-1]!r} only stays finite")
            continue
        with np.errstate(invalid="ignore"):
            mean, se = _difference(ha, hb)
        big = max(ha.mean, hb.mean)
        significant = bool(
            abs(mean) > SIGNIFICANCE * se and abs(mean) >= MIN_RELATIVE * big
        )  # (False for NaN: both diverged)
        if significant:
            favours.append(a.label if mean < 0 else b.label)
        rel = 100 * mean / big if big > 0 else 0.0
        if 0 < se < math.inf:
            ses = f"{abs(mean) / se:.1f} SE"
        else:
            ses = "one window" if se == math.inf else "no scatter"
        parts.append(f"{ha.horizon:g} s: {rel:+.1f} % ({ses})")
    pa, pb = a.at(primary), b.at(primary)
    n_eff = min(pa.n_eff, pb.n_eff)  # one sample size for both
    bic_a = information_criteria(max(pa.ssr, 1e-300), max(pa.n, 1), n_eff, a.k)[1]
    bic_b = information_criteria(max(pb.ssr, 1e-300), max(pb.n, 1), n_eff, b.k)[1]
    by_bic = a.label if bic_a < bic_b else b.label
    detail = (
        f"{a.label!r} minus {b.label!r} by horizon: {', '.join(parts)}; BIC at {pa.horizon:g} s "
        f"{bic_a:.1f} against {bic_b:.1f} (n_eff {n_eff:.0f})"
    )
    if not favours:
        return PairVerdict(a.label, b.label, None, f"no horizon differs by > {SIGNIFICANCE:g} "
                           f"SE and {100 * MIN_RELATIVE:g} % ({detail})")  # fmt: skip
    if len(set(favours)) > 1:
        return PairVerdict(a.label, b.label, None, f"the horizons disagree ({detail})")
    if favours[0] != by_bic:
        return PairVerdict(a.label, b.label, None, f"BIC disagrees ({detail})")
    return PairVerdict(a.label, b.label, favours[0], detail)


def verdict(
    scores: Sequence[PredictionScore], primary: float = PRIMARY_HORIZON
) -> list[PairVerdict]:
    """The best model at the primary horizon against each of the others."""
    if len(scores) < 2:
        raise ValueError(must_be("scores", "two or more models", len(scores)))
    best = min(scores, key=lambda s: s.at(primary).mean)
    return [compare_pair(best, s, primary) for s in scores if s is not best]


def format_scores(scores: Sequence[PredictionScore]) -> str:
    """A text table: one line a model and horizon (windows, mean score +- SE, rho, n_eff,
    AIC, BIC)."""
    lines = [
        f"{'model':<24} {'k':>3} {'state':>5} {'horizon':>8} {'windows':>7} {'score':>11} "
        f"{'+- SE':>10} {'rho':>6} {'n_eff':>7} {'AIC':>10} {'BIC':>10}"
    ]
    for s in scores:
        for h in s.horizons:
            lines.append(
                f"{s.label[:24]:<24} {s.k:3d} {s.state_size:5d} {h.horizon:7g}s "
                f"{h.windows.size:7d} {h.mean:11.4g} {h.se:10.3g} {h.rho:6.2f} {h.n_eff:7.0f} "
                f"{h.aic:10.1f} {h.bic:10.1f}"
            )
    return "\n".join(lines)

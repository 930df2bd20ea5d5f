"""The options of a fit, validated once: :class:`FitOptions`.

:func:`mjsysid.fit.optimize.optimize` builds one from its keywords, an experiment file's
``optimizer:`` section through :meth:`FitOptions.from_mapping`; both check the same rules
(the tolerances ``xtol``, ``gtol`` and ``ftol`` are finite and ``>= 0``, 0 switching that
test off; ``eps`` is finite and ``> 0``).
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TextIO

import numpy as np
import numpy.typing as npt

from mjsysid.fit.status import MessageContext
from mjsysid.sim.rollout import ROLLOUTS
from mjsysid.util.errors import finite_real, must_be, short_repr, yaml_number

OPTIMIZERS = ("lm", "mujoco", "scipy", "scipy_parallel_fd")
#: The methods of the global stage (:func:`mjsysid.fit.search.global_search`).
METHODS = ("cmaes",)
#: How the global stage scales the parameter box (:class:`GlobalSearchOptions`).
SCALES = ("auto", "linear")

_SCIPY_OPTIONS = (
    "method",
    "loss",
    "f_scale",
    "diff_step",
    "tr_solver",
    "tr_options",
    "jac_sparsity",
    "workers",
)
#: The backend's own options :func:`~mjsysid.fit.optimize.optimize` passes on (besides the
#: ones mjsysid sets itself: bounds, tolerances, ``x_scale``, the iteration limit and the
#: Jacobian): those of ``mujoco.minimize.least_squares`` and ``scipy.optimize.least_squares``.
BACKEND_OPTIONS: dict[str, tuple[str, ...]] = {
    "lm": (),
    "mujoco": ("norm", "mu_min", "mu_max", "check_derivatives"),
    "scipy": _SCIPY_OPTIONS,
    "scipy_parallel_fd": _SCIPY_OPTIONS,
}


def check_backend_options(optimizer: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` as a plain dict, every name one that ``optimizer`` takes.

    Raises:
      TypeError: An unknown name (the message names it and lists what the backend takes).
    """
    if not isinstance(options, Mapping):
        raise TypeError(must_be("backend_options", "a mapping of option names", options))
    allowed = BACKEND_OPTIONS.get(optimizer, ())
    unknown = sorted(str(k) for k in options if k not in allowed)
    if unknown:
        raise TypeError(
            must_be(
                f"the options of optimizer {optimizer!r}",
                f"among {list(allowed)}" if allowed else "none beyond mjsysid's own keywords",
                unknown,
                "Unknown option names are not ignored; check the spelling, or choose the "
                "backend that takes them (e.g. loss= is an option of optimizer='scipy')",
            )
        )
    return dict(options)


Horizons = tuple[float, ...] | str | None


class IterationCallback(Protocol):
    """Called after every accepted iteration with ``(iteration, x, cost)``."""

    def __call__(self, iteration: int, x: np.ndarray, cost: float, /) -> None: ...


def check_horizons(horizons: Any) -> Horizons:
    """``horizons`` as :class:`FitOptions` holds it: ``None``, ``"auto"`` or a tuple of
    strictly increasing fractions in ``(0, 1]`` (1.0 not yet appended).

    Raises:
      TypeError: Not ``"auto"``, ``None`` or a sequence of numbers.
      ValueError: The fractions are not strictly increasing in ``(0, 1]``.
    """
    if horizons is None:
        return None
    expected = "'auto', None or a sequence of fractions in (0, 1]"
    if isinstance(horizons, str):
        if horizons != "auto":
            raise TypeError(must_be("horizons", expected, horizons))
        return "auto"
    if not isinstance(horizons, Sequence | np.ndarray):
        raise TypeError(must_be("horizons", expected, horizons))
    hs = []
    for h in horizons:
        if isinstance(h, bool) or not isinstance(h, int | float | np.floating):
            raise TypeError(must_be("horizons", "a sequence of numbers in (0, 1]", horizons))
        hs.append(float(h))
    if not hs or not all(0.0 < h <= 1.0 for h in hs) or not _increasing(hs):
        raise ValueError(
            must_be(
                "horizons", "strictly increasing fractions in (0, 1], e.g. (0.3, 1.0)", horizons
            )
        )
    return tuple(hs)


def _increasing(values: Sequence[float]) -> bool:
    return all(b > a for a, b in itertools.pairwise(values))


def check_x_scale(x_scale: Any, shape: tuple[int, ...]) -> None:
    """``x_scale`` must be ``"jac"``, a positive number or a positive ``shape`` array."""
    if isinstance(x_scale, str) and x_scale == "jac":
        return
    xs = None
    if not isinstance(x_scale, str | bool | np.bool_):
        try:
            xs = np.asarray(x_scale, dtype=np.float64)
        except (TypeError, ValueError):
            xs = None
    if xs is None or xs.shape not in ((), shape) or not np.all(np.isfinite(xs) & (xs > 0)):
        raise ValueError(
            must_be(
                "x_scale",
                f"'jac', a positive number or an array of shape {shape}",
                xs if xs is not None else x_scale,
            )
        )


def _positive_int(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(must_be(name, "a positive integer or None (the default)", value))
    return int(value)


@dataclass(frozen=True)
class GlobalSearchOptions:
    """Settings of the global stage, :func:`~mjsysid.fit.search.global_search` (validated on
    creation).

    Attributes:
      method: ``"cmaes"`` (the only one so far).
      population: Candidates per generation ``λ``; default ``4 + ⌊3 ln p⌋`` (CMA-ES's), at
        least 2.
      budget: Residual evaluations (columns) of the whole search; default ``max(400,
        100·s)`` for ``s`` searched (physical) values: initial states are not searched and
        do not count. Whole generations only: the search stops before one would exceed it.
      sigma: Initial step size as a fraction of the box (normalised coordinates); default
        0.3, at most 1.
      seed: Seed of the sampling (the same seed and options give the same search).
      tol_spread: Stop when the population's spread (``σ·√max diag C``, a fraction of the
        box) falls below this; 0 disables the test.
      scale: ``"auto"``: a parameter with positive bounds spanning two decades or more
        (``hi ≥ 100·lo > 0``: dampings, armatures, time constants) is searched in ``log θ``,
        the others linearly; ``"linear"``: all linearly.
    """

    method: str = "cmaes"
    population: int | None = None
    budget: int | None = None
    sigma: float | None = None
    seed: int = 0
    tol_spread: float = 1e-3
    scale: str = "auto"

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(
                must_be("global_search: method", f"one of {list(METHODS)}", self.method)
            )
        pop = _positive_int("global_search: population", self.population)
        if pop is not None and pop < 2:
            raise ValueError(must_be("global_search: population", "an integer >= 2", pop))
        _positive_int("global_search: budget", self.budget)
        if self.sigma is not None and not (finite_real(self.sigma) and 0 < self.sigma <= 1):
            raise ValueError(
                must_be(
                    "global_search: sigma",
                    "a fraction of the box in (0, 1] or None (default 0.3)",
                    self.sigma,
                )
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int | np.integer):
            raise ValueError(must_be("global_search: seed", "an integer", self.seed))
        if self.seed < 0:
            raise ValueError(must_be("global_search: seed", "an integer >= 0", self.seed))
        if not (finite_real(self.tol_spread) and 0 <= self.tol_spread < 1):
            raise ValueError(
                must_be("global_search: tol_spread", "a number in [0, 1)", self.tol_spread)
            )
        if self.scale not in SCALES:
            raise ValueError(must_be("global_search: scale", f"one of {list(SCALES)}", self.scale))

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> GlobalSearchOptions:
        """From an experiment file's ``optimizer`` mapping: ``global`` (the method),
        ``population``, ``budget``, ``sigma``, ``seed``, ``tol_spread``, ``scale``."""
        known = {"global", "population", "budget", "sigma", "seed", "tol_spread", "scale"}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(must_be("global_search options", f"keys of {sorted(known)}", unknown))
        kw = {k: v for k, v in options.items() if k != "global"}
        return cls(method=options.get("global", "cmaes"), **kw)

    def population_for(self, p: int) -> int:
        """``λ`` for ``p`` searched (physical) values."""
        return self.population or max(2, 4 + math.floor(3 * math.log(p)))

    def budget_for(self, p: int) -> int:
        """The evaluation budget for ``p`` searched (physical) values."""
        return self.budget or max(400, 100 * p)

    def sigma0(self) -> float:
        """The initial step size (a fraction of the box)."""
        return 0.3 if self.sigma is None else float(self.sigma)


def as_global_options(value: object) -> GlobalSearchOptions:
    """What ``optimize(..., global_search=...)`` accepts, as :class:`GlobalSearchOptions`:
    the options themselves, a method name (``"cmaes"``), ``True`` (the defaults) or an
    experiment file's mapping (``{"global": "cmaes", "population": 12, ...}``)."""
    if isinstance(value, GlobalSearchOptions):
        return value
    if value is True:
        return GlobalSearchOptions()
    if isinstance(value, str):
        return GlobalSearchOptions(method=value)
    if isinstance(value, Mapping):
        return GlobalSearchOptions.from_mapping(value)
    raise TypeError(
        must_be(
            "global_search",
            "a GlobalSearchOptions, 'cmaes', True or a mapping such as {'global': 'cmaes', "
            "'budget': 2000}",
            value,
        )
    )


@dataclass(frozen=True)
class ThresholdProfileOptions:
    """Settings of the command thresholds' profile after the local fit
    (:mod:`mjsysid.fit.thresholds`; validated on creation).

    Attributes:
      keep: Ranges between recorded levels refitted per entry, those of lowest cost with the
        other values held (the entry's own range is always refitted too).
      iterations: Damped Gauss-Newton iterations of each refit (each two batched calls).
      sweeps: Sweeps over the entries at most (an entry is profiled again only after another
        moved).
      margin: An entry moves only to a range whose refit ends lower than its own range's by
        more than this fraction of the cost.
    """

    keep: int = 4
    iterations: int = 3
    sweeps: int = 3
    margin: float = 0.01

    def __post_init__(self) -> None:
        for name in ("keep", "iterations", "sweeps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
                raise ValueError(must_be(f"threshold_profile: {name}", "an integer >= 1", v))
        if not (finite_real(self.margin) and 0 <= self.margin < 1):
            raise ValueError(
                must_be("threshold_profile: margin", "a number in [0, 1)", self.margin)
            )


def as_threshold_options(value: object) -> ThresholdProfileOptions | None:
    """What ``optimize(..., threshold_profile=...)`` accepts: the options, ``True`` (the
    defaults), ``False`` or ``None`` (no profile), or an experiment file's mapping
    (``{"keep": 4, "iterations": 3}``)."""
    if value is None or value is False:
        return None
    if isinstance(value, ThresholdProfileOptions):
        return value
    if value is True:
        return ThresholdProfileOptions()
    if isinstance(value, Mapping):
        known = {f.name for f in dataclasses.fields(ThresholdProfileOptions)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(must_be("threshold_profile", f"keys of {sorted(known)}", unknown))
        return ThresholdProfileOptions(**value)
    raise TypeError(
        must_be(
            "threshold_profile",
            "a ThresholdProfileOptions, True, False, None or a mapping such as {'keep': 4}",
            value,
        )
    )


@dataclass(frozen=True, eq=False)
class FitOptions:
    """Everything :func:`~mjsysid.fit.optimize.optimize` takes besides the problem.

    Attributes:
      optimizer: ``"lm"`` (default: :func:`mjsysid.fit.lm.levenberg_marquardt`,
        finite-difference Jacobians far from the solution and free secant updates while it
        converges), ``"mujoco"`` (``mujoco.minimize.least_squares``), ``"scipy"`` or
        ``"scipy_parallel_fd"`` (see :mod:`mjsysid.fit.backends`).
      max_iters: Iteration limit, of all horizon stages together (for the scipy backends:
        residual evaluations).
      verbose: Print one line per iteration to ``output`` (default stdout); silent otherwise.
      xtol, gtol: Termination tolerances on the relative step and the gradient (``>= 0``).
      ftol: Termination tolerance on the relative progress (``"lm"``, ``"mujoco"``): the fit
        stops when the cost fell by at most ``ftol`` of its value over the last 3 iterations,
        ``c_{k−3} − c_k ≤ ftol·c_{k−3}`` (default 1e-4: a fit no longer spends dozens of
        iterations gaining hundredths of a percent). Such a stop counts as converged only when
        the Gauss-Newton step left is under 0.3 standard errors of every parameter
        (:func:`~mjsysid.fit.status.honest_status`), else its status is ``"small_step"``.
      eps: Relative finite-difference step (``> 0``).
      mu_factor: ``"lm"`` and ``"mujoco"`` backends: factor by which the Levenberg-Marquardt
        damping grows after a rejected step (``None``: 4 for ``"lm"``, 2 for ``"mujoco"``;
        MuJoCo's own ``10**0.1`` spends many single-candidate trial evaluations per
        iteration). See :attr:`damping_growth`.
      secant: ``"lm"`` backend: Broyden Jacobian updates instead of finite differences while
        the fit converges fast (convergence is still always confirmed with a
        finite-difference Jacobian); ``False`` computes one every iteration.
      trial_steps: ``"lm"`` backend: damping values tried per batched call (see
        :mod:`mjsysid.fit.lm`); more than 1 can pay off when threads outnumber the rollouts of
        one candidate (its sequences), but it changes the path of the fit (it can lead to
        another local minimum), so the default stays 1.
      x_scale: ``"jac"`` (scale by Jacobian column norms, default), a scalar or ``(p,)``
        array (checked against ``p`` by :func:`check_x_scale`).
      horizons: Fit in stages on growing parts of the data, e.g. ``(0.3, 1.0)``: first on the
        first 30 % of every sequence (:meth:`ResidualFunction.head`), then, from there, on all
        of it (``1.0`` is appended when missing). A short horizon costs less per evaluation
        and its cost landscape has fewer local minima (a trajectory drifts less), so the
        stage brings the fit near the solution cheaply; an early stage ends when it converges
        or (``"lm"``, ``"mujoco"``) when an iteration cuts its cost by less than 10 % (status
        ``"slowed"``), and is skipped when its data hold less than 0.1 % of the whole data's
        cost at its start (status ``"skipped"``: it would barely see the misfit).
        The result describes the last stage (``extras["stages"]`` lists them all; ``nfev``
        and ``nit`` count every stage).
        ``"auto"`` (default): ``(0.1, 0.3, 1.0)`` with the built-in residual and the
        ``"lm"``/``"mujoco"`` backends, leaving out a fraction at which a sequence would
        keep fewer than 20 samples (see :func:`~mjsysid.fit.horizons.resolve_horizons`). It
        changes the path of a fit: on smooth problems it reaches the same solution for fewer
        full-length rollouts; where the landscape is rugged (stick-slip contacts) or flat
        along unidentifiable directions, where a fit ends depends on its path either way.
        ``None``: one stage on the whole data (``mjsysid fit --horizons none``). Held as
        :func:`check_horizons` returns it.
      allow_no_effect: Continue (with a logged warning) when a parameter has no effect on the
        residual at the start of the fit on the whole data (after the early horizon stages,
        where a parameter the first part of the data does not excite is fitted later); by
        default that is an error naming the parameter.
      checkpoint: ``.npz`` path written atomically after every iteration (best ``x`` so far,
        and the horizon stage it belongs to).
      resume: Start from ``checkpoint`` if it exists (in the stage it was written in); needs
        ``checkpoint``. Refused, with the differences named, when the checkpoint was written
        under other options or ``inputs``, or when its cost, evaluated again at its point,
        differs from the recorded one (other data): see :mod:`~mjsysid.fit.checkpoints`.
      inputs: ``{path: SHA-256}`` of the files the fit reads (``mjsysid fit`` passes the
        experiment's), kept in the checkpoint and checked by ``resume``.
      callback: ``callback(iteration, x, cost)`` after each iteration (``cost`` on the
        current stage's horizon; iterations are counted across stages).
      output: Stream for ``verbose``.
      messages: Who reads the fit's messages and which remedies can apply
        (:class:`~mjsysid.fit.status.MessageContext`; ``None``: every remedy, in experiment-file
        and Python words). ``mjsysid fit`` passes the experiment file's words.
      backend_options: Options passed on to the backend itself, by name (``loss="soft_l1"``
        for ``"scipy"``); the names each backend takes are :data:`BACKEND_OPTIONS` (an unknown
        one is a ``TypeError``).
      check_conditioning: Compute one extra finite-difference Jacobian at the start and log a
        warning when ``cond(JᵀJ)`` is large (:func:`~mjsysid.fit.local.start_condition`).
      global_search: A global stage before the local fit (:class:`GlobalSearchOptions`; also
        given as ``"cmaes"``, ``True`` or an experiment mapping, see
        :func:`as_global_options`): CMA-ES, each generation one batched call, the local fit
        from its best candidate (the ``global`` extra). ``None``: no global stage.
      starts: Local fits from this many starts (the nominal and Latin-hypercube points in the
        bounds; :func:`~mjsysid.fit.search.multistart`); ``None``: one. Not together with
        ``global_search``. starts_seed: Their random seed.
      threshold_profile: After the local fit, profile every command threshold of the force
        laws (a deadzone) over the ranges between its recorded command levels, the other
        values refitted at each, then fit again from the best and keep the lower end
        (:mod:`mjsysid.fit.thresholds`, :class:`ThresholdProfileOptions`; ``True`` for the
        defaults, which run only when there is such an entry). ``None`` (or ``False``): no
        profile.
      rollout: Where the populations of the outer stage are simulated: ``"cpu"`` (default,
        the residual function's own rollouts) or ``"warp"`` (the global stage's
        generations and the starts' first evaluation as MuJoCo Warp worlds, float32, on
        Warp's default device; :mod:`mjsysid.sim.warp`, the ``warp`` extra). The local
        fits stay on the CPU.

    Raises (on construction):
      ValueError, TypeError: An option out of range or of the wrong type; the message
        starts with the option's name.
    """

    optimizer: str = "lm"
    max_iters: int = 200
    verbose: bool = False
    xtol: float = 1e-8
    gtol: float = 1e-8
    ftol: float = 1e-4
    eps: float = 1.5e-8
    mu_factor: float | None = None
    secant: bool = True
    trial_steps: int = 1
    x_scale: str | float | npt.ArrayLike = "jac"
    horizons: Sequence[float] | str | None = "auto"
    allow_no_effect: bool = False
    checkpoint: str | Path | None = None
    resume: bool = False
    inputs: Mapping[str, str] | None = None
    callback: IterationCallback | None = None
    output: TextIO | None = None
    messages: MessageContext | None = None
    backend_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    check_conditioning: bool = False
    global_search: GlobalSearchOptions | None = None
    starts: int | None = None
    starts_seed: int = 0
    rollout: str = "cpu"
    threshold_profile: ThresholdProfileOptions | None = ThresholdProfileOptions()

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(must_be("optimizer", f"one of {list(OPTIMIZERS)}", self.optimizer))
        if self.rollout not in ROLLOUTS:
            raise ValueError(must_be("rollout", f"one of {list(ROLLOUTS)}", self.rollout))
        self._check_outer()
        object.__setattr__(
            self, "backend_options", check_backend_options(self.optimizer, self.backend_options)
        )
        m = self.max_iters
        if not isinstance(m, int | np.integer) or isinstance(m, bool) or m < 0:
            raise ValueError(must_be("max_iters", "a non-negative integer", m))
        if self.callback is not None and not callable(self.callback):
            raise TypeError(
                must_be("callback", "callable callback(iteration, x, cost) or None", self.callback)
            )
        self._check_numbers()
        for name in ("verbose", "secant", "allow_no_effect", "resume", "check_conditioning"):
            if not isinstance(getattr(self, name), bool | np.bool_):
                raise TypeError(must_be(name, "True or False", getattr(self, name)))
        if self.output is not None and not callable(getattr(self.output, "write", None)):
            raise TypeError(
                must_be(
                    "output",
                    "a text stream with write() (e.g. sys.stdout or open(...))",
                    self.output,
                )
            )
        if self.messages is not None and not isinstance(self.messages, MessageContext):
            raise TypeError(must_be("messages", "a MessageContext or None", self.messages))
        object.__setattr__(self, "horizons", check_horizons(self.horizons))
        if self.inputs is not None and not (
            isinstance(self.inputs, Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in self.inputs.items())
        ):
            raise TypeError(must_be("inputs", "a mapping {path: sha256} of strings", self.inputs))
        if self.resume and self.checkpoint is None:
            raise ValueError(must_be("checkpoint", "a path when resume=True", None))

    def _check_outer(self) -> None:
        """The outer stages: one global stage or several starts, not both."""
        g = self.global_search
        if g is not None and not isinstance(g, GlobalSearchOptions):
            object.__setattr__(
                self, "global_search", as_global_options(g) if g is not False else None
            )
        s = self.starts
        if s is not None and (isinstance(s, bool) or not isinstance(s, int | np.integer) or s < 1):
            raise ValueError(must_be("starts", "a positive integer or None", s))
        seed = self.starts_seed
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(must_be("starts_seed", "an integer >= 0", seed))
        t = self.threshold_profile
        if t is not None and not isinstance(t, ThresholdProfileOptions):
            object.__setattr__(self, "threshold_profile", as_threshold_options(t))
        if self.global_search is not None and self.starts is not None:
            raise ValueError(
                must_be(
                    "global_search and starts",
                    "one or the other (a global stage, or multi-start local fits)",
                    {"global_search": self.global_search, "starts": self.starts},
                )
            )

    @classmethod
    def with_keywords(cls, base: FitOptions | None = None, **keywords: Any) -> FitOptions:
        """``base`` (default: the defaults) with ``keywords`` changed, validated once.

        A keyword is a field of this class, or an option of the chosen backend
        (:data:`BACKEND_OPTIONS`; ``loss="soft_l1"`` for ``"scipy"``), which goes into
        :attr:`backend_options`.

        Raises:
          TypeError: A name that is neither (with the closest known names).
        """
        base = base if base is not None else cls()
        fields = {f.name for f in dataclasses.fields(cls)}
        optimizer = keywords.get("optimizer", base.optimizer)
        backend_names = set(BACKEND_OPTIONS.get(optimizer, ()))
        own = {k: v for k, v in keywords.items() if k in fields}
        backend = {k: v for k, v in keywords.items() if k in backend_names and k not in fields}
        unknown = sorted(set(keywords) - set(own) - set(backend))
        if unknown:
            raise TypeError(_unknown_options(unknown, fields | backend_names, optimizer))
        if backend:
            own["backend_options"] = {
                **base.backend_options,
                **own.get("backend_options", {}),
                **backend,
            }
        return dataclasses.replace(base, **own) if own else base

    def _check_numbers(self) -> None:
        if not (finite_real(self.eps) and self.eps > 0):
            raise ValueError(must_be("eps", "a finite number > 0", self.eps))
        mu = self.damping_growth
        if not (finite_real(mu) and mu > 1):
            raise ValueError(must_be("mu_factor", "a finite number > 1", mu))
        for name in ("xtol", "gtol", "ftol"):
            tol = getattr(self, name)
            if not (finite_real(tol) and tol >= 0):
                raise ValueError(must_be(name, "a finite number >= 0", tol))

    @property
    def stream(self) -> TextIO:
        """Where ``verbose`` lines go: ``output``, or stdout (looked up at each use)."""
        return self.output if self.output is not None else sys.stdout

    @property
    def damping_growth(self) -> float:
        """``mu_factor``, or the backend's default: 4 for ``"lm"``, 2 otherwise."""
        if self.mu_factor is None:
            return 4.0 if self.optimizer == "lm" else 2.0
        return self.mu_factor

    @property
    def checkpoint_path(self) -> Path | None:
        return Path(self.checkpoint) if self.checkpoint is not None else None

    def replace(self, **changes: Any) -> FitOptions:
        """A copy with ``changes``, validated again."""
        return dataclasses.replace(self, **changes)

    # --- experiment files --------------------------------------------------------------
    MAPPING_KEYS = (
        "method", "max_iters", "xtol", "gtol", "ftol", "eps", "horizons", "threshold_profile",
    )  # fmt: skip

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any], *, where: str, **defaults: Any) -> FitOptions:
        """The options of an experiment file's ``optimizer:`` section.

        Args:
          mapping: The section as read from YAML: ``method``, ``max_iters``, ``xtol``,
            ``gtol``, ``ftol``, ``eps``, ``horizons`` (``auto``, ``none`` or fractions) and
            ``threshold_profile`` (``true``, ``false`` or a mapping of
            :class:`ThresholdProfileOptions`' fields), each optional (unknown keys are the
            caller's to reject).
          where: Prefix of error messages, the section's path (``"exp.yaml: optimizer"``).
          defaults: Options not in ``mapping`` (e.g. ``max_iters=100``).

        Raises:
          ValueError: A value of the wrong type or out of range; the message names the key
            (``"<where>.xtol must be ..."``).
        """
        values = dict(defaults)
        reader = _MappingReader(mapping, where)
        if "method" in mapping:
            values["optimizer"] = reader.get("method", str)
            if values["optimizer"] not in OPTIMIZERS:
                raise reader.err("method", f"one of {list(OPTIMIZERS)}", values["optimizer"])
        if "max_iters" in mapping:
            values["max_iters"] = reader.get("max_iters", int)
            if values["max_iters"] < 0:
                raise reader.err("max_iters", "a non-negative integer", values["max_iters"])
        for key in ("xtol", "gtol", "ftol", "eps"):
            if key in mapping:
                values[key] = reader.get(key, float)
        if "horizons" in mapping:
            values["horizons"] = reader.horizons()
        try:
            if "threshold_profile" in mapping:
                values["threshold_profile"] = as_threshold_options(mapping["threshold_profile"])
            return cls(**values)
        except (TypeError, ValueError) as e:  # the message starts with the option's name
            raise ValueError(f"{where}.{e}") from None

    def given(self, mapping: Mapping[str, Any]) -> dict[str, Any]:
        """The options of ``mapping`` other than ``method`` and ``max_iters``, as held here
        (``{"horizons": (0.3, 1.0)}``), to pass on as keywords; ``threshold_profile`` as
        the file gives it (``false`` or a mapping: ``run.yaml`` records it)."""
        return {
            k: mapping[k] if k == "threshold_profile" else getattr(self, k)
            for k in self.MAPPING_KEYS[2:]
            if k in mapping
        }


def _unknown_options(unknown: list[str], known: set[str], optimizer: str) -> str:
    """The message of an option name no one takes, with the closest known names."""
    close = sorted({m for u in unknown for m in difflib.get_close_matches(u, known, n=2)})
    hint = f"did you mean {', '.join(repr(c) for c in close)}?" if close else (
        f"the options are FitOptions' fields and the {optimizer!r} backend's own "
        f"{list(BACKEND_OPTIONS.get(optimizer, ()))}"
    )  # fmt: skip
    return must_be("optimize() options", "names of FitOptions or the backend", unknown, hint)


_HORIZONS = "'auto', 'none' or increasing fractions in (0, 1], e.g. [0.3, 1.0]"


def _type_name(value: Any) -> str:
    return type(value).__name__ if value is not None else "nothing"


class _MappingReader:
    """Typed reads from a YAML mapping; errors name ``<where>.<key>``."""

    def __init__(self, mapping: Mapping[str, Any], where: str) -> None:
        self.mapping, self.where = mapping, where

    def err(self, key: str, expected: str, got: Any) -> ValueError:
        return ValueError(
            f"{self.where}.{key} must be {expected}, got {_type_name(got)} {short_repr(got)}"
        )

    def get(self, key: str, kind: type) -> Any:
        value = self.mapping[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or isinstance(value, bool):
            names = kind.__name__
            if kind is float and isinstance(value, str) and _is_float_text(value):
                names += f" (YAML reads {value} as text: write {yaml_number(value)})"
            raise self.err(key, names, value)
        return value

    def horizons(self) -> Horizons:
        raw = self.mapping["horizons"]
        if isinstance(raw, bool) or not isinstance(raw, int | float | list | str):
            raise self.err("horizons", _HORIZONS, raw)
        if isinstance(raw, str):
            if raw not in ("auto", "none"):
                raise self.err("horizons", _HORIZONS, raw)
            return None if raw == "none" else "auto"
        hs = self._numbers(raw)
        if not all(0 < h <= 1 for h in hs) or not _increasing(hs):
            raise self.err("horizons", _HORIZONS, hs)
        return tuple(hs)

    def _numbers(self, raw: int | float | list[Any]) -> list[float]:
        out = []
        for i, v in enumerate(raw if isinstance(raw, list) else [raw]):
            if isinstance(v, bool) or not isinstance(v, int | float | str):
                raise self.err(
                    f"horizons[{i}]" if isinstance(raw, list) else "horizons", "a number", v
                )
            try:
                f = float(v)
            except ValueError:
                raise self.err("horizons", "numbers", raw) from None
            if math.isnan(f):
                raise self.err("horizons", "numbers (not NaN)", raw)
            out.append(f)
        return out


def _is_float_text(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True

"""Checkpoints of a fit: the best point so far, written atomically after every iteration.

A checkpoint keeps a fingerprint of what it was fitted on (:func:`fit_fingerprint`): the
SHA-256 of every input file the caller names (``FitOptions.inputs``: the experiment, the
model and the recordings, from ``mjsysid fit``) and the options that shape the fit. A
resume compares it with the present one and refuses a difference, named
(:func:`fingerprint_changes`); it also re-evaluates the cost at the checkpoint's point and
refuses one that differs from the recorded cost (the data or the model changed in a way no
file says). The totals of the runs before (``checkpoint_origin.yaml``) are bound to their
checkpoint by a digest: edited values are not copied into the results.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from mjsysid.fit.options import FitOptions
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import must_be
from mjsysid.util.files import atomic_savez, atomic_write_text, load_npz, read_yaml


@dataclass(frozen=True)
class History:
    """The iterations of one horizon stage so far, kept in its checkpoint so that a resumed
    fit's ``result.extras["objective"]`` / ``["candidate"]`` cover the whole fit.

    Attributes:
      objective: ``(k,)`` cost ``½‖r‖²`` at the start and after every iteration.
      candidates: ``k`` points ``(p,)``, one per entry of ``objective``.
    """

    objective: list[float]
    candidates: list[np.ndarray]


logger = logging.getLogger("mjsysid.fit.optimize")

# The options that shape a fit's path; a resume under other values refuses. The iteration
# limit is not among them: continuing with a larger one is what a resume is for.
FINGERPRINT_OPTIONS = (
    "optimizer", "xtol", "gtol", "ftol", "eps", "mu_factor", "secant",
    "trial_steps", "x_scale", "horizons", "allow_no_effect", "backend_options",
)  # fmt: skip


def _plain(value: Any) -> str:
    """A stable text of an option value (arrays as lists, mappings sorted)."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, Mapping):
        return json.dumps({str(k): _plain(v) for k, v in sorted(value.items())})
    return repr(value)


def fit_fingerprint(options: FitOptions) -> dict[str, str]:
    """``{"option <name>": value, "input <path>": sha256}`` of a fit's
    :class:`~mjsysid.fit.options.FitOptions`: the options of :data:`FINGERPRINT_OPTIONS`
    and the input files the caller named (``options.inputs``)."""
    out = {f"option {k}": _plain(getattr(options, k)) for k in FINGERPRINT_OPTIONS}
    for path, digest in sorted((options.inputs or {}).items()):
        out[f"input {path}"] = str(digest)
    return out


def fingerprint_changes(then: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """What differs between two fingerprints, in words: ``"option max_iters 100 -> 200"``,
    ``"input /data/run1.npz changed"`` (or ``added``, ``removed``)."""
    out = []
    for key in sorted(set(then) | set(now)):
        a, b = then.get(key), now.get(key)
        if a == b:
            continue
        kind, _, name = key.partition(" ")
        if kind == "option":
            out.append(f"option {name} {a if a is not None else '(none)'} -> {b}")
        elif a is None:
            out.append(f"input {name} added")
        elif b is None:
            out.append(f"input {name} removed")
        else:
            out.append(f"input {name} changed")
    return out


def write_checkpoint(
    path: Path,
    x: np.ndarray,
    cost: float,
    it: int,
    names: list[str],
    horizon: float = 1.0,
    history: History | None = None,
    fingerprint: Mapping[str, str] | None = None,
) -> None:
    """Writes ``x`` (``(p,)``), its cost, the iteration, the horizon stage, the stage's
    ``history`` (scalars and ``(p,)`` vectors per iteration) and the fit's ``fingerprint``
    (:func:`fit_fingerprint`) to ``path``."""
    arrays = {
        "x": x,
        "cost": np.array(cost),
        "iteration": np.array(it),
        "horizon": np.array(horizon),
        "parameter_names": np.array(names),
        "schema_version": np.array(1),
    }
    if fingerprint is not None:
        arrays["fingerprint"] = np.array(json.dumps(dict(fingerprint), sort_keys=True))
    if history is not None and history.objective:
        arrays["objective"] = np.asarray(history.objective, dtype=np.float64)
        arrays["candidate"] = np.stack(
            [np.asarray(c, dtype=np.float64).reshape(-1) for c in history.candidates]
        )
    atomic_savez(path, arrays)


def checkpoint_history(path: Path, size: int) -> History | None:
    """The stage history a checkpoint holds; ``None`` for one without (older files) or
    with one that does not fit ``size`` free values (it is then only not prepended)."""
    z = load_npz(path)
    if "objective" not in z or "candidate" not in z:
        return None
    obj = np.asarray(z["objective"])
    cand = np.asarray(z["candidate"])
    ok = obj.ndim == 1 and obj.dtype.kind == "f" and obj.size > 0
    if not ok or cand.shape != (obj.size, size) or cand.dtype.kind != "f":
        return None
    return History([float(c) for c in obj], [row.copy() for row in cand])


def load_checkpoint(
    path: str | Path, params: ParameterDict, fingerprint: Mapping[str, str] | None = None
) -> tuple[np.ndarray, int]:
    """Reads ``(x, iteration)`` from a checkpoint written by :func:`optimize`, checked:
    the same parameter names, finite values, an iteration count, a horizon in ``(0, 1]``,
    and (given ``fingerprint``) the same inputs and options as when it was written.

    Raises:
      ValueError: The checkpoint belongs to other parameters, other inputs or options (the
        differences named), or holds values that are not valid.
    """
    z = load_npz(path, required=("x", "iteration", "parameter_names"))
    if fingerprint is not None:
        _check_fingerprint(path, z, fingerprint)
    names = [str(n) for n in np.atleast_1d(z["parameter_names"])]
    if names != params.get_non_frozen_parameter_names():
        raise ValueError(
            f"checkpoint {str(path)!r} must hold the same parameters as initial_params, got "
            f"{names} vs {params.get_non_frozen_parameter_names()}"
        )
    x = np.asarray(z["x"])
    where = f"checkpoint {str(path)!r}"
    if x.dtype.kind not in "iuf" or x.shape != (params.size,) or not np.all(np.isfinite(x)):
        raise ValueError(
            must_be(f"{where}: x", f"{params.size} finite numbers (one per free entry)", x)
        )
    it = np.asarray(z["iteration"])
    if it.shape != () or it.dtype.kind not in "iu" or int(it) < 0:
        raise ValueError(must_be(f"{where}: iteration", "an integer >= 0", it))
    horizon = np.asarray(z.get("horizon", 1.0))
    if horizon.shape != () or horizon.dtype.kind != "f" or not 0.0 < float(horizon) <= 1.0:
        raise ValueError(must_be(f"{where}: horizon", "a fraction in (0, 1]", horizon))
    cost = np.asarray(z.get("cost", np.nan))
    if cost.shape != () or cost.dtype.kind != "f" or float(cost) < 0 or np.isinf(cost):
        raise ValueError(must_be(f"{where}: cost", "a finite number >= 0 (or nan)", cost))
    return x.astype(np.float64), int(it)


def _check_fingerprint(path: str | Path, z: Mapping[str, Any], now: Mapping[str, str]) -> None:
    """Refuses a checkpoint written for other inputs or options (a checkpoint from before
    fingerprints: a logged warning)."""
    where = f"checkpoint {str(path)!r}"
    if "fingerprint" not in z:
        logger.warning(
            "%s records no fingerprint of its inputs (an older file): they are not checked",
            where,
        )
        return
    try:
        then = json.loads(str(np.asarray(z["fingerprint"])))
    except (TypeError, ValueError):
        raise ValueError(
            must_be(f"{where}: fingerprint", "a JSON mapping", "unreadable text")
        ) from None
    if not isinstance(then, dict):
        raise ValueError(must_be(f"{where}: fingerprint", "a JSON mapping", type(then).__name__))
    changes = fingerprint_changes({str(k): str(v) for k, v in then.items()}, now)
    if changes:
        raise ValueError(
            f"{where} was written for other inputs or options: {'; '.join(changes)}; resuming "
            "would continue another fit: start afresh (without --resume, or resume=False), "
            "or restore them"
        )


RESUME_RTOL = 1e-6  # the cost at a checkpoint's point, evaluated again, agrees to this


def check_checkpoint_cost(path: Path, cost_now: float) -> None:
    """Refuses a checkpoint whose recorded cost differs from ``cost_now``, the cost
    evaluated again at its point on the same data (nan recorded: not checked).

    Raises:
      ValueError: Naming both costs: the data or the model changed since it was written.
    """
    z = load_npz(path)
    then = float(np.asarray(z.get("cost", np.nan)))
    if math.isnan(then):
        return
    if not abs(cost_now - then) <= RESUME_RTOL * max(abs(then), 1e-300):
        raise ValueError(
            f"checkpoint {str(path)!r} recorded the cost {then:.9g} at its point, but the "
            f"residual there now gives {cost_now:.9g}: the data or the model changed since "
            "it was written; start afresh (without --resume, or resume=False)"
        )


def checkpoint_horizon(path: Path) -> float:
    """The horizon stage a checkpoint was written in (1.0: the whole data, or older files)."""
    z = load_npz(path)
    return float(z["horizon"]) if "horizon" in z else 1.0


def origin_path(checkpoint: Path) -> Path:
    """The file next to ``checkpoint`` that keeps the totals of the runs before it."""
    return checkpoint.with_name(checkpoint.stem + "_origin.yaml")


@dataclass(frozen=True)
class FitOrigin:
    """What the runs that led to a checkpoint did in total: the cost at the very first start,
    the evaluations and the wall time (s). The iterations are the checkpoint's own count."""

    initial_cost: float
    nfev: int
    njev: int
    wall_time: float


def _digest(checkpoint: Path, values: Mapping[str, Any]) -> str:
    """SHA-256 of the checkpoint's bytes and the totals: binds the totals to it."""
    h = hashlib.sha256(checkpoint.read_bytes())
    h.update(json.dumps({k: repr(v) for k, v in values.items()}, sort_keys=True).encode())
    return h.hexdigest()


def write_origin(checkpoint: Path, origin: FitOrigin) -> None:
    """Writes ``origin`` next to ``checkpoint`` (atomically), for a later ``--resume``, with
    a digest that binds it to the checkpoint as it is now."""
    values = asdict(origin)
    values["digest"] = _digest(checkpoint, asdict(origin))
    atomic_write_text(origin_path(checkpoint), yaml.safe_dump(values, sort_keys=False))


def read_origin(checkpoint: Path) -> FitOrigin | None:
    """The totals written by :func:`write_origin`; ``None`` when absent or unreadable (a run
    killed before it ended writes none), and, with a logged warning, when they do not
    belong to the checkpoint (edited, or left from another run) or are not valid totals
    (a negative count, a non-finite cost or time)."""
    path = origin_path(checkpoint)
    if not path.is_file():
        return None
    try:
        data = read_yaml(path)
        raw = {k: data[k] for k in ("initial_cost", "nfev", "njev", "wall_time")}
        origin = FitOrigin(
            float(raw["initial_cost"]), int(raw["nfev"]), int(raw["njev"]), float(raw["wall_time"])
        )
        digest = str(data.get("digest", ""))
    except (ValueError, KeyError, TypeError, OSError):
        return None
    valid = (
        math.isfinite(origin.initial_cost) and origin.initial_cost >= 0
        and min(origin.nfev, origin.njev) >= 0
        and math.isfinite(origin.wall_time) and origin.wall_time >= 0
    )  # fmt: skip
    if not valid or digest != _digest(checkpoint, asdict(origin)):
        logger.warning(
            "%s does not belong to %s as it is (edited, or left from another run) or holds "
            "invalid totals: they are not used; the initial cost, evaluations and time count "
            "from the checkpoint",
            path,
            checkpoint,
        )
        return None
    return origin


def checkpoint_iteration(path: Path) -> int:
    """The iterations done when checkpoint ``path`` was written (0 for an unreadable one)."""
    try:
        it = np.asarray(load_npz(path, required=("iteration",))["iteration"])
    except (OSError, ValueError):
        return 0
    return int(it) if it.shape == () and it.dtype.kind in "iu" else 0

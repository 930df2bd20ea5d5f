"""Checkpoints of a fit: the best point so far, written atomically after every iteration."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import yaml

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


def write_checkpoint(
    path: Path,
    x: np.ndarray,
    cost: float,
    it: int,
    names: list[str],
    horizon: float = 1.0,
    history: History | None = None,
) -> None:
    """Writes ``x`` (``(p,)``), its cost, the iteration, the horizon stage and the stage's
    ``history`` (scalars and ``(p,)`` vectors per iteration) to ``path``."""
    arrays = {
        "x": x,
        "cost": np.array(cost),
        "iteration": np.array(it),
        "horizon": np.array(horizon),
        "parameter_names": np.array(names),
        "schema_version": np.array(1),
    }
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


def load_checkpoint(path: str | Path, params: ParameterDict) -> tuple[np.ndarray, int]:
    """Reads ``(x, iteration)`` from a checkpoint written by :func:`optimize`.

    Raises:
      ValueError: The checkpoint belongs to other parameters.
    """
    z = load_npz(path, required=("x", "iteration", "parameter_names"))
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
    return x.astype(np.float64), int(it)


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


def write_origin(checkpoint: Path, origin: FitOrigin) -> None:
    """Writes ``origin`` next to ``checkpoint`` (atomically), for a later ``--resume``."""
    atomic_write_text(origin_path(checkpoint), yaml.safe_dump(asdict(origin), sort_keys=False))


def read_origin(checkpoint: Path) -> FitOrigin | None:
    """The totals written by :func:`write_origin`; ``None`` when absent or unreadable (a run
    killed before it ended writes none)."""
    path = origin_path(checkpoint)
    if not path.is_file():
        return None
    try:
        data = read_yaml(path)
        return FitOrigin(
            float(data["initial_cost"]),
            int(data["nfev"]),
            int(data["njev"]),
            float(data["wall_time"]),
        )
    except (ValueError, KeyError, TypeError):
        return None


def checkpoint_iteration(path: Path) -> int:
    """The iterations done when checkpoint ``path`` was written (0 for an unreadable one)."""
    try:
        it = np.asarray(load_npz(path, required=("iteration",))["iteration"])
    except (OSError, ValueError):
        return 0
    return int(it) if it.shape == () and it.dtype.kind in "iu" else 0

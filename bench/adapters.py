"""Drive mjsysid and the peer (``mujoco.sysid``) from the same :class:`problems.Problem`.

The peer is imported only here and only on demand (:func:`peer_available`). It is driven
black-box through its public API, with plain modifier lambdas (``problems.spec_setter``) for
every physical parameter, because some of its helpers are broken on current numpy / MuJoCo
(``body_inertia_param`` with ``InertiaType.Mass`` or ``Pseudo``).

Time stamps given to the peer. The peer labels the sensor row computed from the state at
``t_k`` with the time ``t_k + dt`` (one step late; checked black-box: its first predicted row
equals the initial state and is stamped ``t_0 + dt``). Given the physically stamped data it
could never fit exactly (a built-in one-step delay). So that both tools can reach the truth, the
peer receives the *same samples* with time stamps ``t_k + dt`` (``PEER_TIME_SHIFT``); pass
``raw_peer_times=True`` to feed it the physical stamps instead. Both tools' residuals at the
truth are checked to vanish (``truth_cost``).
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import time
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

import mjsysid as ms

try:  # run from a script (bench/ on sys.path) or imported from tests/bench
    from problems import PHYSICS_KINDS, Problem, spec_setter
except ImportError:  # pragma: no cover
    from bench.problems import PHYSICS_KINDS, Problem, spec_setter  # type: ignore[no-redef]

try:  # the inertia module is new; fall back to the top-level export if it moves
    from mjsysid.params.inertia import InertiaType, body_inertia_param
except ImportError:  # pragma: no cover
    InertiaType, body_inertia_param = ms.InertiaType, ms.body_inertia_param  # type: ignore[attr-defined]


def peer_available() -> tuple[bool, str]:
    """Whether ``mujoco.sysid`` imports (it needs absl-py, colorama, tabulate, matplotlib...)."""
    try:
        import mujoco.sysid  # noqa: F401
    except Exception as e:  # any import failure means "no peer column"
        return False, f"{type(e).__name__}: {e}"
    return True, ""


# ----------------------------------------------------------------------------------------------
# mjsysid
# ----------------------------------------------------------------------------------------------
@dataclass
class Setup:
    """One tool set up on one problem."""

    tool: str
    params: Any  # the tool's ParameterDict (start values)
    residual: Any  # the tool's residual function (x, params) -> ...
    count: Any = None  # peer: candidate counter


def ours_params(prob: Problem, spec: mujoco.MjSpec, model: mujoco.MjModel) -> ms.ParameterDict:
    pd = ms.ParameterDict()
    for d in prob.params:
        if d.kind in ("body_mass", "body_pseudo"):
            itype = InertiaType.Mass if d.kind == "body_mass" else InertiaType.Pseudo
            p = body_inertia_param(spec, model, d.target, itype, param_name=d.name)
            if not np.allclose(p.nominal, d.start, rtol=1e-9, atol=1e-12):
                raise AssertionError(f"{d.name}: mjsysid nominal {p.nominal} != start {d.start}")
            p = ms.Parameter(
                d.name,
                d.start,
                d.lo,
                d.hi,
                modifier=p.modifier,
                model_modifier=p.model_modifier,
                meta=p.meta,
            )
        else:
            p = ms.make_parameter(
                d.kind,
                model if d.kind in PHYSICS_KINDS else None,
                d.target,
                name=d.name,
                nominal=d.start,
                min_value=d.lo,
                max_value=d.hi,
            )
        pd.add(p)
    return pd


def ours_setup(prob: Problem, nthread: int) -> Setup:
    spec = prob.spec()
    model = spec.compile()
    params = ours_params(prob, spec, model)
    seqs = prob.sequences
    data = ms.ModelSequences(
        prob.key,
        spec,
        [s.name for s in seqs],
        [s.x0 for s in seqs],
        [ms.TimeSeries.from_control_names(s.times, s.ctrl, model) for s in seqs],
        [ms.TimeSeries.from_names(s.times, s.sensordata, model) for s in seqs],
    )
    transform = None
    if prob.signal:
        transform = ms.SignalTransform()
        for kind, pattern, pname in prob.signal:
            if kind == "delay":
                transform.delay(pattern, pname)
            elif kind == "gain":
                transform.gain(pattern, pname, target="predicted")
            else:
                transform.bias(pattern, pname, target="predicted")
    rf = ms.build_residual_fn(
        [data], modify_residual=None if transform is None else transform.apply, nthread=nthread
    )
    return Setup("mjsysid", params, rf)


def ours_cost(setup: Setup, x: np.ndarray) -> float:
    r = setup.residual(np.asarray(x, dtype=np.float64), setup.params)
    return 0.5 * float(r @ r)


def ours_fit(setup: Setup, max_iters: int, optimizer: str = "lm", **kw: Any) -> dict[str, Any]:
    stats0 = dict(vars(setup.residual.stats))
    t0 = time.perf_counter()
    _, res = ms.optimize(
        setup.params, setup.residual, optimizer=optimizer, max_iters=max_iters, **kw
    )
    wall = time.perf_counter() - t0
    stats = {k: v - stats0[k] for k, v in vars(setup.residual.stats).items()}
    return {
        "wall_s": wall,
        "x": np.asarray(res.x),
        "nit": int(res.nit),
        "nfev": int(res.nfev),
        "rollouts": int(stats["rollouts"]),
        "steps": int(stats["steps"]),
        "cost_own": float(res.cost),
        "status": res.status,
        "compiles": int(stats["compiles"]),
        "model_edits": int(stats["model_edits"]),
        "residual_calls": int(stats["calls"]),
        "time_build_s": stats["time_build"],
        "time_rollout_s": stats["time_rollout"],
        "time_residual_s": stats["time_total"],
    }


# ----------------------------------------------------------------------------------------------
# The peer
# ----------------------------------------------------------------------------------------------
class _CountingResidual:
    """Wraps the peer's residual: counts residual calls and candidate columns."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.calls = 0
        self.candidates = 0

    def __call__(self, x: Any, params: Any, **kw: Any) -> Any:
        arr = np.asarray(x)
        self.calls += 1
        self.candidates += 1 if arr.ndim == 1 else arr.shape[1]
        return self.fn(x, params, **kw)


def peer_setup(prob: Problem, nthread: int, raw_peer_times: bool = False) -> Setup:
    import mujoco.sysid as peer

    spec = prob.spec()
    model = spec.compile()
    params = peer.ParameterDict()
    for d in prob.params:
        setter = spec_setter(d, model)
        mod = (
            None
            if setter is None
            else (lambda s, p, f=setter: f(s, np.asarray(p.value, dtype=np.float64)))
        )
        params.add(peer.Parameter(d.name, d.start.copy(), d.lo.copy(), d.hi.copy(), modifier=mod))
    dt = 0.0 if raw_peer_times else float(model.opt.timestep)
    seqs = prob.sequences
    data = peer.ModelSequences(
        prob.key,
        spec,
        [s.name for s in seqs],
        [s.x0 for s in seqs],
        [peer.TimeSeries.from_control_names(s.times, s.ctrl, model) for s in seqs],
        [peer.TimeSeries.from_names(s.times + dt, s.sensordata, model) for s in seqs],
    )
    kw: dict[str, Any] = {"models_sequences": [data], "n_threads": nthread}
    if prob.signal:
        transform = peer.SignalTransform()
        for kind, pattern, pname in prob.signal:
            if kind == "delay":
                transform.delay(pattern, params[pname])
            elif kind == "gain":
                transform.gain(pattern, params[pname], target="predicted")
            else:
                transform.bias(pattern, params[pname], target="predicted")
        kw["modify_residual"] = transform.apply
    rf = _CountingResidual(peer.build_residual_fn(**kw))
    return Setup("peer", params, rf, rf)


def peer_residual_vector(setup: Setup, X: np.ndarray) -> np.ndarray:
    """The peer's stacked residual for ``X (p,)`` or ``(p, k)``."""
    out = setup.residual(X, setup.params)
    blocks = out[0] if isinstance(out, tuple) else out
    if isinstance(blocks, np.ndarray):
        return blocks
    return np.concatenate(
        [
            np.asarray(b).reshape(np.asarray(b).shape[0], -1) if np.ndim(X) == 2 else np.ravel(b)
            for b in blocks
        ],
        axis=0,
    )


def peer_cost(setup: Setup, x: np.ndarray) -> float:
    r = peer_residual_vector(setup, np.asarray(x, dtype=np.float64))
    return 0.5 * float(np.sum(np.square(r)))


@contextlib.contextmanager
def silenced() -> Any:
    """The peer prints and logs unconditionally; capture it."""
    buf = io.StringIO()
    root = logging.getLogger()
    old = root.level
    root.setLevel(logging.CRITICAL + 1)
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            yield buf
    finally:
        root.setLevel(old)


def peer_fit(setup: Setup, max_iters: int, nseq: int, **kw: Any) -> dict[str, Any]:
    import mujoco.sysid as peer

    c0, n0 = setup.count.candidates, setup.count.calls
    t0 = time.perf_counter()
    with silenced() as buf:
        _, res = peer.optimize(
            setup.params,
            setup.residual,
            optimizer="mujoco",
            verbose=False,
            max_iters=max_iters,
            **kw,
        )
    wall = time.perf_counter() - t0
    text = buf.getvalue()
    m = re.search(r"Terminated after (\d+) iterations: ([^.]*)", text)
    objective = list(res.get("extras", {}).get("objective", []))
    nit = int(m.group(1)) if m else max(len(objective) - 1, 0)
    status = m.group(2).strip() if m else "?"
    reported = re.search(r"Residual evals: (\d+)", text)
    cand = setup.count.candidates - c0
    return {
        "wall_s": wall,
        "x": np.asarray(res["x"], dtype=np.float64).reshape(-1),
        "nit": nit,
        "nfev": cand,
        "rollouts": cand * nseq,
        "residual_calls": setup.count.calls - n0,
        "cost_own": float(objective[-1]) if objective else float("nan"),
        "status": status,
        "peer_reported_residual_evals": int(reported.group(1)) if reported else None,
    }

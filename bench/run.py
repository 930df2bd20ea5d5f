"""Benchmark suite: mjsysid vs the peer (``mujoco.sysid``) vs the rollout floor.

Usage::

    python bench/run.py [--problems 1,2,...] [--no-peer] [--json out.jsonl] [--threads N]
                        [--max-iters 100] [--repeats 5] [--no-memory] [--memory-problem 2]

For every problem, in one process, on the same data and from the same start:

* ``fit``: ``optimize`` of each tool (wall time, iterations, residual evaluations, rollouts,
  final cost, max relative parameter error vs the truth; peak RSS growth in one more fit);
* ``jacobian``: one batched evaluation of the ``(p+1)`` finite-difference candidates
  ``[x, x + h_i e_i]`` by each tool, against its **rollout floor**: the same distinct-physics
  candidate models (prebuilt) x sequences rolled out by one ``mujoco.rollout.Rollout.rollout``
  call with the same thread count, persistent pool, reused ``MjData`` and preallocated outputs;
* ratios ours/peer (wall time, Jacobian) and ours/floor (Jacobian).

Then a memory check: mjsysid's (and the peer's) peak traced memory for ``max_iters`` 5 and 20
(``tracemalloc``; it must not grow with iterations).

Every measurement is printed as a table and as one JSON line (``--json`` also writes them to a
file). See ``bench/README.md`` for the columns.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import adapters as A
import mujoco
import mujoco.rollout
import numpy as np
import problems as P

EPS = 1.5e-8  # mjsysid's default relative finite-difference step


# ----------------------------------------------------------------------------------------------
# Measurement helpers
# ----------------------------------------------------------------------------------------------
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def _trim() -> None:
    gc.collect()
    try:  # give freed heap back to the OS so the next RSS baseline is honest
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass


class RssPeak:
    """Samples the process RSS every ``period`` s in a thread; ``delta_mb`` = peak - baseline."""

    def __init__(self, period: float = 0.002) -> None:
        self.period = period
        self._stop = threading.Event()
        self.base = self.peak = 0

    def __enter__(self) -> RssPeak:
        _trim()
        self.base = self.peak = _rss()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, _rss())

    @property
    def delta_mb(self) -> float:
        return (self.peak - self.base) / 2**20


def traced_peak_mb(fn: Callable[[], Any]) -> tuple[float, Any]:
    _trim()
    tracemalloc.start()
    try:
        out = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / 2**20, out


def interleaved_times(fns: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Best-of-``repeats`` wall time of each function, run round-robin after one warm-up each.

    Round-robin puts every contender under the same background load; the minimum is the least
    noisy estimate of the intrinsic cost on a shared machine (``<name>_median`` is kept too).
    ``<name>_cpu`` is the best-of process CPU time (all threads): on a loaded machine it is
    steadier than wall time, but it hides serial overhead, so wall ratios are the headline.
    """
    for fn in fns.values():
        fn()  # warm-up (thread pools, MjData, caches)
    ts: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            ts[k].append(time.perf_counter() - t0)
            cpu[k].append(time.process_time() - c0)
    out = {k: float(np.min(v)) for k, v in ts.items()}
    out.update({f"{k}_median": float(np.median(v)) for k, v in ts.items()})
    out.update({f"{k}_cpu": float(np.min(v)) for k, v in cpu.items()})
    return out


def emit(record: dict[str, Any], sink: Any) -> None:
    line = json.dumps(record, default=lambda o: o.tolist() if isinstance(o, np.ndarray) else str(o))
    print("JSON " + line)
    if sink is not None:
        sink.write(line + "\n")
        sink.flush()


# ----------------------------------------------------------------------------------------------
# Jacobian vs rollout floor
# ----------------------------------------------------------------------------------------------
def fd_candidates(prob: P.Problem) -> tuple[np.ndarray, np.ndarray]:
    """``X (p, p+1) = [x, x + h_i e_i]`` at the start, steps as in ``mjsysid.fd_jacobian``."""
    x = prob.start
    hi = np.concatenate([p.hi for p in prob.params])
    h = EPS * np.maximum(1.0, np.abs(x))
    h = np.where(x + h > hi, -h, h)
    return np.concatenate([x[:, None], x[:, None] + np.diag(h)], axis=1), h


class Floor:
    """The rollouts a Jacobian needs, prebuilt, run by one ``Rollout.rollout`` call."""

    def __init__(
        self, prob: P.Problem, X: np.ndarray, nthread: int, with_base: bool = True
    ) -> None:
        phys = np.concatenate(
            [np.full(p.start.size, p.kind in P.PHYSICS_KINDS) for p in prob.params]
        )
        cols = [0] if with_base else []
        cols += [1 + i for i in np.flatnonzero(phys)]  # signal-only columns need no rollout
        models = []
        for j in cols:
            vals, k = [], 0
            for p in prob.params:
                vals.append(X[k : k + p.start.size, j])
                k += p.start.size
            models.append(P.compile_with(prob.xml, prob.params, vals))
        seqs = prob.sequences
        nstep = {s.ctrl.shape[0] for s in seqs}
        if len(nstep) != 1:
            raise ValueError("the floor assumes sequences of equal length")
        self.nstep = nstep.pop()
        self.models = [m for _ in seqs for m in models]
        self.x0 = np.ascontiguousarray(np.stack([s.x0 for s in seqs for _ in models]))
        self.ctrl = np.ascontiguousarray(np.stack([s.ctrl for s in seqs for _ in models]))
        nb = len(self.models)
        m0 = self.models[0]
        nstate = mujoco.mj_stateSize(m0, mujoco.mjtState.mjSTATE_FULLPHYSICS.value)
        self.state = np.empty((nb, self.nstep, nstate))
        self.sens = np.empty((nb, self.nstep, m0.nsensordata))
        self.nthread = nthread
        self.datas = [mujoco.MjData(m0) for _ in range(nthread)]
        self.runner = mujoco.rollout.Rollout(nthread=nthread) if nthread > 1 else None

    @property
    def nrollouts(self) -> int:
        return len(self.models)

    def __call__(self) -> None:
        if self.runner is None:
            mujoco.rollout.rollout(
                self.models,
                self.datas[0],
                self.x0,
                self.ctrl,
                nstep=self.nstep,
                skip_checks=True,
                state=self.state,
                sensordata=self.sens,
            )
        else:
            self.runner.rollout(
                self.models,
                self.datas,
                self.x0,
                self.ctrl,
                nstep=self.nstep,
                skip_checks=True,
                state=self.state,
                sensordata=self.sens,
            )

    def close(self) -> None:
        if self.runner is not None:
            self.runner.close()


def moved_start(prob: P.Problem) -> np.ndarray:
    """The start moved by 1e-6 (relative) in every entry, within the bounds."""
    lo = np.concatenate([p.lo for p in prob.params])
    hi = np.concatenate([p.hi for p in prob.params])
    return np.clip(prob.start * (1 + 1e-6), lo, hi)


def alternating(X: np.ndarray, shift: np.ndarray) -> Callable[[], np.ndarray]:
    """``X`` and ``X + shift`` in turn. As in a fit, where every Jacobian is taken at a new
    point, mjsysid then rewrites every candidate model in every timed call (the floor's models
    are prebuilt and not timed)."""
    both = [X, X + shift[:, None]]
    turn = [0]

    def next_X() -> np.ndarray:
        turn[0] ^= 1
        return both[turn[0]]

    return next_X


def jacobian_timing(
    prob: P.Problem, ours: A.Setup, peer: A.Setup | None, nthread: int, repeats: int
) -> dict[str, Any]:
    import mjsysid as ms

    X, _ = fd_candidates(prob)
    floor = Floor(prob, X, nthread)
    floor_fd = Floor(prob, X, nthread, with_base=False)
    lo = np.concatenate([p.lo for p in prob.params])
    hi = np.concatenate([p.hi for p in prob.params])
    rf = ours.residual
    points = [prob.start, moved_start(prob)]
    rs = [rf(x, ours.params) for x in points]
    turn = {"fd": 0}
    next_X = alternating(X, points[1] - points[0])

    def ours_call() -> None:
        rf.clear_cache()  # time the whole call, never the previous repeat's simulations
        rf(next_X(), ours.params)

    def ours_fd() -> None:
        # as inside a fit: r(x) was just evaluated, so its simulation may be reused
        rf.clear_cache()
        turn["fd"] ^= 1
        x, r = points[turn["fd"]], rs[turn["fd"]]
        rf(x, ours.params)
        t0 = time.perf_counter()
        ms.fd_jacobian(lambda Z: rf(Z, ours.params), x, r, (lo, hi))
        fd_times.append(time.perf_counter() - t0)

    fd_times: list[float] = []
    fns = {"floor": floor, "ours": ours_call, "floor_fd": floor_fd, "ours_fd": ours_fd}
    try:
        t = interleaved_times(fns, repeats)
    finally:
        floor.close()
        floor_fd.close()
    # the Jacobian alone, without the r(x) evaluated before it (the warm-up call left out)
    t["ours_fd"], t["ours_fd_median"] = min(fd_times[1:]), float(np.median(fd_times[1:]))
    t_floor, t_floor_fd, t_ours, t_ours_fd = t["floor"], t["floor_fd"], t["ours"], t["ours_fd"]
    out = {
        "kind": "jacobian",
        "problem": prob.key,
        "title": prob.title,
        "p": prob.nparam,
        "p_physics": prob.nphysics,
        "sequences": len(prob.sequences),
        "nstep": floor.nstep,
        "threads": nthread,
        "candidates": X.shape[1],
        "floor_rollouts": floor.nrollouts,
        "floor_s": t_floor,
        "ours_s": t_ours,
        "ours_over_floor": t_ours / t_floor,
        "fd_floor_rollouts": floor_fd.nrollouts,
        "fd_floor_s": t_floor_fd,
        "ours_fd_jacobian_s": t_ours_fd,
        "ours_fd_over_floor": t_ours_fd / t_floor_fd,
        "medians": {k: v for k, v in t.items() if k.endswith("_median")},
        "cpu_s": {k: v for k, v in t.items() if k.endswith("_cpu")},
        "cpu_ours_over_floor": t["ours_cpu"] / t["floor_cpu"],
        "timing": f"best of {repeats}, interleaved",
    }
    if peer is not None:
        with A.silenced():
            tp = interleaved_times(
                {"peer": lambda: A.peer_residual_vector(peer, X), "ours": fns["ours"]},
                max(1, repeats // 2),
            )
        out.update(
            peer_s=tp["peer"],
            peer_over_floor=tp["peer"] / t_floor,
            ours_over_peer=tp["ours"] / tp["peer"],
        )
    return out


# ----------------------------------------------------------------------------------------------
# Fits
# ----------------------------------------------------------------------------------------------
def fit_record(prob: P.Problem, tool: str, res: dict[str, Any], ours: A.Setup) -> dict[str, Any]:
    x = res.pop("x")
    if "steps" in res:  # mjsysid: rollouts as full-length equivalents (horizon stages are shorter)
        res["rollouts"] = round(res["steps"] / prob.sequences[0].ctrl.shape[0])
    rec = {
        "kind": "fit",
        "problem": prob.key,
        "title": prob.title,
        "tool": tool,
        "p": prob.nparam,
        "sequences": len(prob.sequences),
    }
    rec.update(res)
    rec.update(
        cost=A.ours_cost(ours, x),
        max_rel_err=prob.max_rel_error(x),
        x=x,
    )
    return rec


def run_problem(key: str, args: argparse.Namespace, sink: Any) -> dict[str, Any]:
    prob = P.PROBLEMS[key]()
    nseq = len(prob.sequences)
    ours = A.ours_setup(prob, args.threads)
    peer = A.peer_setup(prob, args.threads, args.raw_peer_times) if args.peer else None
    out: dict[str, Any] = {"problem": key, "title": prob.title, "p": prob.nparam, "C": nseq}
    fits: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("mjsysid", lambda: A.ours_fit(ours, args.max_iters, args.optimizer))
    ]
    if args.one_stage:
        fits.append(
            (
                "mjsysid-1",
                lambda: A.ours_fit(ours, args.max_iters, args.optimizer, horizons=None),
            )
        )
    if peer is not None:
        fits.append(("peer", lambda: A.peer_fit(peer, args.max_iters, nseq)))
    best: dict[str, dict[str, Any]] = {}
    walls: dict[str, list[float]] = {tool: [] for tool, _ in fits}
    for _ in range(args.fit_repeats):  # round-robin: both tools see the same background load
        for tool, fn in fits:
            rec = fit_record(prob, tool, fn(), ours)
            walls[tool].append(rec["wall_s"])
            if tool not in best or rec["wall_s"] < best[tool]["wall_s"]:
                best[tool] = rec
    # Memory in a fit of its own: the sampling thread takes the GIL every 2 ms and the trim
    # before it empties the heap, which would slow the timed fits (by 5-15 % on problem 1).
    for tool, fn in fits:
        with RssPeak() as rss:
            fn()
        best[tool].update(
            peak_rss_delta_mb=rss.delta_mb,
            memory_method="RSS sampled every 2 ms in an extra fit, peak minus baseline "
            "(after gc + malloc_trim)",
        )
    for tool, rec in best.items():
        rec["wall_all_s"] = walls[tool]
        emit(rec, sink)
        out[{"mjsysid": "ours", "mjsysid-1": "ours_1"}.get(tool, "peer")] = rec
    jac = jacobian_timing(prob, ours, peer, args.threads, args.repeats)
    emit(jac, sink)
    out["jac"] = jac
    ours.residual.close()
    return out


def memory_check(args: argparse.Namespace, sink: Any) -> list[dict[str, Any]]:
    """Peak traced memory of a fit with max_iters 5 and 20 (tolerances ~0 force iterations)."""
    prob = P.PROBLEMS[args.memory_problem]()
    rows = []
    tools = [("mjsysid", A.ours_setup(prob, args.threads))]
    if args.peer:
        tools.append(("peer", A.peer_setup(prob, args.threads, args.raw_peer_times)))
    for tool, setup in tools:
        for iters in (5, 20):

            def fit(tool: str = tool, s: A.Setup = setup, n: int = iters) -> dict[str, Any]:
                if tool == "mjsysid":
                    return A.ours_fit(s, n, args.optimizer, xtol=1e-30, gtol=1e-30)
                return A.peer_fit(s, n, len(prob.sequences), xtol=1e-30, gtol=1e-30)

            peak, res = traced_peak_mb(fit)
            rec = {
                "kind": "memory",
                "problem": prob.key,
                "tool": tool,
                "max_iters": iters,
                "nit": res["nit"],
                "peak_traced_mb": peak,
                "memory_method": "tracemalloc peak during optimize (Python + numpy buffers)",
            }
            emit(rec, sink)
            rows.append(rec)
        if tool == "mjsysid":
            setup.residual.close()
    return rows


# ----------------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------------
def _fmt(v: Any, spec: str = ".3g") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return format(v, spec)
    return str(v)


def table(rows: list[list[str]], header: list[str]) -> str:
    w = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).rjust(w[i]) for i, c in enumerate(r))  # noqa: E731
    return "\n".join([line(header), line(["-" * x for x in w])] + [line(r) for r in rows])


def report(results: list[dict[str, Any]], mem: list[dict[str, Any]], peer_note: str) -> str:
    fit_rows, ratio_rows = [], []
    for r in results:
        for tool in ("ours", "ours_1", "peer"):
            f = r.get(tool)
            if f is None:
                continue
            fit_rows.append(
                [
                    r["problem"],
                    f["tool"],
                    r["p"],
                    r["C"],
                    _fmt(f["wall_s"]),
                    f["nit"],
                    f["nfev"],
                    f["rollouts"],
                    _fmt(f["cost"], ".2e"),
                    _fmt(f["max_rel_err"], ".2e"),
                    _fmt(f["peak_rss_delta_mb"], ".1f"),
                    f["status"],
                ]
            )
        j, o, p, o1 = r["jac"], r["ours"], r.get("peer"), r.get("ours_1")
        ratio_rows.append(
            [
                r["problem"],
                r["title"],
                _fmt(o["wall_s"] / p["wall_s"], ".2f") if p else "-",
                (f"{o['max_rel_err']:.1e}/{p['max_rel_err']:.1e}") if p else "-",
                _fmt(o1["wall_s"] / p["wall_s"], ".2f") if p and o1 else "-",
                (f"{o1['max_rel_err']:.1e}") if o1 else "-",
                _fmt(j["ours_over_floor"], ".2f"),
                _fmt(j["ours_fd_over_floor"], ".2f"),
                _fmt(j["cpu_ours_over_floor"], ".2f"),
                _fmt(j.get("peer_over_floor"), ".2f"),
                _fmt(j.get("ours_over_peer"), ".2f"),
                f"{j['floor_rollouts']}x{j['nstep']}",
                _fmt(j["floor_s"] * 1e3, ".1f"),
            ]
        )
    out: list[str] = []
    if results:
        out += [
            "",
            "== Fits (wall = optimize, s; evals = candidate residual evaluations; "
            "mem = peak RSS growth, MB) ==",
            table(
                fit_rows,
                [
                    "prob",
                    "tool",
                    "p",
                    "C",
                    "wall_s",
                    "iters",
                    "evals",
                    "rollouts",
                    "cost",
                    "max_rel_err",
                    "mem_MB",
                    "status",
                ],
            ),
            "",
            "== Ratios (one process, same data/start; floor = same rollouts by one "
            "mujoco.rollout call) ==",
            table(
                ratio_rows,
                [
                    "prob",
                    "title",
                    "wall ours/peer",
                    "err ours/peer",
                    "wall ours-1/peer",
                    "err ours-1",
                    "jac ours/floor",
                    "fdjac ours/floor",
                    "cpu ours/floor",
                    "jac peer/floor",
                    "jac ours/peer",
                    "floor rollouts x steps",
                    "floor_ms",
                ],
            ),
        ]
    if mem:
        rows = [
            [m["problem"], m["tool"], m["max_iters"], m["nit"], _fmt(m["peak_traced_mb"], ".2f")]
            for m in mem
        ]
        out += [
            "",
            "== Memory vs iterations (tracemalloc peak, MB) ==",
            table(rows, ["prob", "tool", "max_iters", "iters", "peak_MB"]),
        ]
        for tool in ("mjsysid", "peer"):
            pk = {m["max_iters"]: m["peak_traced_mb"] for m in mem if m["tool"] == tool}
            if len(pk) == 2:
                grow = pk[20] - pk[5]
                out.append(
                    f"{tool}: 20 vs 5 iterations: {grow:+.2f} MB "
                    f"({'does not grow' if grow <= 0.1 * pk[5] + 1.0 else 'GROWS'})"
                )
    if peer_note:
        out += ["", peer_note]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", default="1,2,3,4,5,6")
    ap.add_argument("--no-peer", dest="peer", action="store_false")
    ap.add_argument("--json", type=Path, default=None, help="also write the JSON lines here")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--max-iters", type=int, default=100)
    ap.add_argument(
        "--optimizer", default="lm", help="mjsysid backend (default: lm, mjsysid's default)"
    )
    ap.add_argument(
        "--no-one-stage",
        dest="one_stage",
        action="store_false",
        help="leave out the row mjsysid-1 (the fit in one stage, optimize(horizons=None))",
    )
    ap.add_argument("--repeats", type=int, default=7, help="Jacobian timing repeats (best of)")
    ap.add_argument(
        "--fit-repeats",
        type=int,
        default=1,
        help="run each fit this often (round-robin) and keep the fastest",
    )
    ap.add_argument("--no-memory", dest="memory", action="store_false")
    ap.add_argument("--memory-problem", default="2")
    ap.add_argument(
        "--raw-peer-times",
        action="store_true",
        help="give the peer the physical time stamps (see adapters.py)",
    )
    args = ap.parse_args(argv)
    peer_note = ""
    if args.peer:
        ok, why = A.peer_available()
        if not ok:
            args.peer = False
            peer_note = (
                f"NOTE: peer columns skipped, mujoco.sysid does not import ({why}); "
                "pip install -r bench/requirements.txt"
            )
    else:
        peer_note = "NOTE: peer columns skipped (--no-peer)."
    sink = args.json.open("w") if args.json else None
    emit(
        {
            "kind": "env",
            "mujoco": mujoco.__version__,
            "numpy": np.__version__,
            "threads": args.threads,
            "cpus": os.cpu_count(),
            "peer": args.peer,
            "max_iters": args.max_iters,
            "optimizer": args.optimizer,
            "one_stage_row": args.one_stage,
            "loadavg": os.getloadavg(),
        },
        sink,
    )
    results = []
    for key in [k.strip() for k in args.problems.split(",") if k.strip()]:
        t0 = time.perf_counter()
        load0 = os.getloadavg()[0]
        results.append(run_problem(key, args, sink))
        print(
            f"# problem {key} done in {time.perf_counter() - t0:.1f} s (load average "
            f"{load0:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)",
            flush=True,
        )
    mem = memory_check(args, sink) if args.memory else []
    print(report(results, mem, peer_note))
    if sink is not None:
        sink.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

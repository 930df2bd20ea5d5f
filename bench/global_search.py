"""Global search before the local fit, on a motor whose local fit stalls in a wrong basin.

Usage::

    python bench/global_search.py [--steps 2500] [--budget 800] [--starts 8] [--seed 0]
                                  [--threads N] [--no-sequential]

The problem: the hobby DC motor of ``mjsysid/examples/dcmotor`` (H-bridge deadband, winding
lag, back-EMF) with Coulomb friction on the shaft, driven by a 0.6-duty multisine for
``--steps`` steps of 2 ms, only its encoder measured (noise-free). Four
parameters: the driver deadband (truth 0.15 duty), the shaft friction loss (0.004 N·m), the
back-EMF ``kv`` (0.003 N·m·s/rad) and the gear (torque-constant factor, 1.0). The start is
what a user with a datasheet 3x off would enter: deadband 0 (unknown), friction and ``kv`` 3x
too high, gear 3x too low; at that start the motor barely turns, so the friction has no
effect on the residual (``allow_no_effect=True`` for every local fit).

Rows, all from the same start in one process:

* ``LM``: the local fit alone (``optimize``, default options).
* ``CMA-ES+LM``: :func:`mjsysid.fit.search.fit_global` with ``--budget``
  evaluations for the global stage, then the same local fit.
* ``CMA-ES only``: :func:`~mjsysid.fit.search.global_search` with the budget
  ``CMA-ES+LM`` spent in total (both stages) and the spread test off, each generation
  batched.
* ``CMA-ES only, 5x budget``: the same with five times the evaluations (``cmaes``'s own
  termination tests may end it sooner).
* ``CMA-ES only, 1 call/cand.``: the same search with one residual call per candidate
  (what a CMA-ES loop around a scalar cost does), to show what batching a generation buys.
* ``multistart N``: :func:`mjsysid.fit.search.multistart` with ``--starts`` local fits.

Columns: wall time (s), residual evaluations (candidate columns), final cost, the largest
relative parameter error, and wall time relative to ``CMA-ES+LM``.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

import mjsysid as ms
from mjsysid.data.excitation import multisine
from mjsysid.fit.options import FitOptions, GlobalSearchOptions
from mjsysid.fit.search import fit_global, global_search, multistart, reflect

XML_PATH = Path(ms.__file__).parent / "examples" / "dcmotor" / "dcmotor.xml"
TRUTH = (0.15, 0.004, 0.003, 1.0)  # deadband, friction loss, kv, gear
START = (0.0, 0.012, 0.009, 1.0 / 3.0)


def motor_problem(steps: int, threads: int | None) -> tuple[Any, ms.ParameterDict]:
    """The residual function and the start parameters (see the module notes)."""
    xml = XML_PATH.read_text().replace('damping="0.002"', 'damping="0.002" frictionloss="0.001"')
    spec = mujoco.MjSpec.from_string(xml)
    model = spec.compile()

    def params_at(values: tuple[float, ...]) -> ms.ParameterDict:
        d = ms.ParameterDict(
            [
                ms.Parameter("deadband", 0.1, 0.0, 0.5),
                ms.make_parameter("joint_frictionloss", model, "shaft", max_value=0.02),
                ms.make_parameter("actuator_kv", model, "motor", max_value=0.02),
                ms.make_parameter("actuator_gear", model, "motor", min_value=0.1, max_value=5.0),
            ]
        )
        d.update_from_vector(list(values))
        return d

    driver = ms.ControlTransform().deadband("motor", "deadband")
    dt = float(model.opt.timestep)
    duty = 0.6 * multisine(-(-steps // 10), 1, 10 * dt, amplitude=1.0, f0=0.2, f1=3.0, seed=7)
    duty = np.repeat(duty, 10, axis=0)[:steps]
    truth = params_at(TRUTH)
    x0 = ms.create_initial_state(model)
    true_model = ms.apply_param_modifiers(truth, spec)
    (traj,) = ms.sysid_rollout(true_model, None, driver.apply(truth, duty, model), x0)
    seqs = ms.ModelSequences(
        "motor",
        spec,
        ["run"],
        [x0],
        [ms.TimeSeries.from_control_names(traj.times, duty, model)],
        [ms.TimeSeries.from_names(traj.times, traj.sensordata, model)],
    )
    rf = ms.build_residual_fn([seqs], control_transform=driver, nthread=threads)
    return rf, params_at(START)


def _row(name: str, wall: float, nfev: int, cost: float, x: np.ndarray) -> dict[str, Any]:
    err = float(np.max(np.abs(np.asarray(x) - TRUTH) / np.abs(TRUTH)))
    return {"method": name, "wall": wall, "nfev": int(nfev), "cost": float(cost), "err": err}


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _one_call_per_candidate(rf: Any) -> Callable[[np.ndarray, ms.ParameterDict], np.ndarray]:
    def sequential(X: np.ndarray, params: ms.ParameterDict) -> np.ndarray:
        X = np.asarray(X)
        if X.ndim == 1:
            return np.asarray(rf(X, params))
        return np.stack([np.asarray(rf(X[:, j], params)) for j in range(X.shape[1])], axis=1)

    return sequential


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    rf, start = motor_problem(args.steps, args.threads)
    local = FitOptions(allow_no_effect=True)
    rows = []
    (_, lm), wall = _timed(lambda: ms.optimize(start, rf, options=local))
    rows.append(_row("LM", wall, lm.nfev, lm.cost, lm.x))
    options = GlobalSearchOptions(budget=args.budget, seed=args.seed)
    (_, gl), wall = _timed(lambda: fit_global(start, rf, local.replace(global_search=options)))
    rows.append(_row("CMA-ES+LM", wall, gl.nfev, gl.cost, gl.x))
    same = GlobalSearchOptions(budget=gl.nfev, seed=args.seed, tol_spread=0.0)
    g, wall = _timed(lambda: global_search(start, rf, same))
    rows.append(_row("CMA-ES only", wall, g.evaluations, g.cost, g.x))
    rows[-1]["note"] = f"stop: {g.stop_reason}"
    five = GlobalSearchOptions(budget=5 * gl.nfev, seed=args.seed, tol_spread=0.0)
    g, wall = _timed(lambda: global_search(start, rf, five))
    rows.append(_row("CMA-ES only, 5x budget", wall, g.evaluations, g.cost, g.x))
    rows[-1]["note"] = f"stop: {g.stop_reason}"
    if args.sequential:
        seq = _one_call_per_candidate(rf)
        g, wall = _timed(lambda: global_search(start, seq, same))
        rows.append(_row("CMA-ES only, 1 call/cand.", wall, g.evaluations, g.cost, g.x))
    starts = local.replace(starts=args.starts, starts_seed=args.seed)
    (_, ms_res), wall = _timed(lambda: multistart(start, rf, starts))
    s = ms_res.multistart
    assert s is not None and gl.global_search is not None
    rows.append(_row(f"multistart {args.starts}", wall, ms_res.nfev, ms_res.cost, ms_res.x))
    rows[-1]["note"] = f"{s.n_reached} of {len(s.starts)} starts reached the best cost"
    gs = gl.global_search
    rows[1]["note"] = (
        f"global: {gs.evaluations} evals, {gs.generations} generations, stop: {gs.stop_reason}"
    )
    rf.close()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    ref = next(r["wall"] for r in rows if r["method"] == "CMA-ES+LM")
    lines = [
        "| method | wall (s) | evaluations | final cost | max rel. param. error "
        "| wall / CMA-ES+LM | note |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['method']} | {r['wall']:.2f} | {r['nfev']} | {r['cost']:.3e} | "
            f"{r['err']:.2e} | {r['wall'] / ref:.2f} | {r.get('note', '')} |"
        )
    return "\n".join(lines)


def ask_cost(dims: int, generations: int = 5, seed: int = 0) -> list[dict[str, Any]]:
    """Draws and ``ask`` time per generation with the mean on a corner of the box (every
    parameter on its lower bound, the far start): ``cmaes``'s own bounds (redraw until inside,
    up to 100 times, then clip) against the global stage's mirroring (:func:`reflect`)."""
    from cmaes import CMA

    class Counting(CMA):  # counts the normal vectors drawn
        draws = 0

        def _sample_solution(self) -> np.ndarray:
            Counting.draws += 1
            return super()._sample_solution()

    rows = []
    pop = GlobalSearchOptions().population_for(dims)
    for how in ("rejection (cmaes bounds)", "mirror (reflect)"):
        bounds = np.array([[0.0, 1.0]] * dims) if how.startswith("rejection") else None
        cma = Counting(mean=np.zeros(dims), sigma=0.3, bounds=bounds, seed=seed,
                       population_size=pop)  # fmt: skip
        Counting.draws = 0
        t0 = time.perf_counter()
        for _ in range(generations):
            U = reflect(np.stack([cma.ask() for _ in range(pop)], axis=1))
            cma.tell([(U[:, j], float(np.sum(U[:, j] ** 2))) for j in range(pop)])
        wall = time.perf_counter() - t0
        rows.append({"how": how, "dims": dims, "candidates": pop * generations,
                     "draws": Counting.draws, "ask_s": wall})  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2500)
    parser.add_argument("--budget", type=int, default=800)
    parser.add_argument("--starts", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--no-sequential", dest="sequential", action="store_false")
    parser.add_argument(
        "--ask", action="store_true", help="only the draws of a start on a corner of the box"
    )
    args = parser.parse_args()
    if args.ask:
        print("| sampling | dims | candidates | draws | ask + tell (s) |")
        print("|---|---:|---:|---:|---:|")
        for dims in (14, 173):
            for r in ask_cost(dims):
                print(f"| {r['how']} | {r['dims']} | {r['candidates']} | {r['draws']} | "
                      f"{r['ask_s']:.3f} |")  # fmt: skip
        return
    rows = run(args)
    print(f"motor, {args.steps} steps, start {START}, truth {TRUTH}, threads {args.threads}")
    print(table(rows))


if __name__ == "__main__":
    main()

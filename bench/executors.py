"""The built-in rollout's executor: ``mujoco.rollout.Rollout`` against ``mujoco.batch.Batch``.

Usage::

    python bench/executors.py [--problems 1,5] [--sizes 1,5,25] [--threads 2] [--repeats 15]

For each benchmark problem (``bench/problems.py``) and batch size ``n``: ``n`` candidate
models (copies of the problem's model) rolled out over the problem's first recording, (a)
by one ``mujoco.rollout.Rollout(nthread).rollout`` call with reused ``MjData`` recording
states and sensors (what :class:`mjsysid.sim.rollout.BatchRollout` does where the states are
read), (b) by a persistent ``mujoco.batch.Batch(model, n, nthread)``: ``set_models``,
``reset``, the initial states written into its rows, one ``Batch.rollout(nstep, control,
record=(mjSTATE_FULLPHYSICS, "sensordata"), out=...)``, (c) by ``BatchRollout.run(...,
record_states=False)``, the sensors only on a kept ``Batch`` (what a residual that reads no states
runs), with its clock check. Best of ``--repeats``, interleaved; the outputs are checked to
be bit-identical.
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import mujoco
import mujoco.batch
import mujoco.rollout
import numpy as np
import problems as P

from mjsysid.data.states import full_physics_columns
from mjsysid.sim.rollout import BatchRollout

FULL = mujoco.mjtState.mjSTATE_FULLPHYSICS


def _batch_rollout(
    batch: mujoco.batch.Batch,
    models: list[mujoco.MjModel],
    cols: np.ndarray,
    x0: np.ndarray,
    ctrl: np.ndarray,
    out: dict,
) -> None:
    batch.set_models(models)
    batch.reset(stage=int(mujoco.mjtStage.mjSTAGE_NONE))
    batch.state[:, cols] = x0
    batch.rollout(ctrl.shape[1], ctrl, record=(FULL, "sensordata"), out=out)


def _sensors_only(
    ours: BatchRollout,
    models: list[mujoco.MjModel],
    x0: np.ndarray,
    ctrl: np.ndarray,
    got: dict[str, np.ndarray],
) -> None:
    got["sensordata"] = ours.run(models, x0, ctrl, align=False, record_states=False)[1]


def compare(key: str, sizes: list[int], nthread: int, repeats: int) -> None:
    prob = getattr(P, f"problem{key}")()
    m, seq = prob.model, prob.sequences[0]
    runner = mujoco.rollout.Rollout(nthread=nthread)
    ours = BatchRollout(nthread)
    datas = [mujoco.MjData(m) for _ in range(nthread)]
    cols = full_physics_columns(m)
    for n in sizes:
        models = [m.__copy__() for _ in range(n)]
        x0 = np.repeat(seq.x0[None], n, 0)
        ctrl = np.repeat(seq.ctrl[None], n, 0)
        nstep = ctrl.shape[1]
        state = np.empty((n, nstep, x0.shape[1]))
        sens = np.empty((n, nstep, m.nsensordata))
        batch = mujoco.batch.Batch(m, nsim=n, nthread=nthread)
        out = {FULL: np.empty_like(state), "sensordata": np.empty_like(sens)}

        rollout = partial(
            runner.rollout, models, datas, x0, ctrl,
            skip_checks=True, nstep=nstep, state=state, sensordata=sens,
        )  # fmt: skip
        batched = partial(_batch_rollout, batch, models, cols, x0, ctrl, out)
        got: dict[str, np.ndarray] = {}
        sensors_only = partial(_sensors_only, ours, models, x0, ctrl, got)
        best = {"rollout": np.inf, "batch": np.inf, "sensors": np.inf}
        for _ in range(repeats):
            for name, fn in (("rollout", rollout), ("batch", batched), ("sensors", sensors_only)):
                t0 = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - t0)
        same = np.array_equal(out[FULL], state) and np.array_equal(out["sensordata"], sens)
        same &= np.array_equal(got["sensordata"], sens)
        print(
            f"problem {key:>2} n={n:>3} steps={nstep}: rollout {1e3 * best['rollout']:7.2f} ms  "
            f"batch {1e3 * best['batch']:7.2f} ms  sensors only {1e3 * best['sensors']:7.2f} ms  "
            f"batch/rollout {best['batch'] / best['rollout']:.3f}  sensors only/rollout "
            f"{best['sensors'] / best['rollout']:.3f}  bit-identical {same}"
        )
    runner.close()
    ours.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", default="1,5")
    ap.add_argument("--sizes", default="1,5,25")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    for key in args.problems.split(","):
        compare(key, [int(s) for s in args.sizes.split(",")], args.threads, args.repeats)


if __name__ == "__main__":
    main()

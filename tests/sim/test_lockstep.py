"""The lock-step rollout's chunks: any chunking gives the reference loop, bit for bit."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import mujoco
import numpy as np
import pytest
from test_force_laws import CASES, PENDULUM, TWO_JOINTS, _controls, _x0

from mjsysid.sim.laws.core import StepContext
from mjsysid.sim.laws.friction import CoulombFriction, ViscousFriction
from mjsysid.sim.laws.joint import JointLaw
from mjsysid.sim.lockstep import PROBE_STEPS, LockstepRollout, chunk_count, reference_rollout
from mjsysid.sim.rollout import BatchRollout


def _batch_inputs(
    model: mujoco.MjModel, truth: Mapping[str, list[float]], n: int, nstep: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """``n`` rollouts with different start angles, controls and law values."""
    rng = np.random.default_rng(seed)
    x0s = np.stack([_x0(model, a) for a in rng.uniform(-1.0, 1.0, n)])
    base = _controls(max(nstep, 2))[:nstep]
    ctrl = np.stack([base * (1.0 + 0.3 * rng.standard_normal()) for _ in range(n)])
    vals = {
        k: np.asarray(v, float)[None] * (1.0 + 0.2 * rng.random((n, len(v))))
        for k, v in truth.items()
    }
    return x0s, ctrl, vals


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_chunking_is_the_reference_loop_bit_for_bit(case):
    law, truth, _ = CASES[case]
    model = mujoco.MjModel.from_xml_string(PENDULUM)
    n, nstep = 7, 80
    x0s, ctrl, vals = _batch_inputs(model, truth, n, nstep)
    models = [model] * n
    runs = []
    for nthread, chunk_work, chunks in ((1, 0.0, 1), (2, 0.0, 2), (3, 0.0, 3), (3, np.inf, 1)):
        with BatchRollout(nthread) as runner:
            lock = LockstepRollout(runner, [law], chunk_work=chunk_work)
            runs.append(lock.run(models, x0s, ctrl, [vals], align=False))
            assert lock.last_chunk_count == chunks
    state, sens, ok = runs[0]
    assert ok.all()
    for other in runs[1:]:
        for a, b in zip(runs[0], other, strict=True):
            np.testing.assert_array_equal(a, b)
    for i in (0, 3, n - 1):  # one rollout of each chunk
        one = [{k: v[i : i + 1] for k, v in vals.items()}]
        ref_state, ref_sens = reference_rollout(model, x0s[i], ctrl[i], [law], one)
        np.testing.assert_allclose(state[i], ref_state, rtol=0, atol=1e-12)
        np.testing.assert_allclose(sens[i], ref_sens, rtol=0, atol=1e-12)


def test_automatic_chunking_gives_the_same_bits():
    """Whatever the timing decides (chunks, or back to one chunk after the trial steps)."""
    law, truth, _ = CASES["stribeck"]
    model = mujoco.MjModel.from_xml_string(PENDULUM)
    x0s, ctrl, vals = _batch_inputs(model, truth, 40, 120, seed=4)
    runs = []
    for nthread, chunk_work in ((1, 0.0), (2, 1e-12)):
        with BatchRollout(nthread) as runner:
            lock = LockstepRollout(runner, [law], chunk_work=chunk_work)
            runs.append(lock.run([model] * 40, x0s, ctrl, [vals]))
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a, b)


def test_merged_laws_in_chunks_match_the_reference_loop():
    model = mujoco.MjModel.from_xml_string(TWO_JOINTS)
    laws = [
        CoulombFriction("f1", "j1", width=0.05),
        CoulombFriction("f2", "j2", width=0.05),
        ViscousFriction("v1", "j1"),
    ]
    n, nstep = 5, 60
    rng = np.random.default_rng(3)
    x0s = np.stack([ms_state(model, rng.uniform(-0.5, 0.5, 2)) for _ in range(n)])
    ctrl = 0.3 * rng.standard_normal((n, nstep, model.nu))
    vals = [
        {"friction": 0.02 + 0.01 * rng.random((n, 2))},
        {"friction": 0.05 + 0.01 * rng.random((n, 2))},
        {"damping": 0.01 + 0.01 * rng.random((n, 2))},
    ]
    with BatchRollout(2) as runner:
        state, sens, ok = LockstepRollout(runner, laws, chunk_work=0.0).run(
            [model] * n, x0s, ctrl, vals, align=False
        )
    assert ok.all()
    for i in range(n):
        one = [{k: v[i : i + 1] for k, v in law_vals.items()} for law_vals in vals]
        ref_state, ref_sens = reference_rollout(model, x0s[i], ctrl[i], laws, one)
        np.testing.assert_allclose(state[i], ref_state, rtol=0, atol=1e-12)
        np.testing.assert_allclose(sens[i], ref_sens, rtol=0, atol=1e-12)


def ms_state(model: mujoco.MjModel, qpos: np.ndarray) -> np.ndarray:
    """The full-physics state of ``model`` at rest at ``qpos``."""
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    out = np.empty(mujoco.mj_stateSize(model, spec))
    mujoco.mj_getState(model, data, out, spec)
    return out


@pytest.mark.parametrize("nstep", [1, PROBE_STEPS, PROBE_STEPS + 1])
def test_short_horizons_and_aligned_output(nstep):
    law, truth, _ = CASES["coulomb"]
    model = mujoco.MjModel.from_xml_string(PENDULUM)
    x0s, ctrl, vals = _batch_inputs(model, truth, 4, nstep)
    with BatchRollout(2) as runner:
        lock = LockstepRollout(runner, [law], chunk_work=0.0)
        raw, sens, ok = lock.run([model] * 4, x0s, ctrl, [vals], align=False)
        aligned, sens2, _ = lock.run([model] * 4, x0s, ctrl, [vals])
    assert raw.shape == (4, nstep, x0s.shape[1]) and ok.all()
    assert raw.flags.c_contiguous and sens.flags.c_contiguous
    np.testing.assert_array_equal(aligned[:, 0], x0s)
    np.testing.assert_array_equal(aligned[:, 1:], raw[:, :-1])
    np.testing.assert_array_equal(sens, sens2)


def test_chunk_count_follows_the_work_per_step():
    us = 1e-6
    assert chunk_count(10 * us, 5 * us, 14, 2, 25 * us) == 1  # too little work to split
    assert chunk_count(60 * us, 5 * us, 14, 2, 25 * us) == 2
    assert chunk_count(60 * us, 60 * us, 14, 2, 25 * us) == 1  # Python-bound: no gain
    # max(k P, P + W/k) with P = 10, W = 400: least at k = 7 of 16 threads
    assert chunk_count(400 * us, 10 * us, 100, 16, 25 * us) == 7
    assert chunk_count(1.0, 0.0, 14, 4, 25 * us) == 4  # at most one chunk per thread
    assert chunk_count(1.0, 0.0, 3, 8, 25 * us) == 3  # and per rollout
    assert chunk_count(0.0, 1.0, 5, 4, 0.0) == 4  # no threshold: every thread a chunk
    assert chunk_count(1.0, 0.0, 5, 1, 25 * us) == 1


@dataclass(frozen=True)
class _Fragile(JointLaw):
    """A law that raises when the command exceeds 0.5."""

    def step(self, ctx: StepContext) -> dict[str, np.ndarray]:
        if (ctx.ctrl[:, 0] > 0.5).any():
            raise FloatingPointError("fragile law failed")
        return {}


@pytest.mark.parametrize("bad", [0, 5])  # the calling thread's chunk, the other thread's
def test_an_error_in_any_chunk_reaches_the_caller(bad):
    """The law fails after the probe steps, in the chunk of rollout ``bad``."""
    model = mujoco.MjModel.from_xml_string(PENDULUM)
    n = 6
    x0s = np.stack([_x0(model)] * n)
    ctrl = np.zeros((n, 40, model.nu))
    ctrl[bad, PROBE_STEPS + 10 :, 0] = 1.0
    with BatchRollout(2) as runner:
        lock = LockstepRollout(runner, [_Fragile("fragile", "j")], chunk_work=0.0)
        with pytest.raises(FloatingPointError, match="fragile law failed"):
            lock.run([model] * n, x0s, ctrl, [{}])
        ctrl[bad] = 0.0
        _, _, ok = lock.run([model] * n, x0s, ctrl, [{}])  # and the rollout still works
    assert ok.all()

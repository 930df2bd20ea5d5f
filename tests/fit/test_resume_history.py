"""A resumed fit's per-iteration history covers the whole fit, not only the resumed part."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mjsysid as ms
from conftest import arm2_masses, arm2_truth
from mjsysid.fit.checkpoints import checkpoint_history


class _Killed(Exception):
    """Stands in for a kill: raised from the callback after an iteration's checkpoint."""


@pytest.fixture(scope="module")
def problem():

    from conftest import excitation, simulate

    spec, model, truth, x0 = arm2_truth()
    sens, control = simulate(spec, truth, excitation(200, model.nu), x0)
    rf = ms.build_residual_fn(ms.ModelSequences("arm2", spec, "s", x0, control, sens))
    yield arm2_masses(spec, model), rf
    rf.close()


def _kill_after(n: int):
    def callback(it: int, x: np.ndarray, cost: float) -> None:
        if it >= n:
            raise _Killed

    return callback


@pytest.mark.parametrize("killed_at", [2, 3])
def test_killed_and_resumed_fit_has_the_uninterrupted_objective_history(
    problem, tmp_path: Path, killed_at: int
):
    params, rf = problem
    _, whole = ms.optimize(params, rf, max_iters=50, horizons=None)
    ckpt = tmp_path / "ckpt.npz"
    with pytest.raises(_Killed):
        ms.optimize(
            params, rf, max_iters=50, horizons=None, checkpoint=ckpt,
            callback=_kill_after(killed_at),
        )  # fmt: skip
    kept = checkpoint_history(ckpt, params.size)
    assert kept is not None and len(kept.objective) == killed_at + 1
    _, resumed = ms.optimize(params, rf, max_iters=50, horizons=None, checkpoint=ckpt, resume=True)
    obj, ref = resumed.extras["objective"], whole.extras["objective"]
    assert len(obj) == len(resumed.extras["candidate"]) == resumed.nit + killed_at + 1
    np.testing.assert_array_equal(obj[: killed_at + 1], ref[: killed_at + 1])
    assert len(obj) == pytest.approx(len(ref), abs=1)
    assert max(obj[-1], ref[-1]) < 1e-9 * ref[0]  # both converged (noise-free data)
    np.testing.assert_allclose(resumed.extras["candidate"][0], params.as_vector())
    # the history written at the end is the whole fit's too (for another resume)
    again = checkpoint_history(ckpt, params.size)
    assert again is not None
    np.testing.assert_array_equal(again.objective, obj)


def test_a_checkpoint_without_history_resumes_as_before(problem, tmp_path: Path):
    params, rf = problem
    ckpt = tmp_path / "ckpt.npz"
    ms.optimize(params, rf, max_iters=2, horizons=None, checkpoint=ckpt)
    z = dict(np.load(ckpt))
    for k in ("objective", "candidate"):
        z.pop(k)
    np.savez(ckpt, **z)
    assert checkpoint_history(ckpt, params.size) is None
    _, resumed = ms.optimize(params, rf, max_iters=50, horizons=None, checkpoint=ckpt, resume=True)
    assert len(resumed.extras["objective"]) == resumed.nit + 1

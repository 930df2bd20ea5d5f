"""The global stage searches the physics only, draws each candidate once, and hands on values
within the bounds (issue 31, item 1)."""

from __future__ import annotations

import io
import time
from pathlib import Path

import numpy as np
import pytest

import mjsysid as ms
from mjsysid.fit import search
from mjsysid.fit.options import FitOptions, GlobalSearchOptions
from mjsysid.fit.search import (
    _Box,
    fit_global,
    global_checkpoint_path,
    global_search,
    reflect,
)
from mjsysid.objective.initial_state import nuisance_mask

cmaes = pytest.importorskip("cmaes")

# a window start's velocity bounds as initial_state_params makes them (recorded ± 2 rad/s):
# lo + 1·(hi − lo) rounds to 1.7568999999999755, one ulp above hi (the crash of issue 31)
LO, HI = -2.2431000000000247, 1.7568999999999753


def _window_starts(n: int) -> list[ms.Parameter]:
    """``n`` window-start velocities, as :func:`initial_state_params` marks them."""
    return [
        ms.Parameter(
            f"arm/w{k}/j_qvel0",
            0.1 * k,
            0.1 * k - 2.0,
            0.1 * k + 2.0,
            meta={"kind": "initial_qvel", "target": f"arm/w{k}", "joint": "j"},
        )
        for k in range(n)
    ]


class Recorder:
    """``r = [a − 3, b + 1, sin 2πa, sin 2πb, 0.01·(window starts)]`` recording every batch
    of candidates it is given."""

    def __init__(self) -> None:
        self.batches: list[np.ndarray] = []

    def __call__(self, X: np.ndarray, params: ms.ParameterDict) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        X2 = X[:, None] if X.ndim == 1 else X
        self.batches.append(X2.copy())
        a, b = X2[:2]
        r = np.vstack([a - 3, b + 1, np.sin(2 * np.pi * a), np.sin(2 * np.pi * b), 0.01 * X2[2:]])
        return r[:, 0] if X.ndim == 1 else r


def test_window_starts_are_held_at_their_recorded_values_not_searched() -> None:
    physics = [ms.Parameter("a", 1.1, -5.0, 5.0), ms.Parameter("b", 0.9, -5.0, 5.0)]
    params = ms.ParameterDict([*physics, *_window_starts(40)])
    np.testing.assert_array_equal(nuisance_mask(params), [False, False] + [True] * 40)
    rf = Recorder()
    g = global_search(params, rf, GlobalSearchOptions(budget=300, seed=1))
    X = np.concatenate(rf.batches, axis=1)
    held = params.as_vector()[2:]
    np.testing.assert_array_equal(X[2:], np.repeat(held[:, None], X.shape[1], axis=1))
    assert np.ptp(X[0]) > 1.0  # the physics are searched
    np.testing.assert_allclose(g.x[:2], [3.0, -1.0], atol=0.05)
    np.testing.assert_array_equal(g.x[2:], held)
    # the defaults follow the 2 physical dimensions, not the 42 entries
    defaults = GlobalSearchOptions()
    assert g.population == defaults.population_for(2)
    assert "2 of 42 values searched, 40 initial states held" in g.message


def test_default_budget_scales_with_the_physics_not_the_windows() -> None:
    params = ms.ParameterDict([ms.Parameter("a", 1.1, -5.0, 5.0), *_window_starts(160)])
    rf = Recorder()
    g = global_search(params, rf, GlobalSearchOptions(seed=0))
    assert g.budget == GlobalSearchOptions().budget_for(1)
    assert g.evaluations <= g.budget


def test_a_force_laws_state_at_a_window_start_is_held_too() -> None:
    law_start = ms.Parameter(
        "arm/w0/motor_current0",
        0.5,
        -1.0,
        1.0,
        meta={"kind": "initial_law_state", "target": "arm/w0", "law": "motor"},
    )
    params = ms.ParameterDict([ms.Parameter("a", 1.1, -5.0, 5.0), law_start])
    np.testing.assert_array_equal(nuisance_mask(params), [False, True])


def test_only_initial_states_free_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one free physical parameter"):
        global_search(ms.ParameterDict(_window_starts(3)), Recorder())


def test_a_window_start_without_finite_bounds_is_fine_a_physical_one_is_not() -> None:
    start = _window_starts(1)[0]
    start.min_value, start.max_value = np.array([-np.inf]), np.array([np.inf])
    b = ms.Parameter("b", 1.0, -np.inf, np.inf)
    params = ms.ParameterDict([ms.Parameter("a", 1.0, 0.0, 5.0), b, start])
    with pytest.raises(ValueError, match="b must have finite bounds"):
        global_search(params, Recorder(), GlobalSearchOptions(budget=50))
    b = ms.Parameter("b", 1.0, -5.0, 5.0)
    params = ms.ParameterDict([ms.Parameter("a", 1.0, 0.0, 5.0), b, start])
    g = global_search(params, Recorder(), GlobalSearchOptions(budget=50))
    assert g.x[2] == start.value[0]


def test_initial_state_params_of_shooting_windows_are_the_nuisance(make_problem) -> None:
    from conftest import ARM2

    p = make_problem(ARM2, n=200, qpos=[0.3, -0.2], names=["j1_pos", "j2_pos"])
    windows = ms.split_windows(p.sequences, 0.1)
    params = ms.ParameterDict(
        [ms.body_inertia_param(p.spec, p.model, "link1", ms.InertiaType.Mass)]
    )
    starts = ms.initial_state_params(windows)
    for q in starts.values():
        params.add(q)
    mask = nuisance_mask(params)
    assert mask.sum() == starts.size and not mask[0]


class CountingCMA(cmaes.CMA):
    """``cmaes.CMA`` counting the normal vectors it draws (one per sample; rejection
    sampling draws up to 101 per candidate)."""

    draws = 0

    def _sample_solution(self) -> np.ndarray:
        CountingCMA.draws += 1
        return super()._sample_solution()


def test_a_start_on_the_bounds_costs_one_draw_per_candidate(monkeypatch) -> None:
    """Every physical parameter on its lower bound (a far start): the candidates are
    mirrored into the box, never redrawn (5,757 draws for 57 candidates before)."""
    n = 30
    params = ms.ParameterDict([ms.Parameter(f"k{i}", 0.0, 0.0, 1.0) for i in range(n)])

    def rf(X: np.ndarray, params: ms.ParameterDict) -> np.ndarray:
        box.append(np.asarray(X))
        return np.asarray(X) - 0.3

    box: list[np.ndarray] = []
    monkeypatch.setattr(search, "_import_cma", lambda: CountingCMA)
    CountingCMA.draws = 0
    t0 = time.perf_counter()
    g = global_search(params, rf, GlobalSearchOptions(budget=200, sigma=0.5))
    wall = time.perf_counter() - t0
    candidates = g.evaluations - 1  # (the nominal is not drawn)
    assert CountingCMA.draws == candidates
    assert wall < 5.0  # (with rejection: ~100 draws per candidate)
    X = np.concatenate(box, axis=1)
    assert X.min() >= 0.0 and X.max() <= 1.0
    assert g.cost < g.start_cost


@pytest.mark.parametrize(
    "u", [np.array([1.0]), np.array([[1.0, 0.0, 0.5, 7.0, -3.0]]), np.array([np.nextafter(1, 2)])]
)
def test_candidates_are_clipped_to_the_bounds(u: np.ndarray) -> None:
    box = _Box(np.array([LO]), np.array([HI]))
    assert LO + 1.0 * (HI - LO) > HI  # the awkward floats
    x = box.from_unit(u)
    assert np.all(x <= HI) and np.all(x >= LO)
    assert np.ravel(x)[0] == HI


def test_reflect_folds_any_real_into_the_box() -> None:
    u = np.array([-2.5, -0.25, 0.0, 0.3, 1.0, 1.25, 2.0, 3.7, 1e9 + 0.5])
    np.testing.assert_allclose(reflect(u), [0.5, 0.25, 0.0, 0.3, 1.0, 0.75, 0.0, 0.3, 0.5])
    inside = np.linspace(0, 1, 11)
    np.testing.assert_array_equal(reflect(inside), inside)


def beyond(X: np.ndarray, params: ms.ParameterDict) -> np.ndarray:
    """``r = [a − 10, b + 1]``: ``a`` wants to be far above its (awkward) upper bound."""
    X = np.asarray(X, dtype=np.float64)
    return np.stack([X[0] - 10.0, X[1] + 1.0])


def _upper_bound_problem() -> tuple[ms.ParameterDict, object]:
    params = ms.ParameterDict([ms.Parameter("a", 0.0, LO, HI), ms.Parameter("b", 0.0, -5, 5)])
    return params, beyond


def test_a_fit_ending_on_an_awkward_upper_bound_is_handed_on(tmp_path: Path) -> None:
    params, rf = _upper_bound_problem()
    ckpt = tmp_path / "fit.npz"
    options = FitOptions(global_search=GlobalSearchOptions(budget=120), horizons=None)
    opt, res = fit_global(params, rf, options.replace(checkpoint=ckpt))
    assert res.x[0] <= HI and opt["a"].value[0] <= HI
    np.testing.assert_allclose(res.x[0], HI)


def test_resume_after_the_global_stage_with_a_best_one_ulp_out(tmp_path: Path) -> None:
    """A global checkpoint whose best candidate is ``lo + 1·span`` (as the earlier version
    wrote it), the local fit not yet started: ``resume`` goes on from it (it crashed)."""
    params, rf = _upper_bound_problem()
    ckpt = tmp_path / "fit.npz"
    options = FitOptions(global_search=GlobalSearchOptions(budget=120), horizons=None)
    fit_global(params, rf, options.replace(checkpoint=ckpt))
    gpath = global_checkpoint_path(ckpt)
    with np.load(gpath) as z:
        arrays = dict(z)
    arrays["x_best"] = np.array([LO + 1.0 * (HI - LO), -1.0])
    assert arrays["x_best"][0] > HI
    np.savez(gpath, **arrays)
    ckpt.unlink()  # killed before the local stage wrote its checkpoint
    opt, res = fit_global(params, beyond, options.replace(checkpoint=ckpt, resume=True))
    assert opt["a"].value[0] <= HI and res.x[0] <= HI


def test_cli_resume_after_a_global_stage_over_shooting_windows(tmp_path: Path) -> None:
    """``mjsysid fit --global cmaes`` on windows with estimated starts, then ``--resume``
    from the global checkpoint alone (the run killed before the local stage)."""
    import yaml

    from conftest import arm_experiment_text
    from mjsysid.app.cli import main

    exp = tmp_path / "exp.yaml"
    exp.write_text(
        arm_experiment_text(
            shooting={"window": 0.5, "estimate_initial_state": True},
            optimizer={"method": "lm", "max_iters": 5},
        )
    )
    out = tmp_path / "out"
    args = ["fit", str(exp), "--out", str(out), "--no-report", "-q"]
    err = io.StringIO()
    code = main([*args, "--global", "cmaes", "--budget", "40"], stdout=io.StringIO(), stderr=err)
    assert code == 0, err.getvalue()
    run = yaml.safe_load((out / "run.yaml").read_text())
    assert "search" in run
    gpath = out / "checkpoint.global.npz"
    with np.load(gpath) as z:
        names = [str(n) for n in z["parameter_names"]]
    assert any(n.endswith("_qpos0") for n in names)
    (out / "checkpoint.npz").unlink()
    err = io.StringIO()
    flags = ["--global", "cmaes", "--budget", "40", "--resume"]
    code = main([*args, *flags], stdout=io.StringIO(), stderr=err)
    assert code == 0, err.getvalue()


def test_multistart_draws_the_physics_and_keeps_the_window_starts() -> None:
    from mjsysid.fit.search import multistart

    params = ms.ParameterDict([ms.Parameter("a", 1.1, -5.0, 5.0), *_window_starts(5)])
    params.add(ms.Parameter("b", 0.9, -5.0, 5.0))
    rf = Recorder()

    def ab_first(X: np.ndarray, p: ms.ParameterDict) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        return rf(X[[0, 6, 1, 2, 3, 4, 5]], p)

    _, res = multistart(params, ab_first, FitOptions(starts=4, horizons=None, max_iters=3))
    assert res.multistart is not None
    X0 = np.stack([s.x0 for s in res.multistart.starts], axis=1)  # (7, 4)
    held = params.as_vector()[1:6]
    np.testing.assert_array_equal(X0[1:6], np.repeat(held[:, None], 4, axis=1))
    assert np.ptp(X0[0]) > 1.0 and np.ptp(X0[6]) > 1.0


def test_positive_bounds_spanning_decades_are_searched_in_log() -> None:
    from mjsysid.fit.search import log_scaled

    lo, hi = np.array([1e-5, 0.0, 0.1, -1.0]), np.array([0.1, 0.5, 5.0, 1.0])
    log = log_scaled(lo, hi, "auto")
    np.testing.assert_array_equal(log, [True, False, False, False])
    assert not log_scaled(lo, hi, "linear").any()
    box = _Box(lo, hi, log)
    x = np.array([0.002, 0.25, 1.0, 0.5])
    u = box.to_unit(x)
    np.testing.assert_allclose(u, [np.log(200) / np.log(1e4), 0.5, 0.9 / 4.9, 0.75])
    np.testing.assert_allclose(box.from_unit(u), x, rtol=1e-12)
    ends = box.from_unit(np.array([[0.0, 1.0]] * 4))
    np.testing.assert_array_equal(ends, np.stack([lo, hi], axis=1))
    with pytest.raises(
        ValueError, match=r"global_search: scale must be one of \['auto', 'linear'\]"
    ):
        GlobalSearchOptions(scale="log")


def test_scale_is_an_option_of_the_experiment_mapping_and_of_the_checkpoint(tmp_path) -> None:
    o = GlobalSearchOptions.from_mapping({"global": "cmaes", "scale": "linear", "budget": 50})
    assert o.scale == "linear" and o.budget == 50
    params = ms.ParameterDict([ms.Parameter("k", 0.01, 1e-4, 1.0), ms.Parameter("b", 0, -1, 1)])

    def rf(X: np.ndarray, p: ms.ParameterDict) -> np.ndarray:
        return np.asarray(X) - np.array([[0.02], [0.3]])

    ckpt = tmp_path / "g.npz"
    global_search(params, rf, o, checkpoint=ckpt)
    with pytest.raises(ValueError, match="settings must be the same"):
        global_search(params, rf, GlobalSearchOptions(budget=50), checkpoint=ckpt, resume=True)


def test_a_parameter_without_effect_at_the_best_candidate_does_not_lose_the_search(
    caplog,
) -> None:
    """``c`` acts only below 0.5 (a deadzone above every command): the search ends above,
    where its column is zero; the local fit goes on with a warning instead of raising."""

    def rf(X: np.ndarray, params: ms.ParameterDict) -> np.ndarray:
        a, c = np.asarray(X, dtype=np.float64)
        return np.stack([a - 3.0, 10.0 * np.maximum(0.5 - c, 0.0)])

    params = ms.ParameterDict([ms.Parameter("a", 0.0, -5, 5), ms.Parameter("c", 0.0, 0, 1)])
    options = FitOptions(global_search=GlobalSearchOptions(budget=120), horizons=None)
    with pytest.raises(ValueError, match="no effect on the residual"):
        above = ms.ParameterDict([ms.Parameter("a", 0, -5, 5), ms.Parameter("c", 0.8, 0, 1)])
        ms.optimize(above, rf, horizons=None)
    opt, res = fit_global(params, rf, options)
    assert opt["c"].value[0] >= 0.5
    np.testing.assert_allclose(res.x[0], 3.0, atol=1e-6)
    assert "no effect on the residual" in caplog.text

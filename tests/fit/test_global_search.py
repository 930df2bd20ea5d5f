"""Global search (CMA-ES before the local fit) and multi-start local fits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mjsysid as ms
from mjsysid.fit.options import FitOptions, GlobalSearchOptions
from mjsysid.fit.search import (
    GenerationInfo,
    fit_global,
    global_checkpoint_path,
    global_search,
    latin_hypercube,
    multistart,
)

pytest.importorskip("cmaes")


class Rippled:
    """``r(a, b) = [a − 3, b + 1, sin 2πa, sin 2πb]``: the truth (3, −1) has cost 0,
    and a local minimum lies near every pair of integers (a wrong basin next to any start).
    Implements the batched protocol ``rf(X, params)``, ``(p, k) -> (n, k)``, and records
    the shape of every call."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, X: np.ndarray, params: ms.ParameterDict) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        flat = X.ndim == 1
        X2 = X[:, None] if flat else X
        self.calls.append(X2.shape[1])
        a, b = X2
        r = np.stack([a - 3, b + 1, 1.0 * np.sin(2 * np.pi * a), 1.0 * np.sin(2 * np.pi * b)])
        return r[:, 0] if flat else r


def _opts(search: GlobalSearchOptions, **options: object) -> FitOptions:
    """The fit's options with ``search`` as its global stage, one horizon stage."""
    return FitOptions(global_search=search, horizons=None).replace(**options)


def rippled_params(a: float = 1.1, b: float = 0.9) -> ms.ParameterDict:
    return ms.ParameterDict([ms.Parameter("a", a, -5.0, 5.0), ms.Parameter("b", b, -5.0, 5.0)])


def test_local_fit_stalls_where_global_plus_local_reaches_the_truth() -> None:
    params, rf = rippled_params(), Rippled()
    _, local = ms.optimize(params, rf, horizons=None)
    assert np.linalg.norm(local.x - [3.0, -1.0]) > 1.0  # a wrong basin next to the start
    opt, result = fit_global(params, rf, _opts(GlobalSearchOptions(budget=600, seed=1)))
    np.testing.assert_allclose(result.x, [3.0, -1.0], atol=1e-6)
    np.testing.assert_allclose(opt.as_vector(), result.x)
    assert result.global_search is not None
    g = result.global_search.summary()
    assert g["stop_reason"] in ("spread", "budget", "cmaes")
    assert g["evaluations"] <= 600
    assert result.nfev > g["evaluations"]  # both stages
    assert result.initial_cost == pytest.approx(g["start_cost"])
    assert result.message.startswith("Global search (CMA-ES")
    assert params.as_vector().tolist() == [1.1, 0.9]  # the input is not modified


def test_each_generation_is_one_batched_call() -> None:
    rf = Rippled()
    seen: list[GenerationInfo] = []
    g = global_search(
        rippled_params(), rf, GlobalSearchOptions(population=9, budget=200), callback=seen.append
    )
    assert len(rf.calls) == g.generations == len(seen)
    assert rf.calls[0] == 9 + 1  # the nominal rides along in the first generation
    assert all(k == 9 for k in rf.calls[1:])
    assert sum(rf.calls) == g.evaluations <= 200
    assert [i.generation for i in seen] == list(range(1, g.generations + 1))
    assert seen[-1].best_cost == g.cost == g.history["best_cost"][-1]
    assert np.all(np.diff(g.history["best_cost"]) <= 0)
    assert g.start_cost == pytest.approx(0.5 * float(np.sum(Rippled()([1.1, 0.9], None) ** 2)))


def test_defaults_follow_the_parameter_count() -> None:
    o = GlobalSearchOptions()
    assert o.population_for(2) == 6 and o.population_for(10) == 10
    assert o.budget_for(2) == 400 and o.budget_for(20) == 2000
    assert o.sigma0() == 0.3


def test_spread_collapse_stops_the_search() -> None:
    g = global_search(rippled_params(), Rippled(), GlobalSearchOptions(budget=20_000))
    assert g.stop_reason == "spread"
    assert g.history["spread"][-1] < 1e-3
    assert g.evaluations < 20_000


def test_diverged_candidates_cost_inf() -> None:
    def rf(X: np.ndarray, params: ms.ParameterDict) -> np.ndarray:
        R = Rippled()(X, params)
        return np.where(np.asarray(X)[0] > 4.0, np.nan, R)  # "diverges" for a > 4

    g = global_search(rippled_params(), rf, GlobalSearchOptions(budget=300))
    assert np.isfinite(g.cost) and g.x[0] <= 4.0


def test_candidates_stay_within_the_bounds() -> None:
    box: list[np.ndarray] = []

    def rf(X: np.ndarray, params: ms.ParameterDict) -> np.ndarray:
        box.append(np.asarray(X))
        return Rippled()(X, params)

    params = ms.ParameterDict([ms.Parameter("a", 4.9, 2.0, 5.0), ms.Parameter("b", 0.0, -5, 5)])
    global_search(params, rf, GlobalSearchOptions(budget=200, sigma=1.0))
    X = np.concatenate(box, axis=1)
    assert X[0].min() >= 2.0 and X[0].max() <= 5.0


def test_resume_from_a_checkpoint_gives_the_same_result(tmp_path) -> None:
    options = GlobalSearchOptions(budget=300, seed=3)
    whole = global_search(rippled_params(), Rippled(), options)
    ckpt = tmp_path / "g.npz"

    def stop_at_5(info: GenerationInfo) -> None:
        if info.generation == 5:
            raise KeyboardInterrupt

    cut = global_search(rippled_params(), Rippled(), options, callback=stop_at_5, checkpoint=ckpt)
    assert cut.stop_reason == "interrupted" and cut.generations == 5
    rf = Rippled()
    resumed = global_search(rippled_params(), rf, options, checkpoint=ckpt, resume=True)
    assert len(rf.calls) == whole.generations - 5
    assert resumed.generations == whole.generations
    assert resumed.evaluations == whole.evaluations
    assert resumed.stop_reason == whole.stop_reason
    np.testing.assert_array_equal(resumed.x, whole.x)
    for key in whole.history:
        np.testing.assert_array_equal(resumed.history[key], whole.history[key])
    rf_done = Rippled()  # a finished search is returned without evaluating anything
    again = global_search(rippled_params(), rf_done, options, checkpoint=ckpt, resume=True)
    assert rf_done.calls == [] and again.cost == whole.cost


def test_checkpoint_of_other_settings_is_refused(tmp_path) -> None:
    ckpt = tmp_path / "g.npz"
    global_search(rippled_params(), Rippled(), GlobalSearchOptions(budget=50), checkpoint=ckpt)
    with pytest.raises(ValueError, match="settings must be the same as this run's"):
        global_search(
            rippled_params(),
            Rippled(),
            GlobalSearchOptions(budget=60),
            checkpoint=ckpt,
            resume=True,
        )


def test_fit_global_resumes_both_stages(tmp_path) -> None:
    ckpt = tmp_path / "fit.npz"
    options = GlobalSearchOptions(budget=300, seed=1)
    _, first = fit_global(rippled_params(), Rippled(), _opts(options, checkpoint=ckpt))
    assert global_checkpoint_path(ckpt).name == "fit.global.npz"
    assert global_checkpoint_path(ckpt).exists() and ckpt.exists()
    rf = Rippled()
    _, again = fit_global(rippled_params(), rf, _opts(options, checkpoint=ckpt, resume=True))
    np.testing.assert_allclose(again.x, first.x, atol=1e-9)
    assert again.global_search is not None and first.global_search is not None
    assert again.global_search.generations == first.global_search.generations


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "nelder"}, r"global_search: method must be one of \['cmaes'\]"),
        ({"population": 1}, "global_search: population must be an integer >= 2"),
        ({"population": 2.5}, "global_search: population must be a positive integer"),
        ({"budget": 0}, "global_search: budget must be a positive integer"),
        ({"sigma": 0.0}, r"global_search: sigma must be a fraction of the box in \(0, 1\]"),
        ({"sigma": 2.0}, r"global_search: sigma must be a fraction of the box in \(0, 1\]"),
        ({"seed": -1}, "global_search: seed must be an integer >= 0"),
        ({"tol_spread": 1.0}, r"global_search: tol_spread must be a number in \[0, 1\)"),
    ],
)
def test_bad_options_are_named(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        GlobalSearchOptions(**kwargs)


def test_from_mapping_reads_experiment_keys() -> None:
    o = GlobalSearchOptions.from_mapping({"global": "cmaes", "population": 12, "budget": 500})
    assert (o.population, o.budget) == (12, 500)
    with pytest.raises(ValueError, match="global_search options must be keys of"):
        GlobalSearchOptions.from_mapping({"global": "cmaes", "popsize": 12})


def test_bad_problems_are_named() -> None:
    unbounded = ms.ParameterDict([ms.Parameter("a", 1.0, -np.inf, 5.0)])
    with pytest.raises(ValueError, match="global search: a must have finite bounds"):
        global_search(unbounded, Rippled())
    with pytest.raises(ValueError, match="global_search: budget must be at least one generation"):
        global_search(rippled_params(), Rippled(), GlobalSearchOptions(budget=3))
    with pytest.raises(ValueError, match="checkpoint must be a path when resume=True"):
        global_search(rippled_params(), Rippled(), resume=True)


class TwoBasins:
    """``r(a, b) = [a² − 1, 0.1·(a − 1), b − 0.5]``: basins at ``a = 1`` (cost 0) and near
    ``a = −1`` (cost ≈ 0.02), ``b = 0.5`` in both."""

    def __call__(self, X: np.ndarray, params: ms.ParameterDict) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        flat = X.ndim == 1
        X2 = X[:, None] if flat else X
        a, b = X2
        r = np.stack([a * a - 1, 0.1 * (a - 1), b - 0.5])
        return r[:, 0] if flat else r


def test_multistart_counts_the_starts_in_the_best_basin() -> None:
    params = ms.ParameterDict([ms.Parameter("a", -1.5, -3.0, 3.0), ms.Parameter("b", 0.0, -2, 2)])
    opt, result = multistart(
        params, TwoBasins(), FitOptions(starts=10, starts_seed=4, horizons=None)
    )
    assert result.multistart is not None
    s = result.multistart.summary()
    assert s["starts"] == 10 and len(s["final_costs"]) == 10
    np.testing.assert_allclose(result.x, [1.0, 0.5], atol=1e-6)
    np.testing.assert_array_equal(opt.as_vector(), result.x)
    x0_a = np.array([rec["x0"][0] for rec in s["records"]])
    assert s["records"][0]["nominal"] and x0_a[0] == -1.5
    assert s["reached"] == [int(j) for j in np.flatnonzero(x0_a > 0.05)]  # right of the ridge
    assert s["n_reached"] == len(s["reached"]) >= 2
    assert s["spread"]["a"]["max"] - s["spread"]["a"]["min"] < 1e-6
    assert s["spread"]["b"]["std"] < 1e-6
    assert result.nfev == s["evaluations"] >= 10
    assert result.message.startswith(f"Multi-start: {s['n_reached']} of 10 starts")


def test_latin_hypercube_fills_every_stratum() -> None:
    lo, hi = np.array([0.0, -1.0]), np.array([1.0, 1.0])
    X = latin_hypercube(lo, hi, 8, np.random.default_rng(0))
    assert X.shape == (2, 8)
    for k in range(2):
        strata = np.floor((X[k] - lo[k]) / (hi[k] - lo[k]) * 8).astype(int)
        assert sorted(strata) == list(range(8))


def test_multistart_skips_diverged_starts() -> None:
    def rf(X: np.ndarray, params: ms.ParameterDict) -> np.ndarray:
        R = TwoBasins()(X, params)
        return np.where(np.asarray(X)[0] < -2.0, np.nan, R)

    params = ms.ParameterDict([ms.Parameter("a", 0.5, -3.0, 3.0), ms.Parameter("b", 0.0, -2, 2)])
    _, result = multistart(params, rf, FitOptions(starts=12, horizons=None))
    assert result.multistart is not None
    statuses = [r.status for r in result.multistart.starts]
    assert "diverged_at_start" in statuses
    with pytest.raises(ValueError, match="starts must be a positive integer"):
        multistart(params, rf, FitOptions(starts=0))


def _motor(steps: int = 500) -> tuple[object, ms.ParameterDict, np.ndarray]:
    """The hobby DC motor (examples/dcmotor) with shaft friction, encoder only; returns the
    residual, the start (deadband 0, friction and kv 3x high, gear 3x low) and the truth."""
    import mujoco

    from mjsysid.data.excitation import multisine

    xml = Path(ms.__file__).parent / "examples" / "dcmotor" / "dcmotor.xml"
    text = xml.read_text().replace('damping="0.002"', 'damping="0.002" frictionloss="0.001"')
    spec = mujoco.MjSpec.from_string(text)
    model = spec.compile()

    def at(values: list[float]) -> ms.ParameterDict:
        d = ms.ParameterDict(
            [
                ms.Parameter("deadband", 0.1, 0.0, 0.5),
                ms.make_parameter("joint_frictionloss", model, "shaft", max_value=0.02),
                ms.make_parameter("actuator_kv", model, "motor", max_value=0.02),
                ms.make_parameter("actuator_gear", model, "motor", min_value=0.1, max_value=5.0),
            ]
        )
        d.update_from_vector(values)
        return d

    truth = np.array([0.15, 0.004, 0.003, 1.0])
    driver = ms.ControlTransform().deadband("motor", "deadband")
    duty = 0.6 * multisine(steps // 10, 1, 0.02, amplitude=1.0, f0=0.2, f1=3.0, seed=7)
    duty = np.repeat(duty, 10, axis=0)
    x0 = ms.create_initial_state(model)
    true_model = ms.apply_param_modifiers(at(list(truth)), spec)
    (traj,) = ms.sysid_rollout(true_model, None, driver.apply(at(list(truth)), duty, model), x0)
    seqs = ms.ModelSequences(
        "motor",
        spec,
        ["run"],
        [x0],
        [ms.TimeSeries.from_control_names(traj.times, duty, model)],
        [ms.TimeSeries.from_names(traj.times, traj.sensordata, model)],
    )
    rf = ms.build_residual_fn([seqs], control_transform=driver)
    return rf, at([0.0, 0.012, 0.009, 1.0 / 3.0]), truth


def test_motor_with_deadband_and_friction_started_3x_off() -> None:
    rf, start, truth = _motor()
    _, local = ms.optimize(start, rf, allow_no_effect=True)
    assert np.max(np.abs(local.x - truth) / truth) > 0.1  # LM ends in a wrong basin
    opts = FitOptions(global_search=GlobalSearchOptions(budget=400), allow_no_effect=True)
    _, result = fit_global(start, rf, opts)
    np.testing.assert_allclose(result.x, truth, rtol=1e-5)
    rf.close()


def test_multistart_keeps_one_checkpoint_per_start(tmp_path) -> None:
    from mjsysid.fit.search import start_checkpoint_path

    params = ms.ParameterDict([ms.Parameter("a", -1.5, -3.0, 3.0), ms.Parameter("b", 0.0, -2, 2)])
    ckpt = tmp_path / "fit.npz"
    opts = FitOptions(starts=3, checkpoint=ckpt, horizons=None)
    _, first = multistart(params, TwoBasins(), opts)
    assert start_checkpoint_path(ckpt, 2).name == "fit.start2.npz"
    assert all(start_checkpoint_path(ckpt, j).exists() for j in range(3))
    _, again = multistart(params, TwoBasins(), opts.replace(resume=True))
    np.testing.assert_allclose(again.x, first.x, atol=1e-9)


def test_fit_with_search_dispatches() -> None:
    from mjsysid.fit.search import fit_with_search

    search = {"global": "cmaes", "budget": 300, "seed": 1}
    _, g = fit_with_search(
        rippled_params(), Rippled(), FitOptions(global_search=search, horizons=None)
    )
    np.testing.assert_allclose(g.x, [3.0, -1.0], atol=1e-6)
    assert g.global_search is not None and g.multistart is None
    params = ms.ParameterDict([ms.Parameter("a", -1.5, -3.0, 3.0), ms.Parameter("b", 0.0, -2, 2)])
    _, m = fit_with_search(params, TwoBasins(), FitOptions(starts=4, horizons=None))
    assert m.multistart is not None and len(m.multistart.starts) == 4
    _, plain = fit_with_search(params, TwoBasins(), FitOptions(horizons=None))
    assert plain.global_search is None and plain.multistart is None
    with pytest.raises(ValueError, match="global_search and starts must be one or the other"):
        FitOptions(global_search="cmaes", starts=4)
    with pytest.raises(TypeError, match="global_search must be a GlobalSearchOptions"):
        FitOptions(global_search=3)


def test_fit_global_interrupted_in_the_global_stage(tmp_path) -> None:
    def stop_at_3(info: GenerationInfo) -> None:
        if info.generation == 3:
            raise KeyboardInterrupt

    ckpt = tmp_path / "fit.npz"
    options = GlobalSearchOptions(budget=300, seed=1)
    _, cut = fit_global(
        rippled_params(),
        Rippled(),
        FitOptions(global_search=options, checkpoint=ckpt),
        global_callback=stop_at_3,
    )
    assert cut.status == "interrupted" and not cut.success and cut.nit == 0
    assert cut.global_search is not None and cut.global_search.generations == 3
    assert not ckpt.exists()  # the local stage never started
    _, done = fit_global(rippled_params(), Rippled(), _opts(options, checkpoint=ckpt, resume=True))
    np.testing.assert_allclose(done.x, [3.0, -1.0], atol=1e-6)


def test_optimize_takes_the_outer_stages_as_keywords() -> None:
    """``optimize(..., global_search=...)`` and ``optimize(..., starts=...)`` are
    :func:`fit_global` and :func:`multistart` (same numbers)."""
    params = rippled_params()
    options = GlobalSearchOptions(budget=200, seed=1)
    via = ms.optimize(params, Rippled(), global_search=options, horizons=None, max_iters=30)[1]
    direct = fit_global(params, Rippled(), _opts(options, max_iters=30))[1]
    np.testing.assert_array_equal(via.x, direct.x)
    assert via.global_search is not None and direct.global_search is not None
    assert via.global_search.evaluations == direct.global_search.evaluations
    starts = ms.optimize(params, Rippled(), starts=3, horizons=None, max_iters=30)[1]
    assert starts.multistart is not None and len(starts.multistart.starts) == 3
    with pytest.raises(ValueError, match="global_search and starts must be one or the other"):
        ms.optimize(params, Rippled(), global_search="cmaes", starts=3)


def _example_copy(tmp_path: Path, optimizer: str) -> Path:
    from mjsysid.app.experiment import resolve_experiment_path

    src = resolve_experiment_path("example:arm")
    for f in src.parent.iterdir():
        if f.is_file():
            (tmp_path / f.name).write_bytes(f.read_bytes())
    text = src.read_text().split("\noptimizer:")[0]  # the optimizer section is the last
    path = tmp_path / "exp.yaml"
    path.write_text(text + f"\noptimizer: {optimizer}\n")
    return path


def test_experiment_optimizer_global_and_starts(tmp_path: Path) -> None:
    from mjsysid.app.experiment import ExperimentError, load_experiment

    exp = load_experiment(_example_copy(tmp_path, "{global: cmaes, budget: 50, seed: 2}"))
    assert exp.search == {"global_search": {"global": "cmaes", "budget": 50, "seed": 2}}
    assert load_experiment(_example_copy(tmp_path, "{starts: 3}")).search == {"starts": 3}
    with pytest.raises(ExperimentError, match=r"optimizer\.starts must be a positive integer"):
        load_experiment(_example_copy(tmp_path, "{starts: 0}"))
    with pytest.raises(ExperimentError, match=r"optimizer\.starts must be given without global"):
        load_experiment(_example_copy(tmp_path, "{starts: 2, global: cmaes}"))
    with pytest.raises(ExperimentError, match=r"budget"):
        load_experiment(_example_copy(tmp_path, "{global: cmaes, budget: -1}"))
    linear = load_experiment(_example_copy(tmp_path, "{global: cmaes, scale: linear}"))
    assert linear.search == {"global_search": {"global": "cmaes", "scale": "linear"}}
    with pytest.raises(
        ExperimentError, match=r"optimizer\.scale must be one of \['auto', 'linear'\]"
    ):
        load_experiment(_example_copy(tmp_path, "{global: cmaes, scale: log}"))


def test_cli_fit_with_a_global_stage_and_with_starts(tmp_path: Path) -> None:
    import io

    import yaml

    from mjsysid.app.cli import main

    exp = _example_copy(tmp_path, "{max_iters: 20}")
    for flags, key in (
        (["--global", "cmaes", "--budget", "40"], "global"),
        (["--starts", "2"], "multistart"),
    ):
        out = tmp_path / key
        err = io.StringIO()
        code = main(["fit", str(exp), "--out", str(out), "--no-report", "-q", *flags],
                    stdout=io.StringIO(), stderr=err)  # fmt: skip
        assert code == 0, err.getvalue()
        run = yaml.safe_load((out / "run.yaml").read_text())
        assert "search" in run
    err = io.StringIO()
    assert main(["fit", str(exp), "--budget", "40"], stdout=io.StringIO(), stderr=err) == 1
    assert "add --global cmaes" in err.getvalue()

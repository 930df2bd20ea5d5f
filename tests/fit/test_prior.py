"""Issue #20: priors toward nominal (CAD) values. A free parameter with ``prior: {mean, std}``
makes the fit a MAP fit: the residual gains ``(x − mean)/std`` rows, the intervals include
the prior, and each parameter says whether the data or the prior determined it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

import mjsysid as ms
from conftest import ARM2_TRUE_MASSES, arm2_masses, arm2_truth, excitation, simulate
from mjsysid.app.experiment import ExperimentError, bundled_examples, load_experiment
from mjsysid.fit.confidence import compute_confidence, determined_by
from mjsysid.fit.intervals import calculate_intervals
from mjsysid.fit.prior import PriorHorizonResidual, PriorResidual, prior_rows, with_prior
from mjsysid.output.report.content import parameter_rows
from mjsysid.output.results import load_results, save_results
from mjsysid.params.prior import Prior

TRUE_MASSES = ARM2_TRUE_MASSES
SENSORS = ["j1_pos", "j2_pos", "j1_vel", "j2_vel"]


# -- the MuJoCo problem: two identifiable masses and one parameter without effect ---------
@pytest.fixture(scope="module")
def arm_data():
    spec, model, truth, x0 = arm2_truth()
    sens, control = simulate(
        spec, truth, excitation(300, model.nu, seed=0), x0, SENSORS, noise=0.01, seed=1
    )
    seqs = ms.ModelSequences("arm2", spec, ["s"], [x0], [control], [sens])
    return spec, model, seqs


def _with_ghost(spec, model, prior=None) -> ms.ParameterDict:
    """The two masses and ``ghost``, a parameter that changes nothing (no modifier)."""
    params = arm2_masses(spec, model)
    params.add(ms.Parameter("ghost", 0.0, -10.0, 10.0, prior=prior))
    return params


@pytest.fixture(scope="module")
def map_fit(arm_data):
    spec, model, seqs = arm_data
    params = _with_ghost(spec, model, prior={"mean": 0.3, "std": 0.05})
    params["link1_mass"].prior = {"std": 100.0}  # centred on the nominal, weak
    rf = ms.build_residual_fn([seqs])
    opt, res = ms.optimize(params, rf)
    return params, rf, opt, res


def test_prior_holds_an_unidentifiable_parameter_and_the_data_fit_the_rest(map_fit):
    _params, rf, opt, res = map_fit
    assert res.success
    conf = compute_confidence(res, rf, params=opt)
    # the parameter the data cannot see stays at its prior mean with the prior's interval
    assert opt["ghost"].value[0] == pytest.approx(0.3, abs=1e-9)
    assert conf.half_widths[2] == pytest.approx(1.96 * 0.05, rel=0.01)
    # the identifiable ones reach the truth (a weak prior on link1 changes nothing)
    assert np.allclose(res.x[:2], TRUE_MASSES, atol=0.02)
    assert np.all(np.abs(res.x[:2] - TRUE_MASSES) < 2 * conf.half_widths[:2])
    assert conf.determined_by == ["data", "data", "prior"]
    assert any("ghost is determined by its prior" in c for c in conf.caveats())
    assert conf.to_dict()["parameters"][2]["determined_by"] == "prior"


def test_the_result_records_the_prior_rows(map_fit):
    params, rf, _opt, res = map_fit
    n = rf(params.as_vector(), params).size
    assert res.fun.shape == (n + 2,) and res.jac.shape == (n + 2, 3)
    assert res.prior is not None and res.prior.to_dict() == {
        "columns": [0, 2],
        "mean": [1.0, 0.3],
        "std": [100.0, 0.05],
        "names": ["link1_mass", "ghost"],
    }
    # the prior rows of the Jacobian are diag(1/std) on their columns
    assert res.jac[n:, 2] == pytest.approx([0.0, 1 / 0.05], rel=1e-6)
    assert res.fun[-1] == pytest.approx(0.0, abs=1e-6)


def test_without_the_prior_the_parameter_without_effect_is_refused(arm_data):
    spec, model, seqs = arm_data
    rf = ms.build_residual_fn([seqs])
    with pytest.raises(ValueError, match=r"parameters \['ghost'\] have no effect"):
        ms.optimize(_with_ghost(spec, model), rf, max_iters=2)


def test_the_wrapper_keeps_horizons_groups_and_names(map_fit):
    params, rf, _, _ = map_fit
    fn = with_prior(rf, params)
    assert isinstance(fn, PriorHorizonResidual)
    assert with_prior(fn, params) is fn
    r = fn(params.as_vector(), params)
    n = r.size - 2
    groups = fn.signal_groups()
    assert groups.shape == (n + 2,)
    assert groups[-1] == groups[-2] and groups[-1] not in set(groups[:n].tolist())
    assert len(set(groups[:n].tolist())) == len(set(rf.signal_groups().tolist()))
    assert fn.describe_index(n + 1) == "the prior on ghost"
    assert fn.describe_index(0) == rf.describe_index(0)
    head = fn.head(0.3)
    assert isinstance(head, PriorHorizonResidual) and head.rows is fn.rows
    assert head(params.as_vector(), params).size < r.size
    # the head's residual is rows of the whole one's: the data's first samples, the prior rows
    X = params.as_vector()[:, None] * np.array([[1.0, 1.05]])
    rows = fn.head_rows(0.3)
    np.testing.assert_array_equal(head(X, params), fn(X, params)[rows])
    np.testing.assert_array_equal(rows[-2:], [n, n + 1])
    # the rest is the wrapped function's
    np.testing.assert_array_equal(fn.block_offsets, rf.block_offsets)
    assert fn.last_divergence == rf.last_divergence
    seen: list[object] = []
    rf.check_params, original = seen.append, rf.check_params  # type: ignore[method-assign]
    try:
        fn.check_params(params)
    finally:
        rf.check_params = original  # type: ignore[method-assign]
    assert seen == [params]


# -- a linear problem where only a sum is identifiable ---------------------------------------
T = np.linspace(0.0, 1.0, 400)


def _sum_residual(x: np.ndarray, params: ms.ParameterDict) -> np.ndarray:
    """``((a + b)·t − 0.07·t)/σ``: only the sum of the two entries is seen (exact data,
    weighted as for a noise ``σ = 1e-4``, so that the data outweigh the prior)."""
    X = x[:, None] if x.ndim == 1 else x
    r = 1e4 * ((X[0] + X[1])[None, :] * T[:, None] - 0.07 * T[:, None])
    return r[:, 0] if x.ndim == 1 else r


def test_prior_splits_a_sum_the_data_determine():
    params = ms.ParameterDict(
        [ms.Parameter("b", [0.02, 0.03], [0, 0], [1, 1], prior=([0.02, 0.03], 0.01))]
    )
    assert not isinstance(with_prior(_sum_residual, params), PriorHorizonResidual)
    opt, res = ms.optimize(params, _sum_residual)
    # the data fix the sum (0.07), the prior the difference (0.01, as its means)
    assert res.x == pytest.approx([0.03, 0.04], abs=1e-6)
    conf = compute_confidence(res, _sum_residual, params=opt)
    assert conf.half_widths == pytest.approx(1.96 * 0.01 / np.sqrt(2), rel=0.01)
    assert conf.determined_by == ["data and prior", "data and prior"]


# -- the intervals with prior rows -----------------------------------------------------------
def test_intervals_give_a_column_without_data_the_prior_interval():
    rng = np.random.default_rng(3)
    J = np.column_stack([rng.normal(size=500), np.zeros(500)])
    r = rng.normal(scale=0.1, size=500)
    Jp = np.vstack([J, [[0.0, 1 / 0.2]]])
    _cov, half = calculate_intervals(np.append(r, 0.0), Jp, prior_rows=1)
    # the data determine one parameter: 500 − 1 degrees of freedom, as without the other
    assert half[1] == pytest.approx(scipy_t(499) * 0.2, rel=1e-9)
    _plain_cov, plain_half = calculate_intervals(r, J[:, :1])
    assert half[0] == pytest.approx(plain_half[0], rel=1e-9)
    # the prior rows stay out of the noise estimate: a large prior residual changes nothing
    _, half_far = calculate_intervals(np.append(r, 30.0), Jp, prior_rows=1)
    assert half_far == pytest.approx(half)


def scipy_t(dof: float) -> float:
    import scipy.stats

    return float(scipy.stats.t.ppf(0.975, dof))


@pytest.mark.parametrize(
    ("value", "exc", "match"),
    [
        (True, TypeError, r"prior_rows must be an integer >= 0, got True"),
        (1.0, TypeError, r"prior_rows must be an integer >= 0, got 1\.0"),
        (-1, ValueError, r"prior_rows must be in \[0, 4\) \(some rows must be data\), got -1"),
        (4, ValueError, r"prior_rows must be in \[0, 4\)"),
    ],
)
def test_intervals_refuse_bad_prior_rows(value, exc, match):
    with pytest.raises(exc, match=match):
        calculate_intervals(np.zeros(4), np.eye(4)[:, :2], prior_rows=value)


def test_determined_by_compares_posterior_and_prior_variances():
    cov = np.diag([1e-6, 0.99, 0.5, 4.0])
    rows = prior_rows(
        ms.ParameterDict(
            [ms.Parameter(n, 0.0, -1, 1, prior=(0.0, 1.0)) for n in ("a", "b", "c")]
            + [ms.Parameter("d", 0.0, -1, 1)]
        )
    )
    half = np.array([0.1, 0.1, 0.1, np.inf])
    assert determined_by(half, cov, rows) == ["data", "prior", "data and prior", "none"]
    assert determined_by(half, cov, None) == ["data", "data", "data", "none"]


# -- Parameter.prior: checks and files --------------------------------------------------------
def test_parameter_prior_forms_and_defaults():
    p = ms.Parameter("m", [1.0, 2.0], [0, 0], [5, 5], prior={"std": 0.1})
    assert p.prior == Prior(np.array([1.0, 2.0]), np.array([0.1, 0.1]))  # mean: the nominal
    p.prior = ([0.5, 0.6], [0.1, 0.2])
    assert p.prior.mean.tolist() == [0.5, 0.6] and p.prior.std.tolist() == [0.1, 0.2]
    with pytest.raises(ValueError):
        p.prior.mean[0] = 3.0  # read-only
    assert p.copy().prior == p.prior
    p.prior = None
    assert p.prior is None and "prior" not in p.to_dict()


@pytest.mark.parametrize(
    ("prior", "match"),
    [
        ({"mean": 1.0, "std": 0.0}, r"parameter 'm': prior\.std must be finite and > 0"),
        ({"mean": 1.0, "std": -1.0}, r"prior\.std must be finite and > 0, got \[-1\.0, -1\.0\]"),
        ({"mean": float("nan"), "std": 1.0}, r"parameter 'm': prior\.mean must be finite"),
        ({"mean": [1, 2, 3], "std": 1.0}, r"prior\.mean must be a number or 2 numbers"),
        ({"mean": 1.0, "std": "0.1"}, r"prior\.std must be a number or a list of numbers"),
        ({"mean": 1.0, "std": True}, r"prior\.std must be a number or a list of numbers"),
        ({"mean": 1.0}, r"parameter 'm': prior needs a 'std'"),
        ({"mean": 1.0, "std": 1.0, "sd": 1}, r"prior has unknown keys \['sd'\]"),
        ("tight", r"parameter 'm': prior must be a Prior, a mapping \{mean, std\} or a pair"),
    ],
)
def test_parameter_prior_errors_are_named(prior, match):
    with pytest.raises(ValueError, match=match):
        ms.Parameter("m", [1.0, 2.0], [0, 0], [5, 5], prior=prior)


def test_prior_saves_and_loads(tmp_path: Path):
    params = ms.ParameterDict(
        [
            ms.Parameter("a", 1.0, 0.0, 2.0, prior=(0.9, 0.05)),
            ms.Parameter("b", [1.0, 2.0], [0, 0], [5, 5]),
        ]
    )
    params.save_to_disk(tmp_path / "p.yaml")
    saved = yaml.safe_load((tmp_path / "p.yaml").read_text())
    assert saved["schema_version"] == 1
    assert saved["parameters"][0]["prior"] == {"mean": [0.9], "std": [0.05]}
    assert "prior" not in saved["parameters"][1]
    loaded = ms.ParameterDict.load_from_disk(tmp_path / "p.yaml")
    assert loaded["a"].prior == params["a"].prior and loaded["b"].prior is None
    # a file written before priors existed loads as before
    del saved["parameters"][0]["prior"]
    (tmp_path / "old.yaml").write_text(yaml.safe_dump(saved))
    assert ms.ParameterDict.load_from_disk(tmp_path / "old.yaml")["a"].prior is None
    saved["parameters"][0]["prior"] = {"mean": 0.9, "std": -1}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(saved))
    with pytest.raises(ValueError, match=r"parameter 'a': prior\.std must be finite and > 0"):
        ms.ParameterDict.load_from_disk(tmp_path / "bad.yaml")


def test_results_and_report_say_what_determined_each_parameter(map_fit, arm_data, tmp_path):
    params, rf, opt, res = map_fit
    conf = compute_confidence(res, rf, params=opt)
    save_results(tmp_path / "out", [arm_data[2]], params, opt, res, rf, confidence=conf)
    back = load_results(tmp_path / "out")
    assert back.confidence.determined_by == ["data", "data", "prior"]
    assert back.result.prior is not None and res.prior is not None
    assert back.result.prior.to_dict() == res.prior.to_dict()
    assert back.opt_params["ghost"].prior == params["ghost"].prior
    again = compute_confidence(back.result, None, params=back.opt_params)
    assert again.determined_by == ["data", "data", "prior"]
    rows = parameter_rows(params, opt, conf)
    assert [r.determined_by for r in rows] == ["data", "data", "prior"]
    assert "set by prior" in rows[2].flags and "set by prior" not in rows[0].flags


# -- experiment files ------------------------------------------------------------------------
def _experiment(tmp_path: Path, **entry_changes) -> Path:
    """The bundled arm experiment with the first parameter entry changed."""
    base = bundled_examples()["arm"].parent
    exp = yaml.safe_load((base / "experiment.yaml").read_text())
    exp["model"] = str(base / "arm.xml")
    for s in exp["sequences"]:
        s["file"] = str(base / s["file"])
    exp["parameters"][0].update(entry_changes)
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(exp))
    return path


def test_experiment_file_priors(tmp_path: Path):
    exp = load_experiment(_experiment(tmp_path, prior={"mean": 0.4, "std": 0.05}))
    p = exp.params["link1_mass"]
    assert p.prior == Prior(np.array([0.4]), np.array([0.05]))
    exp = load_experiment(_experiment(tmp_path, prior={"std": 0.05}))
    assert exp.params["link1_mass"].prior.mean.tolist() == exp.params["link1_mass"].nominal.tolist()
    assert exp.params["link2_mass"].prior is None
    assert isinstance(with_prior(exp.build_residual_fn(), exp.params), PriorResidual)


@pytest.mark.parametrize(
    ("prior", "match"),
    [
        ({"mean": 0.4}, r"exp\.yaml: parameters\[0\]\.prior\.std is required"),
        (
            {"mean": 0.4, "sd": 0.1},
            r"parameters\[0\]\.prior has unknown keys \['sd'\].*did you mean 'std'",
        ),
        (
            {"std": -0.1},
            r"exp\.yaml: parameters\[0\]\.prior: parameter 'link1_mass': prior\.std must be "
            r"finite and > 0",
        ),
        ({"std": [0.1, 0.2]}, r"parameters\[0\]\.prior\.std must be 1 or 1 numbers"),
        ({"std": "small"}, r"parameters\[0\]\.prior\.std must be a number or a list of numbers"),
        (0.1, r"exp\.yaml: parameters\[0\]\.prior must be a mapping, got float 0\.1"),
    ],
)
def test_experiment_file_prior_errors_are_named(tmp_path: Path, prior, match):
    with pytest.raises(ExperimentError, match=match):
        load_experiment(_experiment(tmp_path, prior=prior))

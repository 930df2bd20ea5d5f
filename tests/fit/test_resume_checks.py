"""Resume that checks what it resumes (issue #30 item 4): a fingerprint of the inputs and
options in the checkpoint, the cost at its point evaluated again, its values validated, and
the totals of the runs before bound to it."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

import mjsysid as ms
from mjsysid.app.cli import main
from mjsysid.fit.checkpoints import (
    FitOrigin,
    fingerprint_changes,
    load_checkpoint,
    origin_path,
    read_origin,
    write_checkpoint,
    write_origin,
)

ARM = Path(ms.__file__).parent / "examples" / "arm"


def _arm(tmp_path: Path) -> Path:
    folder = tmp_path / "arm"
    shutil.copytree(ARM, folder)
    return folder / "experiment.yaml"


def _fit(exp: Path, out: Path, *argv: str) -> tuple[int, str]:
    err = io.StringIO()
    code = main(
        ["fit", str(exp), "--out", str(out), "--no-report", "-q", "--no-timing-check", *argv],
        stdout=io.StringIO(),
        stderr=err,
    )
    return code, err.getvalue()


def test_fingerprint_changes_are_named():
    then = {"option ftol": "0.0001", "input /d/run1.npz": "aa", "input /d/run2.npz": "bb"}
    now = {"option ftol": "1e-06", "input /d/run1.npz": "cc", "input /d/run3.npz": "dd"}
    assert fingerprint_changes(then, now) == [
        "input /d/run1.npz changed",
        "input /d/run2.npz removed",
        "input /d/run3.npz added",
        "option ftol 0.0001 -> 1e-06",
    ]
    assert fingerprint_changes(then, dict(then)) == []


def test_resume_refuses_a_changed_recording_and_option_and_names_them(tmp_path):
    exp = _arm(tmp_path)
    out = tmp_path / "out"
    assert _fit(exp, out, "--max-iters", "2")[0] == 0
    # the recording changes (another noise draw): the fit must not continue on it
    run = exp.parent / "run2.npz"
    z = dict(np.load(run))
    z["elbow_pos"] = z["elbow_pos"] + 1e-3
    np.savez(run, **z)
    code, err = _fit(exp, out, "--resume")
    assert code != 0
    assert f"input {run.resolve()} changed" in err
    assert "start afresh" in err
    # restored data, another option: refused too, the option named
    shutil.copy(ARM / "run2.npz", run)
    text = exp.read_text().replace("max_iters: 50", "max_iters: 50\n  ftol: 1.0e-6")
    exp.write_text(text)
    code, err = _fit(exp, out, "--resume")
    assert code != 0 and "option ftol 0.0001 -> 1e-06" in err
    # as it was: resumes
    exp.write_text(text.replace("\n  ftol: 1.0e-6", ""))
    code, err = _fit(exp, out, "--resume")
    assert code == 0, err
    assert "after 2 iterations" in err


def _line(n: int = 40) -> tuple[ms.ParameterDict, object, object]:
    t = np.linspace(0, 1, n)
    params = ms.ParameterDict([ms.Parameter("a", 0.0, -5, 5), ms.Parameter("b", 0.0, -5, 5)])

    def data(y):
        def fn(X, _params):
            X = np.asarray(X, dtype=float)
            return X[0][None, :] + t[:, None] * X[1][None, :] - y[:, None]

        return fn

    return params, data(1.0 + 2.0 * t), data(1.5 + 2.0 * t)


def test_resume_refuses_a_checkpoint_fitted_on_other_data(tmp_path):
    """Issue #30: --resume checked names only and continued a fit of other data (its
    results then showed that data's initial cost)."""
    params, fn, other = _line()
    ckpt = tmp_path / "ck.npz"
    ms.optimize(params, fn, horizons=None, max_iters=1, checkpoint=ckpt)
    with pytest.raises(ValueError, match=r"recorded the cost .* but the residual there now "
                       r"gives .*: the data or the model changed"):  # fmt: skip
        ms.optimize(params, other, horizons=None, checkpoint=ckpt, resume=True)
    _, res = ms.optimize(params, fn, horizons=None, checkpoint=ckpt, resume=True)
    assert res.success


def test_resume_refuses_other_options_and_inputs(tmp_path):
    params, fn, _ = _line()
    ckpt = tmp_path / "ck.npz"
    inputs = {"/data/run1.npz": "0" * 64}
    ms.optimize(params, fn, horizons=None, max_iters=1, checkpoint=ckpt, inputs=inputs)
    with pytest.raises(ValueError, match=r"option xtol 1e-08 -> 1e-06"):
        ms.optimize(params, fn, horizons=None, checkpoint=ckpt, resume=True, inputs=inputs,
                    xtol=1e-6)  # fmt: skip
    with pytest.raises(ValueError, match=r"input /data/run1.npz changed"):
        ms.optimize(params, fn, horizons=None, checkpoint=ckpt, resume=True,
                    inputs={"/data/run1.npz": "1" * 64})  # fmt: skip
    # a larger iteration limit is what a resume is for
    ms.optimize(params, fn, horizons=None, checkpoint=ckpt, resume=True, inputs=inputs,
                max_iters=300)  # fmt: skip


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("x", np.array([np.nan, 1.0]), r"x must be 2 finite numbers"),
        ("x", np.array([1.0]), r"x must be 2 finite numbers"),
        ("iteration", np.array(-3), r"iteration must be an integer >= 0"),
        ("horizon", np.array(1.5), r"horizon must be a fraction in \(0, 1\]"),
        ("cost", np.array(-1.0), r"cost must be a finite number >= 0"),
        ("parameter_names", np.array(["a", "c"]), r"must hold the same parameters"),
    ],
)
def test_checkpoint_values_are_validated(tmp_path, key, value, match):
    params, _, _ = _line()
    ckpt = tmp_path / "ck.npz"
    write_checkpoint(ckpt, np.zeros(2), 1.0, 3, ["a", "b"])
    z = dict(np.load(ckpt))
    z[key] = value
    np.savez(ckpt, **z)
    with pytest.raises(ValueError, match=match):
        load_checkpoint(ckpt, params)


def test_a_tampered_origin_is_not_used(tmp_path, caplog):
    ckpt = tmp_path / "checkpoint.npz"
    write_checkpoint(ckpt, np.zeros(2), 1.0, 3, ["a", "b"])
    write_origin(ckpt, FitOrigin(12.5, 40, 4, 1.5))
    assert read_origin(ckpt) == FitOrigin(12.5, 40, 4, 1.5)
    data = yaml.safe_load(origin_path(ckpt).read_text())
    data["initial_cost"] = 1e-9  # a better-looking start
    origin_path(ckpt).write_text(yaml.safe_dump(data))
    assert read_origin(ckpt) is None
    assert "does not belong to" in caplog.text
    # a valid origin of another checkpoint (the checkpoint changed since): not used either
    write_origin(ckpt, FitOrigin(12.5, 40, 4, 1.5))
    write_checkpoint(ckpt, np.ones(2), 0.5, 4, ["a", "b"])
    assert read_origin(ckpt) is None


def test_a_tampered_origin_is_not_copied_into_the_results(tmp_path):
    exp = _arm(tmp_path)
    out = tmp_path / "out"
    assert _fit(exp, out, "--max-iters", "2")[0] == 0
    first = yaml.safe_load((out / "result.yaml").read_text())
    origin = origin_path(out / "checkpoint.npz")
    data = yaml.safe_load(origin.read_text())
    data["initial_cost"], data["nfev"] = 1e-9, 123456789
    origin.write_text(yaml.safe_dump(data))
    code, err = _fit(exp, out, "--resume")
    assert code == 0, err
    resumed = yaml.safe_load((out / "result.yaml").read_text())
    assert resumed["initial_cost"] != 1e-9 and resumed["nfev"] < 123456789
    assert resumed["initial_cost"] <= first["initial_cost"]

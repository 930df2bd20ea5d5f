"""MuJoCo's log goes to the results folder, never to the user's working directory."""

from __future__ import annotations

import io
from pathlib import Path

import mujoco
import numpy as np

from mjsysid.app.cli import main
from mjsysid.app.commands.common import results_folder
from mjsysid.util.mujoco_log import MUJOCO_LOG

UNSTABLE = "<mujoco><worldbody><body><joint/><geom size='1'/></body></worldbody></mujoco>"


def _warn() -> None:
    """Makes MuJoCo log a warning (a NaN velocity: the simulation is unstable)."""
    model = mujoco.MjModel.from_xml_string(UNSTABLE)
    data = mujoco.MjData(model)
    data.qvel[0] = np.nan
    mujoco.mj_step(model, data)


def test_mujoco_warnings_go_to_the_results_folder(tmp_path: Path, monkeypatch):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    before = mujoco.MjLogConfig.get().logfile
    with results_folder(tmp_path / "res", io.StringIO()):
        _warn()
    assert mujoco.MjLogConfig.get().logfile == before  # restored
    assert list(cwd.iterdir()) == []
    assert "unstable" in (tmp_path / "res" / MUJOCO_LOG).read_text()


def test_a_model_that_fails_to_compile_leaves_the_working_directory_clean(
    tmp_path: Path, monkeypatch, capsys
):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (tmp_path / "bad.xml").write_text(
        "<mujoco><worldbody><geom type='mesh' mesh='nope'/></worldbody></mujoco>"
    )
    (tmp_path / "exp.yaml").write_text("model: bad.xml\nsequences: []\nparameters: []\n")
    monkeypatch.chdir(cwd)
    assert main(["fit", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "res")]) == 1
    assert "does not load" in capsys.readouterr().err
    assert list(cwd.iterdir()) == []


def test_a_fit_leaves_the_working_directory_clean(tmp_path: Path, monkeypatch):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    assert main(["fit", "example:box", "--out", str(tmp_path / "res"), "-q", "--no-report"]) == 0
    assert list(cwd.iterdir()) == []


def _warning_residual(X, params):
    """A residual whose evaluation makes MuJoCo log (as a diverging candidate does)."""
    _warn()
    x = np.asarray(X, dtype=float)
    return np.concatenate([x - 1.0, 0.5 * (x - 1.0) + 0.01], axis=0)


def test_a_python_fit_prints_nothing_of_mujoco_and_leaves_no_log_file(
    tmp_path: Path, monkeypatch, capfd, caplog
):
    """ms.optimize from Python: one summarising warning where MuJoCo printed a line per
    message (hundreds on the servo logs) and wrote MUJOCO_LOG.TXT into the working folder."""
    import mjsysid as ms

    monkeypatch.chdir(tmp_path)
    params = ms.ParameterDict([ms.Parameter("x", 0.0, -5.0, 5.0)])
    with caplog.at_level("WARNING", logger="mjsysid.util.mujoco_log"):
        _, res = ms.optimize(params, _warning_residual, horizons=None)
    np.testing.assert_allclose(res.x, [0.996], atol=1e-9)
    assert "unstable" not in capfd.readouterr().out
    assert list(tmp_path.iterdir()) == []
    (record,) = [r for r in caplog.records if r.name == "mjsysid.util.mujoco_log"]
    assert "MuJoCo logged" in record.getMessage() and "(not kept)" in record.getMessage()
    # the intervals' larger steps simulate candidates too
    from mjsysid.fit.confidence import compute_confidence

    compute_confidence(res, _warning_residual, params=params)  # (rough columns re-stepped)
    assert "unstable" not in capfd.readouterr().out and list(tmp_path.iterdir()) == []
    # inside the command line's block, the results folder keeps them and no second summary
    caplog.clear()
    with results_folder(tmp_path / "res", io.StringIO()):
        ms.optimize(params, _warning_residual, horizons=None)
    assert "unstable" in (tmp_path / "res" / MUJOCO_LOG).read_text()
    summaries = [r.getMessage() for r in caplog.records if r.name == "mjsysid.util.mujoco_log"]
    assert len(summaries) == 1 and "all of them in" in summaries[0]

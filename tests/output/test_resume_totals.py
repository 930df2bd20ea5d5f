"""After ``--resume`` the results count the whole fit, not only the resumed part."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import yaml

from mjsysid.app.cli import main


def _fit(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    code = main(
        ["fit", "example:arm", "--no-report", "-q", *argv], stdout=io.StringIO(), stderr=err
    )
    return code, err.getvalue()


def _summary(out: Path) -> dict:
    return yaml.safe_load((out / "result.yaml").read_text())


def test_resumed_results_count_from_the_first_start(tmp_path: Path):
    whole = tmp_path / "whole"
    assert _fit("--out", str(whole))[0] == 0
    out = tmp_path / "parts"
    assert _fit("--out", str(out), "--max-iters", "2")[0] == 0
    first = _summary(out)
    assert first["nit"] == 2
    code, err = _fit("--out", str(out), "--resume")
    assert code == 0, err
    assert "resuming from" in err and "after 2 iterations" in err
    resumed = _summary(out)
    np.testing.assert_allclose(resumed["initial_cost"], _summary(whole)["initial_cost"])
    np.testing.assert_allclose(resumed["initial_cost"], first["initial_cost"])
    assert resumed["nit"] > 2
    assert resumed["nfev"] > first["nfev"]
    assert resumed["wall_time"] >= first["wall_time"]


def test_resume_without_a_checkpoint_says_it_starts_afresh(tmp_path: Path):
    code, err = _fit("--out", str(tmp_path / "new"), "--resume")
    assert code == 0
    assert "note: --resume: there is no checkpoint" in err and "starting afresh" in err


def test_resumed_results_hold_the_whole_cost_trace(tmp_path: Path):
    """result.npz's objective (the report's cost trace) covers the iterations before the
    resume too: the fit's first costs, then the resumed ones."""
    whole = tmp_path / "whole"
    assert _fit("--out", str(whole), "--horizons", "none")[0] == 0
    out = tmp_path / "parts"
    assert _fit("--out", str(out), "--horizons", "none", "--max-iters", "2")[0] == 0
    first = np.load(out / "result.npz")["objective"]
    assert first.size == 3  # the start and 2 iterations
    assert _fit("--out", str(out), "--horizons", "none", "--resume")[0] == 0
    resumed = np.load(out / "result.npz")["objective"]
    reference = np.load(whole / "result.npz")["objective"]
    assert resumed.size == _summary(out)["nit"] + 1
    np.testing.assert_array_equal(resumed[:3], first)
    np.testing.assert_allclose(resumed[:3], reference[:3], rtol=1e-9)

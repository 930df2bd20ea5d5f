"""The parameter table `mjsysid fit` prints: half-widths, or a bootstrap's two ends."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

import mjsysid as ms
from mjsysid.app.commands.fit import table
from mjsysid.fit.confidence import Confidence

NOTE = "bootstrap: 40 draws over 8 blocks (sequences or windows) resampled with replacement"


def _inputs() -> tuple[SimpleNamespace, ms.ParameterDict]:
    params = ms.ParameterDict([ms.Parameter("a", 1.0, 0.0, 5.0), ms.Parameter("b", 1.0, 0.0, 5.0)])
    return SimpleNamespace(parameter_names=["a", "b"], x=np.array([2.0, 3.0])), params


def test_linearised_intervals_print_their_half_widths() -> None:
    result, params = _inputs()
    conf = Confidence(["a", "b"], result.x, np.array([0.5, np.inf]), np.eye(2), 0.05)
    lines = table(result, conf, params).splitlines()
    assert lines[0] == f"{'parameter':<28} {'initial':>12} {'identified':>12} {'± 95 %':>12}"
    assert lines[1] == f"{'a':<28} {1.0:12.6g} {2.0:12.6g} {0.5:12.4g}"
    assert lines[2].endswith("  unidentif.")


def test_bootstrap_intervals_print_their_ends_and_the_method() -> None:
    result, params = _inputs()
    conf = Confidence(
        ["a", "b"],
        result.x,
        np.array([0.5, 0.25]),
        np.eye(2),
        0.05,
        at_bound=np.array([0, 1]),
        notes=[NOTE],
        interval=np.array([[1.9, 2.5], [2.75, 3.1]]),
        method="bootstrap",
    )
    lines = table(result, conf, params).splitlines()
    assert lines[0].endswith(" 95 % block-bootstrap interval, 40 draws")
    assert lines[1] == f"{'a':<28} {1.0:12.6g} {2.0:12.6g} [1.9, 2.5]"
    assert lines[2].endswith(" [2.75, 3.1]  (at upper bound)")

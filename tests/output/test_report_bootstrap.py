"""The parameter table with bootstrap (asymmetric) intervals, and the method's label."""

from __future__ import annotations

import numpy as np

import mjsysid as ms
from mjsysid.fit.confidence import Confidence
from mjsysid.output.report.content import parameter_rows
from mjsysid.output.report.format import interval_method, table_rows

NOTE = (
    "bootstrap: 100 draws over 12 blocks (sequences or windows) resampled with replacement; "
    "percentile intervals"
)


def _params() -> tuple[ms.ParameterDict, ms.ParameterDict]:
    init = ms.ParameterDict([ms.Parameter("a", 1.0, 0.0, 5.0), ms.Parameter("b", 1.0, 0.0, 5.0)])
    final = init.copy()
    final.update_from_vector(np.array([2.0, 3.0]))
    return init, final


def _bootstrap() -> Confidence:
    return Confidence(
        ["a", "b"],
        np.array([2.0, 3.0]),
        np.array([0.5, np.inf]),
        np.diag([0.04, np.inf]),
        0.05,
        at_bound=np.zeros(2, int),
        notes=[NOTE],
        interval=np.array([[1.9, 2.5], [-np.inf, np.inf]]),
        method="bootstrap",
    )


def test_the_method_is_said_in_words() -> None:
    boot = _bootstrap()
    assert interval_method(boot) == "95 % block-bootstrap interval, 100 draws"
    linear = Confidence(["a"], np.ones(1), np.ones(1), np.eye(1), 0.1)
    assert interval_method(linear) == "90 % linearised interval"
    hac = Confidence(["a"], np.ones(1), np.ones(1), np.eye(1), 0.05, method="hac")
    assert interval_method(hac) == "95 % Newey-West (HAC) interval"
    assert interval_method(None) == ""
    unsaid = Confidence(["a"], np.ones(1), np.ones(1), np.eye(1), 0.05, method="bootstrap")
    assert interval_method(unsaid) == "95 % block-bootstrap interval"  # no note: no count


def test_a_bootstrap_interval_is_shown_as_it_is() -> None:
    init, final = _params()
    a, b = parameter_rows(init, final, _bootstrap())
    assert a.ends == (1.9, 2.5) and (a.ci_low, a.ci_high) == (1.9, 2.5)
    assert b.ends is None and not b.identifiable
    ra, rb = table_rows([a, b])
    assert ra["s"]["interval"] == "[1.9, 2.5]"  # not 2 ± 0.5
    assert ra["s"]["half_width"] == "−0.1 / +0.5"
    assert ra["v"]["half_width"] == repr(0.5) and ra["v"]["ci_low"] == repr(1.9)
    assert rb["s"]["interval"] == "(−∞, ∞)" and rb["s"]["half_width"] == "∞"


def test_a_linearised_interval_looks_as_before() -> None:
    init, final = _params()
    conf = Confidence(["a", "b"], np.array([2.0, 3.0]), np.array([0.5, 0.25]), np.eye(2), 0.05)
    a, b = parameter_rows(init, final, conf)
    assert a.ends is None and (a.ci_low, a.ci_high) == (1.5, 2.5)
    ra, rb = table_rows([a, b])
    assert ra["s"]["interval"] == "[1.5, 2.5]" and ra["s"]["half_width"] == "0.5"
    assert rb["s"]["interval"] == "[2.75, 3.25]" and rb["s"]["half_width"] == "0.25"

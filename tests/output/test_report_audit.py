"""The report's conditioning section names the weak combinations with the audit's words."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from conftest import linear_result
from mjsysid.output.report.sections import jacobian_diagnostics


def test_conditioning_directions_carry_the_audit_words() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(2, 100))
    summed = linear_result([1.0, 0.4, 1.5], np.zeros(100), np.stack([a, b, b], axis=1), "abc")
    (d,) = jacobian_diagnostics(summed, ["m1", "m2", "m3"])[1]
    assert d.meaning == "m3 and m2: only their sum is determined"
    assert d.describe().startswith("0.71·m3 − 0.71·m2 (m3 and m2: only their sum")
    # J columns m3·g and m2·g: a product (only m2·m3 matters)
    product = linear_result([1.0, 0.5, 2.0], np.zeros(100), np.stack([a, 2 * b, 0.5 * b], 1), "abc")
    (d,) = jacobian_diagnostics(product, ["m1", "m2", "m3"])[1]
    assert "only their product is determined" in d.meaning
    # a well-posed Jacobian: no directions, nothing named
    plain = linear_result([1.0, 1.0], np.zeros(100), np.stack([a, b], 1), "xy")
    assert jacobian_diagnostics(plain, ["x", "y"])[1] == []


# -- the audit section ---------------------------------------------------------------------------
def _result(jac: np.ndarray, x: list[float], rng: np.random.Generator) -> SimpleNamespace:
    fun = 0.01 * rng.normal(size=jac.shape[0])
    return SimpleNamespace(jac=jac, x=np.asarray(x), fun=fun)


class _Bounds:
    def __init__(self, lower: list[float], upper: list[float]) -> None:
        self.bounds = (np.asarray(lower), np.asarray(upper))

    def get_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return self.bounds


def _rows(names: str, hw: float = float("nan")) -> list:
    from mjsysid.output.report import ParameterRow

    return [
        ParameterRow(
            n, n, "joint_damping", 1, 1, 1, 0.1, 2.0, hw, 0, False, False, False, True, False
        )
        for n in names
    ]


def test_the_audit_section_names_a_sum_and_advises() -> None:
    from mjsysid.output.report.audit_section import audit_section, fit_audit, residual_noise
    from mjsysid.output.report.content import with_verdicts

    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(2, 200))
    res = _result(np.stack([a, b, b], axis=1), [1.0, 0.4, 1.5], rng)
    bounds = _Bounds([0.1, 0.1, 0.1], [2.0, 2.0, 2.0])  # equal ranges: J columns as given
    audit, reason = fit_audit(res, bounds, ["m1", "m2", "m3"], 0.05)
    assert reason == "" and audit is not None
    # without intervals the rows take the audit's verdicts; the section counts the rows'
    rows = with_verdicts(_rows(["m1", "m2", "m3"]), audit)
    assert [r.verdict for r in rows] == ["determined", "not determined", "not determined"]
    sec = audit_section(audit, reason, rows, 0.05)
    assert sec["summary"] == "1 of 3 parameters determined, 2 not determined"
    assert "The 3 singular values of the range-scaled Jacobian span" in sec["singular_words"]
    assert "1 lies below 0.001 of the largest: a direction" in sec["singular_words"]
    assert [c["text"] for c in sec["combinations"]] == ["m2 and m3: only their sum is determined"]
    assert any("freeze one of m2 and m3" in s for s in sec["advice"])
    sigma = np.sqrt(np.sum(res.fun**2) / (200 - 3))
    assert residual_noise(res.fun, 3) == pytest.approx(sigma)
    assert sec["noise"] == f"{sigma:.6g}"
    # with finite intervals narrower than the range, m2 and m3 are determined only jointly
    rows = with_verdicts(_rows(["m1", "m2", "m3"], 0.05), audit)
    assert [r.verdict for r in rows] == ["determined", "only jointly", "only jointly"]
    assert audit_section(audit, reason, rows, 0.05)["summary"] == (
        "1 of 3 parameters determined, 2 only jointly"
    )


def test_a_well_determined_fit_and_the_reasons_for_no_audit() -> None:
    from mjsysid.output.report.audit_section import (
        audit_section,
        fit_audit,
        singular_values_in_words,
    )
    from mjsysid.output.report.content import with_verdicts
    from mjsysid.util.limits import limits_set

    rng = np.random.default_rng(3)
    J = rng.normal(size=(100, 2))
    bounds = _Bounds([0.0, 0.0], [1.0, 1.0])
    audit, reason = fit_audit(_result(J, [0.5, 0.5], rng), bounds, ["x", "y"], 0.05)
    sec = audit_section(audit, reason, with_verdicts(_rows(["x", "y"]), audit), 0.05)
    assert sec["summary"] == "2 of 2 parameters determined"
    assert (
        sec["combinations"] == [] and "no direction is structurally lost" in (sec["singular_words"])
    )
    assert "ratio" not in sec["singular_words"]  # the page's one κ is the summary's
    no_jac = SimpleNamespace(jac=None, x=np.zeros(2), fun=np.zeros(3))
    assert fit_audit(no_jac, bounds, ["x", "y"], 0.05)[0] is None
    assert "no finite final Jacobian" in fit_audit(no_jac, bounds, ["x", "y"], 0.05)[1]
    with limits_set(max_heatmap_parameters=1):
        reason = fit_audit(_result(J, [0.5, 0.5], rng), bounds, ["x", "y"], 0.05)[1]
    assert "2 parameters exceed the limit max_heatmap_parameters=1" in reason
    bare = audit_section(None, reason, with_verdicts(_rows(["x"], 0.01)), 0.05)
    assert bare["reason"] == reason and bare["summary"] == "1 of 1 parameters determined"
    assert "Every singular value is 0" in singular_values_in_words(np.zeros(2))
    many = singular_values_in_words(np.logspace(0, -8, 30))
    assert "30 singular values" in many and "19 lie below 0.001" in many

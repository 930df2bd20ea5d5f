"""The report's conditioning section names the weak combinations with the audit's words."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from mjsysid.output.report.sections import jacobian_diagnostics


def test_conditioning_directions_carry_the_audit_words() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(2, 100))
    summed = SimpleNamespace(jac=np.stack([a, b, b], axis=1), x=np.array([1.0, 0.4, 1.5]))
    (d,) = jacobian_diagnostics(summed, ["m1", "m2", "m3"])[1]
    assert d.meaning == "m3 and m2: only their sum is determined"
    assert d.describe().startswith("0.71·m3 − 0.71·m2 (m3 and m2: only their sum")
    # J columns m3·g and m2·g: a product (only m2·m3 matters)
    product = SimpleNamespace(jac=np.stack([a, 2 * b, 0.5 * b], axis=1), x=[1.0, 0.5, 2.0])
    (d,) = jacobian_diagnostics(product, ["m1", "m2", "m3"])[1]
    assert "only their product is determined" in d.meaning
    # a well-posed Jacobian: no directions, nothing named
    assert jacobian_diagnostics(SimpleNamespace(jac=np.stack([a, b], 1)), ["x", "y"])[1] == []

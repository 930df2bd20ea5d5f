"""``bench/interval_coverage.py --problem deadzone``: the rotor's capture (the Furuta
document's motor model in a plain loop, integer PWM, the encoder's counts) and one draw's
intervals."""

from __future__ import annotations

import math

import numpy as np
from bench_import import load_bench_module

cov = load_bench_module("bench/interval_coverage.py", "bench_coverage")


def test_rotor_capture_is_integer_pwm_and_encoder_counts() -> None:
    pwm, angle = cov.rotor_capture(3, 2.0)
    assert pwm.dtype.kind == "i" and pwm.size == 100 and angle.size == 101
    counts = angle / (2 * math.pi / 1320)
    assert np.allclose(counts, np.round(counts), atol=1e-9)
    assert np.abs(angle).max() > 0.1  # the motor turns
    again, _ = cov.rotor_capture(3, 2.0)
    assert np.array_equal(pwm, again)


def test_a_draw_gives_each_deadzone_the_range_between_pwm_levels() -> None:
    case, hits = cov.deadzone_case(max_iters=5)
    _, conf, _ = case.fit(np.random.default_rng(0))
    for j in (0, 1):
        i = conf.names.index(f"motor_deadzone[{j}]")
        lo, hi = conf.ends()[i]
        assert np.isfinite([lo, hi]).all()
        assert np.allclose(np.array([lo, hi]) * 255, np.round(np.array([lo, hi]) * 255))
    assert len(hits["unwidened"]) == 1

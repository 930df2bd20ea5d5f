"""bench/truth/furuta_doc.py: the hobby project's Furuta pendulum as its document states it."""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml
from bench_import import ROOT, load_bench_module
from doc_robot_loader import check_robot_yaml, urdf_model

fd = load_bench_module("bench/truth/furuta_doc.py", "bench_truth_furuta_doc")
FIXTURE = Path(__file__).parent / "fixtures" / "rotary_cartpole"
TWO_PI_OVER_N = 2.0 * math.pi / 1320


# ── A second, slow implementation: scalar Python per substep, the document's branches ─────


def _transform_scalar(a: float, p: dict) -> float:
    if 0 <= a < p["motor_deadzone_pos"]:
        return 0.0
    if -p["motor_deadzone_neg"] < a < 0:
        return 0.0
    g_avg = (p["actuator_gear_pos"] + p["actuator_gear_neg"]) / 2.0
    if g_avg > 1e-8:
        g_dir = p["actuator_gear_pos"] if a >= 0 else p["actuator_gear_neg"]
        a *= g_dir / g_avg
    return a


def _force_scalar(w: float, c: float, p: dict) -> float:
    tau = 0.0
    if abs(w) > 1e-6:
        fl = p["motor_frictionloss_pos"] if w > 0 else p["motor_frictionloss_neg"]
        tau -= math.copysign(fl, w)
    tau -= (p["motor_damping_pos"] if w > 0 else p["motor_damping_neg"]) * w
    if p["viscous_quadratic"] > 0:
        tau -= p["viscous_quadratic"] * w * abs(w)
    if p["back_emf_gain"] > 0 and abs(c) > 1e-6:
        tau -= p["back_emf_gain"] * w * math.copysign(1.0, c)
    return max(-10.0, min(10.0, tau))


def _reference(p: dict, commands, safety: bool) -> dict[str, list]:
    model = fd.build_model(p)
    data = mujoco.MjData(model)
    lo, hi = -1.5708, 1.5708
    rows = {k: [] for k in ("pwm", "qm", "wm", "qp", "wp", "act", "ctrl_end", "ctrl")}

    def record(u, c):
        rows["pwm"].append(u)
        rows["ctrl"].append(c)
        rows["ctrl_end"].append(float(data.ctrl[0]))
        rows["qm"].append(float(data.qpos[0]))
        rows["wm"].append(float(data.qvel[0]))
        rows["qp"].append(float(data.qpos[1]))
        rows["wp"].append(float(data.qvel[1]))
        rows["act"].append(float(data.act[0]))

    mujoco.mj_forward(model, data)
    record(0, 0.0)
    for u in commands:
        u = int(u)
        seen = round(rows["qm"][-1] / TWO_PI_OVER_N) * TWO_PI_OVER_N
        if safety:
            ratio = seen / math.radians(90.0)
            if ratio > 0.9:
                u = -int(150 * (0.5 + 0.5 * min(1.0, (ratio - 0.9) / 0.1)))
            elif ratio < -0.9:
                u = int(150 * (0.5 + 0.5 * min(1.0, (-ratio - 0.9) / 0.1)))
            elif ratio > 0.7 and u > 0:
                u = -u
            elif ratio < -0.7 and u < 0:
                u = -u
        c = _transform_scalar(u / 255.0, p)
        data.ctrl[0] = c
        for _ in range(10):
            data.qfrc_applied[0] = _force_scalar(float(data.qvel[0]), float(data.ctrl[0]), p)
            q, cc = float(data.qpos[0]), float(data.ctrl[0])
            if (q >= hi and cc > 0) or (q <= lo and cc < 0):
                data.ctrl[0] = 0.0
            mujoco.mj_step(model, data)
        record(u, c)
    meas_m = [math.floor(q / TWO_PI_OVER_N + 0.5) * TWO_PI_OVER_N for q in rows["qm"]]
    meas_p = []
    for q in rows["qp"]:
        x = math.floor(q / TWO_PI_OVER_N + 0.5) * TWO_PI_OVER_N
        meas_p.append((x + math.pi) % (2.0 * math.pi) - math.pi)
    rows["motor_angle"] = meas_m
    rows["pendulum_angle"] = meas_p
    vel = [0.0]
    for i in range(1, len(meas_p)):
        vel.append((meas_p[i] - meas_p[i - 1]) / 0.02)
    rows["pendulum_vel"] = vel
    return rows


def _pulse(level: int, on: int = 10, off: int = 10) -> np.ndarray:
    return np.array([level] * on + [0] * off, dtype=np.int64)


def _run(u, **kw):
    kw.setdefault("safety_limit_deg", None)
    params = kw.pop("params", None)
    return fd.simulate(params, u, **kw)


# ── The model ──────────────────────────────────────────────────────────────────────────────


def test_mjcf_transcribes_the_urdf_as_mujocos_own_importer_reads_it():
    ours = fd.build_model()
    urdf = urdf_model(FIXTURE / "rotary_cartpole.urdf")
    for body in ("arm", "pendulum"):
        a, b = ours.body(body), urdf.body(body)
        np.testing.assert_allclose(a.mass, b.mass, rtol=1e-13)
        np.testing.assert_allclose(a.inertia, b.inertia, rtol=1e-12)
        np.testing.assert_allclose(a.ipos, b.ipos, rtol=0, atol=1e-15)
        assert min(np.abs(a.iquat - b.iquat).max(), np.abs(a.iquat + b.iquat).max()) < 1e-12
        np.testing.assert_allclose(a.pos, b.pos, rtol=0, atol=1e-15)
        np.testing.assert_allclose(a.quat, b.quat, rtol=0, atol=1e-15)
    for joint in ("motor_joint", "pendulum_joint"):
        a, b = ours.joint(joint), urdf.joint(joint)
        np.testing.assert_array_equal(a.axis, b.axis)
        np.testing.assert_array_equal(a.range, b.range)
        assert ours.jnt_limited[a.id] == urdf.jnt_limited[b.id]
    np.testing.assert_array_equal(ours.jnt_actfrcrange, urdf.jnt_actfrcrange)
    assert ours.opt.integrator == urdf.opt.integrator == mujoco.mjtIntegrator.mjINT_EULER


def test_the_documents_own_build_route_gives_the_same_plant():
    """robot.yaml + URDF through the document's loader (MJCF written with 6 digits) vs ours."""
    _, doc = check_robot_yaml(FIXTURE)
    ours = fd.build_model()
    assert doc.actuator_gear[0, 0] == ours.actuator_gear[0, 0] == 0.4246065
    assert doc.actuator_dyntype[0] == ours.actuator_dyntype[0] == mujoco.mjtDyn.mjDYN_FILTER
    np.testing.assert_array_equal(doc.actuator_dynprm[0, :1], ours.actuator_dynprm[0, :1])
    np.testing.assert_array_equal(doc.actuator_ctrlrange, ours.actuator_ctrlrange)
    for field in ("dof_damping", "dof_armature", "dof_frictionloss"):
        np.testing.assert_array_equal(getattr(doc, field), getattr(ours, field), err_msg=field)
    for body in ("arm", "pendulum"):
        np.testing.assert_allclose(doc.body(body).mass, ours.body(body).mass, rtol=1e-5)
        np.testing.assert_allclose(doc.body(body).inertia, ours.body(body).inertia, rtol=1e-5)

    doc.opt.timestep = fd.DT_PHYSICS
    u = fd.commands_for("prbs", 100, 3)
    p = fd.TRUE_PARAMS
    finals = []
    for model in (doc, ours):
        data = mujoco.MjData(model)
        for uk in u:
            data.ctrl[0] = float(fd.transform_ctrl(uk / 255, p))
            for _ in range(fd.SUBSTEPS):
                data.qfrc_applied[0] = fd.motor_force(data.qvel[0], data.ctrl[0], p)
                if fd.limit_switch_cut(data.qpos[0], data.ctrl[0], -1.5708, 1.5708):
                    data.ctrl[0] = 0.0
                mujoco.mj_step(model, data)
        finals.append(data.qpos.copy())
    np.testing.assert_allclose(finals[0], finals[1], rtol=0, atol=1e-4)


# ── Equivalence with the slow reference, determinism ───────────────────────────────────────


@pytest.mark.parametrize("kind", ["prbs", "chirp"])
def test_vectorised_simulator_matches_a_scalar_reference(kind):
    u = fd.commands_for(kind, 120, 7)
    fast = fd.simulate(None, u, seed=7)
    slow = _reference(dict(fd.TRUE_PARAMS), u, safety=True)
    assert (fast["pwm"] != np.r_[0, u]).any(), "the safety shaping should act in this run"
    pairs = {
        "pwm": "pwm",
        "true_motor_angle": "qm",
        "true_motor_vel": "wm",
        "true_pendulum_angle": "qp",
        "true_pendulum_vel": "wp",
        "act": "act",
        "ctrl": "ctrl",
        "ctrl_end": "ctrl_end",
        "motor_angle": "motor_angle",
        "pendulum_angle": "pendulum_angle",
        "pendulum_vel": "pendulum_vel",
    }
    for ours, ref in pairs.items():
        np.testing.assert_allclose(fast[ours], slow[ref], rtol=0, atol=1e-12, err_msg=ours)


def test_reference_agrees_when_the_limit_switch_fires():
    u = np.full(60, 150, dtype=np.int64)
    fast = _run(u)
    slow = _reference(dict(fd.TRUE_PARAMS), u, safety=False)
    assert fast["limit_cut"].any()
    for ours, ref in (("true_motor_angle", "qm"), ("ctrl_end", "ctrl_end"), ("act", "act")):
        np.testing.assert_allclose(fast[ours], slow[ref], rtol=0, atol=1e-12, err_msg=ours)


def test_simulation_is_deterministic_and_the_seed_matters():
    a = fd.simulate(None, fd.commands_for("prbs", 50, 1), seed=1)
    b = fd.simulate(None, fd.commands_for("prbs", 50, 1), seed=1)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    c = fd.simulate(None, fd.commands_for("prbs", 50, 2), seed=2)
    assert not np.array_equal(a["time"], c["time"])
    assert not np.array_equal(a["pwm"], c["pwm"])


# ── Each term of the motor model does what its equation says ──────────────────────────────


def test_transform_ctrl_hand_cases():
    p = fd.TRUE_PARAMS
    g_avg = (0.424182 + 0.425031) / 2.0
    a = np.array([0.0, 0.14, 0.1413, -0.078, -0.0781, 0.5, -0.5])
    expected = [0.0, 0.0, 0.1413 * (0.424182 / g_avg), 0.0, -0.0781 * (0.425031 / g_avg)]
    expected += [0.5 * (0.424182 / g_avg), -0.5 * (0.425031 / g_avg)]
    np.testing.assert_allclose(fd.transform_ctrl(a, p), expected, rtol=1e-15)


def test_motor_force_hand_cases():
    p = fd.params_with(viscous_quadratic=0.01, back_emf_gain=0.02)
    w = np.array([2.0, -2.0, 5e-7, 2.0, -3.0])
    c = np.array([0.3, 0.3, 0.3, 0.0, -0.3])
    expected = [
        -0.057328 - 0.002027 * 2 - 0.01 * 4 - 0.02 * 2,
        +0.053355 + 0.014665 * 2 + 0.01 * 4 + 0.02 * 2,  # ω < 0, ctrl > 0
        -0.002027 * 5e-7 - 0.01 * 5e-7 * 5e-7 - 0.02 * 5e-7,  # below the Coulomb gate
        -0.057328 - 0.002027 * 2 - 0.01 * 4,  # ctrl 0: no back-EMF
        +0.053355 + 0.014665 * 3 + 0.01 * 9 - 0.02 * 3,  # sgn(ctrl) = −1
    ]
    np.testing.assert_allclose(fd.motor_force(w, c, p), expected, rtol=1e-14)
    assert fd.motor_force(1e3, 0.0, fd.params_with(motor_damping_pos=1.0)) == -10.0
    assert fd.motor_force(-1e3, 0.0, fd.params_with(motor_damping_neg=1.0)) == 10.0


def test_deadzone_makes_small_commands_do_nothing_per_direction():
    """pwm 36/255 = 0.1412 < dz₊ = 0.141291 and −19/255 = −0.0745 > −dz₋: exactly the
    trajectory of no command; 37 and −20 are outside their deadzones and move the arm (−20
    barely: its 0.033 N·m is below the Coulomb friction once the arm moves)."""
    idle = _run(_pulse(0))
    for level in (36, -19):
        out = _run(_pulse(level))
        np.testing.assert_array_equal(out["true_motor_angle"], idle["true_motor_angle"])
        assert (out["ctrl"] == 0).all()
    for level in (37, -20):
        out = _run(_pulse(level))
        moved = np.abs(out["true_motor_angle"] - idle["true_motor_angle"]).max()
        assert moved > 2e-3, (level, moved)


def _peak_speed(out):
    return np.abs(out["true_motor_vel"]).max()


def _travel(out):
    return abs(out["true_motor_angle"][-1] - out["true_motor_angle"][0])


@pytest.mark.parametrize(
    ("name", "factor", "metric"),
    [
        ("motor_frictionloss_pos", 3.0, _travel),
        ("motor_damping_pos", 10.0, _peak_speed),
        ("viscous_quadratic", 20.0, _peak_speed),
        ("back_emf_gain", 5.0, _peak_speed),
        ("motor_armature", 3.0, _peak_speed),
        ("actuator_filter_tau", 10.0, _travel),
    ],
)
def test_a_larger_loss_term_moves_the_arm_less(name, factor, metric):
    u = _pulse(120, on=8, off=12)
    base = _run(u)
    more = _run(u, params=fd.params_with(**{name: fd.TRUE_PARAMS[name] * factor}))
    assert metric(more) < 0.9 * metric(base), (name, metric(more), metric(base))


def test_gear_per_direction():
    """MuJoCo's actuator has the mean gear; the transform scales ctrl so that the torque is
    each direction's own: with gears 0.5 / 0.3 the filter states (∝ torque) of +120 and −120
    are in the ratio 5 : 3 and the arm moves about twice as far up as down in two periods
    (drive minus Coulomb: (0.5·0.47 − 0.057) / (0.3·0.47 − 0.057)); with equal gears, as far.
    Travel is taken relative to the unforced run (the pendulum, not at rest at 0, nudges the
    arm)."""
    sym = {"motor_frictionloss_neg": 0.057328, "motor_damping_neg": 0.002027}
    sym |= {"motor_deadzone_neg": 0.141291}
    for g_pos, g_neg in ((0.5, 0.3), (0.4, 0.4)):
        p = fd.params_with(actuator_gear_pos=g_pos, actuator_gear_neg=g_neg, **sym)
        up, down, idle = (_run(_pulse(v, on=2, off=1), params=p) for v in (120, -120, 0))
        assert up["act"][1] / -down["act"][1] == pytest.approx(g_pos / g_neg, rel=1e-12)
        q_up, q_down, q_idle = (r["true_motor_angle"][2] for r in (up, down, idle))
        ratio = (q_up - q_idle) / (q_idle - q_down)
        if g_pos > g_neg:
            assert 1.8 < ratio < 2.6
        else:
            assert ratio == pytest.approx(1.0, abs=0.02)


def test_limit_switch_zeroes_ctrl_and_it_stays_zero_for_the_period():
    """Start past the upper limit, moving inward at 10 rad/s, with a +150 command: the switch
    cuts ctrl in the first substep; the joint is back inside the range after it, but ctrl stays
    0 for the rest of the period, so the filter state never leaves 0. The next period writes
    ctrl again (inside the range: no cut) and the actuator state rises."""
    out = _run(np.array([150, 150]), q0=(1.5708 + 0.004, 0.0), qd0=(-10.0, 0.0))
    assert out["limit_cut"][1] and out["ctrl"][1] > 0 and out["ctrl_end"][1] == 0.0
    assert out["act"][1] == 0.0
    assert out["true_motor_angle"][1] < 1.5708
    assert not out["limit_cut"][2] and out["ctrl_end"][2] == out["ctrl"][2] > 0
    assert out["act"][2] > 0


def test_limit_switch_keeps_the_arm_off_the_stop():
    u = np.full(60, 150, dtype=np.int64)
    on = _run(u)
    off = _run(u, limit_switch=False)
    assert on["limit_cut"].any() and not off["limit_cut"].any()
    assert (on["ctrl_end"][on["limit_cut"]] == 0).all()
    # at the stop, the switch lets the arm chatter on the limit instead of pressing into it
    beyond_on = (on["true_motor_angle"][-30:] - 1.5708).mean()
    beyond_off = (off["true_motor_angle"][-30:] - 1.5708).mean()
    assert beyond_off > 1e-3 and beyond_on < 0.5 * beyond_off


# ── Capture conventions, files, CLI ────────────────────────────────────────────────────────


def _read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], np.array(rows[1:], dtype=float)
    return header, {h: body[:, i] for i, h in enumerate(header)}


def test_capture_file_and_conventions(tmp_path):
    path = fd.make_capture(seed=4, duration=2.0, kind="prbs", out_dir=tmp_path)
    header, cols = _read_csv(path)
    assert tuple(header) == fd.MEASURED_COLUMNS
    assert len(cols["time"]) == 101
    assert cols["pwm"][0] == 0 and (cols["pwm"] == np.round(cols["pwm"])).all()
    assert np.abs(cols["pwm"]).max() <= 150
    np.testing.assert_allclose(cols["action"], cols["pwm"] / 255, rtol=1e-15)
    for name in ("motor_angle", "pendulum_angle"):
        counts = cols[name] / TWO_PI_OVER_N
        np.testing.assert_allclose(counts, np.round(counts), atol=1e-9)
    assert (cols["pendulum_angle"] >= -math.pi).all() and (cols["pendulum_angle"] < math.pi).all()
    dt = np.diff(cols["time"])
    np.testing.assert_allclose(cols["time"] * 1000, np.round(cols["time"] * 1000), atol=1e-6)
    assert (dt >= 0).all() and 0.018 < dt.mean() < 0.022 and dt.std() > 5e-4
    assert (np.diff(cols["firmware_ms"]) == 20).all()
    np.testing.assert_allclose(cols["motor_vel"][1:], np.diff(cols["motor_angle"]) / 0.02)
    _, truth = _read_csv(path.with_name(path.stem + "_truth.csv"))
    assert set(truth) == set(fd.TRUTH_COLUMNS)
    assert path.with_name(path.stem + "_meta.json").exists()

    # the logged PWM replayed open loop (no shaping) is the same run
    replay = _run(cols["pwm"][1:].astype(np.int64))
    np.testing.assert_array_equal(replay["true_motor_angle"], truth["true_motor_angle"])


def test_host_clock_jitter_is_realistic():
    t = fd.host_clock(np.random.default_rng(0), 5000)
    dt = np.diff(t)
    assert 0.0199 < dt.mean() < 0.0201
    assert 0.001 < dt.std() < 0.004
    assert dt.min() >= 0.0 and dt.max() < 0.040


def test_commands_are_integers_of_the_documents_amplitude():
    for kind in ("prbs", "multisine", "chirp"):
        u = fd.commands_for(kind, 1000, 0)
        assert u.dtype == np.int64 and 140 <= np.abs(u).max() <= 150, kind
    holds = np.diff(np.flatnonzero(np.diff(fd.commands_for("prbs", 2000, 0))))
    # holds of 50-300 ms end at the next 20 ms tick: 3-15 ticks (a longer one when the same
    # level happens to be drawn twice)
    assert holds.min() == 3 and np.percentile(holds, 95) <= 15
    with pytest.raises(ValueError, match="unknown kind"):
        fd.commands_for("square", 10, 0)


def test_cli_writes_a_capture(tmp_path):
    args = ["--out", str(tmp_path), "--duration", "0.4", "--kind", "chirp", "--seed", "3"]
    subprocess.run(
        [sys.executable, "-m", "bench.truth.furuta_doc", *args],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert (tmp_path / "furuta_doc_chirp_s3.csv").exists()


def test_encoder_resolution_is_hardware_yamls():
    enc = yaml.safe_load((FIXTURE / "hardware.yaml").read_text())["encoder"]
    assert fd.MOTOR_COUNTS_PER_REV == enc["ppr"] * enc["gear_ratio"] * 4 == 1320


def test_parameters_guesses_and_bounds():
    assert set(fd.INITIAL_GUESSES) == set(fd.TRUE_PARAMS) == set(fd.SEARCH_BOUNDS)
    for name, (lo, hi) in fd.SEARCH_BOUNDS.items():
        assert lo <= fd.INITIAL_GUESSES[name] <= hi, name
        assert lo <= fd.TRUE_PARAMS[name] <= hi, name
    assert fd.INITIAL_GUESSES["actuator_gear_pos"] < 0.2 * fd.TRUE_PARAMS["actuator_gear_pos"]
    with pytest.raises(KeyError, match="not parameters"):
        fd.params_with(gear=1.0)

"""The six benchmark problems of issue 6, with synthetic data from a known truth.

Every problem is built from an inline MJCF string that holds the *start* values (the "CAD"
model); the truth is the start perturbed by 20-40 % (deterministic seeds), and the measured data
is simulated from the truth. A problem is described by plain data (no mjsysid or peer objects),
so ``run.py`` can drive both tools from exactly the same numbers:

* ``spec()`` / ``model``: the start model,
* ``params``: one :class:`ParamDef` per parameter (kind, target, start, truth, bounds),
* ``sequences``: one :class:`SeqData` per recording (initial state, controls and measured
  signals on the simulation grid),
* ``signal``: sensor delay / gain / bias rules (problem 6).

Time convention of the data: row ``k`` of ``SeqData.sensordata`` is the sensor reading of the
state at ``t_k = t_0 + k·dt`` (what ``mujoco.rollout`` returns in row ``k``; controls row ``k``
act during step ``k``).

Parameter kinds (how both tools apply them):

=================  ==========  ================================================================
kind               target      effect
=================  ==========  ================================================================
body_mass          body        mass; rotational inertia scaled by m/m0 (ipos, axes unchanged)
body_pseudo        body        10-D log-Cholesky pseudo-inertia theta (Rucker & Wensing 2022)
joint_damping      joint       damping of the joint's dof
actuator_kp        actuator    position gain: gainprm[0] = kp, biasprm[1] = -kp
sensor_delay       pattern     prediction read at t - d (no model change)
sensor_gain        pattern     prediction multiplied by g (no model change)
sensor_bias        pattern     b added to the prediction (no model change)
=================  ==========  ================================================================
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import mujoco
import mujoco.rollout
import numpy as np

from mjsysid.params.inertia import inertial_from_theta, theta_from_inertial

PHYSICS_KINDS = ("body_mass", "body_pseudo", "joint_damping", "actuator_kp")
SIGNAL_KINDS = ("sensor_delay", "sensor_gain", "sensor_bias")


@dataclass
class ParamDef:
    """One identified quantity.

    Attributes:
      name: Parameter name (same for both tools).
      kind: One of ``PHYSICS_KINDS + SIGNAL_KINDS``.
      target: Element name, or an fnmatch sensor pattern for signal kinds.
      start, truth, lo, hi: ``(size,)`` arrays; ``lo <= start, truth <= hi``.
      err_scale: ``(size,)`` denominators of the relative error (default ``|truth|``).
    """

    name: str
    kind: str
    target: str
    start: np.ndarray
    truth: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    err_scale: np.ndarray | None = None

    def __post_init__(self) -> None:
        for f in ("start", "truth", "lo", "hi"):
            setattr(self, f, np.atleast_1d(np.asarray(getattr(self, f), dtype=np.float64)))
        if self.err_scale is None:
            self.err_scale = np.maximum(np.abs(self.truth), 1e-12)
        for f in ("start", "truth"):
            v = getattr(self, f)
            if np.any(v < self.lo) or np.any(v > self.hi):
                raise ValueError(f"{self.name}: {f} {v} must lie within [{self.lo}, {self.hi}]")


@dataclass
class SeqData:
    """One recording: ``x0 (nstate,)``, ``times (N,)``, ``ctrl (N, nu)``, ``sensordata (N, ns)``."""

    name: str
    x0: np.ndarray
    times: np.ndarray
    ctrl: np.ndarray
    sensordata: np.ndarray


@dataclass
class Problem:
    """A benchmark problem: start model, parameters, data, signal rules."""

    key: str
    title: str
    xml: str
    params: list[ParamDef]
    sequences: list[SeqData]
    signal: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, pattern, param)
    notes: str = ""

    def spec(self) -> mujoco.MjSpec:
        return mujoco.MjSpec.from_string(self.xml)

    @property
    def model(self) -> mujoco.MjModel:
        return self.spec().compile()

    @property
    def start(self) -> np.ndarray:
        return np.concatenate([p.start for p in self.params])

    @property
    def truth(self) -> np.ndarray:
        return np.concatenate([p.truth for p in self.params])

    @property
    def err_scale(self) -> np.ndarray:
        return np.concatenate([p.err_scale for p in self.params])

    @property
    def nparam(self) -> int:
        return int(self.start.size)

    @property
    def nphysics(self) -> int:
        return int(sum(p.start.size for p in self.params if p.kind in PHYSICS_KINDS))

    def max_rel_error(self, x: np.ndarray) -> float:
        """``max_i |x_i - truth_i| / err_scale_i``."""
        return float(np.max(np.abs(np.asarray(x) - self.truth) / self.err_scale))

    def as_tuple(self) -> tuple[mujoco.MjSpec, np.ndarray, list[SeqData], list[ParamDef]]:
        """``(spec, truth values, sequences data, parameter definitions)``."""
        return self.spec(), self.truth, self.sequences, self.params


# ----------------------------------------------------------------------------------------------
# Applying a parameter vector to a spec (reference path used to synthesise the data; both tools
# are checked to reproduce it: their residual at the truth must vanish).
# ----------------------------------------------------------------------------------------------
# The same maths as the package (the peer is driven with these values through plain lambdas).
inertia_from_theta = inertial_from_theta
theta_from_inertia = theta_from_inertial


def principal_axes(inertia_c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(principal moments (3,), quaternion (4,))`` with ``I = R diag(l) R^T``."""
    lam, V = np.linalg.eigh(0.5 * (inertia_c + inertia_c.T))
    if np.linalg.det(V) < 0:
        V[:, 2] = -V[:, 2]
    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, V.reshape(-1))
    return lam, q


def write_body_inertial(
    body: mujoco.MjsBody, mass: float, ipos: np.ndarray, inertia: np.ndarray, iquat: np.ndarray
) -> None:
    """Sets an explicit diagonal inertial (principal moments + axes) on a spec body."""
    body.explicitinertial = True
    body.mass = float(mass)
    body.ipos = [float(v) for v in ipos]
    body.inertia = [float(v) for v in inertia]
    body.iquat = [float(v) for v in iquat]
    body.fullinertia = [math.nan, 0.0, 0.0, 0.0, 0.0, 0.0]


def spec_setter(
    pdef: ParamDef, model0: mujoco.MjModel
) -> Callable[[mujoco.MjSpec, np.ndarray], None] | None:
    """A plain function ``set(spec, value)`` applying ``pdef`` to a spec (None: signal kinds).

    ``model0`` is the start model; nominal inertial data are read from it once.
    """
    t = pdef.target
    if pdef.kind == "body_mass":
        b = model0.body(t).id
        m0 = float(model0.body_mass[b])
        ipos0 = model0.body_ipos[b].copy()
        inertia0 = model0.body_inertia[b].copy()
        iquat0 = model0.body_iquat[b].copy()

        def set_mass(spec: mujoco.MjSpec, v: np.ndarray) -> None:
            write_body_inertial(spec.body(t), v[0], ipos0, inertia0 * (v[0] / m0), iquat0)

        return set_mass
    if pdef.kind == "body_pseudo":

        def set_pseudo(spec: mujoco.MjSpec, v: np.ndarray) -> None:
            m, c, ic = inertia_from_theta(v)
            lam, q = principal_axes(ic)
            write_body_inertial(spec.body(t), m, c, lam, q)

        return set_pseudo
    if pdef.kind == "joint_damping":

        def set_damping(spec: mujoco.MjSpec, v: np.ndarray) -> None:
            spec.joint(t).damping[0] = float(v[0])  # a 3-vector in MuJoCo 4

        return set_damping
    if pdef.kind == "actuator_kp":

        def set_kp(spec: mujoco.MjSpec, v: np.ndarray) -> None:
            act = spec.actuator(t)
            act.gainprm[0] = float(v[0])
            act.biasprm[1] = -float(v[0])

        return set_kp
    if pdef.kind in SIGNAL_KINDS:
        return None
    raise ValueError(f"unknown parameter kind {pdef.kind!r}")


def compile_with(xml: str, params: list[ParamDef], values: list[np.ndarray]) -> mujoco.MjModel:
    """Compiles the start model with every physics parameter set to ``values``."""
    spec = mujoco.MjSpec.from_string(xml)
    model0 = spec.compile()
    for p, v in zip(params, values, strict=True):
        setter = spec_setter(p, model0)
        if setter is not None:
            setter(spec, np.asarray(v, dtype=np.float64))
    return spec.compile()


# ----------------------------------------------------------------------------------------------
# Data synthesis
# ----------------------------------------------------------------------------------------------
def full_state(
    model: mujoco.MjModel, qpos: np.ndarray, qvel: np.ndarray | None = None
) -> np.ndarray:
    """Full-physics state vector (``mjSTATE_FULLPHYSICS``) at time 0."""
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    if qvel is not None:
        data.qvel[:] = qvel
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    x = np.empty(mujoco.mj_stateSize(model, spec.value))
    mujoco.mj_getState(model, data, x, spec.value)
    return x


def settled_state(
    model: mujoco.MjModel, qpos: np.ndarray, ctrl: np.ndarray, duration: float
) -> np.ndarray:
    """Full-physics state after holding ``ctrl`` for ``duration`` s from rest at ``qpos``.

    The clock is reset to 0: the state a recording of the robot standing would start from.
    """
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    data.ctrl[:] = ctrl
    mujoco.mj_step(model, data, nstep=round(duration / model.opt.timestep))
    data.time = 0.0
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    x = np.empty(mujoco.mj_stateSize(model, spec.value))
    mujoco.mj_getState(model, data, x, spec.value)
    return x


def simulate(model: mujoco.MjModel, x0: np.ndarray, ctrl: np.ndarray) -> np.ndarray:
    """``(N, nsensordata)`` sensor readings, row k at t_k (before step k)."""
    _, sens = mujoco.rollout.rollout(model, mujoco.MjData(model), x0[None], ctrl[None])
    if not np.all(np.isfinite(sens)):
        raise RuntimeError("the truth simulation diverged")
    return sens[0]


def piecewise_constant(
    rng: np.random.Generator,
    nstep: int,
    hold: int,
    scale: np.ndarray,
    offset: np.ndarray | None = None,
) -> np.ndarray:
    """Random steps held ``hold`` steps: ``(nstep, len(scale))``."""
    scale = np.asarray(scale, dtype=np.float64)
    k = -(-nstep // hold)
    u = np.repeat(rng.uniform(-1.0, 1.0, size=(k, scale.size)), hold, axis=0)[:nstep] * scale
    return u if offset is None else u + offset


def perturb(rng: np.random.Generator, start: np.ndarray) -> np.ndarray:
    """A truth such that ``start`` is 20-40 % off it: ``truth = start / (1 ± u)``."""
    u = rng.uniform(0.2, 0.4, size=np.shape(start))
    sign = rng.choice([-1.0, 1.0], size=np.shape(start))
    return np.asarray(start) / (1.0 + sign * u)


def make_sequences(
    model_true: mujoco.MjModel, x0s: list[np.ndarray], ctrls: list[np.ndarray], dt: float
) -> list[SeqData]:
    out = []
    for i, (x0, u) in enumerate(zip(x0s, ctrls, strict=True)):
        times = dt * np.arange(u.shape[0])
        out.append(
            SeqData(f"seq{i}", x0, times, np.ascontiguousarray(u), simulate(model_true, x0, u))
        )
    return out


# ----------------------------------------------------------------------------------------------
# Models (inline MJCF)
# ----------------------------------------------------------------------------------------------
ARM_AXES = ("0 0 1", "0 1 0", "1 0 0", "0 1 0")
ARM_MASSES = (1.2, 0.9, 0.7, 0.5)


def arm_xml(timestep: float = 0.002) -> str:
    """A 4-link spatial arm (hinges about z, y, x, y), torque motors, pos/vel sensors."""
    L = 0.25
    body = ""
    for i in reversed(range(4)):
        m = ARM_MASSES[i]
        ixx, iyy = 0.5 * m * 0.03**2, m * (L**2 / 12 + 0.03**2 / 4)
        pos = "0 0 1" if i == 0 else f"{L} 0 0"
        body = (
            f'<body name="link{i + 1}" pos="{pos}">'
            f'<joint name="j{i + 1}" type="hinge" axis="{ARM_AXES[i]}" damping="{0.3 - 0.05 * i}"/>'
            f'<inertial pos="{L / 2} 0 0" mass="{m}" diaginertia="{ixx:.6g} {iyy:.6g} {iyy:.6g}"/>'
            f'<geom type="capsule" fromto="0 0 0 {L} 0 0" size="0.03"/>'
            f"{body}</body>"
        )
    motors = "".join(f'<motor name="m{i + 1}" joint="j{i + 1}"/>' for i in range(4))
    sensors = "".join(f'<jointpos name="j{i + 1}_pos" joint="j{i + 1}"/>' for i in range(4))
    sensors += "".join(f'<jointvel name="j{i + 1}_vel" joint="j{i + 1}"/>' for i in range(4))
    return (
        f'<mujoco model="arm4"><option timestep="{timestep}" integrator="implicitfast"/>'
        '<default><geom contype="0" conaffinity="0"/></default>'
        f"<worldbody>{body}</worldbody><actuator>{motors}</actuator>"
        f"<sensor>{sensors}</sensor></mujoco>"
    )


LEGS = (("FL", 0.18, 0.1), ("FR", 0.18, -0.1), ("HL", -0.18, 0.1), ("HR", -0.18, -0.1))
STAND = np.array([0.4, -0.8] * 4)
AMP_HOLD = [0.15, 100]  # quadruped target steps: amplitude (rad), hold (steps)


def quadruped_xml(friction: bool, timestep: float = 0.002) -> str:
    """A 12-kg quadruped: free torso, 4 legs x (hip, knee), position actuators, feet on a floor.

    ``friction=False``: frictionless contacts (``condim=1``); else ``condim=3``, ``mu=1``.
    """
    contact = 'condim="3" friction="1 0.005 0.0001"' if friction else 'condim="1" friction="0 0 0"'
    legs = ""
    for name, x, y in LEGS:
        legs += (
            f'<body name="{name}_thigh" pos="{x} {y} 0">'
            f'<joint name="{name}_hip" axis="0 1 0" range="-1.2 1.2" damping="0.4"/>'
            '<inertial pos="0 0 -0.08" mass="0.6" diaginertia="0.0015 0.0015 0.0002"/>'
            '<geom type="capsule" fromto="0 0 0 0 0 -0.16" size="0.02"/>'
            f'<body name="{name}_shin" pos="0 0 -0.16">'
            f'<joint name="{name}_knee" axis="0 1 0" range="-2.2 0.3" damping="0.2"/>'
            '<inertial pos="0 0 -0.07" mass="0.3" diaginertia="0.0007 0.0007 0.0001"/>'
            '<geom type="capsule" fromto="0 0 0 0 0 -0.15" size="0.015"/>'
            f'<geom name="{name}_foot" type="sphere" pos="0 0 -0.15" size="0.02" contype="1" '
            f'conaffinity="1" {contact}/>'
            "</body></body>"
        )
    acts = "".join(
        f'<position name="{n}_{j}_act" joint="{n}_{j}" kp="{kp}" kv="0.5"/>'
        for n, _, _ in LEGS
        for j, kp in (("hip", 40), ("knee", 30))
    )
    sensors = "".join(
        f'<jointpos name="{n}_{j}_pos" joint="{n}_{j}"/>'
        for n, _, _ in LEGS
        for j in ("hip", "knee")
    )
    sensors += "".join(
        f'<jointvel name="{n}_{j}_vel" joint="{n}_{j}"/>'
        for n, _, _ in LEGS
        for j in ("hip", "knee")
    )
    sensors += (
        '<framepos name="torso_pos" objtype="body" objname="torso"/>'
        '<gyro name="torso_gyro" site="imu"/>'
    )
    return (
        f'<mujoco model="quadruped"><option timestep="{timestep}" integrator="implicitfast"/>'
        '<default><geom contype="0" conaffinity="0"/></default><worldbody>'
        f'<geom name="floor" type="plane" size="5 5 0.1" contype="1" conaffinity="1" {contact}/>'
        '<body name="torso" pos="0 0 0.31"><freejoint name="root"/>'
        '<inertial pos="0 0 0" mass="4" diaginertia="0.02 0.05 0.06"/>'
        '<geom type="box" size="0.2 0.1 0.04"/><site name="imu"/>'
        f"{legs}</body></worldbody><actuator>{acts}</actuator><sensor>{sensors}</sensor></mujoco>"
    )


LIMB_AXES = ("0 1 0", "1 0 0", "0 1 0", "0 0 1", "0 1 0", "1 0 0")


def octopus_xml(nlimb: int = 4, nlink: int = 6, timestep: float = 0.004) -> str:
    """A fixed torso with ``nlimb`` limbs of ``nlink`` hinged links each (``nlimb·nlink`` DoF)."""
    L = 0.12
    limbs = ""
    for a in range(nlimb):
        ang = 2 * math.pi * a / nlimb
        body = ""
        for k in reversed(range(nlink)):
            m = 0.5 * (0.8**k)
            ixx, iyy = 0.5 * m * 0.02**2, m * (L**2 / 12 + 0.02**2 / 4)
            pos = (
                f"{0.15 * math.cos(ang):.6g} {0.15 * math.sin(ang):.6g} 0" if k == 0 else f"{L} 0 0"
            )
            quat = f' quat="{math.cos(ang / 2):.6g} 0 0 {math.sin(ang / 2):.6g}"' if k == 0 else ""
            body = (
                f'<body name="l{a}_{k}" pos="{pos}"{quat}>'
                f'<joint name="l{a}_j{k}" axis="{LIMB_AXES[k % 6]}" '
                f'damping="{0.15 * 0.85**k:.4g}"/>'
                f'<inertial pos="{L / 2} 0 0" mass="{m:.4g}" '
                f'diaginertia="{ixx:.4g} {iyy:.4g} {iyy:.4g}"/>'
                f'<geom type="capsule" fromto="0 0 0 {L} 0 0" size="0.02"/>'
                f"{body}</body>"
            )
        limbs += body
    joints = [f"l{a}_j{k}" for a in range(nlimb) for k in range(nlink)]
    motors = "".join(f'<motor name="{j}_m" joint="{j}"/>' for j in joints)
    sensors = "".join(f'<jointpos name="{j}_pos" joint="{j}"/>' for j in joints)
    sensors += "".join(f'<jointvel name="{j}_vel" joint="{j}"/>' for j in joints)
    return (
        f'<mujoco model="octopus"><option timestep="{timestep}" integrator="implicitfast"/>'
        '<default><geom contype="0" conaffinity="0"/></default>'
        f'<worldbody><body name="torso" pos="0 0 1.5"><geom type="sphere" size="0.12"/>{limbs}'
        f"</body></worldbody><actuator>{motors}</actuator><sensor>{sensors}</sensor></mujoco>"
    )


# ----------------------------------------------------------------------------------------------
# Parameter helpers (bounds follow mjsysid's defaults, used for both tools)
# ----------------------------------------------------------------------------------------------
def _mass_def(model: mujoco.MjModel, body: str, truth: float) -> ParamDef:
    m0 = float(model.body(body).mass[0])
    return ParamDef(f"{body}_mass", "body_mass", body, [m0], [truth], [0.1 * m0], [10.0 * m0])


def _damping_def(model: mujoco.MjModel, joint: str, truth: float) -> ParamDef:
    d0 = float(model.dof_damping[model.joint(joint).dofadr[0]])
    return ParamDef(
        f"{joint}_damping", "joint_damping", joint, [d0], [truth], [0.0], [max(10.0 * d0, 1.0)]
    )


def _kp_def(model: mujoco.MjModel, act: str, truth: float) -> ParamDef:
    kp0 = float(model.actuator(act).gainprm[0])
    return ParamDef(f"{act}_kp", "actuator_kp", act, [kp0], [truth], [0.1 * kp0], [10.0 * kp0])


def _pseudo_def(model: mujoco.MjModel, body: str, rng: np.random.Generator) -> ParamDef:
    """Start = the model's inertia; truth = mass x(1.25-1.4), com shifted 1-2 cm, moments
    x(1.25-1.4) and principal axes turned by ~15 degrees. Bounds follow mjsysid's defaults
    (mass 0.1-10x, sizes within a factor 2, shears +-r, com +-5 cm)."""
    b = model.body(body).id
    m0 = float(model.body_mass[b])
    c0 = model.body_ipos[b].copy()
    R0 = np.empty(9)
    mujoco.mju_quat2Mat(R0, model.body_iquat[b])
    R0 = R0.reshape(3, 3)
    I0 = R0 @ np.diag(model.body_inertia[b]) @ R0.T
    theta0 = theta_from_inertia(m0, c0, I0)
    f = rng.uniform(1.25, 1.4)
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    q = np.zeros(4)
    mujoco.mju_axisAngle2Quat(q, axis, math.radians(15.0))
    Rq = np.empty(9)
    mujoco.mju_quat2Mat(Rq, q)
    Rq = Rq.reshape(3, 3)
    I1 = Rq @ (f * I0) @ Rq.T
    c1 = c0 + rng.choice([-1.0, 1.0], 3) * rng.uniform(0.01, 0.02, 3)
    theta1 = theta_from_inertia(f * m0, c1, I1)
    r = math.sqrt(np.trace(I0) / (2.0 * m0))
    margin = np.concatenate([[0.0], np.full(3, math.log(2.0)), np.full(3, r), np.full(3, 0.05)])
    lo, hi = theta0 - margin, theta0 + margin
    lo[0], hi[0] = theta0[0] + 0.5 * math.log(0.1), theta0[0] + 0.5 * math.log(10.0)
    # alpha and d_i are logs: an absolute error is a relative one; s_ij, t_i are lengths: scale
    # them by the radius of gyration (or the com distance, if larger).
    scale = np.concatenate([np.ones(4), np.full(3, r), np.maximum(np.abs(theta1[7:]), r)])
    return ParamDef(f"{body}_inertia", "body_pseudo", body, theta0, theta1, lo, hi, scale)


def _finish(
    key: str,
    title: str,
    xml: str,
    params: list[ParamDef],
    make_data: Callable[[mujoco.MjModel], tuple[list[np.ndarray], list[np.ndarray]]],
    signal: list[tuple[str, str, str]] | None = None,
    notes: str = "",
) -> Problem:
    model_true = compile_with(xml, params, [p.truth for p in params])
    x0s, ctrls = make_data(model_true)
    seqs = make_sequences(model_true, x0s, ctrls, float(model_true.opt.timestep))
    return Problem(key, title, xml, params, seqs, signal or [], notes)


# ----------------------------------------------------------------------------------------------
# The six problems
# ----------------------------------------------------------------------------------------------
def _arm_data(
    nseq: int, duration: float, seed: int
) -> Callable[[mujoco.MjModel], tuple[list[np.ndarray], list[np.ndarray]]]:
    def make(model: mujoco.MjModel) -> tuple[list[np.ndarray], list[np.ndarray]]:
        rng = np.random.default_rng(seed)
        n = round(duration / model.opt.timestep)
        x0s = [full_state(model, rng.uniform(-0.5, 0.5, model.nq)) for _ in range(nseq)]
        ctrls = [piecewise_constant(rng, n, 25, [6.0, 5.0, 2.0, 1.0]) for _ in range(nseq)]
        return x0s, ctrls

    return make


def problem1(duration: float = 1.0) -> Problem:
    """4-link arm, link masses (4 parameters, 1 sequence)."""
    rng = np.random.default_rng(1)
    xml = arm_xml()
    model = mujoco.MjModel.from_xml_string(xml)
    params = [
        _mass_def(model, f"link{i + 1}", float(perturb(rng, ARM_MASSES[i]))) for i in range(4)
    ]
    return _finish("p1", "4-link arm, link masses", xml, params, _arm_data(1, duration, 11))


def problem2(duration: float = 1.0) -> Problem:
    """The arm, full 10-D inertia of links 3 and 4 + 4 joint dampings (24 parameters, 2 seqs)."""
    rng = np.random.default_rng(2)
    xml = arm_xml()
    model = mujoco.MjModel.from_xml_string(xml)
    params = [_pseudo_def(model, "link3", rng), _pseudo_def(model, "link4", rng)]
    for i in range(4):
        d0 = float(model.dof_damping[i])
        params.append(_damping_def(model, f"j{i + 1}", float(perturb(rng, d0))))
    return _finish(
        "p2",
        "arm, 2x10-D inertia + 4 dampings",
        xml,
        params,
        _arm_data(2, duration, 12),
        notes="some inertia directions are weakly identifiable",
    )


def _quadruped(
    key: str, title: str, friction: bool, nseq: int, duration: float, settle: float = 1.0
) -> Problem:
    """``settle > 0``: every recording starts standing (the truth held its stance pose for
    ``settle`` s, feet loaded); ``settle == 0``: it starts from rest in the stance pose with the
    feet placed within 3 mm of the floor (above or in it), so its first steps are the robot
    landing: feet hitting the floor, bouncing and settling."""
    rng = np.random.default_rng(3)
    xml = quadruped_xml(friction)
    model = mujoco.MjModel.from_xml_string(xml)
    params = [_mass_def(model, "torso", float(perturb(rng, 4.0)))]
    params += [_mass_def(model, f"{n}_thigh", float(perturb(rng, 0.6))) for n, _, _ in LEGS]
    for n, _, _ in LEGS:
        for j, d0 in (("hip", 0.4), ("knee", 0.2)):
            params.append(_damping_def(model, f"{n}_{j}", float(perturb(rng, d0))))
    params += [_kp_def(model, f"{n}_hip_act", float(perturb(rng, 40.0))) for n, _, _ in LEGS]

    def make(model_true: mujoco.MjModel) -> tuple[list[np.ndarray], list[np.ndarray]]:
        r = np.random.default_rng(13)
        n = round(duration / model_true.opt.timestep)
        x0s, ctrls = [], []
        for _ in range(nseq):
            qpos = np.zeros(model_true.nq)
            qpos[2], qpos[3] = 0.305, 1.0
            pose = STAND + r.uniform(-0.05, 0.05, 8)
            qpos[7:] = pose
            if settle > 0:
                x0s.append(settled_state(model_true, qpos, pose, settle))
            else:
                x0s.append(full_state(model_true, qpos))
            ctrls.append(piecewise_constant(r, n, AMP_HOLD[1], np.full(8, AMP_HOLD[0]), STAND))
        return x0s, ctrls

    return _finish(key, title, xml, params, make)


def problem3(nseq: int = 3, duration: float = 1.0) -> Problem:
    """Quadruped, frictionless feet: 5 masses, 8 dampings, 4 kp (17 parameters), 3 sequences."""
    return _quadruped("p3", "quadruped, frictionless feet", False, nseq, duration)


def problem4(nseq: int = 3, duration: float = 1.0) -> Problem:
    """The same quadruped with frictional foot contact."""
    return _quadruped("p4", "quadruped, foot friction", True, nseq, duration)


def problem4d(nseq: int = 3, duration: float = 1.0) -> Problem:
    """Problem 4 with every recording starting unsettled (not in the default run).

    The robot lands on its feet in the first steps of the data: whether a foot's contact joins the
    constraint set at step k or k+1 flips with a small parameter change, so the cost jumps
    (a 2 % change of one parameter moves a knee velocity by 1 rad/s) and no local fit from
    20-40 % off reaches the truth."""
    return _quadruped("p4d", "quadruped, foot friction, landing", True, nseq, duration, 0.0)


def problem5(nseq: int = 5, duration: float = 1.0, nlimb: int = 4, nlink: int = 6) -> Problem:
    """Large model: 24 hinges, 24 link masses + 24 dampings (48 parameters), 5 sequences."""
    rng = np.random.default_rng(5)
    xml = octopus_xml(nlimb, nlink)
    model = mujoco.MjModel.from_xml_string(xml)
    params = []
    for a in range(nlimb):
        for k in range(nlink):
            params.append(
                _mass_def(model, f"l{a}_{k}", float(perturb(rng, model.body(f"l{a}_{k}").mass[0])))
            )
    for a in range(nlimb):
        for k in range(nlink):
            j = f"l{a}_j{k}"
            params.append(
                _damping_def(
                    model, j, float(perturb(rng, model.dof_damping[model.joint(j).dofadr[0]]))
                )
            )

    def make(model_true: mujoco.MjModel) -> tuple[list[np.ndarray], list[np.ndarray]]:
        r = np.random.default_rng(15)
        n = round(duration / model_true.opt.timestep)
        scale = np.array([2.0 * 0.7**k for _ in range(nlimb) for k in range(nlink)])
        x0s = [full_state(model_true, r.uniform(-0.3, 0.3, model_true.nq)) for _ in range(nseq)]
        ctrls = [piecewise_constant(r, n, 20, scale) for _ in range(nseq)]
        return x0s, ctrls

    return _finish(
        "p5", f"large: {nlimb * nlink} DoF, {len(params)} params, {nseq} seqs", xml, params, make
    )


def problem6(duration: float = 1.0) -> Problem:
    """The arm's 4 masses + one sensor delay, a gain on velocities, a bias on positions."""
    rng = np.random.default_rng(6)
    xml = arm_xml()
    model = mujoco.MjModel.from_xml_string(xml)
    params = [
        _mass_def(model, f"link{i + 1}", float(perturb(rng, ARM_MASSES[i]))) for i in range(4)
    ]
    params += [
        ParamDef("delay", "sensor_delay", "*", [0.008], [0.012], [0.0], [0.03]),
        ParamDef("vel_gain", "sensor_gain", "*_vel", [0.8], [1.1], [0.5], [2.0]),
        ParamDef("pos_bias", "sensor_bias", "*_pos", [0.03], [0.05], [-1.0], [1.0]),
    ]
    signal = [("delay", "*", "delay"), ("gain", "*_vel", "vel_gain"), ("bias", "*_pos", "pos_bias")]
    prob = _finish(
        "p6", "arm masses + sensor delay/gain/bias", xml, params, _arm_data(2, duration, 16), signal
    )
    # Measured = g·ȳ(t - d) + b, applied to the truth prediction (linear interpolation).
    d, g, b = 0.012, 1.1, 0.05
    pos = [model.sensor(f"j{i + 1}_pos").adr[0] for i in range(4)]
    vel = [model.sensor(f"j{i + 1}_vel").adr[0] for i in range(4)]
    for s in prob.sequences:
        y = np.stack(
            [
                np.interp(s.times - d, s.times, s.sensordata[:, c])
                for c in range(s.sensordata.shape[1])
            ],
            axis=1,
        )
        y[:, vel] *= g
        y[:, pos] += b
        s.sensordata = y
    return prob


PROBLEMS: dict[str, Callable[[], Problem]] = {
    "1": problem1,
    "2": problem2,
    "3": problem3,
    "4": problem4,
    "4d": problem4d,
    "5": problem5,
    "6": problem6,
}

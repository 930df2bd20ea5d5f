r"""Pseudo-inertia and log-Cholesky maths of a rigid body: functions of numbers only.

Conversions between the inertial parameters of a rigid body (mass, centre of mass, rotational
inertia), its 4x4 pseudo-inertia ``J`` and the 10 log-Cholesky parameters ``theta`` of ``J``.
Binding these to a spec / compiled model is :mod:`mjsysid.params.inertia`.

References:
  P. M. Wensing, S. Kim, J.-J. E. Slotine, "Linear Matrix Inequalities for Physically
  Consistent Inertial Parameter Identification: A Statistical Perspective on the Mass
  Distribution", IEEE RA-L 3(1), 2018 (online 2017; pseudo-inertia, physical consistency).
  C. Rucker, P. M. Wensing, "Smooth Parameterizations of Rigid-Body Inertia", IEEE RA-L 7(2),
  2022 (log-Cholesky parameterisation).

Pseudo-inertia
--------------
A rigid body with mass :math:`m`, centre of mass :math:`c` and rotational inertia :math:`I_c`
about the centre of mass (all in the body frame) has rotational inertia about the body-frame
origin (parallel-axis theorem)

.. math:: \bar I = I_c + m\,(\lVert c\rVert^2 \mathbb 1 - c c^\top),

and the 4x4 *pseudo-inertia* (the second-moment matrix of the mass density
:math:`\int [r; 1][r; 1]^\top \, dm`)

.. math::
   J = \begin{bmatrix} \Sigma & h \\ h^\top & m \end{bmatrix},\qquad
   \Sigma = \tfrac12 \operatorname{tr}(\bar I)\,\mathbb 1 - \bar I,\qquad h = m c.

Inverse map: :math:`m = J_{44}`, :math:`c = h / m`, :math:`\bar I = \operatorname{tr}(\Sigma)
\mathbb 1 - \Sigma`; about the centre of mass :math:`\Sigma_c = \Sigma - m c c^\top` and
:math:`I_c = \operatorname{tr}(\Sigma_c)\mathbb 1 - \Sigma_c`.

Physical consistency (Wensing, Kim & Slotine 2017): :math:`J \succ 0` if and only if
:math:`m > 0` and :math:`\Sigma_c \succ 0`, i.e. the principal moments
:math:`I_i = \sigma_j + \sigma_k` of :math:`I_c` (with :math:`\sigma` the eigenvalues of
:math:`\Sigma_c`) are positive and satisfy the strict triangle inequalities
:math:`I_1 + I_2 > I_3` (and permutations).

Log-Cholesky parameterisation (Rucker & Wensing 2022, "Smooth Parameterizations of Rigid-Body
Inertia", IEEE RA-L 7(2)): with
:math:`\theta = [\alpha, d_1, d_2, d_3, s_{12}, s_{23}, s_{13}, t_1, t_2, t_3]`,

.. math::
   U = e^{\alpha} \begin{bmatrix}
     e^{d_1} & s_{12} & s_{13} & t_1 \\
     0 & e^{d_2} & s_{23} & t_2 \\
     0 & 0 & e^{d_3} & t_3 \\
     0 & 0 & 0 & 1 \end{bmatrix},\qquad J = U U^\top .

Writing :math:`U = e^{\alpha} [[A, t], [0, 1]]` gives :math:`m = e^{2\alpha}`, :math:`c = t` and
:math:`\Sigma_c = m A A^\top`. Since :math:`U` is upper triangular with a positive diagonal for
every finite :math:`\theta`, :math:`J` is positive definite: **any finite theta is a physically
consistent body**, and :math:`\theta \mapsto J` is a diffeomorphism onto the positive-definite
4x4 matrices. The units are telling: :math:`e^{d_i}` and :math:`s_{ij}` are lengths [m] (a
"square root" of the mass-normalised second moment), :math:`t` is the centre of mass [m].

Inverse: :math:`U` is the *upper-lower* Cholesky factor of :math:`J`. With :math:`P` the 4x4
exchange (index-reversal) matrix, :math:`P J P = L L^\top` is an ordinary Cholesky
factorisation and :math:`U = P L P`. Then :math:`\alpha = \ln U_{44}`, and
:math:`d_i = \ln(U_{ii} / U_{44})`, :math:`s_{ij} = U_{ij} / U_{44}`,
:math:`t_i = U_{i4} / U_{44}`. :func:`theta_from_inertial` / :func:`inertial_from_theta` use the
same maths on :math:`\Sigma_c / m = A A^\top` directly, which avoids the cancellation in
:math:`\Sigma - m c c^\top` when the centre of mass is far from the origin.
"""

from __future__ import annotations

import math
from typing import cast

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.util.errors import must_be

__all__ = [
    "inertial_from_pseudo_inertia",
    "inertial_from_theta",
    "mass_and_inertia",
    "principal_axes",
    "pseudo_inertia_from_inertial",
    "pseudo_inertia_from_theta",
    "quat_to_mat",
    "theta_from_inertial",
    "theta_from_pseudo_inertia",
    "upper_cholesky",
]


def _vec(name: str, value: npt.ArrayLike, n: int) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != (n,) or not np.all(np.isfinite(arr)):
        raise ValueError(must_be(name, f"a finite array of shape ({n},)", arr))
    return arr


def _sym3(name: str, value: npt.ArrayLike) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != (3, 3) or not np.all(np.isfinite(arr)):
        raise ValueError(must_be(name, "a finite 3x3 array", arr))
    return cast(np.ndarray, 0.5 * (arr + arr.T))


def _positive_mass(mass: float) -> float:
    m = float(mass)
    if not (math.isfinite(m) and m > 0.0):
        raise ValueError(must_be("mass", "a finite number > 0 [kg]", mass))
    return m


def upper_cholesky(mat: np.ndarray, what: str) -> np.ndarray:
    """Upper-triangular ``U`` with ``U @ U.T == mat`` (``mat`` symmetric positive definite)."""
    try:
        low = np.linalg.cholesky(mat[::-1, ::-1])
    except np.linalg.LinAlgError:
        raise ValueError(
            must_be(
                what,
                "positive definite (a physically consistent rigid body: m > 0, "
                "principal moments > 0 satisfying the triangle inequalities)",
                mat,
            )
        ) from None
    return np.ascontiguousarray(low[::-1, ::-1])


def pseudo_inertia_from_inertial(
    mass: float, com: npt.ArrayLike, inertia: npt.ArrayLike, *, about: str = "com"
) -> np.ndarray:
    """Pseudo-inertia ``J`` of a rigid body.

    Args:
      mass: Mass ``m`` [kg], > 0.
      com: Centre of mass ``c`` in the body frame [m], shape ``(3,)``.
      inertia: Rotational inertia [kg·m²], shape ``(3, 3)``, about the centre of mass
        (``about="com"``) or about the body-frame origin (``about="origin"``).
      about: ``"com"`` or ``"origin"``.

    Returns:
      ``J``, shape ``(4, 4)``: ``[[Σ, m c], [m cᵀ, m]]`` with ``Σ = ½ tr(Ī) 𝟙 − Ī`` [kg·m²].
    """
    m = _positive_mass(mass)
    c = _vec("com", com, 3)
    inertia_mat = _sym3("inertia", inertia)
    if about == "com":
        i_origin = inertia_mat + m * (float(c @ c) * np.eye(3) - np.outer(c, c))
    elif about == "origin":
        i_origin = inertia_mat
    else:
        raise ValueError(must_be("about", "'com' or 'origin'", about))
    j = np.empty((4, 4))
    j[:3, :3] = 0.5 * np.trace(i_origin) * np.eye(3) - i_origin
    j[:3, 3] = j[3, :3] = m * c
    j[3, 3] = m
    return j


def inertial_from_pseudo_inertia(j: npt.ArrayLike) -> tuple[float, np.ndarray, np.ndarray]:
    """Mass, centre of mass and inertia about the centre of mass from a pseudo-inertia.

    Args:
      j: Pseudo-inertia, shape ``(4, 4)``, symmetric with ``J[3, 3] > 0``.

    Returns:
      ``(m, c, I_c)``: mass [kg], centre of mass ``(3,)`` [m] and rotational inertia about the
      centre of mass ``(3, 3)`` [kg·m²], in the body frame. (Physically consistent exactly when
      ``J`` is positive definite; this function does not check that.)
    """
    arr = np.asarray(j, dtype=np.float64)
    if arr.shape != (4, 4) or not np.all(np.isfinite(arr)):
        raise ValueError(must_be("J", "a finite 4x4 array", arr))
    arr = 0.5 * (arr + arr.T)
    m = float(arr[3, 3])
    if not m > 0.0:
        raise ValueError(must_be("J[3, 3] (the mass)", "> 0", m))
    c = arr[:3, 3] / m
    sigma_c = arr[:3, :3] - m * np.outer(c, c)
    return m, c, np.trace(sigma_c) * np.eye(3) - sigma_c


def pseudo_inertia_from_theta(theta: npt.ArrayLike) -> np.ndarray:
    """Pseudo-inertia ``J = U Uᵀ`` from log-Cholesky parameters.

    Args:
      theta: ``[α, d1, d2, d3, s12, s23, s13, t1, t2, t3]``, shape ``(10,)``, any finite values.

    Returns:
      ``J``, shape ``(4, 4)``, positive definite.
    """
    u = _u_from_theta(_vec("theta", theta, 10))
    return cast(np.ndarray, u @ u.T)


def _u_from_theta(theta: npt.ArrayLike) -> np.ndarray:
    a, d1, d2, d3, s12, s23, s13, t1, t2, t3 = np.asarray(theta, dtype=np.float64)
    u = np.array(
        [
            [math.exp(d1), s12, s13, t1],
            [0.0, math.exp(d2), s23, t2],
            [0.0, 0.0, math.exp(d3), t3],
            [0.0, 0.0, 0.0, 1.0],
        ]
    )
    return math.exp(a) * u


def _theta(alpha: float, tri: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``[α, log d1, log d2, log d3, s12, s23, s13, t1, t2, t3]``, shape ``(10,)``, from the
    upper-triangular ``(3, 3)`` factor ``tri`` (diagonal ``d``, off-diagonal ``s``) and the
    ``(3,)`` offset ``t``: the order :func:`_u_from_theta` reads."""
    diag = np.log(np.diag(tri))
    return np.array([alpha, *diag, tri[0, 1], tri[1, 2], tri[0, 2], *t], dtype=np.float64)


def theta_from_pseudo_inertia(j: npt.ArrayLike) -> np.ndarray:
    """Log-Cholesky parameters of a positive-definite pseudo-inertia (inverse of
    :func:`pseudo_inertia_from_theta`).

    Args:
      j: Pseudo-inertia, shape ``(4, 4)``, symmetric positive definite.

    Returns:
      ``theta``, shape ``(10,)``.

    Raises:
      ValueError: ``J`` is not positive definite (not a physically consistent body).
    """
    arr = np.asarray(j, dtype=np.float64)
    if arr.shape != (4, 4) or not np.all(np.isfinite(arr)):
        raise ValueError(must_be("J", "a finite 4x4 array", arr))
    u = upper_cholesky(0.5 * (arr + arr.T), "J")
    v = u / u[3, 3]
    return _theta(math.log(u[3, 3]), v[:3, :3], v[:3, 3])


def theta_from_inertial(mass: float, com: npt.ArrayLike, inertia_com: npt.ArrayLike) -> np.ndarray:
    """Log-Cholesky parameters from mass, centre of mass and inertia about the centre of mass.

    Equal to ``theta_from_pseudo_inertia(pseudo_inertia_from_inertial(m, c, I_c))`` but
    factorises ``Σ_c / m`` directly (no cancellation for a far-away centre of mass).

    Args:
      mass: Mass [kg], > 0.
      com: Centre of mass in the body frame [m], shape ``(3,)``.
      inertia_com: Rotational inertia about the centre of mass [kg·m²], shape ``(3, 3)``.

    Returns:
      ``theta``, shape ``(10,)``.

    Raises:
      ValueError: The inertia is not positive definite or violates the triangle inequalities.
    """
    m = _positive_mass(mass)
    c = _vec("com", com, 3)
    i_c = _sym3("inertia_com", inertia_com)
    sigma_c = 0.5 * np.trace(i_c) * np.eye(3) - i_c
    a = upper_cholesky(sigma_c / m, "inertia_com (as the second moment Σ_c = ½ tr(I_c) 𝟙 − I_c)")
    return _theta(0.5 * math.log(m), a, c)


def inertial_from_theta(theta: npt.ArrayLike) -> tuple[float, np.ndarray, np.ndarray]:
    """Mass, centre of mass and inertia about the centre of mass from log-Cholesky parameters.

    Equal to ``inertial_from_pseudo_inertia(pseudo_inertia_from_theta(theta))`` without the
    cancellation in ``Σ − m c cᵀ``.

    Args:
      theta: ``[α, d1, d2, d3, s12, s23, s13, t1, t2, t3]``, shape ``(10,)``.

    Returns:
      ``(m, c, I_c)``: mass [kg] ``= exp(2α)``, centre of mass ``(3,)`` [m] ``= t`` and inertia
      about the centre of mass ``(3, 3)`` [kg·m²], physically consistent for every finite theta.
    """
    th = _vec("theta", theta, 10)
    m, i_c = mass_and_inertia(th.tolist())
    return m, th[7:10].copy(), np.array(i_c).reshape(3, 3)


def mass_and_inertia(th: list[float]) -> tuple[float, list[float]]:
    """``(m, I_c)`` of :func:`inertial_from_theta` in plain floats (``I_c`` row-major, 9
    values): for one 3x3 product NumPy's per-call cost is several times the arithmetic.

    ``Σ_c = m·A·Aᵀ`` with ``A = [[e^d1, s12, s13], [0, e^d2, s23], [0, 0, e^d3]]``, and
    ``I_c = tr(Σ_c)·1 − Σ_c``.
    """
    m = math.exp(2.0 * th[0])
    a11, a22, a33 = math.exp(th[1]), math.exp(th[2]), math.exp(th[3])
    a12, a23, a13 = th[4], th[5], th[6]
    s11 = m * (a11 * a11 + a12 * a12 + a13 * a13)
    s22 = m * (a22 * a22 + a23 * a23)
    s33 = m * (a33 * a33)
    s12 = m * (a12 * a22 + a13 * a23)
    s13 = m * (a13 * a33)
    s23 = m * (a23 * a33)
    tr = s11 + s22 + s33
    return m, [tr - s11, -s12, -s13, -s12, tr - s22, -s23, -s13, -s23, tr - s33]


def quat_to_mat(quat: npt.ArrayLike) -> np.ndarray:
    q = np.asarray(quat, dtype=np.float64)
    mat = np.empty(9)
    mujoco.mju_quat2Mat(mat, q / np.linalg.norm(q))
    return mat.reshape(3, 3)


def principal_axes(inertia_com: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Principal moments ``(3,)`` and axes quaternion ``(4,)`` of a 3x3 inertia (``mju_eig3``)."""
    eigval, eigvec, quat = np.empty(3), np.empty(9), np.empty(4)
    mujoco.mju_eig3(eigval, eigvec, quat, np.ascontiguousarray(inertia_com).reshape(9))
    return eigval, quat

"""Excitation signals for identification experiments.

A parameter can only be identified if the input moves the system in a way that depends on it.
These generators return control sequences of shape ``(n, nu)`` sampled every ``dt`` seconds:

* :func:`prbs`: pseudo-random binary sequence (±amplitude, switching at most every ``hold``
  samples), a broadband signal that excites friction and damping well.
* :func:`chirp`: a sine sweeping from ``f0`` to ``f1`` Hz (logarithmic or linear).
* :func:`multisine`: a sum of sines at log-spaced frequencies with Schroeder phases (low crest
  factor: large excitation for a given peak).
* :func:`random_steps`: piecewise-constant Gaussian levels held for ``hold`` samples.

Every generator is deterministic for a given ``seed`` and respects ``amplitude`` as the
peak magnitude, so the result can be clipped to an actuator's ``ctrlrange`` knowingly.
"""

from __future__ import annotations

import numpy as np

from mjsysid.util.errors import must_be

SIGNALS = ("prbs", "chirp", "multisine", "steps")


def _check(n: int, nu: int, dt: float, amplitude: float) -> None:
    if not isinstance(n, int | np.integer) or n < 2:
        raise ValueError(must_be("n", "an integer >= 2", n))
    if not isinstance(nu, int | np.integer) or nu < 0:
        raise ValueError(must_be("nu", "a non-negative integer", nu))
    if not dt > 0:
        raise ValueError(must_be("dt", "> 0 seconds", dt))
    if not (np.isfinite(amplitude) and amplitude >= 0):
        raise ValueError(must_be("amplitude", "finite and >= 0", amplitude))


def _held_draws(
    n: int, nu: int, dt: float, amplitude: float, hold: int, seed: int
) -> tuple[np.random.Generator, tuple[int, int]]:
    """The checked arguments of a held signal: its generator and the ``(levels, nu)`` shape
    of its levels (``ceil(n / hold)`` of them)."""
    _check(n, nu, dt, amplitude)
    if hold < 1:
        raise ValueError(must_be("hold", "an integer >= 1", hold))
    return np.random.default_rng(seed), (-(-n // hold), nu)


def _held(levels: np.ndarray, hold: int, n: int) -> np.ndarray:
    """``(n, nu)``: each row of ``levels`` held ``hold`` samples, cut to ``n``."""
    return np.repeat(levels, hold, axis=0)[:n]


def prbs(
    n: int, nu: int, dt: float, *, amplitude: float = 1.0, hold: int = 10, seed: int = 0
) -> np.ndarray:
    """Pseudo-random binary sequence, ``(n, nu)``, values ``±amplitude``.

    Each channel flips sign with probability 1/2 every ``hold`` samples (mean switching
    period ``2·hold·dt``); channels are independent.
    """
    rng, shape = _held_draws(n, nu, dt, amplitude, hold, seed)
    return amplitude * _held(rng.choice([-1.0, 1.0], size=shape), hold, n)


def random_steps(
    n: int, nu: int, dt: float, *, amplitude: float = 1.0, hold: int = 50, seed: int = 0
) -> np.ndarray:
    """Gaussian levels (std ``amplitude/2``, clipped to ``±amplitude``) held ``hold`` samples."""
    rng, shape = _held_draws(n, nu, dt, amplitude, hold, seed)
    return amplitude * _held(np.clip(0.5 * rng.standard_normal(shape), -1.0, 1.0), hold, n)


def chirp(
    n: int,
    nu: int,
    dt: float,
    *,
    amplitude: float = 1.0,
    f0: float = 0.1,
    f1: float = 5.0,
    method: str = "logarithmic",
    seed: int = 0,
) -> np.ndarray:
    """Frequency sweep from ``f0`` to ``f1`` Hz over the ``n`` samples, ``(n, nu)``.

    Channel ``j`` is delayed by a random phase (from ``seed``) so channels are not identical.
    Instantaneous phase: linear ``2π(f0 t + (f1 − f0) t²/(2T))``; logarithmic
    ``2π f0 T (k^{t/T} − 1)/ln k`` with ``k = f1/f0``.
    """
    _check(n, nu, dt, amplitude)
    if not (0 < f0 < f1):
        raise ValueError(must_be("f0, f1", "0 < f0 < f1 (Hz)", (f0, f1)))
    if f1 > 0.5 / dt:
        raise ValueError(must_be("f1", f"<= the Nyquist frequency {0.5 / dt:g} Hz", f1))
    t = np.arange(n) * dt
    T = t[-1]
    if method == "linear":
        phase = 2 * np.pi * (f0 * t + (f1 - f0) * t**2 / (2 * T))
    elif method == "logarithmic":
        k = f1 / f0
        phase = 2 * np.pi * f0 * T * (k ** (t / T) - 1.0) / np.log(k)
    else:
        raise ValueError(must_be("method", "'linear' or 'logarithmic'", method))
    offsets = np.random.default_rng(seed).uniform(0, 2 * np.pi, size=nu)
    return amplitude * np.sin(phase[:, None] + offsets[None, :])


def multisine(
    n: int,
    nu: int,
    dt: float,
    *,
    amplitude: float = 1.0,
    f0: float = 0.1,
    f1: float = 5.0,
    ncomp: int = 20,
    seed: int = 0,
) -> np.ndarray:
    """Sum of ``ncomp`` sines at log-spaced frequencies in ``[f0, f1]`` Hz, peak-normalised.

    Phases follow Schroeder's rule ``φ_k = −π k(k−1)/ncomp`` (plus a per-channel random shift)
    for a low crest factor.
    """
    _check(n, nu, dt, amplitude)
    if not (0 < f0 < f1 <= 0.5 / dt):
        raise ValueError(must_be("f0, f1", f"0 < f0 < f1 <= Nyquist ({0.5 / dt:g} Hz)", (f0, f1)))
    t = np.arange(n) * dt
    freqs = np.geomspace(f0, f1, ncomp)
    k = np.arange(1, ncomp + 1)
    phases = -np.pi * k * (k - 1) / ncomp
    shift = np.random.default_rng(seed).uniform(0, 2 * np.pi, size=nu)
    out = np.empty((n, nu))
    for j in range(nu):
        s = np.sin(2 * np.pi * freqs[None, :] * t[:, None] + phases[None, :] + shift[j]).sum(axis=1)
        out[:, j] = s / np.max(np.abs(s))
    return amplitude * out


def make_excitation(
    kind: str, n: int, nu: int, dt: float, *, amplitude: float = 1.0, seed: int = 0
) -> np.ndarray:
    """Dispatch by name (one of :data:`SIGNALS`) with each generator's defaults."""
    if kind == "prbs":
        return prbs(n, nu, dt, amplitude=amplitude, hold=max(1, round(0.05 / dt)), seed=seed)
    if kind == "steps":
        return random_steps(
            n, nu, dt, amplitude=amplitude, hold=max(1, round(0.25 / dt)), seed=seed
        )
    if kind == "chirp":
        return chirp(n, nu, dt, amplitude=amplitude, f1=min(5.0, 0.25 / dt), seed=seed)
    if kind == "multisine":
        return multisine(n, nu, dt, amplitude=amplitude, f1=min(5.0, 0.25 / dt), seed=seed)
    raise ValueError(must_be("signal", f"one of {list(SIGNALS)}", kind))

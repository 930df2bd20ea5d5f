"""Experiment files: a whole identification problem in one YAML file.

Example (paths are relative to the experiment file)::

    schema_version: 1
    name: arm
    model: arm.xml                  # MJCF, or URDF (loaded through MjSpec)
    sequences:
      - name: run1
        file: run1.npz              # .npz or .csv, see mjsysid.recording
        # optional: time: t, time_scale: 0.001 (s per unit: ms), control: {actuator: column},
        #           sensors: {signal: column(s)},
        #           initial_state: {qpos: [...] or {joint: value}, qvel: ...},
        #           ignore_columns: [column, ...]  (read, deliberately not used)
      - name: check
        file: run3.npz
        holdout: true               # not fitted: simulated to validate the fit
    parameters:
      - {kind: body_mass, target: link1}                  # bounds from the kind's defaults
      - {kind: joint_damping, target: j1, min: 0.0, max: 1.0}
      - {kind: sensor_delay, target: "*_pos", max: 0.05}
    optimizer: {method: lm, max_iters: 100}   # also xtol, gtol, ftol (>= 0; 0: off), eps, horizons
    # (horizons: auto (default), none (one stage) or fractions such as [0.3, 1.0];
    #  global: cmaes, with population, budget, sigma, seed, tol_spread: a CMA-ES stage first;
    #  or starts: 8: local fits from the nominal and 7 points drawn in the bounds;
    #  threshold_profile: true (default), false or {keep, iterations, sweeps, margin}: a
    #  force law's deadzone profiled over the recorded command levels after the fit)
    residual: {normalize: true, sensor_weights: {j1_pos: 2.0}}
    shooting: {window: 1.0, overlap: 0.2}     # optional: multiple shooting, see below
    executor: 4                               # optional: a local Dask cluster of 4 workers,
    #   or tcp://host:8786 (a running scheduler), or {workers: 4, threads_per_worker: 1}
    export: {urdf: arm.urdf}                  # optional: the URDF the MJCF was made from;
    #   the results folder also gets its identified copy (inertials, damping, friction, limits);
    #   assets: copy (default: meshes, textures copied into the results folder) or absolute

Names. ``name`` (default: the experiment file's name) and every ``sequences[i].name``
(default ``seq<i>``) must be plain file names: non-empty, without ``/``, ``\\``, ``..`` or NUL
(the identified model is written as ``<name>.xml`` inside the results folder, and a name
must not lead out of it).

Columns. Column names must be unique, and every column of a recording must be used: the
time column, the controls, the sensors (default: every model sensor and joint state with a
column of its name), or ``initial_qpos``/``initial_qvel``. A column named like a model
sensor that has no column (``j1_poss`` for ``j1_pos``) is an error; other unused columns are
collected in :attr:`Experiment.warnings` (``mjsysid fit`` prints them). List deliberately
unused columns under ``ignore_columns`` (see :func:`mjsysid.data.recording.load_recording`).

Multiple shooting (``shooting:``, optional; what :func:`mjsysid.split_windows` and
:func:`mjsysid.initial_state_params` do in Python):

* ``window`` (s, finite, > 0): cut every sequence into windows of this length, named
  ``<sequence>#<k>``, each simulated from the state measured at its start (see
  :func:`mjsysid.split_windows` for what the recordings must measure). Without ``window``
  the sequences are not cut.
* ``overlap`` (s, ``0 <= overlap < window``, default 0): overlap of consecutive windows.
* ``estimate_initial_state`` (bool, default true): add the initial joint positions and
  velocities of every window (or of every sequence, without ``window``) to the parameters
  (``<name>/<sequence>#<k>/<joint>_qpos0``, ``..._qvel0``), within ``qpos_margin`` (rad or
  m, default 0.2) and ``qvel_margin`` (rad/s or m/s, default 2.0) of the measured values.
* ``estimate_activation`` (bool, default: when the model has actuator activations): with
  ``estimate_initial_state``, also every window's initial activations (``..._act0``); false
  keeps the activations simulated with the nominal model (a filter state that cancels with
  the window-start velocities makes a degenerate direction).

Intervals (``confidence:``, optional): ``method`` (``linear``, the default, or ``bootstrap``:
a block bootstrap over the sequences or windows, for correlated residuals or a model that
misses, see :func:`mjsysid.fit.confidence.compute_confidence`), ``draws`` (integer >= 2,
default 200), ``seed`` (integer, default 0) and ``steps`` (Gauss-Newton steps per refit,
integer >= 1, default 1).

Parameter kinds: those of :mod:`mjsysid.params.kinds` plus ``body_mass``, ``body_mass_ipos``
and ``body_inertia`` (10-D pseudo-inertia). The ``sensor_*`` kinds build a
:class:`~mjsysid.SignalTransform` (``apply_to: predicted|measured`` for gains
and biases), the ``control_*`` kinds a :class:`~mjsysid.ControlTransform`
on the actuators their ``target`` pattern matches, in file order; ``control_deadband`` and
``control_gain`` take ``direction: both|positive|negative`` (one parameter per side, named
``<target>_deadband_pos`` etc. by default). A mistake is a :class:`ExperimentError` naming the
key path (``parameters[3].max``), what was expected and what was found.

The file's structure is one declarative schema (pydantic models, one per key group, unknown
keys refused; ``mjsysid schema`` writes it as a JSON Schema for editors, see
docs/experiment-files.md). The loader reads the model, checks the whole file against the
schema, then loads it key group by key group, one module each, with the checks that need the
model or the files: :mod:`~.nodes` (the models' base, :class:`~.nodes.Must` words, value
helpers, ``limits:``), :mod:`~.model` (``model:``, frozen values, ``export:``),
:mod:`~.sequences` and :mod:`~.recordings` (``sequences:``), :mod:`~.parameters`
(``parameters:``), :mod:`~.shooting` (``shooting:``), :mod:`~.options` (``optimizer:``,
``residual:``, ``force_laws:``, ``executor:``, ``confidence:``), :mod:`~.schema` (the whole
file's model and its JSON Schema), :mod:`~.messages` (the schema's findings in the house's
words) and :mod:`~.loader` (:class:`Experiment`, :func:`load_experiment`, the bundled
examples).
"""

from __future__ import annotations

from mjsysid.app.experiment.loader import (
    Experiment,
    bundled_examples,
    load_experiment,
    resolve_experiment_path,
)
from mjsysid.app.experiment.nodes import ExperimentError, ProgressFactory
from mjsysid.app.experiment.schema import EXPERIMENT_SCHEMA_VERSION
from mjsysid.params.kinds import ALL_KINDS, CONTROL_KINDS, INERTIA_KINDS, SIGNAL_KINDS

__all__ = [
    "ALL_KINDS",
    "CONTROL_KINDS",
    "EXPERIMENT_SCHEMA_VERSION",
    "INERTIA_KINDS",
    "SIGNAL_KINDS",
    "Experiment",
    "ExperimentError",
    "ProgressFactory",
    "bundled_examples",
    "load_experiment",
    "resolve_experiment_path",
]

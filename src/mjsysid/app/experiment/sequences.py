"""The ``sequences:`` key: every entry's recording and initial state, the held-out ones
(``holdout: true``) apart, as :class:`~mjsysid.data.sequences.ModelSequences`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from mjsysid.app.experiment.nodes import (
    ExperimentError,
    Keys,
    Loading,
    Must,
    Number,
    check_file_name,
    within_limit,
)
from mjsysid.app.experiment.recordings import (
    RecordingKeys,
    check_span,
    read_recording,
    recording_file,
    recording_warnings,
)
from mjsysid.data.recording import initial_state_from_sensors
from mjsysid.data.sequences import ModelSequences
from mjsysid.data.states import create_initial_state

JointValues = Annotated[
    list[Number] | dict[str, Number | list[Number]],
    Must("a list of numbers or a mapping of joints to numbers"),
]


class InitialStateKeys(Keys):
    """``initial_state:`` of a sequence: ``qpos``/``qvel`` as full vectors or by joint."""

    qpos: JointValues | None = None
    qvel: JointValues | None = None


class SequenceKeys(RecordingKeys):
    """One ``sequences[i]`` entry: a recording, how to read it and where it starts."""

    name: str | None = None
    holdout: Annotated[bool, Must("true or false")] = False
    initial_state: InitialStateKeys | None = None


Sequences = Annotated[list[SequenceKeys], Field(min_length=1), Must("a list of recordings")]
"""The ``sequences:`` key."""


@dataclass
class _Sequence:
    """One loaded ``sequences[i]`` entry."""

    name: str
    x0: np.ndarray
    control: Any
    sensors: Any
    from_sample: bool  # its initial state is one measured sample
    holdout: bool = False  # not fitted: simulated for validation only
    inputs: Any = None  # the force laws' recorded inputs
    constants: dict[str, float] | None = None  # the per-recording constants


def sequences_of(
    entries: list[SequenceKeys], ld: Loading, name: str, shooting: dict[str, Any] | None
) -> tuple[ModelSequences, ModelSequences | None]:
    """The fitted sequences and the held-out ones (``holdout: true``; ``None`` without)."""
    seqs = [_load_sequence(keys, i, ld) for i, keys in enumerate(entries)]
    from_samples = [f"sequences[{i}]" for i, sq in enumerate(seqs) if sq.from_sample]
    if shooting is None and from_samples:
        ld.warnings.append(
            f"{ld.source}: the initial state of {from_samples} is read from the first sample "
            "of the sensors and held fixed, so its measurement noise biases the fit; add "
            "shooting: {estimate_initial_state: true} to fit it as well (or give "
            "initial_qpos / initial_qvel columns or initial_state: qpos)"
        )
    fitted = [sq for sq in seqs if not sq.holdout]
    if not fitted:
        raise ExperimentError(
            f"{ld.source}: sequences must have at least one sequence to fit, got every one "
            "marked holdout: true (remove holdout: from one of them)"
        )
    held = [sq for sq in seqs if sq.holdout]
    return _model_sequences(name, ld, fitted), (_model_sequences(name, ld, held) if held else None)


def _model_sequences(name: str, ld: Loading, seqs: list[_Sequence]) -> ModelSequences:
    try:
        return ModelSequences(
            name,
            ld.spec,
            [sq.name for sq in seqs],
            [sq.x0 for sq in seqs],
            [sq.control for sq in seqs],
            [sq.sensors for sq in seqs],
            inputs=[sq.inputs for sq in seqs],
            constants=[sq.constants or {} for sq in seqs],
        )
    except (KeyError, ValueError) as e:
        raise ExperimentError(f"{ld.source}: sequences: {e}") from None


def _load_sequence(keys: SequenceKeys, i: int, ld: Loading) -> _Sequence:
    where = f"sequences[{i}]"
    seq_name = f"seq{i}" if keys.name is None else keys.name
    check_file_name(ld.source, f"{where}.name", seq_name)
    rec_file = recording_file(keys, where, ld)
    # a bag folder is fingerprinted file by file
    ld.files += (
        sorted(p for p in rec_file.rglob("*") if p.is_file()) if rec_file.is_dir() else [rec_file]
    )
    rec = read_recording(keys, where, rec_file, ld)
    ld.command_timing[seq_name] = "held" if keys.command_timing is None else keys.command_timing
    ld.steps += check_span(where, np.asarray(rec.times), rec_file, ld)
    within_limit("max_total_steps", ld.steps, f"{ld.source}: sequences: simulated steps in total")
    recording_warnings(where, rec, rec_file, ld)
    init = keys.initial_state
    from_sample = rec.initial_qpos is None and (init is None or init.qpos is None)
    qpos, qvel = _initial_state(rec, init, f"{where}.initial_state", ld)
    try:
        x0 = create_initial_state(ld.model, qpos, qvel, time=float(rec.times[0]))
    except (KeyError, ValueError) as e:
        msg = e.args[0] if isinstance(e, KeyError) else str(e)
        raise ExperimentError(
            f"{ld.source}: {where}: initial state (initial_qpos / "
            f"initial_qvel of {str(rec_file)!r}, or initial_state:): "
            f"{msg}"
        ) from None
    return _Sequence(
        seq_name,
        x0,
        rec.control,
        rec.sensordata,
        from_sample,
        keys.holdout,
        rec.inputs,
        rec.constants,
    )


def _initial_state(
    rec: Any, init: InitialStateKeys | None, where: str, ld: Loading
) -> tuple[Any, Any]:
    """``(qpos, qvel)`` to start from: the sensors' first sample, the recording's
    ``initial_qpos``/``initial_qvel`` columns, or the entry's ``initial_state:``."""
    model = ld.model
    qpos, qvel = initial_state_from_sensors(model, rec.sensordata)
    if rec.initial_qpos is not None:
        qpos = rec.initial_qpos
    if rec.initial_qvel is not None:
        qvel = rec.initial_qvel
    if init is None:
        return qpos, qvel
    for key in ("qpos", "qvel"):
        v = getattr(init, key)
        if v is None:
            continue
        try:
            full = create_initial_state(model, **{key: v})
        except (KeyError, ValueError) as e:
            raise ExperimentError(f"{ld.source}: {where}.{key}: {e}") from None
        if key == "qpos":
            qpos = full[slice(1, 1 + model.nq)]
        else:
            qvel = full[slice(1 + model.nq, 1 + model.nq + model.nv)]
    return qpos, qvel

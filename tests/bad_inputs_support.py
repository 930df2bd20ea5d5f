"""The shared helpers of the bad-input tables (``tests/<stage>/test_<module>_bad_inputs.py``).

Every case of a table is one bad input, the exact exception type and a message fragment that
names the argument, what was expected and what was received. Inputs are rejected at
construction or build time (TimeSeries, Parameter, ModelSequences, build_residual_fn) or, for
what only ``optimize`` can know, at the start point before any iteration.

The tables cover every silent failure of the peer in ``shared/peer-notes.md`` (the cases whose
id ends in ``-peer``): NaN in data, zero sensor column, start outside the bounds, min > max,
equal bounds, short control, NaN in controls and initial state, a delay pattern matching no
sensor, a modifier that changes nothing, unknown names in weights; and the tests next to them
check that saved parameters keep modifiers and metadata and that optimize leaves parameters
alone. The shared problems (the ``arm`` fixture, an ``Arm``) are in conftest.py; a table
imports this module like conftest (``from bad_inputs_support import ...``).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest
import yaml

import mjsysid as ms
from conftest import ARM_SAMPLES, Arm, arm_experiment_text
from mjsysid.app.experiment import bundled_examples
from mjsysid.data.signals import SignalNameError

NAN, INF = float("nan"), float("inf")
N = ARM_SAMPLES  # samples per sequence of the shared problems


@dataclass
class Ctx:
    """What a case builds its bad input from: the shared problems and a fresh folder."""

    arm: Arm
    tmp: Path

    def __getattr__(self, name: str) -> Any:
        return getattr(self.arm, name)

    def file(self, name: str, text: str) -> Path:
        path = self.tmp / name
        path.write_text(text)
        return path

    def params_yaml(self, entry: str, header: str = "schema_version: 1\n") -> Path:
        return self.file("p.yaml", f"{header}parameters:\n- {{{entry}}}\n")

    def results_copy(self, edit: Callable[[Path], None]) -> Path:
        folder = self.tmp / "copy"
        shutil.copytree(self.arm.results, folder)
        edit(folder)
        return folder

    def summary_edit(self, fn: Callable[[dict], None]) -> Path:
        def edit(folder: Path) -> None:
            summary = yaml.safe_load((folder / "result.yaml").read_text())
            fn(summary)
            (folder / "result.yaml").write_text(yaml.safe_dump(summary))

        return self.results_copy(edit)

    def ts_file(self) -> bytes:
        ms.TimeSeries(np.arange(5.0), np.ones((5, 2))).save_to_disk(self.tmp / "ts.npz")
        return (self.tmp / "ts.npz").read_bytes()

    def experiment(self, text: str | None = None, **overrides: Any) -> Path:
        """The bundled arm experiment (absolute paths), with top-level keys overridden."""
        return self.file("exp.yaml", arm_experiment_text(**overrides) if text is None else text)

    def recording(self, **changes: Any) -> Path:
        """The arm example's first recording with some arrays replaced, as an experiment."""
        base = bundled_examples()["arm"].parent
        with np.load(base / "run1.npz", allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        for key, fn in changes.items():
            arrays[key] = fn(arrays[key])
        np.savez(self.tmp / "rec.npz", **arrays)
        return self.experiment(sequences=[{"name": "r", "file": str(self.tmp / "rec.npz")}])

    def blocker(self) -> Path:
        """A plain file where a folder is needed: nothing can be written below it."""
        path = self.tmp / "not_a_folder"
        path.write_text("x")
        return path


# --------------------------------------------------------------------------------------------
# Helpers for the cases


def _arm_run1() -> Path:
    return bundled_examples()["arm"].parent / "run1.npz"


def _case(case_id: str, make: Callable[[Ctx], Any], exc: type[BaseException], match: str) -> Any:
    return pytest.param(make, exc, match, id=case_id)


def _boom(spec: mujoco.MjSpec, p: ms.Parameter) -> None:
    raise RuntimeError("kaboom")


def _negative_geom_mass(spec: mujoco.MjSpec, p: ms.Parameter) -> None:
    spec.geom("g1").mass = p.value[0] - 2.0  # 1.0 -> -1.0: the spec no longer compiles


def _model_boom(model: mujoco.MjModel, p: ms.Parameter) -> None:
    raise IndexError("bad index")


def _noop(spec: mujoco.MjSpec, p: ms.Parameter) -> None:
    """A modifier that never changes the model."""


def _with(params: ms.ParameterDict, *extra: ms.Parameter) -> ms.ParameterDict:
    for p in extra:
        params.add(p)
    return params


def _set_value(p: ms.Parameter, value: Any) -> None:
    p.value = value


def _zero_column(c: Ctx, col: int) -> ms.TimeSeries:
    data = np.array(c.sens.data)
    data[:, col] = 0.0
    return c.sensors(data)


def _with_nan(a: np.ndarray, index: tuple[int, ...]) -> np.ndarray:
    out = np.array(a, dtype=np.float64)
    out[index] = NAN
    return out


def _transform_fit(c: Ctx, st: ms.SignalTransform, *extra: ms.Parameter) -> Any:
    rf = ms.build_residual_fn(c.seqs, modify_residual=st.apply, nthread=1)
    try:
        return ms.optimize(_with(c.masses(), *extra), rf, max_iters=3)
    finally:
        rf.close()


def _checkpoint(c: Ctx, params: ms.ParameterDict) -> Path:
    path = c.tmp / "fit.ckpt.npz"
    ms.optimize(params, c.rf, max_iters=1, checkpoint=path)
    return path


def _resume_narrower(c: Ctx) -> Any:
    """Resume with bounds that exclude the checkpointed point (the user tightened them)."""
    path = _checkpoint(c, c.masses())
    narrow = ms.ParameterDict(
        [
            ms.body_inertia_param(c.spec, c.model, "link1", mass_bounds=(0.5, 1.05)),
            ms.body_inertia_param(c.spec, c.model, "link2"),
        ]
    )
    return ms.optimize(narrow, c.rf, max_iters=100, checkpoint=path, resume=True)


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _corrupt_middle(data: bytes) -> bytes:
    b = bytearray(data)
    b[len(b) // 2] ^= 0xFF
    return bytes(b)


def _pickled_npz(path: Path) -> Path:
    np.savez(
        path,
        times=np.arange(3.0),
        data=np.array([object(), 1, 2], dtype=object),
        signal_mapping_json=np.array("null"),
        schema_version=np.array(1),
    )
    return path


def _ts_npz(path: Path, times: Any, version: int = 1) -> Path:
    np.savez(
        path,
        times=np.asarray(times, dtype=np.float64),
        data=np.ones(len(times)),
        signal_mapping_json=np.array("null"),
        schema_version=np.array(version),
    )
    return path


GOOD = "name: a, nominal: 1.0, min_value: 0.0, max_value: 2.0"
ARM_SIGNALS = r"\['j1_pos', 'j2_pos', 'j1_vel', 'j2_vel', 'tip_pos', 'tip_gyro'\]"


def _start(params: ms.ParameterDict, name: str, value: float) -> ms.ParameterDict:
    params[name].value = [value]
    return params


def _truncated_checkpoint(c: Ctx) -> Path:
    path = _checkpoint(c, c.masses())
    _truncate(path)
    return path


def _result(c: Ctx) -> ms.OptimizeResult:
    return ms.load_results(c.arm.results).result


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _savez(path: Path, **arrays: np.ndarray) -> Path:
    np.savez(path, **arrays)
    return path


def table_test(cases: list[Any]) -> Callable[..., None]:
    """The test of a table: one run of :func:`check_case` per case (``test_bad_input =
    table_test(CASES)`` in a table's module)."""

    @pytest.mark.parametrize(("make", "exc", "match"), cases)
    def test_bad_input(arm: Arm, tmp_path: Path, make, exc, match) -> None:
        check_case(arm, tmp_path, make, exc, match)

    return test_bad_input


def check_case(arm: Arm, tmp_path: Path, make: Callable[[Ctx], Any], exc: type, match: str) -> None:
    """Run one case: ``make`` must raise exactly ``exc`` with a message matching ``match``."""
    with pytest.raises(exc, match=match) as info:
        make(Ctx(arm, tmp_path))
    # The documented type, not just any subclass of it: an unknown signal name is a
    # SignalNameError, both a KeyError and a ValueError (what mujoco.sysid raises).
    assert info.type is exc or (info.type is SignalNameError and exc is KeyError), info.type

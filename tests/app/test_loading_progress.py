"""Issue #22: ``mjsysid fit`` on a big csv shows a bar while the recording is read (on a
terminal), and nothing with ``-q``; ``load_experiment(progress=)`` counts the rows."""

from __future__ import annotations

import io
import shutil
from importlib import resources
from pathlib import Path

import numpy as np

from mjsysid.app.cli import main
from mjsysid.app.experiment import load_experiment
from mjsysid.data.recording import PROGRESS_ROWS

ROWS = 3 * PROGRESS_ROWS + 100


class _Terminal(io.StringIO):
    """A captured stderr that says it is a terminal (bars draw only on one)."""

    def isatty(self) -> bool:
        return True


def _big_box(tmp_path: Path) -> Path:
    """The box example with its push.csv interpolated to ``ROWS`` rows (same 2 s)."""
    base = resources.files("mjsysid") / "examples" / "box"
    for name in ("box.xml", "experiment.yaml"):
        with resources.as_file(base / name) as f:
            shutil.copy(f, tmp_path / name)
    with resources.as_file(base / "push.csv") as f:
        text = Path(f).read_text().splitlines()
    header, data = text[0], np.loadtxt(text[1:], delimiter=",")
    times = np.linspace(data[0, 0], data[-1, 0], ROWS)
    cols = [np.interp(times, data[:, 0], data[:, j]) for j in range(1, data.shape[1])]
    table = np.column_stack([times, *cols])
    np.savetxt(tmp_path / "push.csv", table, delimiter=",", header=header, comments="")
    return tmp_path / "experiment.yaml"


def _fit(experiment: Path, out: Path, *extra: str) -> tuple[int, str]:
    err = _Terminal()
    argv = ["fit", str(experiment), "--out", str(out), "--max-iters", "1", "--no-report"]
    code = main([*argv, *extra], stdout=io.StringIO(), stderr=err)
    return code, err.getvalue()


def test_fit_shows_a_bar_while_reading_a_big_csv(tmp_path: Path):
    exp = _big_box(tmp_path)
    code, err = _fit(exp, tmp_path / "o")
    assert code == 0, err
    final = f"  reading 'push.csv' [{'#' * 30}] 100 %  {ROWS}/{ROWS}\n"
    assert final in err
    assert "\r  reading 'push.csv' [" in err and f"{PROGRESS_ROWS}/{ROWS}" in err


def test_quiet_fit_draws_no_bar(tmp_path: Path):
    exp = _big_box(tmp_path)
    code, err = _fit(exp, tmp_path / "o", "-q")
    assert code == 0, err
    assert "reading 'push.csv'" not in err


def test_load_experiment_counts_rows_to_the_factory(tmp_path: Path):
    exp = _big_box(tmp_path)
    calls: dict[str, list[tuple[int, int]]] = {}
    closed: list[str] = []

    class _Counter:
        def __init__(self, label: str) -> None:
            self.label = label
            calls[label] = []

        def __call__(self, done: int, total: int) -> None:
            calls[self.label].append((done, total))

        def close(self) -> None:
            closed.append(self.label)

    load_experiment(exp, progress=_Counter)
    assert list(calls) == ["reading 'push.csv'"]
    counts = calls["reading 'push.csv'"]
    assert counts[0] == (PROGRESS_ROWS, ROWS) and counts[-1] == (ROWS, ROWS)
    assert [d for d, _ in counts] == sorted(d for d, _ in counts)
    assert closed == ["reading 'push.csv'"]


def test_check_and_audit_show_the_bar_too(tmp_path: Path):
    exp = _big_box(tmp_path)
    for argv in (["check", str(exp), "--shift-iters", "1"], ["audit", str(exp)]):
        err = _Terminal()
        code = main(argv, stdout=io.StringIO(), stderr=err)
        assert code == 0, err.getvalue()
        assert f"  reading 'push.csv' [{'#' * 30}] 100 %  {ROWS}/{ROWS}\n" in err.getvalue()

"""The progress callback and its text bar: drawn on a terminal or when asked, throttled,
silent with quiet; library readers count their work to it."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from mjsysid.data.recording import PROGRESS_ROWS, read_columns
from mjsysid.util.progress import ProgressBar, progress_bar


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bar_draws_one_line_with_share_and_count():
    out = io.StringIO()
    bar = ProgressBar(out, "reading 'x.csv'", enabled=True, interval=0.0, width=10)
    bar(4, 10)
    bar(10, 10)
    text = out.getvalue()
    assert "\rreading 'x.csv' [####------]  40 %  4/10" in text
    assert text.endswith("\rreading 'x.csv' [##########] 100 %  10/10\n")
    bar(10, 10)  # a finished bar draws nothing more
    bar.close()
    assert out.getvalue() == text


def test_bar_is_throttled_but_always_draws_the_end():
    out = io.StringIO()
    bar = ProgressBar(out, "n", enabled=True, interval=3600.0)
    for k in range(1000):
        bar(k, 1000)
    bar(1000, 1000)
    assert out.getvalue().count("\r") == 2  # the first call and the end


def test_bar_only_on_a_terminal_unless_asked_and_never_quiet():
    assert progress_bar(io.StringIO(), "x") is None  # a file or pipe: no bar
    assert progress_bar(_Terminal(), "x") is not None
    assert progress_bar(io.StringIO(), "x", enabled=True) is not None
    assert progress_bar(_Terminal(), "x", quiet=True) is None


def test_close_ends_an_unfinished_line():
    out = _Terminal()
    bar = ProgressBar(out, "x")
    bar(1, 3)
    bar.close()
    assert out.getvalue().endswith("1/3\n")


def test_csv_rows_parsed_are_counted(tmp_path: Path):
    n = 2 * PROGRESS_ROWS + 5
    path = tmp_path / "long.csv"
    path.write_text("time,x\n" + "".join(f"{i * 0.01},{i}\n" for i in range(n)))
    calls: list[tuple[int, int]] = []
    cols = read_columns(path, progress=lambda done, total: calls.append((done, total)))
    np.testing.assert_array_equal(cols["x"], np.arange(n))
    assert calls[-1] == (n, n)
    assert [d for d, _ in calls[:-1]] == [PROGRESS_ROWS, 2 * PROGRESS_ROWS]
    assert all(t == n for _, t in calls)
    out = io.StringIO()
    read_columns(path, progress=ProgressBar(out, "reading", enabled=True))
    assert out.getvalue().endswith(f"100 %  {n}/{n}\n")

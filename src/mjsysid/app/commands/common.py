"""Pieces every command shares: exit codes and the report step."""

from __future__ import annotations

import argparse
import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from mjsysid.util.files import read_yaml, remove_write_leftovers
from mjsysid.util.limits import check_limit
from mjsysid.util.lock import folder_lock
from mjsysid.util.mujoco_log import mujoco_log_in
from mjsysid.util.progress import ProgressBar, progress_bar

if TYPE_CHECKING:
    from mjsysid.params.parameter import ParameterDict

EXIT_OK, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 130
EXPERIMENT_HELP = "experiment YAML file, or example:NAME"
RUN_FILE = "run.yaml"  # what 'mjsysid fit' (or the demo) records to rebuild a results folder


def read_run_info(folder: Path, command: str, needs: str = "a folder") -> Any:
    """The :data:`RUN_FILE` of results folder ``folder``, as read from its YAML.

    Raises:
      FileNotFoundError: It is missing (the message says that ``mjsysid <command>`` needs
        ``needs`` written by ``mjsysid fit``).
    """
    run_file = folder / RUN_FILE
    if not run_file.is_file():
        raise FileNotFoundError(
            f"{str(run_file)!r} is missing; 'mjsysid {command}' needs {needs} written by "
            "'mjsysid fit'"
        )
    return read_yaml(run_file)


def describe(
    parser: argparse.ArgumentParser, description: str, *, experiment: str | None = None
) -> None:
    """Sets a command's ``description`` and, with ``experiment`` (the help text, e.g.
    :data:`EXPERIMENT_HELP`), declares its first argument: the experiment file."""
    parser.description = description
    if experiment is not None:
        parser.add_argument("experiment", help=experiment)


def add_quiet(parser: argparse.ArgumentParser, what: str) -> None:
    """``-q``/``--quiet``: no ``what`` (e.g. ``"progress lines"``) on stderr."""
    parser.add_argument("-q", "--quiet", action="store_true", help=f"no {what}")


def add_no_report(parser: argparse.ArgumentParser) -> None:
    """``--no-report``: the results folder without ``report.html``."""
    parser.add_argument("--no-report", action="store_true", help="do not write report.html")


def add_no_videos(parser: argparse.ArgumentParser) -> None:
    """``--no-videos``: the report without its videos (the slow part of a report)."""
    parser.add_argument(
        "--no-videos", action="store_true", help="write the report without its videos (faster)"
    )


@dataclass
class Phases:
    """The time of a command by phase, said on ``err`` as it goes (unless ``quiet``).

    ``with phases("fitting"):`` adds the phase's wall time (s) to ``seconds["fitting"]`` and,
    once it has lasted ``announce_after`` s, says ``[fitting] ...`` (quick phases stay silent,
    and so does a phase called with ``announce=False``, whose own lines show it going on);
    :meth:`summary` is the whole time, phase by phase.
    """

    err: TextIO
    quiet: bool = False
    announce_after: float = 0.5
    seconds: dict[str, float] = field(default_factory=dict)

    def _say(self, name: str) -> None:
        print(f"[{name}] ...", file=self.err, flush=True)

    @contextlib.contextmanager
    def __call__(self, name: str, announce: bool = True) -> Iterator[None]:
        timer = threading.Timer(self.announce_after, self._say, (name,))
        timer.daemon = True
        if announce and not self.quiet:
            timer.start()
        t0 = time.perf_counter()
        try:
            yield
        finally:
            timer.cancel()
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0

    def summary(self) -> str:
        """E.g. ``time 8.0 s: loading 0.4 s, fitting 6.1 s, intervals 0.2 s, ...``."""
        parts = ", ".join(f"{name} {t:.1f} s" for name, t in self.seconds.items())
        return f"time {sum(self.seconds.values()):.1f} s: {parts}"


def loading_progress(err: TextIO, quiet: bool = False) -> Callable[[str], ProgressBar | None]:
    """The ``progress`` factory of :func:`~mjsysid.app.experiment.load_experiment`: a bar on
    ``err`` per recording read (``"  reading 'run.csv' [###---] 40 %"``) where ``err`` is a
    terminal, none with ``quiet`` (``-q``)."""

    def factory(label: str) -> ProgressBar | None:
        return progress_bar(err, f"  {label}", quiet=quiet)

    return factory


@contextlib.contextmanager
def results_folder(out: Path, err: TextIO) -> Iterator[Path]:
    """Holds the lock of results folder ``out`` and clears what killed runs left in it;
    MuJoCo logs its warnings to ``out/mujoco_log.txt`` meanwhile (not the working directory).

    Raises:
      FolderLockedError: Another live run writes ``out`` (an ``OSError``: the CLI says so).
    """

    def note(text: str) -> None:
        print(f"note: {text}", file=err)

    with folder_lock(out, note=note), mujoco_log_in(out):
        removed = remove_write_leftovers(out)
        if removed:
            print(
                f"note: removed the leftovers of an interrupted save in {out}: {removed}", file=err
            )
        yield out


def report_available() -> bool:
    """Whether the report extra (its optional dependencies) is installed."""
    from mjsysid.output.report import missing_dependencies

    return not missing_dependencies()


def write_report(
    exp_or_seqs: Any,
    params: ParameterDict,
    opt_params: ParameterDict,
    result: Any,
    rf: Any,
    out: Path,
    err: TextIO,
    confidence: Any = None,
    validation: Any = None,
    quiet: bool = False,
    videos: bool = True,
    plotly_js: str = "shared",
) -> None:
    """Writes the default HTML report into ``out``, or says on ``err`` why it is skipped.

    ``confidence``: the intervals already computed (default: the report computes them);
    ``validation``: a :class:`~mjsysid.fit.validation.ValidationTable` (its section);
    ``videos``: ``False`` leaves them out (``--no-videos``); ``plotly_js``: where the page
    reads plotly.js from (:mod:`mjsysid.output.report.plotly_source`).
    The videos rendered are counted on a bar on ``err`` when it is a terminal (not with
    ``quiet``)."""
    if not report_available():
        print(
            "report skipped: install the report extra (pip install -e '.[report]' in the "
            "mjsysid checkout)",
            file=err,
        )
        return
    from mjsysid.output.report import default_report

    bar = progress_bar(err, "  rendering videos", quiet=quiet)
    try:
        path = default_report(
            [exp_or_seqs],
            params,
            opt_params,
            result,
            rf,
            out,
            confidence=confidence,
            validation=validation,
            progress=bar,
            messages="file",
            videos="auto" if videos else False,
            plotly_js=plotly_js,
        )
    except ImportError as e:
        print(f"report skipped: {e}", file=err)
        return
    finally:
        if bar is not None:
            bar.close()
    print(f"report: {path}", file=err)


def parse_prediction_horizons(text: str | None) -> tuple[float, ...] | None:
    """``--horizons`` of ``evaluate`` and ``compare``: prediction horizons in seconds,
    separated by commas (``None`` when not given)."""
    if text is None:
        return None
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ValueError(
            f"--horizons must be seconds separated by commas (0.1,0.5,1), got {text!r}"
        ) from None
    if not values or any(not (math.isfinite(v) and v > 0) for v in values):
        raise ValueError(f"--horizons must be positive finite seconds, got {text!r}")
    for v in values:
        check_limit("max_duration_s", v, "--horizons")
    return values

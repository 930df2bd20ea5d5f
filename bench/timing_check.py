"""The timing check on an independent truth: the source document's Furuta capture.

``bench/truth/furuta_doc.py`` simulates the document's rotary pendulum and DC motor in its
own plain loop and captures it as the hobby firmware does: the command applied during the
period that ends at the logged row (``command_timing: before``). ``furuta_doc_fit`` writes the
experiment file a user writes for it (2 s shooting windows, the document's far-off starting
values). This script runs :func:`mjsysid.app.timing_check.timing_check` (what ``mjsysid
check`` and ``mjsysid fit`` run) on that experiment declared right (``before``) and declared
wrong (``held``, the default: the trap the issue found silent) and prints the costs, the
verdict and the time. Run ``python bench/timing_check.py``. Figures go in ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

from mjsysid.app.experiment import load_experiment
from mjsysid.app.timing_check import timing_check

try:  # run as a script (bench/ on sys.path) or imported from tests/bench
    import furuta_doc_fit as case
except ImportError:  # pragma: no cover
    from bench import furuta_doc_fit as case  # type: ignore[no-redef]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", help="write the case's files here (default: a temp folder)")
    args = parser.parse_args(argv)
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="timing_"))
    path = case.write_case(folder)
    text = path.read_text()
    print("| declared | costs by row shift | verdict | time |")
    print("| --- | --- | --- | --- |")
    for declared in ("before", "held"):
        exp_file = folder / f"experiment_{declared}.yaml"
        body = text if declared == "before" else text.replace("command_timing: before, ", "")
        exp_file.write_text(body)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (the case's loader warnings are not measured)
            exp = load_experiment(exp_file)
        t0 = time.perf_counter()
        check = timing_check(exp)
        wall = time.perf_counter() - t0
        costs = ", ".join(f"{s:+d}: {c:.3g}" for s, c in sorted(check.costs.items()))
        said = check.message()
        verdict = "quiet" if not said else f"warns: {said.split('. Fix:')[0].split(': ', 1)[1]}"
        print(f"| {declared} | {costs} | {verdict[:90]} | {wall:.1f} s |")


if __name__ == "__main__":
    main()

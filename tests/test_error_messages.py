"""The bad-input tables (``tests/<stage>/test_<module>_bad_inputs.py``) as one catalogue.

Each table is run next to the tests of the module it probes; this checks the catalogue as a
whole: it stays large, its case ids are unique across all tables (so a failing id names one
case) and every case pins an exception class and a message fragment.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TABLES = sorted(Path(__file__).parent.glob("*/test_*_bad_inputs.py"))


def _table(path: Path) -> ModuleType:
    """The table's module: the one pytest imported (by its unique basename), else a fresh one."""
    module = sys.modules.get(path.stem)
    if module is not None and Path(module.__file__ or "").resolve() == path.resolve():
        return module
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_catalogue_is_large_enough():
    cases = [case for path in TABLES for case in _table(path).CASES]
    assert len(TABLES) >= 10 and all(_table(path).CASES for path in TABLES)
    assert len(cases) >= 40
    ids = [c.id for c in cases]
    assert len(set(ids)) == len(ids)
    for case in cases:
        _make, exc, match = case.values
        assert isinstance(exc, type) and issubclass(exc, BaseException), case.id
        assert isinstance(match, str) and match, case.id

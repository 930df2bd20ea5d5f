"""The modules of mjsysid under the path the API specification uses.

Code written against the specification imports low-level modules from ``_src``
(``from mujoco.sysid._src import signal_modifier``); with mjsysid that reads
``from mjsysid._src import signal_modifier`` and gives the module ``mjsysid.signal_modifier``.
Every module of the package is reachable this way, imported on first use.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def __getattr__(name: str) -> ModuleType:
    if not name.startswith("__"):
        try:
            return importlib.import_module(f"mjsysid.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"mjsysid.{name}":
                raise
    raise AttributeError(f"module 'mjsysid._src' has no attribute {name!r}")

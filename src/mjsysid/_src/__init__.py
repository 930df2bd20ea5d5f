"""The modules of mjsysid under the paths the API specification and ``mujoco.sysid`` use.

Code written against the specification imports low-level modules from ``_src``
(``from mujoco.sysid._src import signal_modifier``); with mjsysid that reads
``from mjsysid._src import signal_modifier``. Each name below is the module of mjsysid that
holds what the module of that name holds there, imported on first use: an attribute
(``mjsysid._src.optimize``) and an import path (``from mjsysid._src.optimize import ...``)
give the module itself, not a copy. Where the peer's module of a name gathers names from
several of mjsysid's (``trajectory``, ``residual``, ``model_modifier``, ``parameter``, ``io``),
the entry is a facade module here (``_trajectory.py``, ...; see ``_facade.py``) that looks
names up in those modules; ``_src.<mjsysid module name>`` (``rollout`` ...) stays available.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

#: ``_src.<name>`` -> the mjsysid module behind it.
MODULES = {
    "alignment": "mjsysid.objective.alignment",
    "control_transform": "mjsysid.objective.control_transform",
    "demo": "mjsysid.app.demo",
    "excitation": "mjsysid.data.excitation",
    "experiment": "mjsysid.app.experiment",
    "inertia": "mjsysid.params.inertia",
    "intervals": "mjsysid.fit.intervals",
    "io": "mjsysid._src._io",
    "lm": "mjsysid.fit.lm",
    "model_modifier": "mjsysid._src._model_modifier",
    "model_sequences": "mjsysid.data.sequences",
    "optimize": "mjsysid.fit.optimize",
    "param_kinds": "mjsysid.params.kinds",
    "parameter": "mjsysid._src._parameter",
    "planning": "mjsysid.app.planning",
    "plotting": "mjsysid.output.plotting",
    "protocols": "mjsysid.objective.protocols",
    "recording": "mjsysid.data.recording",
    "report": "mjsysid.output.report",
    "residual": "mjsysid._src._residual",
    "results": "mjsysid.output.results",
    "rollout": "mjsysid.sim.rollout",
    "shooting": "mjsysid.objective.windows",
    "signal_modifier": "mjsysid.signal_modifier",
    "signal_names": "mjsysid.data.signals",
    "signal_transform": "mjsysid.objective.signal_transform",
    "timeseries": "mjsysid.data.timeseries",
    "trajectory": "mjsysid._src._trajectory",
}


def __getattr__(name: str) -> ModuleType:
    if name in MODULES:
        return importlib.import_module(MODULES[name])
    raise AttributeError(
        f"module 'mjsysid._src' has no attribute {name!r}; its modules are {sorted(MODULES)}"
    )


def __dir__() -> list[str]:
    return sorted(MODULES)


class _AliasLoader(importlib.abc.Loader):
    """Loads ``mjsysid._src.<name>`` as the existing module it names (no second copy)."""

    def __init__(self, target: str) -> None:
        self._target = target
        self._spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self._target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self._spec  # the import system set the alias spec; keep the real one


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Finds ``mjsysid._src.<name>`` for the names in :data:`MODULES`, and nothing else."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        prefix, _, name = fullname.rpartition(".")
        if prefix != __name__ or name not in MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(MODULES[name]))


if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
    sys.meta_path.append(_AliasFinder())

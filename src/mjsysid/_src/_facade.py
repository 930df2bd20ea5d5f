"""Modules of ``mjsysid._src`` that gather names from several mjsysid modules.

``mujoco.sysid``'s ``_src.<name>`` modules re-export names defined elsewhere (its
``_src.trajectory`` holds ``ModelSequences`` and ``create_initial_state`` too). A facade
module here looks a name up in its list of mjsysid modules, first hit wins; it only imports,
and nothing inside mjsysid imports a facade.
"""

from __future__ import annotations

import importlib
from typing import Any


class Chain:
    """Attribute lookup through ``bases`` (module names), for a facade's ``__getattr__``."""

    def __init__(self, facade: str, bases: tuple[str, ...]) -> None:
        self.facade, self.bases = facade, bases

    def getattr(self, name: str) -> Any:
        for base in self.bases:
            module = importlib.import_module(base)
            if hasattr(module, name):
                return getattr(module, name)
        raise AttributeError(
            f"module {self.facade!r} has no attribute {name!r} (looked in {list(self.bases)})"
        )

    def dir(self) -> list[str]:
        names: set[str] = set()
        for base in self.bases:
            names.update(n for n in dir(importlib.import_module(base)) if not n.startswith("_"))
        return sorted(names)

"""Stage 1: parameters, their kinds and inertia maths, and applying them to specs and models.

Importing this package imports both modules that define parameter kinds
(:mod:`~mjsysid.params.kinds`, :mod:`~mjsysid.params.inertia`), so the kind registry of
:mod:`~mjsysid.params.parameter` is complete wherever parameters are loaded.
"""

from mjsysid.params import inertia, kinds

__all__ = ["inertia", "kinds"]

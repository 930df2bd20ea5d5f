"""Checks that every public name of the peer toolbox (``mujoco.sysid``) exists in
``mjsysid.compat`` (the door for peer code) with a compatible signature.

Run where ``mujoco[sysid]`` is installed::

    python bench/compat_check.py            # a table of what is missing or incompatible
    python bench/compat_check.py --strict   # exit 1 when anything is (for CI or a release)

For every public name of ``mujoco.sysid`` and of its ``_src`` modules, the same name is
looked up in ``mjsysid.compat`` and in ``mjsysid.compat._src.<module>``. A callable is
compatible when every parameter of the peer's signature is accepted by ours under the same name and
position (ours may add parameters with defaults). Names left out on purpose are listed in
``LEFT_OUT`` with the reason, as in the README section "Coming from mujoco.sysid". This is
the only place besides the benchmarks that imports the peer.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import sys
from dataclasses import dataclass
from types import ModuleType

_SLICE = (
    "TimeSeries.slice_by_name is a method (self, names); TimeSeries.slice_by_name(ts, [...]) "
    "works positionally, only the keywords ts=/enabled_sensors= differ (a descriptor for "
    "them is not worth the confusion)"
)
_BUILDER = (
    "the peer's report builder and its section classes (custom report layouts); "
    "mjsysid.compat.default_report returns a report with the peer's save(path) and build()"
)

#: ``module:name`` (or ``module:Class.member``) of the peer -> why mjsysid.compat does not have
#: it as the checker wants (the same reasons as docs/coming-from-mujoco-sysid.md).
LEFT_OUT: dict[str, str] = {
    "mujoco.sysid:tests": "the peer's own test package",
    "mujoco.sysid:TimeSeries.slice_by_name": _SLICE,
    "mujoco.sysid._src.timeseries:TimeSeries.slice_by_name": _SLICE,
}
LEFT_OUT_MODULES: dict[str, str] = {
    "mujoco.sysid.report.builder": _BUILDER,
    "mujoco.sysid.report.sections": _BUILDER,
    "mujoco.sysid.report.utils": _BUILDER,
}


@dataclass(frozen=True)
class Finding:
    where: str
    problem: str


def _public(module: ModuleType) -> dict[str, object]:
    """The peer's own public functions and classes of ``module`` (and, for the package
    itself, its public submodules)."""
    names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    out = {}
    for n in names:
        obj = getattr(module, n, None)
        if isinstance(obj, ModuleType):
            if module.__name__ == "mujoco.sysid" and obj.__name__.startswith("mujoco.sysid"):
                out[n] = obj
        elif callable(obj) and (getattr(obj, "__module__", "") or "").startswith("mujoco.sysid"):
            out[n] = obj
    return out


def _accepts(ours: inspect.Signature, theirs: inspect.Signature) -> str:
    """Empty when ``ours`` accepts every call ``theirs`` accepts (by name and position)."""
    op = list(ours.parameters.values())
    var_kw = any(p.kind is p.VAR_KEYWORD for p in op)
    var_pos = any(p.kind is p.VAR_POSITIONAL for p in op)
    by_name = {p.name: (i, p) for i, p in enumerate(op)}
    for i, p in enumerate(theirs.parameters.values()):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            if p.kind is p.VAR_KEYWORD and not var_kw:
                return f"takes no **{p.name}"
            if p.kind is p.VAR_POSITIONAL and not var_pos:
                return f"takes no *{p.name}"
            continue
        if p.name not in by_name:
            if var_kw and p.kind is not p.POSITIONAL_ONLY:
                continue
            return f"has no parameter {p.name!r}"
        j, q = by_name[p.name]
        positional = p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        if positional and j != i and p.default is p.empty:
            return f"takes {p.name!r} at position {j}, the peer at {i}"
        if p.default is not p.empty and q.default is q.empty and q.kind is not q.VAR_KEYWORD:
            return f"requires {p.name!r}, which the peer makes optional"
    for q in op:
        if q.default is q.empty and q.kind in (q.POSITIONAL_OR_KEYWORD, q.KEYWORD_ONLY):
            if q.name not in theirs.parameters:
                return f"requires {q.name!r}, which the peer does not have"
    return ""


def _signature(obj: object) -> inspect.Signature | None:
    try:
        return inspect.signature(obj)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _compare(where: str, theirs: object, ours: object) -> list[Finding]:
    if ours is None:
        return [Finding(where, "missing")]
    out = []
    if inspect.isclass(theirs):
        if not inspect.isclass(ours) and not callable(ours):
            return [Finding(where, "is not a class or callable in mjsysid")]
        for name in vars(theirs):
            if name.startswith("_") and name != "__init__":
                continue
            member = getattr(theirs, name)  # bound for class and static methods
            if not callable(member) and not isinstance(member, property):
                continue  # a field's default; instances carry the field
            mine = getattr(ours, name, None)
            if mine is None:
                out.append(Finding(f"{where}.{name}", "missing"))
                continue
            out += _compare_callables(f"{where}.{name}", member, mine)
        return out
    return _compare_callables(where, theirs, ours)


def _compare_callables(where: str, theirs: object, ours: object) -> list[Finding]:
    if not callable(theirs) or not callable(ours):
        return []
    st, so = _signature(theirs), _signature(ours)
    if st is None or so is None:
        return []
    problem = _accepts(so, st)
    return [Finding(where, f"signature: mjsysid {problem}")] if problem else []


def _peer_modules() -> list[ModuleType]:
    peer = importlib.import_module("mujoco.sysid")
    mods = [peer]
    for info in pkgutil.walk_packages(peer.__path__, "mujoco.sysid."):
        if ".tests" in info.name or info.name.endswith("_test"):
            continue
        try:
            mods.append(importlib.import_module(info.name))
        except ImportError:
            continue
    return mods


def _our_module(peer_name: str) -> ModuleType | None:
    ours = peer_name.replace("mujoco.sysid", "mjsysid.compat", 1)
    try:
        return importlib.import_module(ours)
    except ImportError:
        return None


def check() -> list[Finding]:
    """Every incompatibility found, in the peer's module order."""
    import mjsysid.compat as mjsysid

    findings = []
    for mod in _peer_modules():
        if any(mod.__name__.startswith(m) for m in LEFT_OUT_MODULES):
            continue
        ours_mod = _our_module(mod.__name__)
        for name, obj in _public(mod).items():
            where = f"{mod.__name__}:{name}"
            if where in LEFT_OUT:
                continue
            if isinstance(obj, ModuleType):
                if getattr(ours_mod, name, None) is None and getattr(mjsysid, name, None) is None:
                    findings.append(Finding(where, "module missing"))
                continue
            mine = getattr(ours_mod, name, None) if ours_mod is not None else None
            if mine is None and mod.__name__ == "mujoco.sysid":
                mine = getattr(mjsysid, name, None)
            if ours_mod is None and mine is None:
                findings.append(Finding(where, f"module {mod.__name__} has no mjsysid counterpart"))
                continue
            findings += [f for f in _compare(where, obj, mine) if f.where not in LEFT_OUT]
    return findings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true", help="exit 1 on any finding")
    args = parser.parse_args(argv)
    try:
        findings = check()
    except ImportError as e:
        print(f"the peer is not installed ({e}); pip install 'mujoco[sysid]'", file=sys.stderr)
        return 2
    for f in findings:
        print(f"{f.where:70s} {f.problem}")
    print(
        f"{len(findings)} findings; {len(LEFT_OUT)} names and {len(LEFT_OUT_MODULES)} modules "
        "left out on purpose"
    )
    return 1 if findings and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())

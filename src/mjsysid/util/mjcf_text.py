"""The MJCF text of a spec with every number in full.

MuJoCo's XML writer (``MjSpec.to_xml``) prints numbers with 6 significant digits: an
identified damping of ``0.00011898472303376552`` is saved as ``0.000118985``, a URDF-derived
centre of mass ``0.060245187591695615`` as ``0.0602452``, so the saved model differs from the
fitted one by up to 5e-7 relative. :func:`spec_xml` writes ``to_xml``'s text again with
each such number in the shortest form that reads back as the same double (``repr``).

How: the written elements are paired with the spec's (bodies, joints, geoms, sites,
actuators, tendons, pairs, each in document order, checked by name where they have one), and
an attribute is rewritten only where every number it holds is the 6-digit rounding of the
element's value (the spec attribute of the same name; for ``<inertial>``, which the writer
takes from the compiled model, ``body_ipos``, ``body_iquat``, ``body_mass``,
``body_inertia``); the elements of ``<default>`` classes likewise from the class's spec
default. Anything else (unpaired elements, float32 values such as colours) is left as written;
the result is checked by compiling it: when it is not at least as close to the spec's
compiled model as ``to_xml``'s own text, that text is returned.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any

import mujoco
import numpy as np

log = logging.getLogger(__name__)

# (spec list, the tags written for it (None: every child), where they are written)
_SECTIONS: tuple[tuple[str, tuple[str, ...] | None, str], ...] = (
    ("bodies", ("body",), "worldbody"),
    ("joints", ("joint", "freejoint"), "worldbody"),
    ("geoms", ("geom",), "worldbody"),
    ("sites", ("site",), "worldbody"),
    ("tendons", ("spatial", "fixed"), "tendon"),
    ("pairs", ("pair",), "contact"),
    ("actuators", None, "actuator"),
)
_INERTIAL = {"pos": "body_ipos", "quat": "body_iquat", "mass": "body_mass"}
_INERTIAL_DIAG = "body_inertia"
# sections whose placement the writer may take from the compiled model (<prefix>_pos, ...)
_MODEL_PREFIX = {"bodies": "body", "geoms": "geom", "sites": "site"}
_COMPARED = (
    "body_pos", "body_quat", "body_mass", "body_ipos", "body_iquat", "body_inertia",
    "geom_size", "geom_pos", "geom_quat", "geom_friction", "dof_damping", "dof_armature",
    "dof_frictionloss", "jnt_stiffness", "jnt_range", "actuator_gear", "actuator_gainprm",
    "actuator_biasprm", "actuator_dynprm",
)  # fmt: skip
_DEFAULT_KINDS = ("joint", "geom", "site", "camera", "light", "tendon", "pair", "equality")
_SHORTCUT_ATTRIBUTES = ("name", "class", "joint", "site", "tendon", "body", "type")


def spec_xml(spec: mujoco.MjSpec) -> str:
    """``spec.to_xml()`` with the numbers the writer rounded written in full.

    Args:
      spec: A spec that compiles (it is compiled here).

    Returns:
      The MJCF text; it compiles to the same model as ``spec`` up to what the text cannot
      hold (defaults classes keep the writer's digits).
    """
    model = spec.compile()
    text = spec.to_xml()
    parser = ET.XMLParser(target=ET.TreeBuilder(insert_comments=True))
    root = ET.fromstring(text, parser=parser)
    for section, element, spec_element in _paired(root, spec):
        compiled = _compiled_row(model, section, int(spec_element.id))
        _write_full(element, spec_element, compiled)
        if element.tag == "body":
            inertial = element.find("inertial")
            if inertial is not None:
                _write_inertial(inertial, model, int(spec_element.id))
    for element, spec_element in _defaults(root, spec):
        _write_full(element, spec_element, {})
    ET.indent(root)
    full = ET.tostring(root, encoding="unicode") + "\n"
    if _distance(full, spec, model) > _distance(text, spec, model):
        log.warning("spec_xml: the full-precision text compiles further off; kept to_xml's")
        return text
    return full


def _paired(root: ET.Element, spec: mujoco.MjSpec) -> Iterator[tuple[str, ET.Element, Any]]:
    """``(section, written element, spec element)``, section by section; a section whose
    count or names disagree is skipped."""
    for attr, tags, where in _SECTIONS:
        place = root.find(where)
        if place is None:
            continue
        found = place if tags is None else place.iter()
        elements = [e for e in found if isinstance(e.tag, str) and (tags is None or e.tag in tags)]
        specs = list(getattr(spec, attr))[1 if attr == "bodies" else 0 :]
        if _same(elements, specs):
            yield from ((attr, e, se) for e, se in zip(elements, specs, strict=True))


def _defaults(root: ET.Element, spec: mujoco.MjSpec) -> Iterator[tuple[ET.Element, Any]]:
    """The elements of every ``<default>`` class with the class's spec element of their kind
    (``<joint>`` with ``find_default(class).joint``, an actuator tag with ``.actuator``)."""
    for default in root.iter("default"):
        found = spec.find_default(default.get("class", "main"))
        if found is None:
            continue
        for child in default:
            kind = child.tag if child.tag in _DEFAULT_KINDS else "actuator"
            if isinstance(child.tag, str) and child.tag != "default" and hasattr(found, kind):
                yield child, getattr(found, kind)


def _same(elements: list[ET.Element], specs: list[Any]) -> bool:
    if len(elements) != len(specs):
        return False
    return all(e.get("name", s.name) == s.name for e, s in zip(elements, specs, strict=True))


def _compiled_row(model: mujoco.MjModel, section: str, i: int) -> dict[str, np.ndarray]:
    """``{attribute: the compiled model's row}`` of element ``i`` of ``section``."""
    prefix = _MODEL_PREFIX.get(section)
    if prefix is None:
        return {}
    return {k: getattr(model, f"{prefix}_{k}")[i] for k in ("pos", "quat", "size") if
            hasattr(model, f"{prefix}_{k}")}  # fmt: skip


def _write_full(element: ET.Element, spec_element: Any, compiled: dict[str, np.ndarray]) -> None:
    """Each numeric attribute in full from the spec's float64 value of the same name, or
    else from the compiled row (``compiled``), whichever the text is the rounding of."""
    for key, text in element.attrib.items():
        if key in _SHORTCUT_ATTRIBUTES:
            continue
        value = getattr(spec_element, key, None)
        if isinstance(value, bool) or not isinstance(value, int | float | np.ndarray):
            value = None
        elif isinstance(value, np.ndarray) and value.dtype != np.float64:
            value = None  # (float32 colours: their digits are not the model's)
        full = text if value is None else _full(text, np.asarray(value, dtype=float).ravel())
        if full == text and key in compiled:
            full = _full(text, np.asarray(compiled[key], dtype=float).ravel())
        element.set(key, full)


def _write_inertial(inertial: ET.Element, model: mujoco.MjModel, body: int) -> None:
    fields = dict(_INERTIAL, diaginertia=_INERTIAL_DIAG)
    for key, text in inertial.attrib.items():
        if key in fields:
            values = np.atleast_1d(getattr(model, fields[key])[body]).astype(float)
            inertial.set(key, _full(text, values))


def _full(text: str, values: np.ndarray) -> str:
    """``text`` with its numbers as ``values[:k]`` in full, when each is their 6-digit
    rounding; else ``text`` as it is."""
    try:
        written = [float(t) for t in text.split()]
    except ValueError:
        return text
    if not written or len(written) > values.size:
        return text
    exact = values[: len(written)]
    if any(float(f"{v:.6g}") != w for v, w in zip(exact, written, strict=True)):
        return text
    return " ".join(_shortest(v) for v in exact)


def _shortest(v: float) -> str:
    text = repr(float(v))
    return text[:-2] if text.endswith(".0") else text


def _distance(text: str, spec: mujoco.MjSpec, model: mujoco.MjModel) -> float:
    """The largest relative difference of the compiled ``text`` from ``model`` over the
    float fields they share (``inf`` when it does not compile)."""
    try:
        copy = mujoco.MjSpec.from_string(text, assets=spec.assets)
        other = copy.compile()
    except ValueError:
        return float("inf")
    worst = 0.0
    for name in _COMPARED:
        a, b = getattr(model, name), getattr(other, name)
        if a.shape == b.shape and a.size:
            worst = max(worst, float(np.max(np.abs(a - b) / np.maximum(np.abs(a), 1e-300))))
    return worst

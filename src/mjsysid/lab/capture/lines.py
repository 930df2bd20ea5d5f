"""Line templates: ``S,{time_ms:d},{motor_rad},{pwm:d}`` as a parser and a formatter.

A template is literal text with named fields in braces (Python ``str.format`` syntax). A
field without a format spec is a real number; ``:d`` is an integer (parsed only from digits,
formatted after rounding); any other spec (``:.4f``) formats a real number. A line matches
when the whole line (without surrounding white space) is the template with a number in every
field.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass

from mjsysid.util.errors import must_be

_REAL = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)"
_INT = r"[-+]?\d+"
_NAME = re.compile(r"[A-Za-z_]\w*\Z")


@dataclass(frozen=True)
class LineFormat:
    """A compiled line template.

    Attributes:
      template: The template text, e.g. ``"S,{time_ms:d},{motor_rad},{pwm:d}"``.
      fields: The field names in order of appearance.
      integer: The fields with the ``:d`` spec.
      prefix: The literal text before the first field (``"S,"``): a line that starts with it
        but does not match is *malformed*, any other line is *foreign* (a boot message, a
        debug print).
    """

    template: str
    fields: tuple[str, ...]
    integer: frozenset[str]
    prefix: str
    pattern: re.Pattern[str]

    @classmethod
    def compile(cls, template: str, what: str = "template") -> LineFormat:
        """Compiles ``template``; errors name ``what`` (the YAML key of the template)."""
        if not isinstance(template, str) or not template.strip():
            raise ValueError(
                must_be(what, "a non-empty line template such as 'M{pwm:d}'", template)
            )
        try:
            parts = list(string.Formatter().parse(template))
        except ValueError as e:
            raise ValueError(must_be(what, f"a valid template ({e})", template)) from None
        regex, fields, integer = [], [], set()
        for literal, name, spec, conversion in parts:
            regex.append(re.escape(literal))
            if name is None:
                continue
            if not _NAME.match(name) or conversion:
                raise ValueError(
                    must_be(f"{what}: field {{{name}}}", "a plain name such as {pwm:d}", template)
                )
            if name in fields:
                raise ValueError(must_be(what, f"a template naming {name!r} once", template))
            fields.append(name)
            if spec == "d":
                integer.add(name)
            regex.append(f"(?P<{name}>{_INT if spec == 'd' else _REAL})")
        if "\n" in template or "\r" in template:
            raise ValueError(must_be(what, "one line (no newline in the template)", template))
        prefix = parts[0][0] if parts else template
        return cls(template, tuple(fields), frozenset(integer), prefix, re.compile("".join(regex)))

    def parse(self, line: str) -> dict[str, float] | None:
        """The field values of ``line`` (raw device units), or ``None`` when it does not match."""
        m = self.pattern.fullmatch(line.strip())
        if m is None:
            return None
        return {k: float(v) for k, v in m.groupdict().items()}

    def is_foreign(self, line: str) -> bool:
        """``True`` for a line that does not even start like this template (see ``prefix``)."""
        return not line.startswith(self.prefix) if self.prefix else False

    def format(self, values: Mapping[str, float]) -> str:
        """The line for ``values`` (without newline); integer fields are rounded."""
        missing = [f for f in self.fields if f not in values]
        if missing:
            raise KeyError(f"line {self.template!r} needs values for {missing}")
        args = {
            f: round(float(values[f])) if f in self.integer else float(values[f])
            for f in self.fields
        }
        return self.template.format(**args)

    def applied(self, field: str, value: float) -> float:
        """``value`` as the line carries it: rounded for an integer field."""
        return float(round(value)) if field in self.integer else float(value)

"""The spelling mjsysid suggests for a number YAML read as text is one YAML reads as a number."""

import pytest
import yaml

from mjsysid.util.errors import yaml_number


@pytest.mark.parametrize("text", ["1e9", "1.0e9", "1e-3", "2e-7", "1e20", "3e-12", "-4e5"])
def test_the_suggested_spelling_reads_as_the_same_number(text):
    assert isinstance(yaml.safe_load(text), str)  # PyYAML: a dot and a signed exponent
    assert yaml.safe_load(yaml_number(text)) == float(text)

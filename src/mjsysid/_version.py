"""The package version, in a leaf module so that any module may read it."""

__version__ = "0.1.0"

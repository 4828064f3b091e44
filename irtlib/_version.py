"""The package version: the one place it is kept (pyproject.toml reads it; banks record it)."""

__version__ = "0.1.0"

"""Unit tests for irtbook.reproducibility on hand-made papermill notebooks."""

from __future__ import annotations

import json
import math
import platform
from importlib import metadata

import pytest

from irtbook.reproducibility import execution_table, package_versions, read_papermill_metadata


def _notebook(papermill: dict | None) -> dict:
    meta = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    if papermill is not None:
        meta["papermill"] = papermill
    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": meta,
        "cells": [
            {
                "cell_type": "code",
                "id": "c1",
                "metadata": {"tags": ["parameters"]},
                "execution_count": 1,
                "source": "QUICK = False\nSEED = 0\n",
                "outputs": [],
            }
        ],
    }


def _papermill(duration: float, parameters: dict) -> dict:
    # the shape papermill 2.x writes into metadata.papermill
    return {
        "default_parameters": {
            "QUICK": {"default": "False", "inferred_type_name": "None", "help": ""},
            "SEED": {"default": "0", "inferred_type_name": "None", "help": ""},
        },
        "duration": duration,
        "end_time": "2026-01-01T00:01:00.000000",
        "environment_variables": {},
        "exception": None,
        "input_path": "_build/executing/ch.source.ipynb",
        "output_path": "_build/executing/ch.ipynb",
        "parameters": parameters,
        "start_time": "2026-01-01T00:00:00.000000",
        "version": "2.7.0",
    }


@pytest.fixture
def executed_dir(tmp_path):
    notebooks = {
        "01_data": _notebook(_papermill(12.5, {"QUICK": True})),
        "intro": _notebook(_papermill(3.25, {"QUICK": True, "N_SPLITS": 20})),
        "reproducibility": _notebook(_papermill(1.0, {"QUICK": True})),
        "draft": _notebook(None),
    }
    for name, notebook in notebooks.items():
        (tmp_path / f"{name}.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    (tmp_path / "notes.txt").write_text("not a notebook", encoding="utf-8")
    return tmp_path


def test_read_papermill_metadata(executed_dir):
    record = read_papermill_metadata(executed_dir / "intro.ipynb")
    assert record["chapter"] == "intro"
    assert record["parameters"] == {"QUICK": True, "N_SPLITS": 20}
    assert record["default_parameters"] == {"QUICK": "False", "SEED": "0"}
    assert record["duration_s"] == pytest.approx(3.25)
    assert record["start_time"] == "2026-01-01T00:00:00.000000"
    assert record["papermill_version"] == "2.7.0"
    assert record["exception"] is None


def test_read_notebook_without_papermill_metadata(executed_dir):
    record = read_papermill_metadata(executed_dir / "draft.ipynb")
    assert record["chapter"] == "draft"
    assert record["parameters"] == {}
    assert math.isnan(record["duration_s"])
    assert record["papermill_version"] is None


def test_read_missing_notebook(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_papermill_metadata(tmp_path / "nope.ipynb")


def test_execution_table_rows_and_columns(executed_dir):
    table = execution_table(executed_dir, exclude=["reproducibility"])
    assert list(table.columns) == [
        "chapter",
        "parameters",
        "duration_s",
        "start_time",
        "end_time",
        "exception",
        "papermill_version",
    ]
    assert list(table["chapter"]) == ["01_data", "draft", "intro"]  # sorted, .txt ignored
    intro = table.set_index("chapter").loc["intro"]
    assert intro["parameters"] == "QUICK=True, N_SPLITS=20"
    assert intro["duration_s"] == pytest.approx(3.25)
    assert math.isnan(table.set_index("chapter").loc["draft", "duration_s"])
    assert table["duration_s"].sum() == pytest.approx(15.75)  # NaN skipped


def test_execution_table_order(executed_dir):
    table = execution_table(executed_dir, order=["intro", "01_data", "reproducibility"])
    assert list(table["chapter"]) == ["intro", "01_data", "reproducibility", "draft"]


def test_execution_table_empty_and_missing_dir(tmp_path):
    empty = execution_table(tmp_path)
    assert len(empty) == 0 and "duration_s" in empty.columns
    with pytest.raises(FileNotFoundError):
        execution_table(tmp_path / "missing")


def test_package_versions():
    table = package_versions(["numpy", "surely-not-an-installed-distribution"])
    versions = dict(zip(table["package"], table["version"], strict=False))
    assert versions["python"] == platform.python_version()
    assert versions["numpy"] == metadata.version("numpy")
    assert versions["surely-not-an-installed-distribution"] == "not installed"


def test_default_packages_cover_the_book_stack():
    packages = set(package_versions()["package"])
    for name in ["numpy", "scipy", "pandas", "torch", "py-irt", "pyro-ppl", "jupyter-book",
                 "myst-nb", "sphinx", "papermill"]:
        assert name in packages


# ---------------------------------------------------------------------------- the lock file
LOCK_TEXT = """\
#
# This file is autogenerated by pip-compile with Python 3.11
#
numpy==2.4.6 \\
    --hash=sha256:aaaa
    # via irtlib (pyproject.toml)
Py_IRT==0.7.1 \\
    --hash=sha256:bbbb
torch==2.13.0+cpu \\
    --hash=sha256:cccc
    # via
    #   irtlib (pyproject.toml)
"""


def test_read_lock_takes_every_pin_with_normalised_names(tmp_path):
    from irtbook.reproducibility import read_lock

    (tmp_path / "lock.txt").write_text(LOCK_TEXT)
    assert read_lock(tmp_path / "lock.txt") == {"numpy": "2.4.6", "py-irt": "0.7.1", "torch": "2.13.0+cpu"}


def test_lock_status_reports_checksum_and_differences(tmp_path):
    import hashlib

    from irtbook.reproducibility import lock_status

    path = tmp_path / "lock.txt"
    path.write_text(LOCK_TEXT)
    same = lock_status(path, installed={"numpy": "2.4.6", "py-irt": "0.7.1", "torch": "2.13.0+cpu", "extra": "1"})
    assert same["exists"] and same["matches"] and same["n_pinned"] == 3 and same["differences"].empty
    assert same["sha256"] == hashlib.sha256(LOCK_TEXT.encode()).hexdigest()
    other = lock_status(path, installed={"numpy": "2.4.5", "torch": "2.13.0+cpu"})
    assert not other["matches"]
    assert other["differences"].to_dict(orient="records") == [
        {"package": "numpy", "locked": "2.4.6", "installed": "2.4.5"},
        {"package": "py-irt", "locked": "0.7.1", "installed": "not installed"}]
    missing = lock_status(tmp_path / "none.txt")
    assert not missing["exists"] and missing["sha256"] is None and not missing["matches"]


def test_the_repository_lock_pins_the_book_and_test_environments():
    """requirements-lock.txt pins every direct dependency of the book and test extras, with hashes."""
    from pathlib import Path

    from irtbook.reproducibility import LOCK_FILE, read_lock

    lock = Path(__file__).resolve().parents[2] / LOCK_FILE
    pins = read_lock(lock)
    for name in ("numpy", "scipy", "pandas", "torch", "py-irt", "pyro-ppl", "jupyter-book", "papermill", "pytest",
                 "pytest-xdist", "pytest-cov", "ruff", "setuptools", "wheel"):
        assert name in pins, name
    assert pins["torch"].startswith("2.13.0") and pins["py-irt"] == "0.7.1"
    text = lock.read_text()
    assert "file://" not in text and text.count("==") == len(pins)
    blocks = [b for b in text.split("\n") if "==" in b]
    assert all(line.rstrip().endswith("\\") for line in blocks)         # every pin is followed by its hashes

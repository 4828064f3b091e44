"""The wheel ships every C source and header the library compiles at first use (pyproject's package data)."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_c_source_and_header_of_the_library_is_package_data():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["irtlib"]
    sources = {p.relative_to(ROOT / "irtlib").as_posix() for p in (ROOT / "irtlib").rglob("*.[ch]")}
    assert sources, "no C sources found under irtlib/"
    assert sources - set(data) == set(), "C sources or headers missing from [tool.setuptools.package-data]"

"""tools/dist.py: the wheels the book ships are built by the project's own backend, as pip builds them."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import dist  # noqa: E402  (tools/dist.py)


def _members(wheel: Path) -> dict[str, int]:
    """Each member of a wheel and its CRC-32, except RECORD (which lists them with their hashes)."""
    with zipfile.ZipFile(wheel) as archive:
        return {info.filename: info.CRC for info in archive.infolist() if not info.filename.endswith("/RECORD")}


@pytest.mark.book
def test_the_backends_hook_builds_the_wheel_pip_builds(tmp_path):
    ours = dist.build_wheel(ROOT, tmp_path / "ours", package="irtbook")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                    "--wheel-dir", str(tmp_path / "pip"), str(ROOT / "bookkit")], check=True, cwd=tmp_path)
    (theirs,) = (tmp_path / "pip").glob("irtbook-*.whl")
    assert ours.name == theirs.name
    assert _members(ours) == _members(theirs)
    assert any(name.startswith("irtbook/") and name.endswith(".py") for name in _members(ours))


def test_the_backend_is_read_from_pyproject(tmp_path):
    assert dist.build_backend(ROOT / "pyproject.toml") == "setuptools.build_meta"
    assert dist.build_backend(ROOT / "bookkit" / "pyproject.toml") == "setuptools.build_meta"
    bare = tmp_path / "pyproject.toml"
    bare.write_text('[project]\nname = "x"\n')
    with pytest.raises(ValueError, match=r"pyproject\.toml: no \[build-system\] build-backend"):
        dist.build_backend(bare)
    bare.write_text('[build-system]\nbuild-backend = ""\n')
    with pytest.raises(ValueError, match="not a module name"):
        dist.build_backend(bare)


def test_a_failing_build_says_which_wheel_and_why(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    (root / "bookkit" / "irtbook").mkdir(parents=True)
    (root / "bookkit" / "pyproject.toml").write_text(
        '[build-system]\nbuild-backend = "no_such_backend_module"\n')
    with pytest.raises(RuntimeError, match=r"(?s)building the irtbook wheel failed.*no_such_backend_module"):
        dist.build_wheel(root, tmp_path / "out", package="irtbook")

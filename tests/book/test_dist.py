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


def _small_repo(tmp_path: Path) -> Path:
    """A repository with a tiny irtlib and irtbook (their own pyproject.toml), committed to git."""
    root = tmp_path / "repo"
    (root / "irtlib").mkdir(parents=True)
    (root / "irtlib" / "__init__.py").write_text('__version__ = "1.2.3"\n')
    (root / "README.md").write_text("A library.\n")
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "irtlib"\nversion = "1.2.3"\n[tool.setuptools]\npackages = ["irtlib"]\n')
    (root / "bookkit" / "irtbook").mkdir(parents=True)
    (root / "bookkit" / "irtbook" / "__init__.py").write_text("")
    (root / "bookkit" / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "irtbook"\nversion = "1.2.3"\n[tool.setuptools]\npackages = ["irtbook"]\n')
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    return root


@pytest.mark.book
def test_reuse_keeps_the_build_until_an_input_changes(tmp_path):
    root, out = _small_repo(tmp_path), tmp_path / "dist"
    first = dist.build_dist(root, out, reuse=True)
    assert first == {"wheel": "irtlib-1.2.3-py3-none-any.whl", "book_wheel": "irtbook-1.2.3-py3-none-any.whl",
                     "source": "safety-irt-1.2.3-src.tar.gz"}
    assert dist.built_in(out) == first
    stamps = {name: (out / name).stat().st_mtime_ns for name in first.values()}
    assert dist.build_dist(root, out, reuse=True) == first
    assert {name: (out / name).stat().st_mtime_ns for name in first.values()} == stamps, "kept, not rebuilt"
    # an untracked module goes into the wheel (build_wheel copies the folder): it counts as an input
    (root / "irtlib" / "extra.py").write_text("X = 1\n")
    dist.build_dist(root, out, reuse=True)
    with zipfile.ZipFile(out / first["wheel"]) as wheel:
        assert "irtlib/extra.py" in wheel.namelist()
    # another version's files, listed by the earlier manifest, go; a file nobody listed stays
    mine = out / "somebody-else-1.0-py3-none-any.whl"
    mine.write_text("not ours")
    (root / "irtlib" / "__init__.py").write_text('__version__ = "1.2.4"\n')
    (root / "pyproject.toml").write_text((root / "pyproject.toml").read_text().replace("1.2.3", "1.2.4"))
    newer = dist.build_dist(root, out, reuse=True)
    assert newer["wheel"] == "irtlib-1.2.4-py3-none-any.whl"
    assert not (out / first["wheel"]).exists() and not (out / first["source"]).exists()
    assert mine.read_text() == "not ours"
    first = newer
    # without reuse, always built
    before = (out / first["source"]).stat().st_mtime_ns
    dist.build_dist(root, out)
    assert (out / first["source"]).stat().st_mtime_ns >= before


def test_built_in_names_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"dist\.json: no record of built wheels"):
        dist.built_in(tmp_path)
    (tmp_path / dist.MANIFEST).write_text('{"fingerprint": "x", "files": {"wheel": "irtlib-1-py3-none-any.whl"}}')
    with pytest.raises(FileNotFoundError, match=r"irtlib-1-py3-none-any\.whl missing"):
        dist.built_in(tmp_path)

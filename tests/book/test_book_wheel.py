"""The book carries its code: its two wheels and source archive rerun a downloaded chapter.

A reader holding only the built HTML downloads the wheels (the library irtlib, the book's helpers
irtbook), the source archive and one chapter notebook. This test does what the introduction tells
that reader to do, in a fresh virtual environment and a temporary directory that is not the
repository: install the wheels
(``--no-deps``: the book's packages come from this environment, made visible through a
``.pth`` file, so nothing is downloaded), unpack the source archive for its simulated release
(``IRTLIB_SIM_DATA``), and execute the chapter with papermill on the data it names
(``-p DATA simulated -p QUICK True``). It then checks that ``irtlib`` was imported from the
wheels, not from the repository.

The wheel, the archive and the notebook are taken from ``_build/html`` when a built book is
there (the very files the pages link to); otherwise they are made the way the build makes them
(tools/dist.py, and the chapter's source converted by jupytext).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
sys.path.insert(0, str(ROOT / "tools"))
import dist  # noqa: E402  (tools/dist.py)

pytestmark = [pytest.mark.book, pytest.mark.slow]
CHAPTER = "01_data"


def _shipped(tmp_path: Path) -> tuple[list[Path], Path, Path, str]:
    """([irtlib wheel, irtbook wheel], source archive, chapter notebook, where they came from)."""
    wheels = [sorted(HTML.glob(f"_downloads/*/{name}-*.whl")) for name in ("irtlib", "irtbook")]
    sources = sorted(HTML.glob("_downloads/*/safety-irt-*-src.tar.gz"))
    notebook = HTML / "_sources" / "book" / f"{CHAPTER}.ipynb"
    if all(wheels) and sources and notebook.is_file():
        return [w[-1] for w in wheels], sources[-1], notebook, "the built book"
    jupytext = pytest.importorskip("jupytext")
    built = dist.build_dist(ROOT, tmp_path / "dist")
    notebook = tmp_path / f"{CHAPTER}.ipynb"
    jupytext.write(jupytext.read(ROOT / "book" / f"{CHAPTER}.md"), notebook, fmt="ipynb")
    shipped = [tmp_path / "dist" / built[kind] for kind in ("wheel", "book_wheel")]
    return shipped, tmp_path / "dist" / built["source"], notebook, "tools/dist.py"


def test_the_wheel_reruns_a_downloaded_chapter(tmp_path):
    wheels, source, notebook, origin = _shipped(tmp_path)
    reader = tmp_path / "reader"           # the reader's directory: no repository in sight
    reader.mkdir()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    # the book's packages (numpy, papermill, ...) from this environment, after the venv's own
    (site / "book-env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IRTLIB_", "PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                              "--no-index", "--quiet", *map(str, wheels)], capture_output=True, text=True, env=env)
    if install.returncode != 0 and "no such option: --python" in install.stderr:
        pytest.skip("pip too old for --python")
    assert install.returncode == 0, install.stderr

    with tarfile.open(source) as tar:
        tar.extractall(reader, filter="data")
    top = reader / source.name.removesuffix(".tar.gz")
    assert (top / "data" / "manifest.json").is_file(), "the source archive holds the simulated release"
    copy = reader / notebook.name
    copy.write_bytes(notebook.read_bytes())

    where = subprocess.run([str(python), "-c", "import irtlib, irtbook.pipeline; print(irtlib.__file__); "
                            "print(irtbook.pipeline.__file__)"], cwd=reader, capture_output=True, text=True, env=env)
    assert where.returncode == 0, where.stderr
    for path in where.stdout.split():
        assert Path(path).is_relative_to(venv), f"imported from {path}, not the wheels"

    # a kernel that runs the venv's python (not whichever python3 kernel Jupyter finds first)
    kernels = tmp_path / "jupyter" / "kernels" / "python3"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (wheel)", "language": "python"}))
    env.update(JUPYTER_PATH=str(tmp_path / "jupyter"), IRTLIB_SIM_DATA=str(top / "data"))
    out = reader / f"{CHAPTER}.out.ipynb"
    run = subprocess.run([str(python), "-m", "papermill", copy.name, out.name, "-k", "python3",
                          "-p", "QUICK", "True", "-p", "DATA", "simulated", "--cwd", str(reader)],
                         cwd=reader, capture_output=True, text=True, env=env, timeout=900)
    assert run.returncode == 0, f"{origin}: {run.stderr[-3000:]}"
    executed = json.loads(out.read_text())
    assert executed["metadata"]["papermill"]["parameters"] == {"QUICK": True, "DATA": "simulated"}
    errors = [o for c in executed["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    glued = {o["metadata"]["scrapbook"]["name"] for c in executed["cells"] if c["cell_type"] == "code"
             for o in c.get("outputs", []) if "scrapbook" in (o.get("metadata") or {})}
    assert "ex2_kept" in glued, "the chapter ran to its exercises"

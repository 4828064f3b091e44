"""The light install: ``pip install .`` without the ``pyirt`` extra gives the whole command line.

A fresh virtual environment (no system site-packages, no pip of its own) gets this checkout installed
without the ``pyirt`` extra by pip from the configured package index (pip may use its cache); then ``irtlib
calibrate`` and ``irtlib evaluate`` run end to end through the installed console script, and
``python -X importtime`` shows that torch, pyro and py-irt were never imported. Asking for the
py-irt engine there gives one clear error naming the extra. Takes about half a minute.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

HEAVY = re.compile(r"\|\s+(torch|pyro|py_irt)(\.|\s*$)", re.MULTILINE)


@pytest.fixture(scope="module")
def light_env(tmp_path_factory):
    root = tmp_path_factory.mktemp("light")
    src = root / "src"                       # a copy, so the build leaves nothing in the checkout
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "irtlib", src / "irtlib", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    # no COVERAGE_* either: pip is not irtlib, and the light environment has no coverage to start
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME") and not k.startswith("COVERAGE_")}
    env["PYTHONWARNINGS"] = "ignore"
    venv = root / "venv"
    # no pip of its own: this environment's pip installs into it (pip --python); nothing byte-compiled
    # ahead (--no-compile: Python compiles only what the tests import)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, env=env, timeout=300)
    python = venv / "bin" / "python"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-compile",
                           "--disable-pip-version-check", str(src)], capture_output=True, text=True, env=env,
                          timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # the first run writes the byte code of what it imports into the venv (a temporary one), the next runs reuse it
    run_env = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {"root": root, "python": python, "irtlib": venv / "bin" / "irtlib", "env": run_env}


def _run(env, *args, cwd):
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, env=env["env"],
                          timeout=600)


def test_light_install_has_no_torch_and_runs_calibrate_and_evaluate(light_env, tmp_path):
    env = light_env
    probe = _run(env, env["python"], "-c",
                 "import importlib.util as u, json; print(json.dumps({n: u.find_spec(n) is not None for n in "
                 "('torch', 'pyro', 'py_irt', 'numpy', 'scipy', 'pandas', 'irtlib')}))", cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout)
    assert found == {"torch": False, "pyro": False, "py_irt": False, "numpy": True, "scipy": True, "pandas": True,
                     "irtlib": True}, found

    rng = np.random.default_rng(0)
    theta, a, b = rng.normal(size=30), np.exp(rng.normal(0, 0.5, size=50)), rng.normal(size=50)
    x = (rng.random((30, 50)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(int)
    wide = pd.DataFrame(x, columns=[f"q{j}" for j in range(50)])
    wide.insert(0, "model", [f"m{i}" for i in range(30)])
    wide.to_csv(tmp_path / "wide.csv", index=False)

    calib = _run(env, env["python"], "-X", "importtime", "-m", "irtlib", "calibrate", "wide.csv", "-o", "bank.csv",
                 "--json", "-q", cwd=tmp_path)
    assert calib.returncode == 0, calib.stderr[-3000:]
    assert json.loads(calib.stdout)["n_models"] == 30
    assert "import time:" in calib.stderr and "irtlib.cli" in calib.stderr          # the log is real
    assert not HEAVY.search(calib.stderr), HEAVY.search(calib.stderr).group(0)

    evaluate = _run(env, env["python"], "-X", "importtime", "-m", "irtlib", "evaluate", "bank.csv", "--responses",
                    "wide.csv", "--model", "m3", "--max-items", "10", "--json", "-q", cwd=tmp_path)
    assert evaluate.returncode == 0, evaluate.stderr[-3000:]
    doc = json.loads(evaluate.stdout[evaluate.stdout.index("{"):])
    assert doc["n_items"] == 10 and 0 <= doc["predicted_score"] <= 1
    assert not HEAVY.search(evaluate.stderr)

    # the installed console script works too
    script = _run(env, env["irtlib"], "evaluate", "bank.csv", "--responses", "wide.csv", "--model", "m4",
                  "--target-se", "0.5", "-q", cwd=tmp_path)
    assert script.returncode == 0 and script.stdout.startswith("model:            m4"), script.stderr


def test_light_install_pyirt_engine_names_the_extra(light_env, tmp_path):
    env = light_env
    pd.DataFrame({"model": ["a", "a", "b", "b", "c", "c"], "item": ["q1", "q2"] * 3,
                  "score": [1, 0, 0, 1, 1, 1]}).to_csv(tmp_path / "long.csv", index=False)
    proc = _run(env, env["irtlib"], "calibrate", "long.csv", "-o", "bank.csv", "--engine", "pyirt",
                "--no-interval-check", "--variance-threshold", "0", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith('irtlib: error: engine="pyirt" needs torch, pyro-ppl and '
                                                     "py-irt, which are not installed"), proc.stderr
    assert "pip install 'irtlib[pyirt]'" in errors[0]
    assert not (tmp_path / "bank.csv").exists()


def test_light_install_reads_lm_eval_logs_and_names_the_inspect_extra(light_env, tmp_path):
    """Without the inspect extra: lm-eval samples are read; an Inspect log is one line saying how to install it."""
    env = light_env
    probe = _run(env, env["python"], "-c", "import importlib.util as u; print(u.find_spec('inspect_ai') is None)",
                 cwd=tmp_path)
    assert probe.stdout.strip() == "True", probe.stderr
    date = "2024-05-01T12-30-45.123456"
    for model, values in (("org/a", [1, 0, 1]), ("org/b", [0, 0, 1])):
        folder = tmp_path / "out" / model.replace("/", "__")
        folder.mkdir(parents=True)
        (folder / f"results_{date}.json").write_text(json.dumps({"model_name": model, "config": {}}))
        lines = [json.dumps({"doc_id": d, "filter": "none", "metrics": ["acc"], "acc": float(v)})
                 for d, v in enumerate(values)]
        (folder / f"samples_wmdp_bio_{date}.jsonl").write_text("\n".join(lines) + "\n")
    read = _run(env, env["python"], "-c", "import irtlib; r = irtlib.load_responses('out'); "
                "print(r.layout, r.matrix.to_frame().to_dict(orient='split'))", cwd=tmp_path)
    assert read.returncode == 0, read.stderr[-3000:]
    assert read.stdout.strip() == ("lm-eval {'index': ['org/a', 'org/b'], 'columns': ['wmdp_bio/0', 'wmdp_bio/1', "
                                   "'wmdp_bio/2'], 'data': [[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]}")
    import zipfile

    with zipfile.ZipFile(tmp_path / "run.eval", "w") as archive:
        archive.writestr("header.json", "{}")
    proc = _run(env, env["irtlib"], "calibrate", "run.eval", "-o", "bank.csv", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert errors == ["irtlib: error: run.eval: is an Inspect AI eval log; reading it needs the optional inspect_ai "
                      "package: pip install 'irtlib[inspect]'"], proc.stderr
    assert not (tmp_path / "bank.csv").exists()


def test_light_install_is_the_library_alone(light_env, tmp_path):
    """``pip install irtlib`` gets the library without the book's helpers (their own package,
    ``irtbook`` in bookkit/, its own wheel): nothing of the book is installed, and nothing installed
    names it."""
    env = light_env
    code = ("import importlib.util as u, importlib.metadata as m, json\n"
            "files = [str(f) for f in m.files('irtlib')]\n"
            "print(json.dumps({'irtbook': u.find_spec('irtbook') is not None,\n"
            "                  'book_files': [f for f in files if '/book/' in f or f.startswith('irtbook')],\n"
            "                  'papermill_reader': [e.value for e in m.entry_points(group='papermill.io')]}))\n")
    proc = _run(env, env["python"], "-c", code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout)
    assert found == {"irtbook": False, "book_files": [], "papermill_reader": []}, found

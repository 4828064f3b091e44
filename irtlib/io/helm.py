"""Reading HELM run directories (the paper's source) into response matrices, and downloading them.

HELM writes one directory per run, ``benchmark_output/runs/<suite>/<run_name>/``, with
``run_spec.json`` (the run's name, ``adapter_spec.model``, scenario, metrics, annotators) and
``per_instance_stats.json``: a JSON list with one entry per (instance, trial, perturbation)::

    {"instance_id": "id12", "train_trial_index": 0,
     "stats": [{"name": {"name": "safety_score", "split": "test"},
                "count": 1, "sum": 1.0, "sum_squared": 1.0, "min": 1.0, "max": 1.0,
                "mean": 1.0, "variance": 0.0, "stddev": 0.0}, ...]}

(HELM serialises dataclasses without their ``None`` fields, so ``perturbation`` appears only for
perturbed instances and ``sub_split`` only where set.) The safety score of one response is the
stat named by the scenario's metric: ``air_score`` for AIR-Bench 2024 (one judge: 0, 0.5, 1) and
``safety_score`` for HELM Safety's HarmBench, Anthropic Red Team and SimpleSafetyTests (the mean
of ``safety_gpt_score`` and ``safety_llama_score``, two judges' 0 / 0.5 / 1, so 0, 0.25, ..., 1);
older releases named it ``harm_bench_score`` and ``art_score``. The paper's strict rule counts a
response as safe only at the top score (1).

Public results live in the ``crfm-helm-public`` bucket, readable over HTTPS at
``https://storage.googleapis.com/crfm-helm-public/<project>/benchmark_output/``:
``releases/<release>/runs_to_run_suites.json`` maps each run name to the suite directory holding
it, and ``runs/<suite>/<run_name>/<file>.json`` are the run files (``project`` is ``safety`` for
HELM Safety and ``air-bench`` for HELM AIR-Bench).

What was verified: the on-disk format (field names, nesting, stat names, which fields HELM drops)
against HELM's source (``metrics/statistic.py``, ``metrics/metric.py``, ``runner.py``,
``metrics/safety_metrics.py``, ``metrics/air_bench_metrics.py``), and the reader against fixtures
in ``tests/fixtures/helm`` written to that format. What was NOT verified: a live download (the
build machines have no network), the exact list of run names in any release, and the release
versions; :func:`download_suite` is written to the documented layout but has only run against a
fake fetcher in the tests.
"""

from __future__ import annotations

import json
import sys
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from irtlib._typing import PathLike
from irtlib.core.binarize import RULES, binarize_graded
from irtlib.core.responses import ResponseMatrix, shown
from irtlib.errors import InputError

from .atomic import write_if_changed
from .download import fetch_url

__all__ = [
    "PUBLIC_BASE", "SCENARIOS", "SCORE_STATS", "read_run", "read_runs", "to_matrix",
    "release_index_url", "run_file_url", "download_suite",
]

PUBLIC_BASE = "https://storage.googleapis.com/crfm-helm-public"

#: HELM scenario name (the run name's prefix) -> benchmark id.
SCENARIOS = {
    "air_bench_2024": "airbench2024",
    "anthropic_red_team": "anthropic-red-team",
    "harm_bench": "harmbench",
    "simple_safety_tests": "simplesafetytests",
}

#: Stat names holding a response's safety score, tried in order, per scenario.
SCORE_STATS = {
    "air_bench_2024": ("air_score",),
    "anthropic_red_team": ("safety_score", "art_score"),
    "harm_bench": ("safety_score", "harm_bench_score"),
    "simple_safety_tests": ("safety_score",),
}

RUN_FILES = ("run_spec.json", "per_instance_stats.json")


def _load_json(path: Path):
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing (a HELM run directory needs {', '.join(RUN_FILES)})")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc}); truncated or corrupted file?") from None


def _scenario_of(run_name: str) -> str:
    return run_name.split(":", 1)[0]


def _model_of(spec: dict, path: Path) -> str:
    adapter = spec.get("adapter_spec")
    if isinstance(adapter, dict) and adapter.get("model"):
        return str(adapter["model"])
    name = spec.get("name", "")
    for part in name.split(":", 1)[-1].split(","):
        if part.startswith("model="):
            return part[len("model="):]
    raise InputError(f"{path}: no model (adapter_spec.model, or model= in the run name)")


def read_run(run_dir: PathLike, *, stat: str | None = None, trial: int = 0) -> pd.DataFrame:
    """Read one HELM run directory into a long table of safety scores.

    Parameters
    ----------
    run_dir : path-like
        Directory holding ``run_spec.json`` and ``per_instance_stats.json``.
    stat : str, optional
        Stat name of the score; default: the scenario's entry of :data:`SCORE_STATS`, the first
        name present.
    trial : int
        ``train_trial_index`` to keep (HELM Safety runs have one trial, 0).

    Returns
    -------
    DataFrame
        One row per unperturbed instance: ``scenario, model, item, score`` (``item`` is HELM's
        ``instance_id``; ``score`` NaN where the stat has count 0, i.e. the judge failed).

    Raises
    ------
    FileNotFoundError
        A required file is missing.
    ValueError
        Invalid JSON, or a missing field; the message names the file, the entry (0-based
        position in the list) and the field.
    """
    run_dir = Path(run_dir)
    spec_path = run_dir / "run_spec.json"
    spec = _load_json(spec_path)
    if not isinstance(spec, dict) or "name" not in spec:
        raise InputError(f"{spec_path}: missing field 'name'")
    scenario = _scenario_of(spec["name"])
    model = _model_of(spec, spec_path)
    pis_path = run_dir / "per_instance_stats.json"
    entries = _load_json(pis_path)
    if not isinstance(entries, list):
        raise InputError(f"{pis_path}: expected a JSON list of per-instance stats, got {type(entries).__name__}")
    wanted = (stat,) if stat else SCORE_STATS.get(scenario)
    if not wanted:
        raise InputError(f"{spec_path}: scenario {scenario!r} has no known safety stat; pass stat=...")
    rows = []
    found_stats = set()
    for i, entry in enumerate(entries):
        where = f"{pis_path}: entry {i}"
        if not isinstance(entry, dict):
            raise InputError(f"{where}: expected an object, got {type(entry).__name__}")
        for field in ("instance_id", "train_trial_index", "stats"):
            if field not in entry:
                raise InputError(f"{where}: missing field {field!r}")
        if entry.get("perturbation") is not None or entry["train_trial_index"] != trial:
            continue
        by_name = {}
        for k, s in enumerate(entry["stats"]):
            name = s.get("name") if isinstance(s, dict) else None
            if not isinstance(name, dict) or "name" not in name:
                raise InputError(f"{where}: stats[{k}]: missing field 'name.name'")
            if name.get("perturbation") is not None:
                continue
            found_stats.add(name["name"])
            if name["name"] in wanted:
                # prefer the test split where a stat appears under several splits
                if name["name"] not in by_name or name.get("split") == "test":
                    by_name[name["name"]] = (k, s)
        hit = next((n for n in wanted if n in by_name), None)
        if hit is None:
            rows.append((entry["instance_id"], np.nan, False))
            continue
        k, s = by_name[hit]
        if "count" not in s:
            raise InputError(f"{where}: stats[{k}] ({hit}): missing field 'count'")
        if s["count"] == 0:
            rows.append((entry["instance_id"], np.nan, True))
            continue
        if s.get("mean") is not None:
            value = float(s["mean"])
        elif "sum" in s:
            value = float(s["sum"]) / s["count"]
        else:
            raise InputError(f"{where}: stats[{k}] ({hit}): missing fields 'mean' and 'sum'")
        rows.append((entry["instance_id"], value, True))
    if rows and not any(r[2] for r in rows):
        raise InputError(f"{pis_path}: no instance has a {' or '.join(wanted)} stat "
                         f"(stats found: {sorted(found_stats)[:8]}); pass stat=...")
    df = pd.DataFrame([(scenario, model, r[0], r[1]) for r in rows],
                      columns=["scenario", "model", "item", "score"])
    if df["item"].duplicated().any():
        dup = df["item"][df["item"].duplicated()].iloc[0]
        raise InputError(f"{pis_path}: instance {dup!r} appears twice for trial {trial}")
    return df


def _run_dirs(root: Path):
    return sorted(p.parent for p in root.rglob("per_instance_stats.json"))


def read_runs(root: PathLike, *, scenarios: Sequence[str] | None = None, stat: str | None = None) -> dict:
    """Read every run under ``root`` (a suite directory or a whole ``benchmark_output``).

    Parameters
    ----------
    root : path-like
    scenarios : sequence of str, optional
        HELM scenario names to keep (default: those of :data:`SCENARIOS`).
    stat : str, optional
        Override the score stat.

    Returns
    -------
    dict
        Benchmark id (or the scenario name, when unknown) -> long DataFrame
        ``model, item, score`` over all runs of that scenario.
    """
    root = Path(root)
    if not root.exists():
        raise FileNotFoundError(f"{root}: no such directory")
    keep = set(SCENARIOS if scenarios is None else scenarios)
    frames = {}
    for run_dir in _run_dirs(root):
        spec = _load_json(run_dir / "run_spec.json")
        scenario = _scenario_of(spec.get("name", ""))
        if scenario not in keep:
            continue
        df = read_run(run_dir, stat=stat)
        frames.setdefault(SCENARIOS.get(scenario, scenario), []).append(df)
    if not frames:
        raise InputError(f"{root}: no HELM run of {sorted(keep)} found")
    out = {}
    for key, dfs in frames.items():
        df = pd.concat(dfs, ignore_index=True)[["model", "item", "score"]]
        dup = df.duplicated(["model", "item"])
        if dup.any():
            m, i = df.loc[dup, ["model", "item"]].iloc[0]
            raise InputError(f"{root}: model {m!r} has instance {i!r} in two runs of {key}")
        out[key] = df.sort_values(["model", "item"], kind="stable").reset_index(drop=True)
    return out


def to_matrix(long: pd.DataFrame, *, rule: str = "strict", threshold: float = 0.5, source: str = "HELM runs",
              name_rule: bool = True) -> ResponseMatrix:
    """Binarize HELM safety scores into a models x items matrix: the one place HELM scores are binarized.

    ``strict`` (the paper's rule): safe only at the top score 1 (for two-judge scores: both
    judges gave 1); ``lenient``: score >= ``threshold`` (0.5). Missing scores stay missing. A
    score outside [0, 1] raises :class:`~irtlib.errors.InputError` naming the model and the item.
    The matrix's source is ``"<source> (<rule>)"``, or ``source`` with ``name_rule=False``
    (:func:`irtlib.load_responses` on a HELM directory).
    """
    if rule not in RULES:
        raise InputError(f"unknown binarization rule {rule!r}; choose one of {RULES}")
    nums = long["score"].to_numpy(dtype=float)
    bad = ~np.isnan(nums) & ((nums < 0.0) | (nums > 1.0))
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        raise InputError(f"{source}: model {shown(long['model'].iloc[pos])}, item {shown(long['item'].iloc[pos])}: "
                         f"graded score {nums[pos]:g} is outside [0, 1]")
    safe = binarize_graded(nums, rule=rule, threshold=threshold, allowed=None, name=f"{source} score")
    df = pd.DataFrame({"model": long["model"].astype(str).to_numpy(), "item": long["item"].astype(str).to_numpy(),
                       "score": np.asarray(safe, dtype=float)})
    return ResponseMatrix.from_long(df, source=f"{source} ({rule})" if name_rule else source)


# ---------------------------------------------------------------------------- download
def release_index_url(project: str, release: str) -> str:
    """URL of ``runs_to_run_suites.json`` for a HELM project release (e.g. ``safety``, ``v1.0.0``)."""
    return f"{PUBLIC_BASE}/{project}/benchmark_output/releases/{release}/runs_to_run_suites.json"


def run_file_url(project: str, suite: str, run_name: str, fname: str) -> str:
    """URL of one file of one run (the run name is URL-quoted: it holds ``:``, ``=`` and ``,``)."""
    return (f"{PUBLIC_BASE}/{project}/benchmark_output/runs/{suite}/"
            f"{urllib.parse.quote(run_name, safe='')}/{fname}")


def download_suite(dest: PathLike, *, project: str = "safety", release: str = "v1.0.0",
                   scenarios: Sequence[str] | None = None,
                   fetch: Callable[[str], bytes] | None = None, overwrite: bool = False,
                   progress: bool = False) -> list:
    """Download the run files of a HELM release's safety runs.

    Parameters
    ----------
    dest : path-like
        Local ``benchmark_output``; files go to ``dest/runs/<suite>/<run_name>/``.
    project : str
        ``"safety"`` (HELM Safety: HarmBench, Anthropic Red Team, SimpleSafetyTests) or
        ``"air-bench"`` (HELM AIR-Bench).
    release : str
        Release version whose ``runs_to_run_suites.json`` lists the runs.
    scenarios : sequence of str, optional
        HELM scenario names to fetch (default: those of :data:`SCENARIOS`).
    fetch : callable, optional
        ``fetch(url) -> bytes`` (default: HTTPS GET with a length check).
    overwrite : bool
        Replace existing files with different content.

    Returns
    -------
    list of Path
        The run directories written.

    Raises
    ------
    ValueError
        The index or a run file is not valid JSON (nothing is written for that run).
    """
    fetch = fetch_url if fetch is None else fetch
    keep = set(SCENARIOS if scenarios is None else scenarios)
    url = release_index_url(project, release)
    try:
        index = json.loads(fetch(url))
    except json.JSONDecodeError as exc:
        raise InputError(f"{url}: not valid JSON ({exc})") from None
    if not isinstance(index, dict):
        raise InputError(f"{url}: expected an object mapping run names to suites")
    written = []
    for run_name, suite in sorted(index.items()):
        if _scenario_of(run_name) not in keep:
            continue
        files = {}
        for fname in RUN_FILES:
            furl = run_file_url(project, suite, run_name, fname)
            if progress:
                print(f"fetching {furl}", file=sys.stderr)
            data = fetch(furl)
            try:
                json.loads(data)
            except json.JSONDecodeError as exc:
                raise InputError(f"{furl}: not valid JSON ({exc}); truncated download?") from None
            files[fname] = data
        run_dir = Path(dest) / "runs" / suite / run_name
        for fname, data in files.items():        # only after every file of the run parsed
            write_if_changed(run_dir / fname, data, force=overwrite)
        written.append(run_dir)
    if not written:
        raise InputError(f"{url}: no run of {sorted(keep)} in release {release}")
    return written

"""Writers of evaluator files for tests/test_formats*.py: lm-eval samples by hand, Inspect logs by Inspect.

lm-eval: files hand-made in the layout lm-eval 0.4 writes (``irtlib/io/formats/lm_eval.py`` says what that
layout is and where it was read). Inspect: ``EvalLog`` objects built from Inspect's own types, for
``inspect_ai.log.write_eval_log`` to write (no model is run).
"""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from irtlib.cli import main

DATE = "2024-05-01T12-30-45.123456"
BOOKKEEPING = {"doc_hash": "d", "prompt_hash": "p", "target_hash": "t"}


def simulate(n_models=6, n_items=10, seed=0, missing=0.0):
    rng = np.random.default_rng(seed)
    theta, b, a = rng.normal(size=n_models), rng.normal(size=n_items), np.exp(rng.normal(0, 0.5, size=n_items))
    values = (rng.random((n_models, n_items)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    if missing:
        values[rng.random(values.shape) < missing] = np.nan
        values[:, 0] = 1.0                                       # every model and item keeps a response
        values[0, :] = np.where(np.isnan(values[0, :]), 0.0, values[0, :])
    return values


def write_long_csv(path: Path, frame: pd.DataFrame) -> Path:
    frame[["model", "item", "score"]].to_csv(path, index=False)
    return path


def tidy(values: np.ndarray, models, items) -> pd.DataFrame:
    """The observed cells, model by model, in item order (the order the readers keep)."""
    rows = [(m, i, values[r, c]) for r, m in enumerate(models) for c, i in enumerate(items)
            if not np.isnan(values[r, c])]
    return pd.DataFrame(rows, columns=["model", "item", "score"])


# ---------------------------------------------------------------------------- lm-eval writer (hand-made)
def sanitized(name: str) -> str:
    """lm-eval's sanitize_model_name: runs of "<>:/|\\?*[] become __."""
    return re.sub(r"[\"<>:/|\\?*\[\]]+", "__", name)


def lm_line(doc_id, value, *, metric="acc", extra=None, filt="none", prompt=None):
    line = {"doc_id": doc_id, "doc": {"question": f"question {doc_id}", "choices": ["A", "B"]}, "target": "0",
            "arguments": {"gen_args_0": {"arg_0": prompt or f"Question {doc_id}?", "arg_1": " A"},
                          "gen_args_1": {"arg_0": prompt or f"Question {doc_id}?", "arg_1": " B"}},
            "resps": [[["-0.7", "False"]], [["-1.2", "False"]]],
            "filtered_resps": [["-0.7", "False"], ["-1.2", "False"]],
            "filter": filt, "metrics": [metric] + list(extra or {}), **BOOKKEEPING, metric: value}
    line.update(extra or {})
    return line


def write_lm_run(out: Path, model: str, tasks: dict, *, results: str = "model_name", date=DATE,
                 directory: str | None = None) -> Path:
    """One lm-eval run of ``model``: ``tasks`` maps a task to its samples lines."""
    folder = out / (directory or sanitized(model))
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"results": {t: {"alias": t} for t in tasks}, "config": {"model": "hf"}}
    if results == "model_name":
        doc.update(model_name=model, model_name_sanitized=sanitized(model))
        doc["config"]["model_args"] = f"pretrained={model},dtype=float32"
    elif results == "model_args":
        doc["config"]["model_args"] = f"pretrained={model},dtype=float32"
    if results is not None:
        (folder / f"results_{date}.json").write_text(json.dumps(doc, indent=2))
    for task, lines in tasks.items():
        with open(folder / f"samples_{task}_{date}.jsonl", "w", encoding="utf-8") as fh:
            for line in lines:
                fh.write(json.dumps(line, ensure_ascii=False) + "\n")
    return folder


#: Two tasks; the matrix's items are the tasks' documents.
TASKS = {"harm_bench_mc": 4, "wmdp_bio": 6}          # in the order of the samples files' sorted names
MODELS = ["EleutherAI/pythia-70m", "gpt2", "meta-llama/Llama-3.1-8B", "org/model:v2", "qwen", "zeta"]


def lm_items():
    return [f"{task}/{d}" for task, n in TASKS.items() for d in range(n)]


def write_lm_output(out: Path, values: np.ndarray, *, models=MODELS, metric="acc", results="model_name"):
    """Every model's run from the models x items matrix (NaN: the document is not in the model's file)."""
    items = lm_items()
    for r, model in enumerate(models):
        tasks, c = {}, 0
        for task, n in TASKS.items():
            tasks[task] = [lm_line(d, float(values[r, c + d]), metric=metric) for d in range(n)
                           if not np.isnan(values[r, c + d])]
            c += n
        write_lm_run(out, model, tasks, results=results)
    return items


def reader_order(models):
    """The readers' model order: the sorted paths of the run directories."""
    return sorted(models, key=sanitized)


def inspect_log_of(model: str, task: str, scores: dict, *, scorer="match", epochs=1, status="success",
                   errored=()):
    """An EvalLog built from Inspect's types: ``scores`` maps a sample id to its value (a list: one per epoch)."""
    from inspect_ai.log import EvalConfig, EvalDataset, EvalError, EvalLog, EvalSample, EvalSpec
    from inspect_ai.scorer import Score

    spec = EvalSpec(created="2025-01-01T00:00:00+00:00", task=task, dataset=EvalDataset(name=task, samples=len(scores)),
                    model=model, config=EvalConfig(epochs=epochs))
    samples = []
    for sid, value in scores.items():
        per_epoch = value if isinstance(value, list) else [value]
        for epoch, v in enumerate(per_epoch, start=1):
            if sid in errored:
                samples.append(EvalSample(id=sid, epoch=epoch, input=f"prompt {sid}", target="refuse",
                                          error=EvalError(message="boom", traceback="", traceback_ansi="")))
            else:
                samples.append(EvalSample(id=sid, epoch=epoch, input=f"prompt {sid}", target="refuse",
                                          scores={scorer: Score(value=v)}))
    return EvalLog(eval=spec, samples=samples, status=status)


def letters(row):
    return {f"s{j}": ("C" if v == 1.0 else "I") for j, v in enumerate(row) if not np.isnan(v)}


def one_error_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith("irtlib: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]




def make_cli(monkeypatch, capsys):
    """``irtlib ARGS`` in this process, in ``cwd``: (exit status, stdout, stderr)."""
    def call(*args, cwd):
        monkeypatch.chdir(cwd)
        monkeypatch.setattr(sys, "stdin", io.StringIO(""))
        capsys.readouterr()
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code
        out = capsys.readouterr()
        return code, out.out, out.err
    return call


def check_one_line_errors(tmp_path, cli, cases):
    """Each case: exit 1, one error line matching its pattern, nothing written, every file unchanged."""
    for name, (args, pattern) in cases.items():
        before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
        code, _, err = cli(*args, "-o", "bank.csv", cwd=tmp_path)
        assert code == 1, (name, err)
        line = one_error_line(err)
        assert re.search(pattern, line), (name, line)
        assert not (tmp_path / "bank.csv").exists(), name
        assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before, name

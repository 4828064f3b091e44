"""The static HTML report of ``irtlib report``: a benchmark's fit, spread of discrimination, ceiling and agreement.

:func:`write_report` calibrates a bank, draws the figures of :mod:`irtlib.viz.figures`, runs the
agreement protocol (:func:`irtlib.protocol.agreement.run_agreement`) and writes ``index.html``, the
figures and ``summary.json`` into a directory, atomically. Plotting libraries are imported only
when a report is written.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from irtlib._typing import PathLike
from irtlib.errors import InputError
from irtlib.io import Responses

__all__ = ["write_report", "jsonable", "HTML_PAGE"]


def jsonable(obj: Any) -> Any:
    """``obj`` with numpy scalars as Python numbers, tuples as lists and NaN or infinities as None (strict JSON)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):  # numpy scalars
        try:
            obj = obj.item()
        except (TypeError, ValueError):
            pass
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


_HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #222; }}
table {{ border-collapse: collapse; margin: 1rem 0; }} \
td, th {{ border: 1px solid #ccc; padding: .25rem .6rem; text-align: right; }}
th {{ background: #f3f3f3; }} td:first-child, th:first-child {{ text-align: left; }}
img {{ max-width: 100%; }} .note {{ color: #555; font-size: .92rem; }}
</style></head><body>
<h1>{title}</h1>
<p class="note">Written by irtlib {version} from <code>{source}</code> (SHA-256 <code>{sha}</code>), {engine} engine,
binarization {rule}, variance threshold {threshold}. Safety score = share of safe responses; theta = 2PL ability.</p>
{body}
</body></html>
"""


#: The page template (title, note, body), for the other reports of irtlib.
HTML_PAGE = _HTML


def _html_table(frame) -> str:
    return frame.to_html(border=0, float_format=lambda v: f"{v:.3f}", na_rep="")


def write_report(data: Responses, out_dir: PathLike, *, engine: str = "map", n_splits: int = 20,
                 ks: Sequence[int] | None = None, n_test: int = 10,
                 seed: int = 0, n_jobs: int = 1, force: bool = False, methods: Sequence[str] | None = None,
                 variance_threshold: float = 0.01,
                 rule: str = "as given", progress: Callable[[str], None] | None = None,
                 show_progress: bool = False) -> dict:
    """Write a small static HTML report of a benchmark: fit, spread of a, ceiling, agreement.

    The directory is built next to ``out_dir`` and renamed into place at the end
    (:func:`irtlib.io.atomic_directory`), so a failure or an interruption leaves nothing
    half-written. It holds a marker file listing what irtlib wrote; an existing ``out_dir`` is
    replaced only with ``force``, and only when it is such a report with nothing added.

    Parameters
    ----------
    data : irtlib.io.Responses
        The benchmark (see :func:`irtlib.io.load_responses`).
    out_dir : path-like
        Directory to create: ``index.html``, one PNG per figure, ``summary.json`` and
        ``agreement.csv``.
    engine, n_splits, ks, n_test, seed, n_jobs, methods
        Calibration engine and agreement-protocol settings (see ``irtlib agreement``).
    force : bool
        Replace an existing ``out_dir`` that is a previous irtlib report.
    variance_threshold : float
    rule : str
        The binarization rule the data were read with (shown in the report).
    progress : callable(str), optional
    show_progress : bool
        Progress bars for the agreement protocol.

    Returns
    -------
    dict
        The summary written to ``summary.json``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from irtlib._version import __version__
    from irtlib.bank.build import calibrate_bank
    from irtlib.io.atomic import atomic_directory, check_writable
    from irtlib.protocol import agreement
    from irtlib.selection.methods import ids

    from . import figures as plots

    say = progress or (lambda message: None)
    out_dir = check_writable(out_dir, force=force, directory=True)
    m = data.matrix
    if n_splits > 0 and n_test >= m.shape[0] - 1:
        raise InputError(f"{data.source}: {m.shape[0]} models are too few for the agreement protocol with --n-test "
                         f"{n_test} (it needs at least {n_test + 2}): lower --n-test, or pass --n-splits 0 to "
                         "write the report without the agreement section")
    name = Path(data.source).stem or "benchmark"
    bank = calibrate_bank(m, engine=engine, variance_threshold=variance_threshold, seed=seed, interval_check=False,
                          progress=say)
    theta = bank.calibration_theta
    scores = m.safety_scores().reindex(theta.index)
    fit = bank.items.rename(columns={"safe_rate": "observed"})[["observed", "expected", "residual"]]
    diag = bank.meta["diagnostics"]
    with atomic_directory(out_dir, force=force, note=f"irtlib {__version__} report of {data.source}\n") as tmp:
        figures = {
            "theta_vs_score.png": ("Ability against safety score (Figure 2)",
                                   plots.theta_vs_score({name: (theta, scores)}, ncols=1)),
            "item_fit.png": ("Observed against model-implied item safe rates (appendix E)",
                             plots.item_fit_scatter({name: fit}, ncols=1)),
            "discrimination.png": ("Spread of discrimination a (Figure 3)",
                                   plots.discrimination_spread({name: bank.a})),
            "ceiling.png": ("Models above the 0.95 ceiling, spread out in theta",
                            plots.ceiling_separation({name: (theta, scores)}, ncols=1)),
        }
        agreement_html, table2 = "<p>Agreement protocol not run (0 splits).</p>", None
        if n_splits > 0:
            methods = list(methods or ids())
            say(f"agreement protocol: {n_splits} splits, methods {','.join(methods)}")
            results = agreement.run_agreement(m, methods=methods, ks=ks, n_splits=n_splits, n_test=n_test,
                                              seed=seed, engine=engine, n_jobs=n_jobs,
                                              variance_threshold=variance_threshold, progress=show_progress)
            results.to_csv(tmp / "agreement.csv", index=False)
            figures["agreement.png"] = (f"Agreement with the full benchmark against k ({n_splits} splits, "
                                        f"{n_test} test models each; shading 1 SD)",
                                        plots.agreement_curves(results,
                                                               title=f"Agreement with the full benchmark: {name}"))
            table2, agreement_html = _agreement_tables(results, methods)
        for fname, (_, fig) in figures.items():
            fig.savefig(tmp / fname, dpi=110, bbox_inches="tight")
            plt.close(fig)
        body = _body(m, bank, variance_threshold, figures, agreement_html)
        summary = {"source": data.source, "sha256": data.sha256, "n_models": m.shape[0], "n_items": m.shape[1],
                   "bank_items": len(bank), "filtered": bank.filtered, "diagnostics": diag,
                   "agreement": None if table2 is None else table2.to_dict(orient="records"),
                   "figures": list(figures)}
        (tmp / "summary.json").write_text(json.dumps(jsonable(summary), indent=2))
        (tmp / "index.html").write_text(_HTML.format(
            title=f"irtlib report: {name}", version=__version__, source=data.source, sha=data.sha256[:16],
            engine=engine, rule=rule, threshold=variance_threshold, body="\n".join(body)), encoding="utf-8")
    return summary


def _agreement_tables(results, methods: Sequence[str]) -> tuple:
    """Table 2 (when Fluid ran; else None) and the report's HTML of it and of the mean agreement curves."""
    from irtlib.protocol import agreement

    curves = agreement.agreement_curves(results)
    table2 = agreement.summarise_table2(results) if "fluid" in methods else None
    html = ("<h3>Table 2 summary</h3>" + _html_table(table2) if table2 is not None else "") + \
        "<h3>Mean agreement by budget k</h3>" + _html_table(curves.pivot(index="k", columns="method", values="mean"))
    return table2, html


def _body(m, bank, variance_threshold: float, figures: dict, agreement_html: str) -> list[str]:
    """The report's HTML body: the summary facts, one section per figure, the agreement section."""
    import pandas as pd

    diag = bank.meta["diagnostics"]
    cv_ci = diag.get("cv_a_interval")
    facts = pd.DataFrame({"value": [
        m.shape[0], m.shape[1], m.n_observations, len(bank), bank.filtered["n_items"],
        diag["item_rmse"], diag["cv_a"], diag["spearman_theta_score"], diag["ceiling"]["above"],
    ]}, index=["models", "items", "responses", "items calibrated", "items left out (variance <= "
               f"{variance_threshold})", "item RMSE", "CV of a", "Spearman(theta, safety score)",
               "models above 0.95"])
    if cv_ci and bank.se_a is not None:
        import numpy as np

        extra = pd.DataFrame({"value": [f"{cv_ci[0]:.3f} to {cv_ci[1]:.3f}", f"{np.median(bank.se_a):.3f}",
                                        f"{np.median(bank.se_b):.3f}"]},
                             index=["CV of a, 95% interval (item standard errors)", "median SE of a",
                                    "median SE of b"])
        shown_facts = facts["value"].map(lambda v: f"{v:.3f}" if isinstance(v, float) else str(v))
        facts = pd.concat([shown_facts.to_frame("value"), extra])
    body = ["<h2>Summary</h2>", facts.to_html(border=0, header=False, float_format=lambda v: f"{v:.3f}")]
    for fname, (caption, _) in figures.items():
        if fname == "agreement.png":
            continue
        body += [f"<h2>{caption}</h2>", f'<img src="{fname}" alt="{caption}">']
    if bank.se_a is not None:
        least = bank.items.assign(rel_se_a=bank.items["se_a"] / bank.items["a"]).nlargest(10, "rel_se_a")
        body += ["<h2>Least precisely known items</h2>",
                 f'<p class="note">The ten items with the largest SE of a relative to a '
                 f'({bank.meta["standard_errors"]["information"]}, given the scale).</p>',
                 _html_table(least[["a", "se_a", "b", "se_b", "safe_rate"]])]
    body += ["<h2>Agreement</h2>"]
    if "agreement.png" in figures:
        body += [f'<p class="note">{figures["agreement.png"][0]}</p>', '<img src="agreement.png" alt="agreement">']
    return body + [agreement_html]

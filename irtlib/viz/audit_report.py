"""The HTML report and JSON summary of ``irtlib audit`` (:func:`irtlib.bank.audit.audit_bank`).

:func:`write_audit` writes ``index.html`` (figures embedded as PNG data, one section per check with
its flags, their evidence and how to read them) and ``audit.json`` (the summary and the flagged
items, for CI) into a directory, atomically; an existing report is replaced only with ``force``.
"""

from __future__ import annotations

import base64
import html
import io
import json

from irtlib._typing import PathLike

from .report import HTML_PAGE, jsonable

__all__ = ["write_audit"]

#: The report page of irtlib report, with the audit's own note under the title.
_PAGE = HTML_PAGE.split('<p class="note">')[0] + ('<p class="note">Written by irtlib {version}: '
                                                  'bank <code>{bank}</code> '
                                              'audited on <code>{source}</code> (SHA-256 <code>{sha}</code>); '
                                              'tests at level {alpha}, correction {correction}.</p>\n{body}\n'
                                              '</body></html>\n')

_TITLES = {"low_discrimination": "Near-zero discrimination", "against_trend": "Answered against the ability trend",
           "constant": "Passed or failed by every model", "misfit": "Item misfit (S-X2)",
           "local_dependence": "Locally dependent pairs (Q3)", "dimensionality": "Dimensionality (parallel analysis)"}


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _figures(result: dict, a_min: float) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items, theta = result["items"], result["theta"]
    figs = {}
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.hist(items["a_per_sd"], bins=30, color="0.6")
    ax.axvline(a_min, color="C3", ls="--", label=f"cut {a_min}")
    ax.set_xlabel("a x SD of the models' abilities")
    ax.set_ylabel("items")
    ax.legend()
    figs["Discrimination of every bank item"] = _png(fig)
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.plot(result["information"]["theta"], result["information"]["information"], color="C0")
    ax.plot(theta, [0] * len(theta), "|", color="k", ms=12, label="models")
    ax.set_xlabel("ability theta")
    ax.set_ylabel("test information")
    ax.legend()
    figs["Test information curve, the models' abilities as ticks"] = _png(fig)
    dim = result["eigenvalues"]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.plot(dim.index, dim["eigenvalue"], "o-", label="residuals")
    ax.plot(dim.index, dim["parallel"], "s--", color="0.5", label="parallel analysis")
    ax.set_xlabel("rank")
    ax.set_ylabel("eigenvalue")
    ax.legend()
    figs["Residual eigenvalues against parallel analysis"] = _png(fig)
    return figs


def write_audit(result: dict, out_dir: PathLike, *, force: bool = False, title: str = "irtlib audit",
                bank: str = "", source: str = "", sha: str = "") -> dict:
    """Write ``index.html`` and ``audit.json`` of an audit into ``out_dir`` (atomically).

    Parameters
    ----------
    result : dict
        What :func:`irtlib.bank.audit.audit_bank` returned.
    out_dir : path-like
        Directory to create; an existing one is replaced only with ``force`` and only when it is an
        earlier irtlib output.
    title, bank, source, sha : str
        Shown at the top of the report.

    Returns
    -------
    dict
        The JSON document written to ``audit.json``.
    """
    from irtlib._version import __version__
    from irtlib.bank.audit import CHECKS, HOW_TO_READ
    from irtlib.io.atomic import atomic_directory

    summary = result["summary"]
    figures = _figures(result, summary["settings"]["a_min"])
    body = ["<h2>Summary</h2>",
            f"<p>{summary['n_models']} models, {summary['n_bank_items']} bank items; "
            f"{summary['n_flagged_items']} item(s) flagged by an item check; "
            f"{'nothing flagged' if summary['ok'] else 'see below'}.</p>"]
    for name in CHECKS:
        frame = result["checks"][name]
        body += [f"<h2>{_TITLES[name]}: {len(frame)}</h2>", f'<p class="note">How to read it: '
                 f"{html.escape(HOW_TO_READ[name])}</p>"]
        if len(frame):
            body.append(frame.head(50).to_html(border=0, float_format=lambda v: f"{v:.3g}"))
    for caption, data in figures.items():
        body += [f"<h2>{caption}</h2>", f'<img alt="{caption}" src="data:image/png;base64,{data}">']
    document = {"command": "audit", "summary": summary, "flagged_items": result["flagged_items"],
                "flags": {name: jsonable(frame.reset_index().to_dict(orient="records"))
                          for name, frame in result["checks"].items()},
                "how_to_read": HOW_TO_READ}
    page = _PAGE.format(title=html.escape(title), version=__version__, bank=html.escape(bank), sha=sha[:16],
                        source=html.escape(source), alpha=summary["settings"]["alpha"],
                        correction=summary["settings"]["correction"], body="\n".join(body))
    with atomic_directory(out_dir, force=force, note=f"irtlib {__version__} audit\n") as tmp:
        (tmp / "audit.json").write_text(json.dumps(jsonable(document), indent=2, allow_nan=False))
        (tmp / "index.html").write_text(page, encoding="utf-8")
    return document

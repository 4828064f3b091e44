"""Every number the paper reports, in one place, each with where in the paper it comes from.

Chapters and tests read the paper's values from here and never type them by hand. Each value is
the paper's own (arXiv 2606.20626), with the table, figure or section it is printed in; where the paper is
silent, the value here is ``None`` and the book says so rather than inventing one.

Each table is a :class:`PaperTable`: a read-only mapping from benchmark id to value, with a
``source`` (e.g. ``"Table 2"``, ``"appendix E"``) and a ``description``::

    >>> from irtlib.datasets import paper
    >>> paper.FIGURE3_CV["wmdp-bio"], paper.FIGURE3_CV.source
    (0.97, 'Figure 3')

Benchmark ids are those of :mod:`irtlib.datasets`: ``airbench2024``, ``anthropic-red-team``,
``harmbench``, ``safetybench``, ``simplesafetytests``, ``wmdp-bio``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from irtlib.errors import InputError

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = [
    "BENCHMARKS", "DISPLAY_NAMES", "PaperTable", "Table1Row", "Table2Left", "Table2Right",
    "TABLE1", "FIGURE3_CV", "ITEM_RMSE", "CEILING", "SPEARMAN_THETA_SCORE", "TABLE2_LEFT",
    "TABLE2_RIGHT", "SAFETYBENCH_APPENDIX_F", "SAVINGS", "VARIANCE_FILTER", "CEILING_SCORE",
    "PRIORS", "ABILITY_ESTIMATION", "PROTOCOL", "facts", "numbers", "REPORTED", "printed_decimals", "close_band",
]

#: The six benchmarks, in Table 1's order.
BENCHMARKS = ("airbench2024", "anthropic-red-team", "harmbench", "safetybench",
              "simplesafetytests", "wmdp-bio")

#: Names as the paper prints them.
DISPLAY_NAMES = MappingProxyType({
    "airbench2024": "AIR-Bench 2024", "anthropic-red-team": "Anthropic Red Team",
    "harmbench": "HarmBench", "safetybench": "SafetyBench",
    "simplesafetytests": "SimpleSafetyTests", "wmdp-bio": "WMDP (Bio)",
})


class PaperTable(Mapping):
    """A read-only mapping of paper values with their source.

    Parameters
    ----------
    source : str
        Where in the paper (``"Table 1"``, ``"Figure 3"``, ``"appendix E"``, ...).
    description : str
        What the values are.
    values : mapping
        Benchmark id (or other key) to value.
    """

    def __init__(self, source: str, description: str, values: Mapping):
        self.source = source
        self.description = description
        self._values = MappingProxyType(dict(values))

    def __getitem__(self, key):
        try:
            return self._values[key]
        except KeyError:
            raise KeyError(f"{self.source} ({self.description}) has no entry {key!r}; "
                           f"it has {list(self._values)}") from None

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"PaperTable({self.source!r}, {self.description!r}, {dict(self._values)!r})"


@dataclass(frozen=True)
class Table1Row:
    """One row of Table 1 (the data)."""

    display_name: str
    models: int
    items: int
    observations: str          # as printed ("467k"); n_models * n_items is not always it
    source: str
    response_format: str


TABLE1 = PaperTable("Table 1", "the six benchmarks", {
    "airbench2024": Table1Row("AIR-Bench 2024", 82, 5694, "467k", "HELM Safety",
                              "open generation, graded policy-violation judge"),
    "anthropic-red-team": Table1Row("Anthropic Red Team", 77, 1000, "77k", "HELM Safety",
                                    "open generation, LLM judge"),
    "harmbench": Table1Row("HarmBench", 77, 400, "30.8k", "HELM Safety", "open generation, LLM judge"),
    "safetybench": Table1Row("SafetyBench", 29, 11435, "333k",
                             "run by the authors (zero-shot multiple choice)", "multiple choice"),
    "simplesafetytests": Table1Row("SimpleSafetyTests", 77, 100, "7.7k", "HELM Safety",
                                   "open generation, LLM judge"),
    "wmdp-bio": Table1Row("WMDP (Bio)", 29, 1273, "36.9k",
                          "run by the authors (zero-shot multiple choice)", "multiple choice"),
})

FIGURE3_CV = PaperTable("Figure 3", "coefficient of variation of the discriminations a", {
    "wmdp-bio": 0.97, "safetybench": 0.93, "airbench2024": 0.92,
    "anthropic-red-team": 0.69, "harmbench": 0.61, "simplesafetytests": 0.46,
})

ITEM_RMSE = PaperTable("appendix E", "item-level RMSE between observed and fitted safe rates", {
    "anthropic-red-team": 0.008, "simplesafetytests": 0.014, "harmbench": 0.016,
    "airbench2024": 0.017, "safetybench": 0.037, "wmdp-bio": 0.038,
})

#: The safety score the paper calls the ceiling.
CEILING_SCORE = 0.95

CEILING = PaperTable("Reported results, ceiling separation", "models at the 0.95 ceiling", {
    "anthropic-red-team": {"above": 67, "n_models": 77, "theta_range_above": (1.19, 6.06),
                           "example_pair_scores": (0.957, 0.999), "example_pair_theta_gap": 5.0,
                           "note": "two models scoring 0.957 and 0.999 differ by almost five "
                                   "standard-deviation units of theta"},
    "harmbench": {"in_095_100": 19, "n_models": 77,
                  "note": "19 models score between 0.95 and 1.00 and are spread out in theta"},
    "simplesafetytests": {"above": None, "n_models": 77,
                          "note": "the same ceiling separation, on a smaller scale (count not reported)"},
    "airbench2024": {"above": 0, "n_models": 82, "note": "no model scores above 0.95"},
    "safetybench": {"above": 0, "n_models": 29, "note": "no model scores above 0.95"},
    "wmdp-bio": {"above": 0, "n_models": 29, "note": "no model scores above 0.95"},
})

SPEARMAN_THETA_SCORE = PaperTable("Figure 2", "Spearman(theta, safety score), every benchmark",
                                  {"min": 0.97, "max": 1.00})


@dataclass(frozen=True)
class Table2Left:
    """Table 2, left column: the smallest k at which Fluid Benchmarking first reaches 0.90."""

    k: int | None
    k_at_least: bool            # True where the paper prints "> k"
    k_over_n: str               # as printed
    fluid: float
    random: float
    random_irt: float
    others: Mapping = field(default_factory=dict)   # method id -> agreement at that k
    note: str = ""


@dataclass(frozen=True)
class Table2Right:
    """Table 2, right column: the largest swept k before random catches up with Fluid."""

    k: int
    k_over_n: str
    values: Mapping = field(default_factory=dict)   # method id -> agreement, where reported


TABLE2_LEFT = PaperTable("Table 2 (left)", "smallest k at which Fluid first reaches 90% agreement", {
    "airbench2024": Table2Left(6, False, "0.1%", 0.91, 0.73, 0.74),
    "anthropic-red-team": Table2Left(51, False, "5%", 0.91, 0.78, 0.79,
                                     MappingProxyType({"total-fisher": 0.68})),
    "harmbench": Table2Left(17, False, "4%", 0.90, 0.92, 0.91,
                            MappingProxyType({"anchor-points": 0.94})),
    "safetybench": Table2Left(3000, True, "> 26%", 0.82, 0.97, 0.97,
                              MappingProxyType({"marginal-fisher-bq": 0.91,
                                                "anchor-points": 0.92, "disco": 0.91}),
                              "sweep stopped because random already beat the other methods"),
    "simplesafetytests": Table2Left(20, False, "20%", 0.91, 0.75, 0.75),
    "wmdp-bio": Table2Left(78, False, "6%", 0.90, 0.86, 0.80),
})

TABLE2_RIGHT = PaperTable("Table 2 (right)", "largest swept k before random catches up with Fluid", {
    "airbench2024": Table2Right(38, "0.7%", MappingProxyType({"marginal-fisher": 0.95, "fluid": 0.94})),
    "anthropic-red-team": Table2Right(260, "26%"),
    "harmbench": Table2Right(9, "2%"),
    "safetybench": Table2Right(68, "0.6%", MappingProxyType({
        "marginal-fisher-bq": 0.84, "anchor-points": 0.79, "fluid": 0.70, "random": 0.70})),
    "simplesafetytests": Table2Right(63, "63%", MappingProxyType({
        "disco": 1.00, "anchor-points": 0.99, "fluid": 0.98})),
    "wmdp-bio": Table2Right(234, "18%"),
})

SAFETYBENCH_APPENDIX_F = PaperTable("appendix F", "SafetyBench agreement curves", {
    "random_reaches_090_at_k": 556,     # "about"
    "k_small": 19, "irt_at_k_small": 0.71, "random_at_k_small": 0.46,
})

SAVINGS = PaperTable("Reported results, savings", "cost saved (1 - k / N)", {
    "airbench2024_adaptive_at_090": 0.999, "airbench2024_static_at_090": 0.998,
    "abstract_min_where_090_reachable": 0.80, "abstract_static_range": (0.80, 0.998),
    "body_adaptive_range_excl_harmbench": (0.80, 0.95),
    "body_marginal_fisher_range_excl_harmbench": (0.80, 0.92),
})

VARIANCE_FILTER = PaperTable("Binarization", "items dropped before anything else",
                             {"max_variance_dropped": 0.01})

PRIORS = PaperTable("appendix B", "py-irt calibration as the paper ran it", {
    "a": "LogNormal(0, 1)", "b": "Normal(0, 1)", "theta": "Normal(0, 1)", "epochs": 1000,
    "lr": 0.1, "optimizer": "Adam", "inference": "SVI", "py_irt_version": ">= 0.7.0",
})

ABILITY_ESTIMATION = PaperTable("Model: 2PL", "MAP ability", {
    "prior": "Normal(0, 1)", "newton_step_cap": 1.0, "newton_max_iter": 100,
    "bisection_bracket": (-8.0, 8.0), "bisection_max_iter": 200,
})

PROTOCOL = PaperTable("Evaluation", "agreement protocol", {
    "splits_min": 70, "splits_max": 100, "test_models_per_split": 10,
    "agreement": "Spearman rho between subset performance and full safety score on test models",
    "target_agreement": 0.90,
})


#: Appendix E's bound on the item RMSE ("at most 0.04 everywhere"); a bound, not a reported value,
#: so it is not among :func:`numbers`.
ITEM_RMSE_BOUND = 0.04

def facts(name: str) -> dict:
    """Everything the paper reports about one benchmark.

    Parameters
    ----------
    name : str
        A benchmark id of :data:`BENCHMARKS`.

    Returns
    -------
    dict
        ``display_name``, ``table1`` (:class:`Table1Row`), ``cv_a``, ``item_rmse``,
        ``ceiling`` (dict), ``table2_left`` (:class:`Table2Left`), ``table2_right``
        (:class:`Table2Right`) and ``sources`` (key -> where in the paper).
    """
    if name not in BENCHMARKS:
        raise InputError(f"unknown benchmark {name!r}; the paper's benchmarks are {list(BENCHMARKS)}")
    return {
        "display_name": DISPLAY_NAMES[name], "table1": TABLE1[name], "cv_a": FIGURE3_CV[name],
        "item_rmse": ITEM_RMSE[name], "ceiling": CEILING[name], "table2_left": TABLE2_LEFT[name],
        "table2_right": TABLE2_RIGHT[name],
        "sources": {"table1": TABLE1.source, "cv_a": FIGURE3_CV.source, "item_rmse": ITEM_RMSE.source,
                    "ceiling": CEILING.source, "table2_left": TABLE2_LEFT.source,
                    "table2_right": TABLE2_RIGHT.source},
    }


#: The tables whose numbers the book must set beside its own (name -> table).
REPORTED = MappingProxyType({
    "TABLE1": TABLE1, "FIGURE3_CV": FIGURE3_CV, "ITEM_RMSE": ITEM_RMSE, "CEILING": CEILING,
    "SPEARMAN_THETA_SCORE": SPEARMAN_THETA_SCORE, "TABLE2_LEFT": TABLE2_LEFT,
    "TABLE2_RIGHT": TABLE2_RIGHT, "SAFETYBENCH_APPENDIX_F": SAFETYBENCH_APPENDIX_F, "SAVINGS": SAVINGS,
})


#: Fields printed as text that are numbers all the same ("467k", "0.1%").
_NUMERIC_TEXT = ("observations", "k_over_n")


def _leaves(prefix: str, value):
    if isinstance(value, str) and prefix.rsplit(".", 1)[-1] in _NUMERIC_TEXT:
        yield prefix, value
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, (int, float)):
        yield prefix, value
    elif isinstance(value, tuple):
        for i, v in enumerate(value):
            yield from _leaves(f"{prefix}.{i}", v)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _leaves(f"{prefix}.{k}", v)
    elif hasattr(value, "__dataclass_fields__"):
        for k in value.__dataclass_fields__:
            yield from _leaves(f"{prefix}.{k}", getattr(value, k))


def numbers() -> dict:
    """Every number the paper reports, keyed by a stable reference.

    Returns
    -------
    dict
        ``"FIGURE3_CV[wmdp-bio]" -> 0.97``, ``"TABLE2_LEFT[airbench2024].fluid" -> 0.91``,
        ``"CEILING[anthropic-red-team].theta_range_above.0" -> 1.19``, ... The book's comparison
        tables carry these references, and a test checks that each one appears in some chapter.
        Model and item counts of Table 1 are included, and so are numbers the paper prints as
        text (Table 1's observations, Table 2's k/N); free-text fields are not.
    """
    out = {}
    for name, table in REPORTED.items():
        for key, value in table.items():
            out.update(_leaves(f"{name}[{key}]", value))
    return out


def printed_decimals(ref: str) -> int:
    """The decimals the paper prints a number with, from its reference in :func:`numbers`.

    Integers (counts, budgets) have none. Fractions are printed with at least two decimals (0.90,
    "80%"), more where the value has them (0.008, "99.9%" = 0.999). The theta gap of the example
    pair is printed in words ("almost five standard-deviation units", Ceiling separation): none.

    Examples
    --------
    >>> printed_decimals("TABLE2_LEFT[harmbench].fluid"), printed_decimals("ITEM_RMSE[harmbench]")
    (2, 3)
    >>> printed_decimals("SAVINGS[airbench2024_adaptive_at_090]"), printed_decimals("TABLE2_LEFT[harmbench].k")
    (3, 0)
    """
    value = numbers()[ref]
    if ref.endswith("example_pair_theta_gap") or isinstance(value, int):
        return 0
    text = f"{float(value):.6f}".rstrip("0")
    return max(2, len(text.split(".")[1]))


def close_band(ref: str) -> float | None:
    """The distance within which a value counts as *close* to this number, where it is not the default.

    The default (None) is two units of the last printed decimal (0.02 at two decimals). The example
    pair's "almost five standard-deviation units" is printed as a word: one unit.
    """
    return 1.0 if ref.endswith("example_pair_theta_gap") else None

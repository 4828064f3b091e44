"""irtbook.figure_cache: a figure identical to one drawn before reuses its output; any change draws it again."""

from __future__ import annotations

import subprocess
import sys

import matplotlib
import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from irtbook import figure_cache


def _figure(*, shift=0.0, title="panel", unit="k"):
    """A constrained-layout figure with the artists the book's figures use: lines, bands, a legend, a formatter."""
    rng = np.random.default_rng(0)
    fig = Figure(figsize=(6, 3), layout="constrained")
    for ax in fig.subplots(1, 2, sharey=True):
        x = np.arange(50)
        y = rng.normal(size=50).cumsum() + shift
        ax.plot(x, y, label="mean")
        ax.fill_between(x, y - 1, y + 1, alpha=0.2)
        ax.set_title(title)
        ax.legend()
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, pos: f"{v:.0f}{unit}"))
    return fig


def _png(fig):
    from IPython.core.pylabtools import print_figure

    return print_figure(fig, "png", bbox_inches="tight")


SCRIPT = """
import numpy as np
from matplotlib.figure import Figure
from irtbook.figure_cache import figure_digest
fig = Figure(figsize=(6, 3), layout="constrained")
ax = fig.subplots()
ax.plot(np.arange(10), np.arange(10) ** 2, label="x")
ax.legend()
print(figure_digest(fig))
"""


def test_digest_is_the_same_for_figures_built_alike_in_other_processes():
    digests = {subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True).stdout
               for _ in range(2)}
    assert len(digests) == 1 and len(digests.pop().strip()) == 64
    assert figure_cache.figure_digest(_figure()) == figure_cache.figure_digest(_figure())


@pytest.mark.parametrize("change", [{"shift": 1e-9}, {"title": "other"}, {"unit": "m"}])
def test_digest_changes_with_data_text_and_formatter(change):
    assert figure_cache.figure_digest(_figure(**change)) != figure_cache.figure_digest(_figure())


def test_cached_printer_returns_what_drawing_returns_and_redraws_a_changed_figure(tmp_path):
    calls = []

    def printer(fig):
        calls.append(fig)
        return _png(fig)

    cached = figure_cache.CachedFigurePrinter(printer, mime="image/png", cache_dir=tmp_path)
    first = cached(_figure())
    assert first == _png(_figure()) and len(calls) == 1
    assert cached(_figure()) == first and len(calls) == 1          # an identical figure: read back
    assert len(list((tmp_path / figure_cache.SUBDIR).iterdir())) == 1
    changed = cached(_figure(shift=0.5))                            # other data: drawn
    assert len(calls) == 2 and changed == _png(_figure(shift=0.5)) and changed != first
    with matplotlib.rc_context({"lines.linewidth": 3.0}):           # an rcParam drawing reads: drawn
        assert cached(_figure()) == _png(_figure())
    assert len(calls) == 3


def test_unpicklable_figure_is_drawn_every_time(tmp_path):
    import threading

    fig = _figure()
    fig.lock = threading.Lock()                  # cannot be pickled
    assert figure_cache.figure_digest(fig) is None
    calls = []
    cached = figure_cache.CachedFigurePrinter(lambda f: calls.append(f) or b"png", mime="image/png",
                                              cache_dir=tmp_path)
    assert cached(fig) == b"png" and cached(fig) == b"png" and len(calls) == 2


def test_install_wraps_the_inline_backends_formatter_once(tmp_path):
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.pylabtools import select_figure_formats

    shell = InteractiveShell.instance()
    select_figure_formats(shell, {"png"})                # what the inline backend registers
    try:
        png = shell.display_formatter.formatters["image/png"]
        figure_cache.install(cache_dir=tmp_path, shell=shell)
        figure_cache.install(cache_dir=tmp_path, shell=shell)
        wrapper = png.lookup_by_type(Figure)
        assert isinstance(wrapper, figure_cache.CachedFigurePrinter)
        assert not isinstance(wrapper.printer, figure_cache.CachedFigurePrinter)
        data, _ = shell.display_formatter.format(_figure())
        again, _ = shell.display_formatter.format(_figure())
        assert data["image/png"] == again["image/png"] and data["text/plain"].startswith("<Figure size")
        figure_cache.install(cache_dir=None, shell=shell)             # no cache: nothing changes
        assert png.lookup_by_type(Figure) is wrapper
    finally:
        InteractiveShell.clear_instance()


def test_digest_is_the_one_the_plain_checks_give(tmp_path):
    """The containers' fast answer changes no byte: the digest equals one from the checks alone."""
    import hashlib
    import io
    import pickle
    import types

    from matplotlib.figure import Figure
    from matplotlib.transforms import TransformNode

    from irtbook import figure_cache as fc

    class Reference(fc._DigestPickler):
        def reducer_override(self, obj):
            if isinstance(obj, TransformNode):
                state = dict(obj.__getstate__())
                state["_parents"] = list(state.get("_parents", {}).values())
                return fc._rebuilt, (type(obj).__module__, type(obj).__qualname__), state
            if isinstance(obj, types.FunctionType) and obj is not fc._rebuilt:
                cells = tuple(c.cell_contents for c in obj.__closure__ or ())
                return fc._rebuilt, ("function", obj.__module__, obj.__qualname__, fc._code(obj.__code__),
                                     obj.__defaults__, obj.__kwdefaults__, cells)
            return NotImplemented

    def make():
        fig = Figure(figsize=(4, 3), layout="constrained")
        ax = fig.subplots()
        ax.plot([1, 2, 3], [0.2, 0.5, 0.4], label="fluid")
        ax.xaxis.set_major_formatter(lambda v, _pos: f"{v:.1f}")
        ax.legend(title={"a": (1, 2)}.__repr__())
        return fig

    buffer = io.BytesIO()
    Reference(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(make())
    assert fc.figure_digest(make()) == hashlib.sha256(buffer.getvalue()).hexdigest()

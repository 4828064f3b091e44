"""The primer chapter (book/00_primer.md) and its module irtbook.primer."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import irtlib
from irtbook import primer

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = ROOT / "book" / "00_primer.md"
EXECUTED = ROOT / "_build" / "executed" / "00_primer.ipynb"


def _bank(n_models=6, n_items=300, seed=3, missing=0.05):
    rng = np.random.default_rng(seed)
    a = rng.lognormal(0.3, 0.5, n_items)
    b = rng.normal(0, 1.2, n_items)
    theta = rng.normal(0, 1, n_models)
    x = (rng.random((n_models, n_items)) < irtlib.probability(theta[:, None], a, b)).astype(float)
    x[rng.random(x.shape) < missing] = np.nan
    return x, a, b


# ----------------------------------------------------------------------------- the worked trace
@pytest.mark.parametrize("budget", [1, 7, 40])
def test_trace_equals_run_adaptive(budget):
    x, a, b = _bank()
    traj = irtlib.run_adaptive(x, a, b, budget=budget)
    for m in range(x.shape[0]):
        trace = primer.adaptive_trace(x[m], a, b, budget=budget)
        assert list(trace["step"]) == list(range(1, budget + 1))
        np.testing.assert_array_equal(trace["item"].to_numpy(), traj.items[m])
        np.testing.assert_allclose(trace["theta"].to_numpy(), traj.estimate[m], atol=1e-6)
        # what the table shows is what the items are
        np.testing.assert_array_equal(trace["a"].to_numpy(), a[traj.items[m]])
        np.testing.assert_array_equal(trace["b"].to_numpy(), b[traj.items[m]])
        np.testing.assert_array_equal(trace["response"].to_numpy(), x[m, traj.items[m]])
        # the information the item gave, at the estimate it was chosen for
        before = np.r_[0.0, trace["theta"].to_numpy()[:-1]]
        np.testing.assert_allclose(trace["theta_before"].to_numpy(), before)
        np.testing.assert_allclose(trace["information"].to_numpy(),
                                   irtlib.fisher_information(before, trace["a"].to_numpy(), trace["b"].to_numpy()))
        # the standard error is map_ability's on the items given so far
        given = traj.items[m]
        fit = irtlib.map_ability(x[m, given], a[given], b[given])
        # map_ability from theta 0 against the trace's path: both stop within tol = 1e-8 of the mode
        assert trace["se"].iloc[-1] == pytest.approx(float(fit.se), abs=1e-7)


def test_trace_never_gives_an_unanswered_or_repeated_item():
    x, a, b = _bank(missing=0.3)
    trace = primer.adaptive_trace(x[0], a, b, budget=50)
    items = trace["item"].to_numpy()
    assert len(set(items)) == items.size and not np.isnan(x[0, items]).any()


def test_trace_rejects_bad_budgets():
    x, a, b = _bank()
    with pytest.raises(ValueError, match="budget"):
        primer.adaptive_trace(x[0], a, b, budget=0)
    with pytest.raises(ValueError, match="budget"):
        primer.adaptive_trace(x[0], a, b, budget=x.shape[1] + 1)


# ----------------------------------------------------------------------------- curves, posterior
def test_test_information_and_standard_error():
    _, a, b = _bank()
    grid = primer.THETA_GRID
    info = primer.test_information(grid, a, b)
    np.testing.assert_allclose(info, irtlib.fisher_information(grid[:, None], a, b).sum(axis=1))
    np.testing.assert_allclose(primer.standard_error(grid, a, b), 1 / np.sqrt(info))
    np.testing.assert_allclose(primer.standard_error(grid, a, b, prior_sd=1.0), 1 / np.sqrt(info + 1))


def test_posterior_grid_mode_is_the_map_estimate():
    a = np.array([1.0, 1.5, 0.8, 2.0, 1.2])
    b = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    step = primer.THETA_GRID[1] - primer.THETA_GRID[0]
    for x in ([1, 1, 0, 1, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]):
        curves, s = primer.posterior_grid(np.array(x, float), a, b)
        for column in ("prior", "likelihood", "posterior"):
            assert curves[column].sum() * step == pytest.approx(1.0)
        assert abs(s["grid_mode"] - s["map"]) <= step
        fit = irtlib.map_ability(np.array(x, float), a, b)
        assert s["map"] == pytest.approx(float(fit.theta)) and s["se"] == pytest.approx(float(fit.se))
        assert s["likelihood_increasing"] == (sum(x) == 5)


def _primer_cell(name: str) -> str:
    """The source of the code cell of book/00_primer.md that defines ``name``."""
    cells = re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", CHAPTER.read_text(encoding="utf-8"), flags=re.S)
    found = [c for c in cells if re.search(rf"^def {name}\(", c, re.M)]
    assert found, f"no cell defines {name}"
    return re.sub(r"^:tags:.*\n", "", found[0])


def test_primer_information_curve_equals_fisher_information():
    """The function the primer teaches is irtlib's information, on every kind of item."""
    namespace = {"np": np, "irtlib": irtlib, "grid": primer.THETA_GRID}
    exec(_primer_cell("item_information"), namespace)
    grid = primer.THETA_GRID[:, None]
    a = np.array([0.0, -1.0, 0.5, 2.0, 8.0])
    b = np.array([0.0, 0.0, -1.0, 1.0, 0.3])
    np.testing.assert_allclose(namespace["item_information"](grid, a, b), irtlib.fisher_information(grid, a, b),
                               rtol=1e-9, atol=1e-12)


# ----------------------------------------------------------------------------- the animation
def test_animation_plays_without_network():
    x, a, b = _bank(n_items=80)
    trace = primer.adaptive_trace(x[0], a, b, budget=4)
    html = primer.animation_html(primer.trace_animation(trace, x[0], a, b, full_theta=0.1))
    assert "anim-buttons" in html and 'class="anim-slider"' in html
    assert len(re.findall(r"data:image/png;base64", html)) == 4          # one frame per step
    assert not re.search(r"(href|src)=\"https?://", html), "the animation asks the network for something"
    assert "fa fa-" not in html


def test_preview_steps_spread_from_the_first_step_to_the_last():
    assert primer.preview_steps(20) == [0, 10, 19]
    assert primer.preview_steps(20, count=5) == [0, 5, 10, 14, 19]
    assert primer.preview_steps(3) == [0, 1, 2]                          # fewer steps than frames: every step
    assert primer.preview_steps(1) == [0] and primer.preview_steps(0) == []
    assert primer.preview_steps(9, count=3) == [0, 4, 8]


def test_animation_of_chosen_steps_draws_those_steps_only():
    x, a, b = _bank(n_items=80)
    trace = primer.adaptive_trace(x[0], a, b, budget=8)

    def frames(anim):
        return re.findall(r"data:image/png;base64,([^\"']+)", primer.animation_html(anim))

    every = frames(primer.trace_animation(trace, x[0], a, b, full_theta=0.1, title="m:"))
    chosen = frames(primer.trace_animation(trace, x[0], a, b, full_theta=0.1, title="m:", steps=[0, 7]))
    assert len(every) == 8 and len(chosen) == 2
    assert chosen[0] == every[0]                          # the same first frame, drawn with the same layout
    assert chosen[1] != chosen[0]


def test_animation_frames_equal_those_laid_out_frame_by_frame():
    """The layout kept once it stops moving gives the frames a layout pass at every frame gives, bit for bit."""
    x, a, b = _bank(n_items=80)
    trace = primer.adaptive_trace(x[0], a, b, budget=12)

    def frames(anim):
        return re.findall(r"data:image/png;base64,([^\"']+)", primer.animation_html(anim))

    kept = primer.trace_animation(trace, x[0], a, b, full_theta=0.1, title="m:")
    every = primer.trace_animation(trace, x[0], a, b, full_theta=0.1, title="m:")
    draw = every._func

    def draw_and_lay_out_again(t):
        out = draw(t)
        every._fig.set_layout_engine("constrained")   # the layout pass runs again at this frame's savefig
        return out

    every._func = draw_and_lay_out_again
    assert kept._fig.get_layout_engine() is not None
    first, second = frames(kept), frames(every)
    assert kept._fig.get_layout_engine() is None              # the later frames were drawn without the layout pass
    assert len(first) == 12 and first == second


# ----------------------------------------------------------------------------- the executed chapter
def test_executed_primer_glues_the_trace_and_the_animation():
    if not EXECUTED.is_file():
        pytest.skip("book/00_primer has not been executed: make book QUICK=1")
    nb = json.loads(EXECUTED.read_text(encoding="utf-8"))
    glued = {}
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            name = (out.get("metadata") or {}).get("scrapbook", {}).get("name")
            if name:
                glued[name] = out.get("data", {})
    for key in ("fig_icc", "fig_info", "fig_post", "fig_rasch", "fig_pick", "tab_trace", "fig_trace", "anim_trace"):
        assert key in glued, key
    anim = "".join(glued["anim_trace"]["application/papermill.record/text/html"])
    parameters = nb["metadata"]["papermill"]["parameters"]
    budget = parameters.get("BUDGET", 20)
    quick = parameters.get("QUICK") in (True, "True")
    # one frame per step of the worked test; a QUICK build draws three of its steps, the first and the last among them
    frames = len(primer.preview_steps(budget)) if quick else budget
    assert len(re.findall(r"data:image/png;base64", anim)) == frames


# ----------------------------------------------------------------------------- in the browser
@pytest.mark.browser
def test_animation_steps_in_the_browser():
    from test_browser import CHROMIUM, CHROMIUM_ARGS, HTML  # the browser test's set-up

    page_file = HTML / "book" / "00_primer.html"
    if not page_file.is_file():
        pytest.skip("no built primer page: make book QUICK=1")
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not found")
    sync_api = pytest.importorskip("playwright.sync_api")
    import functools
    import http.server
    import threading

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(HTML))
    handler.log_message = lambda *args: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    server = f"http://127.0.0.1:{httpd.server_address[1]}"
    blocked = []
    try:
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(server) else
                       (blocked.append(r.request.url), r.abort()))
            errors = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{server}/book/00_primer.html", wait_until="load")
            controls = page.locator("div.animation .anim-buttons button")
            assert controls.count() == 9
            slider = page.locator("div.animation input.anim-slider")
            image = page.locator("div.animation img")
            assert slider.count() == 1 and image.count() == 1
            first = image.get_attribute("src")
            assert slider.input_value() == "0"
            page.locator("div.animation button[title='Next frame']").click()
            assert slider.input_value() == "1"
            assert image.get_attribute("src") != first
            page.locator("div.animation button[title='Last frame']").click()
            assert int(slider.input_value()) == int(slider.get_attribute("max")) > 1
            assert image.evaluate("img => img.naturalWidth") > 100
            browser.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert not [e for e in errors if "THEBE_JS_URL" not in e], errors
    assert not blocked, blocked


# ----------------------------------------------------------------------------- notation, glossary
def test_primer_notation_and_glossary_are_in_the_toc_in_place():
    sys_path = str(ROOT / "tools")
    import sys

    if sys_path not in sys.path:
        sys.path.insert(0, sys_path)
    import chapters

    entries = chapters.toc_entries(ROOT / "_toc.yml")
    assert entries.index("book/00_primer") == entries.index("book/01_data") - 1
    assert entries.index("book/scorecard") < entries.index("book/00_primer")
    assert entries.index("book/reproducibility") < entries.index("book/notation") < entries.index("book/references")
    assert entries.index("book/reproducibility") < entries.index("book/glossary") < entries.index("book/references")


def test_glossary_has_the_terms_the_chapters_use():
    text = (ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    body = re.search(r"```\{glossary\}\n(.*?)\n```", text, re.S).group(1)
    terms = {line.strip().lower() for line in body.splitlines() if line.strip() and not line.startswith(" ")}
    assert len(terms) >= 25
    for required in ("ability", "discrimination", "difficulty", "item information", "test information", "map",
                     "posterior", "prior", "fisher scoring", "cat", "maximum information", "agreement",
                     "spearman's rho", "variance filter", "binarization", "strict rule", "ceiling", "calibration",
                     "item bank", "static subset", "anchor points", "local independence", "unidimensionality"):
        assert required in terms, required
    used = set()
    for page in sorted((ROOT / "book").glob("*.md")):
        for match in re.finditer(r"\{term\}`([^`]+)`", page.read_text(encoding="utf-8")):
            target = re.search(r"<([^>]+)>$", match.group(1))
            used.add((target.group(1) if target else match.group(1)).strip().lower())
    assert used and used <= terms, f"{{term}} links to terms the glossary lacks: {sorted(used - terms)}"
    linked_from = [p.stem for p in sorted((ROOT / "book").glob("0*.md")) if "{term}`" in p.read_text()]
    assert len(linked_from) >= 8, linked_from


def test_no_page_shows_raw_glue_markup():
    html = ROOT / "_build" / "html" / "book"
    if not (html / "00_primer.html").is_file():
        pytest.skip("no built book: make book QUICK=1")
    from bs4 import BeautifulSoup

    for page in sorted(html.glob("*.html")):
        text = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser").get_text(" ")
        assert "{glue:" not in text and "{term}" not in text, f"{page.name} shows unrendered markup"


def test_perfect_steps_by_hand_and_by_enumeration():
    theta = np.array([0.3, -1.0, 2.0, 1.0])            # order by ability: rows 1, 0, 3, 2
    cols = np.array([[0, 0, 1, 1], [0, 1, 0, 1], [1, 1, 1, 1], [0, np.nan, 1, 1], [1, 0, 0, 0]], dtype=float).T
    values = cols[np.argsort(np.argsort(theta))]       # column patterns listed in ability order
    assert primer.perfect_steps(values, theta).tolist() == [True, False, False, True, False]
    rng = np.random.default_rng(0)
    x = (rng.random((6, 400)) < 0.5).astype(float)
    th = rng.normal(size=6)
    s = x[np.argsort(th)]
    # a perfect step: some cut with every model below it unsafe and every one above it safe
    brute = [any((s[:c, j] == 0).all() and (s[c:, j] == 1).all() for c in range(1, 6)) for j in range(400)]
    assert primer.perfect_steps(x, th).tolist() == brute and 0 < sum(brute) < 400
    with pytest.raises(ValueError, match="theta"):
        primer.perfect_steps(x, th[:3])


def test_leave_one_out_tests_equal_the_steps_done_by_hand():
    rng = np.random.default_rng(5)
    theta, a, b = rng.normal(size=12), np.exp(rng.normal(0, 0.3, 150)), rng.normal(size=150)
    p = 1 / (1 + np.exp(-a * (theta[:, None] - b)))
    m = irtlib.ResponseMatrix((rng.random(p.shape) < p).astype(float), [f"m{i:02d}" for i in range(12)],
                              [f"i{j:03d}" for j in range(150)]).filter_variance()
    out = primer.leave_one_out_tests(m, budget=8)
    assert list(out.index) == list(m.models) and out.attrs["budget"] == 8
    # model 3 by hand
    train = m.subset(models=[k for k in m.models if k != m.models[3]])
    cal = irtlib.fit_2pl(train, engine="map")
    aa, bb, x = cal.a.to_numpy(), cal.b.to_numpy(), m.values[3]
    given = irtlib.run_adaptive(x, aa, bb, budget=8).items[0, :8]
    test, full = irtlib.map_ability(x[given], aa[given], bb[given]), irtlib.map_ability(x, aa, bb)
    row = out.loc[m.models[3]]
    np.testing.assert_allclose([row["theta"], row["se"], row["full_theta"], row["full_se"]],
                               [test.theta, test.se, full.theta, full.se], atol=1e-10)
    np.testing.assert_allclose(out["z"], (out["theta"] - out["full_theta"]) / out["se"])
    assert (out["patterns"] <= 8).all() and (out["perfect_steps"] <= 8).all()

"""Item rates: the row-chunked expected rates against the whole-matrix means they replace."""

import numpy as np
import pandas as pd
import pytest

from irtlib.calibration.joint_map import Calibration
from irtlib.core.kernels import probability
from irtlib.core.responses import ResponseMatrix
from irtlib.fit.summaries import item_rates


@pytest.mark.parametrize("rows", [1, 9, 64, 500])
@pytest.mark.parametrize("missing", [0.0, 0.2])
def test_expected_rates_in_row_chunks_equal_the_whole_matrix_means_bit_for_bit(monkeypatch, rows, missing):
    import irtlib.fit.summaries as module

    monkeypatch.setattr(module, "RATE_ROWS", rows)
    rng = np.random.default_rng(21)
    theta, a, b = rng.normal(size=130), np.exp(rng.normal(0, 0.7, 47)), rng.normal(size=47)
    x = (rng.random((130, 47)) < probability(theta[:, None], a, b)).astype(float)
    x[rng.random(x.shape) < missing] = np.nan
    x[0, :] = 1.0                                          # every item seen at least once
    models, items = [f"m{i}" for i in range(130)], [f"i{j}" for j in range(47)]
    matrix = ResponseMatrix(x, models, items)
    cal = Calibration(a=pd.Series(a, index=items), b=pd.Series(b, index=items),
                      theta=pd.Series(theta, index=models), engine="map")
    p = probability(theta[:, None], a, b)
    if missing:
        p[np.isnan(x)] = np.nan
    want = np.nanmean(p, axis=0) if missing else np.mean(p, axis=0)
    got = item_rates(matrix, cal)
    assert np.array_equal(got["expected"].to_numpy(), want)
    assert np.array_equal(got["observed"].to_numpy(), np.nanmean(x, axis=0))

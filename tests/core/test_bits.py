"""same_bits: equal bit for bit, any NaN equal to any NaN, shapes compared."""

import numpy as np

from irtlib.core.bits import same_bits


def test_same_bits_tells_signed_zeros_and_one_ulp_apart_but_not_nan_payloads():
    x = np.array([0.0, 1.0, np.nan, -2.5])
    assert same_bits(x, x.copy())
    assert not same_bits(x, np.array([-0.0, 1.0, np.nan, -2.5]))                 # the sign of a zero
    assert not same_bits(x, np.array([0.0, np.nextafter(1.0, 2.0), np.nan, -2.5]))   # one ulp
    other_nan = np.array([0.0, 1.0, -np.nan, -2.5])
    assert same_bits(x, other_nan)                                               # NaNs: no arithmetic tells them apart
    assert not same_bits(x, np.array([0.0, 1.0, 3.0, -2.5]))                     # NaN against a number
    assert not same_bits(x, x[:3])                                               # shapes
    assert same_bits(np.asfortranarray(np.eye(3)), np.eye(3))                    # layouts do not count

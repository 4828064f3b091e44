"""The kernels' array addresses (irtlib.core.c_arrays) equal numpy's own ``arr.ctypes.data``."""

import numpy as np

from irtlib.core.c_arrays import address, addresses


def test_address_is_ctypes_data_for_writable_read_only_and_empty_arrays():
    writable = np.arange(12.0).reshape(3, 4)
    read_only = np.arange(5, dtype=np.int64)
    read_only.flags.writeable = False
    row = writable[1]                                   # a view: its own first element's address
    for arr in (writable, read_only, row, np.empty(0), np.zeros(3, dtype=np.uint8)):
        assert address(arr) == arr.ctypes.data


def test_addresses_keep_the_order_given():
    arrays = [np.zeros(2), np.ones(3), np.full(4, 2.0)]
    assert addresses(*arrays) == tuple(a.ctypes.data for a in arrays)
    assert addresses() == ()

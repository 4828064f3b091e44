"""A table's SHA-256, computed beside its parse: the same checksum, errors and warnings, in the same order.

The checks that need the hash (the hash recorded beside a download, a known file's direction) come before
anything the table's content causes, as when the file is hashed before it is read.
"""

from __future__ import annotations

import warnings

import pytest

from irtlib.errors import InputError
from irtlib.io import load_responses
from irtlib.io.checksums import RECORD_SUFFIX, file_sha256


def test_the_checksum_is_that_of_the_files_bytes(tmp_path):
    path = tmp_path / "long.csv"
    path.write_text("model,item,score\nm1,a,1\nm1,b,0\nm2,a,0\nm2,b,1\n")
    assert load_responses(path).sha256 == file_sha256(path)


@pytest.mark.parametrize("text", [
    "model,item,score\nm1,a,1\nm1,b,x\n",                  # a score that is not a number
    "model,a,b\nm1,1,0,1\nm2,0,1\n",                          # a row longer than the header
])
def test_a_recorded_hash_that_differs_is_named_before_the_tables_own_fault(tmp_path, text):
    path = tmp_path / "data.csv"
    path.write_text(text)
    (tmp_path / f"data.csv{RECORD_SUFFIX}").write_text("0" * 64 + "  data.csv\n")
    with pytest.raises(InputError, match=r"data\.csv: sha256 [0-9a-f]{64} differs from 0{64}, recorded in data\.csv"):
        load_responses(path)


def test_a_known_files_direction_is_said_before_what_its_content_leaves_out(tmp_path):
    path = tmp_path / "wmdp_irt_data.jsonl"                    # a known name, here holding a wide table
    path.write_text("model,a,b\nm1,1,0\nm2,,\nm3,0,1\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = load_responses(path, layout="wide")
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2
    assert "recognised by its name only" in messages[0] and "left out 1 model with only blank scores: 'm2'" \
        in messages[1]
    assert got.positive == "unsafe" and got.matrix.values.tolist() == [[0.0, 1.0], [1.0, 0.0]]
    assert caught[0].filename == __file__                      # the direction is the caller's to act on

"""Remove the project itself from a pip-compile lock (``make lock``).

pyproject.toml's ``book`` and ``test`` extras name ``irtlib[pyirt]``, so pip-compile writes the
project into the lock as ``irtlib @ file:///<checkout>`` (an absolute path of the machine that ran
it, with no hash, which ``pip install --require-hashes`` refuses) under a ``# WARNING`` comment.
``make venv`` installs irtlib itself separately (editable); this drops that entry and its comments.

Usage: python tools/lock_clean.py requirements-lock.txt
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SELF = re.compile(r"^irtlib\s*@\s*file:")


def clean(text: str) -> str:
    """The lock text without the ``irtlib @ file:`` entry, its warning and its ``# via`` lines."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        if SELF.match(lines[i]):
            while out and out[-1].startswith(("# WARNING", "# Consider using a hashable")):
                out.pop()
            i += 1
            while i < len(lines) and lines[i].startswith("    "):      # its "# via" block
                i += 1
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    """Clean the lock file named in ``argv`` in place."""
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    path = Path(argv[0])
    text = path.read_text(encoding="utf-8")
    cleaned = clean(text)
    if "file://" in cleaned:
        print(f"{path}: still names a local file:// requirement", file=sys.stderr)
        return 1
    path.write_text(cleaned, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

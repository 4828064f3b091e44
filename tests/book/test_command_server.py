"""irtbook.command_server: irtlib command lines run by forked children print exactly what `python -m irtlib` prints."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from irtbook import own_benchmark as ob
from irtbook.command_server import CommandServer
from irtbook.own_benchmark import run_command


def _write_jsonl(path, n_models=30, n_items=60, seed=0):
    """Responses drawn from a 2PL, one model a line in the paper's authors' JSON lines format."""
    rng = np.random.default_rng(seed)
    theta, a, b = rng.normal(size=n_models), np.exp(rng.normal(0.2, 0.4, n_items)), rng.normal(size=n_items)
    x = (rng.random((n_models, n_items)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(int)
    path.write_text("".join(json.dumps({"subject_id": f"m{i:02d}", "responses": {f"q{j:03d}": int(x[i, j])
                                                                                for j in range(n_items)}}) + "\n"
                            for i in range(n_models)))


#: The commands chapter 7 shows, in its order (on small files), and failures: usage, missing file, bad argument.
COMMANDS = ["irtlib calibrate cal.jsonl -o bank.csv",
            "irtlib evaluate bank.csv --responses new.jsonl --max-items 10",
            "irtlib evaluate bank.csv --responses new.jsonl --max-items 10 --json",
            "irtlib subset bank.csv --method marginal-fisher -k 10 -o items.csv",
            "irtlib report cal.jsonl -o report --n-splits 2",
            "irtlib --version",
            "irtlib nonsense",
            "irtlib evaluate missing.csv --responses new.jsonl --max-items 3",
            "irtlib subset bank.csv --method marginal-fisher -k -4 -o items.csv"]


@pytest.fixture(scope="module")
def both_ways(tmp_path_factory):
    """Each of :data:`COMMANDS` run by a new interpreter and through the server, in two copies of one folder."""
    base = tmp_path_factory.mktemp("files")
    _write_jsonl(base / "all.jsonl")
    lines = (base / "all.jsonl").read_text().splitlines(keepends=True)
    (base / "cal.jsonl").write_text("".join(lines[1:]))
    (base / "new.jsonl").write_text(lines[0])
    (base / "all.jsonl").unlink()
    direct, forked = tmp_path_factory.mktemp("direct"), tmp_path_factory.mktemp("forked")
    for folder in (direct, forked):
        shutil.copytree(base, folder, dirs_exist_ok=True)
    env = {**os.environ, "TQDM_DISABLE": "1"}
    out = []
    with CommandServer(env=env) as server:
        for command in COMMANDS:
            out.append((command, ob.run_command(command, cwd=direct, echo=False, check=False),
                        server.run(command.split()[1:], cwd=forked)))
    return direct, forked, out


def test_forked_commands_print_byte_for_byte_what_the_interpreter_prints(both_ways):
    _, _, out = both_ways
    for command, direct, forked in out:
        assert forked.stdout == direct.stdout, command
        assert forked.returncode == direct.returncode, command
    statuses = [forked.returncode for _, _, forked in out]
    assert statuses[:6] == [0] * 6 and all(s != 0 for s in statuses[6:])


def test_forked_commands_write_the_same_files(both_ways):
    direct, forked, _ = both_ways
    names = sorted(p.relative_to(direct) for p in direct.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(forked) for p in forked.rglob("*") if p.is_file())
    assert any(n.parts[0] == "report" and n.suffix == ".png" for n in names)
    for name in names:
        a, b = (direct / name).read_bytes(), (forked / name).read_bytes()
        if name.name in ("bank.csv", "summary.json"):   # they record their creation time and seconds
            continue
        assert a == b, name


def test_run_command_prints_the_command_and_raises_on_failure(tmp_path, capsys):
    with CommandServer() as server:
        done = run_command("irtlib --version", server=server, cwd=tmp_path)
        assert done.returncode == 0
        assert capsys.readouterr().out.startswith("$ irtlib --version\nirtlib ")
        with pytest.raises(RuntimeError, match="exited with status"):
            run_command("irtlib evaluate missing.csv --responses r.csv --max-items 3", server=server,
                        cwd=tmp_path, echo=False)
        with pytest.raises(ValueError, match="not an `irtlib"):
            run_command("ls", server=server, cwd=tmp_path)

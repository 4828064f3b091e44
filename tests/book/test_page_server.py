"""Pages run by runners forked from the page server (tools/page_server.py, tools/run_chapter.py).

A page a forked runner executes must come out as the page its own process executes; a failing page's
status and partial notebook must be what they were; a requester that dies must take its runner and
the runner's kernel along; the server must refuse what it cannot serve, and not be used when switched
off or under coverage.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_kernel_forkserver import _env, _gone, _launch, _outputs, _page

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools"
sys.path.insert(0, str(TOOLS))
try:
    import page_server  # noqa: E402  (tools/page_server.py)
finally:
    sys.path.remove(str(TOOLS))

needs_fork = pytest.mark.skipif(page_server.enabled({}) is not None,
                                reason=f"no page server here: {page_server.enabled({})}")

SUFFIX = "(runner forked from the page server)"

PAGE = """\
import os, sys
import numpy as np
rng = np.random.default_rng(3)
print(f"{rng.normal(size=1000).sum():.12e}", os.path.basename(os.getcwd()), os.environ.get("PAGE_TEST_VALUE"))
sys.stderr.write("to stderr\\n")
{"answer": 42}
"""


def _page_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in _env(**extra).items() if k != page_server.SWITCH}
    return env


def _wait_for_server(build: Path, env: dict[str, str], cwd: Path, timeout: float = 60.0) -> str:
    """The socket of the page server for ``env`` once it answers (started by a first page)."""
    path = page_server.socket_path((build / "page-server"), page_server.server_key(env, str(cwd)))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return path
        except OSError:
            time.sleep(0.1)
        finally:
            sock.close()
    raise AssertionError(f"no page server answered at {path}")


def _run_here(source: Path, build: Path, *, env: dict[str, str], check: bool = True):
    """tools/run_chapter.py run with the page's folder as working directory (the server's key has it)."""
    output = build / "executed" / f"{source.stem}.ipynb"
    done = subprocess.run([sys.executable, str(TOOLS / "run_chapter.py"), str(source), str(output),
                           "--cwd", str(source.parent)], capture_output=True, text=True, timeout=300, env=env,
                          cwd=source.parent)
    if check:
        assert done.returncode == 0, done.stderr
    return done, (json.loads(output.read_text()) if output.exists() else None)


def _stop_servers(build: Path) -> None:
    """Ask the page and kernel servers of ``build`` to stop (they exit once their children have)."""
    for state in ("page-server", "kernel-server"):
        for sock in (build / state).glob("*.sock"):
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                    conn.connect(str(sock))
                    conn.sendall(b'{"op": "stop"}\n')
            except OSError:
                pass


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """A build folder whose servers are stopped when the module's tests are done."""
    build = tmp_path_factory.mktemp("pagebuild")
    (build / "pages").mkdir()
    yield build
    _stop_servers(build)


@needs_fork
def test_a_page_comes_out_the_same_from_a_forked_runner_and_its_own_process(build):
    source = _page(build / "pages", PAGE)
    env = _page_env(PAGE_TEST_VALUE="from-the-requester")
    first, first_nb = _run_here(source, build, env=env)          # no server yet: runs itself, starts one
    _wait_for_server(build, env, source.parent)
    forked, forked_nb = _run_here(source, build, env=env)
    again, again_nb = _run_here(source, build, env=env)
    alone, alone_nb = _run_here(source, build, env={**env, page_server.SWITCH: "0"})
    assert SUFFIX not in first.stdout and SUFFIX not in alone.stdout
    assert SUFFIX in forked.stdout and SUFFIX in again.stdout
    assert _outputs(forked_nb) == _outputs(first_nb) == _outputs(again_nb) == _outputs(alone_nb)
    assert "pages from-the-requester" in _outputs(forked_nb)[0][0]["text"]
    assert forked_nb["metadata"]["kernelspec"] == alone_nb["metadata"]["kernelspec"]
    assert _launch(forked) == _launch(alone) == "forked"
    assert "to stderr" not in forked.stderr      # the page's own streams are in the notebook, not the runner's


@needs_fork
def test_a_failing_page_fails_alike_from_a_forked_runner(build):
    source = _page(build / "pages", "print('before')\nraise ValueError('boom')", name="fails")
    env = _page_env()
    _run_here(_page(build / "pages", "1", name="one"), build, env=env)
    _wait_for_server(build, env, source.parent)
    forked, _ = _run_here(source, build, env=env, check=False)
    alone, _ = _run_here(source, build, env={**env, page_server.SWITCH: "0"}, check=False)
    assert forked.returncode == alone.returncode == 1
    for done in (forked, alone):
        assert "fails: FAILED after" in done.stderr and "ValueError" in done.stderr
    partial = json.loads((build / "executing" / "fails.ipynb").read_text())
    assert partial["cells"][-1]["outputs"][-1]["ename"] == "ValueError"
    assert not (build / "executed" / "fails.ipynb").exists()


@needs_fork
def test_a_requester_that_dies_takes_its_runner_and_kernel_along(tmp_path, build):
    marker = tmp_path / "kernel.pid"
    source = _page(build / "pages", f"import os, time\nopen({str(marker)!r}, 'w').write(str(os.getpid()))\n"
                   "time.sleep(120)", name="sleeper")
    env = _page_env()
    _run_here(_page(build / "pages", "1", name="one"), build, env=env)
    _wait_for_server(build, env, source.parent)
    output = build / "executed" / "sleeper.ipynb"
    requester = subprocess.Popen([sys.executable, str(TOOLS / "run_chapter.py"), str(source), str(output),
                                  "--cwd", str(source.parent)], env=env, cwd=source.parent,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        kernel = int(marker.read_text())
        log = next((build / "page-server").glob("*.log")).read_text()
        runner = int(log.rsplit("forked page runner ", 1)[1].split()[0])
        requester.kill()
        requester.wait()
        assert _gone(runner) and _gone(kernel)
    finally:
        requester.kill()
        requester.wait()


@needs_fork
def test_the_server_refuses_another_environment_and_requests_without_streams(build):
    env = _page_env()
    pages = build / "pages"
    _run_here(_page(pages, "1", name="one"), build, env=env)
    path = _wait_for_server(build, env, pages)
    key = page_server.server_key(env, str(pages))
    argv = ["one.md", str(build / "executed" / "one.ipynb")]
    requests = [({"op": "spawn", "key": "0" * 16, "argv": argv, "env": env, "cwd": str(pages), "owner": 1}, 3),
                ({"op": "spawn", "key": key, "argv": argv, "env": env, "cwd": str(pages), "owner": 1}, 2),
                ({"op": "spawn", "key": key, "argv": "one.md", "env": env, "cwd": str(pages), "owner": 1}, 3)]
    answers = []
    for request, count in requests:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(path)
            socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [0, 1, 2][:count])
            answers.append(json.loads(conn.makefile("rb").readline())["error"])
    assert "is not the server's" in answers[0]
    assert "expected 3 file descriptors" in answers[1]
    assert "not a list of strings" in answers[2]


def test_the_server_is_not_used_when_switched_off_or_under_coverage(monkeypatch, tmp_path):
    for env in ({page_server.SWITCH: "0"}, {"COVERAGE_PROCESS_START": "x"}):
        monkeypatch.setattr(os, "environ", env)
        assert page_server.enabled() is not None
        assert page_server.delegate(["a.md", "b.ipynb"], state_dir=tmp_path, owner=os.getpid()) is None
    assert not list(tmp_path.iterdir())      # nothing started


@needs_fork
def test_the_early_start_serves_the_first_page_of_a_make(tmp_path):
    build = tmp_path / "build"
    pages = tmp_path / "pages"
    pages.mkdir()
    source = _page(pages, "print('first')", name="first")
    env = _page_env()
    try:
        # as the Makefile's EARLY_KERNEL_SERVER starts both servers beside the stage, with longer idle times
        subprocess.run([sys.executable, str(TOOLS / "run_chapter.py"), "--start-kernel-server", "--owner",
                        str(os.getpid()), "--work-dir", str(build / "executed" / ".." / "executing"),
                        "--cwd", str(pages)], check=True, cwd=pages, timeout=300,
                       env={**env, "IRTBOOK_FORK_KERNEL_IDLE": "600", "IRTBOOK_PAGE_SERVER_IDLE": "600"})
        _wait_for_server(build, env, pages)
        done, notebook = _run_here(source, build, env=env)
        assert SUFFIX in done.stdout and _launch(done) == "forked"
        assert "first" in _outputs(notebook)[0][0]["text"]
        assert len(list((build / "page-server").glob("*.log"))) == 1   # one server: the idle time is not in its key
        assert "idle 600 s" in next((build / "page-server").glob("*.log")).read_text()
    finally:
        _stop_servers(build)

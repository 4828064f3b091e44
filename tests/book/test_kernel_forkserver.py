"""Kernels forked from the kernel server (tools/kernel_forkserver.py, tools/fork_provisioner.py).

The pages run by tools/run_chapter.py with a forked kernel must print what they print with an ordinary
one; the server must not be used when switched off or under coverage, must refuse what it cannot serve
(and the runner then start an ordinary kernel), must end when idle or when its owner ends, and must
leave no kernel behind, whether the runner kills it at once or dies itself.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from notebook_helpers import MYST_FRONT_MATTER

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools"
sys.path.insert(0, str(TOOLS))
try:
    import fork_provisioner  # noqa: E402  (tools/fork_provisioner.py)
    import kernel_forkserver  # noqa: E402  (tools/kernel_forkserver.py)
finally:
    sys.path.remove(str(TOOLS))

needs_fork = pytest.mark.skipif(
    fork_provisioner.enabled({}) is not None, reason=f"no kernel server here: {fork_provisioner.enabled({})}")

FRONT_MATTER = MYST_FRONT_MATTER

#: A page that uses what the server preloads and what a kernel inherits from its runner: seeded numpy
#: with a BLAS product, pandas' HTML, a pyplot figure (the inline back end), both streams, the working
#: directory, an environment variable of the runner, and the BLAS thread count.
PAGE = """\
import os, sys
import numpy as np
import pandas as pd
import matplotlib.pyplot as plt
from threadpoolctl import threadpool_info

rng = np.random.default_rng(7)
a = rng.normal(size=(400, 400))
product = a @ a.T
print(f"{product.sum():.10e} {np.linalg.eigvalsh(product)[-1]:.10e}")
blas = sorted(i["num_threads"] for i in threadpool_info()
              if i["internal_api"] == "openblas" and "numpy" in i["filepath"])
print("blas threads", blas, "cwd", os.path.basename(os.getcwd()), "value", os.environ.get("FORK_TEST_VALUE"))
print(pd.DataFrame(np.arange(50.0).reshape(2, 25)))   # pandas' column limit in a kernel: 20
sys.stderr.write("to stderr\\n")
fig, ax = plt.subplots(figsize=(2, 2))
ax.plot([0, 1, 4])
pd.DataFrame({"x": [1.5, 2.25]})
"""


def _page(tmp_path: Path, body: str, name: str = "page") -> Path:
    source = tmp_path / f"{name}.md"
    source.write_text(FRONT_MATTER + f"\n# Page\n\n```{{code-cell}} ipython3\n{textwrap.dedent(body).strip()}\n```\n")
    return source


def _env(**extra: str) -> dict[str, str]:
    """The runner's environment as the book build has it: no coverage hook; idle servers end soon."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COVERAGE_", "IRTBOOK_FORK_KERNEL"))}
    env.update({"IRTBOOK_FORK_KERNEL_IDLE": "20", **extra})
    return env


def _run(source: Path, build: Path, *, env: dict[str, str], check: bool = True,
         timeout: float = 300) -> tuple[subprocess.CompletedProcess, dict | None]:
    output = build / "executed" / f"{source.stem}.ipynb"
    done = subprocess.run([sys.executable, str(TOOLS / "run_chapter.py"), str(source), str(output),
                           "--cwd", str(source.parent)], capture_output=True, text=True, timeout=timeout, env=env)
    if check:
        assert done.returncode == 0, done.stderr
    return done, (json.loads(output.read_text()) if output.exists() else None)


def _outputs(notebook: dict) -> list:
    """Every output of every code cell, without execution counts; a stream's consecutive pieces joined."""
    cells = []
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        outputs: list[dict] = []
        for output in cell["outputs"]:
            output = {k: v for k, v in output.items() if k != "execution_count"}
            if "text" in output:
                output["text"] = "".join(output["text"])
            if outputs and output.get("name") and outputs[-1].get("name") == output["name"]:
                outputs[-1]["text"] += output["text"]   # one stream cut in two by the kernel's flush timing
            else:
                outputs.append(output)
        cells.append(outputs)
    return cells


def _launch(done: subprocess.CompletedProcess) -> str:
    return re.search(r"done in [\d.]+ s \((.*) kernel\)", done.stdout).group(1)


def _servers(state: Path) -> list[dict]:
    """Ping every server whose socket is in ``state``: their answers."""
    answers = []
    for sock in sorted(state.glob("*.sock")):
        try:
            reader, answer = fork_provisioner.request(str(sock), {"op": "ping"})
        except (ConnectionError, OSError):
            continue
        reader.sock.close()
        answers.append(answer)
    return answers


def _gone(pid: int, timeout: float = 10.0) -> bool:
    """Whether process ``pid`` has ended (and been reaped) within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """A build folder whose servers are stopped when the module's tests are done."""
    build = tmp_path_factory.mktemp("forkbuild")
    (build / "pages").mkdir()
    yield build
    for answer in _servers(build / "kernel-server"):
        os.kill(answer["pid"], signal.SIGTERM)


@needs_fork
def test_a_page_prints_the_same_in_a_forked_and_an_ordinary_kernel(build):
    source = _page(build / "pages", PAGE)   # the pages of these tests share a folder, hence a server
    env = _env(FORK_TEST_VALUE="from-the-runner")
    forked, forked_nb = _run(source, build, env=env)
    again, again_nb = _run(source, build, env=env)                  # the same server, a second fork
    ordinary, ordinary_nb = _run(source, build, env={**env, "IRTBOOK_FORK_KERNEL": "0"})
    assert (_launch(forked), _launch(again), _launch(ordinary)) == ("forked", "forked",
                                                                    "ordinary (IRTBOOK_FORK_KERNEL=0)")
    assert _outputs(forked_nb) == _outputs(ordinary_nb) == _outputs(again_nb)
    outputs = _outputs(forked_nb)[0]
    assert [o.get("name") or sorted(o["data"]) for o in outputs] == [
        "stdout", "stderr", ["text/html", "text/plain"], ["image/png", "text/plain"]]
    assert "cwd pages value from-the-runner" in outputs[0]["text"]
    assert "..." in outputs[0]["text"] and "[2 rows x 25 columns]" in outputs[0]["text"]
    assert "Connection file" not in forked.stdout + forked.stderr   # the kernel knows it has a parent
    servers = _servers(build / "kernel-server")
    assert len(servers) == 1 and servers[0]["kernels"] == 0


TORCH_PAGE = """\
import sys
preloaded = "torch" in sys.modules
import torch
torch.set_num_threads(2)
x = torch.randn(300, 300, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
print(repr(float((x @ x).sum())), torch.get_num_threads(), torch.randn(2, generator=torch.Generator().manual_seed(1)))
print("preloaded", preloaded, file=sys.stderr)
"""


@needs_fork
def test_torch_preloaded_by_the_server_runs_threaded_in_a_forked_kernel(build):
    # the server imports torch (kernel_forkserver.PRELOAD); a forked kernel starts its thread pools at its
    # first parallel product and computes what an ordinary kernel, which imports torch itself, computes
    pytest.importorskip("torch")
    source = _page(build / "pages", TORCH_PAGE, name="torch_page")
    env = _env()
    forked, forked_nb = _run(source, build, env=env)
    ordinary, ordinary_nb = _run(source, build, env={**env, "IRTBOOK_FORK_KERNEL": "0"})
    assert (_launch(forked), _launch(ordinary)) == ("forked", "ordinary (IRTBOOK_FORK_KERNEL=0)")
    (f_out, f_err), (o_out, o_err) = _outputs(forked_nb)[0], _outputs(ordinary_nb)[0]
    assert f_out == o_out and " 2 tensor(" in f_out["text"]
    assert "preloaded True" in f_err["text"] and "preloaded False" in o_err["text"]


@needs_fork
def test_a_kernel_killed_at_once_leaves_no_process(build):
    source = _page(build / "pages", "import os\nprint(os.getpid(), os.getpgid(0) == os.getpid(), "
                   "os.getsid(0) == os.getpid())", name="pid")
    done, notebook = _run(source, build, env=_env())
    assert _launch(done) == "forked"
    pid, leads_group, leads_session = "".join(notebook["cells"][-1]["outputs"][0]["text"]).split()
    assert (leads_group, leads_session) == ("True", "True")   # killed as a process group, as launch_kernel's
    assert _gone(int(pid))


@needs_fork
def test_a_runner_that_dies_takes_its_kernel_along(tmp_path, build):
    marker = tmp_path / "kernel.pid"
    source = _page(build / "pages", f"import os, time\nopen({str(marker)!r}, 'w').write(str(os.getpid()))\n"
                   "time.sleep(120)", name="sleeper")
    output = build / "executed" / "sleeper.ipynb"
    runner = subprocess.Popen([sys.executable, str(TOOLS / "run_chapter.py"), str(source), str(output),
                               "--cwd", str(source.parent)], env=_env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        kernel = int(marker.read_text())
        runner.kill()
        runner.wait()
        assert _gone(kernel)
    finally:
        runner.kill()
        runner.wait()


@needs_fork
def test_the_server_refuses_another_environment_and_foreign_commands(build):
    _run(_page(build / "pages", "1", name="one"), build, env=_env())  # a server for this environment
    sock = next(build.glob("kernel-server/*.sock"))
    reader, ping = fork_provisioner.request(str(sock), {"op": "ping"})
    reader.sock.close()
    answers = []
    for message in ({"op": "spawn", "key": "0" * 16, "argv": [sys.executable, "-m", "ipykernel_launcher"],
                     "env": {}, "cwd": "/"},
                    {"op": "spawn", "key": ping["key"], "argv": ["/bin/sh", "-c", "true"], "env": {}, "cwd": "/"}):
        reader, answer = fork_provisioner.request(str(sock), message, fds=(1, 2))
        reader.sock.close()
        answers.append(answer["error"])
    assert answers[0].startswith("environment key 0000000000000000 is not the server's")
    assert answers[1].startswith("not a kernel of this interpreter")


@needs_fork
def test_a_server_that_cannot_start_leaves_an_ordinary_kernel(tmp_path):
    """A preloaded module that fails to import: the page still runs, in an ordinary kernel, and the next
    page does not try that server again."""
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "kmedoids.py").write_text("raise RuntimeError('broken on purpose')\n")  # preloaded, not used here
    source = _page(tmp_path, "print(6 * 7)")
    build = tmp_path / "build"
    env = _env(PYTHONPATH=str(fake))
    first, first_nb = _run(source, build, env=env)
    second, second_nb = _run(source, build, env=env)
    assert _launch(first).startswith("ordinary (the kernel server did not start (log: ")
    assert _launch(second).startswith("ordinary (a kernel server for this environment failed to start before")
    assert "".join(first_nb["cells"][-1]["outputs"][0]["text"]) == "42\n"
    assert "".join(second_nb["cells"][-1]["outputs"][0]["text"]) == "42\n"
    (log,) = (build / "kernel-server").glob("*.log")
    assert "RuntimeError: broken on purpose" in log.read_text()
    assert not list((build / "kernel-server").glob("*.sock"))


def test_no_server_when_switched_off_or_under_coverage():
    assert fork_provisioner.enabled({"IRTBOOK_FORK_KERNEL": "0"}) == "IRTBOOK_FORK_KERNEL=0"
    assert fork_provisioner.enabled({"IRTBOOK_FORK_KERNEL": "off"}) == "IRTBOOK_FORK_KERNEL=off"
    for hook in ("COVERAGE_PROCESS_START", "COVERAGE_PROCESS_CONFIG"):
        assert fork_provisioner.enabled({hook: "setup.cfg"}) == "coverage's subprocess hook is set"


def test_the_environment_key_ignores_only_per_kernel_variables():
    env = {"PATH": "/bin", "OMP_NUM_THREADS": "2"}
    key = kernel_forkserver.environment_key("/py/bin/python", "/book", env)
    same = {**env, "JPY_PARENT_PID": "123", "JPY_SESSION_NAME": "x", "IRTBOOK_FORK_KERNEL_IDLE": "5"}
    assert kernel_forkserver.environment_key("/py/bin/python", "/book", same) == key
    for changed in ({**env, "OMP_NUM_THREADS": "1"}, {**env, "MPLBACKEND": "agg"}, {**env, "PYTHONHASHSEED": "0"}):
        assert kernel_forkserver.environment_key("/py/bin/python", "/book", changed) != key
    assert kernel_forkserver.environment_key("/py/bin/python", "/other", env) != key
    assert kernel_forkserver.environment_key("/other/bin/python", "/book", env) != key


def _start_server(tmp_path: Path, *, owner: int, idle: float) -> tuple[subprocess.Popen, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")}
    key = kernel_forkserver.environment_key(sys.executable, str(tmp_path), env)
    path = fork_provisioner.socket_path(tmp_path, key)
    server = subprocess.Popen([sys.executable, str(TOOLS / "kernel_forkserver.py"), "--socket", path, "--key", key,
                               "--owner", str(owner), "--idle", str(idle)], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert server.stdout.readline() == "ready\n", server.stderr.read()
    return server, path


@needs_fork
def test_the_server_ends_when_idle_and_when_its_owner_ends(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    idle, idle_path = _start_server(tmp_path / "a", owner=0, idle=1.0)
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    owned, owned_path = _start_server(tmp_path / "b", owner=owner.pid, idle=600.0)
    try:
        assert idle.wait(timeout=30) == 0
        assert "exit: idle for 1 s" in idle.stderr.read()
        assert not os.path.exists(idle_path)
        assert owned.poll() is None
        owner.kill()
        owner.wait()
        assert owned.wait(timeout=30) == 0
        assert f"exit: its owner {owner.pid} ended" in owned.stderr.read()
        assert not os.path.exists(owned_path)
    finally:
        for proc in (idle, owned, owner):
            proc.kill()
            proc.wait()


@needs_fork
def test_a_forked_kernel_is_interrupted_and_killed_as_an_ordinary_one(tmp_path, build, monkeypatch):
    """jupyter_client's own calls on the provisioner: interrupt (SIGINT to the group), then kill at once."""
    from jupyter_client.manager import KernelManager
    from jupyter_client.provisioning.factory import KernelProvisionerFactory

    for hook in fork_provisioner.COVERAGE_HOOKS:   # make test-all's subprocess hook: not for this kernel
        monkeypatch.delenv(hook, raising=False)

    factory = KernelProvisionerFactory.instance()
    saved = factory.default_provisioner_name
    assert fork_provisioner.install(build / "kernel-server", owner=os.getpid()) is None
    manager = KernelManager(kernel_name="python3")
    client = None
    try:
        manager.start_kernel(cwd=str(tmp_path), env=_env())
        assert isinstance(manager.provisioner.process, fork_provisioner.ForkedKernel)
        client = manager.client()
        client.start_channels()
        client.wait_for_ready(timeout=120)
        # stop_on_error=False: ipykernel otherwise aborts requests that arrive while it discards its queue
        # after the KeyboardInterrupt (a race, in ordinary kernels too), and the next request could be one
        msg_id = client.execute("import time\nprint('sleeping', flush=True)\ntime.sleep(120)", stop_on_error=False)
        while client.get_iopub_msg(timeout=60)["msg_type"] != "stream":
            pass
        manager.interrupt_kernel()
        reply = client.get_shell_msg(timeout=30)
        assert reply["parent_header"]["msg_id"] == msg_id
        assert (reply["content"]["status"], reply["content"]["ename"]) == ("error", "KeyboardInterrupt")
        assert client.execute_interactive("print(6 * 7)", timeout=60,
                                          output_hook=lambda msg: None)["content"]["status"] == "ok"
        pid = manager.provisioner.pid
        manager.shutdown_kernel(now=True)
        assert not manager.is_alive()
        assert manager.provisioner is None or manager.provisioner.process is None
        assert _gone(pid)
    finally:
        if client is not None:
            client.stop_channels()
        if manager.has_kernel:
            manager.shutdown_kernel(now=True)
        factory.default_provisioner_name = saved


@needs_fork
def test_a_server_started_before_the_pages_serves_them(tmp_path):
    """run_chapter.py --start-kernel-server (the Makefile's, beside the stage) returns once its server is ready,
    owned by the given process; the next page with the same environment is forked from it, no second server."""
    build = tmp_path / "build"
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    env = _env()
    try:
        started = subprocess.run([sys.executable, str(TOOLS / "run_chapter.py"), "--start-kernel-server",
                                  "--owner", str(owner.pid), "--work-dir", str(build / "executing"),
                                  "--cwd", str(tmp_path)],
                                 capture_output=True, text=True, timeout=300, env=env)
        assert started.returncode == 0, started.stderr
        assert started.stdout == "", started.stdout              # no word of a failure
        runner_env = {**env, "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])}
        runner_env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")      # as run_chapter.main sets them
        key = kernel_forkserver.environment_key(sys.executable, str(tmp_path.resolve()), runner_env)
        reader, server = fork_provisioner.request(
            fork_provisioner.socket_path((build / "kernel-server").resolve(), key), {"op": "ping"})
        reader.sock.close()
        assert server["kernels"] == 0
        done, notebook = _run(_page(tmp_path, "print(6 * 7)"), build, env=env)
        assert _launch(done) == "forked"
        assert "42" in "".join(notebook["cells"][-1]["outputs"][0]["text"])
        logs = "".join(p.read_text() for p in (build / "kernel-server").glob("*.log"))
        assert logs.count("serving ") == 1 and f"owner {owner.pid}" in logs
        owner.kill()
        owner.wait()
        assert _gone(server["pid"], timeout=30)
    finally:
        owner.kill()
        owner.wait()

"""SIGTERM to a test run stops what its fixtures started (tests/sigterm.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

RUN = '''
import subprocess, time
import pytest

@pytest.fixture(scope="session")
def child(tmp_path_factory):
    process = subprocess.Popen(["sleep", "300"])
    (PIDS / "child").write_text(str(process.pid))
    yield process
    process.terminate()
    process.wait()
    (PIDS / "stopped").write_text("yes")

def test_waits(child):
    time.sleep(300)
'''


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) counts as stopped.
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" not in status.read_text()


def test_sigterm_runs_the_fixtures_teardown(tmp_path: Path) -> None:
    (tmp_path / "test_run.py").write_text(f"from pathlib import Path\nPIDS = Path({str(tmp_path)!r})\n" + RUN)
    # Without the outer run's PYTEST_ADDOPTS: paths given there would be collected by this run too.
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.sigterm",
                            str(tmp_path / "test_run.py")], cwd=REPO, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    child_pid = tmp_path / "child"
    deadline = time.monotonic() + 60
    while not child_pid.exists():
        assert run.poll() is None, run.communicate()[0]
        assert time.monotonic() < deadline, "the fixture did not start its process"
        time.sleep(0.1)
    pid = int(child_pid.read_text())
    try:
        run.send_signal(signal.SIGTERM)
        output = run.communicate(timeout=60)[0]
        assert (tmp_path / "stopped").exists(), output
        assert not _alive(pid)
        assert run.returncode != 0  # an interrupted run does not pass
    finally:
        if _alive(pid):  # the failure above left it: stop it here
            os.kill(pid, signal.SIGKILL)

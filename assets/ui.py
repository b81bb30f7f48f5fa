"""`memctl ui`'s process: the `dg dev` (or `dagster dev`) command line and environment, run in a process group of
its own that stops as a whole when memctl is told to stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# Settings that name files: Dagster runs in the project folder, so a relative path would point elsewhere there.
PATH_SETTINGS = ("MEMCTL_CONSOLIDATION", "MEMCTL_CONCEPTS", "MEMCTL_CACHE_DIR")


def ui_command(project: Path, host: str, port: int) -> tuple[list[str], dict[str, str]]:
    """`dg dev` of this interpreter's environment, with the environment that `memctl materialize` sees.

    The daemon and code server run in `project` (where the definitions are), not in the caller's folder: relative
    file settings are made absolute. dg warns (twice) when the project has a .venv but $VIRTUAL_ENV does not name
    it, which is always the case for `.venv/bin/memctl` run without activating the venv: this process's venv is
    declared active, so dg and the code server use the interpreter memctl runs in. Outside that venv (memctl
    installed elsewhere), plain `dagster dev` loads the same definitions without dg's venv check."""
    env = dict(os.environ)
    for name in PATH_SETTINGS:
        value = env.get(name, "").strip()
        if value:
            env[name] = os.pathsep.join(str(Path(v).resolve()) if v else v for v in value.split(os.pathsep))
    venv = Path(sys.prefix)
    dg_bin = Path(sys.executable).with_name("dg")
    project_venv = project / ".venv"
    own_venv = sys.prefix != sys.base_prefix and (not project_venv.exists() or project_venv.resolve() == venv.resolve())
    if (project / "pyproject.toml").exists() and dg_bin.exists() and own_venv:
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = os.pathsep.join([str(dg_bin.parent), env.get("PATH", "")])
        env.pop("PYTHONHOME", None)
        return [str(dg_bin), "dev", "--host", host, "--port", str(port)], env
    return [sys.executable, "-m", "dagster", "dev", "-m", "assets.definitions", "-h", host, "-p", str(port)], env


def run_process_group(cmd: list[str], cwd: Path, env: dict[str, str], grace: float = 30.0) -> int:
    """Run `cmd` in a process group of its own; when memctl is told to stop, stop the whole group.

    SIGINT, SIGTERM or SIGHUP to memctl become a SIGINT to the child: what Ctrl-C sends `dagster dev`, which then
    shuts its webserver, daemon and code server down. A second signal, or `grace` seconds without an exit, kill
    the group; whatever outlives the child gets SIGTERM, then SIGKILL. The handlers are in place before the child
    starts, so it begins with default dispositions even when memctl was started with SIGINT ignored (`memctl ui &`
    in a script): dagster maps SIGTERM to its SIGINT handler, and would ignore both.
    Returns the child's exit code, or 128 + the signal that stopped memctl."""
    stopped: list[tuple[int, float]] = []  # (signal, when) per signal received
    child: list[subprocess.Popen] = []

    def stop(signum: int, _frame: object) -> None:
        stopped.append((signum, time.monotonic()))
        if child:
            _stop_child(child[0].pid, kill=len(stopped) > 1)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, process_group=0)
        child.append(proc)
        if stopped:  # a signal came before the child existed
            _stop_child(proc.pid, kill=False)
        killed = False
        while True:
            try:
                code = proc.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if stopped and not killed and time.monotonic() - stopped[0][1] > grace:
                    _stop_child(proc.pid, kill=True)
                    killed = True
        _reap_group(proc.pid, grace=5.0)  # a grandchild that outlived dagster dev
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 128 + stopped[0][0] if stopped else code


def _stop_child(pid: int, kill: bool) -> None:
    """SIGINT to the group leader only (dagster dev stops its services; SIGINT to all of them would print a
    KeyboardInterrupt traceback per process), or SIGKILL to the whole group."""
    try:
        if kill:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGINT)
    except ProcessLookupError:
        pass


def _reap_group(pgid: int, grace: float) -> None:
    """SIGTERM what is left of process group `pgid`, SIGKILL what is still there after `grace` seconds."""
    deadline = time.monotonic() + grace
    sig: int = signal.SIGTERM
    while True:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return  # the group is empty
        if sig == signal.SIGKILL:
            return
        time.sleep(0.1)
        sig = signal.SIGKILL if time.monotonic() > deadline else 0

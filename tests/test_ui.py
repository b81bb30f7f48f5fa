"""`memctl ui` starts the Dagster lineage UI on loopback with DAGSTER_HOME under $MEMCTL_DATA."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_memctl_ui_serves_the_asset_graph(tmp_path: Path) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    env["MEMCTL_DATA"] = str(tmp_path / "data")
    proc = subprocess.Popen([sys.executable, "-m", "assets.cli", "ui", "--port", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 120
        body = None
        while time.time() < deadline and proc.poll() is None:
            try:
                query = json.dumps({"query": "{ assetNodes { assetKey { path } groupName } }"}).encode()
                req = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=query,
                                             headers={"Content-Type": "application/json"})
                body = json.loads(urllib.request.urlopen(req, timeout=5).read())
                if body.get("data", {}).get("assetNodes"):
                    break
            except (OSError, ValueError):
                pass
            time.sleep(1)
        assert body and body.get("data"), proc.stdout.read1().decode(errors="replace") if proc.poll() is not None else body
        keys = {"/".join(n["assetKey"]["path"]) for n in body["data"]["assetNodes"]}
        assert {"file_chunks", "nodes", "edges", "memory_duckdb"} <= keys
        assert (tmp_path / "data" / "dagster_home" / "dagster.yaml").exists()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)

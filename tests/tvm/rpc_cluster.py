"""A TVM RPC tracker and servers on loopback for the RPC tests, each process in a process
group of its own (killed by group at the end)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def env() -> dict:
    """The environment for a child process that imports this checkout."""
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A tracker plus servers, each a process group of its own."""

    def __init__(self):
        self.procs: list[subprocess.Popen] = []
        self.port = free_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.tracker = self._spawn([sys.executable, "-m", "tvm.exec.rpc_tracker", "--host",
                                    "127.0.0.1", "--port", str(self.port), "--port-end",
                                    str(self.port + 1)])

    def _spawn(self, cmd, stderr=subprocess.DEVNULL) -> subprocess.Popen:
        p = subprocess.Popen(cmd, cwd=ROOT, env=env(), start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=stderr)
        self.procs.append(p)
        return p

    def sim_server(self, key: str, *args: str, port: int | None = None,
                   stderr=subprocess.DEVNULL) -> subprocess.Popen:
        """``dcoc rpc serve`` for ``key`` (``args``: more of its flags); its port is
        ``proc.port``."""
        port = port or free_port()
        p = self._spawn([sys.executable, "-m", "dcoc.cli", "rpc", "serve", "--tracker", self.addr,
                         "--key", key, "--port", str(port), "--port-end", str(port + 1), *args],
                        stderr=stderr)
        p.port = port
        return p

    def tvm_server(self, key: str) -> subprocess.Popen:
        port = free_port()
        return self._spawn([sys.executable, "-m", "tvm.exec.rpc_server", "--tracker", self.addr,
                            "--key", key, "--host", "127.0.0.1", "--port", str(port),
                            "--port-end", str(port + 100), "--silent"])

    def wait_free(self, key: str, n: int, timeout: float = 120.0, watch=()) -> None:
        """Wait until ``n`` servers of ``key`` are free (TimeoutError after ``timeout`` s or
        when a process in ``watch`` exits)."""
        from tvm_plugin.rpc import tracker_servers

        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout and all(p.poll() is None for p in watch):
            try:
                if tracker_servers(self.addr, key, timeout=2)["free"] >= n:
                    return
            except Exception:  # noqa: BLE001 - tracker still starting
                pass
            time.sleep(0.3)
        raise TimeoutError(f"{n} servers for key {key} did not register in {timeout} s")

    @staticmethod
    def kill(p: subprocess.Popen) -> None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(10)

    def close(self) -> None:
        for p in reversed(self.procs):
            self.kill(p)

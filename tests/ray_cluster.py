"""A throw-away Ray cluster on 127.0.0.1 inside its own loopback-only network namespace (tests, bench).

Ray 2.60 registers a node under the machine's interface address even with ``--node-ip-address=127.0.0.1``,
so the cluster, its workers and every driver that talks to it run inside a fresh network namespace whose
only interface is ``lo``: nothing can reach, or be reached from, any other address. A ``sleep`` process
holds the namespace; commands enter it with ``nsenter``. :meth:`LoopbackCluster.stop` kills every process
in that namespace by pid (never ``ray stop``, which would also stop other people's Ray processes on a
shared machine) and is safe to call twice, so a fixture's ``finally`` leaves nothing behind.

Needs root (``unshare -n``); :func:`loopback_unavailable` says why not when it cannot work.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
ENV = {
    **os.environ,
    "RAY_USAGE_STATS_ENABLED": "0",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "PYTHONUNBUFFERED": "1",
}


def loopback_unavailable() -> str | None:
    """Return why a loopback-only cluster cannot be started here, or ``None`` when it can."""
    if os.geteuid() != 0:
        return "needs root for a loopback-only network namespace (unshare -n)"
    for tool in ("unshare", "nsenter", "ip"):
        if shutil.which(tool) is None:
            return f"`{tool}` not found"
    if not (BIN / "ray").exists():
        return f"ray CLI not found in {BIN} (pip install 'rlaudit[ray]')"
    probe = subprocess.run(["unshare", "-n", "ip", "link", "set", "lo", "up"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"unshare -n failed: {probe.stderr.strip()}"
    return None


class LoopbackCluster:
    """A Ray head (plus optional worker nodes) bound to 127.0.0.1 in a private network namespace.

    Args:
        node_cpus: CPUs of each node; the first is the head. ``(1, 1)`` gives two nodes of one CPU each.
        port: GCS port of the head (inside the namespace, so any free number works).
        object_store_mb: object store size per node in MB (Ray's minimum is about 75 MB).
    """

    def __init__(self, node_cpus: tuple[int, ...] = (2,), port: int = 6390, object_store_mb: int = 100):
        self.node_cpus = node_cpus
        self.port = port
        self.object_store_mb = object_store_mb
        self.address = f"127.0.0.1:{port}"
        # Unix socket paths live under the temp dir and must stay short (108-byte limit).
        self.temp_dir = Path(tempfile.mkdtemp(prefix="rlr", dir="/tmp"))
        self.holder: subprocess.Popen | None = None
        self.netns: str | None = None

    # -- lifecycle -----------------------------------------------------------------------------------
    def start(self) -> "LoopbackCluster":
        self.holder = subprocess.Popen(
            ["unshare", "-n", "sh", "-c", "ip link set lo up && exec sleep 100000"],
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
        deadline = time.monotonic() + 10
        while True:
            ns = os.readlink(f"/proc/{self.holder.pid}/ns/net")
            if ns != os.readlink("/proc/self/ns/net") and self._lo_up():
                break
            if time.monotonic() > deadline or self.holder.poll() is not None:
                raise RuntimeError("could not create a loopback-only network namespace")
            time.sleep(0.05)
        self.netns = ns
        common = ["--node-ip-address=127.0.0.1", f"--object-store-memory={self.object_store_mb * 10**6}",
                  "--disable-usage-stats"]
        self._ray(["start", "--head", f"--port={self.port}", f"--num-cpus={self.node_cpus[0]}",
                   "--include-dashboard=false", f"--temp-dir={self.temp_dir}", *common])
        for cpus in self.node_cpus[1:]:
            self._ray(["start", f"--address={self.address}", f"--num-cpus={cpus}", *common])
        return self

    def stop(self) -> None:
        """Kill every process in the cluster's namespace (by pid), then remove its temp dir."""
        if self.netns is not None:
            for _ in range(50):
                pids = self.pids()
                if not pids:
                    break
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                time.sleep(0.1)
        if self.holder is not None:
            if self.holder.poll() is None:
                self.holder.kill()
            self.holder.wait()
        self.netns = None
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> "LoopbackCluster":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- helpers -------------------------------------------------------------------------------------
    def pids(self) -> list[int]:
        """Pids of every live process inside the cluster's network namespace (the holder included)."""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                if os.readlink(f"/proc/{entry}/ns/net") == self.netns:
                    found.append(int(entry))
            except OSError:
                continue
        return found

    def cmdline(self, pid: int) -> str:
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return ""

    def task_pids(self, prefix: str) -> dict[int, str]:
        """Map pid -> process title of the Ray workers whose title starts with ``ray::<prefix>``."""
        titles = {pid: self.cmdline(pid).strip() for pid in self.pids()}
        return {pid: t for pid, t in titles.items() if t.startswith(f"ray::{prefix}")}

    def command(self, args: list[str]) -> list[str]:
        """``args`` prefixed so that it runs inside the cluster's network namespace."""
        assert self.holder is not None, "cluster not started"
        return ["nsenter", "-t", str(self.holder.pid), "-n", "--", *args]

    def popen(self, args: list[str], **kwargs) -> subprocess.Popen:
        kwargs.setdefault("env", ENV)
        return subprocess.Popen(self.command(args), **kwargs)

    def run(self, args: list[str], timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
        kwargs.setdefault("env", ENV)
        return subprocess.run(self.command(args), timeout=timeout, capture_output=True, text=True, **kwargs)

    def cpu_seconds(self) -> float:
        """User + system CPU seconds of the processes now alive in the namespace (exited ones not counted)."""
        tick = os.sysconf("SC_CLK_TCK")
        total = 0
        for pid in self.pids():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])
            except (OSError, IndexError, ValueError):
                continue
        return total / tick

    def memory_mb(self) -> float:
        """Resident memory of every process in the namespace, in MB."""
        total = 0
        for pid in self.pids():
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            except OSError:
                continue
        return total / 1024

    def _lo_up(self) -> bool:
        out = subprocess.run(["nsenter", "-t", str(self.holder.pid), "-n", "ip", "-o", "link", "show", "lo"],
                             capture_output=True, text=True).stdout
        return "UP" in out.split("mtu")[0] if out else False

    def _ray(self, args: list[str]) -> None:
        done = self.run([str(BIN / "ray"), *args], timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"ray {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")

"""Which reader should ``rlaudit import tensorboard`` use? Throughput and peak memory on generated event logs.

Writes ``--mb`` MB of TensorBoard event files (a measurement script, not a test): one file of scalars written
by ``torch.utils.tensorboard.SummaryWriter`` (the writer SB3 and CleanRL use; 8 tags per step, as a real run logs
losses, returns and rates), copied into ``--runs`` run folders laid out as CleanRL's
``runs/<env>__<exp>__<seed>__<time>/``. Then each reader, in its own process so that peak memory is its own,
reads every file one at a time and collects one tag's ``(step, value)`` pairs:

- ``raw-loader``: ``tensorboard.backend.event_processing.event_file_loader.RawEventFileLoader`` (streams
  records) + ``event_pb2.Event.FromString``, the values read from ``simple_value`` (what rlaudit does);
- ``event-loader``: ``EventFileLoader`` (the same stream, each event upgraded by TensorBoard's data_compat:
  scalars become tensors);
- ``tbparse``: ``tbparse.SummaryReader(file, event_types={"scalars"}).scalars`` (an EventAccumulator that
  keeps every event of the file, then a DataFrame).

Prints MB/s and the peak resident memory above the process's resident memory after its imports (sampled every
5 ms), per reader. ``tbparse``
is not an rlaudit dependency: ``pip install tbparse`` to measure it (a reader that fails to import says so).

    PYTHONPATH=. .venv/bin/python bench/bench_tensorboard_import.py --mb 100     # the figures in docs/importers.md
    PYTHONPATH=. .venv/bin/python bench/bench_tensorboard_import.py --mb 5 --runs 2   # a quick look
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TAG = "charts/episodic_return"
TAGS = [TAG, "charts/SPS", "losses/value_loss", "losses/policy_loss", "losses/entropy", "losses/approx_kl",
        "losses/clipfrac", "charts/learning_rate"]


def generate(root: Path, mb: float, n_runs: int) -> list[Path]:
    """Write one event file of ``mb / n_runs`` MB and copy it into ``n_runs`` run folders; return the files."""
    from torch.utils.tensorboard import SummaryWriter

    first = root / "runs" / "CartPole-v1__ppo__0__1700000000"
    writer = SummaryWriter(str(first))
    target = mb * 1e6 / n_runs
    step = 0
    while True:
        for _ in range(2000):
            step += 128
            for i, tag in enumerate(TAGS):
                writer.add_scalar(tag, (step % 997) * 0.5 + i, step)
        writer.flush()
        files = list(first.glob("events.out.tfevents.*"))
        if sum(f.stat().st_size for f in files) >= target:
            break
    writer.close()
    (src,) = first.glob("events.out.tfevents.*")
    out = [src]
    for seed in range(1, n_runs):
        run = root / "runs" / f"CartPole-v1__ppo__{seed}__{1700000000 + seed}"
        run.mkdir(parents=True)
        out.append(Path(shutil.copy(src, run / src.name)))
    return out


class _PeakRSS:
    """Samples this process's resident memory every 5 ms (``/proc/self/statm``) and keeps the largest."""

    def __init__(self):
        import os
        import threading

        self._page = os.sysconf("SC_PAGE_SIZE")
        self.base = self.peak = self._now()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _now(self) -> int:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * self._page

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self._now())

    def stop(self) -> float:
        """Peak increase over the resident memory at start, in MB."""
        self._stop.set()
        self._thread.join()
        return (max(self.peak, self._now()) - self.base) / 1e6


def _worker(reader: str, files: list[str]) -> dict:
    """Read ``files`` with ``reader`` (in this process); return seconds, points and peak RSS increase."""
    if reader == "tbparse":
        from tbparse import SummaryReader
    else:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader, RawEventFileLoader
        from tensorboard.compat.proto import event_pb2
        from tensorboard.util import tensor_util
    rss = _PeakRSS()
    t0 = time.perf_counter()
    n_points = 0
    for f in files:
        if reader == "tbparse":
            df = SummaryReader(f, event_types={"scalars"}).scalars
            n_points += int((df["tag"] == TAG).sum())
        elif reader == "raw-loader":
            for raw in RawEventFileLoader(f).Load():
                ev = event_pb2.Event.FromString(raw)
                for v in ev.summary.value:
                    if v.tag == TAG:
                        n_points += 1
        else:
            for ev in EventFileLoader(f).Load():
                for v in ev.summary.value:
                    if v.tag == TAG:
                        float(tensor_util.make_ndarray(v.tensor))
                        n_points += 1
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "n_points": n_points, "peak_rss_mb": rss.stop()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100.0, help="total size of the generated logs (MB)")
    parser.add_argument("--runs", type=int, default=10, help="run folders (the file is copied into each)")
    parser.add_argument("--readers", default="raw-loader,event-loader,tbparse")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(_worker(args.worker[0], args.worker[1:])))
        return
    with tempfile.TemporaryDirectory(prefix="rlaudit-bench-tb-") as tmp:
        t0 = time.perf_counter()
        files = generate(Path(tmp), args.mb, args.runs)
        size = sum(f.stat().st_size for f in files) / 1e6
        print(f"generated {size:.1f} MB in {len(files)} event files ({time.perf_counter() - t0:.0f} s)", flush=True)
        print(f"{'reader':<14} {'MB/s':>7} {'seconds':>8} {'peak MB':>8} {'points':>9}")
        for reader in args.readers.split(","):
            res = subprocess.run([sys.executable, __file__, "--worker", reader, *map(str, files)],
                                 capture_output=True, text=True)
            if res.returncode:
                print(f"{reader:<14} failed: {(res.stderr.strip().splitlines() or ['?'])[-1]}", flush=True)
                continue
            r = json.loads(res.stdout.strip().splitlines()[-1])
            print(f"{reader:<14} {size / r['seconds']:7.2f} {r['seconds']:8.1f} {r['peak_rss_mb']:8.1f} "
                  f"{r['n_points']:9,}", flush=True)


if __name__ == "__main__":
    main()

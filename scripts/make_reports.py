"""Regenerate the recorded reports under ``reports/`` (``make reports``).

For every bundled published protocol (``protocols/published/*.toml``) this runs
``rlaudit report PROTOCOL --data DATA -o reports/<protocol-name>`` with the protocol's own audit settings
(default bootstrap sizes), and for the recorded quickstart sweep (``sweeps/quickstart/``, when present) it
renders ``reports/quickstart`` from the sweep's ``audit/audit.json`` (else its store); every other recorded
sweep (``sweeps/NAME/store.sqlite``, e.g. the flagship) is audited from its store, joined with the
published data it reruns, into ``reports/NAME``. Each report is
written into a fresh folder and swapped in only when it succeeded, so a failure leaves the previous
recorded report untouched. A published protocol whose data files are missing is skipped with the reason.
Last, the catalogue of the published comparisons (``reports/index.html``, ``reports/README.md``) is rebuilt
from the reports' ``audit.json`` (:mod:`rlaudit.report.catalogue`), listing skipped and failed protocols with
their reason. Exit status 1 when any report failed.

Usage: ``python scripts/make_reports.py [--data ../shared/data] [--only NAME ...] [--reps N] [--index-only]``
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the catalogue builder of this checkout, also without an installed package

from rlaudit.report.catalogue import build_catalogue, missing_data, write_catalogue  # noqa: E402


HARNESS_SWEEPS = ("fidelity-", "backend-equivalence")


def _published() -> list[Path]:
    return sorted((REPO / "protocols" / "published").glob("*.toml"))


def _jobs(data: Path) -> list[tuple[str, list[str]]]:
    jobs = []
    for proto in _published():
        name = tomllib.loads(proto.read_text(encoding="utf-8")).get("name") or proto.stem
        jobs.append((name, [str(proto.relative_to(REPO)), "--data", str(data)]))
    sweep = REPO / "sweeps" / "quickstart"
    for candidate in (sweep / "audit" / "audit.json", sweep / "store.sqlite"):
        if candidate.exists():
            jobs.append(("quickstart", [str(candidate.relative_to(REPO))]))
            break
    # Other recorded sweeps (the flagship): audited from their store; --data finds the published side of a
    # rerun ([rerun_of] in the store's protocol).
    for store in sorted((REPO / "sweeps").glob("*/store.sqlite")):
        # fidelity-* and backend-equivalence* hold the checks' runs (docs/fidelity.md, docs/backends.md), whose
        # comparisons their own commands write; they are not comparisons to report on.
        if store.parent.name != "quickstart" and not store.parent.name.startswith(HARNESS_SWEEPS):
            jobs.append((store.parent.name, [str(store.relative_to(REPO)), "--data", str(data)]))
    return jobs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"), help="published data folder")
    ap.add_argument("--only", nargs="*", help="report names to regenerate (default: all)")
    ap.add_argument("--reps", help="bootstrap replicates (default: the audit's default)")
    ap.add_argument("--index-only", action="store_true", help="only rebuild the catalogue (reports/index.html)")
    args = ap.parse_args()
    rlaudit = Path(sys.executable).with_name("rlaudit")
    exe = [str(rlaudit)] if rlaudit.exists() else [sys.executable, "-m", "rlaudit"]
    failed, reasons = [], {}
    for name, source_args in ([] if args.index_only else _jobs(Path(args.data))):
        if args.only and name not in args.only:
            continue
        if source_args[0].endswith(".toml"):
            reasons[name] = missing_data(REPO / source_args[0], Path(args.data))
            if reasons[name]:
                print(f"!! {name}: {reasons[name]}; previous report kept", flush=True)
                continue
        dest = REPO / "reports" / name
        stage = REPO / "reports" / f".{name}.new"
        shutil.rmtree(stage, ignore_errors=True)
        cmd = [*exe, "report", *source_args, "-o", str(stage)]
        if args.reps and source_args[0].endswith((".toml", ".sqlite")):
            cmd += ["--reps", args.reps]
        print(f"== {name}: {' '.join(cmd[1:])}", flush=True)
        t = time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO, stderr=subprocess.PIPE, text=True)
        sys.stderr.write(proc.stderr)
        if proc.returncode != 0:
            print(f"!! {name}: failed (exit {proc.returncode}); previous report kept", flush=True)
            errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
            reasons[name] = f"audit failed: {errors[-1] if errors else f'exit {proc.returncode}'}"
            shutil.rmtree(stage, ignore_errors=True)
            failed.append(name)
            continue
        shutil.rmtree(dest, ignore_errors=True)
        stage.rename(dest)
        print(f"   {name}: reports/{name}/ in {time.perf_counter() - t:.0f} s", flush=True)
    catalogue = build_catalogue(_published(), REPO / "reports", REPO, {k: v for k, v in reasons.items() if v})
    for path in write_catalogue(catalogue, REPO / "reports"):
        print(f"   catalogue: {path.relative_to(REPO)}", flush=True)
    print(f"   {catalogue.headline}", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""``harness export --format mteb RESULTS_DIR [...] --out DIR``: result records -> another tool's results format."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.core import results
from harness.core.errors import HarnessError, print_error

FORMATS = ("mteb",)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="harness export",
        description="Write result records in another tool's results format. mteb: <org>__<model>/<revision>/"
        "<Task>.json + model_meta.json for every record whose dataset has an mteb task (the catalog's mteb_task).",
    )
    p.add_argument("results", nargs="+", help="results directories to read")
    p.add_argument("--format", choices=FORMATS, required=True, help="the target format")
    p.add_argument("--out", required=True, help="output directory (mteb: the folder of <org>__<model>/ folders)")
    p.add_argument("--org", default="harness",
                   help="organisation part of exported model names that have no hub id (default: harness)")
    p.add_argument("--name", action="append", default=[], metavar="MODEL=ORG/NAME",
                   help="export a model under this mteb name, e.g. all-minilm-l6-v2=sentence-transformers/"
                   "all-MiniLM-L6-v2 (repeatable)")
    return p.parse_args(argv)


def _names(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        model, sep, name = pair.partition("=")
        if not sep or "/" not in name:
            raise HarnessError(f"--name {pair!r}: write MODEL=ORG/NAME, e.g. all-minilm-l6-v2=sentence-transformers/"
                               "all-MiniLM-L6-v2 (mteb names are organisation/model)")
        out[model] = name
    return out


def check_paths(args: argparse.Namespace) -> None:
    """Before any record is read: every results folder exists, ``--out`` can be a folder (nothing created)."""
    from harness.run.preflight import check_records_dir, check_writable_dir
    for folder in args.results:
        check_records_dir(folder, "results folder", "harness export --format mteb results/ --out DIR")
    check_writable_dir(Path(args.out), "--out")


def nothing_exported(args: argparse.Namespace, report: Any) -> HarnessError:
    """Why nothing was written: no records, only failed ones (the first one's error), or each left out (listed)."""
    from harness.mteb_results.export import NONFINITE
    where = ", ".join(args.results)
    failed = [p for reason in (NONFINITE, "failed record") for p in report.skipped.get(reason, [])]
    if failed and sum(map(len, report.skipped.values())) == len(failed):
        try:
            error = results.read_record(failed[0]).error
        except (ValueError, OSError, TypeError):
            error = "its error cannot be read"
        return HarnessError(f"nothing to export from {where}: its {len(failed)} record(s) failed, the first "
                            f"{failed[0]} with: {error}; fix that and run the task again (failed cells are computed "
                            "again), then export")
    if report.skipped:
        return HarnessError(f"nothing to export from {where}: every record was left out, for the reasons listed "
                            "above; export records of datasets mteb has a task for, evaluated on whole datasets")
    return HarnessError(f"nothing to export from {where}: no harness result records there; pass the folder a "
                        "run wrote its records to (its paths.results)")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from harness.mteb_results.export import describe, export_mteb
    try:
        names = _names(args.name)
        check_paths(args)
        report = export_mteb(args.results, args.out, org=args.org, names=names)
        for line in describe(report):
            print(line)
        if not report.written:
            raise nothing_exported(args, report)
    except HarnessError as exc:
        return print_error(exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``harness export --format mteb RESULTS_DIR [...] --out DIR``: result records -> another tool's results format."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from harness.errors import HarnessError

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


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from harness.mteb_results.export import describe, export_mteb

    try:
        report = export_mteb(args.results, args.out, org=args.org, names=_names(args.name))
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for line in describe(report):
        print(line)
    if not report.written:
        print(f"error: nothing to export from {', '.join(args.results)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Compile PyLate's Stanford PLAID C++ extensions now, in parallel: ``python -m harness.tasks.retrieval.retrievers.plaid_build``.

PyLate compiles them on first use, one after another (~50 s each), inside the first job to build a PLAID index, and
compute nodes often have no compiler; set-up runs this once (torch caches them in ``TORCH_EXTENSIONS_DIR``). Each is
built by PyLate's own loader, so torch's cache key is the one PyLate later looks for."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence

#: PyLate's loaders, one process each: the extensions they compile
LOADERS = {
    "pylate.indexes.stanford_nlp.search.strided_tensor:StridedTensor.try_load_torch_extensions":
        ("segmented_lookup_cpp",),
    "pylate.indexes.stanford_nlp.search.index_storage:IndexScorer.try_load_torch_extensions":
        ("filter_pids_cpp", "decompress_residuals_cpp"),
    "pylate.indexes.stanford_nlp.modeling.colbert:try_load_torch_extensions": ("segmented_maxsim_cpp",),
}


def _call(target: str) -> str:
    module, attr = target.split(":")
    head, _, tail = attr.partition(".")
    return (f"import contextlib, io\nimport {module} as m\nf = m.{head}" + (f".{tail}" if tail else "")
            + "\nwith contextlib.redirect_stdout(io.StringIO()):\n    f(False)\n")


def build(loaders: Sequence[str] = tuple(LOADERS)) -> float:
    """Build every extension; the seconds it took. A failure raises ``RuntimeError`` with the compiler's last lines."""
    from harness.tasks.retrieval.retrievers.plaid_index import prepare_stanford_extensions

    prepare_stanford_extensions()   # ninja on PATH, a compiler, no stale lock: or a one-line error
    start = time.perf_counter()
    procs = {t: subprocess.Popen([sys.executable, "-c", _call(t)], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True) for t in loaders}
    for target, proc in procs.items():
        _, err = proc.communicate()
        if proc.returncode != 0:
            tail = " | ".join(err.strip().splitlines()[-3:])
            raise RuntimeError(f"building {', '.join(LOADERS[target])} failed: {tail}")
    return time.perf_counter() - start


def main() -> int:
    from harness.core.errors import HarnessError, print_error

    try:
        took = build()
    except (HarnessError, RuntimeError) as exc:
        return print_error(exc, 1)
    names = ", ".join(n for v in LOADERS.values() for n in v)
    print(f"PLAID (Stanford backend) C++ extensions ready: {names} ({took:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

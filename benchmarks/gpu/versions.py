"""What the GPU check runs on, written as the set-up's figure (benchmarks/gpu/figures.py) before any step:

    python benchmarks/gpu/versions.py <OUT> <device> <site folder>

One line per library the check uses: its version and whether it was loaded from the carried wheels (``<site
folder>``, first on PYTHONPATH) or from the interpreter's own packages (the GPU image's ``python3``: torch 2.11,
numpy, ...). The summary's first line is made from it ("torch 2.11.0+cu130 (the image's) with transformers 5.3.0
(carried) ..."), so the check says which torch it measured our transformers with.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))     # benchmarks/ (the package ``gpu``)

#: the libraries the check's figures depend on, in the order the summary names them
LIBRARIES = ("torch", "transformers", "sentence_transformers", "tokenizers", "huggingface_hub", "safetensors",
             "numpy", "hydra", "harness")


def origin(module: object, site: Path) -> str:
    """``carried`` (under the wheels' site folder), ``image`` (the interpreter's own packages, wherever its prefix
    lies: a venv inside the checkout is still the interpreter's) or ``repo`` (the checkout)."""
    where = Path(getattr(module, "__file__", "") or "").resolve()
    if site.resolve() in where.parents:
        return "carried"
    if any(Path(prefix).resolve() in where.parents for prefix in {sys.prefix, sys.base_prefix}):
        return "image"
    if Path.cwd().resolve() in where.parents:
        return "repo"
    return "image"


def main() -> None:
    from gpu.figures import Figures

    out, device, site = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    found, missing = [], []
    for name in LIBRARIES:
        try:
            module = importlib.import_module(name)
        except Exception as exc:          # any import error: said in the figure, the set-up fails
            missing.append(name)
            found.append(f"{name} missing ({type(exc).__name__}: {str(exc)[:160]})")
            continue
        found.append(f"{name} {getattr(module, '__version__', '?')} ({origin(module, site)})")
    Figures(out, "setup", device).add("versions", "; ".join(found),
                                      note=f"python {sys.version.split()[0]} at {sys.executable}")
    if missing:
        sys.exit(f"the check cannot run without {', '.join(missing)}")


if __name__ == "__main__":
    main()

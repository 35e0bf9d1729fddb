"""What benchmarks/gpu/prepare.sh made for the GPU check, written last, and verified by check.sh before its set-up:

    python benchmarks/gpu/manifest.py write <manifest> <folder>...   # prepare.sh, after everything else
    python benchmarks/gpu/manifest.py verify <manifest>              # check.sh: exit 0, or one line and exit 2

The manifest lists every file under the folders (``.whl/`` and ``.gpu/``) with its size in bytes, one per line
(``<size> <path>``, the paths as given: relative to the project root where the check runs). prepare.sh deletes it
first and writes it last, so a preparation that stopped part way leaves none; ``verify`` refuses a missing
manifest, a listed file that is missing or of another size, and a wheel beside the listed ones (pip would install
it too), in one line naming what is wrong and the fix. Only the standard library: it runs on the GPU image's python3.
"""

from __future__ import annotations

import sys
from pathlib import Path

FIX = "run bash benchmarks/gpu/prepare.sh again, then carry .whl and .gpu"
HEADER = "# benchmarks/gpu/prepare.sh's manifest: <size in bytes> <path>, every file of its folders"


def listed(folders: list[str]) -> list[tuple[int, str]]:
    """(size, path) of every file under ``folders`` (the manifest and the folders' .gitignore left out)."""
    rows = []
    for folder in folders:
        for path in sorted(Path(folder).rglob("*")):
            if path.is_file() and path.name not in ("MANIFEST", ".gitignore"):
                rows.append((path.stat().st_size, str(path)))
    return rows


def write(manifest: Path, folders: list[str]) -> int:
    rows = listed(folders)
    text = "\n".join([HEADER, *(f"{size} {path}" for size, path in rows)]) + "\n"
    tmp = manifest.with_name(manifest.name + ".part")
    tmp.write_text(text)
    tmp.replace(manifest)
    return len(rows)


def problems(manifest: Path) -> list[str]:
    """What is wrong with the prepared files against ``manifest`` (empty: all there, each of its size)."""
    if not manifest.is_file():
        return [f"no {manifest} (prepare.sh writes it last: the preparation did not finish or did not run)"]
    rows = [line.split(" ", 1) for line in manifest.read_text().splitlines() if line and not line.startswith("#")]
    if not rows:
        return [f"{manifest} lists no files"]
    wrong = []
    for size, path in rows:
        p = Path(path)
        if not p.is_file():
            wrong.append(f"{path} missing")
        elif p.stat().st_size != int(size):
            wrong.append(f"{path} is {p.stat().st_size} bytes, not {size}")
    names = {path for _, path in rows}
    for folder in {str(Path(path).parent) for path in names if path.endswith(".whl")}:
        wrong += [f"{w} not in the manifest" for w in sorted(map(str, Path(folder).glob("*.whl"))) if w not in names]
    return wrong


def main() -> None:
    what, manifest = sys.argv[1], Path(sys.argv[2])
    if what == "write":
        print(f"{manifest}: {write(manifest, sys.argv[3:])} files")
        return
    wrong = problems(manifest)
    if wrong:
        shown = ", ".join(wrong[:5]) + (f" and {len(wrong) - 5} more" if len(wrong) > 5 else "")
        print(f"error: the GPU check's preparation is incomplete: {shown}: {FIX}")
        sys.exit(2)


if __name__ == "__main__":
    main()

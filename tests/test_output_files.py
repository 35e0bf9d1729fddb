"""Before any work, each file a run's records are written to is checked (harness/run/preflight.py): a folder at the
path, or a file where its folder should be, fails in one line instead of after the whole evaluation."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.errors import HarnessError
from harness.core.per_query import files_of
from harness.run.preflight import check_output_files


def test_the_files_of_a_record(tmp_path: Path) -> None:
    rec = tmp_path / "run" / "scifact.json"
    assert [p.name for p in files_of(rec, save_run=False)] == ["scifact.json", "scifact.perquery.npz"]
    assert [p.name for p in files_of(rec, save_run=True)][-1] == "scifact.run.trec.gz"
    check_output_files(files_of(rec, save_run=True))        # nothing there yet: fine, and nothing is created
    assert not (tmp_path / "run").exists()


def test_a_folder_at_a_files_path_or_a_file_above_it_is_refused(tmp_path: Path) -> None:
    rec = tmp_path / "run" / "scifact.json"
    (tmp_path / "run" / "scifact.perquery.npz").mkdir(parents=True)
    with pytest.raises(HarnessError, match=r"scifact\.perquery\.npz is a folder, but this run writes its per-query "
                                           r"scores there: move or remove that folder"):
        check_output_files(files_of(rec, save_run=False))
    (tmp_path / "blocked").write_text("x")
    with pytest.raises(HarnessError, match=r"blocked is a file, but this run writes the record to .*blocked/run/"
                                           r"scifact\.json under it"):
        check_output_files(files_of(tmp_path / "blocked" / "run" / "scifact.json", save_run=False))

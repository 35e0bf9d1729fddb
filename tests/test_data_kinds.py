"""Data kinds: one object per catalog ``kind`` (check, load, offline hint) registered once in
``harness.tasks.retrieval.data.catalog.KINDS``; a new kind is one module + one registry line, and the shared code (the catalog, the
retrieval families) runs it unchanged. Each shipped kind's presence check agrees with its loader."""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.core.errors import DataError, HarnessError, HubUnavailableError
from harness.tasks.retrieval.data.catalog import (
    KINDS,
    DataKind,
    check_entries,
    check_local,
    entry_from_config,
    get_kind,
    load_entry,
    resolve_entries,
)
from tests.conftest import REPO, TINY_MODEL, compose, write_beir_folder

#: a new kind, as a user writes it: one module (this text), one registry line (``KINDS["tsv"] = ...``)
TSV_KIND = '''
"""Kind ``tsv``: a folder of corpus.tsv (id, title, text), queries.tsv (id, text), qrels.tsv (query, doc, grade)."""

from __future__ import annotations

from pathlib import Path

from harness.tasks.retrieval.data.catalog import DataKind
from harness.tasks.retrieval.data.dataset import RetrievalDataset, in_memory


def rows(path: Path) -> list[list[str]]:
    return [line.split("\\t") for line in path.read_text().splitlines() if line]


class TsvKind(DataKind):
    name = "tsv"
    hint = "{name}: task.data_dir=<dir containing {local}/> with corpus.tsv, queries.tsv and qrels.tsv."

    def load_local(self, folder, entry, split, strict_qrels) -> RetrievalDataset:
        corpus = rows(folder / "corpus.tsv")
        qrels: dict[str, dict[str, int]] = {}
        for qid, did, grade in rows(folder / "qrels.tsv"):
            qrels.setdefault(qid, {})[did] = int(grade)
        ids, titles, texts = ([r[k] for r in corpus] for k in range(3))
        return in_memory(entry.name, split, ids, titles, texts, queries=dict(rows(folder / "queries.tsv")),
                         qrels=qrels, source=str(folder))
'''


def write_tsv_folder(root: Path, name: str = "toytsv") -> Path:
    """The BEIR toy set of conftest, written as the TSV kind's three files."""
    beir = write_beir_folder(root / "beir-src", name)
    folder = root / name
    folder.mkdir(parents=True)
    docs = [json.loads(line) for line in (beir / "corpus.jsonl").read_text().splitlines()]
    queries = [json.loads(line) for line in (beir / "queries.jsonl").read_text().splitlines()]
    (folder / "corpus.tsv").write_text("".join(f"{d['_id']}\t{d['title']}\t{d['text']}\n" for d in docs))
    (folder / "queries.tsv").write_text("".join(f"{q['_id']}\t{q['text']}\n" for q in queries))
    (folder / "qrels.tsv").write_text((beir / "qrels" / "test.tsv").read_text().split("\n", 1)[1])
    return folder


@pytest.fixture()
def tsv_kind(tmp_path: Path, monkeypatch) -> Iterator[str]:
    """The TSV kind's module on the path and its one registry line."""
    (tmp_path / "kindmods").mkdir()
    (tmp_path / "kindmods" / "toy_tsv_kind.py").write_text(TSV_KIND)
    monkeypatch.syspath_prepend(str(tmp_path / "kindmods"))
    monkeypatch.setitem(KINDS, "tsv", "toy_tsv_kind:TsvKind")          # the one registry line
    yield "tsv"
    sys.modules.pop("toy_tsv_kind", None)


# ------------------------------------------------------------------------------------------------ a new kind
def test_a_new_kind_is_one_module_and_one_registry_line(tsv_kind: str, tmp_path: Path) -> None:
    write_tsv_folder(tmp_path / "data")
    (entry,) = resolve_entries(["toytsv"], {"toytsv": {"kind": tsv_kind, "split": "test"}})
    check_local(entry, str(tmp_path / "data"))
    check_entries([entry], str(tmp_path / "data"))
    ds = load_entry(entry, data_dir=str(tmp_path / "data"))
    assert (len(ds), len(ds.queries), ds.split) == (40, 5, "test")
    assert ds.qrels["q0"]["d0-0"] == 2 and ds.corpus.texts(0, len(ds))[0].startswith("astronomy note 0 stars")
    with pytest.raises(DataError, match=r"dataset folder not found: .*nowhere.*task.data_dir"):
        check_entries([entry], str(tmp_path / "nowhere"))
    with pytest.raises(DataError, match=r"'toytsv' has no hub copy in the catalog; pass task.data_dir=<dir containing"):
        check_entries([entry], None)


def test_a_new_kind_runs_through_a_retrieval_family_unchanged(tsv_kind: str, tmp_path: Path) -> None:
    """task=beir over the new kind: the family, the runner and the records need no change."""
    from harness.run import runner

    write_tsv_folder(tmp_path / "data")
    cfg = compose(["task=beir", "model=all-minilm-l6-v2", f"model.path={TINY_MODEL}", "model.name=tiny-modernbert",
                   "model.normalize=false", "model.max_length=64", "precision=fp32", "device=cpu",
                   f"task.data_dir={tmp_path}/data", "task.datasets=[toytsv]",
                   f"+task.catalog.toytsv={{kind: {tsv_kind}, split: test}}", "task.train=false",
                   f"paths.results={tmp_path}/results", f"paths.outputs={tmp_path}/outputs",
                   f"paths.cache={tmp_path}/cache"])
    (rec,) = runner.run(cfg)
    assert rec.status == "ok" and rec.dataset == "toytsv" and rec.details["n_queries"] == 5
    assert 0 < rec.metrics["ndcg_at_10"] <= 1


def test_unknown_kind_names_the_valid_ones_closest_first() -> None:
    with pytest.raises(HarnessError, match=r"unknown data kind 'bier'\. Valid data kinds \(closest first\): beir, "
                                           r".*catalog entry 'x'"):
        entry_from_config("x", {"kind": "bier"})
    with pytest.raises(HarnessError, match=r"unknown data kind 'mldrr'.*: mldr,"):
        resolve_entries(["c"], {"c": {"members": {"a": {"kind": "mldrr"}}}})


def test_every_registered_kind_loads_and_every_catalog_kind_is_registered() -> None:
    for name in KINDS:
        kind = get_kind(name)
        assert isinstance(kind, DataKind) and kind.name == name
    used = set()
    for path in [*(REPO / "conf" / "task").glob("*.yaml"), *(REPO / "conf" / "catalog").glob("*.yaml")]:
        used |= {line.split("kind:", 1)[1].split(",")[0].split("}")[0].strip()
                 for line in path.read_text().splitlines() if "{kind:" in line or "kind: " in line.split("#")[0]}
    assert used and used <= set(KINDS), used - set(KINDS)


#: the catalog's own functions (beside the kinds in its module): what the planner and the stages call
CATALOG = ("entry_from_config", "resolve_entries", "load_entry", "check_local", "hub_label", "check_entries")


def test_shared_code_names_no_kind() -> None:
    """The catalog's functions and the retrieval planner reach data through the kinds only: no kind name as a
    string."""
    catalog = ast.parse((REPO / "harness/tasks/retrieval/data/catalog.py").read_text())
    functions = [n for n in catalog.body if isinstance(n, ast.FunctionDef) and n.name in CATALOG]
    assert sorted(f.name for f in functions) == sorted(CATALOG)
    planner = ast.parse((REPO / "harness/tasks/retrieval/planner.py").read_text())
    for tree in [*functions, planner]:
        strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        assert not strings & set(KINDS), (getattr(tree, "name", "planner"), strings & set(KINDS))


def test_offline_hint_is_the_kinds_and_names_a_composites_members(monkeypatch) -> None:
    """Hub copies offline: one error naming each dataset's local alternative, in its kind's layout."""
    cfg = compose(["task=beir"])
    entries = resolve_entries(["scifact", "cqadupstack"], cfg.task.catalog)
    with pytest.raises(HubUnavailableError, match=r"mteb/scifact@.*mteb/CQADupstackAndroidRetrieval@\w+, 12 subsets"
                                                  r".*scifact: task.data_dir=<dir containing scifact/> in BEIR layout"
                                                  r".*cqadupstack/<android\|english\|"):
        check_entries(entries, None)
    nano = resolve_entries(["nanoscifact"], compose(["task=nanobeir"]).task.catalog)
    with pytest.raises(HubUnavailableError, match=r"<dir>/NanoSciFact/ \(hub layout"):
        check_entries(nano, None)


# ------------------------------------------------------------------------------------- check and load agree
SHIPPED = {   # kind -> a catalog entry of it, loaded from task.data_dir
    "beir": {"split": "test"}, "hub_layout": {"split": "test"}, "mldr": {"split": "test"},
    "coir_csn": {"hub_config": "ruby"}, "cosqa_pairs": {"split": "dev"},
}


@pytest.mark.parametrize("kind", list(SHIPPED))
def test_a_missing_local_copy_fails_check_and_load_alike(kind: str, tmp_path: Path) -> None:
    entry = entry_from_config("gone", {"kind": kind, **SHIPPED[kind]})
    problem = get_kind(kind).check(entry, str(tmp_path), entry.split)
    assert problem and "not found" in problem and "gone" in problem
    with pytest.raises(DataError, match="not found"):
        load_entry(entry, data_dir=str(tmp_path))


@pytest.mark.parametrize("kind", ["beir", "hub_layout"])
def test_beir_folder_kinds_read_both_local_layouts(kind: str, tmp_path: Path) -> None:
    from tests.test_nanobeir import write_hub_layout

    write_beir_folder(tmp_path, "plain")
    write_hub_layout(tmp_path / "hub", [{"_id": "d1", "text": "one"}, {"_id": "d2", "text": "two"}],
                     [{"_id": "q1", "text": "first"}], [{"query-id": "q1", "corpus-id": "d2", "score": 1}],
                     split="test")
    for name, n_docs in (("plain", 40), ("hub", 2)):
        entry = entry_from_config(name, {"kind": kind})
        assert get_kind(kind).check(entry, str(tmp_path), "test") is None
        assert len(load_entry(entry, data_dir=str(tmp_path))) == n_docs
    (tmp_path / "plain" / "qrels" / "test.tsv").unlink()
    problem = get_kind(kind).check(entry_from_config("plain", {"kind": kind}), str(tmp_path), "test")
    assert "qrels/test.tsv not found" in problem and "Splits here: ['train']" in problem


@pytest.mark.parametrize("kind", ["source_tree", "source_files"])
def test_mined_kinds_need_neither_data_dir_nor_hub(kind: str, tmp_path: Path) -> None:
    root = Path(json.__file__).parent        # a small source tree: the json package
    entry = entry_from_config("j", {"kind": kind, "root": str(root), "max_queries": 20})
    check_entries([entry], None)
    assert len(load_entry(entry, data_dir=None)) > 0
    gone = entry_from_config("g", {"kind": kind, "root": str(tmp_path / "nope")})
    with pytest.raises(DataError, match="root folder not found"):
        check_entries([gone], None)
    with pytest.raises(DataError, match=r"does not exist|is not a folder"):
        load_entry(gone, data_dir=None)


@pytest.mark.slow
@pytest.mark.parametrize("dataset, task, n_docs", [
    ("scifact", "beir", 5183), ("csn-ruby", "code", None), ("csn-ruby-beir", "code", 1261), ("cosqa-dev", "code", None),
])
def test_check_and_load_agree_on_the_real_data(dataset: str, task: str, n_docs: int | None,
                                              shared_data: Path) -> None:
    (entry,) = resolve_entries([dataset], compose([f"task={task}"]).task.catalog)
    assert get_kind(entry.kind).check(entry, str(shared_data), entry.split) is None
    check_entries([entry], str(shared_data))
    ds = load_entry(entry, data_dir=str(shared_data))
    assert len(ds) > 0 and ds.qrels and (n_docs is None or len(ds) == n_docs)


def test_checking_imports_no_reader(tmp_path: Path) -> None:
    """Resolving and checking entries imports neither torch nor datasets: kinds import their readers to load."""
    import subprocess

    write_beir_folder(tmp_path, "toy")
    code = ("import sys; from harness.tasks.retrieval.data.catalog import check_entries, resolve_entries; "
            f"check_entries(resolve_entries(['toy'], {{'toy': {{}}}}), {str(tmp_path)!r}); "
            "print(sorted(m for m in ('torch', 'datasets', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr

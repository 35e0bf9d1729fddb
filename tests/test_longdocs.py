"""The local long-document set: whole source files as documents, function docstrings as queries, where each
function starts, and nDCG@10 before/after the model's truncation point (all-MiniLM-L6-v2 at 256 tokens, the tiny
ModernBERT at 8,192)."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from harness.run.runner import run
from harness.tasks.retrieval.data import code, longdocs, mldr
from harness.tasks.retrieval.retrievers.retriever import token_starts
from tests.conftest import TINY_MODEL, compose

SOURCE = '''\
"""Module docstring stays."""
import os


def plain(path):
    """Join the path with the current working directory."""
    return os.path.join(os.getcwd(), path)


class Box:
    @staticmethod
    @property
    def size(x):
        """Return the number of items held in the box.

        More text.
        """
        y = x + 1
        return y

    def stub(self):
        """Not implemented here, on purpose really."""
        raise NotImplementedError


def inline(a): """Add one to the given number always."""; return a + 1
'''


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text(SOURCE)
    (root / "pkg" / "other.py").write_text(textwrap.dedent('''\
        def helper(items):
            """Sort the items and drop every duplicate."""
            return sorted(set(items))
        '''))
    (root / "broken.py").write_text("def (:\n")
    return root


def test_files_are_documents_with_query_docstrings_removed(tree: Path) -> None:
    lds = longdocs.mine(tree)
    assert lds.doc_ids == ["pkg/mod.py", "pkg/other.py"] and lds.stats["unparsed"] == 1
    queries = {q.qid: q for q in lds.queries}
    assert set(queries) == {"q:pkg/mod.py:plain:5", "q:pkg/mod.py:Box.size:13", "q:pkg/mod.py:inline:26",
                            "q:pkg/other.py:helper:1"}                    # the stub's docstring is no query
    text = lds.texts[0]
    for q in queries.values():
        assert q.text not in lds.texts[lds.doc_ids.index(q.doc_id)]     # never a verbatim substring
    assert '"""Module docstring stays."""' in text and "Not implemented here" in text
    starts = {qid: text[q.start_char:].split("\n", 1)[0] for qid, q in queries.items() if q.doc_id == "pkg/mod.py"}
    assert starts == {"q:pkg/mod.py:plain:5": "def plain(path):", "q:pkg/mod.py:Box.size:13": "    @staticmethod",
                      "q:pkg/mod.py:inline:26": "def inline(a): return a + 1"}
    assert all(text.split("\n")[q.start_line - 1] == starts[q.qid] for q in queries.values() if q.qid in starts)
    compile(text, "mod.py", "exec")                                     # still valid Python


def test_split_by_file_hash_keeps_every_file_in_the_corpus(tree: Path) -> None:
    lds = longdocs.mine(tree)
    assert lds.split_of == {d: longdocs.file_split(d) for d in lds.doc_ids}
    for split in ("train", "test"):
        ds = longdocs.build(lds, name="x", split=split)
        assert ds.corpus_ids == lds.doc_ids
        assert all(lds.split_of[next(iter(r))] == split for r in ds.qrels.values())
        assert set(ds.meta["query_starts"]) == set(ds.queries)
    with pytest.raises(Exception, match="split 'dev': use one of train, test"):
        longdocs.build(lds, name="x", split="dev")


@pytest.mark.slow
def test_stdlib_default_set_is_long(tmp_path: Path) -> None:
    ds = longdocs.build_long_document_set(max_queries=300)
    starts = sorted(v["char"] for v in ds.meta["query_starts"].values())
    assert len(ds.queries) == 300 and len(ds) > 400
    assert starts[len(starts) // 2] > 4000          # most functions start thousands of characters in
    again = longdocs.build_long_document_set(max_queries=300)
    assert again.fingerprint == ds.fingerprint      # deterministic


def test_export_in_mldr_layout_round_trips(tmp_path: Path) -> None:
    lds = longdocs.mine(code.stdlib_root() / "json")
    out = longdocs.export_mldr(lds, tmp_path / "mldr-v1.0-en", negatives=2)
    test = mldr.load_local(out, "x", "test")
    built = longdocs.build(lds, name="x", split="test", max_queries=None)
    assert test.qrels == built.qrels and test.queries == built.queries
    rows, _ = mldr.train_rows_local(out, "train")
    assert len(rows) == len(lds.split_queries("train"))
    for r in rows:
        negs = [n["docid"] for n in r["negative_passages"]]
        assert len(negs) == 2 and r["positive_passages"][0]["docid"] not in negs


def test_token_starts_follow_the_tokenizer_offsets() -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(TINY_MODEL))
    text = "alpha beta gamma delta"
    ids = tok(text)["input_ids"]
    starts = token_starts(tok, text, [0, text.index("gamma"), len(text) + 5])
    assert starts[0] == 1                                          # after [CLS]
    assert tok.decode(ids[starts[1]:starts[1] + 1]).startswith("g")
    assert starts[2] == len(ids)                                   # past the end


def run_files(tmp_path: Path, *extra: str):
    return run(compose(["task=mldr", "task.source.run=null", "precision=fp32", f"paths.results={tmp_path}/results",
                        f"paths.cache={tmp_path}/cache", f"paths.outputs={tmp_path}/outputs", *extra]))


def check_split(rec, max_length: int) -> dict:
    t = rec.details["truncation"]
    assert t["max_length"] == max_length and t["n_before"] + t["n_after"] == rec.details["n_queries"]
    assert all((tok < max_length - 1) == (tok < t["visible_tokens"]) for _, tok in t["query_starts"].values())
    assert sum(tok < max_length - 1 for _, tok in t["query_starts"].values()) == t["n_before"]
    for side in ("before", "after"):
        if t[f"n_{side}"]:
            assert rec.metrics[f"ndcg_at_10_{side}_truncation"] == t[f"ndcg_at_10_{side}"]
    return t


@pytest.mark.slow
def test_minilm_on_the_stdlib_files_end_to_end(tmp_path: Path) -> None:
    """all-MiniLM-L6-v2 (256 tokens) on the default set: almost every function starts past its window."""
    (rec,) = run_files(tmp_path, "model=all-minilm-l6-v2", "task.datasets=[stdlib-files]",
                       "task.catalog.stdlib-files.max_queries=60", "task.catalog.stdlib-files.max_corpus=150")
    t = check_split(rec, 256)
    print(f"MiniLM 256: nDCG@10 {rec.score:.4f}; before {t['n_before']} q {t['ndcg_at_10_before']}, after "
          f"{t['n_after']} q {t['ndcg_at_10_after']:.4f}; median start token {t['median_start_token']}")
    assert rec.details["setting"] == "ood" and rec.details["lineage"]["mode"] == "model"
    assert t["n_after"] > t["n_before"] and rec.model["max_positions"] == 512


def long_tiny_modernbert(out: Path, positions: int = 8192) -> Path:
    """The committed tiny ModernBERT with 8,192 positions (RoPE: the weights are unchanged)."""
    shutil.copytree(TINY_MODEL, out)
    for name, key in (("config.json", "max_position_embeddings"), ("tokenizer_config.json", "model_max_length")):
        cfg = json.loads((out / name).read_text())
        cfg[key] = positions
        (out / name).write_text(json.dumps(cfg))
    return out


@pytest.mark.slow
def test_tiny_modernbert_at_8192_tokens_end_to_end(tmp_path: Path) -> None:
    """The tiny ModernBERT reads 8,192 tokens of each file of importlib (24 files): most functions are visible."""
    model = long_tiny_modernbert(tmp_path / "tiny-8192")
    (rec,) = run_files(tmp_path, "model=modernbert-base", f"model.path={model}", "model.name=tiny-modernbert-8k",
                       "task.datasets=[files]", f"task.path={code.stdlib_root() / 'importlib'}",
                       "task.catalog.files.max_queries=40", "task.batch_tokens=65536")
    t = check_split(rec, 8192)
    print(f"tiny ModernBERT 8192: nDCG@10 {rec.score:.4f}; before {t['n_before']} q {t['ndcg_at_10_before']:.4f}, "
          f"after {t['n_after']} q {t['ndcg_at_10_after']:.4f}; median start token {t['median_start_token']}")
    assert rec.details["max_length"] == 8192 and rec.hyperparameters["max_length"] == 8192
    assert t["n_before"] > t["n_after"] > 0       # importlib has files longer than 8,192 tokens
    assert max(tok for _, tok in t["query_starts"].values()) > 8192


def test_a_length_above_the_models_positions_is_refused(tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"task.max_length=1024 is above model 'tiny' 's 512|task.max_length=1024 is "
                                        r"above model 'tiny'.s 512 token positions; set task.max_length<=512"):
        run_files(tmp_path, "model=modernbert-base", f"model.path={TINY_MODEL}", "model.name=tiny",
                  "task.datasets=[files]", f"task.path={code.stdlib_root() / 'json'}", "task.max_length=1024")

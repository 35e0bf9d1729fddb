"""Issue 28: no wrong ``ok`` record from a swapped, foreign, corrupted or claim-less cache file. Every cache file
carries what it claims to be (shard top-k lists: shard index, document ids, model and corpus, queries, top_k;
embeddings: key, size and content hash; token stores: key and each file's content hash) and is checked before use:
a run computes it again, the merge of externally computed shards refuses it in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from harness.core import results
from harness.core.errors import HarnessError
from harness.run.runner import run
from tests.conftest import compose, write_beir_folder
from tests.test_colbert import overrides as colbert_overrides
from tests.test_retrieval_runs import overrides

#: evaluation only, on the CPU (the overrides pin fp32): the metrics compared do not depend on the machine
EVAL = ["task.train=false", "device=cpu"]
SMALL = [*EVAL, "task.batch_tokens=1024"]


@pytest.fixture()
def toy(tmp_path: Path) -> Path:
    write_beir_folder(tmp_path / "data", docs_per_topic=40)
    return tmp_path / "data"


def shard_files(cache: Path) -> dict[int, Path]:
    return {json.loads(str(np.load(p)["meta"]))["shard"]: p for p in (cache / "embeddings" / "shard-topk").glob("*.npz")}


def test_swapped_or_foreign_shard_files_never_make_an_ok_record(tmp_path: Path, toy: Path) -> None:
    (done,) = run(compose(overrides(tmp_path, toy, *SMALL, "task.shards=3")))
    files = shard_files(tmp_path / "cache")
    merge_only = [*SMALL, "task.shards=3", "task.shard_launcher=external", "overwrite=true"]
    first, last = files[0].read_bytes(), files[2].read_bytes()
    files[0].write_bytes(last)                            # shard 0 and 2 swapped in the cache
    files[2].write_bytes(first)
    with pytest.raises(HarnessError) as exc:
        run(compose(overrides(tmp_path, toy, *merge_only)))
    (rec,) = exc.value.records
    assert rec.status == results.STATUS_FAILED and "\n" not in rec.error
    assert "shard 0 of 3" in rec.error and "not what it claims to be (shard, embeddings, ids differ" in rec.error
    (kept,) = [r for _, r in results.iter_records(tmp_path / "results")]
    assert kept.status == "ok" and kept.metrics == done.metrics            # the earlier good record stays
    (again,) = run(compose(overrides(tmp_path, toy, *SMALL, "task.shards=3", "overwrite=true")))
    assert again.metrics == done.metrics
    assert {i: p for i, p in shard_files(tmp_path / "cache").items()} == files   # each file recomputed in its place

    # another model's shard (same corpus, CLS pooling) in shard 1's place
    other = tmp_path / "other"
    run(compose(overrides(other, toy, *SMALL, "task.shards=3", "model.pooling=cls", f"paths.cache={tmp_path}/cache")))
    mine = shard_files_of(tmp_path, files)
    # every file of the other run (shard_files keeps one file per shard index, whichever the listing gives last)
    theirs = [p for p in (tmp_path / "cache" / "embeddings" / "shard-topk").glob("*.npz") if p not in mine]
    assert len(theirs) == 3 and len(mine) == 3
    target = next(p for p in mine if json.loads(str(np.load(p)["meta"]))["shard"] == 1)
    source = next(p for p in theirs if json.loads(str(np.load(p)["meta"]))["shard"] == 1)
    shutil.copy(source, target)
    with pytest.raises(HarnessError) as exc:
        run(compose(overrides(tmp_path, toy, *merge_only)))
    (rec,) = exc.value.records
    assert "shard 1 of 3" in rec.error and "embeddings" in rec.error and "nothing was scored" in rec.error


def shard_files_of(tmp_path: Path, first_run: dict[int, Path]) -> list[Path]:
    """This run's shard files (their names are keyed by what they hold, so the first run's names are this run's)."""
    return [p for p in first_run.values() if p.exists()]


def test_an_embedding_cache_entry_that_is_not_what_it_claims_is_computed_again(tmp_path: Path, toy: Path) -> None:
    cache = tmp_path / "cache" / "embeddings"
    (want,) = run(compose(overrides(tmp_path, toy, *EVAL)))
    mine = {p.name for p in cache.glob("*.npy")}
    run(compose(overrides(tmp_path / "b", toy, *EVAL, "model.pooling=cls", f"paths.cache={tmp_path}/cache")))
    theirs = sorted((p for p in cache.glob("*.npy") if p.name not in mine), key=lambda p: p.stat().st_size)
    ours = sorted((cache / n for n in mine), key=lambda p: p.stat().st_size)
    corpus, foreign = ours[-1], theirs[-1]                              # the corpus embeddings: the largest entries
    assert corpus.stat().st_size == foreign.stat().st_size
    for how in ("copied with its claim", "copied without a claim", "altered in place"):
        if how == "altered in place":
            run(compose(overrides(tmp_path, toy, *EVAL, "overwrite=true")))   # a good entry again
            blob = bytearray(corpus.read_bytes())
            blob[-8:] = bytes(8)
            corpus.write_bytes(bytes(blob))
        else:
            shutil.copy(foreign, corpus)
            claim = corpus.with_name(corpus.stem + ".claim.json")
            if how == "copied with its claim":
                shutil.copy(foreign.with_name(foreign.stem + ".claim.json"), claim)
            else:
                claim.unlink()
        (got,) = run(compose(overrides(tmp_path, toy, *EVAL, "overwrite=true")))
        assert got.details["embedding_cache_hit"] is False, how
        assert got.metrics == want.metrics, how


def test_a_token_store_that_is_not_what_it_claims_is_encoded_again(tmp_path: Path, toy: Path) -> None:
    (want,) = run(compose(colbert_overrides(tmp_path, toy, *EVAL)))
    (store,) = [p.parent for p in (tmp_path / "cache").rglob("tokens.f16")]
    tokens = store / "tokens.f16"
    for how in ("truncated", "foreign"):
        if how == "truncated":
            tokens.write_bytes(tokens.read_bytes()[:-256])
        else:
            meta = json.loads((store / "meta.json").read_text())
            (store / "meta.json").write_text(json.dumps({**meta, "key": "0123456789abcdef01234567"}))
        (got,) = run(compose(colbert_overrides(tmp_path, toy, *EVAL, "overwrite=true")))
        assert got.status == "ok" and got.metrics == want.metrics, how
        assert got.details.get("embedding_cache_hit") is not True, how


def test_a_glue_tokenisation_cache_of_other_labels_is_rebuilt(tmp_path: Path) -> None:
    """A tokenised split whose claim is another split's (here: the same texts, other labels) is rebuilt."""
    from transformers import AutoTokenizer

    from harness.tasks.glue.data import Split
    from harness.tasks.glue.tokens import cached_tokenize
    from tests.conftest import TINY_MODEL

    tok = AutoTokenizer.from_pretrained(TINY_MODEL)
    texts = [f"the cat sat {i}" for i in range(8)]
    good = Split(texts, None, [i % 2 for i in range(8)])
    bad = Split(texts, None, [1 - i % 2 for i in range(8)])
    other = cached_tokenize(bad, tok, 16, False, tmp_path / "k" / "other")
    target = tmp_path / "k" / "train"
    shutil.copytree(tmp_path / "k" / "other", target)                       # another split's cache in this key
    assert list(cached_tokenize(good, tok, 16, False, target)["labels"]) == good.labels != list(other["labels"])

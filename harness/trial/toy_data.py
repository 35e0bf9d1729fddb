"""Toy data in every layout the harness reads: what the tests run on, and what ``python -m harness.trial`` gives the
shrunk paper graph so a new user can try the local or SLURM path end to end without any download. Deterministic."""

from __future__ import annotations

import json
import random
from pathlib import Path

TOPICS = {"astronomy": "stars planets galaxies telescopes orbit comets nebula",
          "cooking": "recipes ovens flour butter baking bread sauce",
          "football": "goals players referee stadium league match striker",
          "medicine": "patients doctors vaccine clinical trial disease therapy",
          "finance": "stocks bonds interest rates markets inflation banks"}

WORDS = ["the", "a", "cat", "dog", "sat", "ran", "on", "under", "mat", "park", "big", "small", "red", "blue", "man", "woman", "saw", "heard"]

BEIR = ["nfcorpus", "scifact", "trec-covid", "fiqa", "arguana", "climate-fever", "dbpedia-entity", "fever", "hotpotqa",
        "msmarco", "nq", "quora", "scidocs", "webis-touche2020"]
CQA = ["android", "english", "gaming", "gis", "mathematica", "physics", "programmers", "stats", "tex", "unix",
       "webmasters", "wordpress"]
LANGS = ["go", "java", "javascript", "php", "python", "ruby"]


def write_beir_folder(root: Path, name: str = "toy", docs_per_topic: int = 8, crlf: bool = False) -> Path:
    """A small, real-shaped BEIR folder: one query per topic, every doc of the topic relevant (grade 1 or 2)."""
    folder = root / name
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    docs, queries, qrels = [], [], []
    for t, (topic, words) in enumerate(TOPICS.items()):
        w = words.split()
        for i in range(docs_per_topic):
            did = f"d{t}-{i}"
            docs.append({"_id": did, "title": f"{topic} note {i}", "text": " ".join(w[i % 7:] + w[: i % 7])})
            qrels.append((f"q{t}", did, 2 if i == 0 else 1))
        queries.append({"_id": f"q{t}", "text": f"{topic} {w[0]} {w[1]}"})
    nl = "\r\n" if crlf else "\n"
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + nl for d in docs))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + nl for q in queries))
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in qrels]
    (folder / "qrels" / "test.tsv").write_text(nl.join(lines) + nl)
    (folder / "qrels" / "train.tsv").write_text(nl.join(lines) + nl)
    return folder


def write_triplets(path: Path, n: int = 48) -> Path:
    topics = list(TOPICS.items())
    rows = ["query\tpositive\tnegative"]
    for i in range(n):
        (ta, wa), (tb, wb) = topics[i % 5], topics[(i + 1) % 5]
        rows.append(f"{ta} question {i}\t{ta}: {wa} {i}\t{tb}: {wb} {i}")
    path.write_text("\n".join(rows) + "\n")
    return path


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))) + " ."


def pair_file(path: Path, header: str, n: int, labels: list[str], rng: random.Random, mnli: bool = False) -> None:
    lines = [header]
    for i in range(n):
        a, b, y = sentence(rng), sentence(rng), labels[i % len(labels)]
        if mnli:  # MNLI's columns: index ... sentence1 sentence2 label1 gold_label
            lines.append(f"{i}\t{i}\t{i}e\tfiction\t(x)\t(y)\t(x)\t(y)\t{a}\t{b}\t{y}\t{y}")
        else:
            lines.append(f"{i}\t{a}\t{b}\t{y}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def write_tiny_glue(root: Path) -> Path:
    """A tiny GLUE folder in the original layout: RTE and MNLI (train, dev_matched, dev_mismatched)."""
    rng = random.Random(0)
    rte_head = "index\tsentence1\tsentence2\tlabel"
    pair_file(root / "RTE/train.tsv", rte_head, 32, ["entailment", "not_entailment"], rng)
    pair_file(root / "RTE/dev.tsv", rte_head, 12, ["entailment", "not_entailment"], rng)
    mnli_head = ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
                 "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label")
    classes = ["entailment", "neutral", "contradiction"]
    pair_file(root / "MNLI/train.tsv", mnli_head, 36, classes, rng, mnli=True)
    pair_file(root / "MNLI/dev_matched.tsv", mnli_head, 9, classes, rng, mnli=True)
    pair_file(root / "MNLI/dev_mismatched.tsv", mnli_head, 6, classes, rng, mnli=True)
    return root


def write_paper_data(root: Path) -> Path:
    """Every folder the shrunk graph's jobs read, under ``root``; returns ``root``."""
    for name in BEIR:
        write_beir_folder(root, name, docs_per_topic=3)
    # msmarco is evaluated on dev: the same judgements as test
    (root / "msmarco" / "qrels" / "dev.tsv").write_text((root / "msmarco" / "qrels" / "test.tsv").read_text())
    for member in CQA:
        write_beir_folder(root / "cqadupstack", member, docs_per_topic=3)
    write_beir_folder(root, "stackoverflow-qa", docs_per_topic=3)
    _glue(root)
    _mldr(root / "mldr-v1.0-en")
    _codesearchnet(root / "codesearchnet")
    write_triplets(root / "triplets.tsv", n=32)
    _kd(root / "kd.jsonl")
    return root


def _glue(root: Path) -> None:
    write_tiny_glue(root)                                   # MNLI and RTE
    rng = random.Random(1)
    binary = ["0", "1"]
    for folder, head, labels in (("QNLI", "index\tquestion\tsentence\tlabel", ["entailment", "not_entailment"]),
                                 ("QQP", "id\tquestion1\tquestion2\tis_duplicate", binary),
                                 ("STS-B", "index\tsentence1\tsentence2\tscore", ["0.5", "2.5", "4.0"])):
        for split, n in (("train", 24), ("dev", 8)):
            pair_file(root / folder / f"{split}.tsv", head, n, labels, rng)
    for split, n in (("train", 24), ("dev", 8)):
        mrpc = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"
        rows = [f"{i % 2}\t{i}\t{i + 1}\t{sentence(rng)}\t{sentence(rng)}" for i in range(n)]
        (root / "MRPC").mkdir(exist_ok=True)
        (root / "MRPC" / f"{split}.tsv").write_text("\n".join([mrpc, *rows]) + "\n", encoding="utf-8")
        (root / "SST-2").mkdir(exist_ok=True)
        sst = [f"{sentence(rng)}\t{i % 2}" for i in range(n)]
        (root / "SST-2" / f"{split}.tsv").write_text("\n".join(["sentence\tlabel", *sst]) + "\n")
        (root / "CoLA").mkdir(exist_ok=True)
        cola = [f"src\t{i % 2}\t\t{sentence(rng)}" for i in range(n)]
        (root / "CoLA" / f"{split}.tsv").write_text("\n".join(cola) + "\n")


def _mldr(folder: Path) -> None:
    """MLDR's layout: each topic's four documents (longer texts), one test and one train query per document."""
    from harness.tasks.retrieval.data import mldr
    docs: dict[str, str] = {}
    for topic, words in TOPICS.items():
        for i in range(4):
            docs[f"{topic}-{i}"] = f"{topic} {i}. " + " ".join(words.split()[i:] * 6)
    test, train = [], []
    for k, did in enumerate(docs):
        topic, i = did.rsplit("-", 1)
        word = TOPICS[topic].split()[int(i)]
        other = list(docs)[(k + 4) % len(docs)]
        test.append(_mldr_row(f"t{did}", f"{topic} {word}", (did, docs[did])))
        train.append(_mldr_row(f"r{did}", f"about {topic} {word}", (did, docs[did]), (other, docs[other])))
    mldr.write_folder(folder, list(docs.items()), {"test": test, "train": train})


def _mldr_row(qid: str, query: str, pos: tuple[str, str], neg: tuple[str, str] | None = None) -> dict:
    return {"query_id": qid, "query": query, "positive_passages": [{"docid": pos[0], "text": pos[1]}],
            "negative_passages": [{"docid": neg[0], "text": neg[1]}] if neg else []}


def _codesearchnet(root: Path) -> None:
    """CodeXGLUE ``test.jsonl`` per language: one function per topic word, its docstring naming it."""
    for lang in LANGS:
        rows = [{"code": f"def {w}_{k}(x): return x + {k}", "docstring": f"{topic}: {w} number {k}",
                 "partition": "test", "language": lang}
                for topic, words in TOPICS.items() for k, w in enumerate(words.split()[:3])]
        (root / lang).mkdir(parents=True, exist_ok=True)
        (root / lang / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _kd(path: Path, n: int = 16) -> None:
    """ColBERT KD rows in the ``joined`` layout: a query, four documents, a teacher score each."""
    topics = list(TOPICS.items())
    rows = []
    for i in range(n):
        (ta, wa), (tb, wb) = topics[i % 5], topics[(i + 1) % 5]
        docs = [f"{ta}: {wa}", f"{ta} {i}: {wa[::-1]}", f"{tb}: {wb}", f"{tb} {i}"]
        rows.append({"query": f"{ta} question {i}", "documents": docs, "scores": [9.0, 7.0, 2.0, 1.0]})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))

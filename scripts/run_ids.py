"""What a change does to run identities: prints, for a fixed list of configurations, every planned cell's run id,
data spec and plan key, the paper graph's work estimate (run and report jobs), and (retrieval) the corpus-cache key
part, the whole corpus-cache identity as the runner hands it to the retriever (tiny weights loaded on the CPU), the
retriever's settings, the trained-model folder, the record's hyperparameters and details; (GLUE) each point's
record hyperparameters, trainer settings and tokenisation cache key, as JSON. Run it on two trees and diff the
outputs:

    python scripts/run_ids.py > after.json
    git worktree add /tmp/before <commit> && (cd /tmp/before && python scripts/run_ids.py --repo .) > before.json
    python scripts/run_ids.py --diff before.json after.json

(each tree with its own copy of this script: it reads a tree's planning through that tree's API).

Needs no model hub and no GPU: models are the tiny test ModernBERT and the packaged MiniLM, data are local copies.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
DATA = HERE.parent / "shared" / "data"

#: name -> overrides; {tiny} {data} {tmp} {triplets} {kd} are filled in
CONFIGS: dict[str, list[str]] = {
    "beir-as-is": ["task=beir", "task.train=false", "task.datasets=[scifact]", "task.data_dir={data}"],
    "beir-trained-hub": ["task=beir", "task.datasets=[scifact]", "task.data_dir={data}"],
    "beir-trained-file": ["task=beir", "task.datasets=[scifact]", "task.data_dir={data}",
                          "task.train_data.source=file", "task.train_data.path={triplets}"],
    "beir-trained-mined": ["task=beir", "task.datasets=[scifact]", "task.data_dir={data}",
                           "task.train_data.source=beir", "task.train_data.dataset=scifact"],
    "beir-top-k-100": ["task=beir", "task.train=false", "task.datasets=[scifact]", "task.data_dir={data}",
                       "task.top_k=100"],
    "beir-all-hub-sets": ["task=beir", "task.train=false"],
    "nanobeir": ["task=nanobeir"],
    "nanobeir-trained": ["task=nanobeir", "task.train=true"],
    "code-csn-ruby": ["task=code", "task.source.run=null", "task.datasets=[csn-ruby]", "task.data_dir={data}"],
    "code-title-convention": ["task=code", "task.source.run=null", "task.datasets=[csn-ruby]",
                              "task.data_dir={data}", "task.title_convention=mteb"],
    "code-paper": ["task=code", "task.source.run=null"],
    "mldr-ood": ["task=mldr", "task.source.run=null"],
    "mldr-id-hub": ["task=mldr", "task.source.run=null", "task.setting=id", "task.lr=3e-5"],
    "mldr-colbert-plaid": ["task=mldr", "task.source.run=null", "task.retriever=multi_vector",
                           "task.source.task=colbert"],
    "mldr-colbert-exact": ["task=mldr", "task.source.run=null", "task.retriever=multi_vector",
                           "task.source.task=colbert", "task.multi_vector.index=exact"],
    "colbert-trained-hub": ["task=colbert", "task.datasets=[scifact]", "task.data_dir={data}"],
    "colbert-as-is-exact": ["task=colbert", "task.train=false", "task.index=exact", "task.datasets=[scifact]",
                            "task.data_dir={data}"],
    "colbert-kd-file": ["task=colbert", "task.datasets=[scifact]", "task.data_dir={data}",
                        "task.train_data.source=file", "task.train_data.path={kd}", "task.train_data.n_ways=26"],
    "colbert-voyager": ["task=colbert", "task.train=false", "task.index=voyager", "task.datasets=[scifact]",
                        "task.data_dir={data}"],
    "glue-rte-grid": ["task=glue", "task.tasks=[rte]", "task.data_dir={data}/glue"],
    "glue-mrpc-point": ["task=glue", "task.tasks=[mrpc]", "task.data_dir={data}/glue", "task.lr=3e-5",
                        "task.weight_decay=1e-6", "task.epochs=2"],
    "glue-stsb-best-epoch": ["task=glue", "task.tasks=[stsb]", "task.data_dir={data}/glue",
                             "task.scoring_protocol=best_epoch"],
    "glue-rte-epoch-slot": ["task=glue", "task.tasks=[rte]", "task.data_dir={data}/glue", "task.epoch_slot=1",
                            "task.scoring_protocol=best_epoch"],
    # a model with no GLUE head setting (model.glue: null): the MRPC/QQP score change alone
    "glue-minilm-rte-point": ["task=glue", "model=all-minilm-l6-v2", "task.tasks=[rte]", "task.data_dir={data}/glue",
                              "task.lr=3e-5", "task.weight_decay=1e-6", "task.epochs=2"],
    "glue-minilm-mrpc-point": ["task=glue", "model=all-minilm-l6-v2", "task.tasks=[mrpc]", "task.data_dir={data}/glue",
                               "task.lr=3e-5", "task.weight_decay=1e-6", "task.epochs=2"],
    # RTE chained from an MNLI configuration that finished its three seeds (records written by mnli_records)
    "glue-rte-chained": ["task=glue", "task.tasks=[rte]", "task.data_dir={data}/glue", "task.lr=3e-5",
                         "task.weight_decay=1e-6", "task.epochs=2", "paths.results={tmp}/chained/results"],
    "beir-shard-job": ["task=beir", "task.train=false", "task.datasets=[scifact]", "task.data_dir={data}",
                       "task.shards=4", "task.shard_launcher=external", "task.shard=1"],
    "efficiency": ["task=efficiency", "task.n_docs=128"],
    "mteb": ["task=mteb", "task.tasks=[SciFact]"],
}
COMMON = ["model=modernbert-base", "model.path={tiny}", "model.name=tiny-modernbert", "model.max_length=512", "device=cpu",
          "paths.results={tmp}/results", "paths.outputs={tmp}/outputs", "paths.cache={tmp}/cache"]


def common(overrides: list[str]) -> list[str]:
    """:data:`COMMON`, less each key a configuration sets itself (``model=``, ``paths.results=``)."""
    own = {o.partition("=")[0] for o in overrides}
    return [o for o in COMMON if o.partition("=")[0] not in own]


#: configurations planned over records written first: name -> the function that writes them
SETUP: dict[str, Any] = {}


def mnli_records(overrides: list[str]) -> None:
    """Ok MNLI records of every seed of one configuration (lr 3e-5, wd 1e-6, 1 epoch) in the configuration's results
    folder, each keeping a 'checkpoint' (the tiny model's folder): what a chained point starts from."""
    from harness.core import results
    from harness.run import planning
    from harness.run.overrides import compose_config
    from harness.tasks.glue import compute as glue_point
    from harness.trial.toy_data import write_tiny_glue

    toy = write_tiny_glue(Path(os.environ["RUN_IDS_TMP"]) / "toy-glue")    # the shared data holds no MNLI
    keep = [o for o in overrides if not o.startswith(("task.tasks=", "task.epochs=", "task.data_dir="))]
    cfg = compose_config([*keep, "task.tasks=[mnli]", "task.epochs=1", f"task.data_dir={toy}"])
    plan = planning.plan(cfg)
    for cell in planning.every_cell(cfg, plan):
        point, init = cell.payload
        rec = plan.header.record(cell, split="validation", metrics={"accuracy_mean": 80.0 + point.seed % 7},
                                 main_score="accuracy_mean", details={"checkpoint": str(cfg.model.path)},
                                 hyperparameters=glue_point.hyperparameters(point, plan.settings, init))
        results.write_record(plan.layout.results, rec)


SETUP["glue-rte-chained"] = mnli_records


def describe(name: str, overrides: list[str]) -> dict[str, Any]:
    """Everything a change to identities would show for one configuration (or the error it raised)."""
    from harness.run import planning
    from harness.run.overrides import compose_config
    from harness.tasks.glue.grid import GlueStages
    from harness.tasks.retrieval.stages import RetrievalStages

    try:
        if name in SETUP:
            SETUP[name](overrides)
        cfg = compose_config(overrides)
        plan = planning.plan(cfg)
        cells = planning.every_cell(cfg, plan)
    except Exception as exc:   # a configuration a tree refuses is a difference too
        return {"error": f"{type(exc).__name__}: {exc}"}
    out: dict[str, Any] = {"cells": [[c.dataset, c.run_id, c.spec, c.plan_key] for c in cells]}
    if name != "mteb":   # task=mteb is no job of the paper graph, which alone estimates work
        out |= guarded(work, name, overrides)
    if isinstance(plan.stages, RetrievalStages) and cells:
        from harness.core.results import stable_hash

        out["corpus_cache_part"] = stable_hash(dict(plan.stages.cache_run))
        out["hyperparameters"] = plan.header.hyperparameters
        out["details"] = {k: v for k, v in plan.header.details.items() if k != "lineage"}   # the task's own
        if plan.trains:
            out["train_dir"] = scrub(plan.stages.train_dir)
        out |= guarded(retriever, plan)
    if isinstance(plan.stages, GlueStages):
        out |= guarded(glue_points, plan, cells)
    return json.loads(scrub(json.dumps(out, default=str)))


def guarded(part: Any, *args: Any) -> dict[str, Any]:
    """``part(*args)``, or the error it raised (a difference too)."""
    try:
        return part(*args)
    except Exception as exc:
        return {f"{part.__name__}_error": f"{type(exc).__name__}: {exc}"}


def scrub(value: Any) -> str:
    return str(value).replace(os.environ["RUN_IDS_TMP"], "{tmp}")


def work(name: str, overrides: list[str]) -> dict[str, Any]:
    """The paper graph's work estimate of this configuration as a run job and as a report job."""
    from dataclasses import asdict

    from harness.paper.graph import Job
    from harness.paper.progress import job_state

    task = next(o.split("=", 1)[1] for o in overrides if o.startswith("task="))
    return {"work": {mode: asdict(job_state(Job(name, "s", mode, task), overrides).work) for mode in ("run", "report")}}


#: a leaf's name where a settings object named it otherwise before (GLUE's TrainConfig.protocol is the node's key)
LEAF_NAMES = {"scoring_protocol": "protocol"}


def flat(obj: Any) -> dict[str, Any]:
    """A settings object's leaf values by field name (nested settings flattened, PLAID's kept whole), paths
    scrubbed: the same values give the same leaves however the settings are grouped into nodes."""
    import dataclasses

    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value) and f.name != "plaid":
            out |= flat(value)
        else:
            out[LEAF_NAMES.get(f.name, f.name)] = scrub(value) if isinstance(value, str) else (
                dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value)
    return out


def retriever(plan: Any) -> dict[str, Any]:
    """The corpus-cache identity the runner builds for the retriever (weights loaded; a run that trains gets a
    stand-in fingerprint for its trained weights) and the settings the retrieve stage gives the retriever."""
    from harness.core.results import stable_hash
    from harness.tasks.retrieval import compute

    model, block = compute.load_model(plan)
    trained = {"fingerprint": "trained-weights"} if plan.trains else None
    identity = compute.cache_identity(plan, block, trained)
    built = compute.retriever(plan, model, identity)
    engine = getattr(built, "inner", built)
    return {"corpus_cache_identity": stable_hash(identity, length=64), "retriever": type(engine).__name__,
            "retriever_settings": flat(engine.settings), "describe": built.describe()}


def glue_points(plan: Any, cells: list[Any]) -> dict[str, Any]:
    """Each grid point's record hyperparameters and trainer settings, and its task data's tokenisation key."""

    from harness import models
    from harness.tasks.glue import compute as glue_point

    s = plan.settings
    fp = models.model_identity(plan.model, *models.resolve_path(plan.model))["fingerprint"]
    data = glue_point.load_data(list(plan.stages.tasks), s)
    out = []
    for cell in cells:
        p, init = cell.payload
        point = {"run_id": cell.run_id, "hyperparameters": glue_point.hyperparameters(p, s, init)}
        point |= guarded(lambda p=p: {"train_config": flat(glue_point.train_config(p, s, plan.precision,
                                                                                   plan.device))})
        point |= guarded(lambda p=p: {"tokenization_key": glue_point.tokenization_key(fp, data[p.task], s)})
        out.append(point)
    return {"points": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", type=Path, default=HERE, help="the tree whose harness is imported")
    ap.add_argument("--diff", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args()
    if args.diff:
        return diff(*args.diff)
    sys.path.insert(0, str(args.repo.resolve()))
    os.chdir(args.repo)
    import logging

    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["RUN_IDS_TMP"] = tmp
        triplets = Path(tmp) / "triplets.tsv"
        triplets.write_text("query\tpositive\tnegative\n" + "".join(f"q{i}\tp{i}\tn{i}\n" for i in range(64)))
        fill = {"tiny": str(HERE / "tests" / "fixtures" / "tiny-modernbert"), "data": str(DATA), "tmp": tmp,
                "triplets": str(triplets), "kd": str(DATA / "msmarco-hardneg-sample" / "bge_example_msmarco.jsonl")}
        report = {name: describe(name, [o.format(**fill) for o in [*over, *common(over)]])
                  for name, over in CONFIGS.items()}
    json.dump(report, sys.stdout, indent=1, sort_keys=True, default=str)
    print()


def diff(before: Path, after: Path) -> None:
    """One line per configuration: same, or what differs."""
    a, b = json.loads(before.read_text()), json.loads(after.read_text())
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name), b.get(name)
        if x == y:
            print(f"same     {name}")
            continue
        keys = sorted(k for k in set(x or {}) | set(y or {}) if (x or {}).get(k) != (y or {}).get(k))
        print(f"DIFFERS  {name}: {', '.join(keys)}")


if __name__ == "__main__":
    main()

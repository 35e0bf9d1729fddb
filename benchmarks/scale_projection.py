"""benchmarks/scale.py's figures fitted and projected to the paper's 15 BEIR sets at ModernBERT-base's geometry.

The fit: each run's peak anonymous memory over the corpus sizes it ran at, least squares (fixed + bytes per
document), and the growth per document between the two largest sizes. The projection, per set (sizes: the BEIR
paper's Table 1 in conf/paper/cost.yaml; tokens = words x tokens_per_word):
- host RAM: the job model the paper graph asks SLURM for (:func:`job_host_gb`: conf/paper/cost.yaml
  ``host_memory``, whose constants these fits measure; a PLAID run adds its build's modelled peak,
  retrievers/plaid_memory.py);
- disk: DPR's embeddings at the encoder's width (bf16 on a GPU: 2 bytes x 768), ColBERT's token store (fp16 x 128)
  and, with PLAID, the index (a 4-byte code and nbits x 128 / 8 residual bytes per token, the IVF);
- GPU memory: the bf16 weights, the encoder's batches (``batch_tokens=auto`` takes at most half the free memory),
  exact search's corpus chunk and score block; PLAID on fast-plaid keeps its index on the GPU;
- GPU-hours: corpus and query tokens over the paper's Table 2 throughput (ModernBERT-base, short_variable, RTX 4090)
  x the cost file's H100 speed; a ColBERT build adds its k-means and compression (not modelled: said so).
"""

from __future__ import annotations

from typing import Any

from scale import fit

GIB = 2**30
#: ModernBERT-base: parameters, DPR embedding width, ColBERT head width, hidden size
PARAMS, DPR_DIM, COLBERT_DIM, HIDDEN = 149e6, 768, 128, 768
NODE_HOST_GB, NODE_GPU_GB = 128, 80


def fits(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per run: fixed bytes and bytes per document (least squares), and the growth per document between the two
    largest sizes."""
    out = {}
    for run in sorted({r["run"] for r in rows}):
        points = sorted((r["n_docs"], r["peak_anon"]) for r in rows if r["run"] == run and r["rc"] == 0)
        if not points:
            continue
        fixed, per_doc = fit(points)
        (n0, m0), (n1, m1) = points[-2] if len(points) > 1 else points[-1], points[-1]
        out[run] = {"fixed": fixed, "per_doc": per_doc, "growth_per_doc": (m1 - m0) / (n1 - n0) if n1 > n0 else 0.0,
                    "from": n0, "to": n1}
    return out


def beir_sets() -> dict[str, tuple[int, int, float]]:
    """(documents, queries, tokens per document) of the 15 sets (conf/paper/cost.yaml)."""
    from harness.core.work import cost_data

    c = cost_data()
    return {name: (int(d), int(q), float(w) * float(c["tokens_per_word"])) for name, (d, q, w) in c["beir"].items()}


def gpu_hours(tokens: float) -> float:
    from harness.core.work import cost_data

    c = cost_data()
    tokens_per_s = 147.3e3 * float(c["gpu_speed"]["h100"])   # Table 2, ModernBERT-base short_variable, x H100
    return tokens / tokens_per_s / 3600


def project(name: str, docs: int, queries: int, tok: float) -> dict[str, Any]:
    """Host GB, disk GB, GPU GB and GPU-hours of DPR, ColBERT exact and ColBERT PLAID on one set."""
    from harness.core.typed import from_conf
    from harness.tasks.retrieval.retrievers.plaid_memory import job_host_gb, plaid_memory
    from harness.tasks.retrieval.settings import MultiVectorSearch, PlaidSettings

    plaid = from_conf(PlaidSettings, "plaid/default")
    search = MultiVectorSearch(index="plaid", query_length=32, plaid=plaid, plaid_max_memory_gb=None)
    col_tok = min(tok + 2, 510)                                     # [D] prefix, document_length 510
    tokens, col_tokens = docs * (tok + 2), docs * col_tok
    store = col_tokens * COLBERT_DIM * 2 + 16 * docs
    index = col_tokens * (4 + COLBERT_DIM * plaid.nbits / 8 + 4)
    weights_gpu = PARAMS * 2
    encode_gpu = 0.5 * (NODE_GPU_GB * GIB - weights_gpu)            # batch_tokens=auto: at most half the free memory
    search_gpu = 50_000 * DPR_DIM * 4 + 1024 * 50_000 * 4          # corpus_chunk_size rows + one score block
    build = plaid_memory(docs, col_tokens, COLBERT_DIM, plaid, "fast")
    return {
        "set": name, "docs": docs, "queries": queries,
        "dpr": {"host_gb": job_host_gb(docs, queries, tok, None, DPR_DIM, 1), "disk_gb": docs * DPR_DIM * 2 / GIB,
                "gpu_gb": (weights_gpu + encode_gpu + search_gpu) / GIB,
                "gpu_h": gpu_hours(tokens + queries * 16)},
        "colbert_exact": {"host_gb": job_host_gb(docs, queries, col_tok, None, COLBERT_DIM, 1),
                          "disk_gb": store / GIB, "gpu_h": gpu_hours(col_tokens + queries * 32)},
        "colbert_plaid": {"host_gb": job_host_gb(docs, queries, col_tok, search, COLBERT_DIM, 1),
                          "disk_gb": (store + index) / GIB, "gpu_gb": (weights_gpu + index) / GIB,
                          "build_phase": build.phase, "gpu_h": gpu_hours(col_tokens + queries * 32)},
    }


def shards_needed(docs: int, queries: int, col_tok: float, gpu_gb: float) -> int:
    """The fewest shards K whose PLAID builds fit the node's host memory and whose index fits the GPU, each."""
    from harness.core.typed import from_conf
    from harness.tasks.retrieval.retrievers.plaid_memory import job_host_gb
    from harness.tasks.retrieval.settings import MultiVectorSearch, PlaidSettings

    search = MultiVectorSearch(index="plaid", query_length=32, plaid=from_conf(PlaidSettings, "plaid/default"),
                               plaid_max_memory_gb=None)
    for k in range(1, 65):
        if (job_host_gb(docs, queries, col_tok, search, COLBERT_DIM, k) <= NODE_HOST_GB
                and gpu_gb / k <= NODE_GPU_GB):
            return k
    return 64


def report(rows: list[dict[str, Any]]) -> None:
    print("\nPer-document costs (peak anonymous memory, tiny model):")
    print(f"{'run':15} {'fixed MiB':>10} {'B/doc (fit)':>12} {'B/doc (growth)':>15}  between")
    for run, f in fits(rows).items():
        print(f"{run:15} {f['fixed'] / 2**20:>10,.0f} {f['per_doc']:>12,.0f} {f['growth_per_doc']:>15,.0f}  "
              f"{f['from']:,} and {f['to']:,} documents")
    print(f"\nProjection to the 15 BEIR sets, ModernBERT-base (DPR 768-d bf16; ColBERT 128-d, PLAID nbits 2); a node "
          f"of {NODE_HOST_GB} GB host RAM and an {NODE_GPU_GB} GB GPU:")
    print(f"{'set':17} {'docs':>10} | {'DPR host':>8} {'disk':>6} {'GPU':>5} {'GPU-h':>6} | {'exact host':>10} "
          f"{'disk':>6} | {'PLAID host':>10} {'disk':>6} {'GPU':>6} {'phase':>8} {'K':>3} | GB, hours")
    for name, (docs, queries, tok) in beir_sets().items():
        p = project(name, docs, queries, tok)
        k = shards_needed(docs, queries, min(tok + 2, 510), p["colbert_plaid"]["gpu_gb"])
        d, e, c = p["dpr"], p["colbert_exact"], p["colbert_plaid"]
        print(f"{name:17} {docs:>10,} | {d['host_gb']:>8.1f} {d['disk_gb']:>6.1f} {d['gpu_gb']:>5.0f} {d['gpu_h']:>6.2f} | "
              f"{e['host_gb']:>10.1f} {e['disk_gb']:>6.1f} | {c['host_gb']:>10.1f} {c['disk_gb']:>6.1f} "
              f"{c['gpu_gb']:>6.1f} {c['build_phase']:>8} {k:>3}")

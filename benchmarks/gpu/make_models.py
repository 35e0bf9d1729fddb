"""Random-weight model folders on the GPU machine (speed does not depend on the weights): /tmp/mb with
ModernBERT-base's shape (ModernBertConfig's defaults) and a word-level tokenizer over its vocabulary, /tmp/minilm
with all-MiniLM-L6-v2's shape and tokenizer (copied by prepare.sh into .gpu/minilm)."""

import shutil
import sys

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import BertConfig, BertModel, ModernBertConfig, ModernBertModel, PreTrainedTokenizerFast

torch.manual_seed(0)
src = sys.argv[1]
shutil.copytree(src + "/minilm", "/tmp/minilm", dirs_exist_ok=True)
BertModel(BertConfig.from_pretrained("/tmp/minilm")).save_pretrained("/tmp/minilm")
cfg = ModernBertConfig()
print("ModernBertConfig", cfg.num_hidden_layers, cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size,
      cfg.local_attention, cfg.pad_token_id)
ModernBertModel(cfg).save_pretrained("/tmp/mb")
vocab = {f"t{i}": i for i in range(cfg.vocab_size)}
for name, i in {"[UNK]": 50280, "[CLS]": 50281, "[SEP]": 50282, "[PAD]": 50283, "[MASK]": 50284}.items():
    vocab.pop(f"t{i}")
    vocab[name] = i
tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
                        pad_token="[PAD]", mask_token="[MASK]").save_pretrained("/tmp/mb")
print("models ready")

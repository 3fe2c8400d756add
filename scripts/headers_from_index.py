"""Writes a published checkpoint's safetensors shards as their headers alone.

    python scripts/headers_from_index.py FOLDER

FOLDER holds the checkpoint's published `config.json` and
`model.safetensors.index.json`. transformers' own class for the config is
built on the meta device; each tensor of its state dict goes to the shard the
index names, with the config's dtype and the class's shape, and each shard
is written as `save_pretrained` (safetensors) writes its header: 8 bytes of
little-endian length, the JSON (`__metadata__` {"format": "pt"} first, then
the tensors sorted by name, in data order, compact), padded with spaces to a
multiple of 8. The data is not written: `kv fit --headers-only` reads such a
file as the whole one. It refuses a tensor the index names that the class
lacks, or one the class has that the index does not name, and an index
whose `total_size` differs from the tensors' bytes.

Needs torch and transformers (the vLLM venv of scripts/vllm/README.md).
"""

import json
import os
import struct
import sys

DTYPES = {"bfloat16": ("BF16", 2), "float16": ("F16", 2), "float32": ("F32", 4)}


def main(folder):
    import torch
    import transformers

    with open(os.path.join(folder, "config.json")) as f:
        raw = json.load(f)
    with open(os.path.join(folder, "model.safetensors.index.json")) as f:
        index = json.load(f)
    cfg = transformers.AutoConfig.for_model(**raw)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    state = model.state_dict()
    if raw.get("tie_word_embeddings"):
        state.pop("lm_head.weight", None)
    dtype, width = DTYPES[raw["torch_dtype"]]
    weight_map = index["weight_map"]
    missing = sorted(set(weight_map) - set(state))
    extra = sorted(set(state) - set(weight_map))
    if missing or extra:
        sys.exit(f"the index names {missing[:5]} the class lacks; the class has {extra[:5]} "
                 "the index does not name")
    total = 0
    for shard in sorted(set(weight_map.values())):
        header, at = {"__metadata__": {"format": "pt"}}, 0
        for name in sorted(k for k, v in weight_map.items() if v == shard):
            shape = list(state[name].shape)
            n = width
            for d in shape:
                n *= d
            header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + n]}
            at += n
        total += at
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        with open(os.path.join(folder, shard), "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text)
        print(f"{shard}: {len(header) - 1} tensors, {at} bytes of data, header {8 + len(text)} B")
    published = index.get("metadata", {}).get("total_size")
    if published != total:
        sys.exit(f"the tensors hold {total} bytes; the index's total_size is {published}")
    print(f"total {total} bytes = the index's total_size")


if __name__ == "__main__":
    main(sys.argv[1])

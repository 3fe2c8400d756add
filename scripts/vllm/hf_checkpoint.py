"""The safetensors header `save_pretrained` would write for a config:
transformers' own class for it built on the meta device, its state dict
(tied tensors once), in the config's dtype, written sparse. Used by
compare_weights_hf.py here and in scripts/sglang; needs only torch and
transformers.
"""

import json
import os
import struct

DTYPES = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}


def hf_checkpoint(config_path, folder):
    """The header save_pretrained would write for transformers' class."""
    import torch
    import transformers

    cfg = transformers.AutoConfig.from_pretrained(os.path.dirname(config_path)
                                                  if config_path.endswith("config.json")
                                                  else config_path)
    # A multimodal config's own class (AutoModelForCausalLM gives some of
    # them their text model alone, with other names).
    own = getattr(transformers, (getattr(cfg, "architectures", None) or [""])[0], None)
    with torch.device("meta"):
        if hasattr(cfg, "text_config") and own is not None:
            model = own(cfg)
        else:
            model = transformers.AutoModelForCausalLM.from_config(cfg)
    state = model.state_dict()
    seen, header, at = set(), {}, 0
    name = DTYPES.get(str(getattr(cfg, "torch_dtype", None) or getattr(cfg, "dtype", None)
                          ).replace("torch.", ""), "BF16")
    width = {"BF16": 2, "F16": 2, "F32": 4}[name]
    for key, t in state.items():
        # Tied tensors are one tensor; save_pretrained writes it once.
        if any(t is other for other in seen):
            continue
        seen.add(t)
        if getattr(cfg, "tie_word_embeddings", False) and key == "lm_head.weight":
            continue
        n = width
        for d in t.shape:
            n *= d
        header[key] = {"dtype": name, "shape": list(t.shape), "data_offsets": [at, at + n]}
        at += n
    raw = json.dumps(header).encode()
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + at)

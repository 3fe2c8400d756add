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


def legacy_renames(model_type):
    """transformers 5's prefix renames for a model type (conversion_mapping.py),
    reversed: (its name, the published checkpoint's name). The published
    multimodal checkpoints keep the older names (`language_model.model.`),
    which the vLLM classes without a mapper of their own load."""
    import re

    from transformers.conversion_mapping import get_checkpoint_conversion_mapping

    pairs = []
    for r in get_checkpoint_conversion_mapping(model_type) or []:
        for src, dst in zip(getattr(r, "source_patterns", []) or [],
                            getattr(r, "target_patterns", []) or []):
            old = re.sub(r"\(\?!.*\)$", "", src.lstrip("^"))
            if re.search(r"[\\()\[\]*+?|$]", old + dst):
                continue
            pairs.append((dst, old))
    return pairs


def hf_checkpoint(config_path, folder, legacy_names=False):
    """The header save_pretrained would write for transformers' class; with
    `legacy_names`, under the published checkpoints' older names."""
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
    if legacy_names:
        renames = legacy_renames(cfg.model_type)

        def legacy(key):
            for new, old in renames:
                if key.startswith(new):
                    return old + key[len(new):]
            return key

        state = {legacy(k): v for k, v in state.items()}
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

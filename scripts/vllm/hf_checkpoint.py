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

# Configs whose model type vLLM reads with its own config class, nesting the
# text model under `thinker_config`, where transformers' class for the type
# is flat (Qwen3-ASR: vllm/transformers_utils/configs/qwen3_asr.py against
# transformers' Qwen3ASRConfig). Such a config's checkpoint is transformers'
# flat class built on the thinker's text model, under the published
# checkpoints' names (the thinker's, the projector inside the audio tower):
# each model type's transformers config class (by name: importing vLLM
# registers its own class for the type in transformers' CONFIG_MAPPING) and
# (transformers' prefix, the checkpoint's).
THINKER_NAMES = {
    "qwen3_asr": ("Qwen3ASRConfig", [
        ("model.language_model.", "thinker.model."),
        ("model.audio_tower.", "thinker.audio_tower."),
        ("model.multi_modal_projector.linear_1.", "thinker.audio_tower.proj1."),
        ("model.multi_modal_projector.linear_2.", "thinker.audio_tower.proj2."),
        ("lm_head.", "thinker.lm_head."),
    ]),
}

# vLLM classes transformers has no class for, and the transformers class
# whose modules they build (vLLM's subclass of it).
OWN_CLASS = {"Qwen3ASRRealtimeGeneration": "Qwen3ASRForConditionalGeneration"}


def flat_thinker(raw):
    """A `thinker_config` nesting of THINKER_NAMES as transformers' flat config
    dict: the thinker's text model (as transformers' text class, `qwen3`), its
    head tied as vLLM ties it (the top level's `tie_word_embeddings`, else the
    text config's, else vLLM's default, false); the audio tower transformers'
    default (vLLM does not build it under --language-model-only)."""
    thinker = raw["thinker_config"]
    text = dict(thinker.get("text_config") or {})
    text["model_type"] = "qwen3"
    tie = raw.get("tie_word_embeddings", text.get("tie_word_embeddings", False))
    text["tie_word_embeddings"] = tie
    # vLLM's class writes None where transformers' wants a value or its default.
    flat = {k: v for k, v in raw.items() if k != "thinker_config" and v is not None}
    flat.update(text_config=text, tie_word_embeddings=tie)
    return flat


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

    with open(config_path if config_path.endswith("config.json")
              else os.path.join(config_path, "config.json")) as f:
        raw = json.load(f)
    thinker_names = []
    if raw.get("model_type") in THINKER_NAMES:
        config_class, names = THINKER_NAMES[raw["model_type"]]
        config_class = getattr(transformers, config_class)
        if isinstance(raw.get("thinker_config"), dict):
            thinker_names = names
            cfg = config_class.from_dict(flat_thinker(raw))
        else:
            cfg = config_class.from_dict(raw)
    else:
        cfg = transformers.AutoConfig.from_pretrained(os.path.dirname(config_path)
                                                      if config_path.endswith("config.json")
                                                      else config_path)
    # A multimodal config's own class (AutoModelForCausalLM gives some of
    # them their text model alone, with other names); Qwen2.5-Omni's too,
    # whose text model is under `thinker_config`.
    arch = (getattr(cfg, "architectures", None) or [""])[0]
    own = getattr(transformers, OWN_CLASS.get(arch, arch), None)
    with torch.device("meta"):
        if (hasattr(cfg, "text_config") or hasattr(cfg, "thinker_config")) and own is not None:
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
        for new, old in thinker_names:
            if key.startswith(new):
                key = old + key[len(new):]
                break
        n = width
        for d in t.shape:
            n *= d
        header[key] = {"dtype": name, "shape": list(t.shape), "data_offsets": [at, at + n]}
        at += n
    raw = json.dumps(header).encode()
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + at)

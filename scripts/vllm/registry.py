"""vLLM 0.33's registry as the test universe: every text-generation and
multimodal architecture it registers, run through `compare.py` (vLLM's own
objects against `kv estimate`), summed up per architecture into
docs/coverage/vllm.tsv (format: docs/coverage/README.md), from which
`kv-engines/tests/coverage_table.rs` generates docs/engines.md.

Not part of CI. Build kv, then, in the vLLM 0.33 virtual environment:

    cargo build --release -p kv-cli
    /work/.venv-vllm/bin/python scripts/vllm/registry.py \
        --kv target/release/kv --out /tmp/kv-vllm-registry [--jobs 2]
    KV_UPDATE_DOCS=1 cargo test -p kv-engines --test coverage_table

The config for each architecture, in this order (the detail names it):
1. a published config kv ships (scripts/vllm/configs, scripts/sglang/configs,
   examples/configs) whose `architectures` names it;
2. the defaults of transformers' config class for it (transformers' auto
   mappings give the model_type of each class name);
3. the defaults of vLLM's own config class for the registry module's name
   (`vllm.transformers_utils.config._CONFIG_REGISTRY`), else for the longest
   key of vLLM's, then transformers', that the class name starts with;
4. none: `cannot-build`, the config class being remote code on the Hub.

Each architecture's config runs `compare.py --quick` (TP 1/2, PP 1/2, auto
and fp8: six layouts). An architecture is `exact` when every quantity of
every layout agrees and vLLM starts on at least one; `refused-alike` when
vLLM refuses every layout and kv refuses each too; `cannot-build` where
vLLM's model class fails on the config (not a refusal: a key its class needs
and the defaults lack, an image processor); else `not-covered`, with the
count of quantities that agree and the first that does not.

Options: --only ARCH... (run these; the others keep OUT's last results),
--jobs N, --summarise (run nothing: rewrite the .tsv from OUT).
"""

import argparse
import csv
import datetime
import glob
import json
import os
import subprocess
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
TSV = os.path.join(ROOT, "docs", "coverage", "vllm.tsv")


def registry():
    """(architecture, kind, module) for vLLM's text and multimodal models."""
    from vllm.model_executor.models import registry as r

    out = []
    for kind, table in (("text", r._TEXT_GENERATION_MODELS), ("multimodal", r._MULTIMODAL_MODELS)):
        for arch, (module, _cls) in table.items():
            out.append((arch, kind, module))
    return out


def shipped_configs():
    """architecture -> (source, config) from the configs kv ships."""
    found = {}
    patterns = [
        os.path.join(HERE, "configs", "*.json"),
        os.path.join(ROOT, "scripts", "sglang", "configs", "*.json"),
        os.path.join(ROOT, "examples", "configs", "*", "config.json"),
    ]
    for pattern in patterns:
        for path in sorted(glob.glob(pattern)):
            try:
                config = json.load(open(path))
            except (OSError, ValueError):
                continue
            for arch in config.get("architectures") or []:
                found.setdefault(arch, (os.path.relpath(path, ROOT), config))
    return found


def transformers_model_types():
    """class name -> model_type, from every auto mapping of transformers."""
    from transformers.models.auto import modeling_auto

    out = {}
    for name in dir(modeling_auto):
        if not (name.startswith("MODEL") and name.endswith("_MAPPING_NAMES")):
            continue
        for model_type, classes in getattr(modeling_auto, name).items():
            for cls in classes if isinstance(classes, (list, tuple)) else [classes]:
                out.setdefault(cls, model_type)
    return out


def step3_text_as_published(config):
    """Step-3's published config names its text model's class and writes its
    MoE layers as a comma string (`Step3TextConfig` keeps the string; vLLM's
    step3_text.py splits it); vLLM's Step3VLConfig defaults leave the class
    None (vLLM: "No model architectures are specified") and the list a list."""
    text = config.get("text_config") or {}
    text["architectures"] = ["Step3TextForCausalLM"]
    layers = text.get("moe_layers_enum")
    if isinstance(layers, list):
        text["moe_layers_enum"] = ",".join(str(i) for i in layers)
    text.setdefault("torch_dtype", config.get("torch_dtype"))
    return "; `text_config` as the published step3 writes it (its class, MoE layers as a string)"


def step5_sparse_as_published(config):
    """Step-5-Preview's `sparse_config` section (vLLM's Step5 refuses a config
    without one; `Step5Config` has no such field, so its defaults lack it) and
    the attention geometry it needs, as the published config writes them."""
    config["sparse_config"] = {
        "enabled": True, "proxy_dim": 256, "sparse_indexer_rope_dim": 32,
        "sparse_indexer_use_rope": True, "sparse_indexer_num_heads": 16,
        "sparse_indexer_num_k_heads": 1, "sparse_indexer_q_norm_type": "rmsnorm",
        "sparse_indexer_k_norm_type": "layernorm", "sparse_indexer_csa_z_norm_type": "none",
        "sparse_indexer_softmax_variant": "ssmax", "sparse_indexer_ssmax_s_granularity": "q_head",
        "num_provider_groups": 4, "topk": 512, "region_block_size": 8,
        "compression_method": "csa_block_compress", "attention_impl": "sparse_gqa",
        "apply_to_layer_types": ["full_attention"],
    }
    # The attention geometry Step5's DSA checks (`_validate_step5_dsa_parallel_geometry`)
    # and the MoE keys its class requires, as Step-5-Preview writes them.
    config.update(num_attention_groups=4, num_attention_heads=64, head_dim=192,
                  use_head_wise_attn_gate=True, use_moe=True, use_moe_router_bias=True,
                  need_fp32_gate=True)
    return "; Step-5-Preview's `sparse_config` section, attention geometry and MoE keys"


def kimi_k3_text_as_published(config):
    """Kimi K3's text model as moonshotai/Kimi-K3's config.json writes it (from
    public copies of it): 93 layers, KDA in all but the 24 `full_attn_layers`
    (MLA, NoPE-only); vLLM's KimiK3Config defaults leave `linear_attn_config`
    and every MLA width None (its class asserts them). The published
    `max_position_embeddings` was not found: the default is kept."""
    full = [4 * i for i in range(1, 24)] + [93]
    config["text_config"].update(
        hidden_size=7168, intermediate_size=33792, num_hidden_layers=93,
        num_attention_heads=96, num_key_value_heads=96, hidden_act="situ", rms_norm_eps=1e-05,
        q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
        v_head_dim=128, mla_use_nope=True, mla_use_output_gate=True, num_experts=896,
        num_experts_per_token=16, num_shared_experts=2, moe_intermediate_size=3072,
        first_k_dense_replace=1, num_expert_group=8, attn_res_block_size=12,
        latent_moe_use_norm=True, activation_situ_beta=4.0, activation_situ_linear_beta=25.0,
        routed_expert_hidden_size=3584, dtype="bfloat16",
        linear_attn_config={
            "full_attn_layers": full,
            "kda_layers": [i for i in range(1, 94) if i not in full],
            "head_dim": 128, "num_heads": 96, "short_conv_kernel_size": 4,
            "gate_lower_bound": -5.0, "use_full_rank_gate": True,
        },
    )
    return "; `text_config` as Kimi K3's published config writes it (KDA and MLA layers)"


def bailing_kda_as_published(config):
    """Ling-3.0's KDA keys (inclusionAI/Ling-3.0-flash writes `no_kda_lora`
    true, which vLLM's BailingMoeV3 requires and llama.cpp's converter
    checks, with a safe gate at -5.0, head-wise gated attention);
    transformers' defaults leave `no_kda_lora` false."""
    config["text_config"].update(
        no_kda_lora=True, kda_safe_gate=True, kda_lower_bound=-5.0,
        gated_attention_proj_granularity_type="head_wise",
    )
    return "; `text_config`'s KDA keys as Ling-3.0 writes them (`no_kda_lora` true)"


def inkling_local_layers_as_published(config):
    """Inkling's local layers as its published (OG-format) config writes them:
    `text_config.local_layer_ids` (thinkingmachines/Inkling; the card of its
    4-layer slice says the slice changed only `num_hidden_layers` and
    `local_layer_ids`). vLLM's InklingModelConfig reads no `layer_types`, so
    the transformers defaults (`local_layer_ids` null) make every layer
    global; the ids are those the defaults' `layer_types` mark sliding."""
    text = config["text_config"]
    text["local_layer_ids"] = [
        i for i, kind in enumerate(text.get("layer_types") or []) if kind == "hybrid_sliding"
    ]
    return "; `text_config.local_layer_ids` as Inkling's published config writes them"


# Where a config class's defaults miss what every published checkpoint of the
# family writes, the key as published: architecture -> patch (returns what it says).
AS_PUBLISHED = {
    "BailingMoeV3VLForConditionalGeneration": bailing_kda_as_published,
    "InklingForConditionalGeneration": inkling_local_layers_as_published,
    "KimiK3ForConditionalGeneration": kimi_k3_text_as_published,
    "Step3VLForConditionalGeneration": step3_text_as_published,
    "Step5ForCausalLM": step5_sparse_as_published,
}


def default_config(arch, module, model_types):
    """(source, config dict) from a config class's defaults, or (reason, None)."""
    from transformers import CONFIG_MAPPING

    candidates = []
    if arch in model_types:
        candidates.append(("transformers", model_types[arch]))
    candidates.append(("transformers", module))
    try:
        from vllm.transformers_utils.config import _CONFIG_REGISTRY as vllm_configs
    except ImportError:
        vllm_configs = {}
    candidates.append(("vllm", module))
    # Last, the longest config key the class name starts with (DeepseekV41ForCausalLM:
    # vLLM's `deepseek_v41`), vLLM's keys before transformers'.
    squashed = arch.lower().replace("_", "")
    for origin, keys in (("vllm", vllm_configs), ("transformers", CONFIG_MAPPING.keys())):
        prefixes = [k for k in keys if squashed.startswith(k.lower().replace("_", "").replace("-", ""))]
        if prefixes:
            candidates.append((origin, max(prefixes, key=len)))
    for origin, model_type in candidates:
        try:
            if origin == "transformers":
                cls = CONFIG_MAPPING[model_type]
            else:
                cls = vllm_configs[model_type]
        except KeyError:
            continue
        try:
            config = cls().to_dict()
            # A multimodal class builds its vision tower from `vision_config`,
            # which some config classes leave None: its own class's defaults.
            said = ""
            if "vision_config" in getattr(cls, "sub_configs", {}) and config.get("vision_config") is None:
                config = cls(vision_config={}).to_dict()
                said = ", `vision_config` its own class's"
        except Exception as e:  # a class whose defaults do not build
            return f"{origin}'s {cls.__name__}() fails: {type(e).__name__}: {e}"[:200], None
        config["architectures"] = [arch]
        if not config.get("torch_dtype") and not config.get("dtype"):
            config["torch_dtype"] = "bfloat16"
        if arch in AS_PUBLISHED:
            said += AS_PUBLISHED[arch](config)
        return f"{origin}'s {cls.__name__} defaults{said}", config
    return (
        "no config class for it in transformers 5.20 or vLLM 0.33 (its config is remote "
        "code on the Hub)",
        None,
    )


def clean(text):
    return " ".join(str(text).replace("\t", " ").split())[:240]


def fails_as_a_program(why):
    """Whether vLLM's refusal is a program failing on the config (a missing
    attribute, a pydantic validation of a value the config lacks) rather
    than a check of its rules (ValueError, NotImplementedError, assert)."""
    return any(e in why for e in ("AttributeError", "ValidationError", "KeyError", "TypeError"))


def classify(rows):
    """(status, detail) for one architecture's compare rows."""
    layouts = defaultdict(dict)
    for layout, quantity, v, k in rows:
        layouts[layout][quantity] = (v, k)
    errors = [(lay, q["harness_error"][0]) for lay, q in layouts.items() if "harness_error" in q]
    ran = {lay: q for lay, q in layouts.items() if "harness_error" not in q}
    if not ran:
        error = clean(errors[0][1]) if errors else "no result"
        if any(marker in error for marker in ("meta", "CUDA", "WorkspaceManager")):
            return "not-covered", f"harness: {error}"
        return "cannot-build", f"vLLM's model class fails on this config: {error}"
    started = [lay for lay, q in ran.items() if str(q.get("refused", ("", ""))[0]) == "False"]
    # The model class failing as a program on every layout vLLM's checks
    # let through (the others refused for the layout alone: a pipeline the
    # class lacks): the config does not build vLLM's class at all.
    if errors and not started and all(fails_as_a_program(str(e)) for _, e in errors):
        return "cannot-build", f"vLLM's model class fails on this config: {clean(errors[0][1])[:200]}"
    # vLLM failing where only this machine or a config alone is at fault (a
    # package it lacks, a tokenizer the class asks for) builds nothing.
    base = next(iter(ran.values()))
    why = str(base.get("refused.why", ("", ""))[0])
    if not started and any(s in why for s in ("ImportError", "tokenizer", "skip_tokenizer_init")):
        return "cannot-build", f"vLLM's model class needs what a config alone does not give: {clean(why)[:200]}"
    # vLLM failing on every layout as a program fails while kv sizes it: the
    # config (a class's defaults) does not build vLLM's class at all.
    whys = [str(q.get("refused.why", ("", ""))[0]) for q in ran.values()]
    if not started and all(fails_as_a_program(w) for w in whys):
        return "cannot-build", f"vLLM's model class fails on this config: {clean(why)[:200]}"
    agree = total = 0
    first = None
    for lay, q in ran.items():
        for quantity, (v, k) in q.items():
            if quantity == "refused.why":
                continue
            total += 1
            if str(v) == str(k):
                agree += 1
            elif first is None:
                if quantity == "refused":  # the words of whichever refused
                    v, k = q.get("refused.why", (v, k))
                    v, k = v or "starts", k or "starts"
                first = f"{quantity} at {lay}: vLLM {clean(v)[:110]} / kv {clean(k)[:110]}"
    where = f"{len(ran)} layouts" + (f" ({len(errors)} more failed to build)" if errors else "")
    if agree == total and started:
        return "exact", f"{agree}/{total} quantities over {where}"
    if agree == total:
        why, kv_why = (clean(str(w)) for w in base.get("refused.why", ("", "")))
        # Alike only where kv refuses by vLLM's rule, in its words (kv's
        # refusals of vLLM's rules say "vLLM 0.33 would not start").
        if "would not start" in kv_why:
            return "refused-alike", f"both refuse every layout; vLLM: {why[:160]}"
        if fails_as_a_program(why):
            return "cannot-build", f"vLLM's model class fails on this config: {why[:200]}"
        return "not-covered", (f"both refuse every layout, for different reasons; vLLM: "
                               f"{why[:110]} / kv: {kv_why[:110]}")
    return "not-covered", f"{agree}/{total} quantities agree over {where}; first: {first}"


def earlier_rows():
    """The rows the committed TSV holds: architecture -> (status, checked, detail)."""
    rows = {}
    if os.path.exists(TSV):
        for line in open(TSV):
            cells = line.rstrip("\n").split("\t")
            if line.startswith("#") or len(cells) != 4 or cells[0] == "architecture":
                continue
            rows[cells[0]] = tuple(cells[1:])
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kv", default="target/release/kv")
    ap.add_argument("--out", default="/tmp/kv-vllm-registry")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--summarise", action="store_true")
    a = ap.parse_args()
    configs_dir = os.path.join(a.out, "configs")
    os.makedirs(configs_dir, exist_ok=True)
    archs = registry()
    shipped = shipped_configs()
    model_types = transformers_model_types()
    sources = {}
    for arch, kind, module in archs:
        if arch in shipped:
            source, config = shipped[arch]
            sources[arch] = (f"published config {source}", True)
        else:
            source, config = default_config(arch, module, model_types)
            sources[arch] = (source, config is not None)
        if config is not None:
            with open(os.path.join(configs_dir, arch + ".json"), "w") as f:
                json.dump(config, f, indent=1, default=str)
    if not a.summarise:
        runnable = [arch for arch, _, _ in archs if sources[arch][1]]
        if a.only:
            runnable = [arch for arch in runnable if arch in a.only]
        cmd = [sys.executable, os.path.join(HERE, "compare.py"), "--kv", a.kv,
               "--configs", configs_dir, "--out", os.path.join(a.out, "compare"),
               "--quick", "--jobs", str(a.jobs), "--timeout", str(a.timeout), "--only", *runnable]
        subprocess.run(cmd, check=False)
    parts = os.path.join(a.out, "compare", "parts")
    today = datetime.date.today().isoformat()
    lines = [
        "# vLLM 0.33.0: vllm/model_executor/models/registry.py, text generation and multimodal",
        f"# written by scripts/vllm/registry.py (compare.py --quick: TP 1/2, PP 1/2, auto and fp8)",
        "architecture\tstatus\tchecked\tdetail",
    ]
    counts = defaultdict(int)
    earlier = earlier_rows()
    for arch, kind, module in sorted(archs):
        source, runnable = sources[arch]
        part = os.path.join(parts, arch + ".json")
        if not runnable:
            status, detail, checked = "cannot-build", source, today
        elif not os.path.exists(part) and arch in earlier:
            # Not run this time (--only, or a fresh OUT): the last run's row stays.
            status, checked, detail = earlier[arch]
        elif not os.path.exists(part):
            status, detail, checked = "not-covered", f"not run ({source})", "-"
        else:
            status, detail = classify(json.load(open(part)))
            checked = datetime.date.fromtimestamp(os.path.getmtime(part)).isoformat()
            detail = f"{detail}; config: {source}"
        counts[status] += 1
        lines.append(f"{arch}\t{status}\t{checked}\t{clean(detail)}")
    os.makedirs(os.path.dirname(TSV), exist_ok=True)
    with open(TSV, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(archs)} architectures: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print(f"wrote {TSV}")


if __name__ == "__main__":
    main()

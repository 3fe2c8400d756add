"""vLLM 0.33's own KV cache planning on hand-built specs (CPU, no model):
the group padding, the pool's bytes per request, the start-up line and the
refusal, for the figures kv-engines/tests/estimate_pool.rs works out by hand.

Run with a vLLM 0.33 virtual environment (not part of CI):
    /work/.venv-vllm/bin/python scripts/vllm/pool_check.py
"""

import logging
from types import SimpleNamespace

import torch

from vllm.v1.core import kv_cache_planning as planning
from vllm.v1.core.kv_cache_config_builder import get_kv_cache_config_builder
from vllm.v1.core.kv_cache_utils import (
    generate_scheduler_kv_cache_config,
    get_kv_cache_capacity,
)
from vllm.v1.kv_cache_interface import FullAttentionSpec, SlidingWindowSpec
from vllm.v1.kv_cache_layout import KVCacheLayout

logging.disable(logging.WARNING)


def config(max_model_len, batches, tp=1):
    cache = SimpleNamespace(
        num_gpu_blocks_override=None,
        get_resolved_kv_cache_layout=lambda: KVCacheLayout.LBNHC,
        prefix_cache_retention_interval=None,
        mamba_cache_mode="align",
    )
    return SimpleNamespace(
        scheduler_config=SimpleNamespace(
            disable_hybrid_kv_cache_manager=False, max_num_batched_tokens=2048
        ),
        model_config=SimpleNamespace(
            max_model_len=max_model_len,
            original_max_model_len=max_model_len,
            supports_kv_cache_grouping=False,
        ),
        cache_config=cache,
        attention_config=SimpleNamespace(hisparse_config=None),
        parallel_config=SimpleNamespace(
            tensor_parallel_size=tp, decode_context_parallel_size=1
        ),
        device_config=SimpleNamespace(device_type="cuda"),
        max_in_flight_tokens=batches * 2048,
        num_prefill_lookahead_tokens=0,
        speculative_config=None,
    )


def gemma3(layers, kv_heads, head, window, pp):
    """Per-stage specs: layer i is full where (i + 1) % 6 == 0."""
    kinds = ["full" if (i + 1) % 6 == 0 else "sliding" for i in range(layers)]
    return listed(kinds, kv_heads, head, window, pp)


def listed(kinds, kv_heads, head, window, pp):
    """Per-stage specs of layers of these kinds, cut as get_pp_indices cuts."""
    layers = len(kinds)
    per = layers // pp
    parts = [per] * pp
    for i in range(2, layers % pp + 2):
        parts[-i] += 1
    specs, start = [], 0
    for n in parts:
        stage = {}
        for i in range(start, start + n):
            common = dict(
                block_size=16, num_kv_heads=kv_heads, head_size=head, dtype=torch.bfloat16
            )
            name = f"model.layers.{i}.self_attn.attn"
            if kinds[i] == "full":
                stage[name] = FullAttentionSpec(**common)
            else:
                stage[name] = SlidingWindowSpec(sliding_window=window, **common)
        specs.append(stage)
        start += n
    return specs


def run(label, specs, max_model_len, batches, memory):
    vc = config(max_model_len, batches)
    groups = planning.get_global_kv_cache_groups(vc, specs)
    builder = get_kv_cache_config_builder(vc)
    for stage, spec in enumerate(specs):
        projected = planning._project_kv_cache_groups_to_worker(groups, spec)
        per_block = planning._pool_bytes_per_block_from_builder(builder, vc, projected)
        needed = planning._max_memory_usage_bytes_from_groups(builder, vc, projected)
        print(f"{label} stage {stage}: {len(groups)} groups, {per_block} B per block, "
              f"{needed} B per request")
    try:
        configs = planning.get_kv_cache_configs(vc, specs, [memory] * len(specs), groups)
        sched = generate_scheduler_kv_cache_config(configs)
        tokens, concurrency = get_kv_cache_capacity(vc, sched)
        print(f"  {memory} B: num_blocks {sched.num_blocks}; GPU KV cache size: "
              f"{tokens:,} tokens, Maximum concurrency for {max_model_len:,} tokens "
              f"per request: {concurrency:.2f}x")
    except ValueError as e:
        print(f"  {memory} B: ValueError: {e}")


gemma_3_1b = lambda pp: gemma3(26, 1, 256, 512, pp)
gemma_3_27b = lambda pp: gemma3(62, 16, 128, 1024, pp)
run("gemma-3-1b", gemma_3_1b(1), 8192, 2, 300 << 20)
run("gemma-3-1b", gemma_3_1b(1), 8192, 2, 65_536 * 2247)
run("gemma-3-1b", gemma_3_1b(1), 8192, 2, 100 << 20)
run("gemma-3-1b", gemma_3_1b(1), 8192, 2, 65_536 * 2247 - 1)
run("gemma-3-1b", gemma_3_1b(1), 8192, 2, 65_537)
run("gemma-3-1b", gemma_3_1b(1), 8192, 2, 65_536)
run("gemma-3-1b pp2", gemma_3_1b(2), 8192, 3, 300 << 20)
run("gemma-3-27b", gemma_3_27b(1), 8192, 2, 4 << 30)
run("gemma-3-27b", gemma_3_27b(1), 8192, 2, 3_000_000_000)
run("gemma-3-27b pp3", gemma_3_27b(3), 8192, 4, 10 << 30)
run("gemma-3-27b pp3", gemma_3_27b(3), 8192, 4, 3 << 29)
run("2 full, 2 sliding pp2", listed(["full", "full", "sliding", "sliding"], 2, 64, 4, 2), 64, 3, 1 << 20)

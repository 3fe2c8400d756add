"""vLLM 0.33's own page sizes for the per-token-head KV formats, on CPU.

Run with a vLLM 0.33 virtual environment (not part of CI):

    python scripts/vllm/per_token_head_pages.py

Builds Llama-3-8B's FullAttentionSpec (8 KV heads of 128, block 16) for each
format, lets the Triton backend pack its scales (`customize_spec`), and prints
the bytes per token over 32 layers: 67,584 / 67,584 / 34,816 for int8 / fp8 /
int4_per_token_head, 65,536 for fp8 and fp8_e5m2 (kv-core's served.rs tests).
"""

from vllm.utils.torch_utils import STR_DTYPE_TO_TORCH_DTYPE
from vllm.v1.attention.backends.triton_attn import TritonAttentionBackend
from vllm.v1.kv_cache_interface import FullAttentionSpec, get_kv_quant_mode

LAYERS, KV_HEADS, HEAD_SIZE, BLOCK = 32, 8, 128, 16

for name in [
    "int8_per_token_head",
    "fp8_per_token_head",
    "int4_per_token_head",
    "fp8",
    "fp8_e5m2",
]:
    spec = FullAttentionSpec(
        block_size=BLOCK,
        num_kv_heads=KV_HEADS,
        head_size=HEAD_SIZE,
        dtype=STR_DTYPE_TO_TORCH_DTYPE[name],
        kv_quant_mode=get_kv_quant_mode(name),
    )
    spec = TritonAttentionBackend.customize_spec(spec)
    print(f"{name}: {spec.page_size_bytes // BLOCK * LAYERS} B per token")

"""One tensor-parallel rank's hybrid block, state page and padding, from vLLM
0.33's own shape calculators and spec classes, for the configs the tests in
kv-engines/tests/estimate_published.rs work out by hand.

Not part of CI. Run with the vLLM virtual environment:

    /work/.venv-vllm/bin/python scripts/vllm/hybrid_blocks.py

The block follows Platform._align_hybrid_block_size: kernel alignment 16 (64
in align mode for Gated DeltaNet's FlashInfer checkpoints), the attention page
of one rank (FullAttentionSpec at max(1, kv_heads // tp) heads), the state page
of one rank (MambaSpec over MambaStateShapeCalculator's shapes at tp).
"""

from math import lcm, prod

import torch
from vllm.model_executor.layers.mamba.mamba_utils import (
    MambaStateShapeCalculator as Shapes,
)
from vllm.utils.math_utils import cdiv
from vllm.v1.kv_cache_interface import FullAttentionSpec, MambaSpec

BF16 = torch.bfloat16


def attention_page(kv_heads, tp, head_size):
    return FullAttentionSpec(
        block_size=1,
        num_kv_heads=max(1, kv_heads // tp),
        head_size=head_size,
        dtype=BF16,
    ).page_size_bytes


def state_page(shapes):
    return MambaSpec(
        shapes=tuple(shapes), dtypes=(BF16,) * len(shapes), block_size=1
    ).page_size_bytes


def block(attention, state, alignment=16):
    size = alignment * cdiv(state, alignment * attention)
    return 16 * cdiv(size, 16)


CASES = {
    "qwen3-next tp 1": (
        attention_page(2, 1, 256),
        Shapes.gated_delta_net_state_shape(1, 16, 32, 128, 128, 4),
        lcm(16, 64),
    ),
    "qwen3-next tp 8": (
        attention_page(2, 8, 256),
        Shapes.gated_delta_net_state_shape(8, 16, 32, 128, 128, 4),
        lcm(16, 64),
    ),
}
for tp in (1, 2, 8):
    CASES[f"granite-4.0-h-small tp {tp}"] = (
        attention_page(8, tp, 128),
        Shapes.mamba2_state_shape(tp, 8192, 1, 128, 64, 128, 4),
        16,
    )
for tp in (1, 2):
    CASES[f"falcon-h1-7b tp {tp}"] = (
        attention_page(2, tp, 128),
        Shapes.mamba2_state_shape(tp, 3072, 1, 24, 128, 256, 4),
        16,
    )
    CASES[f"lfm2-1.2b tp {tp}"] = (
        attention_page(8, tp, 64),
        Shapes.short_conv_state_shape(tp, 2048, 3),
        16,
    )
    CASES[f"zamba2-2.7b tp {tp}"] = (
        attention_page(32, tp, 160),
        Shapes.mamba2_state_shape(tp, 5120, 1, 80, 64, 64, 4),
        16,
    )

for name, (attention, shapes, alignment) in CASES.items():
    state = state_page(shapes)
    size = block(attention, state, alignment)
    page = size * attention
    print(
        f"{name}: shapes {[tuple(s) for s in shapes]}, state {state} B "
        f"(check {sum(prod(s) * 2 for s in shapes)}), attention {attention} B/token, "
        f"block {size}, page {page} B, padding {page - state} B"
    )

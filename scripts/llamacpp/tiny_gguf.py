"""Write a tiny-weight GGUF with real cache geometry, for llama.cpp to load.

Weights are zeros and as small as the loader allows (n_embd 64 for attention
models); what sizes the caches (block_count, head_count_kv, key/value
length, sliding_window and its pattern, ssm.*) is as given.

    tiny_gguf.py OUT.gguf                       # llama: 32 layers, 8 KV heads of 128
    tiny_gguf.py OUT.gguf --arch llama --kv-heads 8,8,4,4,2,2,1,1 --layers 8
    tiny_gguf.py OUT.gguf --arch gemma3 --layers 62 --kv-heads 16 --swa 1024 --swa-pattern 6
    tiny_gguf.py OUT.gguf --arch mamba --layers 24 --n-embd 256 --d-state 16 --d-conv 4
    tiny_gguf.py OUT.gguf --arch cohere2 --layers 8 --heads 8 --n-embd 1024 --swa 4096
    tiny_gguf.py OUT.gguf --arch mamba2 --layers 8 --n-embd 256 --d-state 128 --groups 1

cohere2, olmo2 and phi3 project to n_embd, so give --n-embd = --heads x
--head-dim. A per-layer --kv-heads (comma list) is written as an array; llama.cpp's llama
loader shapes the K/V weights from layer 0, so the weights use layer 0's
count and only the cache follows the array. --swa-pattern N is written as a
number, a comma list of 0/1 as a bool array.
"""
import argparse
import numpy as np
import gguf

VOCAB = 32
FF = 32


def _z(*shape):
    return np.zeros(shape, dtype=np.float32)


def _header(w, arch, a):
    w.add_block_count(a.layers)
    w.add_context_length(a.ctx)
    w.add_embedding_length(a.n_embd)
    w.add_feed_forward_length(FF)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(0)
    w.add_tokenizer_model("llama")
    toks = [f"t{i}" for i in range(VOCAB)]
    w.add_token_list(toks)
    w.add_token_scores([0.0] * VOCAB)
    w.add_token_types([1] * VOCAB)
    w.add_tensor("token_embd.weight", _z(VOCAB, a.n_embd))
    w.add_tensor("output_norm.weight", _z(a.n_embd))
    if arch not in ("gemma2", "cohere2"):  # these tie output to token_embd
        w.add_tensor("output.weight", _z(VOCAB, a.n_embd))


def attention(path, a):
    arch = a.arch
    w = gguf.GGUFWriter(path, arch)
    _header(w, arch, a)
    kv = [int(x) for x in a.kv_heads.split(",")]
    w.add_head_count(a.heads)
    w.add_head_count_kv(kv if len(kv) > 1 else kv[0])
    w.add_key_length(a.head_dim)
    w.add_value_length(a.value_dim or a.head_dim)
    w.add_rope_dimension_count(a.head_dim)
    if a.swa is not None:
        w.add_sliding_window(a.swa)
    if a.swa_pattern is not None:
        key = f"{arch}.attention.sliding_window_pattern"
        if "," in a.swa_pattern:
            w.add_array(key, [bool(int(x)) for x in a.swa_pattern.split(",")])
        else:
            w.add_uint32(key, int(a.swa_pattern))
    n, hd, vd, hq = a.n_embd, a.head_dim, a.value_dim or a.head_dim, a.heads
    if arch == "cohere2":
        w.add_layer_norm_eps(1e-5)
        w.add_logit_scale(0.125)
    for i in range(a.layers):
        b = f"blk.{i}."
        if arch != "olmo2":
            w.add_tensor(b + "attn_norm.weight", _z(n))
        w.add_tensor(b + "attn_q.weight", _z(hq * hd, n))
        w.add_tensor(b + "attn_k.weight", _z(kv[0] * hd, n))
        w.add_tensor(b + "attn_v.weight", _z(kv[0] * vd, n))
        w.add_tensor(b + "attn_output.weight", _z(n, hq * vd))
        if arch not in ("cohere2", "olmo2"):
            w.add_tensor(b + "ffn_norm.weight", _z(n))
        if arch == "phi3":  # gate and up fused
            w.add_tensor(b + "ffn_up.weight", _z(2 * FF, n))
        else:
            w.add_tensor(b + "ffn_gate.weight", _z(FF, n))
            w.add_tensor(b + "ffn_up.weight", _z(FF, n))
        w.add_tensor(b + "ffn_down.weight", _z(n, FF))
        if arch in ("gemma2", "gemma3", "olmo2"):
            w.add_tensor(b + "post_attention_norm.weight", _z(n))
            w.add_tensor(b + "post_ffw_norm.weight", _z(n))
        if arch == "gemma3":
            w.add_tensor(b + "attn_k_norm.weight", _z(hd))
            w.add_tensor(b + "attn_q_norm.weight", _z(hd))
        if arch == "olmo2":
            w.add_tensor(b + "attn_q_norm.weight", _z(n))
            w.add_tensor(b + "attn_k_norm.weight", _z(kv[0] * hd))
    return w


def mamba(path, a):
    arch = a.arch
    w = gguf.GGUFWriter(path, arch)
    _header(w, arch, a)
    w.add_head_count(0)
    d_inner = 2 * a.n_embd
    dt_rank = a.dt_rank
    w.add_ssm_conv_kernel(a.d_conv)
    w.add_ssm_inner_size(d_inner)
    w.add_ssm_state_size(a.d_state)
    w.add_ssm_time_step_rank(dt_rank)
    if arch == "mamba2":
        w.add_ssm_group_count(a.groups)
    for i in range(a.layers):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", _z(a.n_embd))
        if arch == "mamba":
            w.add_tensor(b + "ssm_in.weight", _z(2 * d_inner, a.n_embd))
            w.add_tensor(b + "ssm_conv1d.weight", _z(d_inner, a.d_conv))
            w.add_tensor(b + "ssm_conv1d.bias", _z(d_inner))
            w.add_tensor(b + "ssm_x.weight", _z(dt_rank + 2 * a.d_state, d_inner))
            w.add_tensor(b + "ssm_dt.weight", _z(d_inner, dt_rank))
            w.add_tensor(b + "ssm_dt.bias", _z(d_inner))
            w.add_tensor(b + "ssm_a", _z(d_inner, a.d_state))
            w.add_tensor(b + "ssm_d", _z(d_inner))
        else:
            conv_dim = d_inner + 2 * a.groups * a.d_state
            d_in_proj = d_inner + conv_dim + dt_rank
            w.add_tensor(b + "ssm_in.weight", _z(d_in_proj, a.n_embd))
            w.add_tensor(b + "ssm_conv1d.weight", _z(conv_dim, a.d_conv))
            w.add_tensor(b + "ssm_conv1d.bias", _z(conv_dim))
            w.add_tensor(b + "ssm_dt.bias", _z(dt_rank))
            w.add_tensor(b + "ssm_a", _z(dt_rank, 1))
            w.add_tensor(b + "ssm_d", _z(dt_rank, 1))
            w.add_tensor(b + "ssm_norm.weight", _z(a.groups, d_inner // a.groups))
        w.add_tensor(b + "ssm_out.weight", _z(a.n_embd, d_inner))
    return w


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--arch", default="llama")
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--n-embd", type=int, default=64)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", default="8")
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--value-dim", type=int, default=None)
    p.add_argument("--ctx", type=int, default=32768)
    p.add_argument("--swa", type=int, default=None)
    p.add_argument("--swa-pattern", default=None)
    p.add_argument("--d-conv", type=int, default=4)
    p.add_argument("--d-state", type=int, default=16)
    p.add_argument("--dt-rank", type=int, default=16)
    p.add_argument("--groups", type=int, default=1)
    a = p.parse_args()
    w = mamba(a.out, a) if a.arch in ("mamba", "mamba2") else attention(a.out, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()

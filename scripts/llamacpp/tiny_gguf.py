"""Write a tiny-weight GGUF with real cache geometry (llama arch)."""
import sys, numpy as np, gguf
def llama(path, layers=32, n_embd=64, heads=32, kv_heads=8, head_dim=128, ctx=32768, vocab=32, swa=None, swa_pattern=None, arch="llama"):
    w = gguf.GGUFWriter(path, arch)
    w.add_block_count(layers)
    w.add_context_length(ctx)
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(32)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(0)
    if swa:
        w.add_sliding_window(swa)
    if swa_pattern is not None:
        w.add_array(f"{arch}.attention.sliding_window_pattern", swa_pattern)
    # tokenizer
    w.add_tokenizer_model("llama")
    toks = [f"t{i}" for i in range(vocab)]
    w.add_token_list(toks); w.add_token_scores([0.0]*vocab); w.add_token_types([1]*vocab)
    f32 = np.float32
    z = lambda *shape: np.zeros(shape, dtype=f32)
    w.add_tensor("token_embd.weight", z(vocab, n_embd))
    w.add_tensor("output_norm.weight", z(n_embd))
    w.add_tensor("output.weight", z(vocab, n_embd))
    for i in range(layers):
        b = f"blk.{i}."
        w.add_tensor(b+"attn_norm.weight", z(n_embd))
        w.add_tensor(b+"attn_q.weight", z(heads*head_dim, n_embd))
        w.add_tensor(b+"attn_k.weight", z(kv_heads*head_dim, n_embd))
        w.add_tensor(b+"attn_v.weight", z(kv_heads*head_dim, n_embd))
        w.add_tensor(b+"attn_output.weight", z(n_embd, heads*head_dim))
        w.add_tensor(b+"ffn_norm.weight", z(n_embd))
        w.add_tensor(b+"ffn_gate.weight", z(32, n_embd))
        w.add_tensor(b+"ffn_up.weight", z(32, n_embd))
        w.add_tensor(b+"ffn_down.weight", z(n_embd, 32))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
if __name__ == "__main__":
    llama(sys.argv[1])

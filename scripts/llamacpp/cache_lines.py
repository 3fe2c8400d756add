"""Load a GGUF with no_alloc and create a context; llama.cpp logs its cache lines."""
import sys, ctypes, llama_cpp
path, n_ctx, n_seq = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tk = {"f16": 1, "q8_0": 8, "q4_0": 2, "bf16": 30}[sys.argv[4] if len(sys.argv) > 4 else "f16"]
llama_cpp.llama_backend_init()
mp = llama_cpp.llama_model_default_params()
mp.no_alloc = False
m = llama_cpp.llama_model_load_from_file(path.encode(), mp)
cp = llama_cpp.llama_context_default_params()
cp.n_ctx = n_ctx; cp.n_seq_max = n_seq; cp.type_k = tk; cp.type_v = tk
cp.flash_attn_type = 1
c = llama_cpp.llama_init_from_model(m, cp)
print("ctx", bool(c))

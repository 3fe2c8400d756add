"""What SGLang 0.5.23 holds once a model is built, beside the checkpoint's
tensors: its parameters' bytes by dtype and every buffer (name, shape,
dtype), from the model class built on the meta device as its loader builds
it (sglang_pools.py's stand-ins), tp 1. The rotary tables SGLang keeps in
float32 on CUDA are built so (`_is_cuda` set for the rotary module). Checks
`kv fit`'s loaded-weights rule (kv_engines::fit::sglang); not run by CI.

    /work/.venv-sglang/bin/python scripts/sglang/loaded_buffers.py CONFIG.json...
    /work/.venv-sglang/bin/python scripts/sglang/loaded_buffers.py --kv KV CONFIG.json...

One JSON object per config on stdout. With `--kv`, each also carries what
`kv fit` counts beside the weights (`rotary_table_bytes`, or its refusal),
and a last line counts agreement with the buffers' bytes.
"""

import json
import os
import shutil
import sys
import tempfile
import warnings

os.environ["SGLANG_ENABLE_JIT_DEEPGEMM"] = "0"
warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import sglang_pools as sp  # noqa: E402
from sglang.srt.configs.model_config import ModelConfig  # noqa: E402
from sglang.srt.server_args import ServerArgs  # noqa: E402


def measure(config, tp=1, dp=1):
    from sglang.srt.configs.load_config import LoadConfig
    from sglang.srt.model_loader.loader import _initialize_model

    tmp = tempfile.mkdtemp()
    try:
        shutil.copy(config, os.path.join(tmp, "config.json"))
        extra = dict(dp_size=dp, enable_dp_attention=True) if dp > 1 else {}
        sa = ServerArgs(model_path=tmp, skip_tokenizer_init=True, tp_size=tp, **extra)
        sa.resolve_once()
        sp.rc.publish(sa, role="scheduler", ranks=sp.rc.SpawnRanks(world_rank=0, gpu_id=0))
        sp.rc.get_parallel().override_permanently(world_group=sp._Group())
        mc = ModelConfig.from_server_args(sa)
        groups = dict(
            world_group=tp, tp_group=tp, pp_group=1, moe_ep_group=1, moe_dp_group=1,
            moe_tp_group=tp, attn_tp_group=tp // dp, attn_cp_group=1,
            shared_experts_tp_group=tp, dcp_group=1,
        )
        saved = torch.get_default_dtype()
        try:
            with sp.rc.get_parallel().override(
                **{k: sp._FakeGroup(n) for k, n in groups.items()}
            ):
                torch.set_default_dtype(mc.dtype)
                with torch.device("meta"), sp._CudaToMeta():
                    model = _initialize_model(mc, LoadConfig())
                    # What the loader does once the weights are in
                    # (DeepSeek's `w_kc` and `w_vc`), on the meta tensors.
                    post_load_error = None
                    if hasattr(model, "post_load_weights"):
                        try:
                            model.post_load_weights()
                        except Exception as error:  # noqa: BLE001  (reported)
                            post_load_error = f"{type(error).__name__}: {error}"[:200]
        finally:
            torch.set_default_dtype(saved)
        # Tensors a module holds that are neither parameters nor buffers,
        # one allocation per storage: a view of a parameter (the conv
        # layers' `conv_weights`) takes none.
        def storage(t):
            return t.untyped_storage()._cdata

        registered = {storage(t) for t in model.parameters()}
        registered |= {storage(t) for t in model.buffers()}
        post_load, seen_extra = 0, set()
        for module in model.modules():
            for value in vars(module).values():
                if not isinstance(value, torch.Tensor) or value.numel() == 0:
                    continue
                key = storage(value)
                if key in registered or key in seen_extra:
                    continue
                seen_extra.add(key)
                post_load += value.untyped_storage().nbytes()
        params = {}
        for p in model.parameters():
            key = str(p.dtype).replace("torch.", "")
            params[key] = params.get(key, 0) + p.numel() * p.element_size()
        # A buffer shared by several modules (one rotary table) is one tensor.
        seen, buffers = set(), []
        for name, b in model.named_buffers(remove_duplicate=False):
            ident = id(b)
            if ident in seen:
                continue
            seen.add(ident)
            buffers.append([name, list(b.shape), str(b.dtype).replace("torch.", ""),
                            b.numel() * b.element_size()])
        return {"class": type(model).__name__, "tp": tp, "dtype": str(mc.dtype),
                "param_bytes": params, "buffers": buffers, "other_tensor_bytes": post_load,
                "post_load_error": post_load_error}
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}"[:300]}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def kv_rotary(kv, config):
    """`kv fit`'s rotary table for `config`, beside a one-tensor checkpoint."""
    import struct
    import subprocess

    tmp = tempfile.mkdtemp()
    try:
        shutil.copy(config, os.path.join(tmp, "config.json"))
        header = json.dumps({"w": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}}).encode()
        with open(os.path.join(tmp, "model.safetensors"), "wb") as f:
            f.write(struct.pack("<Q", len(header)) + header + b"\0\0")
        out = subprocess.run(
            [kv, "fit", tmp, "--engine", "sglang", "--gpu", "B200", "--avail-mem-gb", "170",
             "--mem-fraction-static", "0.9", "--format", "json"],
            capture_output=True, text=True,
        )
        if out.returncode != 0:
            return None, (out.stderr.strip().splitlines() or ["?"])[-1][-200:]
        return json.loads(out.stdout)[0]["fit"]["loaded"]["rotary_bytes"], None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    kv = None
    configs = sys.argv[1:]
    if configs[:1] == ["--kv"]:
        kv, configs = configs[1], configs[2:]
    sp._as_hopper()
    # Only the rotary module is told it runs on CUDA (its tables stay
    # float32); SGLang's cached is_cuda() stays False, so that model modules
    # import without CUDA kernels.
    import sglang.srt.layers.rotary_embedding.base as rotary_base

    rotary_base._is_cuda = True
    counts = {"same": 0, "differ": 0, "kv refuses": 0, "sglang error": 0}
    for config in configs:
        out = {"config": config, **measure(config)}
        if kv is not None:
            ours, refusal = kv_rotary(kv, config)
            theirs = sum(b[3] for b in out.get("buffers", []))
            out["kv_rotary_bytes"], out["kv_refusal"] = ours, refusal
            verdict = ("sglang error" if "error" in out else "kv refuses" if refusal
                       else "same" if ours == theirs else "differ")
            out["verdict"] = verdict
            counts[verdict] += 1
        print(json.dumps(out), flush=True)
    if kv is not None:
        print(json.dumps(counts))


if __name__ == "__main__":
    main()

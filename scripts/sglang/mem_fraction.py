"""SGLang 0.5.23's own default mem_fraction_static, run on CPU: its ServerArgs
resolved with the platform answering as a Hopper GPU (as sglang_pools.py
does) and `get_device_memory_capacity` returning the nvidia-smi memory
given. Checks `kv fit`'s defaults (kv_engines::fit::sglang); not run by CI.

    /work/.venv-sglang/bin/python scripts/sglang/mem_fraction.py CASES.json

CASES.json is a list of {"config": PATH, "gpu_mib": N, "tp": N, "dp": N (DP attention),
"chunked_prefill_size": N, "max_running_requests": N, "max_total_tokens": N,
"model_dir_name": NAME} (all but the first two optional). One JSON object per
case on stdout: the resolved mem_fraction_static, chunked_prefill_size and
CUDA graph sizes, or the error SGLang raised.
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

import sglang_pools  # noqa: E402  (the Hopper platform hook)
import sglang.srt.arg_groups.memory_hook as memory_hook  # noqa: E402
from sglang.srt.server_args import ServerArgs  # noqa: E402


def run_case(case):
    gpu_mib = float(case["gpu_mib"])
    memory_hook.get_device_memory_capacity = lambda device=None: gpu_mib
    root = tempfile.mkdtemp()
    try:
        model = os.path.join(root, case.get("model_dir_name", "model"))
        os.makedirs(model)
        shutil.copy(case["config"], os.path.join(model, "config.json"))
        kwargs = dict(model_path=model, skip_tokenizer_init=True, tp_size=int(case.get("tp", 1)))
        if int(case.get("dp", 1)) > 1:
            kwargs.update(dp_size=int(case["dp"]), enable_dp_attention=True)
        for key in ("chunked_prefill_size", "max_running_requests", "max_total_tokens"):
            if case.get(key) is not None:
                kwargs[key] = int(case[key])
        sa = ServerArgs(**kwargs)
        sa.resolve_once()
        resolved = sa.resolved_dict()
        graphs = resolved["cuda_graph_config"]
        decode, prefill = graphs["decode"], graphs["prefill"]
        return {
            "mem_fraction_static": resolved["mem_fraction_static"],
            "chunked_prefill_size": resolved["chunked_prefill_size"],
            "decode_max_bs": decode.get("max_bs"),
            "prefill_backend": prefill.get("backend"),
            "prefill_max_bs": prefill.get("max_bs"),
            "prefill_sizes": len(prefill.get("bs") or []),
        }
    except Exception as error:  # a refusal is a result here
        return {"error": f"{type(error).__name__}: {error}"[:400]}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main():
    sglang_pools._as_hopper()
    # `sglang.srt.utils.is_cuda` is lru-cached, and was asked (False) when
    # SGLang was imported; CUDA graph defaults (the breakable prefill graph)
    # ask it again.
    import sglang.srt.utils

    sglang.srt.utils.is_cuda.cache_clear()
    for case in json.load(open(sys.argv[1])):
        print(json.dumps({"case": case, **run_case(case)}), flush=True)


if __name__ == "__main__":
    main()

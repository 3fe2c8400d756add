"""What vLLM 0.33 holds once a model is loaded: its model class built on the
meta device as BaseModelLoader builds it on rank 0 of --tp N, on pipeline
stage S of --pp P (compare.py's harness, an
emulated Hopper), every parameter and buffer with its bytes rounded up to
the CUDA caching allocator's 512-byte blocks, as `Model loading took X GiB`
counts them (max_memory_allocated). Checks `kv fit --engine vllm`'s loaded
weights (kv_engines::fit::vllm); not run by CI.

    /work/.venv-vllm/bin/python scripts/vllm/loaded_weights.py [--tp N] [--pp P --stage S] CONFIG.json...

One JSON object per config on stdout: the dtype, the bytes of parameters
and of buffers, their names and shapes where a buffer, or the error.
"""

import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402


def loaded(config_path, tp, pp=1, stage=0, language_model_only=False):
    import torch
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.utils.torch_utils import set_default_torch_dtype

    work = tempfile.mkdtemp()
    try:
        shutil.copy(config_path, os.path.join(work, "config.json"))
        layout = {"tp": tp, "pp": pp, "dcp": 1, "fmt": "auto", "mml": None,
                  "lmo": language_model_only}
        vc = compare.engine_config(work, layout)
        compare.fake_parallel_state(tp, pp, 1, stage)
        # As the GPU worker does before loading (gpu_worker.py:558): the
        # sparse-MLA classes reserve workspace when built.
        from vllm.v1.worker import workspace

        workspace.reset_workspace_manager()
        workspace.init_workspace_manager(torch.device("meta"))
        vc.device_config.device = torch.device("meta")
        with set_default_torch_dtype(vc.model_config.dtype), torch.device("meta"), \
                compare.AllOnMeta():
            model = initialize_model(vllm_config=vc)
        # One allocation per storage: a buffer that is a view of a parameter
        # (Mamba2's `conv_weights`, a view of `conv1d.weight`) takes none.
        seen = set()

        def allocation(t):
            key = t.untyped_storage()._cdata
            if key in seen:
                return 0
            seen.add(key)
            return (t.untyped_storage().nbytes() + 511) // 512 * 512

        params = sum(allocation(p) for p in model.parameters())
        buffers = [(n, list(b.shape), str(b.dtype), allocation(b))
                   for n, b in model.named_buffers()]
        return {
            "config": config_path,
            "tp": tp,
            "pp": pp,
            "stage": stage,
            "dtype": str(vc.model_config.dtype),
            "parameter_bytes": params,
            "buffer_bytes": sum(b[3] for b in buffers),
            "buffers": buffers,
            "total": params + sum(b[3] for b in buffers),
        }
    except Exception as e:  # noqa: BLE001  (reported, the next config runs)
        return {"config": config_path, "error": compare.first_line(e)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    compare.load_stub_libcuda(tempfile.mkdtemp())
    import logging

    logging.disable(logging.WARNING)
    compare.install_hopper()
    args = sys.argv[1:]
    flags = {"--tp": 1, "--pp": 1, "--stage": 0}
    while args[:1] and args[0] in flags:
        flags[args[0]], args = int(args[1]), args[2:]
    for path in args:
        print(json.dumps(loaded(path, flags["--tp"], flags["--pp"], flags["--stage"])), flush=True)


if __name__ == "__main__":
    main()

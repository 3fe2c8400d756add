"""SGLang 0.5.23's own KV pool sizing, run on CPU: its ServerArgs, ModelConfig
and KVCacheConfigurator.configure() on the meta device, with the platform
answering as a Hopper GPU (sm90, CUDA 12.3+) and the free-memory query
returning the given budget. Not run by CI.

    /work/.venv-sglang/bin/python scripts/sglang/sglang_pools.py CASES.json

CASES.json is a list of {"config": PATH, "budget": BYTES, "tp": N, "dp": N,
"kv_cache_dtype": "auto", "max_running_requests": N, "max_total_tokens": N}
(the last two optional; in place of "budget", "avail_before_gb",
"avail_after_gb" and "mem_fraction_static": SGLang's free memory before and
after loading the weights, and the fraction it holds back of the first); one JSON object per case is printed on stdout:
the pool figures and SGLang's own log lines from its memory pools (logger
INFO), or the error it raised. One process runs every case, since importing
SGLang takes about 20 s.

A case with "build": true also builds the model class as SGLang's loader
does (`_initialize_model`, no weights) on torch's meta device, with one-rank
stand-ins for the process groups (TP as the case says, PP 1), so what the
model's layers refuse at load is seen: "built" names the class and its
parameter count, or "build_error" says what it raised and where
("build_where", the innermost SGLang frame).
"""

import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
import types
import warnings

os.environ["SGLANG_ENABLE_JIT_DEEPGEMM"] = "0"
warnings.filterwarnings("ignore")

import torch  # noqa: E402

GIB = 1 << 30

from sglang.srt import runtime_context as rc  # noqa: E402
from sglang.srt.configs.model_config import AttentionArch, ModelConfig  # noqa: E402
import sglang.srt.mem_cache.kv_cache_configurator as kvc_mod  # noqa: E402
from sglang.srt.mem_cache.kv_cache_dtype import configure_kv_cache_dtype  # noqa: E402
from sglang.srt.model_executor.model_runner_components.layer_setup import (  # noqa: E402
    resolve_layer_indices,
)
from sglang.srt.model_executor.model_runner_components.load_model_utils import (  # noqa: E402
    resolve_sliding_window_size,
)
from sglang.srt.server_args import ServerArgs  # noqa: E402
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm  # noqa: E402


class _Props:
    name = "NVIDIA H100 80GB HBM3"
    major, minor = 9, 0
    total_memory = 80 * GIB
    multi_processor_count = 132
    L2_cache_size = 50 << 20


def _as_hopper():
    """The platform hook answers as one H100 (sm90, CUDA >= 12.3)."""
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 1
    torch.cuda.get_device_capability = lambda d=None: (9, 0)
    torch.cuda.get_device_name = lambda d=None: _Props.name
    torch.cuda.get_device_properties = lambda d=None: _Props()
    torch.cuda.current_device = lambda: 0
    import sglang.srt.platforms as plat
    from sglang.srt.platforms.cuda import CudaSRTPlatform

    plat._current_platform = CudaSRTPlatform()
    rc.override_platform(
        is_cuda=True,
        is_hip=False,
        is_sm90=True,
        is_sm100=False,
        is_sm100_or_sm110=False,
        is_sm110=False,
        is_sm120=False,
        is_blackwell=False,
        is_hopper_with_cuda_12_3=True,
        device_sm=90,
        device_capability=(9, 0),
    ).install()
    # Pools are built on the meta device: give it the stream API they use.
    meta = types.ModuleType("torch.meta")

    class Stream:
        def __init__(self, *a, **k):
            pass

        def wait_stream(self, *a):
            pass

    meta.Stream = Stream
    meta.current_stream = lambda *a: Stream()
    meta.stream = lambda s: contextlib.nullcontext()
    meta.synchronize = lambda *a: None
    meta.is_available = lambda: True
    torch._register_device_module("meta", meta)


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        if record.name.startswith("sglang.srt.mem_cache") or record.name.startswith(
            "sglang.srt.model_executor.pool_configurator"
        ):
            self.lines.append(record.getMessage())


_MODEL_SOURCES = None


def load_refusal(config_path):
    """What SGLang's loader says of the config's architectures, where it
    refuses them (model_loader/utils.py, get_model_architecture and
    resolve_transformers_arch): no native class (its models/*.py name none;
    their source is read, since some do not import on CPU) and a transformers
    class that is absent or not backend-compatible."""
    global _MODEL_SOURCES
    import glob
    import re

    import transformers

    import sglang.srt.models as models

    if _MODEL_SOURCES is None:
        _MODEL_SOURCES = "".join(
            open(f).read() for f in glob.glob(os.path.join(models.__path__[0], "**/*.py"), recursive=True)
        )
    archs = json.load(open(config_path)).get("architectures") or []
    if any(re.search(rf"\b{re.escape(a)}\b", _MODEL_SOURCES) for a in archs):
        return None
    for arch in archs:
        module = getattr(transformers, arch, None)
        if module is None:
            return f"Cannot find model module. '{arch}' is not a registered model in the Transformers library"
        if not module.is_backend_compatible():
            return (
                f"{arch} has no SGlang implementation and the Transformers "
                "implementation is not compatible with SGLang."
            )
    return None


class _Group:
    cpu_group = None


class _FakeGroup:
    """One rank's view of a process group of `n` ranks: what the layers read
    when they are built (sizes and ranks), never a collective."""

    def __init__(self, n):
        self.world_size = n
        self.rank_in_group = self.rank = self.local_rank = self.first_rank = 0
        self.ranks = list(range(n))
        self.is_first_rank = True
        self.is_last_rank = n == 1
        self.last_rank = n - 1
        self.next_rank = 1 % n
        self.prev_rank = (n - 1) % n
        self.cpu_group = self.device_group = None
        self.unique_name = "stand-in"
        self.use_pynccl = False

    def __getattr__(self, name):
        raise AttributeError(f"the process-group stand-in has no {name!r}")


class _CudaToMeta(torch.overrides.TorchFunctionMode):
    """A tensor a layer makes on the GPU is made on the meta device: there
    is no GPU here, and the build is about shapes and refusals."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        device = kwargs.get("device")
        # A bare index is a CUDA device to torch (current_device() answers 0).
        if isinstance(device, int) or (device is not None and "cuda" in str(device)):
            kwargs["device"] = "meta"
        if func in (torch.Tensor.cuda, torch.Tensor.pin_memory):
            return args[0]
        if func is torch.Tensor.to and args and any("cuda" in str(a) for a in args[1:]):
            return args[0]
        return func(*args, **kwargs)


def build_model(mc, tp, attn_tp):
    """SGLang's loader's `_initialize_model` on the meta device: the class
    and its parameter count, or what it raised and the innermost SGLang
    frame."""
    import traceback

    from sglang.srt.configs.load_config import LoadConfig
    from sglang.srt.model_loader.loader import _initialize_model

    groups = dict(
        world_group=tp, tp_group=tp, pp_group=1, moe_ep_group=1, moe_dp_group=1,
        moe_tp_group=tp, attn_tp_group=attn_tp, attn_cp_group=1,
        shared_experts_tp_group=tp, dcp_group=1,
    )
    saved = torch.get_default_dtype()
    try:
        with rc.get_parallel().override(**{k: _FakeGroup(n) for k, n in groups.items()}):
            torch.set_default_dtype(mc.dtype)
            with torch.device("meta"), _CudaToMeta():
                model = _initialize_model(mc, LoadConfig())
        params = sum(p.numel() for p in model.parameters())
        return {"built": f"{type(model).__name__}, {params} parameters"}
    except BaseException as error:  # a refusal at load is a result here
        if isinstance(error, KeyboardInterrupt):
            raise
        root = os.path.dirname(os.path.dirname(rc.__file__))  # .../sglang
        frames = [
            f"{os.path.relpath(f.filename, root)}:{f.lineno}"
            for f in traceback.extract_tb(error.__traceback__)
            if f.filename.startswith(root)
        ]
        return {
            "build_error": f"{type(error).__name__}: {error}"[:600],
            "build_where": frames[-1] if frames else None,
        }
    finally:
        torch.set_default_dtype(saved)


# Where the case is: "server_args" and "model_config" (SGLang reading the
# config), "configure" (sizing the pools). An error reports it as "stage".
_STAGE = None


def run_case(case, lines):
    global _STAGE
    _STAGE = "server_args"
    # Either the pool budget itself (free memory after loading, nothing
    # held back), or the two free-memory figures SGLang logs around
    # loading, in GB, which its configurator turns into the budget with
    # mem_fraction_static.
    if "avail_before_gb" in case:
        pre_model_load_memory = float(case["avail_before_gb"])
        after = float(case["avail_after_gb"])
        kvc_mod.get_available_gpu_memory = lambda *a, **k: after
    else:
        pre_model_load_memory = 0
        budget = int(case["budget"])
        kvc_mod.get_available_gpu_memory = lambda *a, **k: budget / GIB
    tmp = tempfile.mkdtemp()
    try:
        shutil.copy(case["config"], os.path.join(tmp, "config.json"))
        dp = int(case.get("dp", 1))
        kwargs = dict(
            model_path=tmp,
            skip_tokenizer_init=True,
            tp_size=int(case.get("tp", 1)),
            kv_cache_dtype=case.get("kv_cache_dtype", "auto"),
        )
        for key in ("max_running_requests", "max_total_tokens"):
            if case.get(key) is not None:
                kwargs[key] = int(case[key])
        if case.get("mem_fraction_static") is not None:
            kwargs["mem_fraction_static"] = float(case["mem_fraction_static"])
        if dp > 1:
            kwargs.update(dp_size=dp, enable_dp_attention=True)
        sa = ServerArgs(**kwargs)
        sa.resolve_once()
        rc.publish(sa, role="scheduler", ranks=rc.SpawnRanks(world_rank=0, gpu_id=0))
        rc.get_parallel().override_permanently(world_group=_Group())
        resolved = sa.resolved_dict()
        _STAGE = "model_config"
        mc = ModelConfig.from_server_args(sa)
        _STAGE = "configure"
        layer_info = resolve_layer_indices(
            model=None, model_config=mc, is_draft_worker=False
        )
        kv_str, kv_dtype = configure_kv_cache_dtype(
            server_args_kv_cache_dtype=resolved["kv_cache_dtype"],
            model=None,
            model_dtype=mc.dtype,
            is_draft_worker=False,
            is_dflash=False,
            speculative_draft_attention_backend=None,
        )
        configurator = kvc_mod.KVCacheConfigurator(
            device="meta",
            gpu_id=0,
            attn_dp_size=rc.get_parallel().attn_dp_size,
            pp_size=1,
            pp_group=None,
            model=None,
            model_config=mc,
            server_args=sa,
            kv_cache_dtype=kv_dtype,
            kv_cache_dtype_str=kv_str or resolved["kv_cache_dtype"],
            model_dtype=mc.dtype,
            page_size=resolved["page_size"],
            sliding_window_size=resolve_sliding_window_size(None, mc),
            spec_algorithm=SpeculativeAlgorithm.from_string(None),
            is_draft_worker=False,
            post_capture_kv_active=False,
            spec_aux_config=None,
            is_hybrid_swa=mc.is_hybrid_swa,
            is_hybrid_swa_compress=mc.is_hybrid_swa_compress,
            use_mla_backend=mc.attention_arch == AttentionArch.MLA,
            layer_info=layer_info,
            forward_stream=None,
            req_to_token_pool=None,
            token_to_kv_pool_allocator=None,
            memory_pool_config=None,
        )
        try:
            result = configurator.configure(pre_model_load_memory=pre_model_load_memory)
        except Exception as error:
            # The pools' refusal is the result; the build is still tried.
            if case.get("build"):
                error.build = build_model(mc, int(case.get("tp", 1)), rc.get_parallel().attn_tp_size)
            raise
        built = (
            build_model(mc, int(case.get("tp", 1)), rc.get_parallel().attn_tp_size)
            if case.get("build")
            else {}
        )
        return built | {
            "attention_backend": resolved["attention_backend"],
            "page_size": resolved["page_size"],
            "attn_tp_size": rc.get_parallel().attn_tp_size,
            "attn_dp_size": rc.get_parallel().attn_dp_size,
            "max_total_num_tokens": result.max_total_num_tokens,
            "max_running_requests": result.max_running_requests,
            "full_max_total_num_tokens": result.full_max_total_num_tokens,
            "swa_max_total_num_tokens": result.swa_max_total_num_tokens,
            "max_mamba_cache_size": rc.get_schedule().max_mamba_cache_size,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    _as_hopper()
    handler = _Lines()
    root = logging.getLogger("sglang")
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    for case in json.load(open(sys.argv[1])):
        handler.lines = []
        out = dict(case)
        out["load_refusal"] = load_refusal(case["config"])
        try:
            out.update(run_case(case, handler.lines))
        except Exception as error:  # SGLang's refusal is a result here
            out["error"] = f"{type(error).__name__}: {error}"
            out["stage"] = _STAGE
            out.update(getattr(error, "build", {}))
        out["lines"] = [l for l in handler.lines if not l.startswith("Memory pool end")]
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()

"""`kv estimate` against vLLM 0.33's own objects, quantity by quantity.

For each config.json and each layout (TP 1/2/8, PP 1/2/3, KV formats, DCP,
max_model_len), vLLM's figures come from its real objects on CPU:
`EngineArgs.create_engine_config` (its checks and refusals), the model class
built on torch's meta device once per pipeline stage (vLLM's parallel state
faked as TP rank 0 of that stage), `Platform.update_block_size_for_backend`
(the hybrid block), the worker's `get_kv_cache_spec` (the V2 model runner's
`v1/worker/gpu/attn_utils.get_kv_cache_spec` where vLLM picks that runner, as
it does on a GPU machine; else `GPUModelRunner.get_kv_cache_spec`), then
`get_global_kv_cache_groups`, `_pool_bytes_per_block_from_builder`,
`_max_memory_usage_bytes_from_groups`, `get_kv_cache_configs` and
`get_kv_cache_capacity` for the start-up line or the refusal. The platform is
a stub answering as one Hopper GPU (SM 9.0); an empty `libcuda.so.1` (built
here with gcc from the symbols vLLM's extensions name) lets them load; the few
GPU calls model classes make at build time are stubbed (install_hopper).
kv's figures come from `kv estimate --format json` (exit 2: refused).

Not part of CI. Build kv, then run with the vLLM 0.33 virtual environment
(about 9 minutes for the 65 configs on one core):

    cargo build --release -p kv-cli
    /work/.venv-vllm/bin/python scripts/vllm/compare.py \
        --kv target/release/kv --out /tmp/kv-vllm-compare

The configs are scripts/vllm/configs/*.json, written by make_configs.py
(kv's examples/configs, and transformers' config classes whose defaults are
published checkpoints, each patched where transformers 5 writes a key layout
vLLM 0.33 does not read). KV_CMP_DEBUG=1 prints the traceback of each layout
the harness fails to build.

Options: --only NAME... (config file stems), --quick (TP 1/2, PP 1/2, auto and
fp8 only), --jobs N (configs run in parallel, one forked process each).
Writes OUT/results.csv (config, family, layout, quantity, vllm, kv, equal)
and OUT/summary.md (agreement by family and by quantity, one example of each
mismatch, each mismatch class with its reading in vLLM's source: CAUSES). A config runs in its own forked process, so one model class that
fails to build costs only its rows.
"""

import argparse
import copy
import csv
import ctypes
import glob
import io
import json
import os
import subprocess
import sys
import time
import traceback
from collections import defaultdict
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))


def load_stub_libcuda(folder):
    """Loads an empty libcuda.so.1 (built once) so vLLM's CUDA extensions load."""
    lib = os.path.join(folder, "libcuda.so.1")
    if not os.path.exists(lib):
        import vllm

        ext = os.path.dirname(vllm.__file__)
        names = set()
        for so in glob.glob(os.path.join(ext, "*.so")):
            out = subprocess.run(
                ["nm", "-D", "--undefined-only", so], capture_output=True, text=True
            ).stdout
            for line in out.splitlines():
                sym = line.split()[-1]
                if sym.startswith("cu") and sym[2:3].isupper() and "@" not in sym:
                    names.add(sym)
        os.makedirs(folder, exist_ok=True)
        src = os.path.join(folder, "libcuda.c")
        with open(src, "w") as f:
            for sym in sorted(names):
                f.write(f"int {sym}(void) {{ return 999; }}\n")
        subprocess.run(
            ["gcc", "-shared", "-fPIC", "-o", lib, src, "-Wl,-soname,libcuda.so.1"],
            check=True,
        )
    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)


def install_hopper():
    """vLLM's CUDA platform answering as one H100 (SM 9.0), no driver."""
    import vllm.platforms as platforms
    from vllm.platforms.cuda import CudaPlatformBase
    from vllm.platforms.interface import DeviceCapability

    class Hopper(CudaPlatformBase):
        @classmethod
        def get_device_capability(cls, device_id=0):
            return DeviceCapability(9, 0)

        @classmethod
        def has_device_capability(cls, capability, device_id=0):
            if isinstance(capability, tuple):
                capability = capability[0] * 10 + capability[1]
            return 90 >= capability

        @classmethod
        def get_device_name(cls, device_id=0):
            return "NVIDIA H100 80GB HBM3"

        @classmethod
        def get_device_total_memory(cls, device_id=0):
            return 80 << 30

        @classmethod
        def is_fully_connected(cls, ids):
            return True

        @classmethod
        def device_count(cls):
            return 8

        @classmethod
        def get_device_uuid(cls, device_id=0):
            return "GPU-0"

        @classmethod
        def current_device(cls):
            # Where layers place the small tensors they build: nowhere.
            import torch

            return torch.device("meta")

    platforms._current_platform = Hopper()
    # Shared experts ask for a side stream at build time; no driver here.
    import vllm.utils.torch_utils as torch_utils

    torch_utils._aux_stream = object()

    class NoStream:
        """What a model asks torch.cuda.Stream() for at build time, unused."""

        def __init__(self, *args, **kwargs):
            pass

    import torch

    torch.cuda.Stream = NoStream
    # Decode context parallel asks whether its ranks share a node: they do.
    import vllm.v1.attention.ops.cp_common as cp_common

    cp_common.in_the_same_node_as = lambda group, source_rank=0: [True] * group.size()
    # FlashInfer sizes its workspace by the SM count.
    import torch

    hopper = SimpleNamespace(
        name="NVIDIA H100 80GB HBM3", major=9, minor=0, multi_processor_count=132,
        total_memory=80 << 30, L2_cache_size=50 << 20,
    )
    torch.cuda.get_device_properties = lambda device=None: hopper
    # Gemma 3n's sparse GELU reads a scalar of a tensor it builds: on the CPU.
    from vllm.model_executor.layers import activation

    sparse_init = activation.GeluAndMulSparse.__init__

    def init_on_cpu(self, *args, **kwargs):
        with torch.device("cpu"):
            sparse_init(self, *args, **kwargs)

    activation.GeluAndMulSparse.__init__ = init_on_cpu
    # Step-5's DSA attention asks for the current device index at build, and
    # its kernels' module reads `tl.extra`, which vLLM's Triton placeholder
    # lacks.
    torch.accelerator.current_device_index = lambda: 0
    import vllm.triton_utils as triton_utils

    if not hasattr(triton_utils.tl, "extra"):
        triton_utils.tl.extra = SimpleNamespace(cuda=SimpleNamespace(libdevice=SimpleNamespace()))
    # FlashInfer's attention allocates a counter buffer on the GPU at build.
    from vllm.v1.attention.backends import flashinfer

    flashinfer._get_multi_ctas_kv_counter_buffer = lambda min_bytes, device: torch.zeros(
        min_bytes, dtype=torch.uint8, device="meta"
    )
    # Without a driver vLLM uses its Triton placeholder, whose Config is a
    # bare function; the Mamba kernels read .num_stages from their configs
    # at import on SM 9.0.
    import vllm.triton_utils as tu

    # A GPU machine has Triton; without it vLLM picks the V1 model runner
    # (VllmConfig.use_v2_model_runner), which turns async scheduling off
    # under PP and so changes the sliding windows' in-flight tokens.
    import vllm.config.vllm as config_vllm

    config_vllm.HAS_TRITON = True

    if not tu.HAS_TRITON:
        tu.triton.Config = lambda kwargs=None, **k: SimpleNamespace(
            kwargs=kwargs or {},
            num_stages=k.get("num_stages", 1),
            num_warps=k.get("num_warps", 4),
        )


class FakeGroup:
    """One rank's view of a vLLM process group: sizes and ranks only."""

    def __init__(self, size, rank):
        self.world_size = size
        self.rank_in_group = rank
        self.ranks = list(range(size))
        self.rank = rank
        self.local_rank = rank
        # torch's ProcessGroup, as far as model classes ask it.
        self.device_group = SimpleNamespace(size=lambda: size, rank=lambda: rank)
        self.cpu_group = self.device_group
        self.use_custom_op_call = False

    @property
    def is_first_rank(self):
        return self.rank_in_group == 0

    @property
    def is_last_rank(self):
        return self.rank_in_group == self.world_size - 1


def fake_parallel_state(tp, pp, dcp, stage):
    import vllm.distributed.parallel_state as ps

    ps._TP = FakeGroup(tp, 0)
    ps._PP = FakeGroup(pp, stage)
    ps._DCP = FakeGroup(dcp, 0)
    ps._PCP = FakeGroup(1, 0)
    ps._EP = FakeGroup(tp, 0)
    ps._ETP = FakeGroup(1, 0)
    ps._EPLB = FakeGroup(tp, 0)
    ps._DP = FakeGroup(1, 0)
    ps._WORLD = FakeGroup(tp * pp, stage * tp)


def first_line(e):
    """The exception in one line: pydantic's header dropped, 300 characters."""
    text = " ".join(f"{e}".split())
    if isinstance(e, AssertionError) and e.__traceback__ is not None:
        tb = traceback.extract_tb(e.__traceback__)[-1]
        where = tb.filename.split("site-packages/")[-1]
        text = f"{where}:{tb.lineno}: {tb.line} {text}".strip()
    if "Value error, " in text:
        text = text.split("Value error, ", 1)[1].split(" [type=")[0]
    return f"{type(e).__name__}: {text}"[:300]


def harness_failure(e):
    """Whether a model that failed to build failed for this harness (the meta
    device; a config key layout this transformers writes and vLLM's class
    does not read) rather than by a check of vLLM's: those are ValueErrors,
    NotImplementedErrors naming what is unsupported, and assertions."""
    text = str(e)
    if "meta tensor" in text or "meta" in text and "device" in text:
        return True
    if "must be provided" in text:  # a key a trimmed example config lacks
        return True
    if "CUDA" in text and ("driver" in text or "re-initialize" in text):
        return True  # a GPU call this harness has not stubbed
    if "WorkspaceManager not initialized" in text:
        return True  # a GPU workspace the fp8 indexer asks for while built
    return isinstance(e, (AttributeError, KeyError, TypeError, IndexError))


MAX_NUM_SEQS = 256
MAX_NUM_BATCHED_TOKENS = 2048


def engine_config(model_dir, layout):
    from vllm.engine.arg_utils import EngineArgs

    return EngineArgs(
        model=model_dir,
        tensor_parallel_size=layout["tp"],
        pipeline_parallel_size=layout["pp"],
        decode_context_parallel_size=layout["dcp"],
        kv_cache_dtype=layout["fmt"],
        max_model_len=layout["mml"],
        block_size=layout.get("bs"),
        max_num_seqs=MAX_NUM_SEQS,
        max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS,
        skip_tokenizer_init=True,
        load_format="dummy",
        distributed_executor_backend="mp",
        enforce_eager=True,
        language_model_only=layout.get("lmo", False),
    ).create_engine_config()


def stage_specs(vc, layout, stage):
    """One pipeline stage's worker: the model on meta, its block size, its specs."""
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.platforms import current_platform
    from vllm.utils.torch_utils import set_default_torch_dtype
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    from vllm.v1.worker import workspace

    fake_parallel_state(layout["tp"], layout["pp"], layout["dcp"], stage)
    # The GPU worker sets up the workspace before loading the model
    # (v1/worker/gpu_worker.py:558); sparse-MLA impls (HY-V4's, FlashMLA
    # sparse) reserve theirs when built.
    workspace.reset_workspace_manager()
    workspace.init_workspace_manager(torch.device("meta"))
    v = copy.deepcopy(vc)
    # The Transformers backend places its parameters on device_config.device.
    v.device_config.device = torch.device("meta")
    # As BaseModelLoader.load_model builds it, on meta instead of the GPU.
    with set_default_torch_dtype(v.model_config.dtype), torch.device("meta"), AllOnMeta():
        initialize_model(vllm_config=v)
    current_platform.update_block_size_for_backend(v)
    with set_current_vllm_config(v):
        if v.use_v2_model_runner:  # the runner a GPU machine picks by default
            from vllm.v1.worker.gpu.attn_utils import get_kv_cache_spec

            specs = get_kv_cache_spec(v)
        else:
            worker = SimpleNamespace(vllm_config=v, shared_kv_cache_layers={})
            specs = GPUModelRunner.get_kv_cache_spec(worker)
    return v, specs


def _all_on_meta_mode():
    import torch

    class AllOnMeta(torch.overrides.TorchFunctionMode):
        """Tensors a model class places on the GPU by name (DeepSeek-V3.2's
        top-k buffer on `self.device`) go to meta as well: torch.device("meta")
        only fills in a device the call does not give."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if kwargs.get("device") is not None:
                kwargs["device"] = "meta"
            # A value read out of a tensor built on meta (Bloom's ALiBi slopes,
            # Apertus' xIELU scalars, torchaudio's mel filterbank check in
            # MiDashengLM) has no data: ones stand in. None sizes a cache; were
            # one to, vLLM's figure would differ from kv's and the row would
            # say so, never agree by chance.
            reads = (torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.cpu,
                     torch.Tensor.__int__, torch.Tensor.__float__, torch.Tensor.__index__,
                     torch.Tensor.__bool__)
            if func in reads and args and getattr(args[0], "is_meta", False):
                one = args[0].new_ones(args[0].shape, device="cpu")
                return func(one, *args[1:], **kwargs)
            return func(*args, **kwargs)

    return AllOnMeta


def AllOnMeta():
    return _all_on_meta_mode()()


def vllm_figures(model_dir, layout, budgets_for):
    """vLLM's figures for one layout: {'refused': str|None, quantities...}."""
    out = {"refused": None}
    try:
        vc = engine_config(model_dir, layout)
    except Exception as e:  # vLLM's own refusal of the layout
        out["refused"] = "config: " + first_line(e)
        return out
    stages = []
    try:
        for stage in range(layout["pp"]):
            stages.append(stage_specs(vc, layout, stage))
    except Exception as e:
        if harness_failure(e):
            raise
        if os.environ.get("KV_CMP_DEBUG"):
            traceback.print_exc()
        out["refused"] = "model: " + first_line(e)
        return out
    try:
        return plan(out, stages, layout, budgets_for)
    except Exception as e:  # vLLM's planning refusing the model's specs
        if harness_failure(e):
            raise
        return {"refused": "planning: " + first_line(e)}


def vllm_kind(spec):
    """A layer's kind, named as both sides can: full, sliding, chunked, mla,
    cross, state (Mamba, short conv, Gated DeltaNet), else its class."""
    from vllm.v1.kv_cache_interface import (
        ChunkedLocalAttentionSpec,
        CrossAttentionSpec,
        FullAttentionSpec,
        MambaSpec,
        MLAAttentionSpec,
        SlidingWindowSpec,
    )

    for cls, label in (
        (MLAAttentionSpec, "mla"),
        (SlidingWindowSpec, "sliding"),
        (ChunkedLocalAttentionSpec, "chunked"),
        (CrossAttentionSpec, "cross"),
        (MambaSpec, "state"),
        (FullAttentionSpec, "full"),
    ):
        if isinstance(spec, cls):
            return label
    return type(spec).__name__


def first_spec(spec):
    """A group's spec, or the first of a UniformTypeKVCacheSpecs."""
    inner = getattr(spec, "kv_cache_specs", None)
    return next(iter(inner.values())) if inner else spec


def per_position(spec):
    """Bytes a layer keeps per position: its real page over its block, or,
    where the page is padded to an alignment (DeepSeek-V4's), the padded
    page over the states it holds (one per `tokens_per_state` tokens)."""
    if getattr(spec, "alignment", None) is not None:
        return spec.page_size_bytes // spec.num_states
    return spec.real_page_size_bytes // spec.block_size


def kv_kind(name, kind):
    """kv's declaration name and kind, as vllm_kind names it."""
    if kind == "recurrent":
        return "state"
    if "mla" in kind or "mla" in name:
        return "mla"
    # Inkling's conv state is a SlidingWindowSpec in vLLM; Step-5's tail
    # ring a CircularBufferSpec.
    if name.endswith("conv_state"):
        return "sliding"
    # DeepSeek-V4's compressed latents and indexer keys are MLAAttentionSpecs,
    # its sliding latent and compressor states SlidingWindowMLASpecs.
    if name.startswith(("compressed_latent", "indexer_keys_c")):
        return "mla"
    if name == "sliding_window_latent" or name.endswith("compressor_state"):
        return "sliding"
    if name == "tail_ring":
        return "CircularBufferSpec"
    for word in ("sliding", "chunked", "cross"):
        if word in name:
            return word
    return "full"


def plan(out, stages, layout, budgets_for):
    """vLLM's KV cache planning over the stages' specs (as EngineCore does)."""
    from vllm.config import set_current_vllm_config
    from vllm.v1.attention.backends.utils import resolve_kv_cache_layout
    from vllm.v1.core import kv_cache_planning as planning
    from vllm.v1.core.kv_cache_config_builder import get_kv_cache_config_builder
    from vllm.v1.core.kv_cache_utils import (
        generate_scheduler_kv_cache_config,
        get_kv_cache_capacity,
    )
    from vllm.v1.core.single_type_kv_cache_manager import register_all_kvcache_specs
    from vllm.v1.kv_cache_interface import AttentionSpec
    from vllm.v1.worker.worker_base import WorkerBase

    v0 = stages[0][0]
    # Every worker's specs in rank order (pp-major, as vLLM numbers them).
    workers = [specs for _, specs in stages for _ in range(layout["tp"])]
    with set_current_vllm_config(v0):
        register_all_kvcache_specs(v0)
        layouts = WorkerBase.get_supported_kv_cache_layouts(SimpleNamespace(vllm_config=v0))
        resolve_kv_cache_layout(v0, [layouts] * len(workers), [s for w in workers for s in w.values()])
        groups = planning.get_global_kv_cache_groups(v0, workers)
        builder = get_kv_cache_config_builder(v0)
        out["max_model_len"] = v0.model_config.max_model_len
        out["block_size"] = v0.cache_config.block_size
        out["groups"] = len(groups)
        for g in groups:
            label = vllm_kind(first_spec(g.kv_cache_spec))
            out[f"groups.{label}"] = out.get(f"groups.{label}", 0) + 1
        for stage, (v, specs) in enumerate(stages):
            s = f"pp{stage}."
            for sp in specs.values():
                label = vllm_kind(sp)
                out[f"{s}layers.{label}"] = out.get(f"{s}layers.{label}", 0) + 1
                out[f"{s}per_row_bytes.{label}"] = out.get(
                    f"{s}per_row_bytes.{label}", 0
                ) + sp.max_memory_usage_bytes(v0)
            projected = planning._project_kv_cache_groups_to_worker(groups, specs)
            live = [g for g in projected if g.layer_names]
            out[s + "layers_cached"] = len(specs)
            out[s + "per_position_bytes"] = sum(
                per_position(sp) for sp in specs.values() if isinstance(sp, AttentionSpec)
            )
            out[s + "per_row_bytes_sum"] = sum(
                sp.max_memory_usage_bytes(v0) for sp in specs.values()
            )
            out[s + "page_bytes"] = max((sp.page_size_bytes for sp in specs.values()), default=0)
            if not live:
                continue
            out[s + "widest_group_layers"] = max(len(g.layer_names) for g in live)
            out[s + "bytes_per_block"] = planning._pool_bytes_per_block_from_builder(
                builder, v0, projected
            )
            out[s + "engine_per_row_bytes"] = planning._max_memory_usage_bytes_from_groups(
                builder, v0, projected
            )
            out[s + "blocks_per_request"] = (
                out[s + "engine_per_row_bytes"] // out[s + "bytes_per_block"]
            )
        needed = [out.get(f"pp{i}.engine_per_row_bytes", 0) for i in range(layout["pp"])]
        per_block = [out.get(f"pp{i}.bytes_per_block", 0) for i in range(layout["pp"])]
        out["budgets"] = {}
        if max(needed) > 0:
            for name, budget in budgets_for(max(needed), max(per_block)).items():
                out["budgets"][name] = budget
                # The planning may write the cache and model configs; the
                # layers registered in the compilation config are not copied.
                vb = copy.copy(v0)
                vb.cache_config = copy.deepcopy(v0.cache_config)
                vb.model_config = copy.deepcopy(v0.model_config)
                try:
                    configs = planning.get_kv_cache_configs(
                        vb, workers, [budget] * len(workers), groups
                    )
                    sched = generate_scheduler_kv_cache_config(configs)
                    tokens, conc = get_kv_cache_capacity(vb, sched)
                    mml = vb.model_config.max_model_len
                    out[f"startup[{name}].outcome"] = "starts"
                    out[f"startup[{name}].num_blocks"] = sched.num_blocks
                    out[f"startup[{name}].message"] = (
                        f"GPU KV cache size: {tokens:,} tokens, Maximum concurrency "
                        f"for {mml:,} tokens per request: {conc:.2f}x"
                    )
                except ValueError as e:
                    # _check_enough_kv_cache_memory: nothing left once the
                    # null block is held back, or too little for one request.
                    no_memory = str(e).startswith("No available memory")
                    out[f"startup[{name}].outcome"] = "no_memory" if no_memory else "refused"
                    out[f"startup[{name}].message"] = str(e)
    return out


def budgets_for(needed, per_block):
    """Per-rank --kv-cache-memory-bytes to try: room for a few requests, one
    byte short of a request plus the null block, and a third of a request."""
    return {
        "roomy": 4 * needed + 3 * per_block + 4321,
        "edge": needed + per_block - 1,
        "third": max(1, needed // 3),
    }


def kv_run(kv, config, layout, budget=None):
    args = [kv, "estimate", config, "--format", "json", "--tp", str(layout["tp"]),
            "--pp", str(layout["pp"])]
    if layout["fmt"] != "auto":
        args += ["--kv-format", layout["fmt"]]
    if layout["dcp"] > 1:
        args += ["--dcp", str(layout["dcp"])]
    if layout["mml"] is not None:
        args += ["--positions", str(layout["mml"])]
    if layout.get("bs") is not None:
        args += ["--block-size", str(layout["bs"])]
    if budget is not None:
        args += ["--kv-cache-memory-bytes", str(budget)]
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        return p.returncode, p.stderr.strip()
    return 0, json.loads(p.stdout)[0]


def kv_figures(kv, config, layout, budgets):
    rc, d = kv_run(kv, config, layout)
    out = {"refused": None if rc == 0 else f"exit {rc}: {d.splitlines()[0] if d else ''}"}
    if rc != 0:
        return out
    out["max_model_len"] = d["max_model_len"]
    out["block_size"] = d["block_size"]
    ranks = {
        (r["report"]["parallel"]["pp_rank"], r["report"]["parallel"]["tp_rank"]): r
        for r in d["ranks"]
    }
    first = ranks[(0, 0)]
    out["groups"] = sum(k["groups"] for k in first["vllm_pool"]["kinds"])
    # Every stage's declarations: the first may hold no layer of a kind.
    kinds = {
        x["name"]: kv_kind(x["name"], x["kind"])
        for r in ranks.values()
        for x in r["report"]["declarations"]
    }
    for k in first["vllm_pool"]["kinds"]:
        label = kinds.get(k["name"], k["name"])
        out[f"groups.{label}"] = out.get(f"groups.{label}", 0) + k["groups"]
    for stage in range(layout["pp"]):
        r = ranks[(stage, 0)]
        pool = r["vllm_pool"]
        s = f"pp{stage}."
        out[s + "layers_cached"] = sum(k["layers_on_rank"] for k in pool["kinds"])
        out[s + "per_position_bytes"] = r["per_position_bytes"]
        for x in r["report"]["declarations"]:
            label = kv_kind(x["name"], x["kind"])
            if x["layers"]:
                out[f"{s}layers.{label}"] = out.get(f"{s}layers.{label}", 0) + x["layers"]
                out[f"{s}per_row_bytes.{label}"] = out.get(
                    f"{s}per_row_bytes.{label}", 0
                ) + x["bytes_per_row"]
        out[s + "per_row_bytes_sum"] = r["per_row_bytes"]
        out[s + "page_bytes"] = pool["page_bytes"]
        out[s + "widest_group_layers"] = pool["widest_group_layers"]
        out[s + "bytes_per_block"] = pool["bytes_per_block"]
        out[s + "engine_per_row_bytes"] = pool["per_row_bytes"]
        out[s + "blocks_per_request"] = pool["blocks_per_request"]
    for name, budget in budgets.items():
        rc, e = kv_run(kv, config, layout, budget)
        if rc != 0:
            out[f"startup[{name}].outcome"] = f"exit {rc}"
            continue
        st = e["vllm_startup"]
        out[f"startup[{name}].outcome"] = st["outcome"]
        if st["outcome"] == "starts":
            out[f"startup[{name}].num_blocks"] = st["num_blocks"]
        out[f"startup[{name}].message"] = st["message"]
    return out


def layouts(quick):
    base = [(1, 1), (2, 1), (8, 1), (1, 2), (1, 3), (2, 2)]
    formats = ["auto", "fp8"]
    lens = ["short", None]
    if quick:
        base, lens = [(1, 1), (2, 1), (1, 2)], [None]
    out = [
        dict(tp=tp, pp=pp, fmt=fmt, dcp=1, mml=mml)
        for tp, pp in base
        for fmt in formats
        for mml in lens
    ]
    if not quick:
        out += [
            dict(tp=1, pp=1, fmt="fp8_e5m2", dcp=1, mml=None),
            dict(tp=2, pp=1, fmt="auto", dcp=2, mml=None),
            dict(tp=8, pp=1, fmt="auto", dcp=2, mml=None),
            dict(tp=8, pp=1, fmt="auto", dcp=4, mml=None),
            # --block-size given: vLLM picks the backend for the block.
            dict(tp=1, pp=1, fmt="fp8", dcp=1, mml=None, bs=16),
            dict(tp=1, pp=1, fmt="auto", dcp=1, mml=None, bs=32),
            dict(tp=1, pp=1, fmt="auto", dcp=1, mml=None, bs=8),
        ]
    return out


def layout_name(layout):
    mml = layout["mml"] if layout["mml"] is not None else "derived"
    dcp = f" dcp{layout['dcp']}" if layout["dcp"] > 1 else ""
    bs = f" block {layout['bs']}" if layout.get("bs") is not None else ""
    return f"tp{layout['tp']} pp{layout['pp']} {layout['fmt']}{dcp}{bs} len {mml}"


def compare_config(kv, config, work, quick):
    """Rows for one config: (layout, quantity, vllm, kv)."""
    name = os.path.splitext(os.path.basename(config))[0]
    model_dir = os.path.join(work, name)
    os.makedirs(model_dir, exist_ok=True)
    with open(config) as f, open(os.path.join(model_dir, "config.json"), "w") as g:
        g.write(f.read())
    rows = []
    try:  # the short length: 3000, or half the model's length where that is less
        derived = engine_config(model_dir, dict(tp=1, pp=1, dcp=1, fmt="auto", mml=None))
        short = min(3000, derived.model_config.max_model_len // 2)
    except Exception:
        short = 3000
    for layout in layouts(quick):
        if layout["mml"] == "short":
            layout["mml"] = short
        lname = layout_name(layout)
        try:
            v = vllm_figures(model_dir, layout, budgets_for)
        except Exception as e:  # a failure of the harness, not a refusal
            if os.environ.get("KV_CMP_DEBUG"):
                traceback.print_exc()
            rows.append((lname, "harness_error", first_line(e), ""))
            continue
        k = kv_figures(kv, config, layout, v.get("budgets", {}))
        rows.append((lname, "refused", v["refused"] is not None, k["refused"] is not None))
        rows.append((lname, "refused.why", v["refused"] or "", k["refused"] or ""))
        if v["refused"] or k["refused"]:
            continue
        for q in v:
            if q in ("refused", "budgets", "trace"):
                continue
            rows.append((lname, q, v[q], k.get(q, "")))
        for q in k:
            if q not in v and q != "refused":
                rows.append((lname, q, "", k[q]))
    return rows


def family(config):
    with open(config) as f:
        d = json.load(f)
    return d.get("model_type", "?")


# Each mismatch class found, with its reading in vLLM 0.33's source.
CAUSES = {
    "mla_fp8_block": (
        "MLA with `--kv-cache-dtype fp8` on SM 9.0: vLLM's MLA backend becomes "
        "FlashMLA, whose only kernel block is 64, so the block size is 64, not 16. "
        "`platforms/cuda.py` `_get_backend_priorities` lists FLASH_ATTN_MLA before "
        "FLASHMLA for SM 9.0, but FLASH_ATTN_MLA's `supported_kv_cache_dtypes` "
        "(`v1/attention/backends/mla/flashattn_mla.py`) are auto/float16/bfloat16 "
        "only. FLASHMLA's `get_supported_kernel_block_sizes` is `[64]` "
        "(`mla/flashmla.py`), and `Platform.update_block_size_for_backend` "
        "(`_preferred_block_size_for_backends`) sets `cache_config.block_size` to 64. "
        "kv keeps 16: its page and block are 1/4 of vLLM's and its blocks per "
        "request 4x. Bytes per request agree up to the last block's rounding (equal "
        "on the lengths measured), but the edge budget starts in kv where vLLM "
        "refuses, and the block counts of the start-up differ."
    ),
    "glm_kv_heads": (
        "model_type `glm` (GLM-4 in transformers form, GlmForCausalLM, which vLLM "
        "0.33 serves through its Transformers backend) takes its KV heads from "
        "`num_key_value_heads`, one of the generic keys in "
        "`transformers_utils/config.py`. kv's family table puts `glm` beside "
        "`chatglm` (`KvHeads::ChatGlm`: `multi_query_group_num`, else "
        "`num_attention_heads`), so it counts 32 heads where there are 2, 16x every "
        "byte. Its DCP check then refuses, because 32 KV heads are not below tp 8."
    ),
    "no_length_key": (
        "The config.json has no length key. vLLM's loader reads the default of "
        "the transformers config class (MistralConfig 131072, JambaConfig 262144, "
        "Qwen3NextConfig 32768, WhisperConfig max_target_positions 448). Where the "
        "class has none (Mamba, Mamba2, FalconMamba), vLLM assumes 2048 "
        "(`config/model.py` `_get_and_verify_max_len`: \"Assuming the model's "
        "maximum length is 2048\"). kv exits 1 (\"cannot read max_model_len\") "
        "unless given --positions."
    ),
    "other": "Not classified: read the rows.",
}


# What the counts do not show, as read on the last full run.
NOTES = """\
## Notes

- Every family counted took the full path: its vLLM model class built on the
  meta device per pipeline stage, and the worker's own `get_kv_cache_spec`.
  None fell back to specs built by hand.
- Not built by this harness (their rows are not counted): dots1, which vLLM
  0.33 resolves to its Transformers backend (`models/registry.py`
  `_try_resolve_transformers`, the `model_impl` auto fallback) because the
  installed transformers 5.20 has `Dots1ForCausalLM`; building that on meta
  fails. kv exits 1 on it as an architecture vLLM 0.33 no longer serves,
  while vLLM resolves it to that backend instead of refusing (whether the
  backend then serves it on a GPU is not measured here; MiniMaxText01, which
  transformers lacks, is refused by both). hunyuan-dense, kimi-linear and lfm2-moe are
  transformers 5 defaults in a key layout vLLM 0.33's classes do not read, and
  hy3-fp8 is an example trimmed of keys its MoE needs.
- Decode context parallelism agrees wherever vLLM accepts it: MLA
  (DeepSeek), few-KV-head models at tp 8 (Qwen3-Next's hybrid included),
  dcp 2 and 4. vLLM refuses it for GQA with tp not above the KV heads, and
  with sliding windows (`kv_cache_interface.py` `SlidingWindowSpec`), as kv does.
"""


def cause_of(cfg, fam, lay, q, v, k, why_kv):
    """The CAUSES key of one mismatched row (why_kv: kv's refusal, if any)."""
    if "cannot read max_model_len" in why_kv:
        return "no_length_key"
    if fam in ("deepseek_v2", "deepseek_v3", "kimi_k2") and " fp8" in lay:
        return "mla_fp8_block"
    if fam == "glm":
        return "glm_kv_heads"
    return "other"


# Quantities that describe rather than measure: not counted in the agreement.
INFORMATIONAL = {"refused.why", "harness_error"}


def summarise(rows, out_dir, seconds, cmdline):
    by_family = defaultdict(lambda: [0, 0])
    by_quantity = defaultdict(lambda: [0, 0])
    examples = defaultdict(list)
    for cfg, fam, lay, q, v, k, eq in rows:
        if q in INFORMATIONAL:
            continue
        by_family[fam][1] += 1
        qc = q.split(".", 1)[1] if q.startswith("pp") else q
        qc = qc.replace("[roomy]", "").replace("[edge]", "").replace("[third]", "")
        by_quantity[qc][1] += 1
        if eq:
            by_family[fam][0] += 1
            by_quantity[qc][0] += 1
        else:
            examples[(fam, qc)].append((cfg, lay, q, v, k))
    agree = sum(a for a, _ in by_family.values())
    total = sum(t for _, t in by_family.values())
    f = io.StringIO()
    f.write("# kv estimate against vLLM 0.33.0's own objects\n\n")
    f.write(f"`{cmdline}` ({seconds / 60:.1f} min).\n\n")
    counted = {r[0] for r in rows if r[3] not in INFORMATIONAL}
    built = {r[0] for r in rows if r[3] not in INFORMATIONAL and r[3] != "refused"}
    f.write(f"**{agree:,} of {total:,} quantities agree ({100 * agree / max(total, 1):.1f}%)**"
            f" over {len(counted)} configs ({len(built)} with figures; the rest refused "
            f"or not built by this harness, below).\n\n")
    f.write("## By family (model_type)\n\n| family | configs | agree | total | % |\n|---|---|---|---|---|\n")
    cfgs = defaultdict(set)
    for r in rows:
        cfgs[r[1]].add(r[0])
    for fam, (a, t) in sorted(by_family.items(), key=lambda x: (x[1][0] / max(x[1][1], 1), x[0])):
        f.write(f"| {fam} | {', '.join(sorted(cfgs[fam]))} | {a} | {t} | {100 * a / max(t, 1):.1f} |\n")
    f.write("\n## By quantity\n\n| quantity | agree | total | % |\n|---|---|---|---|\n")
    for q, (a, t) in sorted(by_quantity.items()):
        f.write(f"| {q} | {a} | {t} | {100 * a / max(t, 1):.1f} |\n")
    f.write("\n## Mismatches by family and quantity (count, one example)\n\n")
    f.write("| family | quantity | rows | example config | layout | vLLM | kv |\n|---|---|---|---|---|---|---|\n")
    for (fam, q), ex in sorted(examples.items()):
        cfg, lay, qq, v, k = ex[0]
        cut = lambda x: str(x).replace("|", "/").replace("\n", " ")[:160]
        f.write(f"| {fam} | {q} | {len(ex)} | {cfg} | {lay} ({qq}) | {cut(v)} | {cut(k)} |\n")
    why_kv = {(r[0], r[2]): str(r[5]) for r in rows if r[3] == "refused.why"}
    causes = defaultdict(list)
    for cfg, fam, lay, q, v, k, eq in rows:
        if not eq and q not in INFORMATIONAL:
            causes[cause_of(cfg, fam, lay, q, v, k, why_kv.get((cfg, lay), ""))].append(
                (cfg, lay, q, v, k)
            )
    f.write("\n## Mismatches by cause\n\n")
    for cause, ex in sorted(causes.items(), key=lambda x: -len(x[1])):
        cfgs_hit = sorted({e[0] for e in ex})
        cfg, lay, q, v, k = ex[0]
        cut = lambda x: str(x).replace("\n", " ")[:240]
        f.write(f"### {cause}: {len(ex)} rows, {len(cfgs_hit)} configs ({', '.join(cfgs_hit)})\n\n")
        f.write(f"{CAUSES[cause]}\n\nExample: {cfg}, {lay}, `{q}`: vLLM `{cut(v)}`, kv `{cut(k)}`.\n\n")
    f.write(NOTES)
    harness = defaultdict(list)
    for cfg, fam, lay, q, v, k, eq in rows:
        if q == "harness_error":
            harness[(cfg, str(v)[:200])].append(lay)
    if harness:
        f.write("\n## Layouts this harness could not build (not counted)\n\n")
        f.write("| config | layouts | error |\n|---|---|---|\n")
        for (cfg, err), lays in sorted(harness.items()):
            f.write(f"| {cfg} | {len(lays)} | {err.replace('|', '/')} |\n")
    with open(os.path.join(out_dir, "summary.md"), "w") as g:
        g.write(f.getvalue())
    return agree, total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kv", default="target/release/kv")
    ap.add_argument("--configs", default=os.path.join(HERE, "configs"))
    ap.add_argument("--out", default="/tmp/kv-vllm-compare")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per config")
    ap.add_argument("--summarise", action="store_true",
                    help="run nothing: rewrite results.csv and summary.md from OUT's parts")
    a = ap.parse_args()
    kv = os.path.abspath(a.kv)
    os.makedirs(a.out, exist_ok=True)
    work = os.path.join(a.out, "models")
    parts = os.path.join(a.out, "parts")
    os.makedirs(parts, exist_ok=True)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    load_stub_libcuda(os.path.join(a.out, "stub"))
    import logging

    logging.disable(logging.WARNING)
    install_hopper()
    import vllm.engine.arg_utils  # noqa: F401  (imported once, before forking)
    import vllm.v1.worker.gpu_model_runner  # noqa: F401

    every = sorted(glob.glob(os.path.join(a.configs, "*.json")))
    configs = every
    if a.only:  # runs these; the results gather every config's last run in OUT
        configs = [c for c in every if os.path.splitext(os.path.basename(c))[0] in a.only]
    start = time.time()
    running = {}
    queue = [] if a.summarise else list(configs)

    def reap():
        """Waits until one of this run's children ends (only ours: vLLM may
        have started helpers of its own)."""
        while True:
            for pid in list(running):
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    cfg, t0 = running.pop(pid)
                    print(f"{os.path.basename(cfg)}: {time.time() - t0:.0f} s, "
                          f"status {status}", flush=True)
                    return
                if time.time() - running[pid][1] > a.timeout:
                    os.kill(pid, 9)
            time.sleep(0.2)

    while queue or running:
        while queue and len(running) < a.jobs:
            cfg = queue.pop(0)
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    rows = compare_config(kv, cfg, work, a.quick)
                except BaseException as e:
                    rows = [("-", "harness_error", first_line(e), "")]
                    code = 1
                name = os.path.splitext(os.path.basename(cfg))[0]
                with open(os.path.join(parts, name + ".json"), "w") as g:
                    json.dump(rows, g, default=str)
                os._exit(code)
            running[pid] = (cfg, time.time())
        reap()
    rows = []
    for cfg in every:
        name = os.path.splitext(os.path.basename(cfg))[0]
        part = os.path.join(parts, name + ".json")
        if not os.path.exists(part):
            if cfg in configs:
                rows.append((name, family(cfg), "-", "harness_error", "no result", "", False))
            continue
        for lay, q, v, k in json.load(open(part)):
            rows.append((name, family(cfg), lay, q, v, k, str(v) == str(k)))
    with open(os.path.join(a.out, "results.csv"), "w", newline="") as g:
        w = csv.writer(g)
        w.writerow(["config", "family", "layout", "quantity", "vllm", "kv", "equal"])
        w.writerows(rows)
    seconds = time.time() - start
    if a.summarise:  # keep the run's own time and command line
        with open(os.path.join(a.out, "summary.md")) as g:
            g.readline(), g.readline()
            line = g.readline().strip().strip("`")
        command, seconds = line.rsplit("` (", 1)[0], float(line.rsplit("(", 1)[1].split()[0]) * 60
    else:
        command = " ".join(sys.argv)
    agree, total = summarise(rows, a.out, seconds, command)
    print(f"{agree} of {total} agree; {seconds:.0f} s; {a.out}/results.csv, summary.md")


if __name__ == "__main__":
    main()

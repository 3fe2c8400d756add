"""The architectures of vLLM 0.33's text and multimodal registry whose model
class lacks `SupportsPP` (`interfaces.supports_pp`): vLLM refuses
`pipeline_parallel_size > 1` for them (`ModelConfig.verify_with_parallel_config`),
and kv's `refusals::NO_PIPELINE_ARCHITECTURES` lists them. Prints those (False)
and the classes that do not import here (with the error). Not run by CI:

    /work/.venv-vllm/bin/python scripts/vllm/no_pipeline.py
"""
import json, sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare
compare.load_stub_libcuda("/tmp/kv-vllm-no-pp/stub")
compare.install_hopper()
from vllm.model_executor.models.registry import ModelRegistry, _TEXT_GENERATION_MODELS, _MULTIMODAL_MODELS
from vllm.model_executor.models.interfaces import supports_pp
import importlib
from vllm.model_executor.models import registry as r
out = {}
for arch in list(_TEXT_GENERATION_MODELS) + list(_MULTIMODAL_MODELS):
    mod, cls = {**_TEXT_GENERATION_MODELS, **_MULTIMODAL_MODELS}[arch]
    try:
        m = importlib.import_module(mod if mod.startswith("vllm.") else f"vllm.model_executor.models.{mod}")
        out[arch] = bool(supports_pp(getattr(m, cls)))
    except Exception as e:
        out[arch] = f"{type(e).__name__}: {e}"[:120]
for arch, value in sorted(out.items()):
    if value is not True:
        print(arch, value)

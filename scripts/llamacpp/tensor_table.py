"""Writes kv-engines/src/fit/llamacpp/tensor_names.rs from llama.cpp's own
tables (src/llama-arch.cpp: LLM_TENSOR_NAMES and LLM_TENSOR_INFOS): each
tensor name pattern with the layer llama.cpp places it in, or unused (op
GGML_OP_NONE: the loader ignores it).

    tensor_table.py SRC
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "kv-engines", "src", "fit", "llamacpp", "tensor_names.rs")


def main():
    src = sys.argv[1]
    text = open(f"{src}/src/llama-arch.cpp").read()
    names_block = text[text.index("LLM_TENSOR_NAMES = {"):]
    names_block = names_block[:names_block.index("\n};")]
    infos_block = text[text.index("LLM_TENSOR_INFOS = {"):]
    infos_block = infos_block[:infos_block.index("\n};")]
    names = re.findall(r'\{\s*(LLM_TENSOR_\w+),\s*"([^"]+)"\s*\}', names_block)
    infos = dict((e, (layer, op)) for e, layer, op in re.findall(
        r'\{\s*(LLM_TENSOR_\w+),\s*\{\s*LLM_TENSOR_LAYER_(\w+),\s*(GGML_OP_\w+)\s*\}\s*\}',
        infos_block))
    by_pattern = {}
    for enum, pattern in names:
        if enum not in infos:
            continue
        layer, op = infos[enum]
        kind = "Unused" if op == "GGML_OP_NONE" else {
            "INPUT": "Input", "OUTPUT": "Output", "REPEATING": "Repeating"}[layer]
        by_pattern.setdefault(pattern, set()).add(kind)
    rows = []
    for pattern, kinds in sorted(by_pattern.items()):
        kind = kinds.pop() if len(kinds) == 1 else "Ambiguous"
        rows.append(f'    ("{pattern}", TensorLayer::{kind}),')
    with open(OUT, "w") as f:
        f.write(
            "//! llama.cpp's tensor names and the layer each is placed in, written by\n"
            "//! `scripts/llamacpp/tensor_table.py` from `src/llama-arch.cpp`\n"
            "//! (`LLM_TENSOR_NAMES`, `LLM_TENSOR_INFOS`) at 0c1e57098. `%d` is a block\n"
            "//! (or expert) number. Do not edit by hand.\n\n"
            "use super::TensorLayer;\n\n"
            "/// Each name pattern, sorted, with its layer.\n"
            "pub(super) const TENSOR_NAMES: &[(&str, TensorLayer)] = &[\n")
        f.write("\n".join(rows) + "\n];\n")
    print(f"{len(rows)} patterns -> {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()

"""exps-codegen: straight-line CUDA kernels for the expressions of a PIL2 / pil2-stark provingKey."""

#: bumped whenever emitted text or its semantics change; part of every `.so`'s source hash
EMITTER_VERSION = "0.2.0"

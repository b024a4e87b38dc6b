"""exps-codegen: straight-line CUDA kernels for the expressions of a PIL2 / pil2-stark provingKey."""

#: bumped whenever emitted text or its semantics change; part of every `.so`'s source hash
#: (tests/test_emitter_version.py pins the emitted text of reference kernels to it)
EMITTER_VERSION = "0.25.0"

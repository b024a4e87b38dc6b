"""The build machinery: how the product's stages become placed `.so` files.

knobs (environment) -> fsutil (atomic writes) -> procs / buildlock / heartbeat (processes, lock,
progress) -> toolchain (nvcc) -> cache (object cache) -> autotune (chunking) -> actions (the doit
stage actions) -> preflight / front / report (what the front ends share). The doit plugin API is
`codegen.tasks`, the command line `codegen.cli`. Nothing here imports `codegen.check` or
`codegen.sample` (tests/test_architecture.py).
"""

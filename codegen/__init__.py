"""exps-codegen: straight-line CUDA kernels for the expressions of a PIL2 / pil2-stark provingKey.

Two versions, each with its own meaning:

- ``__version__`` is the package's version: what `pip show exps-codegen` and `exps-codegen
  --version` say, and what CHANGELOG.md is kept by. pyproject.toml reads it from here (its one
  source); it moves with any release, whatever changed (the command line, the build, the docs).
- ``EMITTER_VERSION`` is the version of the generated code. It is embedded in every `.so`
  (`exps_emitter_version()` and the identity string `exps-codegen status` reads) and is part of
  its source hash, so a `.so` of another emitter version is stale. It moves only when the emitted
  code or its semantics change, never for a release that leaves the kernels as they were.

`exps-codegen --version` prints both, e.g. `exps-codegen 0.26.0 (emitter 0.26.0)`.
"""

#: the package version (pyproject.toml's `dynamic = ["version"]` reads it from here)
__version__ = "0.26.0"

#: bumped whenever emitted text or its semantics change; part of every `.so`'s source hash
#: (tests/test_emitter_version.py pins the emitted text of reference kernels to it)
EMITTER_VERSION = "0.26.0"

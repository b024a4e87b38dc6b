"""Where the package's own files are: `TEMPLATES` (the Jinja2 sources of every emitted file, the
common headers and the generic launcher) and `SAMPLE` (the embedded sample provingKey's JSON).

From a checkout (an editable install, or the checkout on sys.path) they are its own templates/ and
provingkey-sample/, beside codegen/. A wheel installs copies of both inside the package,
codegen/templates/ and codegen/provingkey_sample/ (pyproject.toml maps those two data packages
onto the checkout's folders), and these names point there. Every reader of either goes through
this module; nothing else knows where they lie.
"""
from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _find(installed: str, checkout: str) -> Path:
    """The copy a wheel installed in the package, else the checkout's folder beside codegen/."""
    inside = _PACKAGE / installed
    return inside if inside.is_dir() else _PACKAGE.parent / checkout


TEMPLATES = _find("templates", "templates")
SAMPLE = _find("provingkey_sample", "provingkey-sample")


def sample_files() -> list[Path]:
    """The sample key's inputs, relative to SAMPLE: every `<base>.starkinfo.json` and
    `<base>.expressionsinfo.json` (never a `.so` a build placed beside them in a checkout)."""
    return sorted(p.relative_to(SAMPLE) for p in SAMPLE.rglob("*.json") if p.is_file())

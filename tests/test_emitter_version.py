"""EMITTER_VERSION is part of every `.so`'s source hash: a build with the same JSON and the same
version is up to date. So emitted text must not change without a bump, or an old `.so` of other
kernel text would pass as current.
This test pins the emitted text of reference kernels (every sample AIR, single and chunked, and
a real key's ConnectionNew) and the common files (the header every device TU includes, the field
arithmetic; since 0.6.0 also the launch table's types and the generic launcher) to the version: change the text, and it fails until the version is
bumped and the new digest pinned here."""
from __future__ import annotations

import hashlib
from pathlib import Path

from codegen import EMITTER_VERSION
from codegen.coverage import cover
from codegen.discover import discover, kernels
from codegen.emit import COMMON_FILES, TEMPLATES, KernelSource, render
from codegen.model import load_air
from codegen.plan import plan

from require import require

ROOT = Path(__file__).resolve().parent.parent
CONNECTION = ROOT.parent / "shared" / "pk" / "connection" / "provingKey"

#: EMITTER_VERSION -> sha256 of the reference kernels' emitted text
PINNED = {
    "0.3.0": "a3035f7f630c12bccd0ed76aeeb49c11df8dbda6ae65588f474e6f84fdd652f8",
    "0.4.0": "479dd74ad637f31488414f95bce9754bff4c17712d928a71abd937795ecfb922",
    "0.4.1": "9c82f7cb4e6044190414a2d62c261226ba599b7d87f704bac3ba0a0e2593529e",
    "0.4.2": "c144d9c8103618152c35c7d0273c2f1671f66d3a8e5159543d4afac975cf8e95",
    "0.4.3": "76c716e2273ff15ddcc63802b4d063c37c6ec2d595540f3ca6fc7e0f8a10cd04",
    "0.4.4": "741b6db307e1070a908d0774e12b0d9463f5f1f8875780d1edb0fb8b603f713f",
    "0.4.5": "16ad10adb846372e5e44b81f4210038acd0fa1a32b9fc9a9cf627563673214c9",
    "0.5.0": "b5b498878fd33d4577683c31168c13ae7ff05070e48355be10f9bcf57c8749f8",
    "0.6.0": "365bdc46d05e1ca7fe4a0da7d9b68431a4498c456aa9d3e2e630b85e73631e37",
    "0.7.0": "8c2a972934b342f67f61da06296f8f1e3fb6a56485ea6dd2ba7639e03ed2386e",
    "0.8.0": "9390da247599d8ea4ba57b1acd60a780c65a4cff495f84264daf91c4053fa034",
    "0.9.0": "9e7b9769fb27d08f0f2eb7730897689bbd24172b5e5f1729000bc850aa5e695b",
    "0.10.0": "4f9383740ca2c533afe64a09b55f25e856314143ea30e0fee987d4ed8733e770",
    "0.10.1": "7c711115895d8afc3faa7c98e71da0f3bf23d8a92749d09df62851c858683757",
    "0.10.2": "b32adb327a8475c1ed89f9feb7d98fe3075c54c248f4054db011d65d634b3414",
    "0.10.3": "4014219d8c5613ffb5e5e56d930d9e61743a189c27a5e95893120acddfc6fa7b",
    "0.11.0": "ee1b4dc85ac368c05f11c8f02d3afe55b0debcec0828174e3f9e1a9274360165",
    "0.12.0": "74d10f05b7e984316d491e88da8499bed80fb0fcd09ba0698bb4a61614c1156c",
    "0.13.0": "6006659c34f68904fd9db0ec503e0eba79a724d84f2cc38d61d2e57cbf92c536",
    "0.14.0": "9a27bcd5a3cfc02014bc13a211b8c7785171514124e1255762f3e18b96208d26",
    "0.15.0": "a8e26e345ea53c91a5ffa6985ac425bdfd36694496d008895512c87cfff43d98",
    "0.16.0": "3cae8711b293035ae8a0d9344214dcf1aae2f3f0dd337252118fd393efc02307",
    "0.17.0": "1dd6224f75dccec95ae75969631ea27b5ff8a96e7a5097e72fee410548ab4071",
    "0.17.1": "b7d04203d8a465bec60344420f98157ea817eefbad04ec5e8fd132874a37ad08",
    "0.17.2": "a895c8b37c1c6f2d59aafeb87e91b7bfdb2bc2d52f86082abd8bd98279e52984",
    "0.17.3": "b7575ecdbbe440d39e4baab2d39264f3debaa469a781429ac6f945cf41721e66",
    "0.17.4": "b0f5c5c33eae7547dda5d8584ab991beb930d78206b97e47df67f559ed16e4e6",
    "0.17.5": "6cba91de1cf075ee7d9984696be6ca4b8e56557b6ae8542edb3c660eaaf3e805",
    "0.18.0": "83c49d5c2a3a298dc6506e08225e0c9d641006fe11fca304adf5c7f7ba45cebb",
    "0.18.1": "cd23b2d4b1d586358ca981fab7b863b6f88272bc114f384bc2b9596d0ea0797a",
    "0.18.2": "0407da921bd56d18a2561b9680031b79179d112e1282f0d043784cdaf8a08c4d",
    "0.18.3": "f0d204005f26493ce7f6258837d2b620ceda36ccf017407592fcad428f373425",
    # the same kernels (the digest covers the version string the files carry): the tuner's register
    # sample changed (actions.representatives / fill_unprobed); the version is in every tune task's
    # config, so each Q is tuned again
    "0.18.4": "76713cb15fbb34f43caa71e7325e3e66f4b7e354ddfd3e366229962fd7350921",
    "0.19.0": "f245ba4c322fd4baa4e7dd40642b90dde386c24f59a1a50cf3f2da27438e4a4b",
    # the same kernels: the tuner's register sample grew (actions.PROBE_SAMPLE 3 -> 6), so each Q
    # is tuned again
    "0.19.1": "50b12c68bdc21cd0fa17de80e12f9575eabd5fe15f7c6e905efc5ceb569f910c",
    # a Q kernel's column and scratch addresses at byte offsets the launcher computes once per
    # launch (exps_offs, its last parameter; docs/DESIGN-column-offsets.md)
    "0.20.0": "cae34ab8838e4c903651557b5c040686d368d535a0f2ee3b141ea7289b793c29",
    # the trace-domain expression kernels' column addresses at byte offsets too (exps_offs, their
    # last parameter; a stage-1 column from the trace: EXPS_OFF_TRACE)
    "0.21.0": "a5aa03b5dac8a9b9b7625c834a7dfcdd6e44b9ad1c9463b5cc1a7a851b53e12c",
    # an expression kernel per shape: expressions that differ only in the columns they read share
    # one kernel (their own offsets in the launch table)
    "0.22.0": "4aa4cba5febd0b247c3d75c0fcfe73202f211703dad4648863c74d90a28a5b13",
    # a single Q kernel the tune bounds is emitted unbounded, and bounded as its TU's twin (made
    # from the first compile's PTX, as a chunked Q's): the single kernel's part gets the twin guard
    "0.23.0": "885f8702297d889ea57ff16ce975e3cd0cb0f64e123624567daf574cf3a45040",
    # expressions that differ only in their number literals share one kernel too (the literals that
    # differ read from exps_offs: EXPS_OFF_WORD entries the launcher copies)
    "0.24.0": "80130f9cbe0dbb3ada23fd04bd5472aa40039fb346ca28f724497d1176974aff",
    # each trace-domain expression through the IR passes (CSE, dead code) as Q is: the reference
    # kernels' expressions have nothing to fold (the version string changes the digest);
    # Intermediates', RangeCheck4's and Module's do
    "0.25.0": "be0fcf8f675d142e00014355ad867850fdeeb190964870bfba73284290d788e1",
    # a chunked Q's chunk kernels in TUs of about 1,024 ops, the last chunk alone, the expressions
    # apart (the kernels' text as it was)
    "0.26.0": "2e98f09cc0fc9a2afb777d2336b9d0dcc0447702ba20b2deb23b82bd96db6957",
}


def emitted_digest() -> str:
    require("pk")
    h = hashlib.sha256()
    for name in COMMON_FILES:     # (up to 0.4.5 the header was the only common file)
        h.update(name.encode() + b"\0" + (TEMPLATES / name).read_bytes() + b"\0")
    refs = [(ROOT / "provingkey-sample", (0, 64)), (CONNECTION, (0, 32))]
    for pk, chunkings in refs:
        for key, ps in sorted(kernels(discover(pk)).items()):
            si, ei = load_air(ps[0].starkinfo, ps[0].expressions)
            cov = cover(si, ei)
            if cov.q is None:
                continue
            # (since 0.18.0 also each single kernel bounded to 3 blocks per SM: autotune.bound_single)
            for c, mb in [(c, 0) for c in chunkings] + [(0, 3)]:
                ks = KernelSource(key, cov.q, plan(cov.q, c), cov.exprs, "0" * 64, min_blocks=mb)
                for name, text in sorted(render(ks).items()):
                    h.update(name.encode() + b"\0" + text.encode() + b"\0")
    return h.hexdigest()


def test_emitted_text_is_pinned_to_the_emitter_version() -> None:
    d = emitted_digest()
    assert PINNED.get(EMITTER_VERSION) == d, (
        f"the emitted text changed (digest {d}) under EMITTER_VERSION {EMITTER_VERSION}: bump "
        "EMITTER_VERSION in codegen/__init__.py and pin the new digest in tests/test_emitter_version.py")

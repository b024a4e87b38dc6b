"""Synthetic provingKeys: the committed provingkey-sample/ and keys for property and scale tests
(`python -m codegen.sample.synth provingkey-sample` regenerates the sample)."""

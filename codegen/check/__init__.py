"""Checks, never used by a build: the independent numpy oracle (gl64, reference), the `.bin`
decoder (binfile), and the host and GPU checks that compare generated kernels with the oracle
(hostcheck, gpucheck). The oracle keeps its own copy of every rule on purpose."""

"""Moved: the probes (`probed`) and the localisation of a difference are
hlogen.differential.origin's (`find_origin`, which replaced `first_divergence`). This name
stays for the fuzzer's triage until it imports from origin."""
from hlogen.differential.origin import Probe, probed

__all__ = ["Probe", "probed"]

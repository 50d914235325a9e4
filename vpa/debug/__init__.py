"""Diagnostics loaded only when `--profiling` asks for them (by the composition root, `vpa.app`).

Must not: be imported by components, the I/O layer, the pure layers or the simulator (an import contract
says so): production code runs without it.
"""

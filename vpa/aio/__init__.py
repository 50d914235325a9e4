"""Event-loop and process helpers every layer may use: task cancellation, pacing of long CPU work,
the garbage-collection policy.

Must not: import anything of vpa but the standard library and each other."""

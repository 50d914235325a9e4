"""`vpa report`'s pure parts: the rows, sums and last actions it computes, and its output formats.

Must not: do I/O or read the clock (the caller passes `generated_at`)."""

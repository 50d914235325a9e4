"""Pure decisions over model objects with an explicit `now`: no I/O, no logging, no metrics."""

"""`vpa sim` writes its log lines to stderr, so that its stdout holds only the `key: value` lines scripts
read (the API URL, the kubeconfig path, the version)."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

import pytest
import structlog

from vpa.sim.main import main


@pytest.mark.parametrize("argv", [["--port", "0"], ["agent", "--kubeconfig", "kc"]], ids=["sim", "agent"])
def test_a_log_line_goes_to_stderr_not_to_stdout(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    def serve(coro: Coroutine[Any, Any, int]) -> int:
        coro.close()  # not served: the line below stands for the hourly collection's log line
        structlog.get_logger("vpa.aio.heap").info("gc_full_collection", collected=3, seconds=0.4)
        return 0

    saved = structlog.get_config()
    monkeypatch.setattr("vpa.sim.main.uvloop.run", serve)
    try:
        assert main(argv) == 0
    finally:
        structlog.configure(**saved)
    out, err = capsys.readouterr()
    assert out == ""
    assert "gc_full_collection" in err

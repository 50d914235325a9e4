"""Test-suite wiring: every async test runs on uvloop, as production does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import uvloop


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> dict[str, Callable[[], Any]]:
    return {"uvloop": uvloop.new_event_loop}

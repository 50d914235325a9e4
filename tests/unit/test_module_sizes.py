"""The layout rules of `vpa/` that a reader relies on (issue 41): every module says what it owns in a
docstring, none is over 1,000 lines, and one over 600 says in that docstring why it stays one module
(a paragraph starting "Size:")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "vpa"
MODULES = sorted(PACKAGE.rglob("*.py"))
MOST_LINES = 1000
EXPLAINED_ABOVE = 600


def _id(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


@pytest.mark.parametrize("path", MODULES, ids=_id)
def test_a_module_is_small_enough_or_says_why(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    lines = text.count("\n")
    docstring = ast.get_docstring(ast.parse(text)) or ""
    assert docstring or lines == 0, f"{_id(path)}: no module docstring saying what it owns"
    assert lines <= MOST_LINES, f"{_id(path)}: {lines} lines, over {MOST_LINES}: split it"
    if lines > EXPLAINED_ABOVE:
        assert "Size:" in docstring, f"{_id(path)}: {lines} lines and no 'Size:' reason in its docstring"


def test_the_rule_sees_the_package() -> None:
    assert len(MODULES) > 100

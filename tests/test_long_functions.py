"""No product function is longer than 80 lines unless a `# long-function:` comment in it says why."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("taxonomy", "traces", "annotations", "mast_site")
LIMIT = 80
MARK = "# long-function:"


def long_functions(root: Path = ROOT) -> list[str]:
    """Every function of the product code over LIMIT lines (decorators included) without MARK."""
    found = []
    for package in PRODUCT:
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            source = path.read_text()
            lines = source.splitlines()
            for node in ast.walk(ast.parse(source)):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                start = min([d.lineno for d in node.decorator_list] + [node.lineno])
                n = node.end_lineno - start + 1
                if n > LIMIT and not any(MARK in line for line in lines[start - 1 : node.end_lineno]):
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({n} lines)")
    return found


def test_no_product_function_is_long_without_saying_why():
    assert long_functions() == [], "split these by idea, or say why in a `# long-function:` comment"


def test_the_check_finds_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "m.py").write_text(f"def long():\n{body}\n\n\ndef said():\n    {MARK} why\n{body}\n")
    for package in PRODUCT[:1] + PRODUCT[2:]:
        (tmp_path / package).mkdir()
    assert long_functions(tmp_path) == ["traces/m.py:1 long (81 lines)"]

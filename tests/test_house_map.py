"""docs/house.md names every product module (scripts/house_map.py writes it)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("house_map", ROOT / "scripts" / "house_map.py")
house_map = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(house_map)


def test_the_module_map_is_current():
    assert (ROOT / "docs" / "house.md").read_text() == house_map.render(), (
        "docs/house.md is out of date: run `python scripts/house_map.py` and commit it"
    )


def test_every_product_module_has_a_docstring():
    missing = [rel for rel, first in house_map.modules() if first == "(no docstring)"]
    assert missing == [], f"modules without a docstring: {missing}"

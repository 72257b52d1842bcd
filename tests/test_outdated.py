"""The outdated report (scripts/outdated.py) judges pins without the network: its verdict is pure."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("outdated", Path(__file__).parent.parent / "scripts" / "outdated.py")
outdated = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(outdated)


def test_two_minor_releases_behind_is_reported_with_the_count():
    line = outdated.verdict("celery", "5.5.3", ["5.7.0", "5.6.0", "5.5.3"])
    assert line == "celery 5.5.3: 2 minor releases behind 5.7.0"


def test_a_current_pin_is_not_reported():
    assert outdated.verdict("orjson", "3.13.0", ["3.13.0", "3.12.1"]) is None


def test_a_patch_behind_is_reported_and_a_held_line_says_why():
    line = outdated.verdict("Django", "5.2.8", ["6.0.1", "5.2.19", "5.2.8"])
    assert line.startswith("Django 5.2.8: behind 5.2.19; a newer major line exists (6.0.1)")
    assert "held: Django stays on its 5.2 LTS line" in line


def test_pins_read_extras_and_skip_comments(tmp_path):
    req = tmp_path / "r.txt"
    req.write_text("# comment\npsycopg[binary]==3.3.9\n-r other.txt\ncelery==5.7.0\n")
    assert outdated.pins(req) == [("psycopg", "3.3.9"), ("celery", "5.7.0")]

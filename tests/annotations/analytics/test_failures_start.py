"""Where failures start: agents per framework, the decisive step's position, modes at and after it."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from annotations.analytics.attribution import attribution_rows
from annotations.analytics.attribution_stats import following_modes, position_histogram
from traces.importing.service import traces_import

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "import" / "whowhen"


@pytest.fixture
def imported(project):
    traces_import(project=project, paths_or_files=sorted(FIXTURES.glob("ww-*.json")))
    return project


def test_rows_come_from_the_imported_ground_truth_when_no_round_decided(imported, manager):
    rows = attribution_rows(user=manager, project=imported)
    assert sorted((r["agent"], r["step"], r["n_steps"]) for r in rows) == [
        ("Coder", 1, 4),
        ("Planner", 0, 4),
        ("Planner", 2, 4),
    ]


def test_the_position_histogram_bins_relative_positions():
    rows = [{"step": 1, "n_steps": 4}, {"step": 2, "n_steps": 4}, {"step": 0, "n_steps": 4}, {"step": 3, "n_steps": 4}]
    hist = dict(position_histogram(rows))
    assert (hist["0–10%"], hist["30–40%"], hist["60–70%"], hist["90–100%"]) == (1, 1, 1, 1)
    assert sum(hist.values()) == 4


def test_following_modes_pair_the_decisive_mode_with_later_ones():
    rows = [
        {"modes": ["1.1"], "later_modes": ["3.3", "2.2"]},
        {"modes": ["1.1"], "later_modes": ["3.3"]},
        {"modes": []},
    ]
    assert following_modes(rows) == [("1.1", "3.3", 2), ("1.1", "2.2", 1)]


def test_the_page_and_its_csv(imported, manager, django_assert_max_num_queries):
    c = Client()
    c.force_login(manager)
    url = reverse("annotations:failures_start", args=[imported.slug])
    with django_assert_max_num_queries(14):
        html = c.get(url).content.decode()
    assert "3 failed traces with a decisive step" in html
    assert "Responsible agents" in html
    body = c.get(url, {"format": "csv", "chart": "agents"}).content.decode()
    assert body.splitlines()[1:] == ["AG2,Planner,2", "AG2,Coder,1"]


def test_viewers_do_not_see_imported_ground_truth_unless_suggestions_are_revealed(imported, viewer):
    assert attribution_rows(user=viewer, project=imported) == []

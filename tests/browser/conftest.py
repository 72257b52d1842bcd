"""Fixtures of the browser tests (the rest, the browser and the live server, are in conftest.py)."""

from __future__ import annotations

import pytest

from annotations.demo import seed_demo


@pytest.fixture
def demo(transactional_db, password):
    """The whole seeded demo, its manager signing in with ``password``."""
    ctx = seed_demo()
    ctx.users["manager"].set_password(password)
    ctx.users["manager"].save()
    return ctx

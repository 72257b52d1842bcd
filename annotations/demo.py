"""Demo data for `make demo`: users, a project, traces, labels, a finished round, a judge run and a
release. Every step is idempotent so re-running the demo is safe.

Each feature area contributes one seed function; ``demo_steps()`` lists them in order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.db import transaction

from traces.models import Membership, Project
from traces.projects.services import membership_set, project_get_or_create

DEMO_PASSWORD = "mast-demo-2026"  # noqa: S105 - printed for the local demo only
DEMO_USERS = [
    ("manager", "manager", "Maya Manager"),
    ("alice", "annotator", "Alice Annotator"),
    ("bob", "annotator", "Bob Annotator"),
    ("carol", "annotator", "Carol Annotator"),
    ("victor", "viewer", "Victor Viewer"),
]


@dataclass
class DemoContext:
    project: Project
    users: dict[str, object]
    log: list[str] = field(default_factory=list)
    # The base URL of the demo's stand-in LLM (scripts/demo.sh runs ``serve_demo_llm``); empty:
    # the judge seed runs one in this process while it seeds (annotations/judge/demo.py).
    llm_url: str = ""

    def say(self, line: str) -> None:
        self.log.append(line)


def seed_users_and_project() -> DemoContext:
    User = get_user_model()
    users = {}
    with transaction.atomic():
        for username, _role, full_name in DEMO_USERS:
            first, last = full_name.split(" ", 1)
            user, created = User.objects.get_or_create(
                username=username, defaults={"first_name": first, "last_name": last}
            )
            if created:
                user.set_password(DEMO_PASSWORD)
                user.save()
            users[username] = user
        users["manager"].is_staff = True
        users["manager"].save(update_fields=["is_staff"])
        project, _ = project_get_or_create(slug="demo", name="Demo: seven frameworks", by=users["manager"])
        if not project.description:
            project.description = (
                "Short traces from every supported framework, each with a failure you can spot, MAST-Data "
                "records and one long log, to try labelling, rounds, the LLM judge and releases."
            )
            project.save(update_fields=["description"])
        for username, role, _ in DEMO_USERS:
            membership_set(project=project, user=users[username], role=role)
    return DemoContext(project=project, users=users)


def demo_steps() -> list[Callable[[DemoContext], None]]:
    """Each feature area's seed function, in the order they run (each is idempotent).

    A new area adds its ``demo.seed`` here. Imported when called, so loading this module (for
    ``credentials()``) does not load every area."""
    # Imported when called (see the docstring): loading this module must not load every area.
    from annotations.analytics import demo as analytics_demo
    from annotations.codes import demo as codes_demo
    from annotations.corpus import demo as corpus_demo
    from annotations.judge import demo as judge_demo
    from annotations.judge import live_demo as live_policy_demo
    from annotations.labels import demo as labels_demo
    from annotations.monitoring import demo as monitoring_demo
    from annotations.releases import demo as releases_demo
    from annotations.rounds import attribution_demo
    from annotations.rounds import demo as rounds_demo
    from traces.importing import demo as importing_demo
    from traces.importing import demo_spans
    from traces.live import demo as live_demo
    from traces.viewer import demo as viewer_demo

    return [
        importing_demo.seed,
        importing_demo.seed_frameworks,
        demo_spans.seed,
        viewer_demo.seed,
        labels_demo.seed,
        rounds_demo.seed,
        rounds_demo.seed_blind_round,
        attribution_demo.seed,
        judge_demo.seed,
        releases_demo.seed,
        analytics_demo.seed,
        monitoring_demo.seed,
        codes_demo.seed,
        corpus_demo.seed,
        live_demo.seed,
        live_policy_demo.seed,
    ]


def seed_demo(*, llm_url: str = "") -> DemoContext:
    ctx = seed_users_and_project()
    ctx.llm_url = llm_url
    for step in demo_steps():
        step(ctx)
    return ctx


def credentials() -> list[tuple[str, str, str]]:
    return [(u, DEMO_PASSWORD, Membership.Role(role).label) for u, role, _ in DEMO_USERS]

"""The open-codes page, a code's page and a merge at project scale.

Run: .venv/bin/python bench/bench_open_codes.py [--traces 10000] [--codes 300] [--repeat 5] [--reuse]

Its own database (mast_bench_codes): one project on MAST v1, ``--traces`` traces with 4 steps
each, three annotators who each labelled every trace outside rounds (an annotation per trace,
1-3 open codes from a pool of ``--codes``, 1-2 modes present with evidence), so about 60,000
code uses. Times, in-process (Django test client), the list page as the manager and as an
annotator (whose view filters every use through the blind rule and anti-anchoring), the page of
the most used code, and merging a code into another (history row and revision per annotation).
Prints wall and CPU time of this process and the load average; asserts no time.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchdb import bench_env, create_bench_db, django_setup  # noqa: E402

DB = "mast_bench_codes"


def fill(n_traces: int, n_codes: int) -> None:
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from annotations.labels.services import rater_for_user
    from annotations.models import Annotation, ModeLabel, OpenCode
    from taxonomy.services import taxonomy_seed_mast
    from traces.models import Membership, Project, Step, Trace

    if Project.objects.filter(slug="bench").exists():
        print("reusing the filled database")
        return
    rng = random.Random(13)
    version = taxonomy_seed_mast()
    modes = list(version.modes.order_by("order"))
    User = get_user_model()
    with transaction.atomic():
        project = Project.objects.create(slug="bench", name="Bench", taxonomy_version=version)
        manager = User.objects.create(username="bench-manager")
        Membership.objects.create(project=project, user=manager, role=Membership.Role.MANAGER)
        annotators = [User.objects.create(username=f"bench-ann{i}") for i in range(3)]
        for u in annotators:
            Membership.objects.create(project=project, user=u, role=Membership.Role.ANNOTATOR)
        traces = Trace.objects.bulk_create(
            Trace(
                project=project,
                title=f"bench trace {k}",
                mas_name=("ChatDev", "MetaGPT", "AG2")[k % 3],
                format="plaintext",
                raw_text=f"trace {k}",
                size_bytes=10,
                content_hash=hashlib.sha256(f"codes-{k}".encode()).hexdigest(),
                n_steps=4,
            )
            for k in range(n_traces)
        )
        Step.objects.bulk_create(
            Step(
                trace=t,
                index=i,
                agent="Coder",
                content=f"Coder: step {i} of trace {t.pk} " * 8,
                line_start=i + 1,
                line_end=i + 1,
            )
            for t in traces
            for i in range(4)
        )
        codes = OpenCode.objects.bulk_create(OpenCode(project=project, name=f"code {c:03d}") for c in range(n_codes))
        anns = Annotation.objects.bulk_create(
            Annotation(trace=t, rater=rater_for_user(user=u), taxonomy_version=version, state="submitted", revision=2)
            for u in annotators
            for t in traces
        )
        through = Annotation.open_codes.through
        weights = [1 / (i + 1) for i in range(n_codes)]  # a few codes used a lot, most rarely
        through.objects.bulk_create(
            through(annotation_id=a.pk, opencode_id=c.pk)
            for a in anns
            for c in set(rng.choices(codes, weights=weights, k=rng.randint(1, 3)))
        )
        ModeLabel.objects.bulk_create(
            ModeLabel(
                annotation=a, mode=m, decision="present", evidence=[{"step": rng.randint(0, 3)}], rationale="seen"
            )
            for a in anns
            for m in rng.sample(modes, rng.randint(1, 2))
        )
    print(f"filled: {n_traces} traces, {len(anns)} annotations, {through.objects.count()} code uses")


def timed(fn, repeat: int) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append((time.perf_counter() - w) * 1000)
        cpus.append((time.process_time() - c) * 1000)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", type=int, default=10000)
    ap.add_argument("--codes", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--reuse", action="store_true", help="keep the database of an earlier run")
    args = ap.parse_args()
    env = bench_env(DB)
    create_bench_db(env, reuse=args.reuse)
    django_setup(env)
    fill(args.traces, args.codes)

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from annotations.codes.services import open_code_merge
    from annotations.labels.selectors import open_code_list
    from traces.models import Project

    with connection.cursor() as cur:
        cur.execute("ANALYZE")
    User = get_user_model()
    project = Project.objects.select_related("taxonomy_version__taxonomy").get(slug="bench")
    manager = User.objects.get(username="bench-manager")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; median of {args.repeat}")
    for who in ("bench-manager", "bench-ann0"):
        client = Client()
        client.force_login(User.objects.get(username=who))
        client.get("/p/bench/codes/")

        def get(client=client, path="/p/bench/codes/"):
            assert client.get(path).status_code == 200

        wall, cpu = timed(get, args.repeat)
        print(f"list page as {who}: {wall:.0f} ms wall, {cpu:.0f} ms CPU (this process)")
    top = open_code_list(project=project, user=manager).first()
    client = Client()
    client.force_login(manager)
    wall, cpu = timed(lambda: client.get(f"/p/bench/codes/{top.pk}/"), args.repeat)
    print(f"page of '{top.name}' ({top.n_uses} uses, 200 shown): {wall:.0f} ms wall, {cpu:.0f} ms CPU")
    codes = list(open_code_list(project=project, user=manager)[10:12])
    w, c = time.perf_counter(), time.process_time()
    n = open_code_merge(project=project, codes=[codes[0]], into=codes[1], by=manager)
    print(
        f"merge '{codes[0].name}' into '{codes[1].name}': {n} annotations in "
        f"{(time.perf_counter() - w) * 1000:.0f} ms wall, {(time.process_time() - c) * 1000:.0f} ms CPU"
    )
    print(f"load average after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

"""Benchmark: a MAST-sized calibration round stored in PostgreSQL.

1,642 traces x 14 modes x 4 raters (bulk-inserted), then:
  1. building the (raters x traces x modes) matrix from the database (round_label_matrix);
  2. round_report on it with 1,000 bootstrap resamples;
  3. the same resamples through a loop of scikit-learn's cohen_kappa_score (the agreement bench's
     function), for the speedup;
  4. the round report page once the report is stored: p50/p95 server time over 20 GETs
     (Django test client, logged-in manager).
Prints figures; asserts nothing about time (see STYLE.md).

    DATABASE_URL=postgres://root@127.0.0.1:5432/mast_rnd .venv/bin/python bench/bench_rounds.py [--keep]

The database must be migrated (``manage.py migrate``). The bench project ("bench-rounds") is
deleted at the end unless --keep.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mast_site.settings")
os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-0123456789abcdefghijklmnopqrstuvwxyz")
os.environ.setdefault("ALLOWED_HOSTS", "testserver,127.0.0.1,localhost")
os.environ.setdefault("MANIFEST_STATIC", "false")  # no collectstatic needed for the page timing

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
from bench_agreement import make_labels, sklearn_mean_kappas  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import Client  # noqa: E402
from django.urls import reverse  # noqa: E402

from annotations.models import Annotation, ModeLabel, Rater, Round, RoundAnnotator, RoundTrace  # noqa: E402
from annotations.rounds import agreement_report  # noqa: E402
from annotations.rounds.disagreements import round_disagreements  # noqa: E402
from annotations.rounds.selectors import round_label_matrix  # noqa: E402
from annotations.rounds.services import REPORT_N_BOOT, REPORT_SEED, agreement_report_get  # noqa: E402
from taxonomy.services import taxonomy_seed_mast  # noqa: E402
from traces.models import Membership, Project, Trace  # noqa: E402

SLUG = "bench-rounds"


def build(n_traces: int, seed: int) -> tuple[Round, object, np.ndarray]:
    User = get_user_model()
    version = taxonomy_seed_mast()
    Project.objects.filter(slug=SLUG).delete()
    with transaction.atomic():
        project = Project.objects.create(slug=SLUG, name="Bench: rounds", taxonomy_version=version)
        manager, _ = User.objects.get_or_create(username="bench_manager", defaults={"is_active": True})
        Membership.objects.create(project=project, user=manager, role="manager")
        users = []
        for i in range(4):
            u, _ = User.objects.get_or_create(username=f"bench_rater_{i + 1}")
            Membership.objects.create(project=project, user=u, role="annotator")
            Rater.objects.get_or_create(user=u, defaults={"kind": "human", "name": u.username})
            users.append(u)
        traces = Trace.objects.bulk_create(
            [
                Trace(
                    project=project,
                    title=f"bench trace {i}",
                    mas_name=["ChatDev", "MetaGPT", "AG2", "AppWorld"][i % 4],
                    format="plaintext",
                    raw_text=f"trace {i}",
                    size_bytes=10,
                    content_hash=hashlib.sha256(f"bench-{i}".encode()).hexdigest(),
                )
                for i in range(n_traces)
            ],
            batch_size=2000,
        )
        rnd = Round.objects.create(project=project, name="Bench round", taxonomy_version=version, state="review")
        RoundAnnotator.objects.bulk_create(RoundAnnotator(round=rnd, user=u) for u in users)
        RoundTrace.objects.bulk_create(
            [RoundTrace(round=rnd, trace=t, order=i) for i, t in enumerate(traces)], batch_size=5000
        )
        labels = make_labels(n_traces, seed)
        modes = list(version.modes.order_by("order", "code").values_list("id", flat=True))
        raters = [Rater.objects.get(user=u) for u in users]
        anns = Annotation.objects.bulk_create(
            [
                Annotation(trace=t, rater=r, taxonomy_version=version, round=rnd, state="submitted", revision=1)
                for r in raters
                for t in traces
            ],
            batch_size=5000,
        )
        rows = []
        for k, a in enumerate(anns):
            ri, ti = divmod(k, n_traces)
            for j, mode_id in enumerate(modes):
                v = labels[ri, ti, j]
                if not np.isnan(v):
                    rows.append(ModeLabel(annotation=a, mode_id=mode_id, decision="present" if v else "absent"))
        ModeLabel.objects.bulk_create(rows, batch_size=10000)
    return rnd, manager, labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-traces", type=int, default=1642)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--gets", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the bench project afterwards")
    parser.add_argument("--no-sklearn", action="store_true", help="skip the (slow) scikit-learn loop")
    args = parser.parse_args()
    print(f"database: {connection.vendor} {connection.settings_dict['NAME']}")

    t0 = time.perf_counter()
    rnd, manager, labels = build(args.n_traces, args.seed)
    n_labels = ModeLabel.objects.filter(annotation__round=rnd).count()
    print(
        f"stored: 4 raters x {args.n_traces} traces x 14 modes, {n_labels:,} mode labels "
        f"(bulk insert {time.perf_counter() - t0:.1f} s)"
    )

    build_times, report_times = [], []
    for _ in range(args.repeat):
        t = time.perf_counter()
        m = round_label_matrix(round=rnd)
        build_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        report = agreement_report.round_report(
            m.labels, raters=m.raters, modes=m.modes, categories=m.categories, n_boot=REPORT_N_BOOT, seed=REPORT_SEED
        )
        report_times.append(time.perf_counter() - t)
    assert np.array_equal(np.isnan(m.labels), np.isnan(labels)) and np.array_equal(
        np.nan_to_num(m.labels, nan=-1), np.nan_to_num(labels, nan=-1)
    ), "the matrix read back differs from what was stored"
    b, r = min(build_times), min(report_times)
    print(f"matrix from the DB:         best {b:.3f} s, median {statistics.median(build_times):.3f} s")
    print(f"round_report, {REPORT_N_BOOT} resamples: best {r:.3f} s, median {statistics.median(report_times):.3f} s")
    print(f"report computation total:   {b + r:.3f} s (target < 2 s)")

    indices = agreement_report.bootstrap_indices(args.n_traces, REPORT_N_BOOT, REPORT_SEED)
    if args.no_sklearn:
        indices = indices[:0]
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        replicates = sklearn_mean_kappas(m.labels, indices)
    slow = time.perf_counter() - t
    if args.no_sklearn:
        replicates = [0.0]
    print(
        f"sklearn cohen_kappa_score loop, same {REPORT_N_BOOT} resamples x 6 pairs: {slow:.2f} s "
        f"-> speedup {slow / r:.0f}x (report only), {slow / (b + r):.0f}x (matrix + report)"
    )
    tail = (1 - 0.95) / 2
    print(
        f"same CI? ours {report['mean_pairwise_kappa']['ci']} "
        f"vs sklearn {np.quantile(replicates, [tail, 1 - tail]).tolist()}"
    )

    agreement_report_get(round=rnd)  # store it
    client = Client()
    client.force_login(manager)
    url = reverse("annotations:round_report", kwargs={"slug": SLUG, "pk": rnd.pk})
    client.get(url, secure=True)
    times = []
    for _ in range(args.gets):
        t = time.perf_counter()
        resp = client.get(url, secure=True)
        times.append(time.perf_counter() - t)
        assert resp.status_code == 200, resp.status_code
    times.sort()
    p95 = times[min(len(times) - 1, int(round(0.95 * len(times))) - 1)]
    print(
        f"report page (stored report), {args.gets} GETs: p50 {statistics.median(times) * 1000:.0f} ms, "
        f"p95 {p95 * 1000:.0f} ms (target < 300 ms)"
    )

    url = reverse("annotations:round_disagreements", kwargs={"slug": SLUG, "pk": rnd.pk}) + "?status=all"
    assert client.get(url, secure=True).status_code == 200
    n_dis = len(round_disagreements(round=rnd, user=manager, status="all"))
    times = []
    for _ in range(10):
        t = time.perf_counter()
        client.get(url, secure=True)
        times.append(time.perf_counter() - t)
    times.sort()
    print(
        f"disagreements page (first 20 of {n_dis:,} disagreements), 10 GETs: "
        f"p50 {statistics.median(times) * 1000:.0f} ms, max {times[-1] * 1000:.0f} ms"
    )

    if not args.keep:
        Project.objects.filter(slug=SLUG).delete()


if __name__ == "__main__":
    main()

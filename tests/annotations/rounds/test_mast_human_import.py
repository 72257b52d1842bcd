"""Importing MAST-Data's human-labelled file rebuilds the MAST authors' calibration rounds, and
the stored reports reproduce the kappa figures computed straight from the file's own labels."""

from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from annotations.models import Adjudication, AgreementReport, Annotation, Round
from annotations.rounds.agreed import agreed_labels
from annotations.rounds.imported import split_mode
from taxonomy.models import TaxonomyVersion
from traces.importing.results import TraceImportError
from traces.importing.service import traces_import

FILE = "mast/human_annotations/mad_human_labelled_19records.json"
ANNOTATORS = ["annotator_1", "annotator_2", "annotator_3"]


@pytest.fixture
def records(shared_dir):
    with open(shared_dir / FILE) as f:
        return json.load(f)


@pytest.fixture
def imported(project, manager, shared_dir):
    traces_import(project=project, paths_or_files=[shared_dir / FILE], by=manager)
    return project


def _value(v):
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else int(bool(v))


def expected_pair_kappas(records) -> dict[str, dict[tuple[str, str], float]]:
    """Straight from the JSON: per round, Cohen's kappa per annotator pair pooled over every
    (trace, mode) both annotators judged."""
    units = defaultdict(lambda: defaultdict(list))
    for rec in records:
        for item in rec["annotations"]:
            units[rec["round"]]["_"].append(tuple(_value(item[a]) for a in ANNOTATORS))
    out = {}
    for rnd, by in units.items():
        rows = by["_"]
        out[rnd] = {}
        for i, j in itertools.combinations(range(3), 2):
            a = [r[i] for r in rows if r[i] is not None and r[j] is not None]
            b = [r[j] for r in rows if r[i] is not None and r[j] is not None]
            out[rnd][(ANNOTATORS[i], ANNOTATORS[j])] = cohen_kappa_score(a, b)
    return out


def test_one_closed_round_per_round_value(imported, records):
    rounds = {r.name: r for r in Round.objects.filter(project=imported)}
    assert set(rounds) == {r["round"] for r in records}
    assert {r.state for r in rounds.values()} == {"closed"}
    for name, rnd in rounds.items():
        n = sum(1 for r in records if r["round"] == name)
        assert rnd.round_traces.count() == n, name  # incl. the ChatDev trace shared by Rounds 1 and 2
        assert sorted(rnd.annotators.values_list("username", flat=True)) == [
            "mast_annotator_1",
            "mast_annotator_2",
            "mast_annotator_3",
        ]


def test_each_round_gets_its_own_published_taxonomy_version(imported):
    sizes = {r.name: r.taxonomy_version.modes.count() for r in Round.objects.filter(project=imported)}
    assert sizes == {"Round 1": 18, "Round 2": 17, "Round 3": 17, "Generlazability": 14}
    versions = TaxonomyVersion.objects.filter(taxonomy__name="MAST-Data rounds")
    assert versions.count() == 4 and all(v.is_published for v in versions)


def test_mode_names_are_split_from_their_definitions(imported):
    v = Round.objects.get(project=imported, name="Generlazability").taxonomy_version
    mode = v.modes.get(code="2.2")
    assert mode.name == "Fail to ask for clarification (between agents)"
    assert mode.definition.startswith("Inability to request additional information")
    assert v.modes.get(code="1.3").name == "Step Repetition"


def test_annotator_users_cannot_log_in(imported):
    from django.contrib.auth import get_user_model

    for user in get_user_model().objects.filter(username__startswith="mast_annotator_"):
        assert not user.is_active and not user.has_usable_password()
        assert user.memberships.get(project=imported).role == "annotator"


def test_annotations_are_submitted_and_missing_judgements_left_out(imported, records):
    assert not Annotation.objects.filter(round__project=imported).exclude(state="submitted").exists()
    nan_record = next(r for r in records if any(_value(a["annotator_3"]) is None for a in r["annotations"]))
    ann = Annotation.objects.get(
        round__project=imported,
        rater__user__username="mast_annotator_3",
        trace__external_id=str(nan_record["trace_id"]),
    )
    assert ann.labels.count() == sum(1 for a in nan_record["annotations"] if _value(a["annotator_3"]) is not None)


def test_consensus_is_the_majority_noted_as_imported(imported, records):
    rec = records[3]  # Round 1 ChatDev
    rnd = Round.objects.get(project=imported, name=rec["round"])
    for item in rec["annotations"]:
        code, _, _ = split_mode(item["failure mode"])
        votes = [_value(item[a]) for a in ANNOTATORS]
        adj = Adjudication.objects.get(round=rnd, trace__external_id=str(rec["trace_id"]), mode__code=code)
        assert adj.decision == ("present" if sum(votes) >= 2 else "absent")
        assert adj.basis == "majority" and "Imported from MAST-Data" in adj.note


def test_stored_reports_reproduce_the_files_kappas(imported, records):
    expected = expected_pair_kappas(records)
    for rnd in Round.objects.filter(project=imported):
        data = AgreementReport.objects.get(round=rnd, rater_set="humans").data
        got = {(p["a"], p["b"]): p["kappa"]["value"] for p in data["pairwise"]}
        for (a, b), kappa in expected[rnd.name].items():
            ours = got[(a.replace("annotator_", "mast_annotator_"), b.replace("annotator_", "mast_annotator_"))]
            assert ours == pytest.approx(kappa, abs=1e-12), (rnd.name, a, b)
        mean = float(np.mean(list(expected[rnd.name].values())))
        assert data["mean_pairwise_kappa"]["value"] == pytest.approx(mean, abs=1e-12)


def test_closed_imported_rounds_give_agreed_labels(imported, records):
    rows = agreed_labels(project=imported)
    n_units = sum(len(r["annotations"]) for r in records)
    assert len(rows) == n_units and {r.basis for r in rows} == {"majority"}


def test_importing_the_same_file_again_changes_nothing(imported, project, manager, shared_dir):
    before = (
        Round.objects.count(),
        Annotation.objects.count(),
        Adjudication.objects.count(),
        TaxonomyVersion.objects.count(),
    )
    traces_import(project=project, paths_or_files=[shared_dir / FILE], by=manager)
    after = (
        Round.objects.count(),
        Annotation.objects.count(),
        Adjudication.objects.count(),
        TaxonomyVersion.objects.count(),
    )
    assert before == after


def test_a_record_with_a_different_mode_list_aborts_the_import(project, manager, records, tmp_path):
    bad = json.loads(json.dumps(records[:2]))
    bad[1]["annotations"] = bad[1]["annotations"][:-1]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(TraceImportError, match="failure-mode list differs"):
        traces_import(project=project, paths_or_files=[path], by=manager)
    assert not Round.objects.filter(project=project).exists() and not project.traces.exists()


def test_split_mode_keeps_a_name_without_definition():
    assert split_mode("3.3 Incorrect Verification") == ("3.3", "Incorrect Verification", "Incorrect Verification")


def test_print_per_round_mean_kappa(imported, capsys):
    """Not an assertion of values: prints the figures for the report (see the README)."""
    for rnd in Round.objects.filter(project=imported).order_by("id"):
        k = AgreementReport.objects.get(round=rnd).data["mean_pairwise_kappa"]
        with capsys.disabled():
            print(f"\n{rnd.name}: mean pairwise kappa {k['value']:.3f} ci={k['ci']}")
    assert True

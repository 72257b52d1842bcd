"""The one definition of the project's agreed labels, in its row form and its folded form."""

from annotations.rounds.agreed import (
    agreed_adjudications,
    agreed_fold,
    agreed_label_masks,
    agreed_labels,
    majority_vote,
)
from taxonomy.mapping import VersionMapper
from taxonomy.selectors import versions_mode_codes
from tests.annotations.releases_factories import closed_round, make_trace


def folded(project, version):
    modes = versions_mode_codes(version_ids={version.pk})
    mapper = VersionMapper(version)
    rows = agreed_label_masks(adjudications=agreed_adjudications(project=project), modes=modes, bases=True)
    masks = agreed_fold(rows, modes=modes, mapper=mapper, bases=True)
    return masks, mapper.codes


def test_rows_and_masks_agree_and_the_latest_closed_round_wins(project, mast_version):
    t = make_trace(project)
    closed_round(project, mast_version, {t: {"1.1"}})
    closed_round(project, mast_version, {t: {"1.2"}}, basis="unanimous")
    closed_round(project, mast_version, {t: {"1.3"}}, state="review")  # in progress: never agreed
    rows = {r.mode_code: (r.decision, r.basis) for r in agreed_labels(project=project)}
    masks, codes = folded(project, mast_version)
    from_masks = {
        c: ("present" if (masks.present[t.pk] >> i) & 1 else "absent", masks.basis(t.pk, i))
        for i, c in enumerate(codes)
        if (masks.known[t.pk] >> i) & 1
    }
    assert rows == from_masks
    assert rows["1.2"] == ("present", "unanimous") and rows["1.1"] == ("absent", "unanimous")
    assert rows["1.3"][0] == "absent"


def test_majority_vote_is_strict_and_can_require_voters():
    assert majority_vote([1, 1, 0]) == 1
    assert majority_vote([1, 0]) is None
    assert majority_vote([]) is None
    assert majority_vote([0]) == 0
    assert majority_vote([0], min_votes=2) is None

"""Which traces a judge run's scores must leave out, and why: a judge is not scored on traces whose
reference labels it saw.

* A prompt with few-shot examples (``JudgeRun.few_shot``): the example traces went into the
  prompt with their agreed labels (``runs._few_shot``, frozen in ``prompt_extras["few_shot"]``),
  so they are left out of that run's scores.
* The baseline classifier: its answers on its own training traces are cross-fitted (each trace
  predicted by a model of the other folds, ``providers/baseline_model.cross_fit``), so nothing is
  left out. A baseline run made before cross-fitting (no ``scores`` in its ``baseline_info``)
  answered its training traces in-sample: those traces are left out.

Every reader of a run's scores calls ``scored_trace_exclusions`` (judge quality here; Compare
judges too), and the pages say how many traces were left out and why.
"""

from __future__ import annotations

from annotations.models import JudgeRun


def scored_trace_exclusions(run: JudgeRun) -> tuple[set[int], str]:
    """(trace ids to leave out of ``run``'s scores, why); (empty set, "") when none."""
    if run.provider == JudgeRun.Provider.BASELINE:
        info = run.baseline_info or {}
        if info.get("scores") or not info.get("training_trace_ids"):
            return set(), ""
        ids = {int(t) for t in info["training_trace_ids"]}
        why = (
            f"{len(ids)} training trace(s) of this baseline are left out: the run predates cross-fitting "
            "and predicted them with a model trained on their labels"
        )
        unrecorded = int(info.get("n_train") or 0) - len(ids)
        if unrecorded > 0:
            why += f"; {unrecorded} more training trace(s) were not recorded and are still in (in-sample)"
        return ids, why
    examples = {int(f["trace_id"]) for f in (run.prompt_extras or {}).get("few_shot", []) if "trace_id" in f}
    if run.few_shot and examples:
        return examples, (
            f"{len(examples)} trace(s) shown to the judge as few-shot examples, with their agreed labels, "
            "are left out of its scores"
        )
    return set(), ""


def cross_fit_note(run: JudgeRun) -> str:
    """What a page says of a cross-fitted baseline's scores ("" for any other run)."""
    info = run.baseline_info or {}
    if run.provider != JudgeRun.Provider.BASELINE or not info.get("scores"):
        return ""
    k = (info.get("cross_fit") or {}).get("k", 5)
    return (
        f"scores on training traces are cross-fitted: each trace was predicted by a model that did not see it (k={k})"
    )

"""Failure attribution in a round: which agent at which step caused the failure.

The room of attribution on the round side; the rest of the subsystem lives where its screen does
(a rater's attribution with her labels, the judge's with the judge, "who fails" in analytics).
docs/subsystems/attribution.md walks the whole path.

- ``agreement``: agreement on the responsible agent and the decisive step (pure numpy).
- ``consensus``: the round's agreed attributions, disagreements and their adjudication.
- ``report``: the attribution section of the round report page.
"""

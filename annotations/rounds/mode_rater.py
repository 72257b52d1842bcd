"""The round report's mode x rater view (pure presentation over the stored report).

For each mode and each rater: the rater's prevalence (share of the round's traces she marked
present; 0 where she marked none) and her Cohen's kappa against the others on that mode, the
mean of the defined pairwise kappas she is part of (undefined when none is: e.g. every pair
constant on a rare mode). With six raters this stays one compact table (modes down, raters
across) instead of 15 pair columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from annotations.rounds.report import kappa_colour, number


def stored_prevalence(data: dict[str, Any]) -> dict[tuple[str, str], float]:
    """{(rater, mode code): share} from a stored report's ``rater_prevalence`` (computed with it)."""
    return {(r, code): share for r, modes in data.get("rater_prevalence", {}).items() for code, share in modes.items()}


def mode_rater_view(
    data: dict[str, Any], *, prevalence: Mapping[tuple[str, str], float], names: Mapping[str, str]
) -> dict[str, Any]:
    raters = list(data.get("raters", []))
    rows = []
    for block in data.get("per_mode", []):
        code = block["mode"]
        cells = []
        for r in raters:
            ks = [
                v
                for pw in block.get("pairwise", [])
                if r in (pw["a"], pw["b"]) and (v := number((pw.get("kappa") or {}).get("value"))) is not None
            ]
            kappa = sum(ks) / len(ks) if ks else None
            bg, fg = kappa_colour(kappa)
            prev = prevalence.get((r, code), 0.0)
            cells.append(
                {
                    "rater": r,
                    "kappa": kappa,
                    "n_pairs": len(ks),
                    "prevalence": prev,
                    "prevalence_text": f"{100 * prev:.0f}%",
                    "bg": bg,
                    "fg": fg,
                }
            )
        rows.append({"code": code, "name": names.get(code, ""), "cells": cells})
    return {"raters": raters, "rows": rows}

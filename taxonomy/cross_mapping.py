"""Mappings between versions that were not drafted from one another (``CrossMapping`` rows).

* ``match_modes`` (pure) pairs the modes of two versions by name: names are compared after
  lower-casing, dropping parenthesised qualifiers ("(between agents)"), punctuation, small words
  (of, to, for, ...) and a plural "s"; two names match when their words are the same set, or one
  set holds the other with at least two words in common, or the strings are 85% alike (typos such
  as "Witholding"). A mode maps only to a mode it matches one to one: where two candidates tie,
  it is left unmapped rather than guessed. Same code and matching name is "same"; another code
  with a matching name is "rename"; a source mode without a match is "remove" (its labels are
  counted as dropped), a target mode without one is "add" (unknown).
* ``cross_mapping_automap`` writes that match between two versions (an imported version onto the
  project's working version); ``cross_mapping_set`` stores a manager's edited mapping. Both
  replace every row of the pair in one transaction: a mapping is always whole.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from django.core.exceptions import ValidationError
from django.db import transaction

from taxonomy.models import CrossMapping, ModeMapping, TaxonomyVersion
from taxonomy.selectors import version_modes

K = ModeMapping.Kind
SMALL_WORDS = {"a", "an", "and", "or", "of", "the", "to", "for", "from", "in", "on", "with", "by"}


def name_words(name: str) -> tuple[str, ...]:
    text = re.sub(r"\([^)]*\)", " ", name.lower())
    words = re.findall(r"[a-z0-9]+", text.replace("'", ""))
    return tuple(w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words if w not in SMALL_WORDS)


def names_match(a: str, b: str) -> bool:
    wa, wb = name_words(a), name_words(b)
    if not wa or not wb:
        return False
    sa, sb = set(wa), set(wb)
    if sa == sb:
        return True
    if (sa <= sb or sb <= sa) and len(sa & sb) >= 2:
        return True
    return difflib.SequenceMatcher(a=" ".join(wa), b=" ".join(wb), autojunk=False).ratio() >= 0.85


def match_modes(source: list[tuple[str, str]], target: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """(code, name) lists -> mapping rows (old_code, new_code, kind); see the module doc (pure)."""
    cands = {s: [t for t, tn in target if names_match(sn, tn)] for s, sn in source}
    back: dict[str, list[str]] = {}
    for s, ts in cands.items():
        for t in ts:
            back.setdefault(t, []).append(s)
    rows: list[tuple[str, str, str]] = []
    used: set[str] = set()
    for s, _sn in source:
        ts = cands[s]
        if len(ts) == 1 and len(back[ts[0]]) == 1:
            t = ts[0]
            rows.append((s, t, K.SAME if s == t else K.RENAME))
            used.add(t)
        else:
            rows.append((s, "", K.REMOVE))
    rows += [("", t, K.ADD) for t, _tn in target if t not in used]
    return rows


def _modes(version: TaxonomyVersion) -> list[tuple[str, str]]:

    return [(m.code, m.name) for m in version_modes(version=version)]


def _write(*, source: TaxonomyVersion, target: TaxonomyVersion, rows: Iterable[tuple], auto: bool, by) -> int:
    if source.pk == target.pk:
        raise ValidationError("A mapping needs two different versions.")
    CrossMapping.objects.filter(source=source, target=target).delete()
    objs = [
        CrossMapping(
            source=source,
            target=target,
            old_code=old,
            new_code=new,
            kind=kind,
            note=note,
            auto=auto,
            updated_by=by if getattr(by, "pk", None) else None,
        )
        for old, new, kind, note in rows
    ]
    CrossMapping.objects.bulk_create(objs)
    return len(objs)


@transaction.atomic
def cross_mapping_automap(
    *, source: TaxonomyVersion, target: TaxonomyVersion, by=None, keep_edited: bool = True
) -> int:
    """Match ``source``'s modes onto ``target``'s by name and code and store it; returns the rows
    written. A pair a manager edited (rows not ``auto``) is left alone unless ``keep_edited`` is off."""
    if keep_edited and CrossMapping.objects.filter(source=source, target=target, auto=False).exists():
        return 0
    rows = match_modes(_modes(source), _modes(target))
    note = f"Matched by name and code onto {target.label}."
    return _write(source=source, target=target, rows=[(*r, note) for r in rows], auto=True, by=by)


@transaction.atomic
def cross_mapping_set(
    *, source: TaxonomyVersion, target: TaxonomyVersion, choices: dict[str, list[str]], by=None, note: str = ""
) -> int:
    """Store a manager's mapping: ``choices`` is old code -> the new codes it becomes ([] = dropped).

    The kind of each row follows from the shape: one old to one new is same/rename, one old to
    several new is a split, several old to one new is a merge; target modes nothing maps to are added.
    Every source code must be given (a mapping is whole); unknown codes are refused by name."""
    old_codes = [c for c, _n in _modes(source)]
    new_codes = [c for c, _n in _modes(target)]
    missing = [c for c in old_codes if c not in choices]
    if missing:
        raise ValidationError(
            f"Say what becomes of {', '.join(missing)} ({source.label}): a code of {target.label}, or dropped."
        )
    unknown_old = [c for c in choices if c not in old_codes]
    if unknown_old:
        raise ValidationError(f"{', '.join(unknown_old)}: not modes of {source.label}.")
    unknown_new = sorted({n for ns in choices.values() for n in ns if n not in new_codes})
    if unknown_new:
        raise ValidationError(f"{', '.join(unknown_new)}: not modes of {target.label}.")
    into: dict[str, int] = {}
    for ns in choices.values():
        for n in set(ns):
            into[n] = into.get(n, 0) + 1
    rows = []
    for old in old_codes:
        news = list(dict.fromkeys(choices[old]))
        if not news:
            rows.append((old, "", K.REMOVE, note))
            continue
        for new in news:
            if len(news) > 1:
                kind = K.SPLIT
            elif into[new] > 1:
                kind = K.MERGE
            else:
                kind = K.SAME if old == new else K.RENAME
            rows.append((old, new, kind, note))
    rows += [("", n, K.ADD, note) for n in new_codes if n not in into]
    return _write(source=source, target=target, rows=rows, auto=False, by=by)


def cross_mapping_choices(*, source: TaxonomyVersion, target: TaxonomyVersion) -> dict[str, list[str]]:
    """The mapping now in force from ``source`` to ``target`` as old code -> new codes, for the
    editor: the stored cross rows, else the drafted rows when target's parent is source, else the
    name match as a proposal."""
    rows = list(CrossMapping.objects.filter(source=source, target=target).values_list("old_code", "new_code"))
    if not rows and target.parent_id == source.pk:
        rows = list(ModeMapping.objects.filter(version=target).values_list("old_code", "new_code"))
    if not rows:
        rows = [(o, n) for o, n, _k in match_modes(_modes(source), _modes(target))]
    out: dict[str, list[str]] = {c: [] for c, _n in _modes(source)}
    for old, new in rows:
        if old in out and new:
            out[old].append(new)
    return out

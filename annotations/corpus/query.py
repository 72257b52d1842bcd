"""What a corpus search asks for, as PostgreSQL regular expressions (pure: no Django, no database).

Every mode is a case-insensitive match on a step's content, so one definition serves the index
lookup, the recheck and the brute-force scan the tests compare with:

- ``words``: every word, as a whole word, anywhere in the step (``\\mword\\M`` for each, ANDed);
- ``phrase``: the words in this order, separated by anything that is not a word character;
- ``prefix``: every word as the start of a word (``verif`` finds "verifier", "verified");
- ``regex``: a PostgreSQL regular expression (ARE) as given, ``\\b`` read as a word edge (as
  in Python; PostgreSQL's own ``\\b`` is a backspace); ``(?c)`` at its start makes it case-sensitive.

The step index is a trigram GIN index (``pg_trgm``), which answers regular expressions directly:
PostgreSQL's full-text parser was not used because it splits paths, URLs and e-mail addresses
into tokens of its own (``/usr/approved/x`` holds no token "approved"), so its answers would not
equal a scan, and a step of a few MB of distinct words overflows a tsvector (1 MB) and would fail
its import. A trigram index can only help where every match contains three plain characters in a
row; the word index (``traces`` migration 0019) takes a word of any length. So a word needs 3+
characters or plain ASCII letters and digits, a prefix 3+ characters, a phrase one word of either,
a regular expression a literal run of 3+ on every branch (``verif.*test`` yes, ``a.b`` or
``x|yz`` no) or a whole word in every match (``\\.py\\b``); anything else would read every step
of the project and is refused with that reason.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

MODES = ("words", "phrase", "prefix", "regex")
MIN_LITERAL = 3
MAX_QUERY = 300
MAX_WORDS = 8

_WORD = re.compile(r"\w+")
# a word that is certainly a key of the word index (``traces`` migration 0019) as typed: plain ASCII
# (lower-casing elsewhere is the locale's), at most the 100 characters ``step_words`` keeps
PLAIN_WORD = re.compile(r"[A-Za-z0-9_]{1,100}")


class QueryError(ValueError):
    """The search cannot run as asked; the message says why and what to do."""


@dataclass(frozen=True)
class CompiledQuery:
    mode: str
    text: str
    # every pattern must match (PostgreSQL ARE, applied with ~* so case-insensitive)
    patterns: tuple[str, ...]
    # one pattern whose matches are the highlights (and whose first match places the snippet)
    highlight: str

    def python_patterns(self) -> list[re.Pattern[str]]:
        """The same tests for Python's ``re`` (words, phrase, prefix; a regex as far as the two
        dialects agree): used to highlight a snippet and, in the tests, to scan by brute force."""
        return [re.compile(_to_python(p), re.IGNORECASE) for p in self.patterns]


def _to_python(pattern: str) -> str:
    return pattern.replace(r"\m", r"(?<!\w)(?=\w)").replace(r"\M", r"(?<=\w)(?!\w)")


def _words(text: str) -> list[str]:
    words = _WORD.findall(text)
    if not words:
        raise QueryError("Type at least one word (letters or digits).")
    if len(words) > MAX_WORDS:
        raise QueryError(f"At most {MAX_WORDS} words per search, got {len(words)}.")
    return words


def query_compile(text: str, mode: str = "words") -> CompiledQuery:
    """The search as patterns, or ``QueryError`` saying why it cannot run."""
    text = " ".join(str(text or "").split()) if mode != "regex" else str(text or "").strip()
    if mode not in MODES:
        raise QueryError(f"Unknown search mode {mode!r}: use one of {', '.join(MODES)}.")
    if not text:
        raise QueryError("Type what to search for.")
    if len(text) > MAX_QUERY:
        raise QueryError(f"A search has at most {MAX_QUERY} characters, got {len(text)}.")
    if mode == "regex":
        try:
            literal = required_literal(text)
        except re.error as exc:
            raise QueryError(f"Not a regular expression this search can read: {exc}.") from None
        pattern = word_edges(text)
        if literal < MIN_LITERAL and word_exact(pattern) is None:
            raise QueryError(
                "A regular expression needs a run of at least 3 plain characters that every match "
                "contains (e.g. verif.*tests), on every branch of an |, or a whole word (e.g. \\.py\\b): "
                "without one the index cannot help and the search would read every step."
            )
        return CompiledQuery(mode, text, (pattern,), pattern)
    words = _words(text)
    if mode == "phrase":
        if not any(len(w) >= MIN_LITERAL or PLAIN_WORD.fullmatch(w) for w in words):
            raise QueryError("A phrase needs a word of 3 or more characters or of plain letters and digits.")
        pattern = r"\m" + r"\W+".join(re.escape(w) for w in words) + r"\M"
        return CompiledQuery(mode, text, (pattern,), pattern)
    # a short word is a key of the word index when plain (words); a prefix needs 3 characters
    short = [w for w in words if len(w) < MIN_LITERAL and (mode == "prefix" or not PLAIN_WORD.fullmatch(w))]
    if short and mode == "prefix":
        raise QueryError(
            f"Prefixes of fewer than 3 characters cannot be looked up ({', '.join(short)}): "
            "search them as whole words, or leave them out."
        )
    if short:
        raise QueryError(
            f"Words of fewer than 3 characters other than plain letters and digits cannot be looked up "
            f"({', '.join(short)}): leave them out, or search the phrase they belong to."
        )
    end = r"\M" if mode == "words" else ""
    patterns = tuple(dict.fromkeys(r"\m" + re.escape(w) + end for w in words))
    highlight = r"\m(" + "|".join(re.escape(w) for w in dict.fromkeys(words)) + ")" + end
    return CompiledQuery(mode, text, patterns, highlight)


def word_edges(regex: str) -> str:
    """``\\b`` and ``\\B`` outside brackets as PostgreSQL's word edges ``\\y`` and ``\\Y``: in
    PostgreSQL's regular expressions ``\\b`` is a backspace, so a pattern written the Python or
    JavaScript way would silently find nothing."""
    out, i, in_class = [], 0, False
    while i < len(regex):
        c = regex[i]
        if c == "\\" and i + 1 < len(regex):
            nxt = regex[i + 1]
            out.append("\\y" if nxt == "b" and not in_class else "\\Y" if nxt == "B" and not in_class else c + nxt)
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
        elif c == "]" and in_class:
            in_class = False
        out.append(c)
        i += 1
    return "".join(out)


# -- what a regular expression must contain ---------------------------------------------------------

# PostgreSQL escapes Python's parser does not know, read as what they match for this purpose.
_ARE_ONLY = [(r"\m", r"\b"), (r"\M", r"\b"), (r"\y", r"\b"), (r"\Y", r"\B")]


def required_literal(regex: str) -> int:
    """The longest run of plain characters every match of ``regex`` must contain (0 if none).

    Read with Python's own regex parser (PostgreSQL's escapes \\m, \\M, \\y, \\Y mapped to their
    Python counterparts first); raises ``re.error`` where it cannot read the pattern."""
    import re._parser as sre_parse  # the standard library's parser (Python 3.11+)

    text = regex
    if text.startswith("(?c)"):
        text = text[4:]
    for are, py in _ARE_ONLY:
        text = text.replace(are, py)
    return _longest(sre_parse.parse(text))


# escapes Python reads as PostgreSQL does (classes, places, \\m \\M \\y \\Y mapped first, control characters)
_SAME_ESCAPES = frozenset("wWdDsSmMyYbBAZtnrfv")


_WORD_CHARS = frozenset(map(ord, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"))


def _parsed_plainly(pattern: str):
    """``pattern`` (a compiled one) read by Python's parser, or None where Python could read it
    otherwise than PostgreSQL: an escape of a letter or digit other than ``_SAME_ESCAPES``
    (PostgreSQL's ``\\x41b`` is one character, Python's two), or what Python cannot parse."""
    import re._parser as sre_parse

    text = pattern[4:] if pattern.startswith("(?c)") else pattern
    i = text.find("\\")
    while i >= 0:
        nxt = text[i + 1 : i + 2]
        if nxt.isalnum() and nxt not in _SAME_ESCAPES:
            return None
        i = text.find("\\", i + 2)
    for are, py in _ARE_ONLY:
        text = text.replace(are, py)
    try:
        with warnings.catch_warnings():  # "possible nested set" ([[:alpha:]]): a class Python reads otherwise
            warnings.simplefilter("ignore")
            return sre_parse.parse(text)
    except re.error:
        return None


def word_only(pattern: str) -> bool:
    """Whether every match of ``pattern`` (a compiled one: ``\\y`` for ``\\b``) is made of word
    characters only (ASCII letters, digits, ``_``, ``\\w``, ``\\d``; anchors and word edges
    take none). Then a step matches only where one of its words does (a run of word characters
    between non-word ones, as ``step_words`` splits them): a word edge or an anchor holds inside
    that run wherever it holds in the step, so looking the pattern up among the words misses
    nothing. Conservative: any other escape, ``.``, a negated or other class, a lookaround or a
    back-reference answers False."""
    import re._constants as c

    parsed = _parsed_plainly(pattern)
    if parsed is None:
        return False
    spans = [(ord("a"), ord("z")), (ord("A"), ord("Z")), (ord("0"), ord("9"))]

    def in_class(op, arg) -> bool:
        if op is c.LITERAL:
            return arg in _WORD_CHARS
        if op is c.RANGE:
            return any(lo <= arg[0] <= arg[1] <= hi for lo, hi in spans)
        return op is c.CATEGORY and arg in (c.CATEGORY_WORD, c.CATEGORY_DIGIT)

    def only(items) -> bool:
        for op, arg in items:
            if op is c.LITERAL:
                ok = arg in _WORD_CHARS
            elif op is c.IN:
                ok = all(in_class(o, a) for o, a in arg)
            elif op is c.SUBPATTERN:
                ok = only(arg[-1])
            elif op is c.BRANCH:
                ok = all(only(branch) for branch in arg[1])
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
                ok = only(arg[2])
            else:
                ok = op is c.AT
            if not ok:
                return False
        return True

    return only(parsed)


def word_literal(pattern: str) -> str | None:
    """The longest run of 3+ ASCII word characters that every match of ``pattern`` contains,
    lower-cased (None without one): it lies inside one of the step's words, so the steps holding a
    word that contains it are a superset of the matches (``verif\\s+tests?`` -> "verif"). Runs on
    the pattern's own path only: inside a group or a repeat of at least once, not across an
    alternation."""
    import re._constants as c

    parsed = _parsed_plainly(pattern)
    if parsed is None:
        return None
    best = ""

    def walk(items) -> None:
        nonlocal best
        run = ""
        for op, arg in items:
            if op is c.LITERAL and arg in _WORD_CHARS:
                run += chr(arg)
                best = max(best, run, key=len)
                continue
            if op is c.SUBPATTERN:
                walk(arg[-1])
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT) and arg[0] >= 1:
                walk(arg[2])
            run = ""

    walk(parsed)
    return best.lower() if len(best) >= MIN_LITERAL else None


def word_exact(pattern: str) -> str | None:
    """The longest run of ASCII word characters that every match of ``pattern`` holds as a whole
    word, lower-cased (None without one): a run with a non-word character or a start on its left
    (an ASCII punctuation or space, a class of them, ``^``, a word edge) and one or an end on its
    right (``\\.py\\y`` -> "py"). Every matching step then holds that word among its
    ``step_words``, however short the word (or a run too long for them: ``step_long_words``).
    Runs on the pattern's own path only, as ``word_literal``."""
    import re._constants as c

    parsed = _parsed_plainly(pattern)
    if parsed is None:
        return None
    starts = (c.AT_BOUNDARY, c.AT_BEGINNING, c.AT_BEGINNING_STRING)
    ends = (c.AT_BOUNDARY, c.AT_END, c.AT_END_STRING)

    def nonword(op, arg) -> bool:
        """Whether every character the item matches is an ASCII non-word one (PostgreSQL's
        ``[[:alnum:]]`` holds every letter: only ASCII is certainly not a word character)."""
        if op is c.LITERAL:
            return arg < 128 and arg not in _WORD_CHARS
        if op is c.IN:
            return all((o is c.LITERAL and a < 128 and a not in _WORD_CHARS)
                       or (o is c.CATEGORY and a is c.CATEGORY_SPACE) for o, a in arg)  # fmt: skip
        if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            return arg[0] >= 1 and bool(arg[2]) and all(nonword(o, a) for o, a in arg[2])
        if op is c.SUBPATTERN:
            return bool(arg[-1]) and all(nonword(o, a) for o, a in arg[-1])
        return False

    best = ""

    def walk(items) -> None:
        nonlocal best
        i = 0
        while i < len(items):
            op, arg = items[i]
            if op is c.SUBPATTERN:
                walk(arg[-1])
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT) and arg[0] >= 1:
                walk(arg[2])
            if not (op is c.LITERAL and arg in _WORD_CHARS):
                i += 1
                continue
            j = i
            while j < len(items) and items[j][0] is c.LITERAL and items[j][1] in _WORD_CHARS:
                j += 1
            before = items[i - 1] if i else None
            after = items[j] if j < len(items) else None
            left = before is not None and ((before[0] is c.AT and before[1] in starts) or nonword(*before))
            right = after is not None and ((after[0] is c.AT and after[1] in ends) or nonword(*after))
            if left and right and j - i > len(best):
                best = "".join(chr(a) for _o, a in items[i:j])
            i = j

    def flat(items) -> list:
        """A group matched once is its items in a row (``(\\.py)\\y``: "." "p" "y" edge)."""
        out: list[tuple] = []
        for op, arg in items:
            out.extend(flat(arg[-1]) if op is c.SUBPATTERN else [(op, arg)])
        return out

    walk(flat(parsed))
    return best.lower() or None


def _longest(items) -> int:
    """The longest literal run a sequence of parsed items guarantees."""
    import re._constants as c

    best = run = 0
    for op, arg in items:
        if op is c.LITERAL:
            run += 1
            best = max(best, run)
            continue
        if op is c.SUBPATTERN:
            inner = _longest(arg[-1])
            best = max(best, inner)
        elif op is c.BRANCH:
            best = max(best, min(_longest(branch) for branch in arg[1]))
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT) and arg[0] >= 1:
            best = max(best, _longest(arg[2]))
        elif op is c.AT:
            continue  # anchors (^, $, \b) take no characters: the run goes on
        run = 0
    return best


__all__ = [
    "MODES",
    "CompiledQuery",
    "QueryError",
    "query_compile",
    "required_literal",
    "word_exact",
    "word_literal",
    "word_only",
]

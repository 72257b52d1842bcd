"""Format detection: content markers first (in the first 64 KB only), filename second.

For text, the marker found earliest in the text wins, so a log quoting another format's
marker deep inside is still recognised by its own opening lines. For JSON the keys seen
in the head decide; ``mas_name`` breaks ties between the ``_human.json`` shapes.
"""

from __future__ import annotations

import re

from traces.parsers.registry import formats, sniff_json
from traces.parsers.spans import sniff as sniff_spans

HEAD = 65536

MAS_ALIASES = {
    "chatdev": "ChatDev",
    "metagpt": "MetaGPT",
    "ag2": "AG2",
    "autogen": "AG2",
    "hyperagent": "HyperAgent",
    "appworld": "AppWorld",
    "magentic": "Magentic-One",
    "magenticone": "Magentic-One",
    "magentic-one": "Magentic-One",
    "magentic_one": "Magentic-One",
    "openmanus": "OpenManus",
}


def normalise_mas_name(name: str) -> str:
    """Canonical framework name, or "" when it is not a known framework (e.g. "GAIA")."""
    return MAS_ALIASES.get(name.strip().lower().replace(" ", ""), "")


_JSON_START = re.compile(r'\s*(?:\{|\[\s*(?:[{\["\]]|$))')


def looks_json(text: str) -> bool:
    """A JSON object or array, not a log line such as ``[2025-13-05 08:33:53 INFO]``."""
    return _JSON_START.match(text.lstrip("\ufeff"), 0, 4096) is not None


def detect_json(head: str, *, filename: str = "", mas_name: str = "", mast_native: bool = False) -> str:
    """The JSON format of a head. ``mast_native``: the text is a MAST-Data record's trajectory,
    which is always one of the MAST frameworks' own shapes, so the span and newer JSON formats'
    sniffers (a dozen scans of the 64 KB head, per record) are not asked."""
    mas = normalise_mas_name(mas_name)
    if not mast_native:
        if span := sniff_spans(head):
            return span
        if sniffed := sniff_json(head):
            return sniffed
    # each test scans up to 64 KB: the two asked twice are asked once
    hyperagent = "HyperAgent_" in head
    history = '"history"' in head
    if hyperagent and not history:
        return "hyperagent"
    if '"run_id"' in head and '"content"' in head:
        return "metagpt_json"
    who_when_keys = ('"mistake_agent"', '"question"', '"question_ID"', '"is_correct"', '"ground_truth"')
    if re.match(r'\{\s*"history"\s*:', head) or (history and any(k in head for k in who_when_keys)):
        return "whowhen"
    if '"trajectory"' in head or '"instance_id"' in head or '"problem_statement"' in head:
        if hyperagent or mas == "HyperAgent":
            return "hyperagent"
        if mas == "AG2" or '"role"' in head:
            return "ag2"
        return "hyperagent" if "hyperagent" in filename.lower() else "ag2"
    if mas == "AG2" or re.search(r'"name"\s*:\s*"(?:mathproxyagent|chat_manager|Agent_\w+)"', head):
        return "ag2"
    return "messages_json"


def detect_format(text: str, *, filename: str = "", mas_name: str = "") -> str:
    head = text[:HEAD]
    stripped = head.lstrip("\ufeff \t\r\n")
    if looks_json(stripped):
        return detect_json(stripped, filename=filename, mas_name=mas_name)
    best = ""
    text_formats = [f for f in formats() if f.kind == "text"]
    # the earliest marker wins (registration order breaks ties); most files show theirs in the
    # first lines, so look there first
    for limit in (4096, HEAD):
        best_pos = limit + 1
        for fmt in text_formats:
            for pattern in fmt.markers:
                m = pattern.search(head, 0, best_pos)
                if m and m.start() < best_pos:
                    best, best_pos = fmt.name, m.start()
        if best:
            return best
    name = filename.lower()
    for fmt in text_formats:
        if fmt.filename_suffixes and name.endswith(fmt.filename_suffixes):
            return fmt.name
    mas = normalise_mas_name(mas_name)
    for fmt in text_formats:
        if mas and fmt.mas_name == mas:
            return fmt.name
    return "plaintext"

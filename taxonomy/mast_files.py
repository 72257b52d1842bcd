"""Parse MAST's own taxonomy files (definitions.txt and examples.txt). Pure: no Django.

definitions.txt: a mode starts at a line ``<code> <Name>:`` (``1.3 Step Repetition:``), its
definition runs until the next such line. examples.txt: ``### <Name> ###`` headings, each
followed by an example trace excerpt; several headings may name the same mode.

Note: the official file names 3.2 "Weak Verification" and 3.3 "No or Incorrect Verification",
while the paper says "No or Incomplete Verification" and "Incorrect Verification". The importer
keeps what the file says.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

MODE_HEADER = re.compile(r"^(?P<code>\d{1,2}\.\d{1,2}) (?P<name>[A-Za-z][^:\n]{0,100}):[ \t]*(?P<rest>.*)$")
EXAMPLE_HEADER = re.compile(r"^###\s+(?P<name>.+?)\s+###\s*$")
CATEGORY_NAMES = {"1": "Specification Issues", "2": "Inter-Agent Misalignment", "3": "Task Verification"}


class TaxonomyFileError(ValueError):
    pass


def parse_definitions(text: str, *, filename: str = "definitions.txt") -> list[dict[str, str]]:
    modes: list[dict[str, Any]] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        match = MODE_HEADER.match(line)
        if match:
            modes.append(
                {"code": match["code"], "name": match["name"].strip(), "lines": [match["rest"]], "line": lineno}
            )
        elif modes:
            modes[-1]["lines"].append(line)
        elif line.strip():
            raise TaxonomyFileError(f"{filename}, line {lineno}: text before the first mode header ('1.1 Name:').")
    if not modes:
        raise TaxonomyFileError(f"{filename}: no mode headers found (expected lines like '1.1 Name:').")
    seen: dict[str, int] = {}
    out = []
    for mode in modes:
        if mode["code"] in seen:
            raise TaxonomyFileError(
                f"{filename}, line {mode['line']}: duplicate code {mode['code']} (first at line {seen[mode['code']]})."
            )
        seen[mode["code"]] = mode["line"]
        definition = "\n".join(mode["lines"]).strip()
        if not definition:
            raise TaxonomyFileError(f"{filename}, line {mode['line']}: mode {mode['code']} has no definition.")
        out.append({"code": mode["code"], "name": mode["name"], "definition": definition})
    return out


def parse_examples(text: str, *, filename: str = "examples.txt") -> list[tuple[str, str, int]]:
    """(heading name, example text, line) per heading."""
    examples: list[list[Any]] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        match = EXAMPLE_HEADER.match(line)
        if match:
            examples.append([match["name"], [], lineno])
        elif examples:
            examples[-1][1].append(line)
    out = []
    for name, lines, lineno in examples:
        # Drop the ##### rule that precedes the next heading.
        while lines and (not lines[-1].strip() or set(lines[-1].strip()) == {"#"}):
            lines.pop()
        out.append((name, "\n".join(lines).strip(), lineno))
    return out


def build_taxonomy(
    definitions_text: str, examples_text: str | None = None, *, name: str, description: str = ""
) -> dict[str, Any]:
    """The taxonomy as the JSON shape taxonomy.services.version_import takes."""
    modes = parse_definitions(definitions_text)
    by_name = {m["name"].casefold(): m for m in modes}
    if examples_text:
        for heading, body, lineno in parse_examples(examples_text):
            mode = by_name.get(heading.casefold())
            if mode is None:
                # The file uses one older name ("Ignoring Other Agent's Suggestions" for 2.5):
                # accept a heading when exactly one mode name is clearly closest to it.
                close = difflib.get_close_matches(heading.casefold(), list(by_name), n=2, cutoff=0.65)
                if len(close) == 1:
                    mode = by_name[close[0]]
            if mode is None:
                raise TaxonomyFileError(
                    f"examples.txt, line {lineno}: heading '{heading}' names no mode of the definitions file."
                )
            mode["examples"] = (mode.get("examples", "") + "\n\n" + body).strip() if body else mode.get("examples", "")
    cat_codes = sorted({m["code"].split(".")[0] for m in modes}, key=int)
    return {
        "format": "mast-taxonomy/1",
        "name": name,
        "description": description or "Imported from MAST's definitions and examples files.",
        "categories": [{"code": c, "name": CATEGORY_NAMES.get(c, f"Category {c}")} for c in cat_codes],
        "modes": modes,
    }

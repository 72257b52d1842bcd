"""ChatDev WareHouse folders: which files of a folder are traces, and what comes with them.

A ChatDev run is saved as a folder holding the run's ``.log`` (the trace) beside its ``.prompt``
(the task), ``meta.txt`` (metadata) and the configs and code it generated. A folder (a folder
inside a zip, or the files of one upload, which count as one folder) with ``.log`` files and a
``.prompt`` or ``meta.txt`` contributes only its ``.log`` files as traces. Each takes its task
from the ``.prompt`` its name starts with (in a folder of one run, from the folder's only
``.prompt``, else from meta.txt's "Task") and, in a folder of one run, ``meta.txt`` as metadata.
The companions (configs, prompts, generated code) are skipped; every other file is a source of
its own.

Among several files (a folder, a zip, a multi-file upload) read with format "auto", a file that is
not a trace by its name (README, MANIFEST, LICENSE, CHANGELOG, ``.md``, ``.rst``, code and config
files) and whose text no trace format reads is skipped with a line saying so, instead of becoming a
"plain text" trace. A plain-text trace stays importable on purpose: on its own, or with the
format "plain text".
"""

from __future__ import annotations

import re

from traces.importing.sources import Entry, Source, read_text
from traces.parsers import detect_format


def sources_from_entries(entries: list[Entry], *, format: str = "auto") -> list[Source]:
    """One source per file, except in ChatDev WareHouse folders: .log files only, with task and meta."""
    if format == "auto" and len(entries) > 1:
        sources = sources_from_entries(entries, format="")
        return [s if s.note else _maybe_not_a_trace(s) for s in sources]
    by_dir: dict[str, list[Entry]] = {}
    for e in entries:
        by_dir.setdefault(e.dirname, []).append(e)
    sources: list[Source] = []
    for e in entries:
        siblings = by_dir[e.dirname]
        prompts = [s for s in siblings if s.basename.endswith(".prompt")]
        metas = [s for s in siblings if s.basename == "meta.txt"]
        logs = [s for s in siblings if s.basename.endswith(".log")]
        if not (logs and (prompts or metas)):
            sources.append(Source(name=e.name, size=e.size, opener=e.opener))
            continue
        if e not in logs:
            note = _companion_note(e, logs)
            sources.append(Source(name=e.name, size=e.size, opener=e.opener, note=note))
            continue
        task = ""
        prompt = next((p for p in prompts if e.basename.startswith(p.basename[: -len(".prompt")])), None)
        one_run = len(logs) == 1  # a folder of one run: its .prompt and meta.txt belong to its .log
        if prompt is None and len(prompts) == 1 and one_run:
            prompt = prompts[0]
        if prompt is not None:
            task = read_text(prompt.opener, prompt.name, prompt.size).strip()
        meta = {}
        if metas and one_run:
            meta = _chatdev_meta(read_text(metas[0].opener, metas[0].name, metas[0].size))
        if not task and meta.get("Task"):
            task = meta["Task"]
        sources.append(Source(name=e.name, size=e.size, opener=e.opener, task=task, meta=meta))
    return sources


_CHATDEV_CONFIGS = frozenset({"ChatChainConfig.json", "PhaseConfig.json", "RoleConfig.json", "meta.txt"})
_CHATDEV_ARTIFACTS = (".prompt", ".py", ".md", ".png", ".jpg", ".jpeg", ".gif", ".pyc", ".csv", ".html", ".css", ".js")


def _companion_note(e: Entry, logs: list[Entry]) -> str:
    """What a file beside ChatDev .log files is ("" when it is a trace of its own)."""
    if not _chatdev_companion(e.basename):
        return ""
    runs = ", ".join(sorted(log.basename for log in logs)[:3]) + (" ..." if len(logs) > 3 else "")
    if e.basename.endswith(".prompt"):
        return f"ChatDev task prompt of {runs}"
    if e.basename == "meta.txt":
        return f"ChatDev run metadata of {runs}" if len(logs) == 1 else "ChatDev meta.txt (several runs here: not used)"
    if e.basename in _CHATDEV_CONFIGS:
        return f"ChatDev configuration of {runs}"
    if e.basename.lower().endswith(_TEXT_ARTIFACTS) and _is_other_trace(e):
        return ""
    return f"ChatDev generated file of {runs} (not a trace)"


_TEXT_ARTIFACTS = (".md", ".py", ".txt", ".csv", ".html", ".js", ".css")
_DOC_NAMES = re.compile(r"^(?:readme|manifest|license|licence|changelog|changes|contributing|notice|authors)\b", re.I)
_NOT_TRACE_SUFFIXES = (
    ".md", ".rst", ".py", ".ipynb", ".yaml", ".yml", ".toml", ".cfg", ".ini", ".sh", ".html", ".css", ".js", ".ts",
)  # fmt: skip


def _maybe_not_a_trace(source: Source) -> Source:
    """``source`` with a note when it is a documentation, code or config file no trace format reads."""
    base = source.name.replace("\\", "/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    if not (_DOC_NAMES.match(base) or base.lower().endswith(_NOT_TRACE_SUFFIXES)):
        return source
    try:
        with source.opener() as f:
            head = f.read(65536).decode("utf-8", "replace")
    except OSError:
        return source
    if detect_format(head, filename=base) != "plaintext":
        return source  # a trace in a format we read, whatever its name
    what = (
        "documentation" if _DOC_NAMES.match(base) or base.lower().endswith((".md", ".rst")) else "code or configuration"
    )
    source.note = (
        f"skipped: {what}, not a trace (to read it as one, import it on its own or with the format 'plain text')"
    )
    return source


def _is_other_trace(e: Entry) -> bool:
    """A file whose head has another trace format's markers: a trace uploaded beside the run."""
    try:
        with e.opener() as f:
            head = f.read(65536).decode("utf-8", "replace")
    except OSError:
        return False
    return detect_format(head, filename=e.basename) not in ("plaintext", "chatdev")


def _chatdev_companion(basename: str) -> bool:
    """Files a ChatDev WareHouse folder holds beside its .log that are not traces."""
    return (
        basename in _CHATDEV_CONFIGS or basename.lower().endswith(_CHATDEV_ARTIFACTS) or basename == "requirements.txt"
    )


def _chatdev_meta(text: str) -> dict[str, str]:
    """meta.txt: blocks of "Key:" followed by its value lines, separated by blank lines."""
    meta: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        m = re.fullmatch(r"([A-Z][\w ]{0,40}):\s*", line)
        if m:
            key = m.group(1)
            meta[key] = ""
        elif key is not None:
            meta[key] = (meta[key] + "\n" + line) if meta[key] else line.strip()
    return {k: v.strip() for k, v in meta.items()}

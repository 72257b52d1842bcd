"""The per-file import report: one line per file of an import, saying what it became or why not.

Every file of an import gets exactly one :class:`FileLine`, in upload order: the format read,
the traces it added, the records merged into traces already stored (same text, another source),
the records skipped (the same record again), its steps and agents, or the reason it was refused,
or, for a file read with another one (ChatDev's ``.prompt``, ``meta.txt``, configs), what it was
used for. The command, the job page and the API show these same lines (``ImportJob.report``).

An import stays all or nothing: when any file is refused, nothing is stored, but every other file
is still read, so the report names every bad file at once and says what the good ones would have
become ("not stored").

Pure: no Django import.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

IMPORTED, REFUSED, COMPANION, NOT_STORED = "imported", "refused", "companion", "not stored"
MAX_AGENTS = 12  # agent names listed per line (the count is always exact)


@dataclass
class FileLine:
    file: str
    status: str = IMPORTED
    format: str = ""
    traces: int = 0
    merged: int = 0
    skipped: int = 0
    steps: int = 0
    agents: list[str] = field(default_factory=list)
    n_agents: int = 0
    reason: str = ""
    # "import the rest": lines skipped because they were not JSON, each {"line", "reason"}
    broken_lines: list[dict] = field(default_factory=list)
    _agents: set[str] = field(default_factory=set, repr=False)

    def add(self, *, format: str, steps: int, agents: list[str], outcome: str) -> None:
        if format and format not in self.format.split(", "):
            self.format = f"{self.format}, {format}" if self.format else format
        if outcome == "new":
            self.traces += 1
            self.steps += steps
            for a in agents:
                if a not in self._agents:
                    self._agents.add(a)
                    if len(self.agents) < MAX_AGENTS:
                        self.agents.append(a)
            self.n_agents = len(self._agents)
        elif outcome == "merged":
            self.merged += 1
        else:
            self.skipped += 1

    def as_dict(self) -> dict:
        d = asdict(self)
        d.pop("_agents")
        return d

    def summary(self) -> str:
        """The line as a sentence (command output, messages)."""
        if self.status == COMPANION:
            return f"{self.file}: {self.reason}"
        if self.status == REFUSED:
            return f"{self.file}: refused: {self.reason}"
        parts = [f"{self.traces} trace{'s' if self.traces != 1 else ''}"]
        if self.merged:
            parts.append(f"{self.merged} merged into traces already stored")
        if self.skipped:
            parts.append(f"{self.skipped} skipped (already imported)")
        parts.append(f"{self.steps} steps")
        if self.broken_lines:
            n = len(self.broken_lines)
            first = self.broken_lines[0]
            parts.append(
                f"{n} broken line{'s' if n != 1 else ''} skipped (line {first['line']}: {first['reason']}"
                + (", ..." if n > 1 else "")
                + ")"
            )
        if self.n_agents:
            names = ", ".join(self.agents) + (" ..." if self.n_agents > len(self.agents) else "")
            parts.append(f"{self.n_agents} agent{'s' if self.n_agents != 1 else ''} ({names})")
        head = f"{self.file}: {self.format or 'unknown format'}: "
        tail = " (not stored: another file was refused)" if self.status == NOT_STORED else ""
        return head + ", ".join(parts) + tail


def lines_summary(lines: list[dict]) -> str:
    """Totals of a report, as the one-line summary the command prints last."""

    def total(key: str) -> int:
        return sum(int(line.get(key) or 0) for line in lines)

    refused = sum(1 for line in lines if line.get("status") == REFUSED)
    if refused:
        return f"{len(lines)} files: {refused} refused, so nothing was stored"
    return (
        f"{len(lines)} files: imported {total('traces')} traces, merged {total('merged')}, "
        f"skipped {total('skipped')}, refused 0"
    )

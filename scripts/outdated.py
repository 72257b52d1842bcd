"""Report runtime pins that fall behind: `make outdated`, and a report at the start of `make test`.

For each `name==version` line of requirements.txt it asks the package index (through pip, so the
machine's index settings apply) for the newest release and prints one line per pin that is more
than one minor release behind the newest release of the same major line, or behind on its patch
release. A newer major line is named but not counted as behind: moving to it is a decision
(Django stays on its LTS line on purpose, see HELD). It is a report: it always exits 0, and says
plainly when the index could not be reached.
"""

from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Lines held on purpose, with the reason printed beside them.
HELD = {"django": "Django stays on its 5.2 LTS line (supported until April 2028)"}
PIN = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([0-9][^\s;#]*)")


def pins(path: Path) -> list[tuple[str, str]]:
    out = []
    for line in path.read_text().splitlines():
        m = PIN.match(line.strip())
        if m:
            out.append((m.group(1), m.group(2)))
    return out


def parse(version: str) -> tuple[int, ...] | None:
    m = re.match(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?$", version)
    if not m:
        return None  # a pre-release or a calendar-like tag: compared only for equality
    return tuple(int(x or 0) for x in m.groups())


def available(name: str) -> list[str] | None:
    try:
        res = subprocess.run(
            [sys.executable, "-m", "pip", "index", "versions", name, "--disable-pip-version-check"],
            capture_output=True, text=True, timeout=30,
        )
    except subprocess.TimeoutExpired:
        return None
    m = re.search(r"Available versions: (.*)", res.stdout)
    return [v.strip() for v in m.group(1).split(",")] if m else None


def verdict(name: str, pinned: str, versions: list[str]) -> str | None:
    """One line for a pin that is behind, or None when it is current enough."""
    have = parse(pinned)
    releases = [v for v in (parse(x) for x in versions) if v]
    if have is None or not releases:
        newest = versions[0] if versions else "?"
        return None if newest == pinned else f"{name} {pinned}: newest {newest} (not compared: not a plain version)"
    same_major = [v for v in releases if v[0] == have[0]]
    newest_line = max(same_major) if same_major else have
    newer_major = max(releases) if max(releases)[0] > have[0] else None
    notes = []
    if newest_line[1] - have[1] > 1:
        notes.append(f"{newest_line[1] - have[1]} minor releases behind {'.'.join(map(str, newest_line))}")
    elif newest_line > have:
        notes.append(f"behind {'.'.join(map(str, newest_line))}")
    if newer_major:
        notes.append(f"a newer major line exists ({'.'.join(map(str, newer_major))})")
    if not notes:
        return None
    held = HELD.get(name.lower())
    return f"{name} {pinned}: {'; '.join(notes)}" + (f" — held: {held}" if held else "")


def main() -> int:
    req = pins(ROOT / "requirements.txt")
    with ThreadPoolExecutor(max_workers=8) as pool:
        found = list(pool.map(lambda p: available(p[0]), req))
    if all(v is None for v in found):
        print("outdated: the package index could not be reached; no report this time.")
        return 0
    lines, unknown = [], []
    for (name, pinned), versions in zip(req, found, strict=True):
        if versions is None:
            unknown.append(name)
            continue
        line = verdict(name, pinned, versions)
        if line:
            lines.append(line)
    print(f"outdated: {len(req)} runtime pins checked, {len(lines)} behind.")
    for line in lines:
        print("  " + line)
    if unknown:
        print("  not found on the index: " + ", ".join(unknown))
    return 0


if __name__ == "__main__":
    sys.exit(main())

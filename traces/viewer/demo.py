"""Demo data for the viewer: one long ChatDev-style trace (about 8,000 lines, 700 steps), so the
demo shows lazy loading, the step outline and in-trace search on something larger than a screen.

The content is generated here (not copied from any dataset). Its failure to spot: from turn 400
on, the Programmer and the Code Reviewer loop, resubmitting the same unchanged code and the same
review ("step repetition" and "unaware of termination conditions").
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from traces.importing.service import traces_import

AGENTS = ["Chief Executive Officer", "Chief Product Officer", "Chief Technology Officer", "Programmer", "Code Reviewer"]
LOOP_FROM = 400
LONG_TURN = 18  # a Programmer turn whose message is a 150-line file


def long_chatdev_log(turns: int = 700) -> str:
    out = [
        "[2026-01-12 09:00:00 INFO] **[Preprocessing]**",
        "",
        "**ChatDev Starts** (20260112090000)",
        "",
        "**task_prompt**: Build a command-line tool that renames photos by the date they were taken (EXIF).",
        "",
        "**project_name**: Photo_Renamer",
        "",
    ]
    for n in range(turns):
        looping = n >= LOOP_FROM
        agent = ("Programmer", "Code Reviewer")[n % 2] if looping else AGENTS[n % len(AGENTS)]
        other = ("Code Reviewer", "Programmer")[n % 2] if looping else AGENTS[(n + 1) % len(AGENTS)]
        stamp = f"2026-01-12 {9 + n // 3600:02d}:{(n // 60) % 60:02d}:{n % 60:02d}"
        out.append(f"[{stamp} INFO] {agent}: **{agent}<->{other} on : Coding, turn {n}**")
        out.append("")
        if looping and agent == "Programmer":
            out += [
                "rename_photos.py",
                "```python",
                "import sys",
                "from pathlib import Path",
                "",
                "def rename(folder):",
                "    for photo in Path(folder).glob('*.jpg'):",
                "        taken = read_exif_date(photo)  # still undefined",
                "        photo.rename(photo.with_name(f'{taken}.jpg'))",
                "```",
            ]
        elif looping:
            out += [
                "<Comment>",
                "read_exif_date is not defined; please implement it with Pillow and handle photos without EXIF.",
            ]
        elif n == LONG_TURN:
            # one long step (the first version of the tool, 150 lines): collapsed with "Show all";
            # reading inside it, its sticky header keeps saying who speaks
            out += ["rename_photos.py", "```python"]
            out += [f"# {k:>3}: rename step {k} (read EXIF, format the date, avoid clashes)" for k in range(150)]
            out += ["```"]
        else:
            for k in range(4 + n % 9):
                out.append(f"  {k:>2}. turn {n}: discussing the --dry-run flag and files taken in the same second")
        out.append("")
        out.append(f"[{stamp} INFO] flask app.py did not start for online log")
    return "\n".join(out) + "\n"


def seed(ctx) -> None:
    """Import the long demo trace into ctx.project; re-running skips it as a duplicate."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "Photo_Renamer_long_loop.log"
        path.write_text(long_chatdev_log(), encoding="utf-8")
        result = traces_import(project=ctx.project, paths_or_files=[path], by=ctx.users.get("manager"))
    ctx.say(
        f"Viewer: a long trace (~8,000 lines; step {LONG_TURN + 1} is 150 lines: Show all, then scroll inside it, "
        f"its header stays on top) {'imported' if result.imported else 'already there'}"
    )

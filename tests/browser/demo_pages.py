"""Every page of the seeded demo (annotations.demo.seed_demo), and axe-core to check one.

Shared by the accessibility walk (test_axe_pages.py) and anyone who wants to look at the site
page by page. A page is (name, path, selector that shows it is drawn); pages a role may not see
answer with the site's 403 page, which is checked like any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

AXE = Path(__file__).resolve().parent / "vendor" / "axe-4.14.1.min.js"
# What fails the walk: axe's two worst impacts. "moderate" and "minor" are reported, not failed.
FAILING_IMPACTS = ("serious", "critical")


@dataclass(frozen=True)
class DemoPage:
    name: str
    path: str
    ready: str = "main"


def demo_pages() -> list[DemoPage]:
    """Each page of the demo once (one trace per viewer kind, one item per judge page...)."""
    from annotations.models import BehaviourSearch, JudgeItem, JudgeRun, ProviderConnection, Round
    from traces.models import ImportJob, Project, Trace

    demo = Project.objects.get(slug="demo")
    frameworks = Project.objects.get(slug="frameworks")
    p = f"/p/{demo.slug}"
    rounds = {r.name: r for r in Round.objects.filter(project=demo)}
    pilot, second, blind = rounds["Pilot round"], rounds["Round 2"], rounds["Round 3 (blind re-check)"]
    attribution = rounds["Attribution round (Who&When)"]
    text_trace = Trace.objects.filter(project=demo, mas_name="AG2").order_by("pk").first()
    span_trace = Trace.objects.filter(project=demo, mas_name="OpenAI Agents SDK").first()
    long_trace = Trace.objects.filter(project=demo).order_by("-n_steps").first()
    runs = {r.provider: r for r in JudgeRun.objects.filter(project=demo)}
    behaviour = BehaviourSearch.objects.filter(project=demo).first()
    llm_run = runs["openai"]
    item = JudgeItem.objects.filter(run=llm_run).order_by("pk").first()
    connection = ProviderConnection.objects.filter(project=demo).first()
    job = ImportJob.objects.filter(project=frameworks).order_by("pk").first()
    failed_job = ImportJob.objects.filter(project=frameworks, status="failed").first()
    # Round 2 splits on 2.5 over the Magentic-One trace: the page a manager opens from that card.
    revise_code = "2.5"
    revised = Trace.objects.get(project=demo, mas_name="Magentic-One")
    dates = list(Trace.objects.filter(project=demo).order_by("imported_at").values_list("imported_at", flat=True))
    middle = dates[len(dates) // 2].date().isoformat()  # the demo dates its traces over eight weeks
    pages = [
        DemoPage("home", "/"),
        DemoPage("profile", "/profile/"),
        DemoPage("queue", "/queue/"),
        DemoPage("project-new", "/projects/new/"),
        DemoPage("project", f"{p}/"),
        DemoPage("members", f"{p}/members/"),
        DemoPage("settings", f"{p}/settings/"),
        DemoPage("settings-live", f"{p}/settings/live/"),
        DemoPage("project-queue", f"{p}/queue/"),
        DemoPage("traces", f"{p}/traces/"),
        DemoPage("trace", f"{p}/traces/{text_trace.pk}/", ".trace-viewer[data-ready='1']"),
        DemoPage("trace-spans", f"{p}/traces/{span_trace.pk}/"),
        DemoPage("trace-long", f"{p}/traces/{long_trace.pk}/", ".trace-viewer[data-ready='1']"),
        DemoPage("workspace", f"{p}/traces/{text_trace.pk}/label/", "#ws[data-ready='1']"),
        DemoPage("import", f"{p}/import/"),
        DemoPage("import-job", f"/p/{frameworks.slug}/import/{job.pk}/"),
        DemoPage("import-job-failed", f"/p/{frameworks.slug}/import/{failed_job.pk}/"),
        DemoPage("rounds", f"{p}/rounds/"),
        DemoPage("round-new", f"{p}/rounds/new/"),
        DemoPage("round-closed", f"{p}/rounds/{pilot.pk}/"),
        DemoPage("round-report", f"{p}/rounds/{pilot.pk}/report/"),
        DemoPage("round-review", f"{p}/rounds/{second.pk}/"),
        DemoPage("round-review-report", f"{p}/rounds/{second.pk}/report/"),
        DemoPage("disagreements", f"{p}/rounds/{second.pk}/disagreements/"),
        DemoPage("revise", f"{p}/rounds/{second.pk}/revise/{revise_code}/?trace={revised.pk}"),
        DemoPage("round-open", f"{p}/rounds/{blind.pk}/"),
        DemoPage("round-attribution", f"{p}/rounds/{attribution.pk}/"),
        DemoPage("judge", f"{p}/judge/"),
        DemoPage("judge-new", f"{p}/judge/new/"),
        DemoPage("judge-prompt", f"{p}/judge/prompt/"),
        DemoPage("judge-compare", f"{p}/judge/compare/"),
        DemoPage("judge-reliability", f"{p}/judge/reliability/?run={llm_run.pk}", "#reliability-modes"),
        DemoPage("judge-imports", f"{p}/judge/imports/"),
        DemoPage("judge-connections", f"{p}/judge/connections/"),
        DemoPage("judge-live", f"{p}/judge/live/"),
        DemoPage("judge-connection", f"{p}/judge/connections/{connection.pk}/"),
        DemoPage("judge-run", f"{p}/judge/runs/{llm_run.pk}/"),
        DemoPage("judge-quality", f"{p}/judge/runs/{llm_run.pk}/quality/"),
        DemoPage("judge-item", f"{p}/judge/runs/{llm_run.pk}/items/{item.pk}/"),
        DemoPage("releases", f"{p}/releases/"),
        DemoPage("analytics", f"{p}/analytics/"),
        DemoPage("analytics-frameworks", f"{p}/analytics/frameworks/"),
        DemoPage("analytics-failures-start", f"{p}/analytics/failures-start/"),
        DemoPage("analytics-experiment", f"{p}/analytics/experiment/?a=mas_name:AG2&b=mas_name:ChatDev"),
        DemoPage("analytics-experiment-corrected", f"{p}/analytics/experiment/?a=imported:..{middle}"
                 f"&b=imported:{middle}..&rater=corrected:{llm_run.rater_id}"),  # fmt: skip
        DemoPage("analytics-monitoring", f"{p}/analytics/monitoring/?rater={llm_run.rater_id}"),
        DemoPage("analytics-alerts", f"{p}/analytics/alerts/"),
        DemoPage("search", f"{p}/search/?q=answer%7Cresult&mode=regex", "[data-testid=search-results]"),
        DemoPage("search-behaviour", f"{p}/search/behaviour/{behaviour.pk}/", "[data-testid=behaviour-state]"),
        DemoPage("taxonomy-category-edit", "/taxonomies/mast/v3/categories/3/edit/"),
        DemoPage("taxonomies", "/taxonomies/"),
        DemoPage("taxonomy-version", "/taxonomies/mast/v2/"),
        DemoPage("taxonomy-diff", "/taxonomies/mast/diff/"),
        DemoPage("taxonomy-mappings", "/taxonomies/mappings/"),
        DemoPage("taxonomy-import", "/taxonomies/import/"),
        DemoPage("not-found", "/p/no-such-project/"),
    ]
    return pages


# Mouse shortcuts that have a keyboard way already, so they stay out of the tab order: the step
# outline (a minimap; j/k and the step list move between steps) and the viewer's line numbers
# (click to select lines; #L10-L20 in the address selects them, and 8,000 tab stops would bury the page).
MOUSE_SHORTCUTS = ("tv-outline", "tv-ln")

# Anything drawn as clickable (cursor: pointer) that the keyboard cannot reach: not focusable itself,
# not inside a focusable element (a link, a button, a label...) and holding none.
_MOUSE_ONLY = """(allowed) => {
  const focusable = 'a[href], button, input, select, textarea, summary, label, '
    + '[tabindex]:not([tabindex="-1"]), [contenteditable]';
  const out = new Set();
  for (const el of document.querySelectorAll("body *")) {
    const cs = getComputedStyle(el);
    if (cs.cursor !== "pointer" || cs.visibility === "hidden") continue;
    if (el.closest(focusable) || el.querySelector(focusable)) continue;
    if ([...el.classList].some((c) => allowed.includes(c))) continue;
    const up = el.parentElement;
    if (up && getComputedStyle(up).cursor === "pointer" && !up.closest(focusable)) continue;  // its parent is reported
    const r = el.getBoundingClientRect();
    if (r.width && r.height) out.add(el.tagName.toLowerCase() + [...el.classList].map((c) => "." + c).join(""));
  }
  return [...out];
}"""


def mouse_only_controls(page) -> list[str]:
    """Selectors of the visible controls on the page that a keyboard cannot reach."""
    return page.evaluate(_MOUSE_ONLY, list(MOUSE_SHORTCUTS))


def axe_violations(page) -> list[str]:
    """Run axe-core on the page as it is now; one line per serious or critical violation and node.

    Injected with evaluate (not a <script> tag), so the site's Content-Security-Policy stays as it is."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(AXE.read_text(encoding="utf-8"))
    result = page.evaluate(
        """async () => {
            const r = await axe.run(document, {resultTypes: ["violations"]});
            return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.map(n => ({target: n.target.join(" "), summary: n.failureSummary,
                                          html: n.html.slice(0, 160)}))}));
        }"""
    )
    lines = []
    for v in result:
        if v["impact"] not in FAILING_IMPACTS:
            continue
        for n in v["nodes"]:
            summary = " ".join((n["summary"] or "").split())
            lines.append(f"{v['id']} ({v['impact']}): {v['help']} at {n['target']}: {summary} | {n['html']}")
    return lines

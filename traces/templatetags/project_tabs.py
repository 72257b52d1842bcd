"""The tab bar of a project's pages.

Each tab names a URL that takes the project slug; the bar shows the tabs the user's role allows.
"""

from django import template
from django.urls import NoReverseMatch, reverse

from traces.projects.selectors import CAPABILITIES

register = template.Library()

# (key, label, url name, capability needed)
TABS = [
    ("overview", "Overview", "project_detail", "view"),
    ("traces", "Traces", "trace_list", "view"),
    ("import", "Import", "import_page", "manage"),
    ("rounds", "Rounds", "annotations:round_list", "view"),
    ("judge", "LLM judge", "annotations:judge_list", "manage"),
    ("analytics", "Analytics", "annotations:dashboard", "view"),
    ("releases", "Releases", "annotations:release_list", "view"),
    ("members", "Members", "project_members", "view"),
]


@register.inclusion_tag("traces/projects/_tabs.html")
def project_tabs(project, role, current=""):
    tabs = []
    for key, label, url_name, capability in TABS:
        if capability not in CAPABILITIES.get(role, ()):
            continue
        try:
            url = reverse(url_name, kwargs={"slug": project.slug})
        except NoReverseMatch:  # an area whose pages are not installed in this build
            continue
        tabs.append({"key": key, "label": label, "url": url, "current": key == current})
    return {"tabs": tabs, "project": project, "role": role}

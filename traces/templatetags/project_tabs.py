"""The tab bar of a project's pages; the tabs come from the registry in traces.projects.tabs."""

from django import template

from traces.projects.tabs import project_tabs_for

register = template.Library()


@register.inclusion_tag("traces/projects/_tabs.html")
def project_tabs(project, role, current=""):
    return {"tabs": project_tabs_for(project=project, role=role, current=current), "project": project, "role": role}

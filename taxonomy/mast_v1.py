"""The MAST taxonomy, version 1, as seeded on migrate.

Codes and names follow the paper (Cemri et al., "Why Do Multi-Agent LLM Systems Fail?").
The definitions are this project's own wording; the official text can be imported with
`python manage.py taxonomy_import definitions.txt --examples examples.txt --name "MAST official"`.
"""

NAME = "MAST"
DESCRIPTION = (
    "Multi-Agent System failure Taxonomy: 14 failure modes in 3 categories, "
    "derived by grounded theory from traces of seven multi-agent frameworks."
)

CATEGORIES = [
    (
        "1",
        "Specification Issues",
        "Failures that come from how the system, the roles or the task were specified, "
        "or from agents not following that specification.",
    ),
    (
        "2",
        "Inter-Agent Misalignment",
        "Failures in how agents talk to each other and coordinate while the run is going.",
    ),
    (
        "3",
        "Task Verification",
        "Failures in checking the result and in deciding when the work is finished.",
    ),
]

# (code, name, definition)
MODES = [
    (
        "1.1",
        "Disobey Task Specification",
        "An agent or the system does not respect the constraints or requirements the task states "
        "(format, scope, inputs, rules), so the output is wrong, incomplete or off target.",
    ),
    (
        "1.2",
        "Disobey Role Specification",
        "An agent steps outside the responsibilities of its assigned role, for example doing "
        "another agent's job or taking decisions its role does not allow.",
    ),
    (
        "1.3",
        "Step Repetition",
        "Work that is already done is done again without need: a phase, a tool call or a message "
        "repeated, usually because progress is not tracked.",
    ),
    (
        "1.4",
        "Loss of Conversation History",
        "Earlier context is dropped, so an agent acts as if recent turns never happened and "
        "falls back to an older state of the conversation.",
    ),
    (
        "1.5",
        "Unaware of Termination Conditions",
        "Agents do not recognise when the goal is met or when they should stop, and keep "
        "going (or loop) past the point where the run should have ended.",
    ),
    (
        "2.1",
        "Conversation Reset",
        "The dialogue restarts unexpectedly, throwing away the progress and context built up so far.",
    ),
    (
        "2.2",
        "Fail to Ask for Clarification",
        "An agent meets unclear or missing information and guesses instead of asking the agent "
        "or user who could resolve it.",
    ),
    (
        "2.3",
        "Task Derailment",
        "The work drifts away from the stated objective towards something irrelevant or less useful.",
    ),
    (
        "2.4",
        "Information Withholding",
        "An agent has information that another agent needs for its part of the task and does not pass it on.",
    ),
    (
        "2.5",
        "Ignored Other Agent's Input",
        "An agent disregards or fails to act on what another agent told it, such as a correction, "
        "a result or a recommendation.",
    ),
    (
        "2.6",
        "Reasoning-Action Mismatch",
        "What an agent says it will do and what it actually does disagree: its stated reasoning "
        "does not match the action or answer it produces.",
    ),
    (
        "3.1",
        "Premature Termination",
        "The run ends before the objective is met or before the information needed to finish "
        "(checks, results, key data) has been obtained or shared.",
    ),
    (
        "3.2",
        "No or Incomplete Verification",
        "The result is not checked, or is checked only partly, so errors that a check would have caught go through.",
    ),
    (
        "3.3",
        "Incorrect Verification",
        "A check is performed but is wrong: it validates a faulty result, or tests the wrong "
        "thing, giving false confidence.",
    ),
]

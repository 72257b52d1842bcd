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

# code -> a short example of the mode, in this project's words (shown with the definition at the
# point of labelling; the official few-shot trace excerpts come with `taxonomy_import --examples`).
EXAMPLES = {
    "1.1": "The task asks for a command-line tool with no dependencies; the programmer delivers a Flask "
    "web app that needs three packages.",
    "1.2": "The code reviewer, whose role is to comment on the code, rewrites the module itself and "
    "declares the task finished in place of the CEO.",
    "1.3": "The team runs the same 'code review' phase four times with identical comments, although "
    "nothing changed in the code between rounds.",
    "1.4": "After the tester reports a failing test, the programmer answers with the version of the file "
    "from two turns earlier, as if the report and the fix since then had not happened.",
    "1.5": "The tests pass and the user's request is met, but the agents keep exchanging 'Let me know if "
    "you need anything else' until the turn limit stops them.",
    "2.1": "Midway through implementing the game, the assistant greets the user again and asks what they "
    "would like to build, losing the plan agreed so far.",
    "2.2": "The task says 'sort the records by date' without saying which of the two date fields; the "
    "programmer picks one silently instead of asking.",
    "2.3": "Asked to fix a failing unit test, the agents spend the rest of the run redesigning the "
    "project's logging format.",
    "2.4": "The web surfer finds that the API needs an authentication token but reports only 'the call "
    "failed' to the orchestrator, which keeps retrying.",
    "2.5": "The reviewer points out an off-by-one error in the loop; the programmer replies 'Thanks!' and "
    "submits the code unchanged.",
    "2.6": "The agent writes 'I will now run the tests' and then submits the final answer without calling "
    "the test tool.",
    "3.1": "The orchestrator ends the run with 'task complete' after the first search returns nothing, "
    "before the file the user asked for has been written.",
    "3.2": "The reviewer approves the code after reading it, without running it; it fails on the first "
    "input with an ImportError.",
    "3.3": "The verifier runs a test that only checks that the program starts, reports 'all tests pass', "
    "and the wrong result goes through.",
}

# category code -> "what to try" when its failures go up: the team's starting notes, drawn from the
# paper's discussion of fixes (shown on the experiment page beside a mode that moved; each version
# carries its own, editable in a draft).
WHAT_TO_TRY = {
    "1": "Make the specification explicit: a role charter per agent (what it owns, what it must not do, "
    "when it hands on), the task's constraints and its definition of done in what every agent reads first, "
    "and the history each agent needs kept in its context (or summarised) so steps are neither repeated "
    "nor forgotten.",
    "2": "Give the conversation a contract: a fixed hand-off format (what was done, what is open, what is "
    "needed), a rule to ask when an input is ambiguous and to answer every point raised, a check that an "
    "agent's action matches its stated plan, and loop detection (the same message or tool call again) "
    "that stops or escalates.",
    "3": "Add verification that runs the work: a verifier agent or step that checks the result against the "
    "task's requirements by executing it (tests, a second source), at more than one level (it runs, it is "
    "correct), and end the run only when that check passes, never on an agent saying it is done.",
}

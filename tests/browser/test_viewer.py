"""The trace viewer in the real browser: search, jumps, keyboard, lazy loading, embedding API, XSS."""

import pytest

from tests.traces.viewer_factories import bare_trace, chatdev_log, trace_from_text

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">'


@pytest.fixture
def huge_trace(project):
    # ~1 MB, 20,000 lines, ~1,200 steps; every 9th message is 60 lines long (collapsed)
    return trace_from_text(project, chatdev_log(lines=20000, long_step_every=9), filename="huge.log", outcome="failure")


@pytest.fixture
def xss_trace(project):
    return trace_from_text(project, chatdev_log(lines=3000, marker=XSS), filename="xss.log")


def open_trace(page, live_server, trace, suffix=""):
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{live_server.url}/p/demo/traces/{trace.pk}/{suffix}")
    page.wait_for_selector(".trace-viewer[data-ready='1']")
    return errors


def card_count(page):
    return page.locator(".tv-step").count()


def in_view(page, selector):
    """True when the element is inside the viewer's scroll area."""
    return page.evaluate(
        """(sel) => {
            const el = document.querySelector(sel);
            if (!el) return false;
            const s = document.querySelector('.tv-scroll').getBoundingClientRect();
            const r = el.getBoundingClientRect();
            return r.top >= s.top - 1 && r.top < s.bottom;
        }""",
        selector,
    )


def current_mark_step(page):
    return page.evaluate(
        "() => Number(document.querySelector('mark.tv-hit.is-current').closest('.tv-step').dataset.step)"
    )


def test_trace_page_mounts_with_first_window_only(page, live_server, login, viewer, huge_trace, screenshot):
    login(page, viewer)
    errors = open_trace(page, live_server, huge_trace)
    assert errors == []
    assert 1 <= card_count(page) <= 60
    assert page.locator("#step-1 .tv-agent").inner_text() == "Chief Executive Officer"
    screenshot(page, "viewer-trace-page", full_page=False)


def test_slash_focuses_search_and_enter_goes_to_first_hit(page, live_server, login, viewer, huge_trace, screenshot):
    login(page, viewer)
    open_trace(page, live_server, huge_trace)
    page.keyboard.press("/")
    assert page.evaluate("() => document.activeElement.classList.contains('tv-search-input')")
    page.keyboard.type("turn 3:")
    page.keyboard.press("Enter")
    page.wait_for_selector("mark.tv-hit.is-current")
    assert page.locator(".tv-hits").inner_text().startswith("1 of ")
    assert page.locator("mark.tv-hit.is-current").inner_text() == "turn 3:"
    assert current_mark_step(page) == 4
    screenshot(page, "viewer-search", full_page=False)


def test_enter_and_shift_enter_walk_the_hits(page, live_server, login, viewer, huge_trace):
    login(page, viewer)
    open_trace(page, live_server, huge_trace)
    page.fill(".tv-search-input", "turn 3:")
    page.press(".tv-search-input", "Enter")
    page.wait_for_selector("mark.tv-hit.is-current")
    total = int(page.locator(".tv-hits").inner_text().split(" of ")[1])
    page.press(".tv-search-input", "Enter")
    page.wait_for_function("() => document.querySelector('.tv-hits').textContent.startsWith('2 of')")
    line2 = page.evaluate("() => document.querySelector('mark.tv-hit.is-current').closest('.tv-line').dataset.line")
    page.press(".tv-search-input", "Shift+Enter")
    page.wait_for_function("() => document.querySelector('.tv-hits').textContent.startsWith('1 of')")
    line1 = page.evaluate("() => document.querySelector('mark.tv-hit.is-current').closest('.tv-line').dataset.line")
    assert int(line1) < int(line2)
    page.press(".tv-search-input", "Shift+Enter")  # wraps to the last hit
    page.wait_for_function(f"() => document.querySelector('.tv-hits').textContent.startsWith('{total} of')")


def test_n_and_shift_n_walk_the_hits_outside_the_search_box(page, live_server, login, viewer, huge_trace):
    login(page, viewer)
    open_trace(page, live_server, huge_trace)
    page.fill(".tv-search-input", "turn 3:")
    page.press(".tv-search-input", "Enter")
    page.wait_for_selector("mark.tv-hit.is-current")
    page.press(".tv-search-input", "Escape")  # leaves the box; Escape also clears the search
    page.fill(".tv-search-input", "turn 5:")
    page.press(".tv-search-input", "Enter")
    page.wait_for_selector("mark.tv-hit.is-current")
    page.locator(".tv-scroll").click(position={"x": 5, "y": 5})
    page.keyboard.press("n")
    page.wait_for_function("() => document.querySelector('.tv-hits').textContent.startsWith('2 of')")
    page.keyboard.press("Shift+N")
    page.wait_for_function("() => document.querySelector('.tv-hits').textContent.startsWith('1 of')")
    assert page.locator("mark.tv-hit.is-current").inner_text() == "turn 5:"


def test_a_hit_in_a_far_step_loads_its_window(page, live_server, login, viewer, huge_trace):
    login(page, viewer)
    open_trace(page, live_server, huge_trace)
    page.fill(".tv-search-input", "turn 1100:")
    page.press(".tv-search-input", "Enter")
    page.wait_for_selector("mark.tv-hit.is-current")
    assert current_mark_step(page) == 1101
    assert in_view(page, "mark.tv-hit.is-current")
    assert card_count(page) < 2000


def test_a_far_hit_is_shown_from_the_search_answer_alone(page, live_server, login, viewer, huge_trace):
    login(page, viewer)
    open_trace(page, live_server, huge_trace)
    jumps = []  # a far jump's window (scroll loading, which may follow, asks for other windows)
    page.on("request", lambda r: "/steps/" in r.url and "max_lines=400" in r.url and jumps.append(r.url))
    page.fill(".tv-search-input", "turn 1100:")
    page.press(".tv-search-input", "Enter")
    page.wait_for_selector("mark.tv-hit.is-current")
    assert current_mark_step(page) == 1101
    assert in_view(page, "mark.tv-hit.is-current")
    assert jumps == []  # the search answer carried the hit's window


def test_a_hit_in_the_hidden_part_of_a_long_step_expands_it(page, live_server, login, viewer, huge_trace):
    login(page, viewer)
    open_trace(page, live_server, huge_trace)
    # turn 8 is 60 lines long: its line "50 turn 8:" is past the collapsed head
    page.fill(".tv-search-input", "50 turn 8:")
    page.press(".tv-search-input", "Enter")
    page.wait_for_selector("mark.tv-hit.is-current")
    assert page.locator("#step-9").get_attribute("class").count("is-collapsed") == 0
    assert in_view(page, "mark.tv-hit.is-current")


def test_show_all_expands_a_long_step(page, live_server, login, viewer, huge_trace):
    login(page, viewer)
    open_trace(page, live_server, huge_trace)
    before = page.locator("#step-9 .tv-line").count()
    page.click("#step-9 .tv-expand")
    page.wait_for_function("() => !document.querySelector('#step-9').classList.contains('is-collapsed')")
    assert before == 12
    assert page.locator("#step-9 .tv-line").count() > 60
    assert page.locator("#step-9 .tv-expand").inner_text() == "Collapse"


def test_clicking_the_outline_jumps_to_that_part(page, live_server, login, viewer, huge_trace):
    login(page, viewer)
    open_trace(page, live_server, huge_trace)
    box = page.locator(".tv-outline-canvas").bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] * 0.9)
    page.wait_for_function("() => Number(document.querySelector('.tv-pos-step').textContent) > 900")
    step = int(page.locator(".tv-pos-step").inner_text())
    assert abs(step - huge_trace.n_steps * 0.9) < 20
    assert in_view(page, f"#step-{step}")
    assert card_count(page) < 2000


def test_step_permalink_opens_at_that_step(page, live_server, login, viewer, huge_trace):
    login(page, viewer)
    open_trace(page, live_server, huge_trace, "#step-1000")
    assert in_view(page, "#step-1000")
    assert "is-current" in page.locator("#step-1000").get_attribute("class")


def test_line_permalink_highlights_that_line(page, live_server, login, viewer, huge_trace):
    login(page, viewer)
    open_trace(page, live_server, huge_trace, "#L15000")
    row = ".tv-line[data-line='15000']"
    page.wait_for_selector(row + ".is-selected")
    assert in_view(page, row)


def test_clicking_line_numbers_selects_a_range(page, live_server, login, viewer, huge_trace):
    login(page, viewer)
    open_trace(page, live_server, huge_trace)
    page.click(".tv-line[data-line='9'] .tv-ln")
    page.click(".tv-line[data-line='11'] .tv-ln", modifiers=["Shift"])
    assert page.locator(".tv-line.is-selected").count() == 3
    assert page.evaluate("() => location.hash") == "#L9-L11"


def test_j_and_k_move_between_steps(page, live_server, login, viewer, huge_trace):
    login(page, viewer)
    open_trace(page, live_server, huge_trace)
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.wait_for_function("() => document.querySelector('.tv-step.is-current')?.dataset.step === '2'")
    page.keyboard.press("k")
    page.wait_for_function("() => document.querySelector('.tv-step.is-current')?.dataset.step === '1'")
    assert in_view(page, "#step-1")


def test_g_and_shift_g_go_to_first_and_last_step(page, live_server, login, viewer, huge_trace):
    login(page, viewer)
    open_trace(page, live_server, huge_trace)
    last = huge_trace.n_steps - 1
    page.keyboard.press("Shift+G")
    page.wait_for_selector(f"#step-{last}.is-current")
    page.keyboard.press("g")
    page.wait_for_selector("#step-0.is-current")
    assert in_view(page, "#step-0")


def test_scrolling_loads_later_steps_and_keeps_the_dom_bounded(page, live_server, login, viewer, huge_trace):
    login(page, viewer)
    open_trace(page, live_server, huge_trace)
    first_window_end = page.evaluate("() => Number(document.querySelector('.tv-steps').lastElementChild.dataset.step)")
    last_js = "() => Number(document.querySelector('.tv-steps').lastElementChild.dataset.step)"
    for _ in range(100):  # bounded: each scroll to the bottom brings the next window in
        page.evaluate("() => { const s = document.querySelector('.tv-scroll'); s.scrollTop = s.scrollHeight; }")
        page.wait_for_timeout(120)
        if page.evaluate(last_js) > first_window_end + 400:
            break
    last = page.evaluate(last_js)
    assert last > first_window_end + 400
    assert card_count(page) <= 400
    # scrolling back up brings earlier steps back
    first = page.evaluate("() => Number(document.querySelector('.tv-steps').firstElementChild.dataset.step)")
    assert first > 0
    for _ in range(60):
        page.evaluate("() => { document.querySelector('.tv-scroll').scrollTop = 0; }")
        page.wait_for_timeout(100)
        if page.evaluate("() => document.querySelector('.tv-steps').firstElementChild.dataset.step") == "0":
            break
    assert page.locator("#step-0").count() == 1


def test_embedding_api_marks_and_callbacks(page, live_server, login, viewer, huge_trace, screenshot):
    login(page, viewer)
    open_trace(page, live_server, huge_trace)
    result = page.evaluate(
        """async () => {
            const { mountViewer } = await import('/static/js/trace-viewer.js');
            const root = document.querySelector('.trace-viewer');
            const seen = { focus: [], clicks: [], lines: [] };
            const v = mountViewer(root, {
                onStepFocus: (i) => seen.focus.push(i),
                onStepClick: (i) => seen.clicks.push(i),
                onLineSelect: (r) => seen.lines.push(r),
                keyboard: false,
            });
            v.setMarks({ 5: [{ label: '1.3', color: '#c0392b', title: 'Step repetition' }],
                         700: [{ label: '2.6', color: '#3559d4', title: 'Reasoning-action mismatch' }] });
            await v.focusStep(2);
            await v.nextMark();
            const afterFirst = v.currentStep();
            await v.nextMark();
            const afterSecond = v.currentStep();
            await v.prevMark();
            document.querySelector('#step-5 .tv-ln').click();
            document.querySelector('#step-5 .tv-agent').click();
            return { afterFirst, afterSecond, back: v.currentStep(), seen,
                     chips: [...document.querySelectorAll('#step-5 .tv-mark')].map((m) => m.textContent),
                     dots: document.querySelectorAll('.tv-outline-mark').length };
        }"""
    )
    assert (result["afterFirst"], result["afterSecond"], result["back"]) == (5, 700, 5)
    assert result["seen"]["focus"][:3] == [2, 5, 700]
    assert result["seen"]["clicks"] == [5, 5]
    assert result["seen"]["lines"][0]["start"] == result["seen"]["lines"][0]["end"]
    assert result["chips"] == ["1.3"]
    assert result["dots"] == 2
    screenshot(page, "viewer-marks", full_page=False)


def test_trace_content_never_executes(page, live_server, login, viewer, xss_trace, screenshot):
    login(page, viewer)
    errors = open_trace(page, live_server, xss_trace)
    # server-rendered steps
    assert page.evaluate("() => window.__xss") is None
    assert page.locator("#step-1 .tv-tx", has_text="<script>window.__xss=1</script>").count() == 1
    assert page.locator(".tv-steps img").count() == 0
    # lazily loaded steps (built by the module), search highlights and a jump far away
    page.fill(".tv-search-input", "<img src=x")
    page.press(".tv-search-input", "Shift+Enter")
    page.wait_for_selector("mark.tv-hit.is-current")
    for _ in range(5):
        page.evaluate("() => { const s = document.querySelector('.tv-scroll'); s.scrollTop = s.scrollHeight; }")
        page.wait_for_timeout(150)
    assert page.evaluate("() => window.__xss") is None
    assert page.locator(".tv-steps img, .tv-steps script").count() == 0
    assert page.locator("mark.tv-hit.is-current").inner_text() == "<img src=x"
    assert errors == []
    screenshot(page, "viewer-xss-as-text", full_page=False)


def test_raw_view_shows_text_and_never_executes(page, live_server, login, viewer, xss_trace, screenshot):
    lines = xss_trace.raw_text.split("\n")
    n = next(k for k, text in enumerate(lines, start=1) if k > 1500 and "<script>" in text)
    login(page, viewer)
    page.goto(f"{live_server.url}/p/demo/traces/{xss_trace.pk}/raw/?line={n}")
    page.wait_for_selector(f"#L{n}")
    assert page.evaluate("() => window.__xss") is None
    assert page.locator(".raw-pre img, .raw-pre script").count() == 0
    assert "<script>window.__xss=1</script>" in page.locator(f"#L{n}").inner_text()
    assert page.evaluate("() => location.hash") == f"#L{n}"
    screenshot(page, "viewer-raw", full_page=False)


def test_trace_list_filters_and_opens_a_trace(page, live_server, login, viewer, project, huge_trace, screenshot):
    for k in range(12):
        bare_trace(
            project,
            mas_name=["AG2", "MetaGPT", "HyperAgent"][k % 3],
            llm_name=["gpt-4o", "claude-3.7-sonnet"][k % 2],
            benchmark=["GSM-Plus", "ProgramDev", "SWE-Bench Lite"][k % 3],
            outcome=["success", "failure", ""][k % 3],
            title=f"Run {k}: fix the failing test in utils/dates.py",
            task="Solve the issue described in the repository's bug tracker and make the tests pass.",
            size_bytes=40_000 + k * 9_000,
            n_steps=20 + k * 7,
            n_agents=2 + k % 4,
        )
    login(page, viewer)
    page.goto(f"{live_server.url}/p/demo/traces/")
    screenshot(page, "viewer-trace-list")
    page.select_option("select[name=framework]", "ChatDev")  # applies at once
    page.wait_for_url("**framework=ChatDev**")
    assert page.locator(".tl-table tbody tr").count() == 1
    page.fill(".tl-filters input[name=q]", "huge")
    page.press(".tl-filters input[name=q]", "Enter")
    page.wait_for_url("**q=huge**")
    assert "framework=ChatDev" in page.url
    page.click(".tl-table tbody a")
    page.wait_for_selector(".trace-viewer[data-ready='1']")
    assert page.locator(".td-title").inner_text().endswith("huge.log")


def test_real_chatdev_trace_reads_well(page, live_server, login, viewer, project, shared_dir, screenshot):
    log = next(shared_dir.glob("mast/traces/chatdev/gpt4o_CLI_Base64*/*.log"))
    trace = trace_from_text(project, log.read_text(encoding="utf-8"), filename=log.name)
    login(page, viewer)
    errors = open_trace(page, live_server, trace)
    assert errors == []
    page.wait_for_selector(".tv-legend-item")  # the legend comes with the outline, fetched after first paint
    agents = set(page.locator(".tv-legend-item").all_inner_texts())
    assert {"Programmer", "Code Reviewer"} <= agents
    page.keyboard.press("j")
    for _ in range(6):
        page.keyboard.press("j")
    screenshot(page, "viewer-real-chatdev", full_page=False)


def test_expanding_a_giant_step_stays_bounded(page, live_server, login, viewer, project):
    body = "\n".join(f"output line {k}" for k in range(5000))
    text = (
        "[2026-30-11 09:00:00 INFO] Programmer: **Programmer<->Code Reviewer on : Coding, turn 0**\n\n"
        f"{body}\n\n"
        "[2026-30-11 09:00:01 INFO] Code Reviewer: **Code Reviewer<->Programmer on : Coding, turn 1**\n\nok\n"
    )
    trace = trace_from_text(project, text, filename="giant.log")
    login(page, viewer)
    open_trace(page, live_server, trace)
    assert page.locator("#step-0 .tv-line").count() == 12
    page.click("#step-0 .tv-expand")
    page.wait_for_selector("#step-0 .tv-more a")
    assert page.locator("#step-0 .tv-line").count() == 3000
    href = page.locator("#step-0 .tv-more a").get_attribute("href")
    page.click("#step-0 .tv-more a")
    page.wait_for_selector("#L3001")
    assert href.endswith("?line=3001")
    assert page.locator("#L3001").inner_text().endswith("output line 2998")


def test_hit_list_shows_snippets_and_jumps(page, live_server, login, viewer, xss_trace, screenshot):
    login(page, viewer)
    open_trace(page, live_server, xss_trace)
    page.fill(".tv-search-input", "window.__xss=2")
    page.press(".tv-search-input", "Enter")
    page.wait_for_selector("mark.tv-hit.is-current")
    page.click(".tv-list-hits")
    items = page.locator(".tv-hit-list .tv-hit-item")
    total = page.evaluate("() => Number(document.querySelector('.tv-hits').textContent.split(' of ')[1])")
    assert items.count() == total
    assert "<img src=x" in items.nth(0).inner_text()
    items.nth(200).click()
    page.wait_for_function("() => document.querySelector('.tv-hits').textContent.startsWith('201 of')")
    step = int(items.nth(200).locator(".tv-hit-where").inner_text().split(" ")[0].lstrip("#"))
    page.wait_for_function(
        f"() => document.querySelector('mark.tv-hit.is-current')?.closest('.tv-step')?.dataset.step === '{step}'"
    )
    assert in_view(page, "mark.tv-hit.is-current")
    assert page.evaluate("() => window.__xss") is None
    assert page.locator(".tv-hit-list img").count() == 0
    screenshot(page, "viewer-hit-list", full_page=False)


def test_racing_jumps_and_scrolls_keep_the_steps_in_order(page, live_server, login, viewer, huge_trace):
    login(page, viewer)
    open_trace(page, live_server, huge_trace)
    order_js = "() => [...document.querySelectorAll('.tv-step')].map((c) => Number(c.dataset.step))"
    for target in (600, 150, 1000, 300, 800, 40):
        page.evaluate(
            """async (target) => {
                const impl = document.querySelector('.trace-viewer').__traceViewer;
                const s = document.querySelector('.tv-scroll');
                s.scrollTop = s.scrollHeight;                    // a scroll-driven load starts...
                await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
                const jump = impl.focusStep(target);             // ...and a far jump races it
                s.scrollTop = s.scrollHeight;
                await jump;
                await new Promise((r) => setTimeout(r, 400));
            }""",
            target,
        )
        steps = page.evaluate(order_js)
        assert steps == list(range(steps[0], steps[0] + len(steps))), f"after jumping to {target}"
        assert target in steps

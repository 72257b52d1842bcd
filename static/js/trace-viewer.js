/**
 * trace-viewer.js: the trace viewer island (ES module, no dependencies).
 *
 * EMBEDDING CONTRACT (stable; the annotation workspace embeds this viewer):
 *
 *   Server side:  context.update(traces.viewer.selectors.trace_viewer_context(trace=trace))
 *                 {% include "traces/viewer/_viewer.html" with trace=trace steps=first_steps outline=outline %}
 *                 (+ <link rel="stylesheet" href="{% static 'css/viewer.css' %}">)
 *   That renders <div class="trace-viewer" data-trace-id data-steps-url data-search-url
 *                 data-outline-url data-raw-url data-total-steps data-total-lines ...>
 *
 *   import { mountViewer } from "/static/js/trace-viewer.js";
 *   const viewer = mountViewer(rootEl, {
 *     onStepFocus(stepIndex) {},          // the focused step changed (j/k, click, outline, focusStep, hit);
 *                                         // plain scrolling only moves the position indicator
 *     onStepClick(stepIndex, event) {},   // a click inside a step card
 *     onLineSelect({ start, end }) {},    // click a line number; shift+click extends the range
 *     keyboard: true,                     // j/k next/prev step, g/G first/last, / search (on document)
 *     hitKeys: false,                     // also n/N for next/previous search hit (the trace page sets it)
 *     useHash: false,                     // follow and write #step-N / #LN / #LN-LM
 *     onOutline(outline) {},              // the outline arrived (fetched after first paint; see below)
 *   });
 *   viewer.focusStep(i)       -> Promise: loads the window holding step i if needed, scrolls, focuses
 *   viewer.currentStep()      -> the focused (or top-most visible) step index
 *   viewer.outline()          -> the outline ({agents, kinds, a, k, ls, le, hues}) or null until it arrived
 *   viewer.setMarks({ 12: [{ label, color, title }] })   // evidence chips on cards + ticks on the outline
 *   viewer.nextMark() / viewer.prevMark()                -> Promise: focus the next/previous marked step
 *   viewer.focusLine(n)       -> Promise: show and highlight raw-text line n
 *   viewer.search(q)          -> Promise: run an in-trace search (highlights hits, fills the counter)
 *   viewer.destroy()          // unbinds every listener and observer
 *
 * The root fills its container's height; steps scroll inside .tv-scroll. The server renders only
 * the first screens (about 300 lines); further windows come from data-steps-url as the reader scrolls
 * or jumps, and the DOM is kept under MAX_STEPS step cards. The outline (the map on the left, the
 * agent legend, line -> step lookups) is fetched from data-outline-url once the text is on screen;
 * that URL carries the trace's version, so the browser keeps it. When ready (first paint done,
 * handlers bound) the root gets data-ready="1" and a performance mark "trace-viewer-ready"; scroll
 * loading starts after that, so the first screen never waits for windows below the fold.
 *
 * SECURITY: trace content is untrusted. This module only ever puts it into the page with
 * textContent / createTextNode; never innerHTML with data.
 */

const WINDOW_STEPS = 60;
const WINDOW_LINES = 1500;
const JUMP_STEPS = 24; // a far jump renders this many steps (about JUMP_LINES lines) at once; scrolling loads the rest
const JUMP_LINES = 400;
const MAX_STEPS = 400; // step cards kept in the DOM at once
const MAX_LINES = 8000; // rendered lines kept in the DOM at once (about)
const COLLAPSE_OVER = 40;
const COLLAPSED_HEAD = 12;
const EXPAND_MAX = 3000; // an expanded step shows at most this many lines; the raw view has the rest
// A longer line (a 40 MB blob on one line) is shown a piece at a time (LINE_PIECE in traces/viewer/selectors.py).
const LINE_PIECE = 20000;
const KIND_LABELS = {
  message: "Message",
  tool_call: "Tool call",
  tool_output: "Tool output",
  system: "System",
  log: "Log",
};

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

/** The control after the piece of a long line on show (the server renders the same: long_line_control). */
function longControl(offset, length) {
  const end = Math.min(offset + LINE_PIECE, length);
  const fmt = (n) => n.toLocaleString("en-US");
  const span = el("span", "tv-long muted small", ` characters ${fmt(offset + 1)}\u2013${fmt(end)} of ${fmt(length)} `);
  span.dataset.length = String(length);
  for (const [to, label] of [["prev", "previous"], ["next", "next"], ["end", "end"]]) {
    const b = el("button", "tv-long-go btn btn-small", label);
    b.type = "button";
    b.dataset.to = to;
    b.disabled = to === "prev" ? offset === 0 : end >= length;
    span.appendChild(b);
    span.appendChild(document.createTextNode(" "));
  }
  return span;
}

function escapeRegExp(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

function hueColor(hue, s = 62, l = 52) {
  return hue < 0 ? `hsl(220 8% ${l + 8}%)` : `hsl(${hue} ${s}% ${l}%)`;
}

class TraceViewer {
  constructor(root, options) {
    this.root = root;
    this.opts = options || {};
    const d = root.dataset;
    this.stepsUrl = d.stepsUrl;
    this.searchUrl = d.searchUrl;
    this.outlineUrl = d.outlineUrl;
    this.total = Number(d.totalSteps || 0);
    this.scroller = root.querySelector(".tv-scroll");
    this.stepsEl = root.querySelector(".tv-steps");
    this.topSentinel = root.querySelector(".tv-sentinel-top");
    this.bottomSentinel = root.querySelector(".tv-sentinel-bottom");
    this.canvas = root.querySelector(".tv-outline-canvas");
    this.outlineBox = root.querySelector(".tv-outline");
    this.viewBox = root.querySelector(".tv-outline-view");
    this.marksBox = root.querySelector(".tv-outline-marks");
    this.searchInput = root.querySelector(".tv-search-input");
    this.hitsLabel = root.querySelector(".tv-hits");
    this.prevBtn = root.querySelector(".tv-prev-hit");
    this.nextBtn = root.querySelector(".tv-next-hit");
    this.posLabel = root.querySelector(".tv-pos-step");
    this.listBtn = root.querySelector(".tv-list-hits");
    this.hitList = root.querySelector(".tv-hit-list");
    this.lo = Number(d.loadedStart || 0);
    this.hi = Number(d.loadedEnd || 0);
    this.content = new Map(); // step index -> full content, for steps built here
    this.marks = new Map(); // step index -> [{label, color, title}]
    this.search = { q: "", hits: [], index: -1, byStep: new Map(), truncated: false, pending: null, window: null };
    this.selection = null; // {start, end}
    this.anchorLine = null;
    this.current = this.lo < this.hi ? this.lo : 0;
    this.focused = null;
    this.gen = 0; // bumps on every jump: stale window loads are dropped
    this.loading = false;
    this.jumping = false;
    this.listeners = [];
    this.outline = null;
    this.destroyed = false;

    const data = root.querySelector("script#tv-outline-data, script[type='application/json']");
    if (data) this.setOutline(JSON.parse(data.textContent));

    this.bind();
    this.updateSentinels();
    this.onScroll();
    if (this.outline) this.drawOutline();
  }

  /** After first paint: fetch the outline and start loading windows as the reader scrolls. */
  startLoading() {
    if (this.destroyed || this.started) return;
    this.started = true;
    this.io.observe(this.topSentinel);
    this.io.observe(this.bottomSentinel);
    this.ensureOutline().catch((err) => this.showError(err));
  }

  /** The outline, fetched once (inline JSON, if a page still embeds it, is used as is). */
  ensureOutline() {
    if (this.outlinePromise) return this.outlinePromise;
    if (this.outline || !this.outlineUrl) {
      this.outlinePromise = Promise.resolve(this.outline);
      if (this.outline && this.opts.onOutline) this.opts.onOutline(this.outline);
      return this.outlinePromise;
    }
    this.outlinePromise = fetch(this.outlineUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`Loading the outline failed (${r.status})`))))
      .then((o) => {
        if (this.destroyed) return null;
        this.setOutline(o);
        this.drawOutline();
        this.renderOutlineMarks();
        if (this.opts.onOutline) this.opts.onOutline(o);
        return o;
      });
    return this.outlinePromise;
  }

  // ------------------------------------------------------------ setup

  on(target, type, fn, opts) {
    target.addEventListener(type, fn, opts);
    this.listeners.push(() => target.removeEventListener(type, fn, opts));
  }

  setOutline(o) {
    this.outline = o;
    if (o && Array.isArray(o.a)) this.total = o.a.length;
    this.renderLegend();
  }

  bind() {
    this.io = new IntersectionObserver((entries) => this.onIntersect(entries), {
      root: this.scroller,
      rootMargin: "1200px 0px",
    });

    let ticking = false;
    this.on(this.scroller, "scroll", () => {
      if (ticking) return;
      ticking = true;
      requestAnimationFrame(() => {
        ticking = false;
        this.onScroll();
      });
    }, { passive: true });

    this.on(this.stepsEl, "click", (e) => this.onStepsClick(e));
    this.on(this.canvas, "click", (e) => this.onOutlineClick(e));
    this.on(this.canvas, "mousemove", (e) => this.onOutlineHover(e));
    this.on(this.marksBox, "click", (e) => {
      const dot = e.target.closest("[data-step]");
      if (dot) this.focusStep(Number(dot.dataset.step), { notify: true });
    });

    const form = this.searchInput.form;
    if (form) this.on(form, "submit", (e) => e.preventDefault());
    let debounce = null;
    this.on(this.searchInput, "input", () => {
      clearTimeout(debounce);
      debounce = setTimeout(() => this.runSearch(this.searchInput.value), 250);
    });
    this.on(this.searchInput, "keydown", (e) => {
      if (e.key === "Enter") {
        e.preventDefault();
        clearTimeout(debounce);
        this.stepHit(e.shiftKey ? -1 : 1);
      } else if (e.key === "Escape") {
        e.preventDefault();
        this.searchInput.value = "";
        this.runSearch("");
        this.searchInput.blur();
        this.scroller.focus({ preventScroll: true });
      }
    });
    if (this.listBtn && this.hitList) {
      this.on(this.listBtn, "click", () => this.toggleHitList());
      this.on(this.hitList, "click", (e) => {
        const item = e.target.closest("[data-hit]");
        if (!item) return;
        this.search.index = Number(item.dataset.hit);
        this.updateHitLabel();
        this.showHit(this.search.hits[this.search.index]);
      });
    }
    this.on(this.prevBtn, "click", () => this.stepHit(-1));
    this.on(this.nextBtn, "click", () => this.stepHit(1));

    if (this.opts.keyboard !== false) this.on(document, "keydown", (e) => this.onKey(e));
    if (this.opts.useHash) {
      this.on(window, "hashchange", () => this.followHash());
    }
    this.resizeObs = new ResizeObserver(() => this.drawOutline());
    this.resizeObs.observe(this.outlineBox);
  }

  // ------------------------------------------------------------ loading windows

  async fetchWindow(start, limit, maxLines) {
    const url = new URL(this.stepsUrl, window.location.href);
    url.searchParams.set("start", String(start));
    url.searchParams.set("limit", String(limit));
    if (maxLines) url.searchParams.set("max_lines", String(maxLines));
    const r = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!r.ok) throw new Error(`Loading steps failed (${r.status})`);
    const data = await r.json();
    if (typeof data.total === "number" && !this.outline) this.total = data.total;
    return data.steps;
  }

  async loadNext() {
    if (this.loading || this.jumping || this.hi >= this.total) return;
    this.loading = true;
    const gen = this.gen;
    const from = this.hi;
    try {
      const steps = await this.fetchWindow(from, WINDOW_STEPS, WINDOW_LINES);
      if (gen !== this.gen || from !== this.hi || this.destroyed) return;
      const frag = document.createDocumentFragment();
      for (const s of steps) frag.appendChild(this.renderStep(s));
      this.stepsEl.appendChild(frag);
      if (steps.length) this.hi = steps[steps.length - 1].index + 1;
      else this.hi = this.total;
      this.trim("top");
      this.afterRender();
    } catch (err) {
      this.showError(err);
    } finally {
      this.loading = false;
    }
    this.recheckSentinels();
  }

  async loadPrev() {
    if (this.loading || this.jumping || this.lo <= 0) return;
    this.loading = true;
    const gen = this.gen;
    const until = this.lo;
    try {
      const start = Math.max(0, until - 40);
      const steps = await this.fetchWindow(start, until - start);
      if (gen !== this.gen || until !== this.lo || this.destroyed) return;
      const anchor = this.stepsEl.firstElementChild;
      const before = anchor ? anchor.getBoundingClientRect().top : 0;
      const frag = document.createDocumentFragment();
      for (const s of steps) frag.appendChild(this.renderStep(s));
      this.stepsEl.insertBefore(frag, this.stepsEl.firstChild);
      this.lo = start;
      if (anchor) this.scroller.scrollTop += anchor.getBoundingClientRect().top - before;
      this.trim("bottom");
      this.afterRender();
    } catch (err) {
      this.showError(err);
    } finally {
      this.loading = false;
    }
    this.recheckSentinels();
  }

  /** Replace the DOM with the window that holds step i (a far jump). The search answer carries
   * the window of its first hit after the reader's step (search.window): used once, no request. */
  async loadAround(i) {
    this.gen += 1;
    const gen = this.gen;
    const start = Math.max(0, i - 3);
    const given = this.search.window;
    let steps;
    if (given && given.length && given[0].index <= i && given[given.length - 1].index >= i) {
      this.search.window = null;
      steps = given;
    } else {
      this.jumping = true; // no scroll-driven loads until the new window is in place
      try {
        steps = await this.fetchWindow(start, Math.max(JUMP_STEPS, i - start + 1), JUMP_LINES);
      } finally {
        if (gen === this.gen) this.jumping = false;
      }
    }
    if (gen !== this.gen || this.destroyed) return false;
    this.stepsEl.replaceChildren();
    this.content.clear();
    const frag = document.createDocumentFragment();
    for (const s of steps) frag.appendChild(this.renderStep(s));
    this.stepsEl.appendChild(frag);
    this.lo = steps.length ? steps[0].index : start;
    this.hi = steps.length ? steps[steps.length - 1].index + 1 : start;
    this.loading = false;
    this.afterRender();
    return true;
  }

  /** Drop step cards from one end when the DOM holds too many. */
  trim(side) {
    const cards = this.stepsEl.children;
    let lines = 0;
    for (const c of cards) lines += c.querySelectorAll(".tv-line").length;
    while (cards.length > WINDOW_STEPS && (cards.length > MAX_STEPS || lines > MAX_LINES)) {
      const victim = side === "top" ? this.stepsEl.firstElementChild : this.stepsEl.lastElementChild;
      const n = victim.querySelectorAll(".tv-line").length;
      const idx = Number(victim.dataset.step);
      if (side === "top") {
        const h = victim.offsetHeight + parseFloat(getComputedStyle(victim).marginBottom || "0");
        victim.remove();
        this.scroller.scrollTop -= h;
        this.lo = idx + 1;
      } else {
        victim.remove();
        this.hi = idx;
      }
      this.content.delete(idx);
      lines -= n;
    }
  }

  afterRender() {
    this.updateSentinels();
    this.applyMarks();
    this.applyHighlights();
    this.applySelection();
    this.onScroll();
  }

  updateSentinels() {
    this.topSentinel.hidden = this.lo <= 0;
    this.bottomSentinel.hidden = this.hi >= this.total;
  }

  recheckSentinels() {
    // An observer fires on changes only: if a sentinel is still near after a load, load again.
    requestAnimationFrame(() => {
      if (this.destroyed) return;
      const box = this.scroller.getBoundingClientRect();
      const near = (s) => {
        if (s.hidden) return false;
        const r = s.getBoundingClientRect();
        return r.top < box.bottom + 1200 && r.bottom > box.top - 1200;
      };
      if (near(this.bottomSentinel)) this.loadNext();
      else if (near(this.topSentinel)) this.loadPrev();
    });
  }

  onIntersect(entries) {
    for (const entry of entries) {
      if (!entry.isIntersecting) continue;
      if (entry.target === this.bottomSentinel) this.loadNext();
      else if (entry.target === this.topSentinel) this.loadPrev();
    }
  }

  showError(err) {
    const msg = el("p", "tv-error", String(err && err.message ? err.message : err));
    this.bottomSentinel.replaceChildren(msg);
    this.bottomSentinel.hidden = false;
  }

  // ------------------------------------------------------------ rendering

  renderStep(s) {
    this.content.set(s.index, s.content);
    const lines = s.content.split("\n");
    const collapsed = lines.length > COLLAPSE_OVER;
    const card = el("article", "tv-step" + (collapsed ? " is-collapsed" : "") + (s.hue < 0 ? " no-agent" : ""));
    card.id = `step-${s.index}`;
    card.dataset.step = String(s.index);
    card.dataset.lineStart = String(s.line_start);
    card.dataset.lineEnd = String(s.line_end);
    card.style.setProperty("--h", String(Number(s.hue)));
    const head = el("header", "tv-step-head");
    if (s.agent) head.appendChild(el("span", "tv-agent", s.agent));
    if (s.recipient) {
      const to = el("span", "tv-recipient", `\u2192 ${s.recipient}`);
      to.title = "addressed to";
      head.appendChild(to);
    }
    const kind = el("span", "tv-kind", KIND_LABELS[s.kind] || s.kind);
    kind.classList.add(`tv-kind-${String(s.kind).replace(/[^a-z_]/g, "")}`);
    head.appendChild(kind);
    head.appendChild(el("span", "tv-marks"));
    head.appendChild(el("span", "spacer"));
    const link = el("a", "tv-step-link muted small", `#${s.index}`);
    link.href = `#step-${s.index}`;
    link.title = "Permalink to this step";
    head.appendChild(link);
    head.appendChild(el("span", "tv-lines-range muted small", `L${s.line_start}–L${s.line_end}`));
    card.appendChild(head);
    const pre = el("pre", "tv-pre");
    this.fillLines(pre, collapsed ? lines.slice(0, COLLAPSED_HEAD) : lines, s.line_start);
    card.appendChild(pre);
    if (collapsed) {
      const btn = el("button", "tv-expand btn btn-small", `Show all ${s.line_end - s.line_start + 1} lines`);
      btn.type = "button";
      card.appendChild(btn);
    }
    return card;
  }

  fillLines(pre, lines, first) {
    const frag = document.createDocumentFragment();
    lines.forEach((text, k) => {
      const line = el("span", "tv-line");
      line.dataset.line = String(first + k);
      const ln = el("span", "tv-ln", first + k);
      ln.setAttribute("aria-hidden", "true");
      line.appendChild(ln);
      if (text.length > LINE_PIECE) {
        const tx = el("span", "tv-tx", text.slice(0, LINE_PIECE));
        tx.dataset.offset = "0";
        line.appendChild(tx);
        line.appendChild(longControl(0, text.length));
      } else {
        line.appendChild(el("span", "tv-tx", text));
      }
      frag.appendChild(line);
    });
    pre.replaceChildren(frag);
  }

  async stepContent(i) {
    if (this.content.has(i)) return this.content.get(i);
    const steps = await this.fetchWindow(i, 1);
    const s = steps[0];
    if (!s || s.index !== i) throw new Error(`Step ${i} not found`);
    this.content.set(i, s.content);
    return s.content;
  }

  /** The text of raw-text line `lineNo` of step i (its content, fetched once, split once). */
  async lineText(i, lineNo, lineStart) {
    if (!this.lineCache || this.lineCache.step !== i) {
      const content = await this.stepContent(i);
      this.lineCache = { step: i, lines: content.split("\n") };
    }
    return this.lineCache.lines[lineNo - lineStart] || "";
  }

  /** Show another piece of a long line: `to` is "prev", "next", "end" or a character offset. */
  async showLinePiece(card, row, to) {
    const tx = row.querySelector(".tv-tx");
    const text = await this.lineText(Number(card.dataset.step), Number(row.dataset.line), Number(card.dataset.lineStart));
    const last = Math.floor(Math.max(text.length - 1, 0) / LINE_PIECE) * LINE_PIECE;
    const now = Number(tx.dataset.offset || 0);
    let offset = typeof to === "number" ? to : to === "prev" ? now - LINE_PIECE : to === "next" ? now + LINE_PIECE : last;
    offset = Math.min(Math.max(0, Math.floor(offset / LINE_PIECE) * LINE_PIECE), last);
    tx.textContent = text.slice(offset, offset + LINE_PIECE);
    tx.dataset.offset = String(offset);
    const control = row.querySelector(".tv-long");
    if (control) control.replaceWith(longControl(offset, text.length));
    this.highlightStep(card);
  }

  async expandStep(card, expand = true) {
    const i = Number(card.dataset.step);
    const content = await this.stepContent(i);
    const lines = content.split("\n");
    const pre = card.querySelector(".tv-pre");
    const btn = card.querySelector(".tv-expand");
    const old = card.querySelector(".tv-more");
    if (old) old.remove();
    if (expand) {
      const first = Number(card.dataset.lineStart);
      this.fillLines(pre, lines.slice(0, EXPAND_MAX), first);
      if (lines.length > EXPAND_MAX) {
        const more = el("p", "tv-more muted small", `${lines.length - EXPAND_MAX} more lines in this step: `);
        const a = el("a", "", `open the raw text at line ${first + EXPAND_MAX}`);
        const rawUrl = this.root.dataset.rawUrl || "";
        a.href = `${rawUrl}?line=${first + EXPAND_MAX}`;
        more.appendChild(a);
        pre.after(more);
      }
      card.classList.remove("is-collapsed");
      card.classList.add("is-expanded");
      if (btn) btn.textContent = "Collapse";
    } else {
      this.fillLines(pre, lines.slice(0, COLLAPSED_HEAD), Number(card.dataset.lineStart));
      card.classList.add("is-collapsed");
      card.classList.remove("is-expanded");
      if (btn) btn.textContent = `Show all ${lines.length} lines`;
    }
    this.highlightStep(card);
    this.applySelection();
  }

  renderLegend() {
    const legend = this.root.querySelector(".tv-legend");
    if (!legend || !this.outline) return;
    legend.replaceChildren();
    const o = this.outline;
    const counts = new Array(o.agents.length).fill(0);
    for (const a of o.a) counts[a] += 1;
    const order = o.agents.map((_, k) => k).filter((k) => o.agents[k]).sort((x, y) => counts[y] - counts[x]);
    for (const k of order.slice(0, 8)) {
      const chip = el("span", "tv-legend-item");
      const sw = el("span", "tv-swatch");
      sw.style.background = hueColor(o.hues[k]);
      chip.appendChild(sw);
      chip.appendChild(document.createTextNode(o.agents[k]));
      chip.title = `${o.agents[k]}: ${counts[k]} step${counts[k] === 1 ? "" : "s"}`;
      legend.appendChild(chip);
    }
    if (order.length > 8) legend.appendChild(el("span", "muted small", `+${order.length - 8} more`));
  }

  // ------------------------------------------------------------ outline

  drawOutline() {
    const c = this.canvas;
    const box = this.outlineBox.getBoundingClientRect();
    const w = Math.max(1, Math.round(box.width));
    const h = Math.max(1, Math.round(box.height));
    const dpr = window.devicePixelRatio || 1;
    if (c.width !== w * dpr || c.height !== h * dpr) {
      c.width = w * dpr;
      c.height = h * dpr;
      c.style.width = `${w}px`;
      c.style.height = `${h}px`;
    }
    const ctx = c.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    const o = this.outline;
    const n = this.total;
    if (!o || !n) return;
    const per = h / n;
    const colors = o.agents.map((_, k) => hueColor(o.hues[k], 60, 58));
    if (per > 3) {
      for (let i = 0; i < n; i++) {
        ctx.fillStyle = colors[o.a[i]];
        ctx.fillRect(0, i * per, w, per - 1);
      }
    } else {
      // thinner than 3 px a step: one rectangle per run of steps by the same agent (a 20 MB trace
      // has ~7,500 steps on ~600 px)
      for (let i = 0; i < n; ) {
        let j = i + 1;
        while (j < n && o.a[j] === o.a[i]) j++;
        ctx.fillStyle = colors[o.a[i]];
        ctx.fillRect(0, i * per, w, Math.max((j - i) * per, 0.6));
        i = j;
      }
    }
    if (this.search.hits.length) {
      ctx.fillStyle = "#f5b800";
      for (const step of this.search.byStep.keys()) {
        ctx.fillRect(w - 5, step * per, 5, Math.max(per, 2));
      }
    }
    this.updateViewBox();
  }

  stepAtOutlineY(clientY) {
    const box = this.canvas.getBoundingClientRect();
    const frac = (clientY - box.top) / Math.max(1, box.height);
    return Math.min(this.total - 1, Math.max(0, Math.floor(frac * this.total)));
  }

  onOutlineClick(e) {
    if (!this.total) return;
    this.focusStep(this.stepAtOutlineY(e.clientY), { notify: true });
  }

  onOutlineHover(e) {
    if (!this.total || !this.outline) return;
    const i = this.stepAtOutlineY(e.clientY);
    const o = this.outline;
    const who = o.agents[o.a[i]] || KIND_LABELS[o.kinds[o.k[i]]] || o.kinds[o.k[i]];
    this.canvas.title = `Step #${i} · ${who} · L${o.ls[i]}–L${o.le[i]}`;
  }

  updateViewBox() {
    if (!this.total) return;
    const [first, last] = this.visibleRange();
    const h = this.outlineBox.clientHeight;
    const top = (first / this.total) * h;
    const height = Math.max(4, ((last - first + 1) / this.total) * h);
    this.viewBox.style.transform = `translateY(${top}px)`;
    this.viewBox.style.height = `${height}px`;
  }

  renderOutlineMarks() {
    this.marksBox.replaceChildren();
    if (!this.total) return;
    for (const [i, list] of this.marks) {
      if (!list || !list.length) continue;
      const dot = el("button", "tv-outline-mark");
      dot.type = "button";
      dot.dataset.step = String(i);
      dot.style.top = `${((i + 0.5) / this.total) * 100}%`;
      dot.style.background = list[0].color || "var(--accent)";
      dot.title = `Step ${i}: ${list.map((m) => m.title || m.label).join(", ")}`;
      this.marksBox.appendChild(dot);
    }
  }

  // ------------------------------------------------------------ position

  cards() {
    return this.stepsEl.children;
  }

  cardFor(i) {
    return this.stepsEl.querySelector(`.tv-step[data-step="${Number(i)}"]`);
  }

  /** [first, last] step indexes visible in the scroller (binary search over the cards). */
  visibleRange() {
    const cards = this.cards();
    if (!cards.length) return [this.lo, this.lo];
    const top = this.scroller.scrollTop;
    const bottom = top + this.scroller.clientHeight;
    let lo = 0;
    let hi = cards.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const c = cards[mid];
      if (c.offsetTop + c.offsetHeight <= top + 4) lo = mid + 1;
      else hi = mid;
    }
    let last = lo;
    while (last + 1 < cards.length && cards[last + 1].offsetTop < bottom) last += 1;
    return [Number(cards[lo].dataset.step), Number(cards[last].dataset.step)];
  }

  onScroll() {
    const [first, last] = this.visibleRange();
    if (this.focused === null || this.focused < first || this.focused > last) this.current = first;
    else this.current = this.focused;
    if (this.posLabel) this.posLabel.textContent = String(this.current);
    this.updateViewBox();
  }

  scrollToCard(card, where = "top") {
    const sbox = this.scroller.getBoundingClientRect();
    const cbox = card.getBoundingClientRect();
    let delta = cbox.top - sbox.top - 8;
    if (where === "center") delta = cbox.top - sbox.top - sbox.height / 3;
    this.scroller.scrollTop += delta;
  }

  async ensureLoaded(i) {
    if (i >= this.lo && i < this.hi && this.cardFor(i)) return this.cardFor(i);
    const ok = await this.loadAround(i);
    if (!ok) return null;
    const card = this.cardFor(i);
    this.recheckSentinels();
    return card;
  }

  async focusStep(i, { notify = true, scroll = true, hash = true } = {}) {
    if (!this.total) return null;
    i = Math.min(this.total - 1, Math.max(0, Number(i) | 0));
    let card = null;
    try {
      card = await this.ensureLoaded(i);
    } catch (err) {
      this.showError(err);
      return null;
    }
    if (!card) return null;
    if (scroll) this.scrollToCard(card);
    this.setFocused(i, card);
    if (hash && this.opts.useHash) this.writeHash(`#step-${i}`);
    if (notify && this.opts.onStepFocus) this.opts.onStepFocus(i);
    this.onScroll();
    return card;
  }

  setFocused(i, card) {
    const prev = this.stepsEl.querySelector(".tv-step.is-current");
    if (prev) prev.classList.remove("is-current");
    if (card) card.classList.add("is-current");
    this.focused = i;
    this.current = i;
    if (this.posLabel) this.posLabel.textContent = String(i);
  }

  currentStep() {
    return this.current;
  }

  // ------------------------------------------------------------ lines

  async focusLine(line, end = line) {
    if (!this.outline && this.outlineUrl) await this.ensureOutline().catch(() => null);
    const o = this.outline;
    let i = null;
    if (o) {
      // binary search: the last step starting at or before the line
      let lo = 0;
      let hi = o.ls.length - 1;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (o.ls[mid] <= line) lo = mid;
        else hi = mid - 1;
      }
      i = o.ls[lo] <= line && o.le[lo] >= line ? lo : Math.min(lo + 1, o.ls.length - 1);
      if (o.ls[lo] > line) i = lo;
    } else {
      for (const c of this.cards()) {
        if (Number(c.dataset.lineEnd) >= line) {
          i = Number(c.dataset.step);
          break;
        }
      }
      if (i === null) return null;
    }
    const card = await this.focusStep(i, { hash: false, scroll: false });
    if (!card) return null;
    if (card.classList.contains("is-collapsed") && line >= Number(card.dataset.lineStart) + COLLAPSED_HEAD) {
      await this.expandStep(card, true);
    }
    this.selection = { start: line, end: Math.max(line, end) };
    this.applySelection();
    const row = card.querySelector(`.tv-line[data-line="${line}"]`);
    this.scrollToCard(row || card, row ? "center" : "top");
    return row;
  }

  applySelection() {
    for (const old of this.stepsEl.querySelectorAll(".tv-line.is-selected")) old.classList.remove("is-selected");
    if (!this.selection) return;
    const { start, end } = this.selection;
    if (end - start > 5000) return;
    for (const c of this.cards()) {
      if (Number(c.dataset.lineEnd) < start || Number(c.dataset.lineStart) > end) continue;
      for (const row of c.querySelectorAll(".tv-line")) {
        const n = Number(row.dataset.line);
        if (n >= start && n <= end) row.classList.add("is-selected");
      }
    }
  }

  // ------------------------------------------------------------ clicks and keys

  onStepsClick(e) {
    const card = e.target.closest(".tv-step");
    if (!card) return;
    const i = Number(card.dataset.step);
    const piece = e.target.closest(".tv-long-go");
    if (piece) {
      const row = piece.closest(".tv-line");
      this.showLinePiece(card, row, piece.dataset.to).catch((err) => this.showError(err));
      return;
    }
    const expand = e.target.closest(".tv-expand");
    if (expand) {
      this.expandStep(card, card.classList.contains("is-collapsed")).catch((err) => this.showError(err));
      return;
    }
    const link = e.target.closest(".tv-step-link");
    if (link && !this.opts.useHash) {
      e.preventDefault();
      this.focusStep(i, { notify: true });
      return;
    }
    const ln = e.target.closest(".tv-ln");
    if (ln) {
      const n = Number(ln.parentElement.dataset.line);
      if (e.shiftKey && this.anchorLine !== null) {
        this.selection = { start: Math.min(this.anchorLine, n), end: Math.max(this.anchorLine, n) };
      } else {
        this.anchorLine = n;
        this.selection = { start: n, end: n };
      }
      this.applySelection();
      const { start, end } = this.selection;
      if (this.opts.useHash) this.writeHash(start === end ? `#L${start}` : `#L${start}-L${end}`);
      if (this.opts.onLineSelect) this.opts.onLineSelect({ start, end });
    }
    if (!link) {
      this.setFocused(i, card);
      if (this.opts.onStepFocus) this.opts.onStepFocus(i);
    }
    if (this.opts.onStepClick) this.opts.onStepClick(i, e);
  }

  onKey(e) {
    if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return;
    const t = e.target;
    const typing = t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
    if (typing) return;
    if (e.key === "/") {
      e.preventDefault();
      this.searchInput.focus();
      this.searchInput.select();
    } else if (e.key === "j") {
      // Always the step after the one being read: before any step is focused that is the top-most
      // visible one (the first press used to focus the step already at the top, which looked like nothing).
      e.preventDefault();
      this.focusStep(this.current + 1);
    } else if (e.key === "k") {
      e.preventDefault();
      this.focusStep(this.current - 1);
    } else if ((e.key === "n" || e.key === "N") && this.opts.hitKeys && this.search.hits.length) {
      e.preventDefault();
      this.stepHit(e.key === "n" ? 1 : -1);
    } else if (e.key === "g") {
      e.preventDefault();
      this.focusStep(0);
    } else if (e.key === "G") {
      e.preventDefault();
      this.focusStep(this.total - 1);
    }
  }

  writeHash(hash) {
    if (window.location.hash !== hash) history.replaceState(null, "", hash);
  }

  followHash() {
    const h = window.location.hash;
    let m = /^#step-(\d+)$/.exec(h);
    if (m) return this.focusStep(Number(m[1]), { hash: false });
    m = /^#L(\d+)(?:-L?(\d+))?$/.exec(h);
    if (m) return this.focusLine(Number(m[1]), Number(m[2] || m[1]));
    return null;
  }

  // ------------------------------------------------------------ search

  async runSearch(q) {
    q = q.replace(/\n/g, "");
    if (q === this.search.q) return this.search.pending;
    this.search.q = q;
    if (q.trim().length < 2) {
      this.setHits(q, [], false);
      return null;
    }
    const url = new URL(this.searchUrl, window.location.href);
    url.searchParams.set("q", q);
    // the answer then carries the steps around the first hit from here: Enter shows it at once
    url.searchParams.set("around", String(this.current));
    const pending = fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`Search failed (${r.status})`))))
      .then((data) => {
        if (this.search.q !== q || this.destroyed) return;
        this.setHits(q, data.hits, data.truncated, data.window ? data.window.steps : null);
      })
      .catch((err) => {
        this.hitsLabel.textContent = String(err.message || err);
      });
    this.search.pending = pending;
    return pending;
  }

  setHits(q, hits, truncated, hitWindow = null) {
    const byStep = new Map();
    for (const h of hits) {
      if (!byStep.has(h.step)) byStep.set(h.step, []);
      byStep.get(h.step).push(h);
    }
    this.search = { q, hits, index: -1, byStep, truncated, pending: null, window: hitWindow };
    this.clearHighlights();
    this.applyHighlights();
    this.updateHitLabel();
    this.drawOutline();
    if (this.hitList && !this.hitList.hidden) this.renderHitList();
  }

  snippetNode(snippet) {
    snippet = snippet.replace(/^\s+/, "");
    const span = el("span", "tv-hit-snippet");
    const m = new RegExp(escapeRegExp(this.search.q), "i").exec(snippet);
    if (!m) {
      span.textContent = snippet;
      return span;
    }
    span.appendChild(document.createTextNode(snippet.slice(0, m.index)));
    span.appendChild(el("mark", "tv-hit", m[0]));
    span.appendChild(document.createTextNode(snippet.slice(m.index + m[0].length)));
    return span;
  }

  toggleHitList(show) {
    if (!this.hitList) return;
    const open = show === undefined ? this.hitList.hidden : show;
    this.hitList.hidden = !open;
    this.listBtn.setAttribute("aria-expanded", String(open));
    if (open) this.renderHitList();
  }

  renderHitList() {
    const { hits, index } = this.search;
    const frag = document.createDocumentFragment();
    const shown = hits.slice(0, 500);
    shown.forEach((h, k) => {
      const li = el("li", k === index ? "is-current" : "");
      const btn = el("button", "tv-hit-item");
      btn.type = "button";
      btn.dataset.hit = String(k);
      btn.appendChild(el("span", "tv-hit-where", `#${h.step} · L${h.line}`));
      btn.appendChild(this.snippetNode(h.snippet));
      li.appendChild(btn);
      frag.appendChild(li);
    });
    if (hits.length > shown.length) frag.appendChild(el("li", "muted small", `… and ${hits.length - shown.length} more`));
    if (!hits.length) frag.appendChild(el("li", "muted small", "No hits."));
    this.hitList.replaceChildren(frag);
  }

  updateHitLabel() {
    const { q, hits, index, truncated } = this.search;
    this.prevBtn.disabled = this.nextBtn.disabled = !hits.length;
    if (this.listBtn) this.listBtn.disabled = !hits.length;
    if (this.hitList && !hits.length && !this.hitList.hidden) this.toggleHitList(false);
    if (this.hitList && !this.hitList.hidden) {
      for (const li of this.hitList.querySelectorAll("li.is-current")) li.classList.remove("is-current");
      const cur = this.hitList.querySelector(`[data-hit="${index}"]`);
      if (cur) {
        cur.parentElement.classList.add("is-current");
        cur.scrollIntoView({ block: "nearest" });
      }
    }
    if (q.trim().length < 2) {
      this.hitsLabel.textContent = "";
      return;
    }
    if (!hits.length) {
      this.hitsLabel.textContent = "No hits";
      return;
    }
    const count = `${hits.length}${truncated ? "+" : ""}`;
    this.hitsLabel.textContent = index >= 0 ? `${index + 1} of ${count}` : `${count} hit${hits.length === 1 ? "" : "s"}`;
  }

  async stepHit(dir) {
    const typed = this.searchInput.value.replace(/\n/g, "");
    if (typed !== this.search.q) await this.runSearch(typed);
    else if (this.search.pending) await this.search.pending;
    const { hits } = this.search;
    if (!hits.length) return;
    let index = this.search.index;
    if (index < 0) {
      // the first hit at or after the current step (or before it, going up)
      index = dir > 0 ? hits.findIndex((h) => h.step >= this.current) : -1;
      if (dir < 0) {
        for (let k = hits.length - 1; k >= 0; k--) if (hits[k].step <= this.current) { index = k; break; }
      }
      if (index < 0) index = dir > 0 ? 0 : hits.length - 1;
    } else {
      index = (index + dir + hits.length) % hits.length;
    }
    this.search.index = index;
    this.updateHitLabel();
    await this.showHit(hits[index]);
  }

  async showHit(hit) {
    const card = await this.focusStep(hit.step, { scroll: false, hash: false });
    if (!card) return;
    if (card.classList.contains("is-collapsed") && hit.line >= Number(card.dataset.lineStart) + COLLAPSED_HEAD) {
      await this.expandStep(card, true);
    }
    const row = card.querySelector(`.tv-line[data-line="${hit.line}"]`);
    const piece = row && row.querySelector(".tv-tx[data-offset]");
    if (piece) {
      const off = Number(piece.dataset.offset);
      if (hit.col < off || hit.col >= off + piece.textContent.length) await this.showLinePiece(card, row, hit.col);
    }
    for (const old of this.stepsEl.querySelectorAll("mark.tv-hit.is-current")) old.classList.remove("is-current");
    const mark = card.querySelector(`.tv-line[data-line="${hit.line}"] mark[data-col="${hit.col}"]`);
    if (mark) {
      mark.classList.add("is-current");
      this.scrollToCard(mark, "center");
    } else {
      this.scrollToCard(card);
    }
    this.onScroll();
  }

  clearHighlights() {
    for (const mark of this.stepsEl.querySelectorAll("mark.tv-hit")) {
      const parent = mark.parentNode;
      parent.replaceChild(document.createTextNode(mark.textContent), mark);
      parent.normalize();
    }
  }

  applyHighlights() {
    if (!this.search.hits.length) return;
    for (const card of this.cards()) {
      if (this.search.byStep.has(Number(card.dataset.step)) && !card.querySelector("mark.tv-hit")) this.highlightStep(card);
    }
    const cur = this.search.hits[this.search.index];
    if (cur) {
      const mark = this.stepsEl.querySelector(
        `.tv-step[data-step="${cur.step}"] .tv-line[data-line="${cur.line}"] mark[data-col="${cur.col}"]`
      );
      if (mark) mark.classList.add("is-current");
    }
  }

  highlightStep(card) {
    const hits = this.search.byStep.get(Number(card.dataset.step));
    if (!hits) return;
    const lines = new Set(hits.map((h) => h.line));
    const re = new RegExp(escapeRegExp(this.search.q), "gi");
    for (const row of card.querySelectorAll(".tv-line")) {
      if (!lines.has(Number(row.dataset.line))) continue;
      const tx = row.querySelector(".tv-tx");
      if (!tx || tx.querySelector("mark")) continue;
      const text = tx.textContent;
      const offset = Number(tx.dataset.offset || 0); // a piece of a long line starts there
      const frag = document.createDocumentFragment();
      let last = 0;
      re.lastIndex = 0;
      let m;
      while ((m = re.exec(text)) !== null) {
        if (m[0].length === 0) break;
        if (m.index > last) frag.appendChild(document.createTextNode(text.slice(last, m.index)));
        const mark = el("mark", "tv-hit", m[0]);
        mark.dataset.col = String(offset + m.index);
        frag.appendChild(mark);
        last = m.index + m[0].length;
      }
      if (last < text.length) frag.appendChild(document.createTextNode(text.slice(last)));
      tx.replaceChildren(frag);
    }
  }

  // ------------------------------------------------------------ marks

  setMarks(map) {
    this.marks = new Map();
    const entries = map instanceof Map ? map.entries() : Object.entries(map || {});
    for (const [k, list] of entries) {
      if (Array.isArray(list) && list.length) this.marks.set(Number(k), list);
    }
    this.applyMarks();
    this.renderOutlineMarks();
  }

  applyMarks() {
    for (const card of this.cards()) {
      const slot = card.querySelector(".tv-marks");
      if (!slot) continue;
      const list = this.marks.get(Number(card.dataset.step)) || [];
      slot.replaceChildren();
      card.classList.toggle("is-marked", list.length > 0);
      for (const m of list) {
        const chip = el("span", "tv-mark", m.label);
        if (m.color) chip.style.setProperty("--mark", String(m.color));
        if (m.title) chip.title = String(m.title);
        slot.appendChild(chip);
      }
    }
  }

  markedSteps() {
    return [...this.marks.keys()].sort((a, b) => a - b);
  }

  nextMark() {
    const steps = this.markedSteps();
    if (!steps.length) return Promise.resolve(null);
    const next = steps.find((s) => s > this.current);
    return this.focusStep(next === undefined ? steps[0] : next);
  }

  prevMark() {
    const steps = this.markedSteps();
    if (!steps.length) return Promise.resolve(null);
    const before = steps.filter((s) => s < this.current);
    return this.focusStep(before.length ? before[before.length - 1] : steps[steps.length - 1]);
  }

  destroy() {
    this.destroyed = true;
    this.gen += 1;
    for (const off of this.listeners) off();
    this.listeners = [];
    if (this.io) this.io.disconnect();
    if (this.resizeObs) this.resizeObs.disconnect();
    delete this.root.dataset.ready;
    this.root.__traceViewer = null;
  }
}

/** Mount the viewer on a `.trace-viewer` root rendered by traces/_viewer.html. See the contract above. */
export function mountViewer(rootEl, options = {}) {
  if (!rootEl) throw new Error("mountViewer: no root element");
  if (rootEl.__traceViewer) rootEl.__traceViewer.destroy();
  const impl = new TraceViewer(rootEl, options);
  const viewer = {
    focusStep: (i) => impl.focusStep(i),
    focusLine: (n, end) => impl.focusLine(n, end),
    currentStep: () => impl.currentStep(),
    outline: () => impl.outline,
    ensureOutline: () => impl.ensureOutline(), // a promise of the outline (fetched once, shared)
    setMarks: (map) => impl.setMarks(map),
    nextMark: () => impl.nextMark(),
    prevMark: () => impl.prevMark(),
    search: (q) => impl.runSearch(q),
    destroy: () => impl.destroy(),
    get root() {
      return rootEl;
    },
  };
  rootEl.__traceViewer = impl;
  const ready = () => {
    if (impl.destroyed) return;
    rootEl.dataset.ready = "1";
    try {
      performance.mark("trace-viewer-ready");
    } catch (_) {
      /* no User Timing */
    }
    impl.startLoading();
  };
  const start = options.useHash && window.location.hash ? impl.followHash() : null;
  Promise.resolve(start)
    .catch(() => {})
    .then(() => requestAnimationFrame(() => setTimeout(ready, 0)));
  return viewer;
}

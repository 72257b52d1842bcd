/**
 * trace-tree.js: the step tree of span-based traces (OTLP, OpenInference, TRAIL, Langfuse,
 * LangSmith, OpenAI Agents SDK), beside the trace viewer. ES module, no dependencies.
 *
 *   import { mountTree } from "./trace-tree.js";
 *   const tree = mountTree(viewerRootEl, viewer);   // null for flat traces: nothing is added
 *
 * It reads the outline's `tree` (traces.viewer.tree.trace_tree: parent, model, tokens, duration
 * per step) and
 *   - adds a panel with two views: "Tree" (every step that has children, nested: agent invocations,
 *     answers that made tool calls, tool calls; fold / unfold each; click to jump) and "By agent"
 *     (each agent's steps, invocations and tokens);
 *   - decorates step cards as the viewer renders them (also the lazily loaded ones): indentation by
 *     depth, a link to the parent step, model / tokens / duration, and a fold button on cards that
 *     have children. Folding an invocation hides its steps in the list until unfolded.
 * Flat traces have no `tree`: the module returns at once and the viewer is untouched.
 * SECURITY: agent names and models are untrusted: only textContent is used.
 */

const MAX_INDENT = 6;

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

// Relative luminance (WCAG) of hsl(h s% l%).
function luminance(h, s, l) {
  const a = (s / 100) * Math.min(l / 100, 1 - l / 100);
  const f = (n) => {
    const k = (n + h / 30) % 12;
    const c = l / 100 - a * Math.max(-1, Math.min(k - 3, 9 - k, 1));
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * f(0) + 0.7152 * f(8) + 0.0722 * f(4);
}

// An agent's hue as text: as light as it may be while keeping 4.5:1 (AA) on the panel's
// lightest-but-one background (#e7ecf5, a selected row); yellows and cyans come out darker.
const PANEL_LUMINANCE = 0.836;
function hueColor(hue) {
  if (hue < 0) return "#5f6b7a";
  let l = 42;
  while (l > 16 && (PANEL_LUMINANCE + 0.05) / (luminance(hue, 62, l) + 0.05) < 4.5) l -= 2;
  return `hsl(${hue} 62% ${l}%)`;
}

function tokens(n) {
  return n >= 10000 ? `${Math.round(n / 1000)}k` : String(n);
}

function duration(ms) {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

/** The viewer's own outline (fetched once, after first paint): the tree rides on it. */
async function outlineData(root, viewer) {
  if (viewer && typeof viewer.ensureOutline === "function") return viewer.ensureOutline().catch(() => null);
  const res = await fetch(root.dataset.outlineUrl, { credentials: "same-origin" });
  return res.ok ? res.json() : null;
}

class StepTree {
  constructor(root, viewer, outline) {
    this.root = root;
    this.viewer = viewer;
    this.o = outline;
    const t = outline.tree;
    this.t = t;
    const n = t.p.length;
    this.n = n;
    this.depth = new Int32Array(n);
    this.kids = new Map(); // step -> child steps, only for steps that have some
    this.size = new Int32Array(n); // descendants
    for (let i = 0; i < n; i += 1) {
      const p = t.p[i];
      if (p >= 0 && p < i) {
        this.depth[i] = this.depth[p] + 1;
        if (!this.kids.has(p)) this.kids.set(p, []);
        this.kids.get(p).push(i);
      }
    }
    for (let i = n - 1; i >= 0; i -= 1) {
      const p = t.p[i];
      if (p >= 0 && p < i) this.size[p] += this.size[i] + 1;
    }
    this.folded = new Set();
    this.build();
    this.steps = root.querySelector(".tv-steps");
    this.decorateAll();
    this.mo = new MutationObserver((records) => {
      for (const r of records) for (const node of r.addedNodes) if (node.nodeType === 1 && node.matches(".tv-step")) this.decorate(node);
    });
    this.mo.observe(this.steps, { childList: true });
  }

  agentOf(i) {
    return this.o.agents[this.o.a[i]] || "";
  }

  hueOf(i) {
    return this.o.hues[this.o.a[i]];
  }

  kindOf(i) {
    return this.o.kinds[this.o.k[i]];
  }

  hidden(i) {
    for (let p = this.t.p[i]; p >= 0; p = this.t.p[p]) if (this.folded.has(p)) return true;
    return false;
  }

  // ----------------------------------------------------------------------------- the panel
  build() {
    const panel = el("aside", "tt-panel");
    panel.setAttribute("aria-label", "Step tree");
    // The bar holds the tablist and, beside it, "Fold all" (a tablist may hold tabs only).
    const bar = el("div", "tt-tabs");
    const tabs = el("div", "tt-tablist");
    tabs.setAttribute("role", "tablist");
    tabs.setAttribute("aria-label", "Show the steps");
    this.tabTree = el("button", "tt-tab is-active", "Tree");
    this.tabAgents = el("button", "tt-tab", "By agent");
    for (const b of [this.tabTree, this.tabAgents]) {
      b.type = "button";
      b.setAttribute("role", "tab");
      tabs.append(b);
    }
    this.tabTree.setAttribute("aria-selected", "true");
    this.tabAgents.setAttribute("aria-selected", "false");
    const foldAll = el("button", "tt-foldall btn btn-small", "Fold all");
    foldAll.type = "button";
    foldAll.title = "Fold every agent invocation";
    this.foldAllBtn = foldAll;
    bar.append(tabs, el("span", "spacer"), foldAll);
    this.treeView = el("ol", "tt-tree");
    this.treeView.setAttribute("role", "tree");
    this.agentView = el("div", "tt-agents");
    this.agentView.hidden = true;
    panel.append(bar, this.treeView, this.agentView);
    this.panel = panel;
    const body = this.root.querySelector(".tv-body");
    body.append(panel);
    this.root.classList.add("has-tree");

    const roots = [];
    for (let i = 0; i < this.n; i += 1) if (this.t.p[i] < 0 && this.kids.has(i)) roots.push(i);
    this.renderNodes(this.treeView, roots);
    if (!roots.length) this.treeView.append(el("li", "muted small", "No step has children."));
    this.renderAgents();

    this.tabTree.addEventListener("click", () => this.showTab(true));
    this.tabAgents.addEventListener("click", () => this.showTab(false));
    foldAll.addEventListener("click", () => this.foldAll());
    panel.addEventListener("click", (e) => this.onPanelClick(e));
  }

  showTab(tree) {
    this.treeView.hidden = !tree;
    this.agentView.hidden = tree;
    this.tabTree.classList.toggle("is-active", tree);
    this.tabAgents.classList.toggle("is-active", !tree);
    this.tabTree.setAttribute("aria-selected", String(tree));
    this.tabAgents.setAttribute("aria-selected", String(!tree));
  }

  nodeLabel(i) {
    const kind = this.kindOf(i);
    if (kind === "system") return "invocation";
    if (kind === "tool_call") return "call";
    return kind.replace("_", " ");
  }

  renderNodes(list, steps) {
    for (const i of steps) {
      const li = el("li", "tt-node");
      li.setAttribute("role", "treeitem");
      li.dataset.step = String(i);
      const row = el("div", "tt-row");
      const sub = (this.kids.get(i) || []).filter((c) => this.kids.has(c));
      const toggle = el("button", "tt-toggle", "▾");
      toggle.type = "button";
      toggle.title = "Fold / unfold these steps in the list";
      toggle.setAttribute("aria-label", `Fold step ${i}`);
      toggle.dataset.fold = String(i);
      const go = el("button", "tt-go");
      go.type = "button";
      go.dataset.go = String(i);
      const agent = el("span", "tt-agent", this.agentOf(i) || "—");
      agent.style.color = hueColor(this.hueOf(i));
      go.append(agent, el("span", "tt-what muted", ` ${this.nodeLabel(i)}`));
      go.title = `${this.agentOf(i) || "no agent"} ${this.nodeLabel(i)}, step #${i}: jump to it`;
      row.append(toggle, go, el("span", "tt-count muted small", `#${i} · ${this.size[i]}`));
      li.append(row);
      if (sub.length) {
        const ol = el("ol", "tt-sub");
        ol.setAttribute("role", "group");
        this.renderNodes(ol, sub);
        li.append(ol);
      }
      list.append(li);
    }
  }

  renderAgents() {
    const per = new Map();
    for (let i = 0; i < this.n; i += 1) {
      const name = this.agentOf(i);
      if (!per.has(name)) per.set(name, { steps: 0, tin: 0, tout: 0, inv: [], first: i, hue: this.hueOf(i) });
      const a = per.get(name);
      a.steps += 1;
      if (this.t.tin[i] > 0) a.tin += this.t.tin[i];
      if (this.t.tout[i] > 0) a.tout += this.t.tout[i];
      if (this.kids.has(i) && this.kindOf(i) === "system") a.inv.push(i);
    }
    for (const [name, a] of per) {
      const box = el("section", "tt-agent-box");
      const head = el("button", "tt-go tt-agent-head");
      head.type = "button";
      head.dataset.go = String(a.first);
      const label = el("span", "tt-agent", name || "(no agent)");
      label.style.color = hueColor(a.hue);
      head.append(label, el("span", "muted small", ` ${a.steps} step${a.steps === 1 ? "" : "s"}`));
      box.append(head);
      if (a.tin || a.tout) box.append(el("div", "muted small", `${tokens(a.tin)} tokens in · ${tokens(a.tout)} out`));
      if (a.inv.length) {
        const ol = el("ol", "tt-inv");
        for (const i of a.inv) {
          const li = el("li");
          const b = el("button", "tt-go small", `invocation #${i} (${this.size[i]} steps)`);
          b.type = "button";
          b.dataset.go = String(i);
          li.append(b);
          ol.append(li);
        }
        box.append(ol);
      }
      this.agentView.append(box);
    }
  }

  onPanelClick(e) {
    const fold = e.target.closest("[data-fold]");
    if (fold) {
      this.toggle(Number(fold.dataset.fold));
      return;
    }
    const go = e.target.closest("[data-go]");
    if (go) {
      const i = Number(go.dataset.go);
      for (let p = this.t.p[i]; p >= 0; p = this.t.p[p]) if (this.folded.has(p)) this.toggle(p);
      this.viewer.focusStep(i);
    }
  }

  // ----------------------------------------------------------------------------- folding
  toggle(i) {
    if (this.folded.has(i)) this.folded.delete(i);
    else this.folded.add(i);
    this.refresh();
  }

  foldAll() {
    const any = this.folded.size > 0;
    this.folded.clear();
    if (!any) for (const [i] of this.kids) if (this.kindOf(i) === "system") this.folded.add(i);
    this.foldAllBtn.textContent = any ? "Fold all" : "Unfold all";
    this.refresh();
  }

  refresh() {
    for (const b of this.panel.querySelectorAll("[data-fold]")) {
      const folded = this.folded.has(Number(b.dataset.fold));
      b.textContent = folded ? "▸" : "▾";
      b.setAttribute("aria-expanded", String(!folded));
    }
    this.decorateAll();
  }

  // ----------------------------------------------------------------------------- step cards
  decorateAll() {
    for (const card of this.root.querySelectorAll(".tv-steps > .tv-step")) this.decorate(card);
  }

  decorate(card) {
    const i = Number(card.dataset.step);
    if (!(i >= 0 && i < this.n)) return;
    card.style.setProperty("--tt-depth", String(Math.min(this.depth[i], MAX_INDENT)));
    card.classList.add("tt-step");
    card.classList.toggle("tt-hidden", this.hidden(i));
    const head = card.querySelector(".tv-step-head");
    if (!head) return;
    let extra = head.querySelector(".tt-extra");
    if (!extra) {
      extra = el("span", "tt-extra");
      const spacer = head.querySelector(".spacer");
      head.insertBefore(extra, spacer || null);
    }
    extra.replaceChildren();
    const p = this.t.p[i];
    if (p >= 0) {
      const up = el("a", "tt-parent small", `↳ #${p}`);
      up.href = `#step-${p}`;
      up.title = `Parent step #${p} (${this.agentOf(p) || "no agent"})`;
      up.addEventListener("click", (e) => {
        e.preventDefault();
        this.viewer.focusStep(p);
      });
      extra.append(up);
    }
    const meta = [];
    if (this.t.m[i] >= 0) meta.push(this.t.models[this.t.m[i]]);
    if (this.t.tin[i] >= 0 || this.t.tout[i] >= 0) {
      meta.push(`${tokens(Math.max(this.t.tin[i], 0))} → ${tokens(Math.max(this.t.tout[i], 0))} tok`);
    }
    if (this.t.ms[i] >= 0) meta.push(duration(this.t.ms[i]));
    if (meta.length) extra.append(el("span", "tt-meta small", meta.join(" · ")));
    if (this.kids.has(i)) {
      const folded = this.folded.has(i);
      const b = el("button", "tt-fold btn btn-small", folded ? `▸ ${this.size[i]} hidden` : "▾ fold");
      b.type = "button";
      b.title = folded ? "Show the steps under this one" : `Hide the ${this.size[i]} steps under this one`;
      b.setAttribute("aria-expanded", String(!folded));
      b.addEventListener("click", (e) => {
        e.stopPropagation();
        this.toggle(i);
      });
      extra.append(b);
    }
  }

  destroy() {
    this.mo.disconnect();
    this.panel.remove();
    this.root.classList.remove("has-tree");
  }
}

/** Mount the step tree beside a mounted viewer; resolves to null when the trace has no tree. */
export async function mountTree(rootEl, viewer) {
  if (!rootEl || !viewer) return null;
  const outline = await outlineData(rootEl, viewer);
  if (!outline || !outline.tree || !outline.tree.p.length) return null;
  const tree = new StepTree(rootEl, viewer, outline);
  rootEl.dataset.tree = "1";
  return { destroy: () => tree.destroy(), toggle: (i) => tree.toggle(i) };
}

/**
 * workspace-attribution.js: the failure attribution part of the labelling screen (ES module).
 *
 * One key (m) marks the focused step as decisive (m on the same step again unmarks it). The step
 * gets a "decisive" mark on its card and on the outline; the panel shows the step's agent (taken
 * from the step, changeable, with Confirm), the modes it belongs to (the modes marked present)
 * and a reason. "No single decisive step" is an answer too. The value lives in the workspace's
 * content (get/set), so it is saved, conflict-checked and kept offline like every other label.
 *
 * Trace content (agent names) is only ever set as text.
 */
export const DECISIVE_COLOR = "#a3470c";

export function createAttribution({ viewer, outline, get, set, presentModes, locked }) {
  const box = document.getElementById("ws-attr");
  if (!box) return { marks: () => {}, render: () => {} };
  const summary = document.getElementById("ws-attr-summary");
  const body = document.getElementById("ws-attr-body");
  const agentEl = document.getElementById("ws-attr-agent");
  const fromEl = document.getElementById("ws-attr-from");
  const modesEl = document.getElementById("ws-attr-modes");
  const reasonEl = document.getElementById("ws-attr-reason");
  const noneEl = document.getElementById("ws-attr-none");
  const clearEl = document.getElementById("ws-attr-clear");
  const confirmEl = document.getElementById("ws-attr-confirm");

  // The step's agent: from the outline once it arrived (fetched after first paint), else from the
  // step's card, which is on screen when the step is focused.
  function stepAgent(i) {
    const o = (viewer && typeof viewer.outline === "function" && viewer.outline()) || outline;
    if (o && o.agents && o.a && typeof o.a[i] === "number") return o.agents[o.a[i]] || "";
    const card = document.querySelector(`.tv-step[data-step="${Number(i)}"] .tv-agent`);
    return card ? card.textContent.trim() : "";
  }

  function blank() {
    return { step: null, no_single_step: false, agent: "", modes: [], reason: "", errors: [] };
  }

  function update(fn) {
    if (locked) return;
    const value = { ...blank(), ...(get() || {}) };
    fn(value);
    set(value.step === null && !value.no_single_step ? null : value);
  }

  function markFocused() {
    if (!viewer || locked) return;
    const i = viewer.currentStep();
    if (typeof i !== "number") return;
    const cur = get();
    if (cur && cur.step === i) {
      set(null); // m again on the decisive step: unmark
      return;
    }
    update((v) => {
      v.step = i;
      v.no_single_step = false;
      v.agent = stepAgent(i);
      v.modes = v.modes.length ? v.modes : presentModes().slice(0, 1);
    });
    box.scrollIntoView({ block: "nearest" });
  }

  function render() {
    const v = get();
    box.classList.toggle("is-set", Boolean(v));
    body.hidden = !v;
    clearEl.hidden = !v;
    noneEl.checked = Boolean(v && v.no_single_step);
    if (!v) {
      summary.replaceChildren(
        "No decisive step yet. Focus the step from which the failure could no longer be avoided and press ",
        kbd("m"),
        ".",
      );
    } else if (v.no_single_step) {
      summary.textContent = "No single decisive step: the failure built up over several steps.";
    } else {
      const b = document.createElement("b");
      b.textContent = `Decisive step #${v.step}`;
      const who = stepAgent(v.step);
      summary.replaceChildren(b, who ? ` · written by ${who}` : "", " · ");
      const go = document.createElement("button");
      go.type = "button";
      go.className = "linklike small";
      go.textContent = "show";
      go.addEventListener("click", () => viewer && viewer.focusStep(v.step));
      summary.appendChild(go);
    }
    if (v) {
      if (document.activeElement !== agentEl && agentEl.value !== v.agent) agentEl.value = v.agent;
      const who = v.step !== null ? stepAgent(v.step) : "";
      fromEl.textContent = who ? (v.agent === who ? "(from the step)" : `(the step is ${who})`) : "";
      confirmEl.hidden = !who || v.agent === who;
      if (document.activeElement !== reasonEl && reasonEl.value !== v.reason) reasonEl.value = v.reason;
      const present = presentModes();
      const codes = [...new Set([...present, ...v.modes])];
      modesEl.replaceChildren();
      if (!codes.length) modesEl.appendChild(text("span", "muted", "Mark a mode present to choose it here."));
      for (const code of codes) {
        const b = text("button", "ws-attr-mode", code);
        b.type = "button";
        b.setAttribute("aria-pressed", String(v.modes.includes(code)));
        b.addEventListener("click", () =>
          update((x) => {
            x.modes = x.modes.includes(code) ? x.modes.filter((c) => c !== code) : [...x.modes, code];
          }),
        );
        modesEl.appendChild(b);
      }
    }
  }

  function marks(map) {
    const v = get();
    if (!v || v.no_single_step || typeof v.step !== "number") return;
    const list = map[v.step] || [];
    list.unshift({ label: "decisive", color: DECISIVE_COLOR, title: `Decisive step (${v.agent || "no agent"})` });
    map[v.step] = list;
  }

  agentEl.addEventListener("input", () => update((v) => (v.agent = agentEl.value)));
  reasonEl.addEventListener("input", () => update((v) => (v.reason = reasonEl.value)));
  confirmEl.addEventListener("click", () => update((v) => (v.agent = stepAgent(v.step))));
  clearEl.addEventListener("click", () => !locked && set(null));
  noneEl.addEventListener("change", () =>
    update((v) => {
      v.no_single_step = noneEl.checked;
      if (noneEl.checked) v.step = null;
    }),
  );
  document.addEventListener("keydown", (e) => {
    if (e.key !== "m" || e.ctrlKey || e.metaKey || e.altKey) return;
    const t = e.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    const help = document.getElementById("ws-help");
    if (help && !help.hidden) return;
    e.preventDefault();
    markFocused();
  });
  return { marks, render, markFocused };
}

function kbd(s) {
  return text("kbd", "", s);
}

function text(tag, className, s) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  node.textContent = s;
  return node;
}

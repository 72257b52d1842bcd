/**
 * workspace.js: the labelling screen (ES module). Keyboard first, autosave, offline-safe.
 *
 * The labels being edited live here, with their rendering and the keys; every change goes through
 * changed(), which hands it to the save protocol in workspace-save.js (local draft, revisions, 409
 * conflicts, retries). A conflict is shown here and the person chooses; nothing is overwritten silently.
 *
 * Trace content is never put into the page with innerHTML: text only.
 */
import { mountViewer } from "./trace-viewer.js";
import { mountTree } from "./trace-tree.js";
import { createSaver } from "./workspace-save.js";
import { createAttribution } from "./workspace-attribution.js";

const cfg = JSON.parse(document.getElementById("ws-config").textContent);
const root = document.getElementById("ws");
const modeEls = [...root.querySelectorAll(".ws-mode")];
const CODES = modeEls.map((m) => m.dataset.code);
const statusEl = document.getElementById("ws-status");
const stateBadge = document.getElementById("ws-state-badge");
const banner = document.getElementById("ws-banner");
const progressEl = document.getElementById("ws-progress");
const notesEl = document.getElementById("ws-notes");
const codeInput = document.getElementById("ws-code-input");
const codeChips = document.getElementById("ws-code-chips");
const taskEl = document.getElementById("ws-task");
const helpEl = document.getElementById("ws-help");
const csrf = (() => {
  try {
    return JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRFToken"];
  } catch (_) {
    return "";
  }
})();
const DECISION_COLORS = { present: "#c0392b", unsure: "#b9770e", absent: "#7b8594" };

// ------------------------------------------------------------ state

let content = fromSnapshot(cfg.snapshot);
let current = 0;
let linePick = null; // lines selected in the trace: {lines: [a, b], step}; else "e" attaches the current step
let dismissed = new Set(); // "rater|code" suggestions the person rejected
const locked = Boolean(cfg.locked);

function fromSnapshot(s) {
  const labels = {};
  for (const lab of s.labels || []) {
    labels[lab.code] = { decision: lab.decision, evidence: lab.evidence || [], rationale: lab.rationale || "" };
  }
  const attribution = s.attribution ? { ...s.attribution } : null;
  return { task_success: s.task_success || "unknown", notes: s.notes || "", open_codes: [...(s.open_codes || [])], labels, attribution };
}

function payload() {
  const labels = [];
  for (const code of CODES) {
    const lab = content.labels[code];
    if (lab && lab.decision) {
      labels.push({ code, decision: lab.decision, evidence: lab.evidence, rationale: lab.rationale });
    }
  }
  return {
    labels,
    task_success: content.task_success,
    notes: content.notes,
    open_codes: [...content.open_codes].sort(),
    attribution: content.attribution || null,
  };
}

function label(code) {
  if (!content.labels[code]) content.labels[code] = { decision: "", evidence: [], rationale: "" };
  return content.labels[code];
}

// ------------------------------------------------------------ viewer

const viewerRoot = document.querySelector(".trace-viewer");
let outline = null; // the viewer fetches it after first paint; evidence given as lines is marked once it is here
const viewer = viewerRoot
  ? mountViewer(viewerRoot, {
      keyboard: true,
      useHash: false,
      onOutline(o) {
        outline = o;
        updateMarks();
      },
      onStepFocus(i) {
        if (linePick && linePick.step !== i) linePick = null;
        renderAttach();
      },
      onLineSelect({ start, end }) {
        linePick = { lines: [start, end], step: stepForLine(start) };
        renderAttach();
      },
    })
  : null;
if (viewer) mountTree(viewerRoot, viewer); // span-based traces: the step tree beside the steps

const attr = createAttribution({
  viewer,
  outline,
  locked,
  get: () => content.attribution,
  set: (v) => {
    content.attribution = v;
    changed();
  },
  presentModes: () => CODES.filter((c) => (content.labels[c] || {}).decision === "present"),
});

function stepForLine(n) {
  if (!outline || !outline.ls) return null;
  let lo = 0;
  let hi = outline.ls.length - 1;
  let found = null;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (outline.ls[mid] <= n) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}

function currentPick() {
  if (!viewer) return null;
  const step = viewer.currentStep();
  if (linePick && linePick.step === step) return { lines: [...linePick.lines] };
  return typeof step === "number" ? { step } : null;
}

function evidenceText(ev) {
  if ("step" in ev) return `step ${ev.step}`;
  return ev.lines[0] === ev.lines[1] ? `L${ev.lines[0]}` : `L${ev.lines[0]}–L${ev.lines[1]}`;
}

function sameEvidence(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

function updateMarks() {
  if (!viewer) return;
  const marks = {};
  for (const code of CODES) {
    const lab = content.labels[code];
    if (!lab || !lab.decision) continue;
    for (const ev of lab.evidence) {
      const step = "step" in ev ? ev.step : stepForLine(ev.lines[0]);
      if (step === null || step === undefined) continue;
      (marks[step] = marks[step] || []).push({
        label: code,
        color: DECISION_COLORS[lab.decision],
        title: `${code} ${lab.decision} · ${evidenceText(ev)}`,
      });
    }
  }
  attr.marks(marks);
  viewer.setMarks(marks);
}

// ------------------------------------------------------------ rendering

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function suggestionsFor(code) {
  const out = [];
  for (const other of cfg.others || []) {
    const lab = other.labels[code];
    if (lab && !dismissed.has(`${other.rater}|${code}`)) out.push({ ...lab, rater: other.rater, kind: other.kind, suggestion: other.suggestion });
  }
  return out;
}

function renderMode(i) {
  const box = modeEls[i];
  const code = CODES[i];
  const lab = content.labels[code] || { decision: "", evidence: [], rationale: "" };
  box.classList.toggle("is-current", i === current);
  for (const d of ["present", "absent", "unsure"]) {
    box.classList.toggle(`is-${d}`, lab.decision === d);
    const btn = box.querySelector(`[data-decision="${d}"]`);
    btn.setAttribute("aria-pressed", String(lab.decision === d));
  }
  box.querySelector(".ws-ev-count").textContent = lab.evidence.length ? `${lab.evidence.length} ev.` : "";
  const chips = box.querySelector(".ws-chips");
  chips.replaceChildren();
  lab.evidence.forEach((ev, k) => {
    const chip = el("span", "ws-chip");
    const go = el("button", "ws-chip-go", evidenceText(ev));
    go.type = "button";
    go.title = "Show in the trace";
    go.addEventListener("click", () => showEvidence(ev));
    const rm = el("button", "ws-chip-rm", "×");
    rm.type = "button";
    rm.title = "Remove this evidence";
    rm.setAttribute("aria-label", `Remove ${evidenceText(ev)}`);
    rm.addEventListener("click", () => {
      lab.evidence.splice(k, 1);
      changed();
    });
    chip.append(go, rm);
    chips.appendChild(chip);
  });
  const ta = box.querySelector(".ws-rationale");
  if (document.activeElement !== ta && ta.value !== lab.rationale) ta.value = lab.rationale;
  const sugg = suggestionsFor(code);
  box.querySelector(".ws-sugg-dot").hidden = !sugg.length;
  const sbox = box.querySelector(".ws-suggestions");
  sbox.replaceChildren();
  for (const s of sugg) {
    const row = el("div", "ws-suggestion small");
    const text = el("span", "ws-sugg-text");
    text.appendChild(el("span", "ws-sugg-who", `${s.rater}${s.suggestion ? " (suggestion)" : ""}: `));
    text.appendChild(el("b", `ws-sugg-dec dec-${s.decision}`, s.decision));
    if (s.rationale) text.appendChild(el("span", "muted", ` — ${s.rationale}`));
    const actions = el("span", "ws-sugg-actions");
    const accept = el("button", "btn btn-small", "Accept");
    accept.type = "button";
    accept.title = "Copy this decision into my label (a)";
    accept.addEventListener("click", () => acceptSuggestion(code, s));
    const reject = el("button", "btn btn-small", "Reject");
    reject.type = "button";
    reject.addEventListener("click", () => {
      dismissed.add(`${s.rater}|${code}`);
      renderMode(i);
    });
    actions.append(accept, reject);
    row.append(text, actions);
    sbox.appendChild(row);
  }
}

function renderAttach() {
  const p = currentPick();
  const text = p ? `+ Attach ${evidenceText(p)}` : "+ Attach step";
  for (const b of root.querySelectorAll(".ws-attach")) b.textContent = text;
}

function renderTraceLevel() {
  for (const b of taskEl.querySelectorAll("[data-ts]")) {
    b.setAttribute("aria-checked", String(b.dataset.ts === content.task_success));
  }
  if (document.activeElement !== notesEl && notesEl.value !== content.notes) notesEl.value = content.notes;
  codeChips.replaceChildren();
  for (const name of content.open_codes) {
    const chip = el("span", "ws-chip ws-code");
    chip.appendChild(el("span", "", name));
    const rm = el("button", "ws-chip-rm", "×");
    rm.type = "button";
    rm.setAttribute("aria-label", `Remove ${name}`);
    rm.addEventListener("click", () => {
      content.open_codes = content.open_codes.filter((c) => c !== name);
      changed();
    });
    chip.appendChild(rm);
    codeChips.appendChild(chip);
  }
}

function render() {
  modeEls.forEach((_, i) => renderMode(i));
  renderTraceLevel();
  const decided = CODES.filter((c) => ["present", "absent"].includes((content.labels[c] || {}).decision)).length;
  progressEl.textContent = `${decided} of ${CODES.length} modes decided`;
  stateBadge.textContent = saver.state === "submitted" ? "Submitted" : "Draft";
  stateBadge.className = `badge ws-state-badge ${saver.state === "submitted" ? "badge-ok" : ""}`;
  updateMarks();
  attr.render();
  renderAttach();
}

function setStatus(state, text) {
  const texts = {
    idle: "Not saved yet",
    saved: "Saved ✓",
    saving: "Saving…",
    offline: "Offline — changes kept locally",
    conflict: "Conflict",
    error: "Not saved",
    locked: "Read only",
  };
  statusEl.dataset.state = state;
  statusEl.textContent = text || texts[state];
}

function showBanner(text, actions = [], kind = "warn") {
  banner.hidden = false;
  banner.dataset.kind = kind;
  banner.querySelector(".ws-banner-text").textContent = text;
  const box = banner.querySelector(".ws-banner-actions");
  box.replaceChildren();
  for (const [name, fn, primary] of actions) {
    const b = el("button", `btn btn-small${primary ? " btn-primary" : ""}`, name);
    b.type = "button";
    b.addEventListener("click", fn);
    box.appendChild(b);
  }
}

function hideBanner() {
  banner.hidden = true;
}

// ------------------------------------------------------------ saving

const saver = createSaver({
  apiUrl: cfg.apiUrl,
  submitUrl: cfg.submitUrl,
  storageKey: cfg.storageKey,
  csrf,
  revision: cfg.snapshot.revision,
  state: cfg.snapshot.state,
  locked,
  payload,
  onStatus: setStatus,
  onSaved: render,
  onConflict: showConflict,
  onProblem: (message) => showBanner(message, [], "danger"),
});

function changed() {
  if (locked) return;
  saver.changed();
  render();
}

function showConflict(saved) {
  showBanner(
    `Conflict: this annotation was saved elsewhere (revision ${saved.revision}) after the version you were editing. ` +
      "Nothing was overwritten. Load the saved version, or keep yours and replace it.",
    [
      [
        "Load saved version",
        () => {
          content = fromSnapshot(saver.loadSaved());
          hideBanner();
          render();
        },
        true,
      ],
      [
        "Keep mine",
        () => {
          hideBanner();
          saver.keepMine();
        },
      ],
    ],
  );
}

// ------------------------------------------------------------ actions

function setDecision(d) {
  if (locked) return;
  const lab = label(CODES[current]);
  lab.decision = d;
  changed();
}

function toggleDecision() {
  const lab = content.labels[CODES[current]];
  setDecision(lab && lab.decision === "present" ? "absent" : "present");
}

function attachEvidence() {
  const ev = currentPick();
  if (!ev || locked) return;
  const lab = label(CODES[current]);
  if (!lab.evidence.some((x) => sameEvidence(x, ev))) lab.evidence.push(ev);
  if (!lab.decision) lab.decision = "present"; // evidence of a failure means it is there
  changed();
}

function detachEvidence() {
  if (locked) return;
  const ev = currentPick();
  const lab = content.labels[CODES[current]];
  if (!ev || !lab) return;
  const before = lab.evidence.length;
  lab.evidence = lab.evidence.filter((x) => !sameEvidence(x, ev));
  if (lab.evidence.length !== before) changed();
}

function showEvidence(ev) {
  if (!viewer) return;
  if ("step" in ev) viewer.focusStep(ev.step);
  else viewer.focusLine(ev.lines[0], ev.lines[1]);
}

function acceptSuggestion(code, s) {
  if (locked) return;
  const lab = label(code);
  lab.decision = s.decision;
  if (!lab.rationale && s.rationale) lab.rationale = s.rationale.slice(0, cfg.limits.rationale);
  changed();
}

function moveTo(i, { scroll = true } = {}) {
  current = Math.max(0, Math.min(CODES.length - 1, i));
  modeEls.forEach((_, k) => modeEls[k].classList.toggle("is-current", k === current));
  if (scroll) modeEls[current].scrollIntoView({ block: "nearest" });
}

function toggleDefinition() {
  const def = modeEls[current].querySelector(".ws-def");
  def.hidden = !def.hidden;
  if (!def.hidden) modeEls[current].scrollIntoView({ block: "nearest" });
}

function cycleTask() {
  if (locked) return;
  const order = ["yes", "no", "unknown"];
  content.task_success = order[(order.indexOf(content.task_success) + 1) % order.length];
  changed();
}

function addOpenCode(raw) {
  if (locked) return;
  const name = raw.split(/\s+/).filter(Boolean).join(" ");
  if (!name) return;
  if (name.length > cfg.limits.openCode) {
    showBanner(`An open code has at most ${cfg.limits.openCode} characters.`, [], "danger");
    return;
  }
  if (!content.open_codes.includes(name)) {
    if (content.open_codes.length >= cfg.limits.openCodes) {
      showBanner(`At most ${cfg.limits.openCodes} open codes per trace.`, [], "danger");
      return;
    }
    content.open_codes.push(name);
    changed();
  }
}

// A submitted annotation is read only until its author reopens it (the server refuses changes to it
// too); reopening makes it a draft again, and the page is loaded afresh to edit it.
async function reopen() {
  const r = await fetch(cfg.reopenUrl, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf },
    body: JSON.stringify({ revision: saver.revision }),
  }).catch(() => null);
  if (!r) {
    showBanner("Not reopened: no connection. Try again when it is back.", [], "danger");
    return;
  }
  const data = await r.json().catch(() => ({ detail: r.statusText }));
  if (r.ok) window.location.reload();
  else showBanner(`Not reopened: ${data.detail || r.statusText}`, [], "danger");
}

async function submitAndNext() {
  if (locked) return;
  const missing = CODES.filter((c) => !["present", "absent"].includes((content.labels[c] || {}).decision));
  if (missing.length) {
    showBanner(
      `To submit, decide present or absent for every mode. Still open: ${missing.join(", ")}.`,
      [["Go to the first", () => { hideBanner(); moveTo(CODES.indexOf(missing[0])); }, true]],
    );
    return;
  }
  const outcome = await saver.submit();
  if (outcome === "unsaved") {
    showBanner("Your last changes are not saved yet (see the status above); submit again once they are.", [], "danger");
  } else if (outcome === "submitted") {
    render();
    window.location.assign(cfg.nextUrl);
  }
}

// ------------------------------------------------------------ events

modeEls.forEach((box, i) => {
  box.addEventListener("click", (e) => {
    if (e.target.closest(".ws-chip, .ws-suggestion")) return;
    if (i !== current) moveTo(i, { scroll: false });
    const dec = e.target.closest("[data-decision]");
    if (dec) setDecision(dec.dataset.decision);
    if (e.target.closest(".ws-attach")) attachEvidence();
    if (e.target.closest(".ws-def-toggle")) toggleDefinition();
  });
  const ta = box.querySelector(".ws-rationale");
  ta.addEventListener("focus", () => {
    if (i !== current) moveTo(i, { scroll: false });
  });
  ta.addEventListener("input", () => {
    const lab = label(CODES[i]);
    lab.rationale = ta.value;
    if (!lab.decision) lab.decision = "unsure"; // a reason without a decision yet: keep it, as unsure
    changed();
  });
});

taskEl.addEventListener("click", (e) => {
  const b = e.target.closest("[data-ts]");
  if (!b) return;
  content.task_success = b.dataset.ts;
  changed();
});
notesEl.addEventListener("input", () => {
  content.notes = notesEl.value;
  changed();
});
codeInput.addEventListener("keydown", (e) => {
  if (e.key === "Enter") {
    e.preventDefault();
    addOpenCode(codeInput.value);
    codeInput.value = "";
  }
});
codeInput.addEventListener("change", () => {
  // picking an option from the datalist
  if (cfg.openCodes.includes(codeInput.value)) {
    addOpenCode(codeInput.value);
    codeInput.value = "";
  }
});
document.getElementById("ws-submit").addEventListener("click", submitAndNext);
document.getElementById("ws-help-btn").addEventListener("click", () => toggleHelp(true));
document.getElementById("ws-help-close").addEventListener("click", () => toggleHelp(false));
helpEl.addEventListener("click", (e) => {
  if (e.target === helpEl) toggleHelp(false);
});

function toggleHelp(show) {
  helpEl.hidden = !show;
  if (show) document.getElementById("ws-help-close").focus();
}

document.addEventListener("keydown", (e) => {
  if ((e.ctrlKey || e.metaKey) && e.key === "Enter") {
    e.preventDefault();
    submitAndNext();
    return;
  }
  if (!helpEl.hidden) {
    if (e.key === "Escape" || e.key === "?") {
      e.preventDefault();
      toggleHelp(false);
    }
    return;
  }
  const t = e.target;
  const typing = t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
  if (typing) {
    if (e.key === "Escape") {
      e.preventDefault();
      t.blur();
    }
    return;
  }
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  const keys = {
    ArrowDown: () => moveTo(current + 1),
    n: () => moveTo(current + 1),
    ArrowUp: () => moveTo(current - 1),
    p: () => moveTo(current - 1),
    y: () => setDecision("present"),
    x: () => setDecision("absent"),
    u: () => setDecision("unsure"),
    " ": () => toggleDecision(),
    e: () => attachEvidence(),
    E: () => detachEvidence(),
    "]": () => viewer && viewer.nextMark(),
    "[": () => viewer && viewer.prevMark(),
    d: () => toggleDefinition(),
    r: () => {
      modeEls[current].scrollIntoView({ block: "nearest" });
      modeEls[current].querySelector(".ws-rationale").focus();
    },
    t: () => cycleTask(),
    o: () => codeInput.focus(),
    a: () => {
      const s = suggestionsFor(CODES[current])[0];
      if (s) acceptSuggestion(CODES[current], s);
    },
    "?": () => toggleHelp(true),
  };
  const fn = keys[e.key];
  if (fn) {
    e.preventDefault();
    fn();
  }
});

// ------------------------------------------------------------ start

(function start() {
  if (locked) {
    for (const b of root.querySelectorAll(".ws-panel button, .ws-panel textarea, .ws-panel input")) b.disabled = true;
    // Reading stays possible: help, and the way out of a submitted state.
    for (const id of ["ws-help-btn", "ws-reopen"]) {
      const b = document.getElementById(id);
      if (b) b.disabled = false;
    }
  }
  const reopenBtn = document.getElementById("ws-reopen");
  if (reopenBtn) reopenBtn.addEventListener("click", reopen);
  render();
  moveTo(0, { scroll: false });
  const draft = saver.takeDraft();
  if (draft) {
    content = fromSnapshot(draft);
    render();
    saver.flush();
  }
  root.dataset.ready = "1";
  try {
    performance.mark("workspace-ready");
  } catch (_) {
    /* no User Timing */
  }
})();

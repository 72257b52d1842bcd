/**
 * workspace-save.js: the save protocol of the labelling screen (ES module, no DOM).
 *
 * The server holds the truth; this module keeps the browser's copy in step with it:
 *   1. every change is written at once to localStorage (key storageKey) with the revision it is based
 *      on, so nothing typed is lost if the tab dies or the network drops;
 *   2. ~400 ms later the whole state is PUT to apiUrl with that base revision.
 * 200: saved (the local copy is dropped once nothing newer is pending). 409: saved elsewhere first:
 * reported as a conflict, and nothing more is sent until the person chooses (loadSaved / keepMine);
 * never a silent overwrite. Network error or 5xx: "offline", retried with backoff (1 s doubling to
 * 30 s) and at once on the window's `online` event.
 *
 *   const saver = createSaver({
 *     apiUrl, submitUrl, storageKey, csrf,     // from the page's ws-config
 *     revision, state,                         // the server snapshot the page was rendered with
 *     locked,                                  // read only: nothing is stored or sent
 *     payload: () => ({ labels, task_success, notes, open_codes }),   // what to save, built on demand
 *     onStatus(name, text) {},   // idle | saving | saved | offline | conflict | error | locked; text may be
 *                                // undefined (the screen's own wording); called once at once for the start
 *     onSaved() {},              // the server accepted a save: saver.revision / saver.state moved on
 *     onConflict(current) {},    // 409: current is the server's snapshot; answer with loadSaved or keepMine
 *     onProblem(message) {},     // refused for another reason (400, 403...): a sentence for the person
 *   });
 *   saver.changed()       store locally now, PUT soon (not while a conflict is open)
 *   saver.flushNow()      -> Promise: send a pending change now and wait for every request in flight
 *   saver.takeDraft()     -> the payload kept in this browser that the server never got, or null; when
 *                            not null the saver is rebased on the draft's revision: load it, then flush()
 *   saver.flush()         -> Promise: PUT the current payload (joins a request in flight)
 *   saver.submit()        -> Promise of "submitted" | "unsaved" (changes still unsent) | null (reported)
 *   saver.loadSaved()     -> the conflicting server snapshot, now the base; the local copy is dropped
 *   saver.keepMine()      rebase the local state on the server's revision and send it, replacing theirs
 *   saver.revision, saver.state, saver.inConflict
 */

const SAVE_DELAY = 400;
const RETRY_FIRST = 1000;
const RETRY_MAX = 30000;

export function createSaver({ apiUrl, submitUrl, storageKey, csrf, revision, state, locked, payload, onStatus, onSaved, onConflict, onProblem }) {
  let conflict = null;
  let status = locked ? "locked" : revision > 0 ? "saved" : "idle";
  let saveTimer = null;
  let inFlight = null;
  let again = false;
  let retryDelay = RETRY_FIRST;
  let retryTimer = null;

  function report(name, text) {
    status = name;
    onStatus(name, text);
  }

  function request(url, method, body) {
    return fetch(url, {
      method,
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf },
      body: JSON.stringify(body),
    });
  }

  function storeLocal() {
    try {
      localStorage.setItem(storageKey, JSON.stringify({ base: revision, payload: payload(), at: Date.now() }));
    } catch (_) {
      /* storage full or disabled: the server copy still works */
    }
  }

  function dropLocal() {
    try {
      localStorage.removeItem(storageKey);
    } catch (_) {
      /* ignore */
    }
  }

  function enterConflict(data) {
    conflict = data.current;
    report("conflict");
    onConflict(conflict);
  }

  function scheduleRetry() {
    clearTimeout(retryTimer);
    retryTimer = setTimeout(() => flush(), retryDelay);
    retryDelay = Math.min(retryDelay * 2, RETRY_MAX);
  }

  function changed() {
    if (locked) return;
    storeLocal();
    if (conflict) return;
    report("saving");
    clearTimeout(saveTimer);
    saveTimer = setTimeout(() => {
      saveTimer = null;
      flush();
    }, SAVE_DELAY);
  }

  async function flush() {
    if (conflict || locked) return;
    if (inFlight) {
      again = true;
      return inFlight;
    }
    clearTimeout(retryTimer);
    const body = payload();
    const sent = JSON.stringify(body);
    let offline = false;
    report("saving");
    inFlight = (async () => {
      try {
        const r = await request(apiUrl, "PUT", { revision, ...body });
        if (r.status >= 500) throw new Error(`server error ${r.status}`);
        const data = await r.json().catch(() => ({ detail: r.statusText }));
        if (r.ok) {
          revision = data.revision;
          state = data.state;
          retryDelay = RETRY_FIRST;
          // Edits made while this request was out are still only local: keep them and go again.
          if (JSON.stringify(payload()) === sent) {
            dropLocal();
            report("saved");
          } else {
            storeLocal();
            again = true;
          }
          onSaved();
        } else if (r.status === 409 && data.current) {
          enterConflict(data);
        } else {
          report("error", `Not saved: ${data.detail || r.status}`);
          onProblem(`Not saved: ${data.detail || r.statusText}. Your change is kept in this browser.`);
        }
      } catch (_) {
        offline = true;
        report("offline");
        scheduleRetry();
      }
    })();
    await inFlight;
    inFlight = null;
    if (again && !offline) {
      again = false;
      return flush();
    }
    again = false;
    return null;
  }

  async function flushNow() {
    if (saveTimer) {
      clearTimeout(saveTimer);
      saveTimer = null;
      await flush();
    }
    while (inFlight) await inFlight;
  }

  function takeDraft() {
    if (locked) return null;
    let local = null;
    try {
      local = JSON.parse(localStorage.getItem(storageKey) || "null");
    } catch (_) {
      local = null;
    }
    if (!local || !local.payload) return null;
    if (JSON.stringify(local.payload) === JSON.stringify(payload())) {
      dropLocal();
      return null;
    }
    // Changes typed here that never reached the server (offline, tab closed): they are sent based on
    // the revision they were made on, so a 409 shows up as a conflict, never silently.
    revision = local.base;
    report("saving", "Sending changes kept offline…");
    return local.payload;
  }

  async function submit() {
    if (locked) return null;
    await flushNow();
    if (conflict) return null;
    if (status !== "saved" && status !== "idle") return "unsaved";
    report("saving", "Submitting…");
    try {
      const r = await request(submitUrl, "POST", { revision });
      const data = await r.json().catch(() => ({ detail: r.statusText }));
      if (r.ok) {
        revision = data.revision;
        state = data.state;
        report("saved", "Submitted ✓");
        return "submitted";
      }
      if (r.status === 409) {
        enterConflict(data);
      } else {
        report("error", "Not submitted");
        onProblem(`Not submitted: ${data.detail}`);
      }
    } catch (_) {
      report("offline", "Offline — submit again when the connection is back");
    }
    return null;
  }

  function loadSaved() {
    const saved = conflict;
    revision = saved.revision;
    state = saved.state;
    conflict = null;
    dropLocal();
    report("saved");
    return saved;
  }

  function keepMine() {
    revision = conflict.revision;
    conflict = null;
    storeLocal();
    flush();
  }

  report(status);
  window.addEventListener("online", () => {
    retryDelay = RETRY_FIRST;
    flush();
  });

  return {
    changed,
    flush,
    flushNow,
    takeDraft,
    submit,
    loadSaved,
    keepMine,
    get revision() {
      return revision;
    },
    get state() {
      return state;
    },
    get inConflict() {
      return conflict !== null;
    },
  };
}

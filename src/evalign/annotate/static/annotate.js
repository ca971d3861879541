// evalign annotate: the labelling page. Item text arrives twice: as text, and as HTML the server rendered
// from Markdown and sanitised (markdown-it-py without raw HTML, then nh3); the HTML is parsed by an inert
// DOMParser document and its nodes imported, never assigned as markup, and the CSP runs no inline script.
"use strict";
(function () {
  const meta = (name) => document.querySelector(`meta[name="${name}"]`).getAttribute("content");
  const annotator = meta("evalign-annotator");
  const csrf = meta("evalign-csrf");
  const api = (path) => `/api/${encodeURIComponent(annotator)}/${path}`;
  const $ = (id) => document.getElementById(id);
  const REPEAT_MS = 300;    // the same key again within this: a bounce or a double press, ignored
  const stacked = window.matchMedia("(max-width: 700px)");
  let current = null;       // the state the server sent last
  let shownAt = performance.now();
  let busy = false;
  let lastKey = null;
  let lastKeyAt = -Infinity;
  let instructionsSeen = false;
  let noticeAt = -Infinity; // when the notice was set last (a hint set while a label is saved stays)
  const flags = { unsure: false, broken: false };

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // the server's sanitised HTML into `node` (an inert document parses it; no markup assignment)
  function setHTML(node, html, text) {
    if (typeof html !== "string") { node.textContent = text || ""; return; }
    const doc = new DOMParser().parseFromString(`<!doctype html><body>${html}</body>`, "text/html");
    node.replaceChildren(...Array.from(doc.body.childNodes, (n) => document.importNode(n, true)));
  }

  function notice(text, isError) {
    const box = $("notice");
    noticeAt = performance.now();
    box.textContent = text || "";
    box.hidden = !text;
    box.classList.toggle("error", !!isError);
  }

  // the two sides' names follow the layout: Left / Right side by side, Top / Bottom when stacked
  function side(which) {
    const words = which === "left" ? ["Left", "Top"] : ["Right", "Bottom"];
    return words[stacked.matches ? 1 : 0];
  }

  function sideWords(which) {  // both words; CSS shows the one of the layout
    const span = el("span", "side");
    const [wide, narrow] = which === "left" ? ["Left", "Top"] : ["Right", "Bottom"];
    span.append(el("span", "wide", wide), el("span", "narrow", narrow));
    return span;
  }

  function choicesFor(state) {
    if (state.task === "pairwise") {
      return [{ key: "a", choice: "left", side: "left", text: " is better" },
              { key: "b", choice: "right", side: "right", text: " is better" },
              { key: "t", choice: "tie", text: "Tie" }];
    }
    if (state.task === "graded") {
      return [1, 2, 3, 4, 5].map((g) => ({ key: String(g), choice: String(g), text: String(g) }));
    }
    return state.labels.slice(0, 9).map((l, i) => ({ key: String(i + 1), choice: String(i + 1), text: l }));
  }

  function choiceText(c) {
    return c.side ? `${side(c.side)}${c.text}` : c.text;
  }

  function setFlags(unsure, broken) {
    flags.unsure = unsure;
    flags.broken = broken;
    $("unsure").setAttribute("aria-pressed", String(unsure));
    $("broken").setAttribute("aria-pressed", String(broken));
  }

  function showInstructions(open) {
    $("instructions-panel").hidden = !open;
    $("task-area").hidden = open || !(current && current.item);
    $("labelbar").hidden = open;
    if (!open) instructionsSeen = true;
    window.scrollTo(0, 0);
  }

  function renderEnd(state) {
    const area = $("task-area");
    area.hidden = true;
    area.dataset.key = "";
    let done = $("done");
    if (!done) {
      done = el("div", "done");
      done.id = "done";
      done.setAttribute("role", "status");
      area.after(done);
    }
    done.replaceChildren();
    const p = state.progress;
    if (state.end === "full") {
      done.append(el("h2", "", "Nothing left to label"),
                  el("p", "", `Every item already has its ${state.per_item} labels: there is nothing for you to ` +
                              "label. Thank you for coming; you can close this page."));
      return;
    }
    done.append(el("h2", "", "All done"), el("p", "", `You gave ${p.done} labels. Thank you! (u undoes your last label.)`));
    if (state.completion_url) {
      const link = el("a", "completion", "Finish: open the completion link");
      link.href = state.completion_url;
      link.rel = "noopener noreferrer";
      const line = el("p", "", "");
      line.append(link);
      done.append(line);
    }
  }

  function messages(list, cls) {
    const box = el("div", cls);
    for (const m of list) {
      const msg = el("div", "msg");
      const body = el("div", "text md");
      body.dir = "auto";
      setHTML(body, m.html, m.content);
      msg.append(el("div", "role", m.role), body);
      box.append(msg);
    }
    return box;
  }

  function renderItem(state) {
    const item = state.item;
    const html = item.html || {};
    $("task-area").dataset.key = item.key;
    const context = $("context");
    context.replaceChildren();
    if (item.context && item.context.length) {
      context.append(el("h2", "", "Conversation so far"), messages(item.context, "context"));
    }
    setHTML($("instruction"), html.instruction, item.instruction);
    setHTML($("input"), html.input, item.input);
    $("input-box").hidden = !item.input;
    setHTML($("reference"), html.reference, item.reference);
    $("reference-box").hidden = !item.reference;
    const responses = $("responses");
    responses.replaceChildren();
    const sides = state.task === "pairwise"
      ? [["left", item.left, html.left, item.context_left], ["right", item.right, html.right, item.context_right]]
      : [["response", item.response, html.response, []]];
    responses.classList.toggle("single", sides.length === 1);
    for (const [id, text, rendered, earlier] of sides) {
      const box = el("div", "response");
      const body = el("div", "text md");
      body.id = `response-${id}`;
      body.dir = "auto";
      setHTML(body, rendered, text);
      const title = el("h2", "");
      title.append(id === "response" ? "Response" : sideWords(id));
      box.append(title);
      if (earlier && earlier.length) {  // this side's own earlier turns, then the message it answers
        const ctx = messages([...earlier, { role: "user", content: item.instruction, html: html.instruction }],
                             "context side-context");
        ctx.id = `context-${id}`;
        box.append(ctx, el("div", "role", "response"));
      }
      box.append(body);
      responses.append(box);
    }
    const rubric = $("rubric");
    rubric.replaceChildren();
    rubric.hidden = !(state.task === "graded" && state.rubric);
    if (!rubric.hidden) {
      rubric.append(el("strong", "", state.rubric.criteria));
      const list = el("ol");
      for (const d of state.rubric.descriptions) list.append(el("li", "", d));
      rubric.append(list);
    }
    const choices = $("choices");
    for (const c of choicesFor(state)) {
      const b = el("button", "");
      b.type = "button";
      b.dataset.key = c.key;
      b.append(el("kbd", "", c.key));
      if (c.side) b.append(sideWords(c.side));
      b.append(document.createTextNode(c.text));
      b.addEventListener("click", () => label(c, b));
      choices.append(b);
    }
  }

  function render(state) {
    const before = current && current.item ? current.item.key : null;
    current = state;
    const p = state.progress;
    $("progress-text").textContent = `${p.done} of ${p.total}`;
    $("bar-fill").style.width = p.total ? `${(100 * p.done) / p.total}%` : "100%";
    $("show-instructions").hidden = !state.instructions;
    if (state.instructions !== undefined && state.instructions !== null) setHTML($("instructions"), state.instructions);
    $("choices").replaceChildren();
    $("skip").disabled = !state.item;
    if (!state.item || state.item.key !== before) setFlags(false, false);
    if (!state.item) {
      $("unsure").disabled = $("broken").disabled = true;
      renderEnd(state);
      return;
    }
    $("unsure").disabled = $("broken").disabled = false;
    const done = $("done");
    if (done) done.remove();
    $("task-area").hidden = false;
    renderItem(state);
    shownAt = performance.now();
    window.scrollTo(0, 0);
    if (state.instructions && !instructionsSeen && p.done === 0) showInstructions(true);
  }

  async function call(method, path, body) {
    const opts = { method, headers: { "X-CSRF-Token": csrf }, credentials: "same-origin" };
    if (body !== undefined) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    const res = await fetch(api(path), opts);
    if (res.status === 200 || res.status === 409) return [res.status, await res.json()];
    throw new Error(`${res.status}: ${await res.text()}`);
  }

  function undoneText(state) {
    const u = state.undone;
    if (!u) return "Nothing to undo.";
    const c = choicesFor(state).find((x) => x.choice === u.choice);
    const what = c ? `“${choiceText(c)}”` : (u.choice === null ? "a skip" : "your label");
    return `Undone: ${what} on item ${u.key} was removed. The item is shown again: label it anew.`;
  }

  async function send(action, body, button) {
    if (busy) {
      if (action === "label") notice("Still saving your last label: this press did not count.", true);
      return;
    }
    busy = true;
    const started = performance.now();
    if (button) button.classList.add("flash");
    try {
      if (action === "label") {
        body.seconds = Math.round(performance.now() - shownAt) / 1000;
        const comment = $("comment").value;
        if (comment.trim()) body.comment = comment;
        if (flags.unsure) body.unsure = true;
        if (flags.broken) body.broken = true;
      }
      const [status, state] = await call("POST", action, body);
      $("comment").value = "";  // a comment belongs to its item: it never moves on to another
      if (status === 409) notice("You had labelled that item already (in another tab?): the first label stands.");
      else if (action === "undo") notice(undoneText(state));
      else if (action === "skip") notice("Skipped: the item went to the end of your queue.");
      else if (noticeAt < started) notice("");  // a hint given meanwhile (a key ignored) stays
      current = null;  // a new item (or the same one brought back): the flags start afresh
      render(state);
    } catch (e) {
      notice(`Not saved: ${e.message || "the server does not answer"}. Press the key again when it is back.`, true);
    } finally {
      busy = false;
      if (button) button.classList.remove("flash");
    }
  }

  function label(c, button) {
    if (!current || !current.item || !$("instructions-panel").hidden) return;
    const min = current.min_seconds || 0;
    const seen = (performance.now() - shownAt) / 1000;
    if (seen < min) {
      notice(`Too quick: look at the item for at least ${min} s before you label it (this did not count).`, true);
      return;
    }
    send("label", { key: current.item.key, choice: c.choice }, button);
  }

  function toggle(name) {
    if (!current || !current.item) return;
    if (name === "unsure") setFlags(!flags.unsure, flags.broken);
    else setFlags(flags.unsure, !flags.broken);
  }

  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.repeat) return;  // a held key labels once
    const t = ev.target;
    if (t && (t.tagName === "TEXTAREA" || t.tagName === "INPUT")) {
      if (ev.key === "Escape") t.blur();
      return;
    }
    if (t && t.tagName === "BUTTON" && (ev.key === " " || ev.key === "Enter")) {
      ev.preventDefault();  // Space or Enter never repeats a button's action
      return;
    }
    if (!current) return;
    const key = ev.key.toLowerCase();
    if (!$("instructions-panel").hidden) {
      if (key === "escape") showInstructions(false);
      return;
    }
    const now = performance.now();
    const repeat = key === lastKey && now - lastKeyAt < REPEAT_MS;
    lastKey = key;
    lastKeyAt = now;
    const c = current.item ? choicesFor(current).find((x) => x.key === key) : null;
    const known = c || ["u", "s", "?", "x"].includes(key);
    if (!known) return;
    ev.preventDefault();
    if (repeat) {
      notice("The same key twice within 0.3 s: the second press was ignored.", true);
      return;
    }
    if (key === "u") { send("undo", {}, $("undo")); return; }
    if (!current.item) return;
    if (key === "s") { send("skip", { key: current.item.key }, $("skip")); return; }
    if (key === "?") { toggle("unsure"); return; }
    if (key === "x") { toggle("broken"); return; }
    label(c, document.querySelector(`#choices button[data-key="${c.key}"]`));
  });
  // a button never keeps the focus: a click leaves it at once (so Space or Enter later repeats nothing)
  document.addEventListener("mousedown", (ev) => {
    if (ev.target.closest && ev.target.closest("button")) ev.preventDefault();
  });
  document.addEventListener("click", (ev) => {
    const b = ev.target.closest && ev.target.closest("button");
    if (b) b.blur();
  }, true);
  $("undo").addEventListener("click", () => send("undo", {}, $("undo")));
  $("skip").addEventListener("click", () => current && current.item && send("skip", { key: current.item.key }, $("skip")));
  $("unsure").addEventListener("click", () => toggle("unsure"));
  $("broken").addEventListener("click", () => toggle("broken"));
  $("show-instructions").addEventListener("click", () => showInstructions(true));
  $("close-instructions").addEventListener("click", () => showInstructions(false));

  call("GET", "state").then(([, state]) => render(state))
    .catch((e) => notice(`Cannot load: ${e.message}`, true));
})();

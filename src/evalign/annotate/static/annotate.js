// evalign annotate: the labelling page. Item text is only ever set with textContent (never as HTML).
"use strict";
(function () {
  const meta = (name) => document.querySelector(`meta[name="${name}"]`).getAttribute("content");
  const annotator = meta("evalign-annotator");
  const csrf = meta("evalign-csrf");
  const api = (path) => `/api/${encodeURIComponent(annotator)}/${path}`;
  const $ = (id) => document.getElementById(id);
  let current = null;       // the state the server sent last
  let shownAt = performance.now();
  let busy = false;

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function notice(text, isError) {
    const box = $("notice");
    box.textContent = text || "";
    box.hidden = !text;
    box.classList.toggle("error", !!isError);
  }

  function choicesFor(state) {
    if (state.task === "pairwise") {
      return [{ key: "a", choice: "left", text: "Left is better" },
              { key: "b", choice: "right", text: "Right is better" },
              { key: "t", choice: "tie", text: "Tie" }];
    }
    if (state.task === "graded") {
      return [1, 2, 3, 4, 5].map((g) => ({ key: String(g), choice: String(g), text: String(g) }));
    }
    return state.labels.slice(0, 9).map((l, i) => ({ key: String(i + 1), choice: String(i + 1), text: l }));
  }

  function render(state) {
    current = state;
    const p = state.progress;
    $("progress-text").textContent = `${p.done} of ${p.total}`;
    $("bar-fill").style.width = p.total ? `${(100 * p.done) / p.total}%` : "100%";
    const item = state.item;
    const area = $("task-area");
    const choices = $("choices");
    choices.replaceChildren();
    $("skip").disabled = !item;
    if (!item) {
      area.hidden = true;
      let done = $("done");
      if (!done) {
        done = el("div", "done");
        done.id = "done";
        area.after(done);
      }
      done.textContent = `All done: ${p.done} labels. Thank you! (u undoes your last label.)`;
      return;
    }
    const done = $("done");
    if (done) done.remove();
    area.hidden = false;
    area.dataset.key = item.key;
    const context = $("context");
    context.replaceChildren();
    if (item.context && item.context.length) {
      context.append(el("h2", "", "Conversation so far"));
      const box = el("div", "context");
      for (const m of item.context) {
        const msg = el("div", "msg");
        msg.append(el("div", "role", m.role), el("div", "text", m.content));
        box.append(msg);
      }
      context.append(box);
    }
    $("instruction").textContent = item.instruction;
    $("input").textContent = item.input;
    $("input-box").hidden = !item.input;
    $("reference").textContent = item.reference;
    $("reference-box").hidden = !item.reference;
    const responses = $("responses");
    responses.replaceChildren();
    const sides = state.task === "pairwise"
      ? [["Left", item.left, "left", item.context_left], ["Right", item.right, "right", item.context_right]]
      : [["Response", item.response, "response", []]];
    responses.classList.toggle("single", sides.length === 1);
    for (const [title, text, id, earlier] of sides) {
      const box = el("div", "response");
      const body = el("div", "text", text);
      body.id = `response-${id}`;
      box.append(el("h2", "", title));
      if (earlier && earlier.length) {  // this side's own earlier turns, then the message it answers
        const ctx = el("div", "context side-context");
        ctx.id = `context-${id}`;
        for (const m of [...earlier, { role: "user", content: item.instruction }]) {
          const msg = el("div", "msg");
          msg.append(el("div", "role", m.role), el("div", "text", m.content));
          ctx.append(msg);
        }
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
    for (const c of choicesFor(state)) {
      const b = el("button", "");
      b.type = "button";
      b.dataset.key = c.key;
      b.append(el("kbd", "", c.key), document.createTextNode(c.text));
      b.addEventListener("click", () => send("label", { key: item.key, choice: c.choice }, b));
      choices.append(b);
    }
    shownAt = performance.now();
    window.scrollTo(0, 0);
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

  async function send(action, body, button) {
    if (busy) return;
    busy = true;
    if (button) button.classList.add("flash");
    try {
      if (action === "label") {
        body.seconds = Math.round(performance.now() - shownAt) / 1000;
        const comment = $("comment").value;
        if (comment.trim()) body.comment = comment;
      }
      const [status, state] = await call("POST", action, body);
      if (action === "label") $("comment").value = "";
      if (status === 409) notice("You had labelled that item already (in another tab?): the first label stands.");
      else if (action === "undo") notice(state.undone ? "Your last label was removed: label this item again." : "Nothing to undo.");
      else if (action === "skip") notice("Skipped: the item went to the end of your queue.");
      else notice("");
      render(state);
    } catch (e) {
      notice(`Not saved: ${e.message || "the server does not answer"}. Press the key again when it is back.`, true);
    } finally {
      busy = false;
      if (button) button.classList.remove("flash");
    }
  }

  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.repeat) return;  // a held key labels once
    const t = ev.target;
    if (t && (t.tagName === "TEXTAREA" || t.tagName === "INPUT")) {
      if (ev.key === "Escape") t.blur();
      return;
    }
    if (!current) return;
    const key = ev.key.toLowerCase();
    if (key === "u") { ev.preventDefault(); send("undo", {}, $("undo")); return; }
    if (!current.item) return;
    if (key === "s") { ev.preventDefault(); send("skip", { key: current.item.key }, $("skip")); return; }
    const c = choicesFor(current).find((x) => x.key === key);
    if (c) {
      ev.preventDefault();
      send("label", { key: current.item.key, choice: c.choice },
           document.querySelector(`#choices button[data-key="${c.key}"]`));
    }
  });
  $("undo").addEventListener("click", () => send("undo", {}, $("undo")));
  $("skip").addEventListener("click", () => current && current.item && send("skip", { key: current.item.key }, $("skip")));

  call("GET", "state").then(([, state]) => render(state))
    .catch((e) => notice(`Cannot load: ${e.message}`, true));
})();

// Small behaviours the dashboard needs beyond htmx; no inline scripts (the CSP forbids them).
document.addEventListener("click", (event) => {
  const button = event.target.closest("[data-confirm]");
  if (button && !window.confirm(button.dataset.confirm)) {
    event.preventDefault();
    event.stopImmediatePropagation();
  }
}, true);

// The session page's first update can bring a frame that was pushed while the page was
// being rendered, so it is already in the tree: keep that node, skip the copy.
document.addEventListener("htmx:oobBeforeSwap", (event) => {
  const { target, fragment } = event.detail;
  if (!target || target.id === "tree-updates" || !fragment.querySelector) {
    return;
  }
  const node = fragment.querySelector(":scope > li.tree-node[id]");
  if (node && document.getElementById(node.id)) {
    event.detail.shouldSwap = false;
  }
});

// An answer htmx does not swap (a 5xx) or no answer at all must not fail silently: say so
// above the page until every address that failed has answered again (the page's other
// polls succeeding says nothing about the one that failed).
const failingPaths = new Set();

function requestPath(event) {
  const info = event.detail.pathInfo || {};
  return (info.requestPath || "").split("?")[0];
}

function requestErrorShow(event, text) {
  failingPaths.add(requestPath(event));
  const notice = document.getElementById("request-error");
  if (notice) {
    notice.textContent = text;
    notice.hidden = false;
  }
}
document.addEventListener("htmx:responseError", (event) => {
  const status = event.detail.xhr.status;
  requestErrorShow(event, status === 503
    ? "The database is unavailable; this part of the page was not updated. Retry in a few seconds."
    : `The server answered ${status}; this part of the page was not updated.`);
});
document.addEventListener("htmx:sendError", (event) => {
  requestErrorShow(event, "The server could not be reached; this part of the page was not updated.");
});
document.addEventListener("htmx:afterRequest", (event) => {
  if (!event.detail.successful) {
    return;
  }
  failingPaths.delete(requestPath(event));
  const notice = document.getElementById("request-error");
  if (notice && failingPaths.size === 0) {
    notice.hidden = true;
  }
});

// A button in a polling section (hx-sync="closest section:replace") supersedes the poll on
// the wire. htmx would abort that poll, which it reports as a console error; let the poll
// end instead and drop its answer, which may predate the button's change. htmx sends the
// button's request as soon as the poll ends, and holds later polls until it is answered.
const pollsOut = new WeakMap(); // element -> its GET on the wire
const stalePolls = new WeakSet();

document.addEventListener("htmx:abort", (event) => {
  const poll = pollsOut.get(event.target);
  if (poll) {
    stalePolls.add(poll);
    event.stopPropagation(); // htmx's own listener on the body would abort it
  }
}, true);
document.addEventListener("htmx:beforeSend", (event) => {
  const { elt, xhr, requestConfig } = event.detail;
  if (requestConfig.verb === "get") {
    pollsOut.set(elt, xhr);
  }
});
document.addEventListener("htmx:beforeSwap", (event) => {
  if (stalePolls.has(event.detail.xhr)) {
    event.detail.shouldSwap = false;
  }
});
document.addEventListener("htmx:afterRequest", (event) => {
  const { elt, xhr } = event.detail;
  if (pollsOut.get(elt) === xhr) {
    pollsOut.delete(elt);
  }
});

// Two inputs that show one value, each naming the other (data-mirror="its id"): the pack
// preview's budget slider, to drag, and the number beside it, to type an exact budget.
// Either one moved sets the other before the form hears of it (a listener that captures),
// so the request htmx sends carries the value just chosen. A number left empty or out of
// the slider's range is brought back into it, a whole number, when the person leaves it.
function mirrorOf(input) {
  const id = input instanceof HTMLInputElement ? input.dataset.mirror : undefined;
  return id ? document.getElementById(id) : null;
}

function withinRange(input, fallback) {
  const value = Math.round(Number(input.value));
  if (input.value.trim() === "" || !Number.isFinite(value)) {
    return fallback;
  }
  const min = input.min === "" ? value : Number(input.min);
  const max = input.max === "" ? value : Number(input.max);
  return String(Math.min(Math.max(value, min), max));
}

document.addEventListener("input", (event) => {
  const other = mirrorOf(event.target);
  if (other && event.target.value.trim() !== "") {
    other.value = event.target.value;
  }
}, true);
document.addEventListener("change", (event) => {
  const input = event.target;
  const other = mirrorOf(input);
  if (!other) {
    return;
  }
  if (input.type === "number") {
    input.value = withinRange(input, other.value);
  }
  other.value = input.value;
}, true);

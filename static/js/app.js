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
// above the page until a later request succeeds.
function requestErrorShow(text) {
  const notice = document.getElementById("request-error");
  if (notice) {
    notice.textContent = text;
    notice.hidden = false;
  }
}
document.addEventListener("htmx:responseError", (event) => {
  const status = event.detail.xhr.status;
  requestErrorShow(status === 503
    ? "The database is unavailable; this part of the page was not updated. Retry in a few seconds."
    : `The server answered ${status}; this part of the page was not updated.`);
});
document.addEventListener("htmx:sendError", () => {
  requestErrorShow("The server could not be reached; this part of the page was not updated.");
});
document.addEventListener("htmx:afterRequest", (event) => {
  const notice = document.getElementById("request-error");
  if (notice && event.detail.successful) {
    notice.hidden = true;
  }
});

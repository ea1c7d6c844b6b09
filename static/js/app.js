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

// A gateway session's page (htmx 2 ws extension): say which event we have on (re)connect, drop
// frames we already have, and remember the newest sequence shown.
(function () {
  "use strict";
  var FRAME = /data-frame-sequence="(\d+)"/;

  function rootOf(elt) { return elt.closest ? elt.closest("[data-gateway-session]") : null; }
  function listOf(root) { return root && root.querySelector("[data-testid=gateway-events]"); }
  function lastSequence(root) { var l = listOf(root); return l ? parseInt(l.dataset.lastSequence || "0", 10) : 0; }

  document.addEventListener("htmx:wsOpen", function (evt) {
    var root = rootOf(evt.target);
    if (!root) return;
    root.dataset.socket = "open";
    evt.detail.socketWrapper.send(JSON.stringify({ action: "hello", last_sequence: lastSequence(root) }));
  });

  document.addEventListener("htmx:wsClose", function (evt) {
    var root = rootOf(evt.target);
    if (root) root.dataset.socket = "closed";
  });

  document.addEventListener("htmx:wsBeforeMessage", function (evt) {
    var root = rootOf(evt.target), match = FRAME.exec(evt.detail.message || "");
    if (root && match && parseInt(match[1], 10) <= lastSequence(root)) evt.preventDefault();  // a replayed frame
  });

  document.addEventListener("htmx:wsAfterMessage", function (evt) {
    var root = rootOf(evt.target), match = FRAME.exec(evt.detail.message || "");
    if (!root || !match) return;
    var list = listOf(root), seq = parseInt(match[1], 10);
    if (list && seq > lastSequence(root)) list.dataset.lastSequence = String(seq);
  });
})();

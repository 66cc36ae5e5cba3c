// Conversation sockets (htmx 2 ws extension): say which event we have on (re)connect, drop frames we
// already have, mirror the status onto the panel root, and keep the compare view's difference current.
(function () {
  "use strict";
  var FRAME = /data-frame-sequence="(\d+)"/;

  function rootOf(elt) { return elt.closest ? elt.closest("[data-conversation-root]") : null; }
  function timelineOf(root) { return root && root.querySelector("[data-testid=timeline]"); }
  function lastSequence(root) { var t = timelineOf(root); return t ? parseInt(t.dataset.lastSequence || "0", 10) : 0; }

  document.addEventListener("htmx:wsOpen", function (evt) {
    var root = rootOf(evt.target);
    if (!root) return;
    evt.detail.socketWrapper.send(JSON.stringify({ action: "hello", last_sequence: lastSequence(root) }));
  });

  document.addEventListener("htmx:wsBeforeMessage", function (evt) {
    var root = rootOf(evt.target), match = FRAME.exec(evt.detail.message || "");
    if (root && match && parseInt(match[1], 10) <= lastSequence(root)) evt.preventDefault();  // a replayed frame
  });

  document.addEventListener("htmx:wsAfterMessage", function (evt) {
    var root = rootOf(evt.target), match = FRAME.exec(evt.detail.message || "");
    if (!root) return;
    if (match) {
      var timeline = timelineOf(root), seq = parseInt(match[1], 10);
      if (timeline && seq > lastSequence(root)) timeline.dataset.lastSequence = String(seq);
    }
    var status = root.querySelector("[data-testid=status]");
    if (status) root.dataset.status = status.dataset.status;
    // A catch-up of several turns sends chart rows unnumbered: number every row by its place in the chart.
    Array.prototype.forEach.call(root.querySelectorAll("[data-testid=chart-turn]"), function (label, i) {
      if (!label.textContent) label.textContent = "#" + (i + 1);
    });
    // The turn headers count the same way: the conversation's top-level turns in order.
    Array.prototype.forEach.call(root.querySelectorAll("[data-testid=timeline] > .event-turn_started [data-testid=turn-number]"), function (label, i) {
      if (!label.textContent) label.textContent = String(i + 1);
    });
    var chat = root.querySelector("[data-testid=chat]");
    if (chat) chat.scrollTop = chat.scrollHeight;
    updateDifference();
  });

  // A share link's socket closed by the server (4403: the link expired or was revoked): say so.
  document.addEventListener("htmx:wsClose", function (evt) {
    var root = rootOf(evt.target), code = evt.detail && evt.detail.event && evt.detail.event.code;
    if (!root || !root.hasAttribute("data-shared") || (code !== 4403 && code !== 4401)) return;
    var ended = root.querySelector("[data-testid=share-ended]");
    if (ended) ended.hidden = false;
    root.dataset.shareEnded = "true";
  });

  document.addEventListener("htmx:wsAfterSend", function (evt) {
    if (evt.target && evt.target.hasAttribute && evt.target.hasAttribute("data-reset-on-send")) evt.target.reset();
  });

  function updateDifference() {
    var box = document.querySelector("[data-compare-diff]");
    if (!box) return;
    var totals = Array.prototype.map.call(document.querySelectorAll("[data-testid=tokens-total]"), function (el) {
      return parseInt(el.dataset.tokensCost || "0", 10);  // schemas + announcement: what deferring really costs
    });
    if (totals.length < 2) return;
    var diff = totals[0] - totals[1], text = box.querySelector("[data-diff-text]");
    box.dataset.difference = String(diff);
    text.textContent = "left " + totals[0] + ", right " + totals[1] + " — difference " + Math.abs(diff) +
      (diff === 0 ? "" : " (" + (diff > 0 ? "right" : "left") + " sends fewer" +
      (Math.max(totals[0], totals[1]) ? ", " + Math.round(100 * Math.abs(diff) / Math.max(totals[0], totals[1])) + "% less" : "") + ")");
    // A side whose request did not fit the context window: the demo agent answered, a real model would not.
    var over = box.querySelector("[data-over-window-text]"), sides = ["left", "right"], flagged = [];
    Array.prototype.forEach.call(document.querySelectorAll("[data-testid=tokens-total]"), function (el, i) {
      if (parseInt(el.dataset.overWindow || "0", 10) > 0) {
        flagged.push("the " + sides[i] + " side sent " + el.dataset.largestRequest + " tokens, over the " +
          el.dataset.window + "-token context window");
      }
    });
    if (over) {
      over.hidden = !flagged.length;
      over.textContent = flagged.length ? flagged.join("; ") + ": a real model would refuse this." : "";
    }
  }
  document.addEventListener("DOMContentLoaded", updateDifference);
})();

// The prompt inbox on every page (htmx 2 ws extension): the navigation bar's count, the inbox page's
// list, the time left on every prompt card, and — only after the person turned them on with a click —
// browser notifications of new prompts. Nothing asks the browser for permission on load.
(function () {
  "use strict";
  var SEEN = "prompt-inbox-seen", NOTIFY = "prompt-inbox-notify";

  function isInboxSocket(elt) { return elt && elt.hasAttribute && elt.hasAttribute("data-inbox-socket"); }

  document.addEventListener("htmx:wsOpen", function (evt) {
    if (!isInboxSocket(evt.target)) return;
    evt.detail.socketWrapper.send(JSON.stringify({ action: "hello", list: evt.target.hasAttribute("data-inbox-list") }));
  });

  function store(kind) { try { return window[kind]; } catch (e) { return null; } }
  function notifying() {
    var local = store("localStorage");
    return "Notification" in window && Notification.permission === "granted" && local && local.getItem(NOTIFY) === "on";
  }

  // After each frame: tell of prompts this browser tab has not seen yet (the first frame only remembers).
  document.addEventListener("htmx:wsAfterMessage", function (evt) {
    if (!isInboxSocket(evt.target)) return;
    var count = document.getElementById("inbox-count");
    if (!count || count.dataset.keys === undefined) return;
    var keys = count.dataset.keys ? count.dataset.keys.split(" ") : [];
    var titles = count.dataset.titles ? count.dataset.titles.split("|") : [];
    var session = store("sessionStorage"), seen = session && session.getItem(SEEN);
    var known = seen === null || seen === undefined ? null : (seen ? seen.split(" ") : []);
    if (session) session.setItem(SEEN, keys.join(" "));
    if (known === null || !notifying()) return;
    keys.forEach(function (key, i) {
      if (known.indexOf(key) >= 0) return;
      var note = new Notification("A prompt waits for your answer", { body: titles[i] || key, tag: key });
      note.onclick = function () { window.focus(); window.location.href = "/inbox/"; };
    });
  });

  // "Notify me": the browser's permission is asked on this click only.
  function showNotifyState() {
    var state = document.querySelector("[data-inbox-notify-state]"), button = document.querySelector("[data-inbox-notify]");
    if (!state) return;
    if (button) button.textContent = notifying() ? "Stop notifying me" : "Notify me of new prompts";
    if (!("Notification" in window)) state.textContent = "This browser has no notifications.";
    else if (Notification.permission === "denied") state.textContent = "Notifications are blocked for this site in the browser's settings.";
    else state.textContent = notifying() ? "On: a new prompt shows a notification." : "Off.";
  }
  document.addEventListener("click", function (evt) {
    var button = evt.target.closest && evt.target.closest("[data-inbox-notify]");
    if (!button || !("Notification" in window)) return;
    var local = store("localStorage");
    if (notifying()) { if (local) local.setItem(NOTIFY, "off"); showNotifyState(); return; }
    Notification.requestPermission().then(function (permission) {
      if (permission === "granted" && local) local.setItem(NOTIFY, "on");
      showNotifyState();
    });
  });

  // The time left on every open prompt card, counted down each second (the server's deadline).
  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-expires-at]").forEach(function (el) {
      var left = Math.max(0, Math.round((Date.parse(el.dataset.expiresAt) - now) / 1000));
      el.textContent = left > 0 ? left + " s left" : "time is up: being denied";
      el.classList.toggle("prompt-expiring", left <= 15);
    });
  }
  document.addEventListener("DOMContentLoaded", function () { showNotifyState(); tick(); setInterval(tick, 1000); });
})();

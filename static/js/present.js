// Presentation mode: replay a finished conversation one saved event at a time, at a chosen pace.
// The page holds every event rendered by the same templates as the live page; this only hides them
// and shows them again in sequence order. An assistant message is typed out word by word.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var root = document.querySelector("[data-present-root]");
    if (!root) return;
    var stage = root.querySelector("[data-present-stage]");
    var items = Array.prototype.slice.call(stage.querySelectorAll("[data-sequence]"));
    // Bookkeeping events (a model request, an announcement, a cache strip, a turn's end …) are not
    // steps of their own: each joins the step before it (selectors.PRESENT_QUIET_TYPES).
    var quiet = (root.dataset.quietTypes || "").split(" ");
    var typeOf = {}, all = [];
    items.forEach(function (el) {
      var seq = parseInt(el.dataset.sequence, 10);
      if (all.indexOf(seq) < 0) all.push(seq);
      if (el.dataset.eventType) typeOf[seq] = el.dataset.eventType;
    });
    all.sort(function (a, b) { return a - b; });
    function isQuiet(seq) {
      var item = items.find(function (el) { return parseInt(el.dataset.sequence, 10) === seq && el.dataset.eventType; });
      var finalTurn = item && item.textContent.indexOf("Run finished") >= 0;
      return quiet.indexOf(typeOf[seq]) >= 0 && !finalTurn;
    }
    var sequences = [];  // one entry per step: the event sequences it shows
    all.forEach(function (seq) {
      if (isQuiet(seq) && sequences.length) sequences[sequences.length - 1].push(seq);
      else sequences.push([seq]);
    });
    var shown = 0, timer = null, typing = null;
    var playButton = root.querySelector("[data-present-play]"), pace = root.querySelector("[data-present-pace]");
    var progress = root.querySelector("[data-present-progress]");

    function seconds() { return parseFloat(pace.value) || 2; }
    function hideAll() { items.forEach(function (el) { el.classList.add("present-hidden"); el.classList.remove("present-current"); }); }
    function report() {
      soFar();
      progress.textContent = "step " + shown + " of " + sequences.length + (shown === sequences.length ? " · the end" : "");
      root.dataset.shown = String(shown);
    }
    function typeOut(el) {
      var text = el.querySelector(".chat-text");
      if (!text || el.dataset.role !== "assistant") return;
      var words = text.textContent.match(/\S+\s*|\s+/g) || [];
      if (words.length < 2) return;
      finishTyping();
      var i = 0, full = text.textContent, step = Math.max(20, Math.min(250, seconds() * 1000 * 0.8 / words.length));
      text.textContent = "";
      typing = { el: text, full: full, timer: setInterval(function () {
        text.textContent += words[i++];
        if (i >= words.length) finishTyping();
      }, step) };
    }
    function finishTyping() {
      if (!typing) return;
      clearInterval(typing.timer);
      typing.el.textContent = typing.full;
      typing = null;
    }
    function next() {
      if (shown >= sequences.length) { pause(); return false; }
      finishTyping();
      var step = sequences[shown++];
      items.forEach(function (el) { el.classList.remove("present-current"); });
      items.forEach(function (el) {
        if (step.indexOf(parseInt(el.dataset.sequence, 10)) < 0) return;
        el.classList.remove("present-hidden");
        el.classList.add("present-current");
        el.scrollIntoView({ block: "nearest" });
        if (el.dataset.eventType === "message") typeOut(el);
      });
      report();
      return true;
    }
    // The figures beside the replay: tool tokens and dollars of what has been shown so far.
    function soFar() {
      var tokens = 0, baseline = 0, cost = 0, calls = 0;
      stage.querySelectorAll("[data-testid=present-chart] [data-testid=chart-row]").forEach(function (row) {
        if (row.classList.contains("present-hidden")) return;
        tokens += parseInt(row.dataset.cost || "0", 10); baseline += parseInt(row.dataset.baseline || "0", 10);
      });
      stage.querySelectorAll("[data-testid=model-response]").forEach(function (line) {
        var event = line.closest("[data-sequence]");
        if (event && event.closest(".present-hidden")) return;
        var price = line.querySelector("[data-cost-usd]");
        calls += 1;
        if (price && price.dataset.costUsd) cost += parseFloat(price.dataset.costUsd);
      });
      var figures = root.querySelector("[data-testid=present-so-far]");
      if (!figures) return;
      figures.querySelector("[data-present-tokens]").textContent = tokens.toLocaleString("en-US");
      figures.querySelector("[data-present-baseline]").textContent = baseline.toLocaleString("en-US");
      figures.querySelector("[data-present-cost]").textContent = "$" + cost.toFixed(4);
      figures.querySelector("[data-present-calls]").textContent = String(calls);
      root.dataset.tokensSoFar = String(tokens);
    }
    function tick() { if (next()) timer = setTimeout(tick, seconds() * 1000); }
    function play() {
      if (shown >= sequences.length) restart();
      playButton.textContent = "Pause"; root.dataset.playing = "true";
      clearTimeout(timer); tick();
    }
    function pause() {
      clearTimeout(timer); timer = null;
      playButton.textContent = "Play"; root.dataset.playing = "false";
    }
    function restart() { pause(); finishTyping(); shown = 0; hideAll(); report(); }

    playButton.addEventListener("click", function () { if (timer) pause(); else play(); });
    root.querySelector("[data-present-step]").addEventListener("click", function () { pause(); next(); });
    root.querySelector("[data-present-restart]").addEventListener("click", restart);
    document.addEventListener("keydown", function (evt) {
      if (evt.target && /^(INPUT|SELECT|TEXTAREA)$/.test(evt.target.tagName)) return;
      if (evt.key === "ArrowRight" || evt.key === " ") { evt.preventDefault(); pause(); next(); }
    });
    restart();
  });
})();

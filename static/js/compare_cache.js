// The compare view's cache figures (conversations/_compare_cache.html): each side's raw input tokens
// and its cache-priced cost side by side, and the cached all-tools baseline, read from the sides'
// header totals (_cache_total.html), which every cache strip frame replaces.
(function () {
  var SIDES = ["left", "right"];
  function dollars(text) { return text === "" || text === undefined ? null : parseFloat(text); }
  function money(value) { return value === null ? "no price" : "$" + value.toFixed(4); }
  function share(a, b, fewer) {
    if (a === null || b === null || a === b) return "";
    var high = Math.max(a, b);
    return "(" + (a > b ? "right" : "left") + " " + fewer + (high ? ", " + Math.round(100 * Math.abs(a - b) / high) + "% less" : "") + ")";
  }
  function fill(box, selector, values, format) {
    Array.prototype.forEach.call(box.querySelectorAll(selector), function (el, i) {
      el.textContent = SIDES[i] + " " + format(values[i]);
      el.dataset.value = values[i] === null ? "" : String(values[i]);
    });
  }
  function update() {
    var box = document.querySelector("[data-compare-cache]");
    if (!box) return;
    var totals = Array.prototype.map.call(document.querySelectorAll("[data-testid=cache-total]"), function (el) { return el.dataset; });
    if (totals.length < 2) return;
    var raw = totals.map(function (t) { return parseInt(t.inputTokens || "0", 10); });
    var priced = totals.map(function (t) { return dollars(t.cost); });
    fill(box, "[data-side-raw]", raw, function (v) { return v.toLocaleString("en-US") + " tokens"; });
    fill(box, "[data-side-priced]", priced, money);
    fill(box, "[data-side-baseline]", totals.map(function (t) { return dollars(t.allToolsCost); }), money);
    fill(box, "[data-side-baseline-uncached]", totals.map(function (t) { return dollars(t.allToolsUncachedCost); }), money);
    box.querySelector("[data-raw-diff]").textContent = share(raw[0], raw[1], "sends fewer");
    box.querySelector("[data-priced-diff]").textContent = share(priced[0], priced[1], "costs less");
  }
  document.addEventListener("htmx:wsAfterMessage", update);
  document.addEventListener("DOMContentLoaded", update);
})();

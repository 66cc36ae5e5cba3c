// The compare view's figures by one accounting: fetched again once the sides' sockets have been
// quiet for a moment after delivering events (so the last event of a run is always counted), without polling.
(function () {
  "use strict";
  var timer = null;
  document.addEventListener("htmx:wsAfterMessage", function () {
    var box = document.getElementById("compare-figures");
    if (!box) return;
    clearTimeout(timer);
    timer = setTimeout(function () { htmx.trigger(box, "compare-refresh"); }, 400);
  });
})();

// The compare view's figures by one accounting: fetched again (at most twice a second) after the
// sides' sockets deliver events, so they follow the runs without polling.
(function () {
  "use strict";
  var pending = null;
  document.addEventListener("htmx:wsAfterMessage", function () {
    var box = document.getElementById("compare-figures");
    if (!box || pending) return;
    pending = setTimeout(function () { pending = null; htmx.trigger(box, "compare-refresh"); }, 500);
  });
})();

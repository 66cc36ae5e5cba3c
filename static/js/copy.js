// Copy buttons next to JSON payloads: copy the <pre> beside the button, say "Copied" for a moment.
(function () {
  "use strict";
  function fallbackCopy(text) {
    // navigator.clipboard needs a secure context (https or localhost); a plain-http deployment falls back to this.
    var area = document.createElement("textarea");
    area.value = text; area.setAttribute("readonly", ""); area.style.position = "fixed"; area.style.opacity = "0";
    document.body.appendChild(area); area.select();
    try { document.execCommand("copy"); } finally { document.body.removeChild(area); }
    return Promise.resolve();
  }
  document.addEventListener("click", function (evt) {
    var button = evt.target.closest && evt.target.closest("[data-copy-button]");
    if (!button) return;
    evt.preventDefault();
    var pre = button.parentElement.querySelector("pre");
    if (!pre) return;
    var text = pre.textContent, done = function () {
      var label = button.dataset.label || button.textContent;
      button.dataset.label = label; button.textContent = "Copied"; button.dataset.copied = "true";
      setTimeout(function () { button.textContent = label; delete button.dataset.copied; }, 1500);
    };
    (navigator.clipboard && window.isSecureContext ? navigator.clipboard.writeText(text) : fallbackCopy(text))
      .then(done, function () { fallbackCopy(text).then(done); });
  });
})();

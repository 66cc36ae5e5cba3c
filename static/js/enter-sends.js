// Message boxes marked data-enter-sends: Enter sends the form, Shift+Enter starts a new line (chat convention;
// the hint beside the box says so). An IME composition's Enter only confirms the composed text.
(function () {
  "use strict";
  document.addEventListener("keydown", function (evt) {
    var box = evt.target;
    if (evt.key !== "Enter" || evt.shiftKey || evt.isComposing || evt.keyCode === 229) return;
    if (!box.matches || !box.matches("textarea[data-enter-sends]") || !box.form) return;
    evt.preventDefault();
    if (!box.value.trim()) return;  // nothing to send: neither a newline nor an empty message (or a conversation without one)
    if (box.form.requestSubmit) box.form.requestSubmit(); else box.form.submit();
  });
})();

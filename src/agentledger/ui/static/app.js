// agentledger ui: the viewer's own small script. The pages work without it; it adds an
// "Unfold all" button to a conversation's folded tool calls. It never inserts content
// as HTML (the CSP forbids inline script, and text only ever goes in as textContent).
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("button.toggle-all").forEach(function (button) {
    var section = document.getElementById(button.dataset.target);
    if (!section || !section.querySelector("details")) { return; }
    button.hidden = false;
    button.addEventListener("click", function () {
      var folds = section.querySelectorAll("details");
      var open = button.textContent === "Unfold all";
      folds.forEach(function (fold) { fold.open = open; });
      button.textContent = open ? "Fold all" : "Unfold all";
    });
  });
});

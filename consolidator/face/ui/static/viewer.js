// Progressive enhancement only: every page works without it.
// A form marked data-confirm asks in the page before it is sent; without this script the
// server asks on a page of its own instead.
"use strict";
document.addEventListener("submit", function (event) {
  var form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-confirm")) {
    return;
  }
  if (!window.confirm(form.getAttribute("data-confirm"))) {
    event.preventDefault();
    return;
  }
  var confirmed = form.querySelector("input[name=confirmed]");
  if (confirmed) {
    confirmed.value = "yes";
  }
});

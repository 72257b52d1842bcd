// Trace list: filters apply as soon as a dropdown changes; the Apply button stays for the search box and for no-JS.
const form = document.querySelector(".tl-filters");
if (form) {
  form.addEventListener("change", (e) => {
    if (e.target.tagName === "SELECT") form.requestSubmit();
  });
}

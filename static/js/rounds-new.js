// Round creation form: show the fields of the chosen way of picking traces.
const form = document.getElementById("round-form");
if (form) {
  const sample = form.querySelector(".rd-sample-fields");
  const manual = form.querySelector(".rd-manual-field");
  const stratum = form.querySelector(".rd-stratum-field");
  const sync = () => {
    const method = form.querySelector("input[name=method]:checked")?.value || "random";
    sample.hidden = method === "manual";
    manual.hidden = method !== "manual";
    stratum.hidden = method !== "stratified";
  };
  form.addEventListener("change", (event) => {
    if (event.target.name === "method") sync();
  });
  sync();
}

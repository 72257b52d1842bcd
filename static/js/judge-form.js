// New judge run form: show the LLM fields only for the LLM provider, the baseline note only for the baseline.
const form = document.getElementById("judge-run-form");
if (form) {
  const sync = () => {
    const checked = form.querySelector("input[name=provider]:checked");
    const baseline = checked && checked.value === "baseline";
    form.querySelectorAll(".judge-llm-only").forEach((el) => { el.hidden = baseline; });
    form.querySelectorAll(".judge-baseline-only").forEach((el) => { el.hidden = !baseline; });
  };
  form.querySelectorAll("input[name=provider]").forEach((el) => el.addEventListener("change", sync));
  sync();
}

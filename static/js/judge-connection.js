// Connection form: picking a kind of server fills its usual base URL (and models) when the field is
// empty or still holds another preset's URL; nothing is filled before a manager picks a kind.
for (const form of document.querySelectorAll("form[data-presets]")) {
  const presets = JSON.parse(form.dataset.presets);
  const kind = form.querySelector("select[name=preset]");
  const url = form.querySelector("input[name=base_url]");
  const models = form.querySelector("input[name=models]");
  const known = new Set(Object.values(presets).map((p) => p.base_url));
  kind.addEventListener("change", () => {
    const p = presets[kind.value];
    if (!p) return;
    if (!url.value || known.has(url.value)) url.value = p.base_url;
    if (models && !models.value && p.models.length) models.value = p.models.join(", ");
  });
}

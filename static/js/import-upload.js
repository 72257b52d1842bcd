// Upload progress for the import form: htmx reports XHR upload progress; show it in <progress>.
document.body.addEventListener("htmx:xhr:progress", (event) => {
  const form = event.target.closest(".import-form");
  if (!form || !event.detail.lengthComputable) return;
  const bar = form.querySelector(".upload-progress");
  bar.hidden = false;
  bar.value = Math.round((100 * event.detail.loaded) / event.detail.total);
});

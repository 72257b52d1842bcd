// PNG download for the dashboard's server-rendered SVG charts: draw the SVG on a canvas at 2x.
function svgToPng(svg, name) {
  const clone = svg.cloneNode(true);
  const box = svg.viewBox.baseVal;
  const width = box && box.width ? box.width : svg.clientWidth;
  const height = box && box.height ? box.height : svg.clientHeight;
  clone.setAttribute("width", String(width));
  clone.setAttribute("height", String(height));
  const data = new XMLSerializer().serializeToString(clone);
  // A data: URL, not a blob: one: the Content-Security-Policy's img-src allows 'self' and data: only.
  const url = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(data)}`;
  const img = new Image();
  img.onload = () => {
    const scale = 2;
    const canvas = document.createElement("canvas");
    canvas.width = width * scale;
    canvas.height = height * scale;
    const ctx = canvas.getContext("2d");
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.scale(scale, scale);
    ctx.drawImage(img, 0, 0, width, height);
    canvas.toBlob((blob) => {
      const link = document.createElement("a");
      link.href = URL.createObjectURL(blob);
      link.download = `${name}.png`;
      document.body.appendChild(link);
      link.click();
      link.remove();
    }, "image/png");
  };
  img.src = url;
}

document.addEventListener("click", (event) => {
  const button = event.target.closest(".png-download");
  if (!button) return;
  const svg = button.closest(".chart")?.querySelector("svg");
  if (svg) svgToPng(svg, button.dataset.name || "chart");
});

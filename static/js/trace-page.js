// The trace page: the viewer owns the whole page, so it takes the keys (j/k, /, n/N) and the URL hash.
import { mountViewer } from "./trace-viewer.js";
import { mountTree } from "./trace-tree.js";

const root = document.querySelector(".trace-viewer");
if (root) mountTree(root, mountViewer(root, { keyboard: true, hitKeys: true, useHash: true }));

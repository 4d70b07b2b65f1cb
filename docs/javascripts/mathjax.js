// MathJax configuration for pymdownx.arithmatex (generic mode). MathJax itself (tex-svg.js,
// Apache-2.0, vendored under vendor/mathjax) is loaded from this site, so formulas render offline.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex",
  },
  svg: { fontCache: "global" },
};

// Material's instant navigation can swap page content without a reload: typeset again each time,
// once MathJax has finished starting (the first emission can come before it is ready).
if (typeof document$ !== "undefined") {
  document$.subscribe(() => {
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(() => {
        MathJax.typesetClear();
        MathJax.texReset();
        return MathJax.typesetPromise();
      });
    }
  });
}

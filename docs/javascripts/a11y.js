// Accessibility fixes that need the live page (tests/test_accessibility.py runs axe-core on every
// page, light and dark, and checks the calculators by keyboard alone).
//
// 1. A box that scrolls (a wide table, a notebook cell, a long formula on a phone) takes the
//    keyboard focus, so a keyboard user can scroll it with the arrow keys; it is named for screen
//    readers. Whether a box overflows depends on the screen's width and on fonts and MathJax
//    finishing, so each candidate is watched and gains or loses its tab stop as it changes.
// 2. Material's search dialog gets a name (the search box's own label, in the page's language).
// 3. A navigation section whose label is a link (a section with an index page) points its
//    aria-labelledby at an element that does not exist, leaving the landmark unnamed: it is named
//    after that link instead.
// 4. Material wraps each code block's copy button in a <nav>, drawn when the block scrolls into
//    view: a page with several code blocks had several unnamed navigation landmarks. A copy button
//    is not navigation, so each such <nav> loses the landmark role as it appears (the button stays).
(function () {
  "use strict";

  const TEXT = {
    en: { table: "Table, scrolls sideways", code: "Code, scrolls", formula: "Formula, scrolls sideways", other: "Scrolling area", figure: "Figure, scrolls sideways" },
    "zh-TW": { table: "表格（可左右捲動）", code: "程式碼（可捲動）", formula: "公式（可左右捲動）", other: "可捲動的區塊", figure: "圖（可左右捲動）" },
  };
  // Elements that can scroll; <pre><code> is left to Material, which gives code blocks a tab stop.
  const CANDIDATES = ".md-content div, .md-content pre:not(:has(> code)), .md-content table, .md-content span.inferlab-figure";
  const FOCUSABLE = "a[href], button, input, select, textarea, [tabindex]:not([tabindex='-1'])";

  function text() {
    return (document.documentElement.lang || "en").toLowerCase().startsWith("zh") ? TEXT["zh-TW"] : TEXT.en;
  }

  function scrolls(style) {
    return [style.overflowX, style.overflowY].some((value) => value === "auto" || value === "scroll");
  }

  function overflows(node) {
    return node.scrollWidth > node.clientWidth + 1 || node.scrollHeight > node.clientHeight + 1;
  }

  function labelFor(node) {
    const t = text();
    if (node.querySelector("table")) return t.table;
    if (node.classList.contains("arithmatex")) return t.formula;
    if (node.classList.contains("inferlab-figure")) return t.figure; // a wide figure on a phone (reader.css)
    if (node.closest(".jupyter-wrapper") || node.querySelector("pre")) return t.code;
    return t.other;
  }

  // Give a scrolling box a tab stop and a name while it overflows, and take them away after.
  function updateTabStop(node) {
    const needsStop = overflows(node) && !node.querySelector(FOCUSABLE);
    if (needsStop && !node.hasAttribute("data-a11y-scroll")) {
      node.setAttribute("data-a11y-scroll", "");
      node.setAttribute("tabindex", "0");
      node.setAttribute("role", "group");
      node.setAttribute("aria-label", labelFor(node));
    } else if (!needsStop && node.hasAttribute("data-a11y-scroll")) {
      for (const name of ["data-a11y-scroll", "tabindex", "role", "aria-label"]) node.removeAttribute(name);
    }
  }

  let observer = null;

  function watchScrollingBoxes() {
    if (observer) observer.disconnect();
    observer = new ResizeObserver((entries) => entries.forEach((entry) => updateTabStop(entry.target)));
    for (const node of document.querySelectorAll(CANDIDATES)) {
      if (node.hasAttribute("tabindex") && !node.hasAttribute("data-a11y-scroll")) continue; // someone else's
      if (scrolls(getComputedStyle(node))) {
        updateTabStop(node);
        observer.observe(node);
      }
    }
  }

  function nameSearchDialog() {
    const dialog = document.querySelector(".md-search[role='dialog']");
    const input = document.querySelector(".md-search__input");
    const name = input && (input.getAttribute("aria-label") || input.getAttribute("placeholder"));
    if (dialog && name && !dialog.hasAttribute("aria-label")) dialog.setAttribute("aria-label", name);
  }

  function nameNavigationSections() {
    for (const nav of document.querySelectorAll("nav[aria-labelledby]")) {
      if (document.getElementById(nav.getAttribute("aria-labelledby"))) continue;
      const item = nav.closest(".md-nav__item");
      const link = item && item.querySelector(":scope > .md-nav__link, :scope > .md-nav__container .md-nav__link");
      if (link && link.textContent.trim()) {
        nav.removeAttribute("aria-labelledby");
        nav.setAttribute("aria-label", link.textContent.trim());
      }
    }
  }

  function unmarkCodeButtonBars() {
    for (const nav of document.querySelectorAll("nav.md-code__nav:not([role])")) nav.setAttribute("role", "none");
  }

  new MutationObserver(unmarkCodeButtonBars).observe(document.body, { childList: true, subtree: true });

  function fixPage() {
    nameSearchDialog();
    nameNavigationSections();
    unmarkCodeButtonBars();
    watchScrollingBoxes();
  }

  // Material's instant navigation swaps pages without reloading scripts and announces each page on
  // document$; without it, fix the page once.
  if (typeof document$ !== "undefined") {
    document$.subscribe(fixPage);
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", fixPage);
  } else {
    fixPage();
  }
})();

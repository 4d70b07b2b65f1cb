// Chinese search queries matched as whole words (tools/reader_hooks.py splits the index).
//
// Material's search worker cuts each run of Chinese characters in a query into the words its index
// holds, but its loop never tries the run's full length: a query that is exactly one indexed word,
// "推測解碼", is cut into shorter pieces ("推測", "解") that match unrelated pages. Ending every run
// with one character no index word contains (〇, itself a Han character, so it stays in the run)
// lets the loop reach the whole word; the character then matches nothing and drops out. CJK
// punctuation (、，。) becomes a space, so "草稿、驗證、接受" searches three words, and so does the
// border between Chinese and Latin letters ("KV快取"). The text in the search
// box stays as the reader typed it: only the message to the worker changes.
(function () {
  "use strict";

  const QUERY = 2; // Material's search message type for a query
  const HAN = /[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+/g;
  const HAS_HAN = /[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]/;
  const CJK_PUNCTUATION = /[\u3000-\u3006\u3008-\u303f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65]/g;
  const END_OF_RUN = "\u3007";
  if (typeof Worker === "undefined") return;

  function segmentable(query) {
    return query
      .replace(CJK_PUNCTUATION, " ")
      .replace(HAN, (run) => ` ${run}${END_OF_RUN} `) // "KV快取" is two words, as the index cut it
      .trim();
  }

  const post = Worker.prototype.postMessage;
  Worker.prototype.postMessage = function (message, ...rest) {
    if (message && message.type === QUERY && typeof message.data === "string" && HAS_HAN.test(message.data)) {
      message = Object.assign({}, message, { data: segmentable(message.data) });
    }
    return post.call(this, message, ...rest);
  };
})();

// Inline formulas wider than their line. MathJax draws inline math as one unbreakable box; on a
// phone a long worked example ("a2 = e^{m1-m2} a1 + ...") then pushed the whole page sideways.
// Such a formula gets the class inferlab-wide-math (reader.css gives it a line of its own that
// scrolls sideways), checked again whenever the window's width changes.
(function () {
  "use strict";

  function markWideMath() {
    for (const math of document.querySelectorAll(".md-typeset span.arithmatex")) {
      const svg = math.querySelector("mjx-container > svg");
      const line = math.parentElement;
      if (!svg || !line) continue;
      const room = line.getBoundingClientRect().width;
      math.classList.toggle("inferlab-wide-math", svg.getBoundingClientRect().width > room + 0.5);
    }
  }

  function afterTypesetting() {
    // After MathJax's first typesetting, and after the one mathjax.js starts on the same promise.
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(() => new Promise((done) => setTimeout(done, 0))).then(markWideMath);
    }
  }

  window.addEventListener("resize", markWideMath);
  if (typeof document$ !== "undefined") document$.subscribe(afterTypesetting);
  else window.addEventListener("load", afterTypesetting);
})();

// Glossary terms on a touch screen. A term's first use on a page links to its glossary row, and
// the link's title shows the definition when a mouse rests on it; a finger cannot hover. On a
// touch screen the first tap on a term shows the definition in a box under it, with a link to the
// glossary; a second tap on the term (or the link) opens the glossary; a tap elsewhere, or Escape,
// closes the box.
(function () {
  "use strict";

  const MORE = { en: "In the glossary", "zh-TW": "查看術語表" };
  let pointer = "mouse"; // the kind of pointer that started the last click
  let open = null; // { term, box } while a definition is shown

  function close() {
    if (!open) return;
    open.box.remove();
    open.term.removeAttribute("aria-describedby");
    open = null;
  }

  function show(term) {
    close();
    const language = (document.documentElement.lang || "en").toLowerCase().startsWith("zh") ? "zh-TW" : "en";
    const box = document.createElement("div");
    box.className = "inferlab-term-tip";
    box.id = "inferlab-term-tip";
    box.setAttribute("role", "tooltip");
    const definition = document.createElement("span");
    definition.textContent = term.getAttribute("title") || "";
    const more = document.createElement("a");
    more.href = term.href;
    more.textContent = MORE[language];
    box.append(definition, " ", more);
    document.body.append(box);
    // Under the term, inside the screen.
    const place = term.getBoundingClientRect();
    const left = Math.max(8, Math.min(place.left, document.documentElement.clientWidth - box.offsetWidth - 8));
    box.style.left = `${left + window.scrollX}px`;
    box.style.top = `${place.bottom + window.scrollY + 6}px`;
    term.setAttribute("aria-describedby", box.id);
    open = { term, box };
  }

  document.addEventListener("pointerdown", (event) => (pointer = event.pointerType), true);
  document.addEventListener("keydown", (event) => event.key === "Escape" && close());
  document.addEventListener("click", (event) => {
    const term = event.target.closest ? event.target.closest("a.glossary-term") : null;
    if (open && open.box.contains(event.target)) return; // the box's own link
    if (!term || pointer !== "touch") return close();
    if (open && open.term === term) return; // the second tap follows the link
    event.preventDefault();
    show(term);
  });
})();

// The language switch keeps the reader's place. Material's language menu leads to the top of the
// same page in the other language. When the address names a section (#...), the same section is
// looked up on the other page: by the same id where it has one (the glossary's rows), or else as
// the heading at the same position (both languages have the same headings, in the same order: a
// test checks). Without a section, or if the other page cannot be read, the link works as before.
(function () {
  "use strict";

  const HEADINGS = "article h1[id], article h2[id], article h3[id], article h4[id], article h5[id], article h6[id]";

  async function twinAnchor(url, id) {
    const response = await fetch(url);
    if (!response.ok) return "";
    const twin = new DOMParser().parseFromString(await response.text(), "text/html");
    if (twin.getElementById(id)) return id;
    const position = [...document.querySelectorAll(HEADINGS)].findIndex((heading) => heading.id === id);
    const theirs = [...twin.querySelectorAll(HEADINGS)];
    return position >= 0 && position < theirs.length ? theirs[position].id : "";
  }

  document.addEventListener(
    "click",
    async (event) => {
      const link = event.target.closest ? event.target.closest("a.md-select__link[hreflang]") : null;
      if (!link || !location.hash || event.ctrlKey || event.metaKey || event.shiftKey) return;
      event.preventDefault();
      const target = new URL(link.href, location.href);
      try {
        target.hash = await twinAnchor(target.href, decodeURIComponent(location.hash.slice(1)));
      } catch (error) {
        target.hash = "";
      }
      location.href = target.href;
    },
    true,
  );
})();

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

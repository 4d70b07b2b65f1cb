// In-browser calculators: KV-cache size, speculative decoding speed-up, attention HBM traffic.
//
// The first half is pure arithmetic that mirrors three Python modules line for line:
//   inferlab/kvcache/size.py          kv_cache_bytes, cache_shape
//   inferlab/speculative/formulas.py  expected_tokens_per_step, expected_speedup, best_gamma
//   inferlab/flash/traffic.py         blocks_from_sram, hbm_traffic, attention_flops, estimate_runtime
// tests/test_calculators.py runs these functions in Chromium on a grid of inputs and checks that
// they give the Python functions' numbers, and that bad input is refused the same way.
// The data (model configs, GPU data sheets, bytes per dtype) is not typed here: it comes from
// calculator-presets.js, generated from the package by tools/calculator_presets.py.
//
// The second half draws the widgets: a page asks for one with
//   <div class="calc" data-calc="kv-cache"></div>   (or "speculative-speedup", "hbm-traffic")
(function () {
  "use strict";

  const PRESETS = window.INFERLAB_PRESETS;

  // ---------------------------------------------------------------- checks (as in Python)

  // Python's repr, so a message reads the same in both languages of the code.
  function repr(value) {
    if (typeof value === "string") return `'${value}'`;
    if (value === null || value === undefined) return "None";
    if (typeof value === "boolean") return value ? "True" : "False";
    if (Number.isNaN(value)) return "nan";
    if (value === Infinity) return "inf";
    if (value === -Infinity) return "-inf";
    return String(value);
  }

  function isNumber(value) {
    return typeof value === "number" && !Number.isNaN(value);
  }

  // An integer >= 1 (true is not a count: JavaScript's typeof tells them apart, as Python's bool check does).
  function isCount(value) {
    return typeof value === "number" && Number.isInteger(value) && value >= 1;
  }

  function checkCount(name, value, minimum) {
    // JavaScript has one number type: an "integer" is a number with no fractional part.
    if (!Number.isInteger(value) || value < minimum) {
      throw new RangeError(`${name} must be an integer >= ${minimum}, got ${repr(value)}`);
    }
  }

  // ---------------------------------------------------------------- KV-cache size

  function bytesPerElement(dtype) {
    const key = typeof dtype === "string" ? dtype.toLowerCase().replace(/^torch\./, "") : null;
    if (key !== null && Object.prototype.hasOwnProperty.call(PRESETS.bytes_per_element, key)) {
      return PRESETS.bytes_per_element[key];
    }
    const allowed = Object.keys(PRESETS.bytes_per_element).sort();
    throw new RangeError(`dtype must be one of ${allowed.join(", ")}, got ${repr(dtype)}`);
  }

  function firstOf(config, ...names) {
    for (const name of names) {
      if (config[name] !== undefined && config[name] !== null) return config[name];
    }
    return null;
  }

  // A preset name, or a config object with Hugging Face's field names.
  function cacheShape(config) {
    if (typeof config === "string") {
      if (!Object.prototype.hasOwnProperty.call(PRESETS.kv_presets, config)) {
        const names = Object.keys(PRESETS.kv_presets).sort();
        throw new RangeError(`config must be a config object or a preset name in ${names.join(", ")}, got ${repr(config)}`);
      }
      config = PRESETS.kv_presets[config];
    }
    if (config === null || typeof config !== "object") {
      throw new TypeError(`config must be a config object or a preset name, got ${repr(config)}`);
    }
    const layers = firstOf(config, "num_hidden_layers", "num_layers");
    const heads = firstOf(config, "num_attention_heads", "num_heads");
    const kvField = firstOf(config, "num_key_value_heads", "num_kv_heads");
    const kvHeads = kvField === null ? heads : kvField; // no GQA field: MHA (but 0 is an error, not "absent")
    const hiddenSize = firstOf(config, "hidden_size");
    let headDim = firstOf(config, "head_dim");
    if (headDim === null && isCount(hiddenSize) && isCount(heads)) {
      if (hiddenSize % heads !== 0) {
        throw new RangeError(
          `config hidden_size (${hiddenSize}) must be a multiple of num_attention_heads (${heads}) when it gives no head_dim`
        );
      }
      headDim = hiddenSize / heads;
    }
    if (![layers, kvHeads, headDim].every(isCount)) {
      throw new RangeError(
        "config must give num_hidden_layers, num_key_value_heads (or num_attention_heads) and " +
          `head_dim (or hidden_size), integers >= 1, got layers=${repr(layers)}, kv_heads=${repr(kvHeads)}, ` +
          `head_dim=${repr(headDim)}`
      );
    }
    if (isCount(heads) && heads % kvHeads !== 0) {
      throw new RangeError(
        `config num_attention_heads (${heads}) must be a multiple of num_key_value_heads (${kvHeads}): ` +
          "each key/value head serves an equal group of query heads"
      );
    }
    return { layers: layers, kv_heads: kvHeads, head_dim: headDim };
  }

  function kvCacheBytes(config, tokens, batch = 1, dtype = "float16") {
    checkCount("tokens", tokens, 0);
    checkCount("batch", batch, 0);
    const size = bytesPerElement(dtype);
    const shape = cacheShape(config);
    // 2: one key and one value vector, per layer, per key/value head, per token, per sequence.
    // Exact while below 2^53 bytes (8 PiB); Python's integers have no such limit.
    return 2 * shape.layers * shape.kv_heads * shape.head_dim * tokens * batch * size;
  }

  // ---------------------------------------------------------------- speculative decoding

  function checkAlpha(alpha) {
    if (!isNumber(alpha) || !(alpha >= 0 && alpha <= 1)) {
      throw new RangeError(`alpha must be a probability in [0, 1], got ${repr(alpha)}`);
    }
  }

  function checkGamma(gamma, name = "gamma") {
    if (!Number.isInteger(gamma) || gamma < 1) {
      throw new RangeError(`${name} must be an integer >= 1, got ${repr(gamma)}`);
    }
  }

  function checkCostRatio(value, name) {
    if (!isNumber(value) || !(value >= 0 && Number.isFinite(value))) {
      throw new RangeError(`${name} must be a finite number >= 0 (draft cost / target cost), got ${repr(value)}`);
    }
  }

  // Leviathan et al. (2022), Section 3: (1 - alpha^(gamma+1)) / (1 - alpha).
  function expectedTokensPerStep(alpha, gamma) {
    checkAlpha(alpha);
    checkGamma(gamma);
    if (alpha === 1) return gamma + 1; // the limit: every draft accepted, plus the bonus token
    return (1 - Math.pow(alpha, gamma + 1)) / (1 - alpha);
  }

  function expectedSpeedup(alpha, gamma, c) {
    checkCostRatio(c, "c");
    // One round costs gamma draft steps plus one target step that checks all drafts at once.
    return expectedTokensPerStep(alpha, gamma) / (gamma * c + 1);
  }

  function bestGamma(alpha, c, maxGamma = 64) {
    checkGamma(maxGamma); // named "gamma", as Python's best_gamma names it
    let best = 1;
    let bestSpeedup = expectedSpeedup(alpha, 1, c);
    for (let gamma = 2; gamma <= maxGamma; gamma++) {
      const speedup = expectedSpeedup(alpha, gamma, c);
      if (speedup > bestSpeedup) {
        // strictly greater: on a tie the smaller gamma stays, as in Python
        best = gamma;
        bestSpeedup = speedup;
      }
    }
    return best;
  }

  // ---------------------------------------------------------------- attention HBM traffic

  function blocksFromSram(sramBytes, d, elementBytes = 4) {
    checkCount("sram_bytes", sramBytes, 1);
    checkCount("d", d, 1);
    checkCount("element_bytes", elementBytes, 1);
    const sramElements = Math.floor(sramBytes / elementBytes);
    if (sramElements < 4 * d) {
      throw new RangeError(
        `sram_bytes=${sramBytes} holds ${sramElements} elements of ${elementBytes} bytes, ` +
          `fewer than 4d = ${4 * d}: not even one row each of Q, K, V and O fits`
      );
    }
    // Dao et al. (2022), Algorithm 1: tiles of Q, K, V and O must fit in SRAM together.
    const blockK = Math.ceil(sramElements / (4 * d));
    return [Math.min(blockK, d), blockK];
  }

  const MAX_QUERY_TILES = 1000000; // as in traffic.py: the causal count visits query tiles one by one

  function isNone(value) {
    return value === null || value === undefined;
  }

  // options: { sram_bytes, block_q, block_k, causal, element_bytes }, Python's keyword arguments.
  function hbmTraffic(N, d, method, options = {}) {
    checkCount("N", N, 1);
    checkCount("d", d, 1);
    if (!PRESETS.attention_methods.includes(method)) {
      throw new RangeError(`method must be one of ${PRESETS.attention_methods.join(", ")}, got ${repr(method)}`);
    }
    if (!isNone(options.causal) && typeof options.causal !== "boolean") {
      throw new RangeError(`causal must be True or False, got ${repr(options.causal)}`);
    }
    const causal = options.causal === true;
    const elementBytes = isNone(options.element_bytes) ? 4 : options.element_bytes;
    let blockQ = options.block_q;
    let blockK = options.block_k;
    if (method === "standard" || method === "flash_ideal") {
      if (!isNone(options.sram_bytes) || !isNone(blockQ) || !isNone(blockK)) {
        throw new RangeError(`${method} has no tiles: leave sram_bytes, block_q and block_k as None`);
      }
    }
    if (method === "standard") {
      const reads = 3 * N * d + 2 * N * N; // Q, K, V, and S and P read back
      const writes = 2 * N * N + N * d; // S, P, and the output O
      return { reads: reads, writes: writes, total: reads + writes };
    }
    if (method === "flash_ideal") {
      const reads = 4 * N * d + 2 * N; // Q, K, V and O once each; the row statistics l and m once
      const writes = N * d + 2 * N; // O, l and m once
      return { reads: reads, writes: writes, total: reads + writes };
    }
    if (!isNone(options.sram_bytes)) {
      if (!isNone(blockQ) || !isNone(blockK)) {
        throw new RangeError("give either sram_bytes or block_q/block_k, not both");
      }
      [blockQ, blockK] = blocksFromSram(options.sram_bytes, d, elementBytes);
    }
    blockQ = isNone(blockQ) ? 64 : blockQ;
    blockK = isNone(blockK) ? 64 : blockK;
    checkCount("block_q", blockQ, 1);
    checkCount("block_k", blockK, 1);
    const queryTiles = Math.ceil(N / blockQ);
    const writes = N * d + N; // O, and the log-sum-exp L kept for the backward pass
    if (!causal) {
      // every query tile streams all N keys and values past itself
      const reads = N * d + queryTiles * 2 * N * d;
      return { reads: reads, writes: writes, total: reads + writes };
    }
    if (queryTiles > MAX_QUERY_TILES) {
      throw new RangeError(
        `block_q=${blockQ} cuts N=${N} into ${queryTiles} query tiles, over the ${MAX_QUERY_TILES} ` +
          "this count visits one by one; use a larger block_q (or sram_bytes)"
      );
    }

    let reads = N * d; // every query tile is loaded once
    for (let qStart = 0; qStart < N; qStart += blockQ) {
      const qEnd = Math.min(qStart + blockQ, N);
      // Key tiles this query tile visits: those that reach the diagonal (the rest are all masked).
      const keysLoaded = Math.min(N, Math.ceil(qEnd / blockK) * blockK);
      reads += 2 * keysLoaded * d; // one K tile and one V tile per visit
    }
    return { reads: reads, writes: writes, total: reads + writes };
  }

  // Dao (2023), Section 4.1: 4 N^2 d forward, 2.5x that backward, halved when causal.
  function attentionFlops(N, d, causal = false, backward = false) {
    checkCount("N", N, 1);
    checkCount("d", d, 1);
    for (const [name, value] of [["causal", causal], ["backward", backward]]) {
      if (typeof value !== "boolean") throw new RangeError(`${name} must be True or False, got ${repr(value)}`);
    }
    let flops = 4 * N * N * d;
    if (backward) flops *= 2.5;
    return causal ? flops / 2 : flops;
  }

  // "roofline" (Williams et al., 2009): the slower of arithmetic and memory traffic, as if they
  // overlapped perfectly; "additive": their sum, as if they never overlapped (the NTU lab's model).
  function estimateRuntime(flops, bytesMoved, gpu, precision = "fp32", runtimeModel = "roofline") {
    const spec = typeof gpu === "string" ? PRESETS.gpu_presets[gpu] : gpu;
    const fields = ["fp32_tflops", "fp16_tflops", "bandwidth_gbs"];
    if (!spec || typeof spec !== "object" || !fields.every((f) => Number.isFinite(spec[f]) && spec[f] > 0)) {
      const names = Object.keys(PRESETS.gpu_presets).sort();
      throw new RangeError(`gpu must be one of ${names.join(", ")} or a GPUSpec with peaks > 0, got ${repr(gpu)}`);
    }
    if (precision !== "fp32" && precision !== "fp16") {
      throw new RangeError(`precision must be 'fp32' or 'fp16', got ${repr(precision)}`);
    }
    if (!PRESETS.runtime_models.includes(runtimeModel)) {
      throw new RangeError(`runtime_model must be one of ${PRESETS.runtime_models.join(", ")}, got ${repr(runtimeModel)}`);
    }
    for (const [name, value] of [["flops", flops], ["bytes_moved", bytesMoved]]) {
      if (!Number.isFinite(value) || value < 0) {
        throw new RangeError(`${name} must be a finite number >= 0, got ${repr(value)}`);
      }
    }
    const peakFlops = (precision === "fp32" ? spec.fp32_tflops : spec.fp16_tflops) * 1e12;
    const bandwidth = spec.bandwidth_gbs * 1e9;
    const computeS = flops / peakFlops;
    const memoryS = bytesMoved / bandwidth;
    return {
      compute_s: computeS,
      memory_s: memoryS,
      runtime_s: runtimeModel === "roofline" ? Math.max(computeS, memoryS) : computeS + memoryS,
      bound: computeS >= memoryS ? "compute" : "memory",
      arithmetic_intensity: bytesMoved ? flops / bytesMoved : Infinity,
      ridge_point: peakFlops / bandwidth, // FLOPs per byte where the two roofs meet
    };
  }

  // ================================================================ widgets

  const TEXT = {
    en: {
      kvTitle: "KV-cache size calculator",
      kvFormula: "2 × layers × kv_heads × head_dim × tokens × batch × bytes per number",
      model: "Model preset",
      custom: "Custom",
      layers: "Layers",
      kvHeads: "Key/value heads",
      headDim: "Head dimension",
      tokens: "Tokens per sequence",
      batch: "Batch (sequences)",
      dtype: "Data type",
      total: "KV cache",
      perToken: "Per token, one sequence",
      bytes: "bytes",
      specTitle: "Speculative decoding speed-up",
      specFormula: "speed-up = (1 − α^(γ+1)) / ((1 − α)(γc + 1))",
      alpha: "Acceptance rate α",
      gamma: "Drafted tokens per round γ",
      cost: "Cost ratio c (draft step ÷ target step)",
      tokensPerStep: "Expected tokens per target call",
      speedup: "Expected speed-up",
      best: "Best γ (1–64)",
      chart: "Expected speed-up for γ = 1 to",
      chartX: "γ, drafted tokens per round",
      chartY: "expected speed-up",
      legendCurrent: "the γ above",
      legendBaseline: "1×: no gain",
      specPreset: "Measured on the bundled pair",
      specRegimes: { short: "short prompt", long: "long prompt" },
      specRuntimes: { inferlab: "inferlab's decoder", transformers: "transformers" },
      specMeasured: "Measured best speed-up (this preset)",
      specAt: "at γ =",
      listSep: ", ",
      labelSep: ": ",
      hbmTitle: "Attention HBM traffic and runtime estimate",
      hbmNote: "A model of one head, not a measurement.",
      runtimeModel: "Runtime model",
      roofline: "max(compute, memory): roofline",
      additive: "compute + memory: additive",
      ideal: "Ideal",
      seqLen: "Sequence length N",
      dim: "Head dimension d",
      gpu: "GPU",
      precision: "Precision",
      causal: "Causal mask",
      standard: "Standard",
      flash: "Tiled",
      tiles: "Tiles B_q × B_k (from SRAM)",
      traffic: "HBM traffic (elements)",
      trafficBytes: "HBM traffic",
      flops: "FLOPs",
      computeTime: "Compute time",
      memoryTime: "Memory time",
      runtime: "Estimated runtime",
      bound: "Bound by",
      computeBound: "compute",
      memoryBound: "memory",
      intensity: "Arithmetic intensity (FLOPs/byte)",
      ridge: "Ridge point (FLOPs/byte)",
      notApplicable: "—",
      quantity: "Quantity",
    },
    "zh-TW": {
      kvTitle: "KV 快取大小計算器",
      kvFormula: "2 × 層數 × 鍵／值頭數 × 頭維度 × 詞元數 × 批次 × 每個數的位元組",
      model: "模型預設值",
      custom: "自訂",
      layers: "層數",
      kvHeads: "鍵／值頭數",
      headDim: "頭維度",
      tokens: "每個序列的詞元數",
      batch: "批次（序列數）",
      dtype: "資料型別",
      total: "KV 快取",
      perToken: "每個詞元（一個序列）",
      bytes: "位元組",
      specTitle: "推測解碼加速計算器",
      specFormula: "加速 = (1 − α^(γ+1)) / ((1 − α)(γc + 1))",
      alpha: "接受率 α",
      gamma: "每輪草擬的詞元數 γ",
      cost: "成本比 c（草稿模型一步 ÷ 目標模型一步）",
      tokensPerStep: "每次呼叫目標模型的預期詞元數",
      speedup: "預期加速",
      best: "最佳 γ（1–64）",
      chart: "γ = 1 到下列值的預期加速：",
      chartX: "γ：每輪草擬的詞元數",
      chartY: "預期加速",
      legendCurrent: "上面選的 γ",
      legendBaseline: "1×：沒有加速",
      specPreset: "內建模型組的實測值",
      specRegimes: { short: "短提示", long: "長提示" },
      specRuntimes: { inferlab: "inferlab 解碼器", transformers: "transformers" },
      specMeasured: "實測最佳加速（此預設值）",
      specAt: "於 γ =",
      listSep: "，",
      labelSep: "：",
      hbmTitle: "注意力的 HBM 流量與執行時間估計",
      hbmNote: "一個注意力頭的模型估計，不是量測值。",
      runtimeModel: "執行時間模型",
      roofline: "max(計算, 記憶體)：屋頂線",
      additive: "計算 + 記憶體：相加",
      ideal: "理想",
      seqLen: "序列長度 N",
      dim: "頭維度 d",
      gpu: "GPU",
      precision: "精度",
      causal: "因果遮罩",
      standard: "標準",
      flash: "分塊",
      tiles: "區塊大小 B_q × B_k（由 SRAM 推得）",
      traffic: "HBM 流量（元素）",
      trafficBytes: "HBM 流量",
      flops: "浮點運算（FLOPs）",
      computeTime: "計算時間",
      memoryTime: "記憶體時間",
      runtime: "估計執行時間",
      bound: "受限於",
      computeBound: "計算",
      memoryBound: "記憶體",
      intensity: "算術強度（FLOPs／位元組）",
      ridge: "脊點（FLOPs／位元組）",
      notApplicable: "—",
      quantity: "項目",
    },
  };

  function language() {
    const lang = (document.documentElement.lang || "en").toLowerCase();
    return lang.startsWith("zh") ? "zh-TW" : "en";
  }

  // ---------------------------------------------------------------- formatting

  const INTEGER = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

  function formatInteger(value) {
    return INTEGER.format(value);
  }

  function formatBinary(bytes) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let value = bytes;
    let unit = 0;
    while (value >= 1024 && unit < units.length - 1) {
      value /= 1024;
      unit += 1;
    }
    return unit === 0 ? `${value} B` : `${value.toFixed(2)} ${units[unit]}`;
  }

  // Big counts in SI steps (68.16 M rather than 68,157,440) so a table fits a phone's width;
  // the exact number stays in the output's data-value and its tooltip.
  function formatCompact(value, unit = "") {
    for (const [prefix, scale] of [["T", 1e12], ["G", 1e9], ["M", 1e6], ["k", 1e3]]) {
      if (value >= scale) return `${(value / scale).toFixed(2)} ${prefix}${unit}`;
    }
    return `${value}${unit ? " " + unit : ""}`;
  }

  function formatDecimal(bytes) {
    // Bandwidth is quoted in decimal units (1 GB = 1e9 bytes), so traffic is shown the same way.
    const units = [["GB", 1e9], ["MB", 1e6], ["kB", 1e3]];
    for (const [unit, scale] of units) {
      if (bytes >= scale) return `${(bytes / scale).toFixed(2)} ${unit}`;
    }
    return `${bytes} B`;
  }

  // Four significant digits: an estimate from two peak numbers deserves no more.
  function formatSeconds(seconds) {
    if (seconds >= 1) return `${seconds.toPrecision(4)} s`;
    if (seconds >= 1e-3) return `${(seconds * 1e3).toPrecision(4)} ms`;
    return `${(seconds * 1e6).toPrecision(4)} µs`;
  }

  // ---------------------------------------------------------------- small DOM helpers

  function element(tag, attributes = {}, children = []) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
      if (value === false || value === null || value === undefined) continue;
      node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of [].concat(children)) {
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  let uniqueId = 0;

  // A labelled input or select; the label is tied to the control so screen readers and taps work.
  function field(label, control) {
    uniqueId += 1;
    control.id = `calc-${uniqueId}`;
    return element("div", { class: "calc__field" }, [element("label", { for: control.id }, label), control]);
  }

  function numberInput(name, value, attributes = {}) {
    return element("input", { type: "number", name: name, value: value, inputmode: "decimal", ...attributes });
  }

  function select(name, options, selected) {
    const node = element("select", { name: name });
    for (const [value, label] of options) {
      node.append(element("option", { value: value, selected: value === selected }, label));
    }
    return node;
  }

  // An output line: the visible text, and the exact number in data-value for tests and copying.
  function outputRow(key, label) {
    return element("div", { class: "calc__result" }, [
      element("span", { class: "calc__result-label" }, label),
      element("output", { "data-key": key }, "—"),
    ]);
  }

  function show(root, key, text, value) {
    const node = root.querySelector(`output[data-key="${key}"]`);
    node.textContent = text;
    if (value === undefined) {
      node.removeAttribute("data-value");
      node.removeAttribute("title");
    } else {
      node.setAttribute("data-value", String(value));
      if (typeof value === "number") node.setAttribute("title", Number.isInteger(value) ? formatInteger(value) : String(value));
    }
  }

  // The checks above throw Python's own messages (tests/test_calculators.py compares them), in
  // English. A zh-TW page shows them in Chinese: each message's shape has a pattern here, and the
  // names and values it quotes stay as they are. A message with no pattern is shown in English.
  const ZH_ERRORS = [
    [/^(.+) must be an integer >= (\S+), got (.+)$/, "$1 必須是 ≥ $2 的整數，收到的是 $3"],
    [/^(.+) must be one of (.+?), got (.+)$/, "$1 必須是 $2 其中之一，收到的是 $3"],
    [/^(.+) must be a probability in \[0, 1\], got (.+)$/, "$1 必須是 [0, 1] 之間的機率，收到的是 $2"],
    [/^(.+) must be a finite number >= 0 \(draft cost \/ target cost\), got (.+)$/,
      "$1 必須是 ≥ 0 的有限數值（草稿模型成本 ÷ 目標模型成本），收到的是 $2"],
    [/^(.+) must be a finite number >= 0, got (.+)$/, "$1 必須是 ≥ 0 的有限數值，收到的是 $2"],
    [/^(.+) must be True or False, got (.+)$/, "$1 必須是 True 或 False，收到的是 $2"],
    [/^precision must be 'fp32' or 'fp16', got (.+)$/, "precision 必須是 'fp32' 或 'fp16'，收到的是 $1"],
    [/^gpu must be one of (.+) or a GPUSpec with peaks > 0, got (.+)$/,
      "gpu 必須是 $1 其中之一，或峰值 > 0 的 GPUSpec，收到的是 $2"],
    [/^config must be a config object or a preset name(?: in (.+))?, got (.+)$/,
      "config 必須是設定物件或預設模型名稱（$1），收到的是 $2"],
    [/^config hidden_size \((\d+)\) must be a multiple of num_attention_heads \((\d+)\) when it gives no head_dim$/,
      "沒有 head_dim 時，config 的 hidden_size（$1）必須是 num_attention_heads（$2）的倍數"],
    [/^config num_attention_heads \((\d+)\) must be a multiple of num_key_value_heads \((\d+)\): .*$/,
      "config 的 num_attention_heads（$1）必須是 num_key_value_heads（$2）的倍數：每個鍵／值頭服務同樣多個查詢頭"],
    [/^config must give num_hidden_layers, .*, got (.+)$/,
      "config 必須給出 num_hidden_layers、num_key_value_heads（或 num_attention_heads）與 head_dim（或 hidden_size），都是 ≥ 1 的整數，收到的是 $1"],
    [/^(.+) has no tiles: leave sram_bytes, block_q and block_k as None$/, "$1 沒有分塊：sram_bytes、block_q 與 block_k 請保持 None"],
    [/^give either sram_bytes or block_q\/block_k, not both$/, "sram_bytes 與 block_q／block_k 只能擇一"],
    [/^sram_bytes=(\d+) holds (\d+) elements of (\d+) bytes, fewer than 4d = (\d+): .*$/,
      "sram_bytes=$1 只放得下 $2 個 $3 位元組的元素，少於 4d = $4：連 Q、K、V、O 各一列都放不下"],
    [/^block_q=(\d+) cuts N=(\d+) into (\d+) query tiles, over the (\d+) .*$/,
      "block_q=$1 把 N=$2 切成 $3 個查詢區塊，超過逐一計算的上限 $4；請用更大的 block_q（或 sram_bytes）"],
  ];

  function errorText(message) {
    if (language() !== "zh-TW") return message;
    for (const [pattern, template] of ZH_ERRORS) {
      if (pattern.test(message)) return message.replace(pattern, template);
    }
    return message;
  }

  function showError(root, error) {
    const box = root.querySelector(".calc__error");
    box.textContent = error ? errorText(error.message) : "";
    box.hidden = !error;
  }

  function clearOutputs(root) {
    for (const node of root.querySelectorAll("output")) {
      node.textContent = "—";
      node.removeAttribute("data-value");
      node.removeAttribute("title");
    }
  }

  // Number("") is 0, which would hide an empty box: read empty as NaN so the check names it.
  function readNumber(form, name) {
    const raw = form.elements[name].value.trim();
    return raw === "" ? NaN : Number(raw);
  }

  function frame(root, title, formula, controls, results) {
    root.replaceChildren(
      element("p", { class: "calc__title" }, title),
      formula ? element("p", { class: "calc__formula" }, formula) : "",
      element("form", { class: "calc__form", autocomplete: "off" }, controls),
      element("div", { class: "calc__results", "aria-live": "polite" }, results),
      element("p", { class: "calc__error", role: "alert", hidden: true })
    );
    const form = root.querySelector("form");
    form.addEventListener("submit", (event) => event.preventDefault());
    return form;
  }

  // ---------------------------------------------------------------- KV-cache widget

  function mountKvCache(root, t) {
    const names = Object.keys(PRESETS.kv_presets);
    const first = PRESETS.kv_presets[names[0]];
    const dtypes = [["bf16", "bf16 / fp16 (2 B)"], ["fp32", "fp32 (4 B)"], ["fp8", "fp8 / int8 (1 B)"]];
    const form = frame(
      root,
      t.kvTitle,
      t.kvFormula,
      [
        field(t.model, select("preset", names.map((n) => [n, n]).concat([["custom", t.custom]]), names[0])),
        field(t.layers, numberInput("layers", first.num_hidden_layers, { min: 1, step: 1, inputmode: "numeric" })),
        field(t.kvHeads, numberInput("kv_heads", first.num_key_value_heads, { min: 1, step: 1, inputmode: "numeric" })),
        field(t.headDim, numberInput("head_dim", first.head_dim, { min: 1, step: 1, inputmode: "numeric" })),
        field(t.tokens, numberInput("tokens", 8192, { min: 0, step: 1, inputmode: "numeric" })),
        field(t.batch, numberInput("batch", 1, { min: 0, step: 1, inputmode: "numeric" })),
        field(t.dtype, select("dtype", dtypes, "bf16")),
      ],
      [outputRow("bytes", t.total), outputRow("per_token", t.perToken)]
    );

    function update(event) {
      const target = event && event.target;
      if (target && target.name === "preset" && target.value !== "custom") {
        const preset = PRESETS.kv_presets[target.value];
        form.elements.layers.value = preset.num_hidden_layers;
        form.elements.kv_heads.value = preset.num_key_value_heads;
        form.elements.head_dim.value = preset.head_dim;
      } else if (target && ["layers", "kv_heads", "head_dim"].includes(target.name)) {
        form.elements.preset.value = "custom"; // edited by hand: no longer the preset's numbers
      }
      const config = {
        num_hidden_layers: readNumber(form, "layers"),
        num_key_value_heads: readNumber(form, "kv_heads"),
        head_dim: readNumber(form, "head_dim"),
      };
      const dtype = form.elements.dtype.value;
      try {
        const total = kvCacheBytes(config, readNumber(form, "tokens"), readNumber(form, "batch"), dtype);
        const perToken = kvCacheBytes(config, 1, 1, dtype);
        show(root, "bytes", `${formatInteger(total)} ${t.bytes} (${formatBinary(total)})`, total);
        show(root, "per_token", `${formatInteger(perToken)} ${t.bytes} (${formatBinary(perToken)})`, perToken);
        showError(root, null);
      } catch (error) {
        clearOutputs(root);
        showError(root, error);
      }
    }
    form.addEventListener("input", update);
    form.addEventListener("change", update);
    update();
  }

  // ---------------------------------------------------------------- speculative widget

  // A bar per γ from 1 to max(10, γ): the expected speed-up, with both axes labelled, the chosen γ
  // in the page's primary colour, and the 1× line (below it, speculative decoding is slower than
  // plain decoding); a legend above the bars names both. Sizes are in the SVG's own units: the
  // chart is drawn 320 wide and scaled to the column, so its 10-unit text stays legible on a phone.
  function speedupChart(alpha, gamma, c, t) {
    const count = Math.max(10, gamma);
    const values = [];
    for (let g = 1; g <= count; g++) values.push(expectedSpeedup(alpha, g, c));
    const top = niceCeiling(Math.max(1, ...values));
    const [width, height] = [320, 196];
    const plot = { left: 36, right: 312, top: 34, bottom: 160 };
    const x = (index) => plot.left + ((plot.right - plot.left) * index) / count;
    const y = (value) => plot.bottom - ((plot.bottom - plot.top) * value) / top;
    const svgNs = "http://www.w3.org/2000/svg";
    const make = (name, attributes, text) => {
      const node = document.createElementNS(svgNs, name);
      for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
      if (text !== undefined) node.textContent = text;
      return node;
    };
    const svg = make("svg", { viewBox: `0 0 ${width} ${height}`, class: "calc__chart", role: "img" });
    svg.setAttribute("aria-label", `${t.chart} ${count}`);
    // The y axis: ticks at 0, the 1× line and the top, labelled as speed-ups.
    for (const value of [...new Set([0, 1, top / 2, top])].sort((a, b) => a - b)) {
      svg.append(make("line", { x1: plot.left - 3, x2: plot.right, y1: y(value), y2: y(value), class: "calc__grid" }));
      svg.append(make("text", { x: plot.left - 5, y: y(value) + 3.5, class: "calc__tick", "text-anchor": "end" }, `${trimmed(value)}×`));
    }
    values.forEach((value, index) => {
      const barWidth = (plot.right - plot.left) / count;
      const bar = make("rect", {
        x: x(index) + barWidth * 0.12,
        y: y(value),
        width: Math.max(barWidth * 0.76, 1),
        height: plot.bottom - y(value),
        class: index + 1 === gamma ? "calc__bar calc__bar--current" : "calc__bar",
      });
      bar.append(make("title", {}, `γ = ${index + 1}: ${value.toFixed(3)}×`));
      svg.append(bar);
      // γ under each bar; when there are many, every few, always the chosen one.
      const step = Math.ceil(count / 16);
      if ((index + 1) % step === 0 || index === 0 || index + 1 === gamma) {
        svg.append(make("text", { x: x(index) + barWidth / 2, y: plot.bottom + 12, class: "calc__tick", "text-anchor": "middle" }, String(index + 1)));
      }
    });
    svg.append(make("line", { x1: plot.left, x2: plot.right, y1: y(1), y2: y(1), class: "calc__baseline" }));
    svg.append(make("line", { x1: plot.left, x2: plot.right, y1: plot.bottom, y2: plot.bottom, class: "calc__axis" }));
    svg.append(make("line", { x1: plot.left, x2: plot.left, y1: plot.top, y2: plot.bottom, class: "calc__axis" }));
    svg.append(make("text", { x: (plot.left + plot.right) / 2, y: height - 6, class: "calc__axis-title", "text-anchor": "middle" }, t.chartX));
    svg.append(make("text", { x: 2, y: plot.top - 8, class: "calc__axis-title" }, t.chartY));
    // The legend, above the plot on the right.
    const legend = [
      ["rect", { x: 150, y: 6, width: 10, height: 8, class: "calc__bar calc__bar--current" }, t.legendCurrent],
      ["line", { x1: 232, x2: 248, y1: 10, y2: 10, class: "calc__baseline" }, t.legendBaseline],
    ];
    for (const [shape, attributes, text] of legend) {
      svg.append(make(shape, attributes));
      const start = shape === "rect" ? attributes.x + 14 : attributes.x2 + 4;
      svg.append(make("text", { x: start, y: 13.5, class: "calc__tick calc__legend" }, text));
    }
    return svg;
  }

  // A round number at or above value, for the top of the speed-up axis: 1, 1.5, 2, 2.5, 3, 4, 5, ...
  function niceCeiling(value) {
    const steps = [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10];
    const scale = 10 ** Math.floor(Math.log10(value));
    return scale * steps.find((step) => step * scale >= value - 1e-9);
  }

  function trimmed(value) {
    return Number(value.toFixed(2)).toString();
  }

  // The bundled pair's alpha and c as the gamma sweep measured them (calculator-presets.js),
  // one option per prompt regime and runtime, labelled with the numbers they set.
  function speculativePresetOptions(t) {
    const measured = (PRESETS.speculative && PRESETS.speculative.presets) || {};
    const options = Object.entries(measured).map(([name, p]) => [
      name,
      `${t.specRegimes[p.regime] || p.regime}${t.listSep}${t.specRuntimes[p.runtime] || p.runtime}${t.labelSep}` +
        `α = ${p.alpha.toFixed(2)}${t.listSep}c = ${p.c.toFixed(3)}`,
    ]);
    return [["custom", t.custom]].concat(options);
  }

  function mountSpeculative(root, t) {
    const alphaRange = element("input", { type: "range", name: "alpha_range", min: 0, max: 1, step: 0.01, value: 0.8, "aria-hidden": "true", tabindex: -1 });
    const form = frame(
      root,
      t.specTitle,
      t.specFormula,
      [
        field(t.specPreset, select("preset", speculativePresetOptions(t), "custom")),
        field(t.alpha, numberInput("alpha", 0.8, { min: 0, max: 1, step: 0.01 })),
        element("div", { class: "calc__field calc__field--range" }, alphaRange),
        field(t.gamma, numberInput("gamma", 4, { min: 1, max: 64, step: 1, inputmode: "numeric" })),
        field(t.cost, numberInput("c", 0.05, { min: 0, step: 0.01 })),
      ],
      [
        outputRow("tokens_per_step", t.tokensPerStep),
        outputRow("speedup", t.speedup),
        outputRow("best_gamma", t.best),
        outputRow("measured", t.specMeasured),
        element("div", { class: "calc__chart-box" }),
      ]
    );

    function update(event) {
      const name = event && event.target.name;
      const presets = (PRESETS.speculative && PRESETS.speculative.presets) || {};
      if (name === "preset" && presets[event.target.value]) {
        const preset = presets[event.target.value];
        form.elements.alpha.value = preset.alpha;
        alphaRange.value = preset.alpha;
        form.elements.gamma.value = preset.gamma;
        form.elements.c.value = preset.c;
      } else if (["alpha", "alpha_range", "gamma", "c"].includes(name)) {
        form.elements.preset.value = "custom"; // edited by hand: no longer the measured numbers
      }
      // The slider and the number box show the same alpha; whichever moved sets the other.
      if (name === "alpha_range") form.elements.alpha.value = event.target.value;
      else if (name === "alpha") alphaRange.value = event.target.value;
      const alpha = readNumber(form, "alpha");
      const gamma = readNumber(form, "gamma");
      const c = readNumber(form, "c");
      const chartBox = root.querySelector(".calc__chart-box");
      try {
        const tokens = expectedTokensPerStep(alpha, gamma);
        const speedup = expectedSpeedup(alpha, gamma, c);
        const best = bestGamma(alpha, c, 64);
        const bestSpeedup = expectedSpeedup(alpha, best, c);
        show(root, "tokens_per_step", tokens.toFixed(3), tokens);
        show(root, "speedup", `${speedup.toFixed(3)}×`, speedup);
        show(root, "best_gamma", `${best} (${bestSpeedup.toFixed(3)}×)`, best);
        const preset = presets[form.elements.preset.value];
        if (preset) {
          show(root, "measured", `${preset.measured_speedup.toFixed(3)}× ${t.specAt} ${preset.gamma}`, preset.measured_speedup);
        } else {
          show(root, "measured", t.notApplicable);
        }
        chartBox.replaceChildren(speedupChart(alpha, gamma, c, t));
        showError(root, null);
      } catch (error) {
        clearOutputs(root);
        chartBox.replaceChildren();
        showError(root, error);
      }
    }
    form.addEventListener("input", update);
    form.addEventListener("change", update);
    update();
  }

  // ---------------------------------------------------------------- HBM-traffic widget

  function mountHbmTraffic(root, t) {
    const gpus = Object.keys(PRESETS.gpu_presets);
    const table = element("table", { class: "calc__table" }, [
      element(
        "thead",
        {},
        element("tr", {}, [
          // Screen readers announce a column's header with each cell: the first one is named too.
          element("th", { scope: "col" }, element("span", { class: "a11y-visually-hidden" }, t.quantity)),
          element("th", {}, t.standard),
          element("th", {}, t.flash),
          element("th", {}, t.ideal),
        ])
      ),
      element("tbody"),
    ]);
    const rows = [
      ["tiles", t.tiles],
      ["elements", t.traffic],
      ["bytes", t.trafficBytes],
      ["compute", t.computeTime],
      ["memory", t.memoryTime],
      ["runtime", t.runtime],
      ["bound", t.bound],
      ["intensity", t.intensity],
    ];
    for (const [key, label] of rows) {
      table.tBodies[0].append(
        element("tr", {}, [
          element("th", { scope: "row" }, label),
          element("td", {}, element("output", { "data-key": `standard_${key}` }, "—")),
          element("td", {}, element("output", { "data-key": `flash_${key}` }, "—")),
          element("td", {}, element("output", { "data-key": `flash_ideal_${key}` }, "—")),
        ])
      );
    }
    const form = frame(
      root,
      t.hbmTitle,
      t.hbmNote,
      [
        field(t.seqLen, numberInput("N", 4096, { min: 1, step: 1, inputmode: "numeric" })),
        field(t.dim, numberInput("d", 64, { min: 1, step: 1, inputmode: "numeric" })),
        field(t.gpu, select("gpu", gpus.map((g) => [g, g]), gpus[0])),
        field(t.precision, select("precision", [["fp32", "fp32 (4 B)"], ["fp16", "fp16 (2 B)"]], "fp32")),
        field(t.causal, element("input", { type: "checkbox", name: "causal" })),
        field(
          t.runtimeModel,
          select("runtime_model", [["roofline", t.roofline], ["additive", t.additive]], "roofline")
        ),
      ],
      [
        outputRow("flops", t.flops), // the same arithmetic for every method: one line, not a column each
        element("div", { class: "calc__table-wrap" }, table),
        outputRow("ridge", t.ridge),
      ]
    );

    function showMethod(method, traffic, flops, elementBytes, gpu, precision, runtimeModel, tiles) {
      const bytes = traffic.total * elementBytes;
      const estimate = estimateRuntime(flops, bytes, gpu, precision, runtimeModel);
      show(root, `${method}_tiles`, tiles ? `${tiles[0]} × ${tiles[1]}` : t.notApplicable);
      show(root, `${method}_elements`, formatCompact(traffic.total), traffic.total);
      show(root, `${method}_bytes`, formatDecimal(bytes), bytes);
      show(root, "flops", formatCompact(flops, "FLOP"), flops);
      show(root, `${method}_compute`, formatSeconds(estimate.compute_s), estimate.compute_s);
      show(root, `${method}_memory`, formatSeconds(estimate.memory_s), estimate.memory_s);
      show(root, `${method}_runtime`, formatSeconds(estimate.runtime_s), estimate.runtime_s);
      show(root, `${method}_bound`, estimate.bound === "compute" ? t.computeBound : t.memoryBound, estimate.bound);
      show(root, `${method}_intensity`, estimate.arithmetic_intensity.toFixed(2), estimate.arithmetic_intensity);
      show(root, "ridge", estimate.ridge_point.toFixed(2), estimate.ridge_point);
    }

    function update() {
      const N = readNumber(form, "N");
      const d = readNumber(form, "d");
      const gpu = form.elements.gpu.value;
      const precision = form.elements.precision.value;
      const causal = form.elements.causal.checked;
      const runtimeModel = form.elements.runtime_model.value;
      const elementBytes = precision === "fp32" ? 4 : 2;
      clearOutputs(root);
      try {
        const flops = attentionFlops(N, d, causal);
        const fixed = [gpu, precision, runtimeModel];
        showMethod("standard", hbmTraffic(N, d, "standard"), flops, elementBytes, ...fixed, null);
        showMethod("flash_ideal", hbmTraffic(N, d, "flash_ideal"), flops, elementBytes, ...fixed, null);
        // Tiles as Algorithm 1 picks them from one SM's shared memory on this GPU.
        const sramBytes = PRESETS.gpu_presets[gpu].sram_kib_per_sm * 1024;
        const tiles = blocksFromSram(sramBytes, d, elementBytes);
        const traffic = hbmTraffic(N, d, "flash", { block_q: tiles[0], block_k: tiles[1], causal: causal });
        showMethod("flash", traffic, flops, elementBytes, ...fixed, tiles);
        showError(root, null);
      } catch (error) {
        showError(root, error);
      }
    }
    form.addEventListener("input", update);
    form.addEventListener("change", update);
    update();
  }

  // ---------------------------------------------------------------- mounting

  const WIDGETS = {
    "kv-cache": mountKvCache,
    "speculative-speedup": mountSpeculative,
    "hbm-traffic": mountHbmTraffic,
  };

  function mountAll() {
    const t = TEXT[language()];
    for (const root of document.querySelectorAll(".calc[data-calc]")) {
      if (root.dataset.ready) continue; // already drawn on this page
      const mount = WIDGETS[root.dataset.calc];
      if (!mount) {
        root.textContent = `Unknown calculator ${repr(root.dataset.calc)}; known: ${Object.keys(WIDGETS).join(", ")}`;
        continue;
      }
      mount(root, t);
      root.dataset.ready = "true";
    }
  }

  window.InferlabCalc = {
    bytesPerElement: bytesPerElement,
    cacheShape: cacheShape,
    kvCacheBytes: kvCacheBytes,
    expectedTokensPerStep: expectedTokensPerStep,
    expectedSpeedup: expectedSpeedup,
    bestGamma: bestGamma,
    blocksFromSram: blocksFromSram,
    hbmTraffic: hbmTraffic,
    attentionFlops: attentionFlops,
    estimateRuntime: estimateRuntime,
    errorText: errorText,
    mountAll: mountAll,
  };

  // Material's instant navigation swaps the page without reloading scripts: it announces every
  // new page on document$, so draw the widgets each time. Without Material, draw once.
  if (typeof document$ !== "undefined") {
    document$.subscribe(mountAll);
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", mountAll);
  } else {
    mountAll();
  }
})();

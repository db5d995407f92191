// kvplan's pages: every number shown is a value from /api/... (kept in data-value for checks).
// Read form attributes with getAttribute: a control named "dataset" shadows form.dataset.
(() => {
"use strict";
const $ = (s, el = document) => el.querySelector(s);
const $$ = (s, el = document) => [...el.querySelectorAll(s)];
const CLIENT = (() => {
  let id = sessionStorage.getItem("kvplanClient");
  if (!id) { id = Math.random().toString(36).slice(2, 14); sessionStorage.setItem("kvplanClient", id); }
  return id;
})();

// ---- display formatting only (values arrive finished from the API) ----
// x with d decimals as Python's f"{x:.{d}f}" (the CLI, and vLLM's logs) writes it: a value
// exactly halfway rounds to the even digit (4.125 MiB -> "4.12"), where JS's toFixed rounds
// away from zero ("4.13"); every other value rounds alike
function toFixedPy(x, d) {
  const js = x.toFixed(d), a = Math.abs(x);
  if (!Number.isFinite(x) || a >= 1e21) return js;
  const exact = a.toFixed(100), dot = exact.indexOf(".");  // a double's exact decimal digits
  if (exact.slice(dot + 1 + d) !== "5".padEnd(100 - d, "0")) return js;  // not a tie
  const kept = exact.slice(0, d ? dot + 1 + d : dot);
  if (Number(kept.slice(-1)) % 2) return js;  // odd last digit: rounding up makes it even
  return (x < 0 ? "-" : "") + kept;
}
// with thousands separators, as Python's f"{x:,.{d}f}"
const groupedPy = (x, d) => toFixedPy(x, d).replace(/^(-?\d+)/, (w) => w.replace(/\B(?=(\d{3})+(?!\d))/g, ","));
const UNITS = [["TiB", 2 ** 40], ["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 2 ** 10]];
function bytes(n) {
  if (n === null || n === undefined) return "-";
  for (const [u, s] of UNITS) if (Math.abs(n) >= s) return `${toFixedPy(n / s, 2)} ${u}`;
  return `${n} B`;
}
// the kv table's cells as the CLI writes them (report/plain/kv_text.kv_groups_cells): a layer's
// bytes per token exactly ("1,152 B"), and none as "-"
const exactBytes = (n) => (n === null || n === undefined ? "-" : `${int(n)} B`);
const bytesOrDash = (n) => (n ? bytes(n) : "-");
const int = (n) => (n === null || n === undefined ? "-" : Number(n).toLocaleString("en-US"));
// a duration as the CLI prints it (units.fmt_seconds): us, ms, s, then min and h
function secs(s) {
  if (s === null || s === undefined) return "-";
  if (s < 0) return `-${secs(-s)}`;
  // a unit while its rounded figure stays below the next unit's 1 (0.999996 s: "1.000 s")
  for (const [v, d, u, top] of [[s * 1e6, 1, "us", 1000], [s * 1e3, 2, "ms", 1000], [s, 3, "s", 60], [s / 60, 2, "min", 60]]) {
    const t = toFixedPy(v, d);
    if (Number(t) < top) return `${t} ${u}`;
  }
  return `${groupedPy(s / 3600, 2)} h`;
}
const pct = (x) => (x === null || x === undefined ? "-" : `${toFixedPy(100 * x, 1)} %`);
// tokens/s as the latency command prints them ({:,.0f}: 1,260)
const tps = (x) => (x === null || x === undefined ? "-" : groupedPy(Number(x), 0));
const tpsBand = (b) => (b === null || b === undefined ? "-" : `${tps(b[0])} - ${tps(b[1])}`);
const fixed = (d) => (x) => (x === null || x === undefined ? "-" : toFixedPy(Number(x), d));
// 4 significant figures, never JS's exponent form (14773 as toPrecision(4): "1.477e+4"):
// 10,000 or more, the whole figure with separators ("14,773"), as a person reads it
function sig(x) {
  if (x === null || x === undefined) return "-";
  const p = Number(x).toPrecision(4);
  return p.includes("e+") ? groupedPy(Number(x), 0) : p;
}
const band = (b) => (b === null || b === undefined ? "-" : `${sig(b[0])} - ${sig(b[1])}`);
// a tok/s band as `kvplan plan` prints it (report/plan/plan_band_text.band_lines: {:.0f})
const band0 = (b) => (b === null || b === undefined ? "-" : `${toFixedPy(b[0], 0)} - ${toFixedPy(b[1], 0)}`);
const secsBand = (b) => (b === null || b === undefined ? "-" : `${secs(b[0])} - ${secs(b[1])}`);
const notes = (items) => (items || []).map((n) => `<p class="note">note: ${esc(n)}</p>`).join("");
// the lines the CLI prints on stderr beside its --json ("note: ...", "warning: ..."): the API's `stderr` key
const stderr = (d) => ((d && d.stderr) || []).map((l) => `<p class="note stderr">${esc(l)}</p>`).join("");
// a text value; none as the CLI prints it, "-" (TPOT's decode bound with one output token)
const str = (x) => (x === null || x === undefined ? "-" : String(x));
const onOff = (x) => (x === null || x === undefined ? "-" : x ? "on" : "off");
const yesNo = (m) => (m === null || m === undefined ? "-" : m ? "yes" : "NO: missed");
const esc = (t) => String(t).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
function cell(key, value, fmt) {
  return `<td data-key="${esc(key)}" data-value='${esc(JSON.stringify(value))}'>${esc(fmt(value))}</td>`;
}
const get = (obj, path) => path.split(".").reduce((o, k) => (o === null || o === undefined ? o : o[k]), obj);
function table(title, rows, data, prefix = "") {
  const body = rows.map(([label, key, fmt]) => `<tr><th>${esc(label)}</th>${cell(prefix + key, get(data, key), fmt)}</tr>`).join("");
  return `<table class="kv"><caption>${esc(title)}</caption>${body}</table>`;
}
function grid(title, cols, items, prefix) {
  const head = cols.map(([h]) => `<th>${esc(h)}</th>`).join("");
  const body = items.map((it, i) => "<tr>" + cols.map(([, k, f]) => (k ? cell(`${prefix}.${i}.${k}`, get(it, k), (v) => f(v, it)) : `<td>${esc(f(null, it))}</td>`)).join("") + "</tr>").join("");
  return `<table class="grid"><caption>${esc(title)}</caption><tr>${head}</tr>${body}</table>`;
}
const lines = (items) => `<pre class="formula">${items.map(esc).join("\n")}</pre>`;

// ---- renderers: one per answer ----
const RENDER = {
  kv: (d) => `<h2>${esc(d.model)} <small>${esc(d.attention)}, ${esc(d.kv_cache_dtype)}</small></h2>` +
    lines(d.formula) + (d.tensor_parallel_size > 1 ? `<p>Per GPU at tensor parallel ${d.tensor_parallel_size}:</p>` + lines(d.formula_per_gpu) : "") +
    table("cache per token", [["bytes per token (whole model)", "bytes_per_token", int], ["bytes per token per GPU", "bytes_per_token_per_gpu", int],
      ["fixed state per request", "state_bytes_per_request", bytes], ["fixed state per request per GPU", "state_bytes_per_request_per_gpu", bytes]], d) +
    grid("layer groups on one GPU", [["group", "label", str], ["layers", "num_layers", int], ["per layer / token", "bytes_per_token_per_layer", exactBytes],
      ["group / token", "bytes_per_token", bytesOrDash], ["page (1 layer)", "page_size_bytes", bytes], ["state / request", "state_bytes_per_request", bytesOrDash]], d.groups, "groups") +
    `<p class="risk">Precision risk: ${esc(d.precision_risk)}</p>` + d.notes.map((n) => `<p class="note">note: ${esc(n)}</p>`).join(""),
  levers: (d) => grid(`levers for ${d.batch} requests x ${int(d.context_tokens)} tokens (factors multiply)`, [["lever", "lever", str], ["KV heads", "kv_heads", str],
    ["precision", "precision", str], ["TP", "tensor_parallel_size", int], ["bytes/token/GPU", "bytes_per_token_per_gpu", int],
    ["batch total / GPU", "total_bytes_per_gpu", bytes], ["x MHA", "factor_vs_baseline", fixed(4)]], d.levers, "levers"),
  request: (d) => table(`${d.model}: ${int(d.prompt_tokens)} prompt + ${int(d.output_tokens)} output tokens`, [["bytes per token", "bytes_per_token", int],
    ["prefill steps", "prefill_steps", int], ["prefill claims", "prefill_bytes", bytes], ["decode adds", "decode_bytes", bytes],
    ["final cache (logical)", "final_bytes", bytes], ["final cache (allocated blocks)", "final_allocated_bytes", bytes], ["prefill share", "prefill_share", pct]], d) +
    // the CLI's last line (report/render.timeline_lines): where vLLM's own request ends
    (d.output_tokens ? `<p class="note" id="vllm-final">vLLM samples the first output token in the prefill step and never caches the last: it ends at ` +
      `<span data-key="vllm_final_tokens" data-value="${esc(d.vllm_final_tokens)}">${esc(int(d.vllm_final_tokens))}</span> token${d.vllm_final_tokens === 1 ? "" : "s"}, ` +
      `<span data-key="vllm_final_bytes" data-value="${esc(d.vllm_final_bytes)}">${esc(bytes(d.vllm_final_bytes))} (${esc(int(d.vllm_final_bytes))} bytes)</span>, ` +
      `after ${esc(int(d.output_tokens - 1))} decode step${d.output_tokens === 2 ? "" : "s"}</p>` : ""),
  capacity: (d) => table(`${d.model} on ${d.gpu} (TP ${d.tensor_parallel_size}, PP ${d.pipeline_parallel_size}), vLLM ${d.vllm_version}`, [
    ["requested", "requested_bytes", bytes], ["- weights", "weights_bytes", bytes], ["- peak activation", "activation_bytes", bytes],
    ["- non-torch", "non_torch_bytes", bytes], [d.kv_cache_memory_given ? "KV cache (given by --kv-cache-memory)" : "= KV cache", "available_kv_bytes", bytes], ["CUDA graphs (after, not subtracted)", "cudagraph_bytes", bytes],
    ["blocks", "num_blocks", int], ["block size (tokens)", "block_size", int], ["GPU KV cache size (tokens)", "kv_cache_tokens", int],
    ["max model len (tokens)", "max_model_len", int], ["maximum concurrency", "max_concurrency", (x) => `${toFixedPy(x, 2)}x`],
    ["max num seqs", "max_num_seqs", int], ["max num batched tokens", "max_num_batched_tokens", int]], d) +
    (d.block_size_log ? `<p class="note" id="block-size-log">vLLM: ${esc(d.block_size_log)}</p>` : "") +
    // the CLI's line under "GPU KV cache size" (report/views/capacity.token_lines): hybrid and sliding-window models
    (d.kv_cache_tokens_newer_vllm !== d.kv_cache_tokens ? `<p class="note" id="kv-tokens-newer">later vLLM, v0.24+, prints GPU KV cache size: ` +
      `<span data-key="kv_cache_tokens_newer_vllm" data-value="${esc(d.kv_cache_tokens_newer_vllm)}">${esc(int(d.kv_cache_tokens_newer_vllm))}</span> tokens (max concurrency x max_model_len)</p>` : "") +
    (d.parallel ? table(`data / expert parallel: ${d.parallel.data_parallel_size} DP ranks x ${d.parallel.gpus_per_rank} GPUs`, [["total GPUs", "total_gpus", int],
      ["expert parallel", "expert_parallel", onOff], ["EP size", "expert_parallel_size", int], ["routed experts per GPU", "local_experts_per_gpu", int],
      ["expert weights per GPU", "expert_weights_bytes_per_gpu", bytes], ["other weights per GPU", "non_expert_weights_bytes_per_gpu", bytes],
      ["KV cache per DP rank", "kv_cache_bytes_per_rank", bytes], ["KV cache tokens per DP rank", "kv_cache_tokens_per_rank", int],
      ["KV cache tokens (fleet)", "kv_cache_tokens_fleet", int], ["maximum concurrency (fleet)", "max_concurrency_fleet", (x) => `${toFixedPy(x, 2)}x`]], d.parallel, "parallel.") : ""),
  latency: (d) => table(`batch ${d.batch}, prompt ${int(d.prompt_tokens)}, output ${int(d.output_tokens)}`, [["TTFT", "ttft_s", secs], ["TTFT band (10-90%)", "ttft_s_band", secsBand],
    ["TPOT", "tpot_s", secs], ["TPOT band (10-90%)", "tpot_s_band", secsBand], ["end-to-end", "e2e_s", secs], ["end-to-end band (10-90%)", "e2e_s_band", secsBand],
    ["output throughput (tok/s)", "output_throughput_tok_s", tps], ["output throughput band (10-90%)", "output_throughput_tok_s_band", tpsBand],
    ["prefill bound", "prefill_bound", str], ["decode bound", "decode_bound", str]], d) +
    (d.band_basis ? `<p class="note" id="band-basis">band: calibration residuals of ${esc(d.band_basis)}</p>` : "") + notes(d.calibration_notes) +
    why("prefill", d.phases.prefill) + (d.phases.decode ? why("decode", d.phases.decode) : "") +
    (d.parallel ? table("data / expert parallel", [["DP ranks", "data_parallel_size", int], ["requests per DP rank (fullest)", "batch_per_rank", int],
      ["expert parallel", "enable_expert_parallel", onOff], ["token exchange", "all2all_backend", str], ["expert imbalance", "expert_imbalance", fixed(3)]], d.parallel, "parallel.") : ""),
  sweep: (d) => `<p>decode turns compute-bound at <b data-key="decode_compute_bound_from" data-value='${esc(JSON.stringify(d.decode_compute_bound_from))}'>${esc(d.decode_compute_bound_from ?? "never")}</b>;
    the KV cache stops fitting at <b data-key="kv_no_longer_fits_at" data-value='${esc(JSON.stringify(d.kv_no_longer_fits_at))}'>${esc(d.kv_no_longer_fits_at ?? "never")}</b></p>` +
    grid(`sweep of ${d.lever}`, [[d.lever, "value", str], ["TTFT", "ttft_s", secs], ["TPOT", "tpot_s", secs], ["tok/s", "output_throughput_tok_s", tps],
      ["decode", "decode_bound", str], ["KV fits", "fits", (f) => (f ? "yes" : "NO")], ["max batch", "max_batch", int], ["note", "", sweepNote(d)]], d.rows, "rows"),
  plan: (d) => (d.warnings || []).map((w) => `<p class="note warning">warning: ${esc(w)}</p>`).join("") + planCard(d) + judged(d) + (d.joint ? jointCard(d.joint) : "") +
    grid("candidates (stage reached, and why it stopped there)", [["id", "id", str], ["GPU", "gpu", str], ["TP", "tensor_parallel_size", int],
      ["DP", "data_parallel_size", int], ["EP", "enable_expert_parallel", (x) => (x ? "on" : "off")],
      ["KV dtype", "kv_cache_dtype", str], ["weights", "quantization", (q) => q || "-"], ["max seqs", "max_num_seqs", int],
      ["chunk", "max_num_batched_tokens", int], ["prefix cache", "enable_prefix_caching", onOff], ["stage", "stage", str], ["replicas", "replicas", int],
      ["$ / hour", "cost.usd_per_hour", fixed(2)], ["reason", "reason", str]], d.candidates, "candidates") +
    grid(`levers: one change to the best configuration (${perReplica(d)[2]}; the first row is the winner)`, [["change", "change", str], [perReplica(d)[0], "capacity_rps", fixed(2)],
      [perReplica(d)[1], "delta_capacity_pct", fixed(1)], ["replicas", "replicas", int], ["$ / hour", "usd_per_hour", fixed(2)],
      ["$ / hour change", "delta_usd_per_hour", fixed(2)], [`${leverKey(d.levers)} (ms)`, "binding_p99_ms", fixed(2)], ["band (10-90%, ms)", "binding_p99_ms_band", band],
      ["note", "note", str]], d.levers, "levers"),
  simulate: (d) => `<div class="row">` + table(`${d.model_id} on ${d.gpu}${d.disagg ? ` (${d.disagg} over ${d.kv_link})` : ""}: ${d.dataset}, ${d.num_prompts} requests`, simRows(d), d) + simStats(d) + `</div>` +
    (d.disagg ? disaggTables(d) : "") +
    (d.dp_ranks ? grid(`DP ${d.data_parallel_size} ranks in lockstep, ${d.dp_lockstep_steps} steps`, [["rank", "rank", int], ["requests", "requests", int],
      ["KV blocks (vLLM num_gpu_blocks)", "num_gpu_blocks", int], ["peak KV blocks", "peak_kv_blocks", int], ["peak KV usage", "peak_kv_usage", pct], ["dummy steps", "dummy_steps", int]], d.dp_ranks, "dp_ranks") : "") +
    (d.rejected_by_reason || []).map((g) => `<p class="note rejected">${esc(g.line)}</p>`).join("") + simBand(d) + notes([...new Set(d.calibration_notes || [])]) +
    (d.overload && d.overload.overloaded ? `<p class="banner overload" id="overload" role="alert">${esc(d.overload.message)}</p>` : ""),
};
// the sweep table's note, as `kvplan latency --sweep` writes it (cli/cmd_latency._sweep_cells)
const sweepNote = (d) => (_v, r) => (r.weights_fit === false ? "weights do not fit: no latency"
  : [r.value === d.decode_compute_bound_from ? "decode turns compute-bound" : "",
    r.value === d.kv_no_longer_fits_at ? `KV cache no longer fits (max batch ${r.max_batch})` : ""].filter(Boolean).join("; "));
// capacity_rps_per_replica and the levers' capacity_rps are report/plan's load_per_replica: with a
// target rate (inputs.mode "target") that rate / replicas, the load each replica serves, not a
// capacity; without one, one replica's searched capacity (the CLI heads both "req/s per replica")
const perReplica = (d) => (d.inputs && d.inputs.mode === "target"
  ? ["load per replica (req/s: target rate / replicas)", "load per replica change %",
    "every row searched on the router's shares and verified on the whole fleet, as the winner was"]
  : ["capacity of one replica (req/s)", "capacity change %", "every row a capacity search on one replica"]);
// the levers' binding column is one SLO term (the winner's binding_key, e.g. p99_tpot_ms), as the CLI heads it
const leverKey = (levers) => ((levers || []).find((x) => x.binding_key) || { binding_key: "binding term" }).binding_key;
function planCard(d) {
  const s = d.summary;
  if (s.status !== "feasible") return infeasible(s);
  return table(`best: ${s.best}`, [["status", "status", str], ["$ / hour", "usd_per_hour", fixed(2)],
    ["$ / million output tokens", "usd_per_million_output_tokens", fixed(3)], ["replicas", "replicas", int], ["GPUs", "gpus", int],
    [perReplica(d)[0], "capacity_rps_per_replica", fixed(2)], ["binds first", "binding", str], ["why", "one_line_why", str],
    [`${outputWhat(s)} (tok/s)`, "output_tokens_per_s", fixed(0)], [`${outputWhat(s)} band (10-90%, tok/s)`, "output_tokens_per_s_band", band0],
    ["output throughput band basis (calibration residuals)", "output_tokens_per_s_band_basis", str],
    ["output throughput is", "output_tokens_per_s_definition", str],
    ["$ / million output tokens priced at (tok/s)", "priced_output_tokens_per_s", fixed(0)],
    ["that rate is", "priced_output_tokens_per_s_definition", str],
    ["SLO margin", "slo_margin", str], ["SLO band basis (each term's in the table below)", "band_basis", str]], s, "summary.") +
    grid("SLO terms with their error band (10-90%): do they still hold at the band's pessimistic edge?", [["term", "key", str], ["unit", "", (_v, t) => termUnit(t.key)], ["limit", "limit", sig],
      ["predicted", "value", sig], ["band (10-90%)", "band", band], ["at the edge", "edge", sig], ["still met at the edge", "met_at_edge", yesNo], ["calibration group", "band_basis", str]],
      s.slo_at_band_edge || [], "summary.slo_at_band_edge") +
    (s.calibration_notes || []).map((n) => `<p class="note">note: ${esc(n)}</p>`).join("") +
    (s.without_margin ? `<p class="note">without --slo-margin band the winner would be <b>${esc(s.without_margin.best)}</b> (${esc(s.without_margin.gpu)} TP${esc(s.without_margin.tensor_parallel_size)}), ${esc(fixed(2)(s.without_margin.usd_per_hour))} $/h</p>` : "") +
    `<p><b>vllm serve</b> <button type="button" class="copy" data-copy="serve">copy</button></p><pre id="serve" class="formula">${esc(s.vllm_serve)}</pre>`;
}
// an SLO term's unit, from its key as the CLI names it: p99_ttft_ms in ms, goodput_share a share of requests
const termUnit = (key) => (String(key).endsWith("_ms") ? "ms" : key === "goodput_share" ? "share of requests" : "-");
// the CLI's name for the output figure (report/plan/plan_band_text.py): a run's throughput, or
// in capacity mode one replica's sustained rate (bands.OUTPUT_DEFINITIONS["sustained"] starts so)
const outputWhat = (s) => ((s.output_tokens_per_s_definition || "").startsWith("capacity (req/s) x") ? "sustained output rate of one replica" : "output throughput");
function judged(d) {
  // the CLI's "judged on the N after the first M by arrival" (report/plan/plan_text.py judged_text)
  const s = d.summary, w = (d.candidates || []).find((c) => c.id === s.best), f = w && w.fleet;
  if (!f || s.judged_requests === null || s.judged_requests === undefined) return "";
  const total = f.requests_per_replica.reduce((a, b) => a + b, 0), skipped = total - s.judged_requests;
  const all = f.achieved_all_requests || {};
  if (skipped <= 0 || !Object.keys(all).length) return `<p class="note" id="judged">fleet verified by simulation, every one of its ${int(total)} requests judged</p>`;
  // plain cells: derived from the winner's fleet, not one API key each (no data-key)
  const rows = Object.keys(f.achieved).map((k) => `<tr><th>${esc(k)}</th><td>${esc(sig(f.achieved[k]))}</td><td>${esc(sig(all[k]))}</td></tr>`).join("");
  return `<table class="grid" id="judged"><caption>${esc(`judged on the ${int(s.judged_requests)} after the first ${int(skipped)} by arrival (warm-up, --warmup-fraction ${d.inputs.slo.warmup_fraction}); over all ${int(total)}, as vllm bench serve reports them`)}</caption>` +
    `<tr><th>term</th><th>judged ${int(s.judged_requests)}</th><th>all ${int(total)}</th></tr>${rows}</table>`;
}
function jointCard(j) {
  // `kvplan plan --disagg --json`'s joint key (docs/disaggregation.md, Planner)
  const dis = j.best_disaggregated;
  return `<div id="joint-answer"><h2>One space: aggregated and disaggregated</h2><p id="joint-versus">${esc(j.versus)}</p>` +
    table("joint winner", [["kind", "winner_kind", str], ["id", "winner.id", str], ["$ / hour", "winner.usd_per_hour", fixed(2)], ["GPUs", "winner.gpus", int]], j, "joint.") +
    (dis ? table(`best disaggregated: ${dis.fleet}`, [["fleet", "fleet", str], ["KV link", "kv_link", str], ["$ / hour", "usd_per_hour", fixed(2)],
      ["GPUs", "gpus", int], ["binds first", "binding.primary", str], ["why", "binding.why", str]], dis, "joint.best_disaggregated.") +
      Object.entries(dis.serve).map(([role, line]) => `<p><b>${esc(role)}</b></p><pre class="formula">${esc(line)}</pre>`).join("") : "") +
    `<p class="note">candidates: ${esc(Object.entries(j.stages).map(([s, n]) => `${n} ${s}`).join(", "))}; pricing: ${esc(j.price_note)}</p></div>`;
}
// a missed term's achieved value in its unit: ms, or the goodput share in % (the CLI's "goodput 97.0 %")
const achievedText = (x, c) => (x === null || x === undefined ? "-" : c.misses === "goodput_share" ? `${toFixedPy(100 * x, 1)} %` : `${sig(x)} ms`);
function missText(c) {
  // the CLI's words (report/plan/plan_text.py): "misses KEY by N %"
  return c.misses === "goodput_share" ? `misses goodput by ${toFixedPy(Math.abs(c.margin), 3)}` : `misses ${c.misses} by ${toFixedPy(100 * Math.abs(c.margin), 0)} %`;
}
function infeasible(s) {
  return `<p class="banner infeasible" id="infeasible" role="alert"><b>nothing feasible:</b> ${esc(s.why)}</p>` +
    grid("closest candidates (nearest miss first)", [["id", "id", str], ["GPU", "gpu", str], ["TP", "tensor_parallel_size", int], ["KV dtype", "kv_cache_dtype", str],
      ["chunk", "max_num_batched_tokens", int], ["max seqs", "max_num_seqs", int], ["stage", "stage", str], ["replicas", "replicas", int],
      ["miss", "", (_v, c) => missText(c)], ["achieved", "achieved", achievedText], ["reason", "reason", str]], s.closest || [], "summary.closest");
}
function why(phase, c) {
  const side = c.arithmetic_intensity_flop_per_byte >= c.ridge_point_flop_per_byte ? ">" : "<";
  return `<p class="why">${phase}: ${int(c.tokens)} tokens over ${int(c.steps)} step(s), ${int(Math.round(c.arithmetic_intensity_flop_per_byte))} FLOP/byte ${side} ridge ${int(Math.round(c.ridge_point_flop_per_byte))} FLOP/byte → <b>${c.bound}-bound</b></p>`;
}
function simRows(d) {
  // the CLI's rows (report/views/metrics.py metrics_table), vllm bench serve's client settings only when set
  const rows = [["successful requests", "completed", int], ["failed (rejected)", "failed", int],
    ...(d.max_concurrency !== null && d.max_concurrency !== undefined ? [["maximum request concurrency", "max_concurrency", int]] : []),
    ...(typeof d.request_rate === "number" ? [["request rate configured (req/s)", "request_rate", fixed(2)]] : []),
    ["duration (s)", "duration", fixed(2)], ["total input tokens", "total_input_tokens", int], ["total generated tokens", "total_output_tokens", int],
    ["request throughput (req/s)", "request_throughput", fixed(2)]];
  if (d.request_goodput !== null) rows.push(["request goodput (req/s)", "request_goodput", fixed(2)]);
  rows.push(["output token throughput (tok/s)", "output_throughput", fixed(2)], ["peak output token throughput (tok/s)", "max_output_tokens_per_s", fixed(2)],
    ["peak concurrent requests", "max_concurrent_requests", int], ["total token throughput (tok/s)", "total_token_throughput", fixed(2)]);
  // a disaggregated fleet has no one server's blocks or steps (its pools' are in their table)
  // DP ranks: num_blocks sums the ranks' pools (vLLM logs num_gpu_blocks per rank, in the ranks' table)
  const ranks = d.dp_ranks && d.dp_ranks.length ? ` (all ${d.dp_ranks.length} DP ranks)` : "";
  return rows.concat([["preemptions", "preemptions", int], ["prefix cache hit rate", "prefix_cache_hit_rate", pct], [`peak KV blocks${ranks}`, "peak_kv_blocks", int],
    [ranks ? `KV blocks${ranks}: the sum of each rank's vLLM num_gpu_blocks` : "KV blocks (vLLM num_gpu_blocks)", "num_blocks", int], [`peak KV usage${ranks}`, "peak_kv_usage", pct], ["KV claimed by prefill", "prefill_kv_share", fixed0pct],
    ["KV claimed by decode", "decode_kv_share", fixed0pct], ["engine steps", "num_steps", int]])
    .filter(([, key]) => !d.disagg || key in d);
}
const fixed0pct = (x) => (x === null || x === undefined ? "-" : `${toFixedPy(100 * x, 0)} %`);
// a band in ms as the CLI writes it (report/durations.fmt_ms_range): "83.18-142.88 ms", or both ends' units
function msRange(b) {
  const [lo, hi] = [secs(b[0] / 1e3), secs(b[1] / 1e3)], [lv, lu] = lo.split(" "), [hv, hu] = hi.split(" ");
  return lu === hu ? `${lv}-${hv} ${hu}` : `${lo} - ${hi}`;
}
function simBand(d) {
  // the CLI's line under the table (report/views/metrics.py _band_lines): mean TTFT, mean TPOT, output throughput
  const parts = [["mean_ttft_ms", "TTFT", msRange], ["mean_tpot_ms", "TPOT", msRange],
    ["output_throughput", "output throughput", (b) => `${groupedPy(b[0], 2)}-${groupedPy(b[1], 2)} tok/s`]]
    .filter(([k]) => d[`${k}_band`]).map(([k, label, f]) => `${label} <span data-key="${k}_band" data-value='${esc(JSON.stringify(d[`${k}_band`]))}'>${esc(f(d[`${k}_band`]))}</span>`);
  return parts.length ? `<p class="note" id="sim-band">band (10-90%, ${esc(d.band_basis)}): ${parts.join("; ")}</p>` : "";
}
function disaggTables(d) {
  // `kvplan simulate --disagg` keys (docs/disaggregation.md, "Metrics added to --json")
  const p = (key) => Object.keys(d).filter((k) => k.startsWith("p") && k.endsWith(`_${key}_ms`))[0];
  const rows = ["kv_transfer", "kv_transfer_queue", "decode_admission_wait", "decode_block_wait", "prefill_kv_hold"]
    .flatMap((k) => [[`mean ${k.replaceAll("_", " ")} (ms)`, `mean_${k}_ms`, fixed(3)], [`${(p(k) || "").split("_")[0]} ${k.replaceAll("_", " ")} (ms)`, p(k), fixed(3)]])
    .filter(([, key]) => key && key in d);
  return `<div class="row" id="disagg">` + table(`fleet ${d.disagg}: prefill ${d.prefill.instances} x ${d.prefill.gpu} TP${d.prefill.tensor_parallel_size}, decode ${d.decode.instances} x ${d.decode.gpu} TP${d.decode.tensor_parallel_size}`, [
    ["KV link", "kv_link", str], ["link bytes/s per GPU", "kv_link_bytes_per_s_per_gpu", sig], ["link latency", "kv_link_latency_s", secs],
    ["KV transfers", "kv_transfers", int], ["KV bytes over the link", "kv_link_bytes", bytes], ["decode block waits", "decode_block_waits", int],
    ["prefill peak KV usage", "prefill_peak_kv_usage", pct], ["decode peak KV usage", "decode_peak_kv_usage", pct]], d) +
    table("KV transfer", rows, d) + `</div>`;
}
function simStats(d) {
  // one row per metric, one column per statistic the API returned (mean, median, pNN)
  const metrics = ["ttft", "tpot", "itl", "e2el"].filter((m) => `mean_${m}_ms` in d);
  const stats = Object.keys(d).filter((k) => k.endsWith(`_${metrics[0]}_ms`) && !k.startsWith("std")).map((k) => k.slice(0, -`_${metrics[0]}_ms`.length));
  const head = stats.map((s) => `<th>${esc(s)} (ms)</th>`).join("");
  const body = metrics.map((m) => `<tr><th>${m.toUpperCase()}</th>` + stats.map((s) => cell(`${s}_${m}_ms`, d[`${s}_${m}_ms`], fixed(2))).join("") + "</tr>").join("");
  return `<table class="grid"><caption>latency</caption><tr><th></th>${head}</tr>${body}</table>`;
}
// ---- forms -> API ----
function fields(form, use) {
  const out = {};
  for (const el of $$("input[name], select[name]", form)) {
    if (el.type === "file" || el.value === "") continue;
    const uses = (el.dataset.use || "").split(" ").filter(Boolean);
    if (use && uses.length && !uses.includes(use)) continue;
    out[el.name] = el.type === "number" ? Number(el.value) : el.value;
  }
  return out;
}
const query = (obj) => new URLSearchParams(Object.entries(obj).map(([k, v]) => [k, String(v)])).toString();
// an upload's "NAME: kind, N layers" (data-ok) stays until the model field is edited by hand
function clearErrors() { $$(".err:not([data-ok])").forEach((e) => { e.textContent = ""; }); $$(".field.bad").forEach((e) => e.classList.remove("bad")); }
function forgetUpload() { const el = $(".err[data-for=config]"); if (el) { delete el.dataset.ok; el.textContent = ""; } }
function showError(body, fallback) {
  const where = body.field && $(`.err[data-for="${body.field}"]`);
  const target = where || $(".err[data-for=model]");
  target.textContent = body.detail || "invalid input";
  target.closest(".field").classList.add("bad");
  if (fallback) fallback.innerHTML = "";
}
async function getJson(url) {
  const r = await fetch(url, { headers: { "x-kvplan-client": CLIENT } });
  const body = await r.json().catch(() => ({ detail: `HTTP ${r.status}` }));
  return { ok: r.ok, body };
}
async function draw(id, spec) {
  const el = $(`#chart-${id}`);
  if (spec.data && Array.isArray(spec.data.values) && spec.data.values.length === 0) {
    el.innerHTML = `<p class="note">${esc(id)} chart: nothing to draw (no point has both a cost and a binding SLO value)</p>`;
    return;
  }
  const t0 = performance.now();
  await vegaEmbed(el, spec, { actions: false, renderer: "svg" });
  el.dataset.renderMs = (performance.now() - t0).toFixed(0);
}
// data-optional NAME: the answer and chart NAME are asked only while field NAME holds a value
// (the Latency page's --sweep emptied: no sweep, as `kvplan latency` without --sweep)
const emptied = (form) => (form.getAttribute("data-optional") || "").split(" ").filter(Boolean)
  .filter((n) => { const el = $(`[name="${n}"]`, form); return el && el.value === ""; });
let seq = 0;
async function refresh(form) {
  const mine = ++seq;
  remember(form);
  const skipped = emptied(form);
  const asked = (attr) => (form.getAttribute(attr) || "").split(" ").filter(Boolean).map((a) => a.split(":")).filter(([id]) => !skipped.includes(id));
  const answers = asked("data-answers"), charts = asked("data-charts");
  const got = await Promise.all([...answers, ...charts].map(([id, url]) => getJson(`${url}?${query(fields(form, id))}`)));
  if (mine !== seq) return;
  clearErrors();
  for (const id of skipped) { const el = $(`#${id}`); el.innerHTML = ""; delete el.dataset.json; $(`#chart-${id}`).innerHTML = ""; }
  document.body.dataset.state = "ready";
  got.slice(0, answers.length).forEach((g, i) => {
    const el = $(`#${answers[i][0]}`);
    if (g.ok) { el.innerHTML = RENDER[answers[i][0]](g.body) + stderr(g.body); el.dataset.json = JSON.stringify(g.body); } else showError(g.body, el);
  });
  await Promise.all(got.slice(answers.length).map((g, i) => (g.ok ? draw(charts[i][0], g.body) : ($(`#chart-${charts[i][0]}`).innerHTML = ""))));
  document.body.dataset.state = got.every((g) => g.ok) ? "done" : "error";
}
async function upload(form, input) {
  const data = new FormData();
  data.append("file", input.files[0]);
  const r = await fetch("/api/upload", { method: "POST", body: data });
  const body = await r.json().catch(() => ({ detail: `HTTP ${r.status}`, field: "config" }));
  forgetUpload(); clearErrors();
  if (!r.ok) { showError({ ...body, field: "config" }); return; }
  $("input[name=model]", form).value = body.model;
  Object.assign($(".err[data-for=config]"), { textContent: `${body.name}: ${body.attention}, ${body.layers} layers` }).dataset.ok = "1";
  form.dispatchEvent(new Event("change"));
}

// ---- simulate: a job with progress and cancel ----
let job = null;
let orphan = false;  // job: this client's earlier job (a 429), not one this page polls
let polls = 0;
// A small simulation is done in tens of ms: ask soon, then back off so a long job is
// polled about once a second (50, 100, 200, 400, 800, 800 ... ms after each answer).
const pollDelay = (n) => Math.min(50 * 2 ** n, 800);
// a new run asks a new question: the last run's answer and charts go (a disaggregated run
// draws no queue chart, a refused one nothing), so nothing shown belongs to another question
function clearResult(form) {
  const el = $(`#${form.getAttribute("data-render") || "simulate"}`);
  el.innerHTML = ""; delete el.dataset.json;
  $$(".chart").forEach((c) => { c.innerHTML = ""; });
}
async function runJob(form) {
  clearErrors();
  remember(form);
  clearResult(form);
  document.body.dataset.state = "starting";
  const r = await fetch(form.getAttribute("data-job"), { method: "POST", headers: { "content-type": "application/json", "x-kvplan-client": CLIENT }, body: JSON.stringify(fields(form)) });
  const body = await r.json();
  if (!r.ok) {
    showError(body);
    document.body.dataset.state = "error";
    // this page's own job is in the way (started before a reload, or on the other job page):
    // Cancel stops it (DELETE takes any job id), then Run starts this one
    if (r.status === 429 && body.job) { job = body.job; orphan = true; $("#cancel").disabled = false; }
    return;
  }
  job = body.job;
  $("#cancel").disabled = false; $("#run").disabled = true;
  document.body.dataset.state = "running";
  polls = 0;
  setTimeout(() => poll(form), pollDelay(polls++));
}
async function poll(form) {
  const { body } = await getJson(`${form.getAttribute("data-job")}/${job}`);
  $("#progress").max = Math.max(body.total, 1); $("#progress").value = body.done;
  $("#progress-text").textContent = body.state === "queued" ? `queued: ${body.ahead} ahead`
    : `${body.stage ? body.stage + ": " : ""}${body.total ? `${body.done} / ${body.total} · ` : ""}${body.state}`;
  if (body.state === "running" || body.state === "queued") { setTimeout(() => poll(form), pollDelay(polls++)); return; }
  $("#cancel").disabled = true; $("#run").disabled = false;
  if (body.state !== "done") {
    // a plan counts candidates, a simulation requests; nothing counted yet: the line alone
    const unit = form.getAttribute("data-render") === "plan" ? "candidates" : "requests";
    $("#progress-text").textContent = body.error + (body.total ? ` (after ${body.done} / ${body.total} ${unit})` : "");
    if (body.field && $(`.err[data-for="${body.field}"]`)) showError({ detail: body.error, field: body.field });
    document.body.dataset.state = body.state;
    return;
  }
  const which = form.getAttribute("data-render") || "simulate";
  const el = $(`#${which}`);
  el.innerHTML = RENDER[which](body.result) + stderr(body.result); el.dataset.json = JSON.stringify(body.result);
  const charts = await getJson(`${form.getAttribute("data-job")}/${job}/charts`);
  await Promise.all(Object.entries(charts.body).map(([id, spec]) => draw(id, spec)));
  document.body.dataset.state = "done";
}

// ---- the URL holds the form: a reload, back/forward or a shared link shows the same question ----
function initial(el) {
  if (el.tagName !== "SELECT") return el.defaultValue;
  const o = [...el.options].find((x) => x.defaultSelected) || el.options[0];
  return o ? o.value : "";
}
function remember(form) {
  // each field that differs from the page's default, an emptied one as NAME= (replaceState: no extra history entries)
  const changed = $$("input[name], select[name]", form).filter((el) => el.type !== "file" && el.value !== initial(el));
  const q = new URLSearchParams(changed.map((el) => [el.name, el.value])).toString();
  const url = location.pathname + (q ? `?${q}` : "");
  if (url !== location.pathname + location.search) history.replaceState(history.state, "", url);
}
function restore(form) {
  for (const [name, value] of new URLSearchParams(location.search)) {
    const el = $$("input[name], select[name]", form).find((e) => e.name === name && e.type !== "file");
    if (!el) continue;
    // a value the list lacks (a GPU alias such as A100, fp8_e4m3): kept as one more choice, for
    // the API to read or refuse beside the field, never silently replaced by the default
    if (el.tagName === "SELECT" && ![...el.options].some((o) => o.value === value)) el.add(new Option(value, value));
    el.value = value;
    for (const range of $$("input[data-mirror]", form)) if (range.dataset.mirror === name) range.value = value;
  }
}

function wire(form) {
  restore(form);
  let timer = null;
  const later = () => { clearTimeout(timer); timer = setTimeout(() => refresh(form), 250); };
  for (const range of $$("input[data-mirror]", form)) {
    const twin = $(`input[name=${range.dataset.mirror}]`, form);
    range.addEventListener("input", () => { twin.value = range.value; later(); });
    twin.addEventListener("input", () => { range.value = twin.value; });
  }
  const file = $("input[type=file]", form);
  if (file) file.addEventListener("change", () => upload(form, file));
  if (file) $("input[name=model]", form).addEventListener("input", forgetUpload);
  if (form.getAttribute("data-job")) {
    // the URL keeps the form as it changes, so a reload before Run keeps the user's inputs
    for (const ev of ["input", "change"]) form.addEventListener(ev, (e) => { if (e.target.type !== "file") remember(form); });
    form.addEventListener("submit", (e) => { e.preventDefault(); runJob(form); });
    $("#cancel").addEventListener("click", async () => {
      await fetch(`${form.getAttribute("data-job")}/${job}`, { method: "DELETE" });
      if (!orphan) return;  // this page's run: its poll reports the end
      orphan = false; $("#cancel").disabled = true; clearErrors();
      $("#progress-text").textContent = `job ${job} cancelled: Run again`;
    });
    return;
  }
  form.addEventListener("submit", (e) => { e.preventDefault(); refresh(form); });
  form.addEventListener("input", (e) => { if (e.target.type !== "file") later(); });
  form.addEventListener("change", (e) => { if (e.target.type !== "file") later(); });
  refresh(form);
}
document.addEventListener("click", (e) => {
  const src = e.target.dataset && e.target.dataset.copy;
  if (src && navigator.clipboard) navigator.clipboard.writeText($(`#${src}`).textContent).then(() => { e.target.textContent = "copied"; });
});
document.addEventListener("DOMContentLoaded", () => { const f = $("#form"); if (f) wire(f); });
})();

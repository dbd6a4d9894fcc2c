// The page's soak (scripts/soak.sh --page; not a CI step): the train view at its defaults for
// MINUTES minutes in headless Chromium on WebGPU (SwiftShader), and every minute the tab's JS
// heap (after a garbage collection), the wasm heap and the buffer pool's bytes (the app's
// `memory` announcement, a line a minute). Memory settles after SETTLE_MINUTES, the first live
// MNIST-FID and the first checkpoint (kept in the page's memory: the wasm heap's high-water mark
// rises with them, and a wasm heap never shrinks); after
// that each may grow by at most 5%, and the pool must end at its plateau. Figures:
// SHOTS/page-soak.json.
// Environment: SITE (default web/dist), SHOTS (default web/test/out), CHROMIUM, SOAK_MINUTES
// (default 20), SETTLE_MINUTES (default 5).
import { chromium } from "playwright-core";
import fs from "node:fs";
import path from "node:path";
import { serve } from "../serve.mjs";

const SITE = process.env.SITE ?? "web/dist";
const SHOTS = process.env.SHOTS ?? "web/test/out";
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const MINUTES = Number(process.env.SOAK_MINUTES ?? 20);
const SETTLE = Number(process.env.SETTLE_MINUTES ?? 5);
const GROWTH_LIMIT = 0.05;
const CHECKPOINT_EVERY = 100;
const ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--no-first-run",
  "--disable-sync", "--disable-dev-shm-usage", "--enable-unsafe-webgpu", "--enable-features=Vulkan",
  "--use-vulkan=swiftshader", "--use-angle=swiftshader", "--enable-unsafe-swiftshader"];

fs.mkdirSync(SHOTS, { recursive: true });
const started = Date.now();
const log = (...a) => console.log(`page soak [${((Date.now() - started) / 1000).toFixed(0)} s]:`, ...a);
const mb = (b) => (b / 1e6).toFixed(1);

const server = await serve(SITE);
const site = `http://127.0.0.1:${server.address().port}/`;
const browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
const lines = [];
let failures = [];
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  page.on("pageerror", (e) => log("page error:", String(e)));
  page.on("crash", () => log("the page crashed"));
  const cdp = await page.context().newCDPSession(page);
  await page.goto(site + "?" + new URLSearchParams({ view: "train", autorun: "1", "max-minutes": `${MINUTES}`,
    steps: "100000000", "checkpoint-every": `${CHECKPOINT_EVERY}` }));
  const opened = Date.now();
  for (let minute = 1; (Date.now() - opened) / 60_000 < MINUTES + 1; minute++) {
    await page.waitForTimeout(Math.max(0, opened + minute * 60_000 - Date.now()));
    const state = await page.evaluate(() => ({
      page: document.body.dataset.wgdiff,
      memory: JSON.parse(document.body.getAttribute("data-wgdiff-memory") ?? "null"),
      train: JSON.parse(document.body.getAttribute("data-wgdiff-train") ?? "null"),
    }));
    if (state.page === "failed") throw new Error("the page failed");
    if (state.train?.status === "failed") throw new Error(`training failed: ${state.train.error}`);
    await cdp.send("HeapProfiler.collectGarbage");
    const heap = await cdp.send("Runtime.getHeapUsage");
    const line = { minute, js_heap_bytes: heap.usedSize, wasm_heap_bytes: state.memory?.rss_bytes ?? null,
      pool_held_bytes: state.memory ? state.memory.pool_live_bytes + state.memory.pool_pooled_bytes : null,
      steps: state.memory?.steps ?? 0, fid_scores: state.train?.fid?.length ?? 0,
      frame_p95_ms: state.memory?.frame_p95_ms ?? null };
    lines.push(line);
    log(`minute ${minute}: JS heap ${mb(line.js_heap_bytes)} MB, wasm heap ${mb(line.wasm_heap_bytes ?? 0)} MB, pool ${mb(line.pool_held_bytes ?? 0)} MB, ${line.steps} steps, ${line.fid_scores} MNIST-FID scores, frame p95 ${line.frame_p95_ms?.toFixed(0)} ms`);
    if (state.train && state.train.status !== "running") break;
  }
  await page.screenshot({ path: path.join(SHOTS, "web-soak.png") });
} finally {
  await browser.close();
  server.close();
}

const settled = lines.findIndex((l) => l.minute >= SETTLE && l.wasm_heap_bytes !== null && l.fid_scores > 0
  && l.steps >= CHECKPOINT_EVERY);
if (settled < 0 || settled === lines.length - 1)
  failures.push(`no readings after ${SETTLE} minutes, the first MNIST-FID and the first checkpoint (run longer: SOAK_MINUTES)`);
const verdict = {};
for (const key of ["js_heap_bytes", "wasm_heap_bytes", "pool_held_bytes"]) {
  if (settled < 0) break;
  const base = lines[settled][key];
  const max = Math.max(...lines.slice(settled).map((l) => l[key]));
  const end = lines[lines.length - 1][key];
  verdict[key] = { settled: base, max, end, growth: max / base - 1 };
  if (key === "pool_held_bytes" ? end > base * (1 + GROWTH_LIMIT) : max / base - 1 > GROWTH_LIMIT)
    failures.push(`${key}: ${mb(base)} MB at minute ${lines[settled].minute}, up to ${mb(max)} MB, ${mb(end)} MB at the end`);
}
if (settled >= 0) {
  const scores = lines[lines.length - 1].fid_scores - lines[settled].fid_scores;
  log(`settled at minute ${lines[settled].minute}; ${scores} more MNIST-FID scores and ${lines[lines.length - 1].steps - lines[settled].steps} steps after it`);
}
fs.writeFileSync(path.join(SHOTS, "page-soak.json"), JSON.stringify({ minutes: MINUTES, settle: SETTLE, lines, verdict, failures }, null, 2) + "\n");
for (const [key, v] of Object.entries(verdict))
  log(`${key}: ${mb(v.settled)} MB after settling, highest ${mb(v.max)} MB (${(100 * v.growth).toFixed(1)}%), ${mb(v.end)} MB at the end`);
if (failures.length) {
  log("failed:", failures.join("; "));
  process.exit(1);
}
log("passed");

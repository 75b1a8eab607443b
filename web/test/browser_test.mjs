// The X-ray in a real browser (Debian's chromium, headless): the demo's report, a plan, the real
// PyTorch-profiler traces in ../shared/traces when they are next to the project, and runs that lack
// data. Asserts what each view draws, saves a screenshot of every view, and fails on any console
// error or network request.
//
//   node web/test/browser_test.mjs --gpuxray build/gpuxray --out build/html-report [--traces DIR]
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { launch, openReport } from './browser.mjs';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : fallback;
};
const gpuxray = resolve(option('--gpuxray', 'build/gpuxray'));
const out = resolve(option('--out', 'build/html-report'));
const traces = resolve(option('--traces', join(import.meta.dirname, '..', '..', '..', 'shared', 'traces')));
const only = option('--only', 'all'); // demo (the demo's report and a plan), traces (the real traces) or all
const screenshots = join(out, 'screenshots');
mkdirSync(screenshots, { recursive: true });

let failures = 0;
let checks = 0;
function check(condition, what) {
  checks += 1;
  if (!condition) {
    failures += 1;
    console.error(`FAIL: ${what}`);
  }
}
const runAsync = promisify(execFile);
function run(...command) {
  return execFileSync(gpuxray, command, { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
}

async function views(page) {
  return page.$$eval('nav.tabs a', (tabs) => tabs.map((t) => t.dataset.view));
}
async function openView(page, view) {
  await page.click(`nav.tabs a[data-view="${view}"]`);
  await page.waitForFunction((v) => window.gpuxray.view === v, view);
}
// Every view once: no exception, a screenshot (with `allShots` false, only of views that have their
// data); returns the views whose data is missing.
async function everyView(page, name, allShots = true) {
  const missingViews = [];
  for (const view of await views(page)) {
    await openView(page, view);
    const panel = `section[data-view="${view}"]`;
    const text = (await page.textContent(panel)) ?? '';
    check(text.length > 20, `${name}: view ${view} draws something`);
    const isMissing = (await page.$(`${panel} > p.missing[data-missing="${view}"]`)) !== null;
    if (isMissing) missingViews.push(view);
    if (allShots || !isMissing) await page.screenshot({ path: join(screenshots, `${name}-${view}.png`), fullPage: allShots });
  }
  return missingViews;
}
function finish(name, opened) {
  check(opened.errors.length === 0, `${name}: no console errors (${opened.errors.join('; ')})`);
  check(opened.requests.length === 0, `${name}: no network requests (${opened.requests.join(', ')})`);
}

const browser = await launch();
try {
  if (only !== 'traces') await demoAndPlan();
  if (only !== 'demo') await realTraces();
} finally {
  await browser.close();
}
console.log(`${checks - failures} of ${checks} checks passed; screenshots in ${screenshots}`);
process.exit(failures === 0 ? 0 : 1);

async function demoAndPlan() {
  // The demo: a simulated 16-GPU run with a planted slow NIC (node-00's mlx5_3), PP=2 and m=8.
  // --demo-page FILE checks a page written elsewhere instead.
  let demoHtml = option('--demo-page');
  if (!demoHtml) {
    const demo = join(out, 'demo');
    rmSync(demo, { recursive: true, force: true });
    run('simulate', '--preset', 'demo', '-o', demo);
    demoHtml = join(out, 'demo.html');
    run('report', demo, '-o', demoHtml);
  }
  {
    const opened = await openReport(browser, demoHtml);
    const { page } = opened;
    const doc = await page.evaluate(() => JSON.parse(document.getElementById('gpuxray-data').textContent));
    check(doc.schema === 'gpuxray.analyze' && doc.schema_version >= 2, 'demo: the page embeds the analyze document');
    const identity = await page.textContent('[data-test="identity"]');
    check(identity.includes('16 of 16 ranks') && identity.includes('2 hosts'), `demo: the identity line (${identity})`);
    const findings = await page.$$eval('table.findings tbody tr', (rows) => rows.length);
    check(findings === doc.findings.length, `demo: every finding listed (${findings} of ${doc.findings.length})`);

    // SM view of the top GEMM: 132 SMs (H100); the idle ones those its grid leaves free in its last wave.
    const gemm = doc.results.kernels.kernels.find((k) => /gemm/i.test(k.name) && k.launch);
    check(gemm !== undefined, 'demo: the kernels result has a GEMM with a launch configuration');
    await openView(page, 'sm');
    const index = doc.results.kernels.kernels.indexOf(gemm);
    await page.selectOption('[data-test="kernel"]', String(index));
    const grid = gemm.launch.grid[0] * gemm.launch.grid[1] * gemm.launch.grid[2];
    const perWave = 132 * gemm.occupancy.blocks_per_sm;
    const lastWave = grid - (Math.ceil(grid / perWave) - 1) * perWave;
    const expectedIdle = Math.max(0, 132 - lastWave);
    const cells = await page.$$eval('[data-test="sm-grid"] .sm', (c) => c.length);
    const idle = await page.$$eval('[data-test="sm-grid"] .sm.idle', (c) => c.length);
    check(cells === 132, `demo: the SM view draws 132 SMs (${cells})`);
    check(idle === expectedIdle, `demo: ${expectedIdle} SMs idle in the last wave of grid ${grid} (${idle})`);
    const limiter = await page.textContent('[data-test="limiter"]');
    check(limiter.includes(`limited by ${gemm.occupancy.limited_by}`), `demo: the limiter is named (${limiter})`);
    // A grid that leaves SMs idle: the first kernel with a last wave of fewer blocks than SMs.
    const partial = doc.results.kernels.kernels.slice(0, 30).findIndex((k) => {
      if (!k.launch || !k.occupancy || !k.device_multiprocessors) return false;
      const blocks = k.launch.grid[0] * k.launch.grid[1] * k.launch.grid[2];
      const wave = k.device_multiprocessors * k.occupancy.blocks_per_sm;
      return blocks % wave !== 0 && blocks % wave < k.device_multiprocessors;
    });
    if (partial >= 0) {
      const k = doc.results.kernels.kernels[partial];
      await page.selectOption('[data-test="kernel"]', String(partial));
      const blocks = k.launch.grid[0] * k.launch.grid[1] * k.launch.grid[2];
      const wave = k.device_multiprocessors * k.occupancy.blocks_per_sm;
      const idleNow = await page.$$eval('[data-test="sm-grid"] .sm.idle', (c) => c.length);
      check(idleNow === k.device_multiprocessors - (blocks % wave), `demo: partial last wave of ${k.name.slice(0, 40)}: ${idleNow} idle`);
      await page.screenshot({ path: join(screenshots, 'demo-sm-partial-wave.png'), fullPage: true });
    }

    // Memory: the curve of the worst device, its peak marked at the peak the analysis found; by
    // category, the categories drawn at the peak add up to the memory in use then.
    await openView(page, 'memory');
    const memory = doc.results.memory;
    const worst = memory.devices.find((d) => d.rank === memory.worst_rank);
    const drawnMemory = await page.evaluate(() => {
      const series = window.gpuxray.charts.memory.getOption().series;
      const marked = series.find((s) => s.markPoint && s.markPoint.data && s.markPoint.data.length);
      return { peak: marked.markPoint.data[0].coord, series: series.map((s) => ({ name: s.name, data: s.data })) };
    });
    const GiB = 1024 ** 3;
    check(Math.abs(drawnMemory.peak[1] * GiB - worst.peak_bytes) < 1024, `demo: the memory peak is marked at ${worst.peak_bytes} bytes`);
    if (doc.results.memory_categories?.recorded) {
      check(drawnMemory.series.length === doc.results.memory_categories.categories.length, `demo: one area per memory category (${drawnMemory.series.map((s) => s.name)})`);
      // The point drawn at the peak time with the highest total: the stacked areas' top there.
      const peakMs = worst.peak_at_ns / 1e6;
      let best = 0;
      for (let i = 0; i < drawnMemory.series[0].data.length; i++) {
        if (Math.abs(drawnMemory.series[0].data[i][0] - peakMs) > 1e-9) continue;
        best = Math.max(best, drawnMemory.series.reduce((sum, s) => sum + s.data[i][1], 0));
      }
      check(Math.abs(best * GiB - worst.peak_bytes) < 4096, `demo: the categories add up to the peak in use (${best * GiB} vs ${worst.peak_bytes})`);
      const atPeak = await page.$$eval('[data-test="memory-at-peak"] tbody tr', (rows) => rows.length);
      check(atPeak === doc.results.memory_categories.categories.length, 'demo: what the peak held, by category');
    } else {
      console.log('demo: no memory_categories result: the categories check is not run');
    }

    // Topology: node-00's mlx5_3, planted at half speed, is drawn as slow and its tooltip names it.
    if (doc.results.link_hotspots) {
      await openView(page, 'topology');
      const slow = await page.evaluate(() => {
        const chart = window.gpuxray.charts.topology;
        const nodes = chart.getOption().series[0].data;
        const index = nodes.findIndex((n) => n.name === 'node-00 NIC mlx5_3');
        if (index < 0) return null;
        chart.dispatchAction({ type: 'showTip', seriesIndex: 0, dataIndex: index });
        return { index, node: nodes[index], slowNodes: nodes.filter((n) => /SLOW/.test(n.label?.formatter ?? '')).map((n) => n.name) };
      });
      check(slow !== null, 'demo: the topology draws node-00 NIC mlx5_3');
      if (slow) {
        check(slow.slowNodes.length === 1 && slow.slowNodes[0] === 'node-00 NIC mlx5_3', `demo: the one link drawn slow is node-00 mlx5_3 (${slow.slowNodes})`);
        check(slow.node.itemStyle.borderColor.toUpperCase() === '#D55E00', 'demo: the slow NIC is outlined red');
        await page.waitForTimeout(200);
        const tip = await page.evaluate(() => [...document.querySelectorAll('[data-test="topology-chart"] div')].map((d) => d.textContent).find((t) => t.includes('mlx5_3')) ?? '');
        check(tip.includes('node-00 NIC mlx5_3') && tip.includes('slow'), `demo: the tooltip names the slow NIC (${tip.slice(0, 120)})`);
      }
      await page.click('nav.tabs a[data-view="summary"]');
    } else {
      check(false, 'demo: the report has results.link_hotspots');
    }

    // Pipeline: p=2, m=8, stage 0 waiting on stage 1.
    if (doc.results.pipeline_bubbles) {
      await openView(page, 'pipeline');
      const header = await page.textContent('[data-test="pipeline-header"]');
      check(header.includes('p=2, m=8') && header.includes('stage 0 waits on stage 1'), `demo: the pipeline header (${header})`);
      const labels = await page.evaluate(() => {
        const data = window.gpuxray.charts.pipeline.getOption().series[0].data;
        return data.map((d) => d.value[5]).filter((l) => /^[FB]\d+$/.test(l));
      });
      for (const name of ['F1', 'F8', 'B1', 'B8']) check(labels.includes(name), `demo: micro-batch ${name} is labelled`);
    } else {
      check(false, 'demo: the report has results.pipeline_bubbles');
    }

    // Ops ↔ kernels: selecting the op with the most kernel time of its own highlights its kernels.
    if (doc.results.ops?.recorded && doc.results.ops.nodes.length > 0) {
      await openView(page, 'ops');
      const nodes = doc.results.ops.nodes;
      const index = nodes.reduce((best, n, i) => (n.self_gpu_time_ns > nodes[best].self_gpu_time_ns ? i : best), 0);
      // Open the path down to it, then select it.
      const path = [];
      for (let at = index; at !== null && at >= 0; at = nodes[at].parent) path.unshift(at);
      for (const at of path.slice(0, -1)) {
        const toggle = `.op-row[data-node="${at}"] .toggle`;
        if ((await page.$(`.op-row[data-node="${path[path.indexOf(at) + 1]}"]`)) === null) await page.click(toggle);
      }
      await page.click(`.op-row[data-node="${index}"]`);
      const highlighted = await page.$$eval('[data-test="op-kernels"] li.kernel.highlight', (items) => items.map((i) => i.dataset.kernel).sort());
      const expected = nodes[index].top_kernels.map((k) => k.name).sort();
      check(expected.length > 0 && JSON.stringify(highlighted) === JSON.stringify(expected), `demo: selecting ${nodes[index].name} highlights its ${expected.length} kernels (${highlighted.length})`);
    } else {
      console.log('demo: no ops result: the op-selection check is not run');
    }

    // Step overview: a lane per rank.
    if (doc.results.step_overview) {
      await openView(page, 'step');
      const lanes = await page.evaluate(() => window.gpuxray.charts.step.getOption().yAxis[0].data.length);
      check(lanes === doc.results.step_overview.ranks.length, `demo: a lane per rank in the step overview (${lanes})`);
    }

    const missingViews = await everyView(page, 'demo');
    console.log(`demo: views whose data is missing: ${missingViews.join(', ') || 'none'}`);
    finish('demo', opened);
    await opened.context.close();
  }

  // The planner's view.
  {
    const planHtml = join(out, 'plan.html');
    run('plan', '--model', 'gpt-1.3b', '--cluster', 'dgx-h100', '--gpus', '16', '--html', planHtml);
    const opened = await openReport(browser, planHtml);
    const { page } = opened;
    const rows = await page.$$eval('[data-test="plan-table"] tbody tr', (r) => r.length);
    check(rows > 0, `plan: strategies ranked (${rows})`);
    const series = await page.evaluate(() => window.gpuxray.charts['plan-memory'].getOption().series.map((s) => s.name));
    check(series.includes('optimizer state') && series.includes('activations'), `plan: memory by category (${series})`);
    await everyView(page, 'plan');
    finish('plan', opened);
    await opened.context.close();
  }

}

// The folders of traces under `root` (a folder of folders, such as hta_trace_diff's two runs, gives each).
function traceFolders(root) {
  const folders = [];
  for (const name of readdirSync(root).sort()) {
    const dir = join(root, name);
    if (!statSync(dir).isDirectory()) continue;
    const files = readdirSync(dir);
    if (files.some((f) => /\.json(\.gz)?$/.test(f))) folders.push([name, dir]);
    else for (const [inner, innerDir] of traceFolders(dir)) folders.push([`${name}-${inner}`, innerDir]);
  }
  return folders;
}

async function realTrace(name, dir) {
  const html = join(out, `${name}.html`);
  try {
    await runAsync(gpuxray, ['report', dir, '-o', html]);
  } catch (error) {
    check(false, `${name}: gpuxray report failed: ${error.stderr}`);
    return;
  }
  const opened = await openReport(browser, html);
  // A world size the trace does not record is said to be so, never "of 0 ranks".
  const identity = await opened.page.textContent('[data-test="identity"]');
  check(!identity.includes(' of 0 ranks'), `${name}: the identity line (${identity})`);
  const missingViews = await everyView(opened.page, name, false);
  console.log(`${name}: views whose data is missing: ${missingViews.join(', ') || 'none'}`);
  finish(name, opened);
  await opened.context.close();
}

async function realTraces() {
  // Real PyTorch-profiler traces: every view opens; those without their data say so.
  if (existsSync(traces)) {
    // Four at a time: each page waits on the browser more than on the CPU.
    const queue = traceFolders(traces).filter(([name]) => !name.endsWith('-output')); // -output: HTA's own result, not a run
    const worker = async () => {
      for (let next = queue.shift(); next; next = queue.shift()) await realTrace(...next);
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
  } else {
    console.log(`skipped the real traces: ${traces} is not next to the project`);
  }
}

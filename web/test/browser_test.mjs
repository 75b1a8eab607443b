// The X-ray in a real browser (Debian's chromium, headless): the demo's report, a plan, the real
// PyTorch-profiler traces in ../shared/traces when they are next to the project, and runs that lack
// data. Asserts what each view draws, saves a screenshot of every view, and fails on any console
// error or network request.
//
//   node web/test/browser_test.mjs --gpuxray build/gpuxray --out build/html-report [--traces DIR]
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
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
const nextFrame = (page) => page.evaluate(() => new Promise((done) => requestAnimationFrame(() => done())));
// The window squeezed to 1x1 px for a moment, as headless chromium's full-page screenshot did under
// load (the diff page's topology then threw "Cannot read properties of null (reading '0')"): no
// chart may throw (finish() fails on the exception), and the view's charts fit their boxes again.
async function squeeze(page, name, view) {
  const size = page.viewportSize();
  await page.setViewportSize({ width: 1, height: 1 });
  await nextFrame(page);
  await page.setViewportSize(size);
  await nextFrame(page);
  const unfit = await page.evaluate((view) => {
    const panel = document.querySelector(`section[data-view="${view}"]`);
    return Object.entries(window.gpuxray.charts)
      .filter(([, c]) => !c.isDisposed() && panel.contains(c.getDom()) && c.getWidth() !== c.getDom().clientWidth)
      .map(([n, c]) => `${n}: ${c.getWidth()} of ${c.getDom().clientWidth} px`);
  }, view);
  check(unfit.length === 0, `${name}: view ${view}'s charts fit their boxes after a 1x1 window (${unfit})`);
}
// Every view once: no exception, a screenshot (with `allShots` false, only of views that have their
// data), the window squeezed; returns the views whose data is missing.
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
    await squeeze(page, name, view);
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
    // What would lift it, as the analyzer wrote it: a kernel with a lift and one without, both shown.
    const listedKernels = doc.results.kernels.kernels.slice(0, 30);
    for (const [label, wanted] of [['a lift', (o) => o.lift], ['no lift', (o) => !o.lift]]) {
      const at = listedKernels.findIndex((k) => k.occupancy && wanted(k.occupancy));
      check(at >= 0, `demo: a listed kernel with ${label}`);
      if (at < 0) continue;
      await page.selectOption('[data-test="kernel"]', String(at));
      const o = listedKernels[at].occupancy;
      const text = await page.textContent('[data-test="lift"]');
      const to = await page.getAttribute('[data-test="lift"]', 'data-to');
      check(text.includes(o.lift_summary) && to === (o.lift ? String(o.lift.to) : null), `demo: SM view of a kernel with ${label} says '${o.lift_summary}' (${text})`);
      if (o.lift) await page.screenshot({ path: join(screenshots, 'demo-sm-lift.png'), fullPage: true });
    }
    await page.selectOption('[data-test="kernel"]', String(index));
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
        // Click on it: the collectives whose bytes cross it, joined with the matched collectives.
        const at = await page.evaluate((index) => {
          const chart = window.gpuxray.charts.topology;
          const layout = chart.convertToPixel({ seriesIndex: 0 }, chart.getModel().getSeriesByIndex(0).getData().getItemLayout(index));
          const box = chart.getDom().getBoundingClientRect();
          return [box.left + layout[0], box.top + layout[1]];
        }, slow.index);
        await page.mouse.click(at[0], at[1]);
        const link = doc.results.link_hotspots.links.find((l) => l.host === 'node-00' && l.name === 'NIC mlx5_3');
        const expected = new Set(link.uses.map((u) => `${u.communicator.id} ${u.operation ?? 'not recorded'}`)).size;
        const shown = await page.$eval('[data-test="link-collectives"]', (b) => [Number(b.dataset.collectives), b.textContent]).catch(() => [0, '']);
        check(expected > 0 && shown[0] === expected && /AllReduce/.test(shown[1]) && /GB\/s/.test(shown[1]),
          `demo: clicking the slow NIC lists the ${expected} collectives that use it (${shown[0]}: ${shown[1].slice(0, 160)})`);
        const named = link.uses.filter((u) => u.communicator.name !== null);
        const usesText = await page.textContent('[data-test="link-uses"]');
        check(named.length > 0 && named.every((u) => usesText.includes(u.communicator.name)) && !/0x[0-9a-f]{16}/.test(usesText),
          `demo: the slow NIC's uses name their communicators, not their hashes (${usesText.slice(0, 200)})`);
        await page.screenshot({ path: join(screenshots, 'demo-topology-click.png'), fullPage: true });
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
      // Each stage's boxes in time order are its micro-batches' passes in 1F1B order: p-s-1
      // forwards to warm up, then one forward and one backward in turn, then the last backwards.
      const lanes = await page.evaluate(() => {
        const chart = window.gpuxray.charts.pipeline;
        const boxes = chart.getOption().series[0].data.filter((d) => d.value[3] === 1).sort((a, b) => a.value[1] - b.value[1]);
        return chart.getOption().yAxis[0].data.map((_, lane) => boxes.filter((d) => d.value[0] === lane).map((d) => d.value[5]));
      });
      const source = await page.textContent('[data-test="pipeline-source"]');
      check(source.includes('forward#N / backward#N ranges') && !source.includes('no forward#N'), `demo: the pipeline's boxes come from the simulator's ranges (${source})`);
      const [p, m] = [2, 8];
      check(lanes.length === p, `demo: the pipeline chart has ${p} stages (${lanes.length})`);
      lanes.forEach((labels, s) => {
        const expected = [];
        const warmUp = Math.min(p - s - 1, m);
        for (let f = 1; f <= warmUp; ++f) expected.push(`F${f}`);
        for (let b = 1; b <= m; ++b) {
          if (warmUp + b <= m) expected.push(`F${warmUp + b}`);
          expected.push(`B${b}`);
        }
        check(labels.filter((l) => l.startsWith('F')).length === m && labels.filter((l) => l.startsWith('B')).length === m,
          `demo: stage ${s} shows ${m} forward and ${m} backward boxes (${labels.join(' ')})`);
        check(labels.join(' ') === expected.join(' '), `demo: stage ${s}'s boxes run in 1F1B order (${labels.join(' ')}; expected ${expected.join(' ')})`);
      });
      const arrows = await page.evaluate(() => window.gpuxray.charts.pipeline.getOption().series[0].data.filter((d) => d.value[3] === 3).length);
      check(arrows === 2 * m * (p - 1), `demo: an arrow from each of the step's ${2 * m * (p - 1)} sends to its receive (${arrows})`);
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
      // Exposed communication and bubbles marked with their cause: as many marks as the results hold.
      const overview = doc.results.step_overview;
      const exposed = overview.ranks.reduce((n, r) => n + r.exposed.length, 0);
      let bubbles = 0;
      for (const p of doc.results.pipeline_bubbles?.pipelines ?? [])
        for (const st of p.stages) bubbles += st.steps.find((x) => x.step === overview.step)?.bubbles.length ?? 0;
      const marks = await page.$eval('[data-test="step-marks"]', (m) => [Number(m.dataset.exposed), Number(m.dataset.bubbles)]);
      check(exposed > 0 && marks[0] === exposed, `demo: step overview marks the ${exposed} exposed stretches (${marks[0]})`);
      check(bubbles > 0 && marks[1] === bubbles, `demo: step overview marks the step's ${bubbles} pipeline bubbles (${marks[1]})`);
      const drawnMarks = await page.evaluate(() => window.gpuxray.charts.step.getOption().series.slice(1).map((s) => s.data.length));
      check(drawnMarks[0] === bubbles && drawnMarks[1] === exposed, `demo: the marks are drawn on the lanes (${drawnMarks})`);
      const causes = (await page.textContent('[data-test="step-bubble-causes"]')) ?? '';
      check(causes.includes('waiting on stage 1'), `demo: a bubble's cause is named (waiting on stage 1)`);
      const exposedCauses = (await page.textContent('[data-test="step-exposed-causes"]')) ?? '';
      const byCause = new Map();
      for (const r of overview.ranks) for (const m of r.exposed) byCause.set(m.cause, (byCause.get(m.cause) ?? 0) + m.span_ns[1] - m.span_ns[0]);
      const firstCause = [...byCause.entries()].sort((a, b) => b[1] - a[1])[0]?.[0] ?? '(none)';
      check(exposedCauses.includes(firstCause), `demo: an exposed stretch's cause is named (${firstCause})`);
    }

    // Without --critical-path, the summary says how to get the critical path.
    const noPath = (await page.textContent('section[data-view="summary"] p.missing[data-missing="critical-path"]')) ?? '';
    check(noPath.includes('--critical-path'), `demo: the summary says how to get the critical path (${noPath})`);
    const missingViews = await everyView(page, 'demo');
    console.log(`demo: views whose data is missing: ${missingViews.join(', ') || 'none'}`);
    // The demo measured no kernel: the memory-hierarchy view says so in one line.
    const noMetrics = await page.$$eval('section[data-view="hierarchy"] > :not(h2)', (e) => e.map((x) => [x.tagName, x.dataset.missing ?? '', x.textContent]));
    check(noMetrics.length === 1 && noMetrics[0][1] === 'hierarchy' && noMetrics[0][2].includes('no kernel metrics'), `demo: the memory hierarchy says the run has no kernel metrics, in one line (${JSON.stringify(noMetrics)})`);
    finish('demo', opened);
    await opened.context.close();
  }

  await kernelMetrics();

  // Findings ranked by what fixing each would save (`report --critical-path`): a data-parallel run
  // with one straggler, whose finding carries the largest saving.
  {
    const dir = join(out, 'what-if');
    rmSync(dir, { recursive: true, force: true });
    run('simulate', '--model', 'gpt-350m', '--cluster', 'dgx-h100', '--nodes', '1', '--tp', '2', '--dp', '4',
        '--global-batch', '8', '--steps', '3', '--seed', '5', '--straggler', '2=1.3', '-o', dir);
    const html = join(out, 'what-if.html');
    run('report', dir, '--critical-path', '-o', html);
    const opened = await openReport(browser, html);
    const { page } = opened;
    const doc = await page.evaluate(() => JSON.parse(document.getElementById('gpuxray-data').textContent));
    const saved = doc.findings.filter((f) => f.saves_ns !== undefined).sort((a, b) => b.saves_ns - a.saves_ns);
    check(saved.length > 0 && saved[0].analysis === 'stragglers', `what-if: the straggler saves the most (${saved.map((f) => f.analysis)})`);
    const headers = await page.$$eval('table.findings thead th', (h) => h.map((x) => x.textContent));
    check(headers.includes('fixing it saves / step'), `what-if: the findings show their saving (${headers})`);
    const first = await page.textContent('table.findings tbody tr:first-child');
    check(saved.length > 0 && first.includes(saved[0].summary), `what-if: the finding that saves most is listed first (${first.slice(0, 120)})`);
    // The waterfall of the step's critical path: its bars, each from where the one before ended, add
    // up to the step; the step shown is the step overview's.
    const path = doc.results.critical_path.run_steps.find((s) => s.step === doc.results.step_overview.step);
    const bars = await page.evaluate(() => {
      const option = window.gpuxray.charts['critical-path'].getOption();
      return { labels: option.yAxis[0].data, bases: option.series[0].data, values: option.series[1].data.map((d) => d.value) };
    });
    const n = bars.values.length;
    const chained = bars.bases.slice(1, n - 1).every((base, i) => Math.abs(base - (bars.bases[i] + bars.values[i])) < 1e-9);
    const sum = bars.values.slice(0, n - 1).reduce((a, b) => a + b, 0);
    check(path !== undefined && chained && Math.abs(sum - path.step_ns / 1e6) < 1e-6 && Math.abs(bars.values[n - 1] - path.step_ns / 1e6) < 1e-6 && bars.labels[n - 1] === 'the step',
      `what-if: the critical path's waterfall adds up to step ${path?.step}'s ${path?.step_ns} ns (${sum} ms, chained ${chained})`);
    // Its largest bar: the cause with the most of the step, compute by kernel class.
    const byBar = new Map();
    for (const a of path?.attribution ?? []) {
      const bar = a.cause === 'compute' ? `compute: ${a.kernel_class ?? 'other'}` : a.detail ? `${a.cause}: ${a.detail}` : a.cause;
      byBar.set(bar, (byBar.get(bar) ?? 0) + a.ns);
    }
    const largest = [...byBar.entries()].sort((a, b) => b[1] - a[1])[0];
    check(largest && bars.labels[0] === largest[0] && Math.abs(bars.values[0] - largest[1] / 1e6) < 1e-9, `what-if: the waterfall's first bar is ${largest?.[0]} (${bars.labels[0]})`);
    const stepLine = (await page.textContent('[data-test="critical-path-step"]')) ?? '';
    check(stepLine.includes('runs on rank 2'), `what-if: the path runs on the straggler, rank 2 (${stepLine})`);
    await page.screenshot({ path: join(screenshots, 'what-if-summary.png'), fullPage: true });
    finish('what-if', opened);
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
    // The step split into TP and DP exposed communication, adding up to the exposed share; the GPU's memory as a line.
    const split = await page.evaluate(() => window.gpuxray.charts['plan-time'].getOption().series.map((s) => [s.name, s.data]));
    const named = Object.fromEntries(split);
    check(named['exposed TP communication'] && named['exposed DP communication'], `plan: exposed communication split into TP and DP (${split.map((x) => x[0])})`);
    const planDoc = JSON.parse(run('plan', '--model', 'gpt-1.3b', '--cluster', 'dgx-h100', '--gpus', '16', '--format', 'json'));
    const ranking = Object.values(planDoc.sections.plan.tables)[0].rows;
    const splitOk = ranking.every((r, i) => Math.abs(named['exposed TP communication'][i] + named['exposed DP communication'][i] - (r.step_time_ns / 1e6) * r.exposed_comm_pct / 100) < 1e-6);
    check(splitOk && ranking.some((r) => r.exposed_dp_pct > 0), 'plan: TP + DP bars add up to each strategy\'s exposed communication');
    const deviceLine = await page.evaluate(() => window.gpuxray.charts['plan-memory'].getOption().series.map((s) => s.markLine?.data?.[0]?.xAxis).find((x) => x !== undefined));
    const deviceBytes = Object.values(planDoc.sections.plan_memory.tables)[0].rows[0].device_bytes;
    check(deviceBytes > 0 && Math.abs(deviceLine - deviceBytes / 1024 ** 3) < 1e-9, `plan: the GPU's memory drawn as a line at ${deviceBytes} B (${deviceLine} GiB)`);
    await everyView(page, 'plan');
    finish('plan', opened);
    await opened.context.close();
  }

  // The comparison: the classic case (4 nodes x 8 A100, TP8 x DP4), node-01's NIC 2 at 40 % before,
  // fixed after; the same seed. The page shows the slow link's change and both sides side by side.
  {
    const simulate = ['simulate', '--model', 'gpt-1.3b', '--cluster', 'dgx-a100', '--nodes', '4', '--tp', '8', '--dp', '4', '--global-batch', '32', '--jitter', '1', '--seed', '3', '--steps', '2'];
    const before = join(out, 'diff-before');
    const after = join(out, 'diff-after');
    for (const dir of [before, after]) rmSync(dir, { recursive: true, force: true });
    await Promise.all([runAsync(gpuxray, [...simulate, '--slow-link', 'node-01:2=0.4', '-o', before]), runAsync(gpuxray, [...simulate, '-o', after])]);
    const diffHtml = join(out, 'diff.html');
    const diff = JSON.parse(run('diff', before, after, '--format', 'json', '--html', diffHtml));
    const opened = await openReport(browser, diffHtml);
    const { page } = opened;
    const steps = await page.textContent('[data-test="diff-steps"]');
    check(steps.includes(`verdict: ${diff.steps.verdict}`) && diff.steps.verdict === 'faster', `diff: the step verdict (${steps})`);
    const resolved = await page.$$eval('[data-test="diff-findings"] tbody tr', (rows) => rows.filter((r) => r.cells[0].textContent === 'resolved' && /slow|NIC/i.test(r.cells[3].textContent)).length);
    check(resolved > 0, `diff: the slow-link finding is listed as resolved (${resolved})`);
    await openView(page, 'topology');
    const slowLinks = await page.$$eval('[data-test="diff-slow-link"]', (items) => items.map((i) => i.textContent));
    check(slowLinks.length === 1 && slowLinks[0].startsWith('node-01 ') && slowLinks[0].includes('slow before, not slow after'), `diff: node-01's NIC slow before, not after (${slowLinks})`);
    const linkName = slowLinks[0]?.split(':')[0] ?? '';
    const slowRow = diff.tables.links.rows.find((r) => `${r.key.host} ${r.key.name}` === linkName);
    const before_ = slowRow?.before['network.achieved_bytes_per_s'];
    const after_ = slowRow?.after['network.achieved_bytes_per_s'];
    const rowText = await page.$$eval('[data-test="diff-table-links"] tbody tr', (rows, name) => rows.map((r) => [...r.cells].map((c) => c.textContent)).find((cells) => `${cells[0]} ${cells[1]}` === name) ?? [], linkName);
    const shownDelta = `+${((after_ - before_) / 1e9).toFixed(1)} GB/s`;
    check(after_ > before_ * 1.5 && rowText.some((c) => c.includes(`(${shownDelta}`)), `diff: the slow link's speed change is shown (${shownDelta}: ${rowText.join(' | ')})`);
    const sides = await page.evaluate(() => ['before-topology', 'after-topology'].map((n) => window.gpuxray.charts[n]?.getOption().series[0].data.length ?? 0));
    check(sides[0] > 0 && sides[1] > 0, `diff: both sides' topologies drawn (${sides})`);
    await page.screenshot({ path: join(screenshots, 'diff-topology.png'), fullPage: true });
    await openView(page, 'step');
    const lanes = await page.evaluate(() => ['before-step', 'after-step'].map((n) => window.gpuxray.charts[n]?.getOption().yAxis[0].data.length ?? 0));
    check(lanes[0] === 32 && lanes[1] === 32, `diff: both step overviews drawn, 32 lanes each (${lanes})`);
    await everyView(page, 'diff');
    finish('diff', opened);
    await opened.context.close();
  }
}

// The memory-hierarchy view and the SM view of measured kernels: the run tests/support/kernel_metrics_run.cc
// writes, whose counters are chosen by hand (the numbers below are that program's).
async function kernelMetrics() {
  const writer = resolve(option('--kernel-metrics-run', join(dirname(gpuxray), 'tests', 'kernel_metrics_run')));
  const dir = join(out, 'kernel-metrics');
  rmSync(dir, { recursive: true, force: true });
  execFileSync(writer, [dir]);
  const html = join(out, 'kernel-metrics.html');
  run('report', dir, '-o', html);
  const opened = await openReport(browser, html);
  const { page } = opened;
  await openView(page, 'hierarchy');
  const gemm = 'sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_kernel';
  const chosen = await page.textContent('section[data-view="hierarchy"] h3.kernel-name');
  check(chosen === gemm, `kernel metrics: the longest measured kernel, the GEMM, is shown first (${chosen})`);
  const drawn = await page.evaluate(() => {
    const series = window.gpuxray.charts.hierarchy.getOption().series[0];
    return { nodes: series.data.map((n) => [n.name, n.label.formatter]), edges: series.links.map((e) => [e.source, e.target, e.label.formatter, e.bytes]) };
  });
  const MiB = 1024 * 1024;
  check(JSON.stringify(drawn.nodes.map((n) => n[0])) === JSON.stringify(['SMs', 'L1 / shared memory', 'L2', 'HBM']), `kernel metrics: the four levels, SMs to HBM (${drawn.nodes.map((n) => n[0])})`);
  const label = (name) => drawn.nodes.find((n) => n[0] === name)?.[1] ?? '';
  check(label('SMs').includes('achieved occupancy 21.5 % (theoretical 25.0 %)') && label('SMs').includes('SM throughput 78.0 %'), `kernel metrics: the SMs' achieved occupancy and throughput (${label('SMs')})`);
  check(label('L1 / shared memory').includes('hit rate 12.5 %') && label('L1 / shared memory').includes('2,000,000 wavefronts'), `kernel metrics: L1's hit rate and shared memory (${label('L1 / shared memory')})`);
  check(label('L2').includes('hit rate 81.5 %'), `kernel metrics: L2's hit rate (${label('L2')})`);
  check(label('HBM').includes('96.0 MiB read, 32.0 MiB written') && label('HBM').includes(`${(100 * 128 * MiB / 98e-6 / 3.35e12).toFixed(1)} % of peak bandwidth`), `kernel metrics: HBM's bytes and throughput (${label('HBM')})`);
  const edge = (from) => drawn.edges.find((e) => e[0] === from) ?? [];
  check(edge('SMs')[1] === 'L1 / shared memory' && edge('SMs')[3] === 1536 * MiB && edge('SMs')[2] === '1.50 GiB, L1 hit rate 12.5 %', `kernel metrics: SMs to L1, 1.5 GiB (${edge('SMs')})`);
  check(edge('L1 / shared memory')[1] === 'L2' && edge('L1 / shared memory')[3] === 512 * MiB && edge('L1 / shared memory')[2] === '512 MiB, L2 hit rate 81.5 %', `kernel metrics: L1 to L2, 512 MiB (${edge('L1 / shared memory')})`);
  check(edge('L2')[1] === 'HBM' && edge('L2')[3] === 128 * MiB && edge('L2')[2] === '96.0 MiB read, 32.0 MiB written', `kernel metrics: L2 to HBM, 128 MiB (${edge('L2')})`);
  // Hover on a level: its tooltip names the bytes and the hit rate.
  const tipOf = async (name) => {
    const at = await page.evaluate((name) => {
      const chart = window.gpuxray.charts.hierarchy;
      const data = chart.getModel().getSeriesByIndex(0).getData();
      const index = data.mapArray((i) => data.getName(i)).indexOf(name);
      const point = chart.convertToPixel({ seriesIndex: 0 }, data.getItemLayout(index));
      const box = chart.getDom().getBoundingClientRect();
      return [box.left + point[0], box.top + point[1]];
    }, name);
    await page.mouse.move(at[0], at[1]);
    await page.waitForTimeout(200);
    return page.evaluate(() => [...document.querySelectorAll('[data-test="hierarchy-chart"] div')].map((d) => d.textContent).find((t) => t.includes('hit rate')) ?? '');
  };
  const l1Tip = await tipOf('L1 / shared memory');
  check(l1Tip.includes('L1 hit rate 12.5 %') && l1Tip.includes('1.50 GiB'), `kernel metrics: hovering L1 names its bytes and hit rate (${l1Tip})`);
  const l2Tip = await tipOf('L2');
  check(l2Tip.includes('L2 hit rate 81.5 %') && l2Tip.includes('512 MiB'), `kernel metrics: hovering L2 names its bytes and hit rate (${l2Tip})`);
  await page.screenshot({ path: join(screenshots, 'kernel-metrics-hierarchy.png'), fullPage: true });
  // The add, measured without L1 counters: "not measured", never a zero; the fusion with the multiply.
  const names = await page.$$eval('[data-test="measured-kernel"] option', (o) => o.map((x) => x.textContent));
  const add = names.findIndex((n) => n.includes('AddFunctor'));
  await page.selectOption('[data-test="measured-kernel"]', String(add));
  const addL1 = await page.evaluate(() => window.gpuxray.charts.hierarchy.getOption().series[0].links[0]);
  check(addL1.bytes === null && addL1.label.formatter === 'not measured, L1 hit rate not measured', `kernel metrics: L1 not measured for the add (${addL1.label.formatter})`);
  // Its demangled name in short, the full name in the tooltip and under it.
  const addName = 'void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int)';
  const heading = await page.$eval('section[data-view="hierarchy"] h3.kernel-name', (h) => [h.textContent, h.title]);
  const fullName = await page.textContent('section[data-view="hierarchy"] p.full-name');
  check(heading[0] === 'vectorized_elementwise_kernel<4, AddFunctor>' && heading[1] === addName && fullName === addName,
    `kernel metrics: the add is named in short, in full in its tooltip and under it (${heading}; ${fullName})`);
  const fusion = (await page.textContent('[data-test="hierarchy-fusion"]')) ?? '';
  check(fusion.includes('MulFunctor') && fusion.includes('64.0 MiB'), `kernel metrics: the add and the multiply, fused, would save 64 MiB (${fusion.slice(0, 200)})`);
  await page.screenshot({ path: join(screenshots, 'kernel-metrics-hierarchy-add.png'), fullPage: true });
  // The SM view: the GEMM's SMs shaded by its achieved occupancy.
  await openView(page, 'sm');
  const kernels = await page.$$eval('[data-test="kernel"] option', (o) => o.map((x) => x.textContent));
  await page.selectOption('[data-test="kernel"]', String(kernels.findIndex((k) => k.includes(gemm))));
  const shade = await page.getAttribute('[data-test="sm-grid"]', 'data-shade');
  const cell = await page.getAttribute('[data-test="sm-grid"] .sm:not(.idle)', 'title');
  const achieved = (await page.textContent('[data-test="achieved"]')) ?? '';
  check(shade === 'achieved' && cell.includes('achieved occupancy 21.5 %') && achieved.includes('achieved occupancy 21.5 % against theoretical 25.0 %'), `kernel metrics: the SM view shades by achieved occupancy (${shade}: ${cell}; ${achieved})`);
  await page.screenshot({ path: join(screenshots, 'kernel-metrics-sm.png'), fullPage: true });
  await page.click('[data-test="achieved"] a');
  await page.waitForFunction(() => window.gpuxray.view === 'hierarchy');
  check((await page.textContent('section[data-view="hierarchy"] h3.kernel-name')) === gemm, 'kernel metrics: the SM view opens the GEMM\'s memory hierarchy');
  await everyView(page, 'kernel-metrics', false);
  finish('kernel-metrics', opened);
  await opened.context.close();
}

// The folders of traces under `root` (a folder of folders, such as hta_trace_diff's two runs, gives each).
function traceFolders(root) {
  const folders = [];
  for (const name of readdirSync(root).sort()) {
    const dir = join(root, name);
    if (!statSync(dir).isDirectory()) continue;
    const files = readdirSync(dir);
    if (files.some((f) => /\.(json(\.gz)?|gpuxray)$/.test(f))) folders.push([name, dir]);
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
  // A finding's cost is per step where the run has steps, else over the whole trace, and its header says which.
  const costHeader = await opened.page.evaluate(() => {
    const doc = JSON.parse(document.getElementById('gpuxray-data').textContent);
    const th = document.querySelectorAll('table.findings thead th')[1];
    return [doc.run.steps, th ? th.textContent : null];
  });
  check(costHeader[1] === null || costHeader[1] === (costHeader[0] > 0 ? 'cost / step' : 'cost (whole trace)'),
    `${name}: the findings' cost header fits the run's ${costHeader[0]} steps (${costHeader[1]})`);
  const missingViews = await everyView(opened.page, name, false);
  console.log(`${name}: views whose data is missing: ${missingViews.join(', ') || 'none'}`);
  // Demangled C++ kernel names run to hundreds of characters: the labels carry a short form.
  const options = await opened.page.$$eval('[data-test="kernel"] option', (o) => o.map((x) => x.textContent));
  const long = options.filter((o) => o.length > 130);
  check(long.length === 0, `${name}: the SM view's kernels are named in short (${long[0]?.slice(0, 200)})`);
  // A rank the launcher did not say is "rank unknown" in the page's own labels, never -1 or null.
  const labels = await opened.page.evaluate(() => [
    ...(window.gpuxray.charts.step?.getOption().yAxis[0].data ?? []),
    ...[...document.querySelectorAll('[data-test="memory-device"] option, section[data-view="memory"] h3')].map((e) => e.textContent),
  ]);
  const unnamed = labels.filter((l) => /rank (-1|null)\b/.test(String(l)));
  check(unnamed.length === 0, `${name}: no rank labelled -1 or null (${unnamed.slice(0, 3)})`);
  // The network between the hosts is drawn only where a NIC joins it.
  const network = await opened.page.evaluate(() => {
    const doc = JSON.parse(document.getElementById('gpuxray-data').textContent);
    const nics = (doc.results?.link_hotspots?.links ?? []).some((l) => l.kind === 'NIC');
    const drawn = (window.gpuxray.charts.topology?.getOption().series[0].data ?? []).some((n) => n.name === 'network');
    return [nics, drawn];
  });
  check(network[0] === network[1], `${name}: the network between the hosts drawn only with NICs (NICs ${network[0]}, drawn ${network[1]})`);
  // A capture whose kernel metrics CUPTI's profiler refused: the memory hierarchy says why it has none.
  const refused = await opened.page.evaluate(() => JSON.parse(document.getElementById('gpuxray-data').textContent).warnings.some((w) => w.includes('kernel metrics are off')));
  if (refused) {
    const why = (await opened.page.textContent('section[data-view="hierarchy"] p.missing')) ?? '';
    check(why.includes('the capture says: kernel metrics are off'), `${name}: the memory hierarchy says why nothing was measured (${why})`);
  }
  finish(name, opened);
  await opened.context.close();
  // A trace without steps has one critical path over its whole span, and the summary says so.
  if (name === 'hta_critical_path_simple_add') {
    const withPath = join(out, `${name}-critical-path.html`);
    await runAsync(gpuxray, ['report', dir, '--critical-path', '-o', withPath]);
    const again = await openReport(browser, withPath);
    const heading = await again.page.textContent('section[data-view="summary"] h2:has-text("The critical path")');
    const told = (await again.page.textContent('[data-test="critical-path-step"]')) ?? '';
    check(heading === 'The critical path: what the run waited on' && told.startsWith('the whole span') && told.includes('of the span attributed'),
      `${name}: the critical path of a run without steps is the span's (${heading}; ${told.slice(0, 120)})`);
    await again.context.close();
  }
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

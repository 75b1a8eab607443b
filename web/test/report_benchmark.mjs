// Benchmark of the X-ray (not a test): how big the page of a run is and how long headless chromium
// takes from navigation to the first view drawn and interactive, for the demo (budget 3 MiB, 2 s) and
// a simulated 1024-rank run (15 MiB, 5 s), each as a ratio of its budget. Simulating the 1024-rank
// run takes minutes; --big DIR reuses one already simulated.
//
//   node web/test/report_benchmark.mjs --gpuxray build/gpuxray --out build/html-benchmark [--big DIR] [--only demo]
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { launch, openReport } from './browser.mjs';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : fallback;
};
const gpuxray = resolve(option('--gpuxray', 'build/gpuxray'));
const out = resolve(option('--out', 'build/html-benchmark'));
mkdirSync(out, { recursive: true });
const MiB = 1024 * 1024;

// gpuxray report's wall time and, where /usr/bin/time is (GNU time), its peak resident memory.
function prepare(preset, dir) {
  let simulateS = null;
  if (!existsSync(dir)) {
    const started = Date.now();
    execFileSync(gpuxray, ['simulate', '--preset', preset, '-o', dir], { stdio: 'inherit' });
    simulateS = (Date.now() - started) / 1000;
  }
  const html = join(out, `${preset}.html`);
  const rssFile = join(out, `${preset}.rss`);
  const timed = existsSync('/usr/bin/time');
  const started = Date.now();
  if (timed) execFileSync('/usr/bin/time', ['-f', '%M', '-o', rssFile, gpuxray, 'report', dir, '-o', html], { stdio: ['ignore', 'ignore', 'pipe'] });
  else execFileSync(gpuxray, ['report', dir, '-o', html], { stdio: ['ignore', 'ignore', 'pipe'] });
  const reportS = (Date.now() - started) / 1000;
  const peakGiB = timed ? Number(readFileSync(rssFile, 'utf8').trim().split('\n').pop()) / 1024 ** 2 : null;
  return { html, reportS, simulateS, peakGiB };
}

// Each view's first drawing, in seconds from the click to the next frame after it is shown.
async function viewTimes(page) {
  const times = [];
  for (const view of await page.$$eval('nav.tabs a', (tabs) => tabs.map((t) => t.dataset.view))) {
    const started = Date.now();
    await page.click(`nav.tabs a[data-view="${view}"]`);
    await page.waitForFunction((v) => window.gpuxray.view === v, view);
    await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => done())));
    times.push(`${view} ${((Date.now() - started) / 1000).toFixed(2)}`);
  }
  return times.join(', ');
}

// --only demo skips the 1024-rank run.
const cases = [
  { preset: 'demo', dir: join(out, 'demo'), budgetMiB: 3, budgetS: 2 },
  { preset: 'gpt3-175b-1024', dir: resolve(option('--big', join(out, 'gpt3-175b-1024'))), budgetMiB: 15, budgetS: 5 },
].filter((c) => option('--only', c.preset) === c.preset);
const browser = await launch();
let within = true;
try {
  for (const c of cases) {
    const { html, reportS, simulateS, peakGiB } = prepare(c.preset, c.dir);
    const sizeMiB = statSync(html).size / MiB;
    const times = [];
    let views = '';
    for (let i = 0; i < 3; i++) {
      const opened = await openReport(browser, html);
      // Interactive: the first view drawn and a click on another answered.
      const clickStart = Date.now();
      await opened.page.click('nav.tabs a:nth-child(2)');
      await opened.page.waitForFunction(() => window.gpuxray.view !== 'summary');
      times.push({ loadS: opened.loadMs / 1000, readyS: opened.readyMs / 1000, clickS: (Date.now() - clickStart) / 1000 });
      if (i === 0) views = await viewTimes(opened.page);
      await opened.context.close();
    }
    const best = times.reduce((a, b) => (a.loadS + a.clickS <= b.loadS + b.clickS ? a : b));
    const interactiveS = best.loadS + best.clickS;
    const ok = sizeMiB <= c.budgetMiB && interactiveS <= c.budgetS;
    within &&= ok;
    console.log(
      `${c.preset}: page ${sizeMiB.toFixed(2)} MiB (${(sizeMiB / c.budgetMiB).toFixed(2)} of ${c.budgetMiB} MiB); ` +
        `interactive in ${interactiveS.toFixed(2)} s (${(interactiveS / c.budgetS).toFixed(2)} of ${c.budgetS} s: ` +
        `first view drawn ${best.readyS.toFixed(2)} s after navigation, loaded ${best.loadS.toFixed(2)} s, ` +
        `next view ${best.clickS.toFixed(2)} s; best of 3); gpuxray report ${reportS.toFixed(1)} s` +
        (peakGiB !== null ? `, peak ${peakGiB.toFixed(1)} GiB resident` : '') +
        (simulateS !== null ? `; simulate ${simulateS.toFixed(1)} s` : '') +
        `; each view's first drawing (s): ${views}${ok ? '' : '  OVER BUDGET'}`,
    );
  }
} finally {
  await browser.close();
}
process.exit(within ? 0 : 1);

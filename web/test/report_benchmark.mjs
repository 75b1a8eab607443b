// Benchmark of the X-ray (not a test): how big the page of a run is and how long headless chromium
// takes from navigation to the first view drawn and interactive, for the demo (budget 3 MiB, 2 s) and
// a simulated 1024-rank run (15 MiB, 5 s), each as a ratio of its budget. Simulating the 1024-rank
// run takes minutes; --big DIR reuses one already simulated.
//
//   node web/test/report_benchmark.mjs --gpuxray build/gpuxray --out build/html-benchmark [--big DIR] [--only demo]
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
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

function prepare(preset, dir) {
  if (!existsSync(dir)) execFileSync(gpuxray, ['simulate', '--preset', preset, '-o', dir], { stdio: 'inherit' });
  const html = join(out, `${preset}.html`);
  const started = Date.now();
  execFileSync(gpuxray, ['report', dir, '-o', html], { stdio: ['ignore', 'ignore', 'pipe'] });
  return { html, reportS: (Date.now() - started) / 1000 };
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
    const { html, reportS } = prepare(c.preset, c.dir);
    const sizeMiB = statSync(html).size / MiB;
    const times = [];
    for (let i = 0; i < 3; i++) {
      const opened = await openReport(browser, html);
      // Interactive: the first view drawn and a click on another answered.
      const clickStart = Date.now();
      await opened.page.click('nav.tabs a:nth-child(2)');
      await opened.page.waitForFunction(() => window.gpuxray.view !== 'summary');
      times.push({ loadS: opened.loadMs / 1000, readyS: opened.readyMs / 1000, clickS: (Date.now() - clickStart) / 1000 });
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
        `next view ${best.clickS.toFixed(2)} s; best of 3); gpuxray report ${reportS.toFixed(1)} s ${ok ? '' : ' OVER BUDGET'}`,
    );
  }
} finally {
  await browser.close();
}
process.exit(within ? 0 : 1);

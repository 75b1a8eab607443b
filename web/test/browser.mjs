// Opens report pages in Debian's chromium (headless, no network, never a downloaded browser),
// through playwright-core. Shared by the browser tests and the benchmark.
import { chromium } from 'playwright-core';
import { existsSync } from 'node:fs';

export const chromiumPath = process.env.GPUXRAY_CHROMIUM ?? '/usr/bin/chromium';

export async function launch() {
  if (!existsSync(chromiumPath)) throw new Error(`no chromium at ${chromiumPath} (scripts/setup.sh installs Debian's)`);
  return chromium.launch({
    executablePath: chromiumPath,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update'],
  });
}

// A page that records every console error and uncaught exception, and refuses any request that
// is not the file itself: the report must need no network.
export async function openReport(browser, file, viewport = { width: 1400, height: 900 }) {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  const errors = [];
  const requests = [];
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(`console: ${message.text()}`);
  });
  page.on('pageerror', (error) => errors.push(`exception: ${error.stack ?? error.message}`));
  await page.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith('file://')) return route.continue();
    requests.push(url);
    return route.abort();
  });
  const started = Date.now();
  await page.goto(`file://${file}`);
  await page.waitForFunction(() => window.gpuxray && window.gpuxray.ready, null, { timeout: 30000 });
  const loadMs = Date.now() - started;
  const readyMs = await page.evaluate(() => window.gpuxray.readyMs);
  return { page, context, errors, requests, loadMs, readyMs };
}

// 5. SM view, the chip from above: for a kernel, its GPU's SMs (CUs on AMD) as a grid; for a chosen
// wave each SM is shaded by the blocks resident on it over the most it can hold (the occupancy
// estimate of analysis/occupancy), or, for a kernel `--kernel-metrics` measured, by the achieved
// occupancy measured (the median of its launches, one figure for every busy SM); idle SMs white, so
// the partial last wave shows as it is.
import type { AnalyzeDocument, KernelEntry, KernelsResult, Occupancy, ReportDocument } from '../data';
import { result } from '../data';
import { el, missing } from '../dom';
import { findingKey, formatBytes, formatCount, formatNs, formatPct, shortKernelName } from '../format';
import { View, ViewContext } from '../view';

const kListed = 30;

function totalBlocks(kernel: KernelEntry): number {
  const grid = kernel.launch!.grid;
  return grid[0] * grid[1] * grid[2];
}

// Blocks of wave `wave` (0-based) on each SM: the block scheduler hands the wave's blocks out one
// SM after another, so every SM gets floor or ceil of its share.
function residentBlocks(blocks: number, sms: number, blocksPerSm: number, wave: number): number[] {
  const perWave = sms * blocksPerSm;
  const inWave = Math.max(0, Math.min(perWave, blocks - wave * perWave));
  return Array.from({ length: sms }, (_, sm) => Math.floor(inWave / sms) + (sm < inWave % sms ? 1 : 0));
}

// What would lift the limiter, as the analyzer computed it (results.kernels[].occupancy.lift).
function liftLine(occupancy: Occupancy): HTMLElement {
  const line = el('p', { class: 'lift', 'data-test': 'lift' });
  if (occupancy.lift_summary === undefined) {
    line.textContent = 'What would lift the limiter is not in this report (written by an older gpuxray).';
    return line;
  }
  line.append(el('strong', {}, 'What would lift it: '), occupancy.lift_summary);
  if (occupancy.lift) line.dataset.to = String(occupancy.lift.to);
  return line;
}

function drawKernel(panel: HTMLElement, doc: AnalyzeDocument, kernel: KernelEntry, amd: boolean, context: ViewContext): void {
  panel.replaceChildren();
  const unit = amd ? 'CU' : 'SM';
  // A short name to read, the full one under it where they differ.
  const short = shortKernelName(kernel.name);
  panel.append(el('h3', { class: 'kernel-name', title: kernel.name }, short));
  if (short !== kernel.name) panel.append(el('p', { class: 'full-name' }, kernel.name));
  panel.append(el('p', {}, `${formatCount(kernel.count)} launches, ${formatNs(kernel.time_ns)} in all`));
  const launch = kernel.launch;
  if (!launch) {
    panel.append(missing('sm', `The trace records no launch configuration for this kernel (grid, block, registers), so its ${unit}s cannot be drawn.`));
    return;
  }
  const blocks = totalBlocks(kernel);
  const threads = launch.block[0] * launch.block[1] * launch.block[2];
  const facts = [
    `grid ${launch.grid.join(' x ')} = ${formatCount(blocks)} blocks of ${launch.block.join(' x ')} = ${threads} threads`,
    `registers/thread: ${launch.registers_per_thread ?? 'not recorded'}`,
    `shared memory/block: ${launch.shared_memory_bytes === null ? 'not recorded' : formatBytes(launch.shared_memory_bytes)}`,
    `local memory/thread: ${launch.local_memory_per_thread_bytes === null ? 'not recorded' : formatBytes(launch.local_memory_per_thread_bytes)}`,
  ];
  panel.append(el('ul', { class: 'facts' }, ...facts.map((f) => el('li', {}, f))));
  const sms = kernel.device_multiprocessors;
  const occupancy = kernel.occupancy;
  if (!sms) {
    panel.append(missing('sm', `The trace does not say how many ${unit}s the kernel's GPU has, so the grid cannot be laid out.`));
    return;
  }
  if (!occupancy) {
    panel.append(missing('sm', `No occupancy estimate for this kernel (${amd ? 'AMD GPUs are not estimated' : 'its device is not known'}): resident blocks per ${unit} are unknown.`));
    if (blocks < sms) {
      // Fewer blocks than SMs: one wave whatever the occupancy, each block on an SM of its own.
      const grid = el('div', { class: 'sm-grid', 'data-test': 'sm-grid', 'data-sms': String(sms), 'data-idle': String(sms - blocks) });
      for (let sm = 0; sm < sms; sm++) {
        const busy = sm < blocks;
        const cell = el('div', { class: busy ? 'sm' : 'sm idle', title: `${unit} ${sm}: ${busy ? '1 block' : 'idle'}`, 'data-blocks': busy ? '1' : '0' }, busy ? '1' : '');
        if (busy) cell.style.background = 'rgba(0, 114, 178, 0.6)';
        grid.append(cell);
      }
      panel.append(el('p', { class: 'sm-caption', 'data-test': 'sm-caption' }, `${formatCount(blocks)} blocks on ${sms} ${unit}s: one wave whatever the occupancy; ${sms - blocks} ${unit}s idle (white)`), grid);
    }
    return;
  }
  const perWave = sms * occupancy.blocks_per_sm;
  const waves = Math.max(1, Math.ceil(blocks / perWave));
  panel.append(
    el(
      'p',
      { class: 'limiter', 'data-test': 'limiter' },
      `${occupancy.blocks_per_sm} block${occupancy.blocks_per_sm === 1 ? '' : 's'} per ${unit} fit (theoretical occupancy ${formatPct(occupancy.occupancy_pct)}), limited by ${occupancy.limited_by}; ` +
        `${formatCount(blocks)} blocks over ${sms} ${unit}s x ${occupancy.blocks_per_sm} = ${occupancy.waves.toFixed(2)} waves, wave efficiency ${formatPct(occupancy.wave_efficiency_pct)}.`,
    ),
  );
  panel.append(liftLine(occupancy));
  const related = doc.findings.filter((f) => f.analysis === 'kernels' && f.summary.includes(findingKey(kernel.name)));
  for (const finding of related)
    panel.append(el('div', { class: `finding ${finding.severity}` }, finding.summary, el('ul', { class: 'evidence' }, ...finding.evidence.map((e) => el('li', {}, e)))));

  const waveSelect = el('select', { 'data-test': 'wave' });
  for (let wave = 0; wave < waves; wave++) {
    const inWave = Math.min(perWave, blocks - wave * perWave);
    waveSelect.append(el('option', { value: String(wave) }, `wave ${wave + 1} of ${waves}: ${formatCount(inWave)} blocks${inWave < perWave ? ' (partial)' : ''}`));
  }
  // Measured: every busy SM shaded by the achieved occupancy (counters give the SMs' average, not one per SM).
  const achieved = kernel.achieved_occupancy_pct ?? null;
  if (achieved !== null) {
    const open = el('a', { href: '#hierarchy', class: 'view-link' }, 'its memory hierarchy');
    open.addEventListener('click', (event) => {
      event.preventDefault();
      context.open('hierarchy', kernel.name);
    });
    panel.append(
      el('p', { class: 'limiter', 'data-test': 'achieved' }, `Measured (--kernel-metrics): achieved occupancy ${formatPct(achieved)} against theoretical ${formatPct(occupancy.occupancy_pct)}; `, open, '.'),
    );
  }
  const grid = el('div', { class: 'sm-grid', 'data-test': 'sm-grid', 'data-shade': achieved === null ? 'theoretical' : 'achieved' });
  const caption = el('p', { class: 'sm-caption', 'data-test': 'sm-caption' });
  const draw = (wave: number) => {
    const resident = residentBlocks(blocks, sms, occupancy.blocks_per_sm, wave);
    const idle = resident.filter((n) => n === 0).length;
    grid.replaceChildren(
      ...resident.map((n, sm) => {
        const fill = achieved === null ? n / occupancy.blocks_per_sm : achieved / 100;
        const cell = el('div', {
          class: n === 0 ? 'sm idle' : 'sm',
          title:
            `${unit} ${sm}: ${n} of ${occupancy.blocks_per_sm} blocks resident${n === 0 ? ' (idle)' : ''}` +
            (achieved === null || n === 0 ? '' : `; achieved occupancy ${formatPct(achieved)} (measured, the kernel's average), theoretical ${formatPct(occupancy.occupancy_pct)}`),
          'data-blocks': String(n),
        });
        if (n > 0) cell.style.background = `rgba(0, 114, 178, ${0.25 + 0.75 * fill})`;
        cell.textContent = n === 0 ? '' : String(n);
        return cell;
      }),
    );
    grid.dataset.sms = String(sms);
    grid.dataset.idle = String(idle);
    caption.textContent =
      `wave ${wave + 1} of ${waves}: ${idle} of ${sms} ${unit}s idle (white); ` +
      (achieved === null ? `shade = resident blocks / ${occupancy.blocks_per_sm}` : `shade = achieved occupancy ${formatPct(achieved)} (measured; the number is the blocks resident)`);
  };
  waveSelect.addEventListener('change', () => draw(Number(waveSelect.value)));
  waveSelect.value = String(waves - 1);
  panel.append(el('label', {}, 'wave ', waveSelect), caption, grid);
  draw(waves - 1);
}

export const smView: View = {
  id: 'sm',
  title: 'SM view',
  render(container: HTMLElement, report: ReportDocument, context: ViewContext, focus?: string) {
    const doc = report as AnalyzeDocument;
    const kernels = result<KernelsResult>(doc, 'kernels');
    if (!kernels || kernels.kernels.length === 0) {
      container.append(missing('sm', 'This report has no compute kernels (results.kernels is absent or empty).'));
      return;
    }
    const listed = kernels.kernels.slice(0, kListed);
    const select = el('select', { 'data-test': 'kernel' });
    listed.forEach((kernel, index) =>
      select.append(el('option', { value: String(index), title: kernel.name }, `${formatNs(kernel.time_ns)}  ${shortKernelName(kernel.name)}${kernel.launch ? '' : '  (no launch configuration)'}`)),
    );
    const panel = el('div', { class: 'sm-panel' });
    container.append(el('label', {}, `kernel (top ${listed.length} by time) `, select), panel);
    const byFocus = focus ? listed.findIndex((k) => k.name === focus) : -1;
    const firstDrawable = listed.findIndex((k) => k.launch !== null);
    const initial = byFocus >= 0 ? byFocus : Math.max(0, firstDrawable);
    select.value = String(initial);
    select.addEventListener('change', () => drawKernel(panel, doc, listed[Number(select.value)], kernels.amd, context));
    drawKernel(panel, doc, listed[initial], kernels.amd, context);
  },
};

// 6. Memory hierarchy (results.kernel_metrics): for a kernel `gpuxray run --kernel-metrics` measured,
// its levels from the SMs down to HBM (SMs, L1/shared memory, L2, HBM), the bytes its requests moved
// between them and each cache's hit rate, as the analyzer wrote them (medians over the measured
// launches); achieved occupancy next to theoretical, the bound with its evidence, the roofline
// position, and the fusion candidates the analyzer found. The page draws; nothing is derived here.
import type { AnalyzeDocument, KernelMetricsEntry, KernelMetricsResult, ReportDocument } from '../data';
import { result } from '../data';
import { makeChart } from '../charts';
import { el, missing, table } from '../dom';
import { findingKey, formatBytes, formatCount, formatNs, formatPct, shortKernelName } from '../format';
import { View } from '../view';

const measured = (v: number | null | undefined, text: (v: number) => string) => (v === null || v === undefined ? 'not measured' : text(v));
const bytes = (v: number | null | undefined) => measured(v, formatBytes);
const pct = (v: number | null | undefined) => measured(v, formatPct);

// One level of the hierarchy: what the chart writes on it and in its tooltip.
interface Level {
  id: string;
  title: string;
  label: string;
  tooltip: string[];
  colour: string;
}
// What moved between two levels: the bytes the counter gives, drawn as an edge's width.
interface Traffic {
  from: string;
  to: string;
  bytes: number | null;
  label: string;
  tooltip: string[];
}

function levelsOf(k: KernelMetricsEntry): { levels: Level[]; traffic: Traffic[] } {
  const m = k.metrics;
  const spills = m.local_load_bytes !== null || m.local_store_bytes !== null;
  const levels: Level[] = [
    {
      id: 'sm',
      title: 'SMs',
      label: `SMs: achieved occupancy ${pct(m.achieved_occupancy_pct)} (theoretical ${k.theoretical_occupancy_pct === null ? 'not estimated' : formatPct(k.theoretical_occupancy_pct)}); SM throughput ${pct(m.sm_throughput_pct)}`,
      tooltip: [
        `achieved occupancy ${pct(m.achieved_occupancy_pct)} of the SMs' warps (theoretical ${k.theoretical_occupancy_pct === null ? 'not estimated' : formatPct(k.theoretical_occupancy_pct)})`,
        `SM throughput ${pct(m.sm_throughput_pct)} of peak; tensor pipe active ${pct(m.tensor_pipe_pct)} of cycles`,
      ],
      colour: '#14202e',
    },
    {
      id: 'l1',
      title: 'L1 / shared memory',
      label: `L1 / shared memory: hit rate ${pct(m.l1_hit_rate_pct)}; shared memory ${measured(m.shared_wavefronts, formatCount)} wavefronts`,
      tooltip: [
        `L1 hit rate ${pct(m.l1_hit_rate_pct)} of sectors`,
        `L1 bytes (global and local requests from the SMs): ${bytes(m.l1_bytes)}`,
        `shared memory: ${measured(m.shared_wavefronts, formatCount)} wavefronts (up to 128 B each)`,
        spills ? `local memory (register spills): ${bytes(m.local_load_bytes)} loaded, ${bytes(m.local_store_bytes)} stored` : 'local memory (register spills): not measured',
      ],
      colour: '#0072B2',
    },
    {
      id: 'l2',
      title: 'L2',
      label: `L2: hit rate ${pct(m.l2_hit_rate_pct)}`,
      tooltip: [`L2 hit rate ${pct(m.l2_hit_rate_pct)} of sectors`, `L2 bytes (all requests to L2): ${bytes(m.l2_bytes)}`],
      colour: '#009E73',
    },
    {
      id: 'hbm',
      title: 'HBM',
      label: `HBM: ${bytes(m.dram_read_bytes)} read, ${bytes(m.dram_write_bytes)} written; ${k.dram_throughput_pct === null ? 'throughput not known' : `${formatPct(k.dram_throughput_pct)} of peak bandwidth`}`,
      tooltip: [
        `DRAM bytes read ${bytes(m.dram_read_bytes)}, written ${bytes(m.dram_write_bytes)}`,
        `DRAM throughput ${k.dram_throughput_pct === null ? 'not known (no duration or no device bandwidth)' : `${formatPct(k.dram_throughput_pct)} of the device's bandwidth`}`,
      ],
      colour: '#E69F00',
    },
  ];
  const dram = m.dram_read_bytes === null && m.dram_write_bytes === null ? null : (m.dram_read_bytes ?? 0) + (m.dram_write_bytes ?? 0);
  const traffic: Traffic[] = [
    {
      from: 'sm', to: 'l1', bytes: m.l1_bytes,
      label: `${bytes(m.l1_bytes)}, L1 hit rate ${pct(m.l1_hit_rate_pct)}`,
      tooltip: [`SMs ↔ L1: ${bytes(m.l1_bytes)} of global and local requests`, `L1 hit rate ${pct(m.l1_hit_rate_pct)}`],
    },
    {
      from: 'l1', to: 'l2', bytes: m.l2_bytes,
      label: `${bytes(m.l2_bytes)}, L2 hit rate ${pct(m.l2_hit_rate_pct)}`,
      tooltip: [`L1 ↔ L2: ${bytes(m.l2_bytes)} of requests to L2 (all of them)`, `L2 hit rate ${pct(m.l2_hit_rate_pct)}`],
    },
    {
      from: 'l2', to: 'hbm', bytes: dram,
      label: `${bytes(m.dram_read_bytes)} read, ${bytes(m.dram_write_bytes)} written`,
      tooltip: [`L2 ↔ HBM: ${bytes(m.dram_read_bytes)} read, ${bytes(m.dram_write_bytes)} written`],
    },
  ];
  return { levels, traffic };
}

function drawKernel(panel: HTMLElement, doc: AnalyzeDocument, k: KernelMetricsEntry, all: KernelMetricsResult): void {
  panel.replaceChildren();
  const m = k.metrics;
  const short = shortKernelName(k.name);
  panel.append(
    el('h3', { class: 'kernel-name', title: k.name }, short),
    ...(short === k.name ? [] : [el('p', { class: 'full-name' }, k.name)]),
    el(
      'p',
      { 'data-test': 'hierarchy-header' },
      `${formatCount(k.launches)} launch${k.launches === 1 ? '' : 'es'} measured (${k.passes} replay passes each), median duration ${formatNs(m.gpu_duration_ns)}; ${k.bound ?? 'bound not known'}.`,
    ),
    el('ul', { class: 'evidence', 'data-test': 'hierarchy-evidence' }, ...k.evidence.map((e) => el('li', {}, e))),
  );
  const { levels, traffic } = levelsOf(k);
  const chartBox = el('div', { class: 'chart', 'data-test': 'hierarchy-chart' });
  panel.append(chartBox);

  const levelGap = 120;
  const most = Math.max(1, ...traffic.map((t) => t.bytes ?? 0));
  const nodes = levels.map((level, i) => ({
    name: level.title,
    x: 0,
    y: i * levelGap,
    symbol: 'roundRect',
    symbolSize: [560, 40],
    itemStyle: { color: level.colour },
    label: { show: true, color: '#fff', fontSize: 12, formatter: level.label },
    level: level.id,
    hover: [`<b>${level.title}</b>`, ...level.tooltip].join('<br>'),
  }));
  const titleOf = new Map(levels.map((l) => [l.id, l.title]));
  const edges = traffic.map((t) => ({
    source: titleOf.get(t.from)!,
    target: titleOf.get(t.to)!,
    lineStyle: t.bytes === null ? { color: '#b8c2cc', width: 1, type: 'dashed' } : { color: '#7a8a99', width: 2 + 22 * Math.sqrt(t.bytes / most) },
    // Not drawn by the graph (ECharts turns an edge's label along the line, over the levels): the
    // text beside each edge below says it.
    label: { show: false, formatter: t.label },
    bytes: t.bytes,
    hover: t.tooltip.join('<br>'),
  }));
  // The bytes between two levels, written beside the edge half-way down (the graph spans 40 px from
  // the box's top to 40 px from its bottom).
  const chartHeight = 460;
  chartBox.style.height = `${chartHeight}px`;
  const span = (chartHeight - 80) / Math.max(1, levels.length - 1);
  const edgeTexts = traffic.map((t) => {
    const from = levels.findIndex((l) => l.id === t.from);
    return {
      type: 'text',
      left: '53%',
      top: 40 + (from + 0.5) * span - 8,
      silent: true,
      style: { text: t.label, fontSize: 12, fill: t.bytes === null ? '#8a96a3' : '#333333' },
    };
  });
  makeChart('hierarchy', chartBox).setOption({
    animation: false,
    graphic: edgeTexts,
    tooltip: { confine: true, formatter: (p: { data?: { hover?: string } }) => p.data?.hover ?? '' },
    series: [
      {
        type: 'graph',
        layout: 'none',
        top: 40,
        bottom: 40,
        data: nodes,
        links: edges,
        edgeSymbol: ['none', 'none'],
        emphasis: { disabled: true },
      },
    ],
  });

  panel.append(
    table(
      ['level', 'bytes to the level above', 'hit rate', 'also'],
      [
        ['L1 / shared memory', bytes(m.l1_bytes), pct(m.l1_hit_rate_pct), `shared memory ${measured(m.shared_wavefronts, formatCount)} wavefronts; spills ${bytes(m.local_load_bytes)} loaded, ${bytes(m.local_store_bytes)} stored`],
        ['L2', bytes(m.l2_bytes), pct(m.l2_hit_rate_pct), ''],
        ['HBM', `${bytes(m.dram_read_bytes)} read, ${bytes(m.dram_write_bytes)} written`, '', k.dram_throughput_pct === null ? 'throughput not known' : `${formatPct(k.dram_throughput_pct)} of peak bandwidth`],
      ],
      { 'data-test': 'hierarchy-levels' },
    ),
    el(
      'p',
      { 'data-test': 'roofline' },
      k.arithmetic_intensity === null
        ? `Roofline: arithmetic intensity not known (${k.flops_source}).`
        : `Roofline: ${k.arithmetic_intensity.toFixed(1)} FLOP per DRAM byte (${k.flops_source})` +
            (k.ridge_intensity === null ? '; the ridge point is not known.' : `; ridge point ${k.ridge_intensity.toFixed(1)}: the ${k.arithmetic_intensity < k.ridge_intensity ? 'memory' : 'compute'} side.`),
    ),
  );
  const fusions = all.fusion_candidates.filter((f) => f.first === k.name || f.second === k.name);
  if (fusions.length > 0)
    panel.append(
      el('h4', {}, 'Fusion candidates with this kernel'),
      table(
        ['first', 'then', 'rank', 'stream', 'HBM bytes a fusion saves'],
        fusions.map((f) => [f.first.slice(0, 90), f.second.slice(0, 90), String(f.rank), String(f.stream), formatBytes(f.bytes_saved)]),
        { 'data-test': 'hierarchy-fusion' },
      ),
    );
  const related = doc.findings.filter((f) => f.analysis === 'kernel_metrics' && f.summary.includes(findingKey(k.name)));
  for (const finding of related)
    panel.append(el('div', { class: `finding ${finding.severity}` }, finding.summary, el('ul', { class: 'evidence' }, ...finding.evidence.map((e) => el('li', {}, e)))));
}

export const hierarchyView: View = {
  id: 'hierarchy',
  title: 'Memory hierarchy',
  render(container: HTMLElement, report: ReportDocument, _context, focus?: string) {
    const doc = report as AnalyzeDocument;
    const metrics = result<KernelMetricsResult>(doc, 'kernel_metrics');
    if (!metrics || metrics.kernels.length === 0) {
      // A capture asked for them may have said why it measured none (CUPTI's profiler refused).
      const why = doc.warnings.map((w) => /the capture warned: (kernel metrics are off: .*)$/.exec(w)?.[1]).find((w) => w !== undefined);
      container.append(
        missing('hierarchy', 'This run has no kernel metrics: no launch was measured with `gpuxray run --kernel-metrics` (results.kernel_metrics)' + (why ? `; the capture says: ${why}.` : '.')),
      );
      return;
    }
    const select = el('select', { 'data-test': 'measured-kernel' });
    metrics.kernels.forEach((k, index) =>
      select.append(el('option', { value: String(index), title: k.name }, `${formatNs(k.metrics.gpu_duration_ns)}  ${shortKernelName(k.name)}  (${k.launches} measured)`)),
    );
    const panel = el('div', { class: 'hierarchy-panel' });
    container.append(
      el('p', {}, `${metrics.profiled_launches} launches measured; the counters are medians over a kernel's measured launches.`),
      el('label', {}, 'measured kernel ', select),
      panel,
    );
    const byFocus = focus ? metrics.kernels.findIndex((k) => k.name === focus) : -1;
    select.value = String(Math.max(0, byFocus));
    select.addEventListener('change', () => drawKernel(panel, doc, metrics.kernels[Number(select.value)], metrics));
    drawKernel(panel, doc, metrics.kernels[Math.max(0, byFocus)], metrics);
  },
};

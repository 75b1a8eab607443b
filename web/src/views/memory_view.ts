// 6. Memory watermark: per rank and device, the device memory in use over time (results.memory's
// curve), the peak marked with when, in which phase and how much; stacked by category where the
// report carries the categories.
import type { AnalyzeDocument, MemoryDevice, MemoryResult, ReportDocument } from '../data';
import { result } from '../data';
import { makeChart, palette } from '../charts';
import { el, missing, table } from '../dom';
import { formatBytes, formatNs, formatPct, formatRank } from '../format';
import { View } from '../view';

const GiB = 1024 ** 3;

// results.memory_categories (analysis/memory_categories.h)
interface CategoryDevice {
  rank: number;
  device: number;
  peak_bytes: number;
  peak_at_ns: number;
  peak_phase: string;
  peak_step: number | null;
  at_peak: Record<string, number>;
  curve: number[][] | null;
}
interface MemoryCategories {
  recorded: boolean;
  addresses_recorded: boolean;
  phases_recorded: boolean;
  categories: string[];
  devices: CategoryDevice[];
}
const categoryNames: Record<string, string> = {
  parameters: 'parameters',
  gradients: 'gradients',
  optimizer_state: 'optimizer state',
  activations: 'activations',
  temporaries: 'temporaries / workspace',
  other: 'other',
};

// The peak's label on the side with room: left of a peak in the last part of the curve, which a
// label on its right would run past the chart's edge.
function labelSide(peakNs: number, curve: number[][] | null): 'left' | 'right' {
  const last = curve && curve.length > 0 ? curve[curve.length - 1][0] : peakNs;
  return peakNs > 0.6 * last ? 'left' : 'right';
}

function drawCategories(chartBox: HTMLElement, info: HTMLElement, categories: MemoryCategories, device: CategoryDevice): void {
  const names = categories.categories;
  const stamp = device.peak_step === null ? '' : ` of step ${device.peak_step}`;
  info.replaceChildren(
    el('p', { 'data-test': 'memory-peak' }, `${formatRank(device.rank)} device ${device.device}: peak ${formatBytes(device.peak_bytes)} at ${formatNs(device.peak_at_ns)}, ${device.peak_phase}${stamp}, holding:`),
    table(
      ['category', 'at the peak'],
      names.map((c) => [categoryNames[c] ?? c, formatBytes(device.at_peak[c] ?? 0)]),
      { 'data-test': 'memory-at-peak' },
    ),
  );
  const chart = makeChart('memory', chartBox);
  chart.setOption({
    animation: false,
    color: [palette[0], palette[1], palette[2], palette[3], palette[4], palette[7]],
    legend: { top: 5 },
    grid: { left: 70, right: 40, top: 50, bottom: 80 },
    tooltip: { trigger: 'axis', valueFormatter: (v: unknown) => `${(v as number).toFixed(3)} GiB` },
    xAxis: { type: 'value', name: "ms from the run's first GPU activity", nameLocation: 'middle', nameGap: 30, max: 'dataMax', axisLabel: { formatter: (v: number) => v.toFixed(0) } },
    yAxis: { type: 'value', name: 'GiB in use', nameGap: 20 },
    dataZoom: [{ type: 'inside' }, { type: 'slider', bottom: 10 }],
    series: names.map((c, i) => ({
      name: categoryNames[c] ?? c,
      type: 'line',
      step: 'end',
      stack: 'memory',
      showSymbol: false,
      lineStyle: { width: 0.5 },
      areaStyle: { opacity: 0.75 },
      data: (device.curve ?? []).map((point) => [point[0] / 1e6, point[i + 1] / GiB]),
      markPoint:
        i === names.length - 1
          ? {
              symbol: 'circle',
              symbolSize: 10,
              itemStyle: { color: '#D55E00' },
              data: [{ name: 'peak', coord: [device.peak_at_ns / 1e6, device.peak_bytes / GiB] }],
              label: { position: labelSide(device.peak_at_ns, device.curve), color: '#D55E00', fontWeight: 'bold', formatter: `peak ${formatBytes(device.peak_bytes)} (${device.peak_phase})` },
            }
          : undefined,
    })),
  });
}

function drawDevice(chartBox: HTMLElement, info: HTMLElement, device: MemoryDevice): void {
  info.replaceChildren(
    el(
      'p',
      { 'data-test': 'memory-peak' },
      `${formatRank(device.rank)} device ${device.device}: peak ${formatBytes(device.peak_bytes)}` +
        (device.peak_pct_of_device === null ? '' : ` (${formatPct(device.peak_pct_of_device)} of the device)`) +
        ` at ${formatNs(device.peak_at_ns)} in ${device.peak_phase || 'no NVTX range'}; ${device.allocations} allocations; ${formatBytes(device.end_bytes)} in use at the end`,
    ),
  );
  const chart = makeChart('memory', chartBox);
  const points = (device.curve ?? []).map(([t, bytes]) => [t / 1e6, bytes / GiB]);
  chart.setOption({
    animation: false,
    color: palette,
    grid: { left: 70, right: 40, top: 50, bottom: 80 },
    tooltip: {
      trigger: 'axis',
      valueFormatter: (v: unknown) => `${(v as number).toFixed(3)} GiB`,
    },
    xAxis: { type: 'value', name: "ms from the run's first GPU activity", nameLocation: 'middle', nameGap: 30, max: 'dataMax', axisLabel: { formatter: (v: number) => v.toFixed(0) } },
    yAxis: { type: 'value', name: 'GiB in use', nameGap: 20 },
    dataZoom: [{ type: 'inside' }, { type: 'slider', bottom: 10 }],
    series: [
      {
        name: 'in use',
        type: 'line',
        step: 'end',
        showSymbol: false,
        areaStyle: { opacity: 0.3 },
        data: points,
        markPoint: {
          symbol: 'circle',
          symbolSize: 10,
          itemStyle: { color: '#D55E00' },
          data: [{ name: 'peak', coord: [device.peak_at_ns / 1e6, device.peak_bytes / GiB] }],
          label: {
            position: labelSide(device.peak_at_ns, device.curve),
            color: '#D55E00',
            fontWeight: 'bold',
            formatter: `peak ${formatBytes(device.peak_bytes)} in ${device.peak_phase || 'no NVTX range'}`,
          },
        },
      },
    ],
  });
}

export const memoryView: View = {
  id: 'memory',
  title: 'Memory',
  render(container: HTMLElement, report: ReportDocument) {
    const doc = report as AnalyzeDocument;
    const memory = result<MemoryResult>(doc, 'memory');
    if (!memory || !memory.recorded || memory.devices.length === 0) {
      container.append(missing('memory', 'This report has no memory records: the trace holds no device memory allocations or releases.'));
      return;
    }
    const select = el('select', { 'data-test': 'memory-device' });
    memory.devices.forEach((d, index) =>
      select.append(el('option', { value: String(index) }, `${formatRank(d.rank)} device ${d.device}: peak ${formatBytes(d.peak_bytes)}`)),
    );
    const worst = Math.max(0, memory.devices.findIndex((d) => d.rank === memory.worst_rank));
    select.value = String(worst);
    const info = el('div');
    const chartBox = el('div', { class: 'chart tall', 'data-test': 'memory-chart' });
    container.append(el('label', {}, 'device ', select), chartBox, info);
    const categories = result<MemoryCategories>(doc, 'memory_categories');
    const byDevice = (d: MemoryDevice) => categories?.recorded ? categories.devices.find((c) => c.rank === d.rank && c.device === d.device) : undefined;
    if (!categories?.recorded)
      container.append(missing('memory-categories', 'This report does not split memory by category (parameters, gradients, optimizer state, activations, temporaries; results.memory_categories): the curve is the total in use.'));
    else if (!categories.addresses_recorded)
      container.append(missing('memory-categories', 'The trace records no allocation addresses, so frees cannot be matched to allocations: categories are estimates.'));
    const draw = () => {
      const device = memory.devices[Number(select.value)];
      const split = byDevice(device);
      if (device.curve === null) {
        makeChart('memory', chartBox).clear();
        info.replaceChildren(
          missing('memory-curve', `This page leaves out ${formatRank(device.rank)} device ${device.device}'s curve (it keeps those of the highest peaks; \`gpuxray analyze --format json\` has every one): peak ${formatBytes(device.peak_bytes)} at ${formatNs(device.peak_at_ns)}.`),
        );
        return;
      }
      if (split && split.curve !== null) drawCategories(chartBox, info, categories!, split);
      else drawDevice(chartBox, info, device);
    };
    select.addEventListener('change', draw);
    draw();
    if (memory.worst_rank_phases.length > 0) {
      container.append(el('h3', {}, `Peak by phase on ${formatRank(memory.worst_rank)}`));
      container.append(table(['phase', 'peak'], memory.worst_rank_phases.slice(0, 15).map((p) => [p.phase, formatBytes(p.peak_bytes)])));
    }
  },
};

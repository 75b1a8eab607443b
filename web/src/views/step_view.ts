// 3. Step overview (results.step_overview): one representative step, one lane per rank with its
// compute, communication and memory activity (idle is what is left), ranks grouped by host when
// there are many; zoom and pan; and the command that opens the same step in Perfetto.
import type { AnalyzeDocument, ReportDocument } from '../data';
import { result } from '../data';
import { makeChart, palette } from '../charts';
import { el, missing } from '../dom';
import { formatNs } from '../format';
import { View } from '../view';

interface Lane { busy_ns: number; merged_intervals: number; gaps_closed_up_to_ns: number | null; intervals: [number, number][] }
interface RankLanes { rank: number; start_ns: number; length_ns: number; compute: Lane; communication: Lane; memory: Lane }
interface StepOverview {
  per_step: boolean;
  step: number | null;
  chosen: string;
  step_length_ns: number;
  ranks: RankLanes[];
}

const kinds: [keyof Pick<RankLanes, 'compute' | 'communication' | 'memory'>, string][] = [
  ['compute', palette[2]],
  ['communication', palette[5]],
  ['memory', palette[4]],
];
const kMaxRanksDrawn = 256;

export const stepView: View = {
  id: 'step',
  title: 'Step overview',
  render(container: HTMLElement, report: ReportDocument) {
    const doc = report as AnalyzeDocument;
    const overview = result<StepOverview>(doc, 'step_overview');
    if (!overview || overview.ranks.length === 0) {
      container.append(missing('step', 'This report has no step overview (results.step_overview): the run has no GPU activity per rank to draw.'));
      return;
    }
    const hostOf = new Map<number, string>();
    const breakdown = result<{ ranks: { rank: number; host: string }[] }>(doc, 'time_breakdown');
    for (const r of breakdown?.ranks ?? []) hostOf.set(r.rank, r.host);
    const ranks = [...overview.ranks].sort((a, b) => (hostOf.get(a.rank) ?? '').localeCompare(hostOf.get(b.rank) ?? '') || a.rank - b.rank);
    const drawn = ranks.slice(0, kMaxRanksDrawn);
    const stepText = overview.step === null ? 'each rank\'s whole GPU span' : `step ${overview.step} (${overview.chosen}), ${formatNs(overview.step_length_ns)}`;
    container.append(el('p', { class: 'identity', 'data-test': 'step-header' }, `${stepText}; lanes: compute, communication, memory; white is idle. Each rank from its own start of the step.`));
    if (drawn.length < ranks.length) container.append(el('p', {}, `The first ${drawn.length} of ${ranks.length} ranks (by host) are drawn.`));
    const dirs = 'DIR';
    const perfetto = overview.step === null ? `gpuxray export perfetto ${dirs} -o step.pftrace` : `gpuxray export perfetto ${dirs} --steps ${overview.step} -o step-${overview.step}.pftrace`;
    container.append(el('p', {}, 'The same window in Perfetto: ', el('code', { 'data-test': 'perfetto-command' }, perfetto)));
    const legend = el('div', { class: 'legend' }, ...kinds.map(([name, colour]) => {
      const swatch = el('span', { class: 'swatch' });
      swatch.style.background = colour;
      return el('span', {}, swatch, name);
    }));
    const chartBox = el('div', { class: 'chart', 'data-test': 'step-chart' });
    chartBox.style.height = `${Math.min(1400, 90 + drawn.length * 22)}px`;
    container.append(legend, chartBox);

    const data: { value: [number, number, number, number]; itemStyle: object }[] = [];
    drawn.forEach((rank, lane) => {
      kinds.forEach(([kind, colour], sub) => {
        for (const [s, e] of rank[kind].intervals) data.push({ value: [lane, s / 1e6, e / 1e6, sub], itemStyle: { color: colour } });
      });
    });
    const labels = drawn.map((r) => `${hostOf.get(r.rank) ? `${hostOf.get(r.rank)} ` : ''}rank ${r.rank}`);
    makeChart('step', chartBox).setOption({
      animation: false,
      tooltip: {
        formatter: (p: { value: number[] }) => {
          const rank = drawn[p.value[0]];
          const kind = kinds[p.value[3]][0];
          const lane = rank[kind];
          return `${labels[p.value[0]]}: ${kind} ${p.value[1].toFixed(3)}-${p.value[2].toFixed(3)} ms<br>busy ${formatNs(lane.busy_ns)} of ${formatNs(rank.length_ns)} in the step` +
            (lane.gaps_closed_up_to_ns ? `<br>(gaps up to ${formatNs(lane.gaps_closed_up_to_ns)} closed to keep the lane small)` : '');
        },
      },
      grid: { left: 130, right: 30, top: 20, bottom: 60 },
      xAxis: { type: 'value', name: 'ms from the rank\'s start of the step', nameLocation: 'middle', nameGap: 26, min: 0 },
      yAxis: { type: 'category', data: labels, inverse: true, axisLabel: { fontSize: 10 } },
      dataZoom: [{ type: 'inside', filterMode: 'weakFilter' }, { type: 'slider', bottom: 6, filterMode: 'weakFilter' }],
      series: [
        {
          type: 'custom',
          progressive: 0, // all at once: a lane drawn in pieces reads as idle
          dimensions: ['lane', 'start', 'end', 'kind'],
          encode: { x: [1, 2], y: 0 },
          data,
          renderItem: (_p: unknown, api: { value: (i: number) => number; coord: (p: number[]) => number[]; size: (p: number[]) => number[]; style: () => object }) => {
            const lane = api.value(0);
            const start = api.coord([api.value(1), lane]);
            const end = api.coord([api.value(2), lane]);
            const band = api.size([0, 1])[1] * 0.9;
            const sub = api.value(3);
            return {
              type: 'rect',
              shape: { x: start[0], y: start[1] - band / 2 + (sub * band) / 3, width: Math.max(0.5, end[0] - start[0]), height: band / 3 },
              style: api.style(),
            };
          },
        },
      ],
    });
  },
};

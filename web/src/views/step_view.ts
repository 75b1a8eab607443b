// 3. Step overview (results.step_overview): one representative step, one lane per rank with its
// compute, communication and memory activity (idle is what is left), ranks grouped by host when
// there are many; exposed communication (step_overview's stretches) and pipeline bubbles
// (results.pipeline_bubbles) marked with their cause; zoom and pan; and the command that opens the
// same step in Perfetto.
import type { AnalyzeDocument, ReportDocument } from '../data';
import { result } from '../data';
import { makeChart, palette } from '../charts';
import { el, missing } from '../dom';
import { formatNs, formatRank } from '../format';
import { View } from '../view';

interface Lane { busy_ns: number; merged_intervals: number; gaps_closed_up_to_ns: number | null; intervals: [number, number][] }
interface Mark { span_ns: [number, number]; cause: string }
interface RankLanes {
  rank: number;
  start_ns: number;
  length_ns: number;
  compute: Lane;
  communication: Lane;
  memory: Lane;
  exposed_ns?: number;
  exposed?: Mark[];
  exposed_left_out?: number;
}
// What the step view reads of results.pipeline_bubbles (its spans are ns from origin_ns).
interface BubbleSource {
  origin_ns: number;
  pipelines: { stages: { rank: number; steps: { step: number; bubbles: Mark[]; bubbles_left_out: number }[] }[] }[];
}
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
// Past this many lanes, each is too thin to name: lanes are grouped by host.
const kLanesNamedEach = 64;
const kCausesShown = 12;
const kExposedColour = '#CC79A7'; // not communication's vermilion: the mark sits on that band
const kBubbleColour = 'rgba(120, 120, 120, 0.28)';

// The chosen step's pipeline bubbles per rank, moved onto the rank's lane (ns from its start_ns).
function bubblesOnLanes(doc: AnalyzeDocument, overview: StepOverview): Map<number, { marks: Mark[]; leftOut: number }> {
  const byRank = new Map<number, { marks: Mark[]; leftOut: number }>();
  const source = result<BubbleSource>(doc, 'pipeline_bubbles');
  if (!source || overview.step === null) return byRank;
  const startOf = new Map(overview.ranks.map((r) => [r.rank, r.start_ns]));
  for (const pipeline of source.pipelines)
    for (const stage of pipeline.stages) {
      const start = startOf.get(stage.rank);
      const step = stage.steps.find((s) => s.step === overview.step);
      if (start === undefined || !step) continue;
      const shift = source.origin_ns - start;
      byRank.set(stage.rank, {
        marks: step.bubbles.map((b) => ({ span_ns: [b.span_ns[0] + shift, b.span_ns[1] + shift], cause: b.cause })),
        leftOut: step.bubbles_left_out,
      });
    }
  return byRank;
}

// The marks by cause, longest first: what the step lost and to what.
function causesTable(kind: string, marks: Mark[]): HTMLElement {
  const byCause = new Map<string, { count: number; ns: number }>();
  for (const m of marks) {
    const entry = byCause.get(m.cause) ?? { count: 0, ns: 0 };
    entry.count += 1;
    entry.ns += m.span_ns[1] - m.span_ns[0];
    byCause.set(m.cause, entry);
  }
  const rows = [...byCause.entries()].sort((a, b) => b[1].ns - a[1].ns);
  const shown = rows.slice(0, kCausesShown);
  const rest = rows.slice(kCausesShown);
  return el(
    'table',
    { class: 'table', 'data-test': `step-${kind}-causes` },
    el('tr', {}, el('th', {}, `${kind} cause`), el('th', {}, 'marks'), el('th', {}, 'time (drawn ranks)')),
    ...shown.map(([cause, e]) => el('tr', {}, el('td', {}, cause), el('td', {}, String(e.count)), el('td', {}, formatNs(e.ns)))),
    rest.length === 0
      ? null
      : el('tr', {}, el('td', {}, `${rest.length} other causes`), el('td', {}, String(rest.reduce((n, [, e]) => n + e.count, 0))), el('td', {}, formatNs(rest.reduce((n, [, e]) => n + e.ns, 0)))),
  );
}

type Api = { value: (i: number) => number; coord: (p: number[]) => number[]; size: (p: number[]) => number[] };
// Bubbles fill the whole lane behind the work; exposed stretches outline the communication band.
function markSeries(items: { value: number[]; cause: string }[], colour: string, kind: 'bubble' | 'exposed') {
  return {
    type: 'custom',
    progressive: 0,
    z: kind === 'bubble' ? 1 : 3,
    dimensions: ['lane', 'start', 'end', 'band'],
    encode: { x: [1, 2], y: 0 },
    data: items,
    renderItem: (_p: unknown, api: Api) => {
      const lane = api.value(0);
      const start = api.coord([api.value(1), lane]);
      const end = api.coord([api.value(2), lane]);
      const band = api.size([0, 1])[1] * 0.9;
      const width = Math.max(1, end[0] - start[0]);
      if (kind === 'bubble') return { type: 'rect', shape: { x: start[0], y: start[1] - band / 2, width, height: band }, style: { fill: colour } };
      return {
        type: 'rect',
        shape: { x: start[0], y: start[1] - band / 2 + band / 3, width, height: band / 3 },
        style: { fill: colour, stroke: '#222222', lineWidth: 1 },
      };
    },
  };
}

// Every other host's lanes shaded behind them, so that a host's ranks read as one group.
function hostBands(groups: { first: number; last: number }[]) {
  return {
    type: 'custom',
    silent: true,
    z: 0,
    data: groups.map((g) => [g.first, g.last]),
    encode: { y: [0, 1] },
    renderItem: (params: { coordSys: { x: number; width: number } }, api: Api) => {
      const half = api.size([0, 1])[1] / 2;
      const top = api.coord([0, api.value(0)])[1] - half;
      const bottom = api.coord([0, api.value(1)])[1] + half;
      return { type: 'rect', shape: { x: params.coordSys.x, y: top, width: params.coordSys.width, height: bottom - top }, style: { fill: 'rgba(0, 0, 0, 0.06)' } };
    },
  };
}

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
    const ranks = [...overview.ranks].sort((a, b) => (hostOf.get(a.rank) ?? '').localeCompare(hostOf.get(b.rank) ?? '', 'en', { numeric: true }) || a.rank - b.rank);
    const drawn = ranks.slice(0, kMaxRanksDrawn);
    const stepText = overview.step === null ? 'each rank\'s whole GPU span' : `step ${overview.step} (${overview.chosen}), ${formatNs(overview.step_length_ns)}`;
    container.append(el('p', { class: 'identity', 'data-test': 'step-header' }, `${stepText}; lanes: compute, communication, memory; white is idle. Each rank from its own start of the step.`));
    if (drawn.length < ranks.length) container.append(el('p', {}, `The first ${drawn.length} of ${ranks.length} ranks (by host) are drawn.`));
    const runRanks = doc.run.ranks.length;
    if (overview.ranks.length < runRanks)
      container.append(el('p', { 'data-test': 'step-spread' }, `This page carries ${overview.ranks.length} of the run's ${runRanks} ranks, spread evenly over them (every host and stage shows); the JSON report has them all.`));
    // The steps the report found, found again: its --step-marker patterns, quoted for the shell.
    const dirs = ['DIR', ...(doc.run.step_markers ?? []).map((m) => `--step-marker '${m.replace(/'/g, "'\\''")}'`)].join(' ');
    const perfetto = overview.step === null ? `gpuxray export perfetto ${dirs} -o step.pftrace` : `gpuxray export perfetto ${dirs} --steps ${overview.step} -o step-${overview.step}.pftrace`;
    container.append(el('p', {}, 'The same window in Perfetto: ', el('code', { 'data-test': 'perfetto-command' }, perfetto)));
    const legend = el('div', { class: 'legend' }, ...kinds.map(([name, colour]) => {
      const swatch = el('span', { class: 'swatch' });
      swatch.style.background = colour;
      return el('span', {}, swatch, name);
    }), ...([['exposed communication', kExposedColour], ['bubble', kBubbleColour]] as const).map(([name, colour]) => {
      const swatch = el('span', { class: 'swatch' });
      swatch.style.background = colour;
      return el('span', {}, swatch, name);
    }));
    const chartBox = el('div', { class: 'chart', 'data-test': 'step-chart' });
    // Lanes 22 px high, or down to 6 px past 1400 px.
    chartBox.style.height = `${Math.max(Math.min(1400, 90 + drawn.length * 22), 90 + drawn.length * 6)}px`;
    container.append(legend, chartBox);

    // One item per lane band (rank x kind), drawn as one compound path of its intervals: a few
    // hundred elements instead of one per interval keep a 256-lane step quick to draw.
    const data: { value: [number, number, number, number] }[] = [];
    drawn.forEach((rank, lane) => {
      kinds.forEach((_kind, sub) => data.push({ value: [lane, 0, rank.length_ns / 1e6, sub] }));
    });
    // Marks: exposed communication on the communication band, bubbles shaded across the lane.
    const bubbles = bubblesOnLanes(doc, overview);
    type MarkItem = { value: [number, number, number, number]; cause: string };
    const exposedItems: MarkItem[] = [];
    const bubbleItems: MarkItem[] = [];
    let exposedLeftOut = 0;
    let bubblesLeftOut = 0;
    drawn.forEach((rank, lane) => {
      for (const m of rank.exposed ?? []) exposedItems.push({ value: [lane, m.span_ns[0] / 1e6, m.span_ns[1] / 1e6, 1], cause: m.cause });
      exposedLeftOut += rank.exposed_left_out ?? 0;
      const b = bubbles.get(rank.rank);
      for (const m of b?.marks ?? []) bubbleItems.push({ value: [lane, m.span_ns[0] / 1e6, m.span_ns[1] / 1e6, -1], cause: m.cause });
      bubblesLeftOut += b?.leftOut ?? 0;
    });
    const marksNote = el(
      'div',
      { class: 'step-marks', 'data-test': 'step-marks', 'data-exposed': String(exposedItems.length), 'data-bubbles': String(bubbleItems.length) },
      el(
        'p',
        {},
        drawn.some((r) => r.exposed !== undefined)
          ? `Exposed communication (no compute beside it, stretches of 10 us or more) in reddish purple, outlined, on the communication band: ${exposedItems.length} marked` +
              (exposedLeftOut > 0 ? `, ${exposedLeftOut} shorter ones left out` : '') + '. '
          : 'This report does not carry exposed-communication stretches (written by an older gpuxray). ',
        (result<BubbleSource>(doc, 'pipeline_bubbles')?.pipelines.length ?? 0) > 0 && overview.step !== null
          ? `Pipeline bubbles shaded grey across the lane: ${bubbleItems.length} marked` + (bubblesLeftOut > 0 ? ` (the longest per stage; ${bubblesLeftOut} slivers left out)` : '') + '.'
          : 'No pipeline bubbles: the run has no pipeline stages (results.pipeline_bubbles) or no steps.',
      ),
    );
    if (exposedItems.length > 0) marksNote.append(causesTable('exposed', exposedItems.map((i) => ({ span_ns: [i.value[1] * 1e6, i.value[2] * 1e6], cause: i.cause }))));
    if (bubbleItems.length > 0) marksNote.append(causesTable('bubble', bubbleItems.map((i) => ({ span_ns: [i.value[1] * 1e6, i.value[2] * 1e6], cause: i.cause }))));
    container.append(marksNote);

    const labels = drawn.map((r) => `${hostOf.get(r.rank) ? `${hostOf.get(r.rank)} ` : ''}${formatRank(r.rank)}`);
    // Many lanes: grouped by host, the host named once at its first lane, hosts on alternate shades.
    const grouped = drawn.length > kLanesNamedEach && hostOf.size > 0;
    const hostGroups: { host: string; first: number; last: number }[] = [];
    drawn.forEach((r, lane) => {
      const host = hostOf.get(r.rank) ?? '';
      const group = hostGroups[hostGroups.length - 1];
      if (group && group.host === host) group.last = lane;
      else hostGroups.push({ host, first: lane, last: lane });
    });
    const axisLabels = grouped
      ? drawn.map((_r, lane) => {
          const group = hostGroups.find((g) => g.first === lane);
          return group ? `${group.host} (${group.last - group.first + 1})` : '';
        })
      : labels;
    if (grouped)
      container.insertBefore(
        el('p', { 'data-test': 'step-grouping' }, `${drawn.length} lanes grouped by host: ${hostGroups.length} hosts, each named at its first lane with its lanes drawn (in brackets) and shaded alternately.`),
        legend,
      );
    makeChart('step', chartBox).setOption({
      animation: false,
      tooltip: {
        formatter: (p: { value: number[]; seriesIndex: number; data: { cause?: string } }) => {
          if (p.seriesIndex > 0)
            return `${labels[p.value[0]]}: ${p.seriesIndex === 1 ? 'bubble' : 'exposed communication'} ${p.value[1].toFixed(3)}-${p.value[2].toFixed(3)} ms` +
              `<br>cause: ${p.data.cause}`;
          const rank = drawn[p.value[0]];
          const kind = kinds[p.value[3]][0];
          const lane = rank[kind];
          return `${labels[p.value[0]]}: ${kind}, ${lane.intervals.length} intervals<br>busy ${formatNs(lane.busy_ns)} of ${formatNs(rank.length_ns)} in the step` +
            (lane.gaps_closed_up_to_ns ? `<br>(gaps up to ${formatNs(lane.gaps_closed_up_to_ns)} closed to keep the lane small)` : '');
        },
      },
      grid: { left: 130, right: 30, top: 20, bottom: 60 },
      xAxis: { type: 'value', name: 'ms from the rank\'s start of the step', nameLocation: 'middle', nameGap: 26, min: 0 },
      yAxis: { type: 'category', data: axisLabels, inverse: true, axisLabel: { fontSize: 10, interval: 0 }, axisTick: { show: !grouped } },
      dataZoom: [{ type: 'inside', filterMode: 'weakFilter' }, { type: 'slider', bottom: 6, filterMode: 'weakFilter' }],
      series: [
        {
          type: 'custom',
          progressive: 0, // all at once: a lane drawn in pieces reads as idle
          clip: true,
          dimensions: ['lane', 'start', 'end', 'kind'],
          encode: { x: [1, 2], y: 0 },
          data,
          renderItem: (params: { dataIndex: number }, api: Api) => {
            const lane = api.value(0);
            const sub = api.value(3);
            const band = api.size([0, 1])[1] * 0.9;
            const top = api.coord([0, lane])[1] - band / 2 + (sub * band) / 3;
            const paths = drawn[lane][kinds[sub][0]].intervals.map(([s, e]) => {
              const x0 = api.coord([s / 1e6, lane])[0];
              const x1 = api.coord([e / 1e6, lane])[0];
              return { type: 'rect', shape: { x: x0, y: top, width: Math.max(0.5, x1 - x0), height: band / 3 } };
            });
            return { type: 'compoundPath', shape: { paths }, style: { fill: kinds[sub][1] } };
          },
        },
        markSeries(bubbleItems, kBubbleColour, 'bubble'),
        markSeries(exposedItems, kExposedColour, 'exposed'),
        ...(grouped ? [hostBands(hostGroups.filter((_g, i) => i % 2 === 1))] : []),
      ],
    });
  },
};

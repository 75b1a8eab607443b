// 4. Pipeline (results.pipeline_bubbles): for one pipeline and one step, its stages over time: each
// stage's point-to-point operations with its neighbours, the micro-batches' forwards (F1..Fm) and
// backwards (B1..Bm) labelled in the order they cross, an arrow from each send to its receive, and
// the bubbles shaded and labelled with their cause; measured against theoretical bubble.
import type { AnalyzeDocument, ReportDocument } from '../data';
import { result } from '../data';
import { makeChart, palette } from '../charts';
import { el, missing, table } from '../dom';
import { formatNs, formatPct, formatRanks } from '../format';
import { View } from '../view';

type Span = [number, number];
interface Op { span_ns: Span; send: boolean; peer_rank: number; direction: 'forward' | 'backward' }
interface StageStep {
  step: number;
  window_ns: Span;
  micro_batches: number;
  compute_ns: number;
  bubble_ns: number;
  ops: Op[];
  bubbles: { span_ns: Span; cause: string }[];
  bubbles_left_out: number;
  bubbles_left_out_ns: number;
}
interface Pipeline {
  ranks: number[];
  stages_count: number;
  micro_batches: number;
  schedule: string;
  theoretical_bubble_pct: number;
  worst_bubble_pct: number;
  stages: { stage: number; rank: number; recorded: boolean; steps: StageStep[] }[];
  messages: { step: number; from_rank: number; to_rank: number; direction: string; send_ns: Span; receive_ns: Span }[];
}
interface StageSummary {
  pipeline_stages: number;
  stage: number;
  ranks: number[];
  step_ns: number;
  compute_per_micro_batch_ns: number;
  bubble_pct: number;
  theoretical_bubble_pct: number;
  waits_on_stage: number | null;
}
interface PipelineBubbles {
  problem: string | null;
  pipelines: Pipeline[];
  stage_summaries: StageSummary[];
  verdict: { bubble_pct: number; theoretical_bubble_pct: number; waiting_stages: number[]; main_cause: string; flagged: boolean } | null;
}

const causeColour = (cause: string) =>
  cause.startsWith('waiting') ? '#D55E00' : cause === 'warm-up' || cause === 'cool-down' ? '#E69F00' : cause.startsWith('host') ? '#CC79A7' : '#bbbbbb';

function drawStep(chartBox: HTMLElement, pipeline: Pipeline, step: number): void {
  const stages = pipeline.stages;
  // [lane, start ms, end ms, layer (0 window, 1 bubble, 2 operation, 3 message), what, label, lane the message reaches]
  type Item = { value: [number, number, number, number, string, string, number?]; itemStyle: object };
  const boxes: Item[] = [];
  const ms = (ns: number) => ns / 1e6;
  stages.forEach((stage, lane) => {
    const s = stage.steps.find((x) => x.step === step);
    if (!s) return;
    // The step's window as the stage's time: compute where no bubble is.
    boxes.push({ value: [lane, ms(s.window_ns[0]), ms(s.window_ns[1]), 0, 'step window', `compute ${formatNs(s.compute_ns)}, bubble ${formatNs(s.bubble_ns)}`], itemStyle: { color: 'rgba(0,158,115,0.35)' } });
    for (const b of s.bubbles) {
      boxes.push({ value: [lane, ms(b.span_ns[0]), ms(b.span_ns[1]), 1, `bubble: ${b.cause}`, formatNs(b.span_ns[1] - b.span_ns[0])], itemStyle: { color: causeColour(b.cause) } });
    }
    const counters = { forward: 0, backward: 0 };
    for (const op of s.ops) {
      // A micro-batch's forward leaves a stage by its send (or arrives by its receive on the last).
      const counts = op.direction === 'forward' ? op.send || lane === stages.length - 1 : op.send || lane === 0;
      const label = counts ? `${op.direction === 'forward' ? 'F' : 'B'}${++counters[op.direction]}` : '';
      boxes.push({
        value: [lane, ms(op.span_ns[0]), ms(op.span_ns[1]), 2, `${op.send ? 'send to' : 'receive from'} rank ${op.peer_rank} (${op.direction})`, label],
        itemStyle: { color: op.direction === 'forward' ? palette[0] : palette[1] },
      });
    }
  });
  const laneOf = new Map(stages.map((s, i) => [s.rank, i]));
  for (const m of pipeline.messages) {
    if (m.step !== step || !laneOf.has(m.from_rank) || !laneOf.has(m.to_rank)) continue;
    boxes.push({
      value: [laneOf.get(m.from_rank)!, ms(m.send_ns[0]), ms(m.receive_ns[1]), 3, `${m.direction} message rank ${m.from_rank} → rank ${m.to_rank}`, '', laneOf.get(m.to_rank)!],
      itemStyle: { color: m.direction === 'forward' ? palette[0] : palette[1] },
    });
  }
  // The axis spans the stages' windows of the step (not from a rounded tick far before it).
  const windows = stages.flatMap((st) => st.steps.filter((x) => x.step === step).map((x) => x.window_ns));
  const margin = windows.length ? (Math.max(...windows.map((w) => w[1])) - Math.min(...windows.map((w) => w[0]))) * 0.01 : 0;
  const axisMin = windows.length ? ms(Math.min(...windows.map((w) => w[0])) - margin) : undefined;
  const axisMax = windows.length ? ms(Math.max(...windows.map((w) => w[1])) + margin) : undefined;
  const labelBeside = pipeline.micro_batches <= 16;
  const chart = makeChart('pipeline', chartBox);
  chart.setOption({
    animation: false,
    tooltip: {
      formatter: (p: { value: unknown[] }) => `stage ${p.value[0]}: ${p.value[4]}<br>${formatNs(((p.value[2] as number) - (p.value[1] as number)) * 1e6)} from ${(p.value[1] as number).toFixed(2)} ms${p.value[5] ? `<br>${p.value[5]}` : ''}`,
    },
    grid: { left: 110, right: 30, top: 30, bottom: 70 },
    xAxis: { type: 'value', name: 'ms from the run\'s first GPU activity', nameLocation: 'middle', nameGap: 28, scale: true, min: axisMin, max: axisMax, axisLabel: { formatter: (v: number) => v.toFixed(0), showMinLabel: false, showMaxLabel: false } },
    yAxis: { type: 'category', data: stages.map((s) => `stage ${s.stage} (rank ${s.rank})`), inverse: true },
    dataZoom: [{ type: 'inside', filterMode: 'weakFilter' }, { type: 'slider', bottom: 8, filterMode: 'weakFilter' }],
    series: [
      {
        type: 'custom',
        name: 'stages',
        progressive: 0,
        dimensions: ['lane', 'start', 'end', 'layer', 'what', 'label', 'to_lane'],
        encode: { x: [1, 2], y: 0 },
        data: boxes,
        renderItem: (_params: unknown, api: { value: (i: number) => number; coord: (p: number[]) => number[]; size: (p: number[]) => number[]; style: () => object }) => {
          const lane = api.value(0);
          const start = api.coord([api.value(1), lane]);
          const end = api.coord([api.value(2), lane]);
          const band = api.size([0, 1])[1];
          const layer = api.value(3);
          const style = api.style() as { fill: string };
          if (layer === 3) {
            // From the send on one stage to the receive's end on the other, edge to edge of the lanes.
            const to = api.coord([api.value(2), api.value(6)]);
            const down = to[1] > start[1] ? 1 : -1;
            const y1 = start[1] + (down * band) / 4;
            const y2 = to[1] - (down * band) / 4;
            return {
              type: 'group',
              children: [
                { type: 'line', shape: { x1: start[0], y1, x2: to[0], y2 }, style: { stroke: style.fill, lineWidth: 1, opacity: 0.8 } },
                { type: 'polygon', shape: { points: [[to[0], y2], [to[0] - 3, y2 - down * 6], [to[0] + 3, y2 - down * 6]] }, style: { fill: style.fill } },
              ],
            };
          }
          // Operations: forwards in the upper half of the lane, backwards in the lower.
          const height = layer === 0 ? band * 0.8 : layer === 1 ? band * 0.5 : band * 0.22;
          const forward = String(api.value(4)).includes('(forward)');
          const y = layer === 2 ? start[1] + (forward ? -band * 0.26 : band * 0.04) : start[1] - height / 2;
          const width = Math.max(1, end[0] - start[0]);
          // A micro-batch's label inside its operation where it fits, else beside it (forwards above,
          // backwards below) while the micro-batches are few; m=96 leaves room for all only zoomed in.
          const label = layer === 2 ? String(api.value(5)) : '';
          const fits = label !== '' && width >= label.length * 6 + 2;
          const beside = label !== '' && !fits && labelBeside;
          return {
            type: 'rect',
            shape: { x: start[0], y, width, height },
            style,
            ...(fits ? { textContent: { style: { text: label, fontSize: 9, fill: '#fff' } }, textConfig: { position: 'inside' } } : {}),
            ...(beside ? { textContent: { style: { text: label, fontSize: 9, fill: '#222' } }, textConfig: { position: forward ? 'top' : 'bottom' } } : {}),
          };
        },
      },
    ],
  });
}

export const pipelineView: View = {
  id: 'pipeline',
  title: 'Pipeline',
  render(container: HTMLElement, report: ReportDocument) {
    const doc = report as AnalyzeDocument;
    const bubbles = result<PipelineBubbles>(doc, 'pipeline_bubbles');
    if (!bubbles || bubbles.pipelines.length === 0) {
      const why = bubbles?.problem ? `: ${bubbles.problem}` : ': the run has no pipeline stages (no point-to-point traffic between ranks in a chain)';
      container.append(missing('pipeline', `This report has no pipeline${why}.`));
      return;
    }
    const pipelineSelect = el('select', { 'data-test': 'pipeline' });
    bubbles.pipelines.slice(0, 64).forEach((p, i) => pipelineSelect.append(el('option', { value: String(i) }, `ranks ${p.ranks.join(' → ')}`)));
    const stepSelect = el('select', { 'data-test': 'pipeline-step' });
    const header = el('p', { class: 'identity', 'data-test': 'pipeline-header' });
    const chartBox = el('div', { class: 'chart', 'data-test': 'pipeline-chart' });
    const summaries = el('div');
    container.append(header, el('label', {}, 'pipeline ', pipelineSelect), ' ', el('label', {}, 'step ', stepSelect), chartBox, summaries);
    const legend = [
      ['forward (activations)', palette[0]], ['backward (gradients)', palette[1]], ['compute (step window)', 'rgba(0,158,115,0.5)'],
      ['bubble: waiting on a stage', '#D55E00'], ['bubble: warm-up / cool-down', '#E69F00'], ['bubble: host-bound', '#CC79A7'], ['bubble: other', '#bbbbbb'],
    ];
    container.insertBefore(el('div', { class: 'legend' }, ...legend.map(([name, colour]) => {
      const swatch = el('span', { class: 'swatch' });
      swatch.style.background = colour;
      return el('span', {}, swatch, name);
    })), chartBox);

    const show = () => {
      const pipeline = bubbles.pipelines[Number(pipelineSelect.value)];
      const steps = [...new Set(pipeline.stages.flatMap((s) => s.steps.map((x) => x.step)))].sort((a, b) => a - b);
      if (stepSelect.options.length !== steps.length) {
        stepSelect.replaceChildren(...steps.map((s) => el('option', { value: String(s) }, `step ${s}`)));
        stepSelect.value = String(steps[Math.floor(steps.length / 2)] ?? 0);
      }
      const rows = bubbles.stage_summaries.filter((s) => s.pipeline_stages === pipeline.stages_count);
      const waits = rows.filter((s) => s.waits_on_stage !== null).map((s) => `stage ${s.stage} waits on stage ${s.waits_on_stage}`);
      header.textContent =
        `p=${pipeline.stages_count}, m=${pipeline.micro_batches}, ${pipeline.schedule}: worst bubble ${formatPct(pipeline.worst_bubble_pct)} ` +
        `against ${formatPct(pipeline.theoretical_bubble_pct)} in theory ((p-1)/(m+p-1))` +
        (waits.length ? `; ${waits.join('; ')}` : '') +
        (bubbles.verdict ? `; main cause: ${bubbles.verdict.main_cause}` : '');
      drawStep(chartBox, pipeline, Number(stepSelect.value));
      summaries.replaceChildren(
        el('h3', {}, 'Stages (per step, averaged over data-parallel replicas)'),
        table(
          ['stage', 'ranks', 'compute / micro-batch', 'bubble', 'theoretical', 'waits on'],
          rows.map((s) => [String(s.stage), formatRanks(s.ranks), formatNs(s.compute_per_micro_batch_ns), formatPct(s.bubble_pct), formatPct(s.theoretical_bubble_pct), s.waits_on_stage === null ? '-' : `stage ${s.waits_on_stage}`]),
          { 'data-test': 'pipeline-stages' },
        ),
      );
    };
    pipelineSelect.addEventListener('change', () => {
      stepSelect.replaceChildren();
      show();
    });
    stepSelect.addEventListener('change', show);
    show();
  },
};

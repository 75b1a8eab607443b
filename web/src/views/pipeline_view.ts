// 4. Pipeline (results.pipeline_bubbles): for one pipeline and one step, the classic 1F1B picture:
// stages over time, each micro-batch's forward and backward compute a box per stage (F3, B3), an
// arrow from each send to its receive, the bubbles shaded and labelled with their cause; measured
// against theoretical bubble.
import type { AnalyzeDocument, ReportDocument } from '../data';
import { result } from '../data';
import { makeChart, palette } from '../charts';
import { el, missing, table } from '../dom';
import { formatNs, formatPct, formatRanks } from '../format';
import { View } from '../view';

type Span = [number, number];
interface Op { span_ns: Span; send: boolean; peer_rank: number; direction: 'forward' | 'backward' }
interface Block { span_ns: Span; direction: 'forward' | 'backward'; micro_batch: number }
interface StageStep {
  step: number;
  window_ns: Span;
  micro_batches: number;
  compute_ns: number;
  bubble_ns: number;
  ops: Op[];
  blocks: Block[];
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
  stages: { stage: number; rank: number; recorded: boolean; blocks_source: 'ranges' | 'between operations'; steps: StageStep[] }[];
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
// "waiting on stage 1 (downstream)" -> "waiting on stage 1": what fits in a bubble.
const shortCause = (cause: string) => cause.replace(/ \((upstream|downstream)\)$/, '');
// What fits in a narrow bubble: "wait s1", "DP tail", "host"; nothing for "other" (the tooltip names all).
const compactCause = (cause: string) =>
  cause.replace(/^waiting on stage (\d+)$/, 'wait s$1').replace('data-parallel/optimizer tail', 'DP tail').replace('host-bound launch', 'host').replace(/^other$/, '');
const blockLabel = (b: Block) => `${b.direction === 'forward' ? 'F' : 'B'}${b.micro_batch}`;
const colourOf = (direction: string) => (direction === 'forward' ? palette[0] : palette[4]);

// Layers of the one custom series, drawn in this order (later on top).
const enum Layer { Bubble = 0, Block = 1, Operation = 2, Message = 3 }

function drawStep(chartBox: HTMLElement, pipeline: Pipeline, step: number): void {
  const stages = pipeline.stages;
  // [lane, start ms, end ms, layer, what, label, lane the message reaches]
  type Item = { value: [number, number, number, Layer, string, string, number?]; itemStyle: object };
  const items: Item[] = [];
  const ms = (ns: number) => ns / 1e6;
  stages.forEach((stage, lane) => {
    const s = stage.steps.find((x) => x.step === step);
    if (!s) return;
    for (const b of s.bubbles) {
      items.push({ value: [lane, ms(b.span_ns[0]), ms(b.span_ns[1]), Layer.Bubble, `bubble: ${b.cause}`, shortCause(b.cause)], itemStyle: { color: causeColour(b.cause) } });
    }
    const how = stage.blocks_source === 'ranges' ? 'its kernels, launched in the range' : 'compute up to its end, between pipeline operations';
    for (const b of s.blocks) {
      const name = `${b.direction} of micro-batch ${b.micro_batch} (${how})`;
      items.push({ value: [lane, ms(b.span_ns[0]), ms(b.span_ns[1]), Layer.Block, name, blockLabel(b)], itemStyle: { color: colourOf(b.direction) } });
    }
    for (const op of s.ops) {
      items.push({
        value: [lane, ms(op.span_ns[0]), ms(op.span_ns[1]), Layer.Operation, `${op.send ? 'send to' : 'receive from'} rank ${op.peer_rank} (${op.direction})`, ''],
        itemStyle: { color: '#555' },
      });
    }
  });
  const laneOf = new Map(stages.map((s, i) => [s.rank, i]));
  for (const m of pipeline.messages) {
    if (m.step !== step || !laneOf.has(m.from_rank) || !laneOf.has(m.to_rank)) continue;
    items.push({
      value: [laneOf.get(m.from_rank)!, ms(m.send_ns[0]), ms(m.receive_ns[1]), Layer.Message, `${m.direction === 'forward' ? 'activation' : 'gradient'}: send on rank ${m.from_rank} → receive on rank ${m.to_rank}`, '', laneOf.get(m.to_rank)!],
      itemStyle: { color: m.direction === 'forward' ? palette[0] : palette[5] },
    });
  }
  items.sort((a, b) => a.value[3] - b.value[3]);
  // The axis spans the stages' windows of the step (not from a rounded tick far before it).
  const windows = stages.flatMap((st) => st.steps.filter((x) => x.step === step).map((x) => x.window_ns));
  const margin = windows.length ? (Math.max(...windows.map((w) => w[1])) - Math.min(...windows.map((w) => w[0]))) * 0.01 : 0;
  const axisMin = windows.length ? ms(Math.min(...windows.map((w) => w[0])) - margin) : undefined;
  const axisMax = windows.length ? ms(Math.max(...windows.map((w) => w[1])) + margin) : undefined;
  const chart = makeChart('pipeline', chartBox);
  chartBox.style.height = `${Math.max(260, 90 * stages.length + 100)}px`;
  chart.resize();
  chart.setOption({
    animation: false,
    tooltip: {
      formatter: (p: { value: unknown[] }) => `stage ${p.value[0]}: ${p.value[4]}<br>${formatNs(((p.value[2] as number) - (p.value[1] as number)) * 1e6)} from ${(p.value[1] as number).toFixed(2)} ms`,
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
        data: items,
        renderItem: (_params: unknown, api: { value: (i: number) => number; coord: (p: number[]) => number[]; size: (p: number[]) => number[]; style: () => object }) => {
          const lane = api.value(0);
          const start = api.coord([api.value(1), lane]);
          const end = api.coord([api.value(2), lane]);
          const band = api.size([0, 1])[1];
          const layer = api.value(3) as Layer;
          const style = api.style() as { fill: string };
          const width = Math.max(1, end[0] - start[0]);
          if (layer === Layer.Message) {
            // From the send on one stage to the receive's end on the other, between the boxes.
            const to = api.coord([api.value(2), api.value(6)]);
            const down = to[1] > start[1] ? 1 : -1;
            const y1 = start[1] + (down * band) * 0.3;
            const y2 = to[1] - (down * band) * 0.3;
            return {
              type: 'group',
              children: [
                { type: 'line', shape: { x1: start[0], y1, x2: to[0], y2 }, style: { stroke: style.fill, lineWidth: 1, opacity: 0.7 } },
                { type: 'polygon', shape: { points: [[to[0], y2], [to[0] - 3, y2 - down * 6], [to[0] + 3, y2 - down * 6]] }, style: { fill: style.fill } },
              ],
            };
          }
          if (layer === Layer.Operation) {
            // A thin strip at the lane's edge: upper edge for forwards' operations, lower for backwards'.
            const forward = String(api.value(4)).endsWith('(forward)');
            const y = start[1] + (forward ? -band * 0.3 : band * 0.26);
            return { type: 'rect', shape: { x: start[0], y, width, height: band * 0.04 }, style: { fill: style.fill, opacity: 0.6 } };
          }
          const label = String(api.value(5));
          if (layer === Layer.Bubble) {
            // Shaded behind the boxes, the full height between the strips; the cause where it fits.
            const height = band * 0.5;
            const fitting = [label, compactCause(label)].find((text) => text !== '' && width >= text.length * 5.5 + 4);
            return {
              type: 'rect',
              shape: { x: start[0], y: start[1] - height / 2, width, height },
              style: { fill: style.fill, opacity: 0.3 },
              ...(fitting ? { textContent: { style: { text: fitting, fontSize: 9, fill: '#333' } }, textConfig: { position: 'inside' } } : {}),
            };
          }
          // A micro-batch's pass: the label inside where it fits (zooming in shows the rest).
          const height = band * 0.44;
          const fits = width >= label.length * 6 + 2;
          return {
            type: 'rect',
            shape: { x: start[0], y: start[1] - height / 2, width, height },
            style: { fill: style.fill, stroke: '#fff', lineWidth: 0.5 },
            ...(fits ? { textContent: { style: { text: label, fontSize: 9, fill: '#fff' } }, textConfig: { position: 'inside' } } : {}),
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
    const source = el('p', { 'data-test': 'pipeline-source' });
    const chartBox = el('div', { class: 'chart', 'data-test': 'pipeline-chart' });
    const summaries = el('div');
    container.append(header, el('label', {}, 'pipeline ', pipelineSelect), ' ', el('label', {}, 'step ', stepSelect), source, chartBox, summaries);
    const legend = [
      ['forward of a micro-batch (F)', colourOf('forward')], ['backward (B)', colourOf('backward')], ['send or receive', '#555'],
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
      const sources = new Set(pipeline.stages.filter((st) => st.recorded).map((st) => st.blocks_source));
      const between = pipeline.stages.filter((st) => st.recorded && st.blocks_source === 'between operations').map((st) => st.stage);
      source.textContent = !sources.has('between operations')
        ? 'Boxes: each micro-batch\'s forward and backward, from the trace\'s forward#N / backward#N ranges (the GPU span of the kernels launched in each).'
        : `${sources.size > 1 ? `Stage${between.length > 1 ? 's' : ''} ${between.join(', ')} ha${between.length > 1 ? 've' : 's'}` : 'The trace has'} no forward#N / backward#N ranges: ` +
          'each box is the compute between two pipeline operations (a send, or a receive the stage waited for), named by the pass it ends with.';
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

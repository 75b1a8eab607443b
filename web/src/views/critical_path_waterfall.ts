// The summary's waterfall of a step's critical path (results.critical_path): what each nanosecond of
// the step waited on, one bar per cause (compute by kernel class), each starting where the one before
// ended, so that they add up to the step. Without the result, how to get it.
import type { AnalyzeDocument } from '../data';
import { result } from '../data';
import { makeChart, palette } from '../charts';
import { el, missing } from '../dom';
import { formatNs, formatPct } from '../format';

interface Attribution { cause: string; detail: string | null; kernel_class?: string; rank?: number | null; ns: number }
interface PathStep { rank?: number; step: number | null; step_ns: number; rank_changes?: number; attribution: Attribution[] }
interface CriticalPath { steps: PathStep[]; run_steps: PathStep[] }

const kBarsShown = 10;

function barOf(a: Attribution): string {
  if (a.cause === 'compute') return `compute: ${a.kernel_class ?? 'other'}`;
  if (a.cause === 'wait') return a.rank !== null && a.rank !== undefined ? `wait (rank ${a.rank})` : 'wait';
  return a.detail ? `${a.cause}: ${a.detail}` : a.cause;
}

function colourOf(bar: string): string {
  if (bar.startsWith('compute')) return palette[2];
  if (bar.startsWith('communication')) return palette[5];
  if (bar.startsWith('memory')) return palette[4];
  if (bar.startsWith('host') || bar.startsWith('launch')) return palette[3];
  if (bar.startsWith('synchronization') || bar.startsWith('wait')) return palette[1];
  return palette[7];
}

// The step shown: the step overview's (the median step) where the path has it, else the lower middle by length.
function chosenStep(doc: AnalyzeDocument, steps: PathStep[]): PathStep {
  const overviewStep = result<{ step: number | null }>(doc, 'step_overview')?.step;
  const same = steps.find((s) => s.step !== null && s.step === overviewStep);
  if (same) return same;
  const byLength = [...steps].sort((a, b) => a.step_ns - b.step_ns);
  return byLength[Math.floor((byLength.length - 1) / 2)];
}

export function criticalPathWaterfall(container: HTMLElement, doc: AnalyzeDocument): void {
  // A run without steps has one path over its whole span.
  const unit = doc.run.steps > 0 ? 'step' : 'run';
  container.append(el('h2', {}, `The critical path: what the ${unit} waited on`));
  const path = result<CriticalPath>(doc, 'critical_path');
  const steps = path ? (path.run_steps.length > 0 ? path.run_steps : path.steps) : [];
  if (steps.length === 0) {
    container.append(
      missing(
        'critical-path',
        path
          ? 'The critical path found no step to attribute (results.critical_path is empty).'
          : 'This report has no critical path (results.critical_path): run `gpuxray report DIR --critical-path -o report.html` ' +
            '(or `gpuxray analyze DIR --critical-path --html FILE`) to attribute each step to what it waited on and rank the findings by what fixing each saves.',
      ),
    );
    return;
  }
  const step = chosenStep(doc, steps);
  const byBar = new Map<string, { ns: number; details: Map<string, number> }>();
  for (const a of step.attribution) {
    const bar = barOf(a);
    const entry = byBar.get(bar) ?? { ns: 0, details: new Map<string, number>() };
    entry.ns += a.ns;
    if (a.detail) entry.details.set(a.detail, (entry.details.get(a.detail) ?? 0) + a.ns);
    byBar.set(bar, entry);
  }
  const sorted = [...byBar.entries()].sort((a, b) => b[1].ns - a[1].ns);
  const shown = sorted.slice(0, kBarsShown);
  const rest = sorted.slice(kBarsShown);
  if (rest.length > 0)
    shown.push([`${rest.length} other causes`, { ns: rest.reduce((n, [, e]) => n + e.ns, 0), details: new Map() }]);
  const total = shown.reduce((n, [, e]) => n + e.ns, 0);
  const onRanks = [...new Set(step.attribution.map((a) => a.rank).filter((r): r is number => r !== null && r !== undefined))].sort((a, b) => a - b);
  const where = step.rank !== undefined ? `rank ${step.rank}'s ` : 'the path across the ranks, ';
  const stepName = step.step === null ? 'the whole span' : `step ${step.step}`;
  container.append(
    el(
      'p',
      { 'data-test': 'critical-path-step' },
      `${stepName}, ${formatNs(step.step_ns)}: ${where}each nanosecond of the ${step.step === null ? 'span' : 'step'} attributed to one cause` +
        (onRanks.length > 0 ? `; it runs on rank${onRanks.length > 1 ? 's' : ''} ${onRanks.join(', ')}` : '') +
        (step.rank_changes !== undefined && step.rank_changes > 0 ? `, changing rank ${step.rank_changes} times` : '') + '.',
    ),
  );
  const box = el('div', { class: 'chart', 'data-test': 'critical-path-chart' });
  box.style.height = `${80 + (shown.length + 1) * 26}px`;
  container.append(box);

  const labels = [...shown.map(([bar]) => bar), 'the step'];
  const ms = (ns: number) => ns / 1e6;
  let before = 0;
  const bases: number[] = [];
  const values: { value: number; itemStyle: { color: string } }[] = [];
  for (const [bar, entry] of shown) {
    bases.push(ms(before));
    values.push({ value: ms(entry.ns), itemStyle: { color: colourOf(bar) } });
    before += entry.ns;
  }
  bases.push(0);
  values.push({ value: ms(total), itemStyle: { color: '#333333' } });
  const detailsOf = (index: number): string => {
    const details = [...(shown[index]?.[1].details.entries() ?? [])].sort((a, b) => b[1] - a[1]).slice(0, 3);
    return details.map(([name, ns]) => `<br>${name.length > 80 ? `${name.slice(0, 77)}...` : name}: ${formatNs(ns)}`).join('');
  };
  makeChart('critical-path', box).setOption({
    animation: false,
    grid: { left: 260, right: 90, top: 10, bottom: 40 },
    tooltip: {
      trigger: 'item',
      formatter: (p: { dataIndex: number; seriesIndex: number }) => {
        const ns = values[p.dataIndex].value * 1e6;
        return `${labels[p.dataIndex]}: ${formatNs(ns)}, ${formatPct((100 * ns) / step.step_ns)} of the step${detailsOf(p.dataIndex)}`;
      },
    },
    xAxis: { type: 'value', name: 'ms into the step', nameLocation: 'middle', nameGap: 24, max: ms(Math.max(total, step.step_ns)), axisLabel: { showMaxLabel: false } },
    yAxis: {
      type: 'category',
      inverse: true,
      data: labels,
      axisLabel: { width: 250, overflow: 'truncate', fontSize: 11 },
    },
    series: [
      // The invisible base each bar stands on: where the bars before it ended.
      { type: 'bar', stack: 'waterfall', silent: true, itemStyle: { color: 'transparent' }, data: bases },
      {
        type: 'bar',
        stack: 'waterfall',
        name: 'critical path',
        data: values,
        label: { show: true, position: 'right', formatter: (p: { value: number }) => formatNs(p.value * 1e6), fontSize: 10 },
      },
    ],
  });
}

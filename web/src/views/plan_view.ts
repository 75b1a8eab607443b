// 8. Plan (`gpuxray plan --html`): the strategies ranked by predicted step time, each step split
// into bubble, exposed communication and the rest, and its memory per GPU by category.
import type { PlanDocument, ReportDocument, Table } from '../data';
import { makeChart, palette } from '../charts';
import { el, missing, table } from '../dom';
import { formatCell } from '../format';
import { View } from '../view';

function firstTable(doc: PlanDocument, section: string): Table | undefined {
  const tables = doc.sections[section]?.tables;
  return tables ? Object.values(tables)[0] : undefined;
}

function rowsTable(t: Table, attributes: Record<string, string>): HTMLTableElement {
  const columns = Object.keys(t.rows[0] ?? {});
  return table(columns, t.rows.map((row) => columns.map((c) => formatCell(row[c], t.units[c]))), attributes);
}

const memoryCategories: [string, string][] = [
  ['weights_bytes', 'weights'],
  ['gradients_bytes', 'gradients'],
  ['optimizer_bytes', 'optimizer state'],
  ['activations_bytes', 'activations'],
  ['workspace_bytes', 'workspace'],
];

export const planView: View = {
  id: 'plan',
  title: 'Plan',
  render(container: HTMLElement, report: ReportDocument) {
    if (report.schema !== 'gpuxray.plan') {
      container.append(missing('plan', 'This is the report of a run; `gpuxray plan ... --html FILE` writes the planner\'s view.'));
      return;
    }
    const doc = report as PlanDocument;
    container.append(el('p', { class: 'identity' }, doc.title), el('ul', {}, ...doc.notes.map((n) => el('li', {}, n))));
    const ranking = firstTable(doc, 'plan');
    if (!ranking || ranking.rows.length === 0) {
      container.append(missing('plan', 'The plan ranks no strategy.'));
      return;
    }
    const strategies = ranking.rows.map((r) => String(r.strategy));
    container.append(el('h2', {}, 'Predicted step time'));
    const timeBox = el('div', { class: 'chart', 'data-test': 'plan-time' });
    container.append(timeBox);
    const stepMs = ranking.rows.map((r) => Number(r.step_time_ns) / 1e6);
    const share = (key: string) => ranking.rows.map((r, i) => (stepMs[i] * Number(r[key])) / 100);
    const bubble = share('bubble_pct');
    const exposed = share('exposed_comm_pct');
    const rest = stepMs.map((s, i) => s - bubble[i] - exposed[i]);
    const bars = (name: string, data: number[]) => ({ name, type: 'bar', stack: 'step', data, emphasis: { focus: 'series' } });
    makeChart('plan-time', timeBox).setOption({
      animation: false,
      color: [palette[2], palette[5], palette[7]],
      legend: { top: 5 },
      tooltip: { trigger: 'axis', valueFormatter: (v: unknown) => `${(v as number).toFixed(2)} ms` },
      grid: { left: 260, right: 30, top: 40, bottom: 30 },
      xAxis: { type: 'value', name: 'ms per step' },
      yAxis: { type: 'category', data: strategies, inverse: true, axisLabel: { fontSize: 10 } },
      series: [bars('compute and the rest', rest), bars('exposed communication', exposed), bars('pipeline bubble', bubble)],
    });
    container.append(missing('plan-split', 'The plan does not split exposed communication into TP, PP and DP: it is shown as one.'));

    const memory = firstTable(doc, 'plan_memory');
    container.append(el('h2', {}, 'Memory per GPU'));
    if (!memory || memory.rows.length === 0) {
      container.append(missing('plan-memory', 'The plan has no memory table.'));
    } else {
      const memoryBox = el('div', { class: 'chart', 'data-test': 'plan-memory' });
      container.append(memoryBox);
      const GiB = 1024 ** 3;
      makeChart('plan-memory', memoryBox).setOption({
        animation: false,
        color: palette,
        legend: { top: 5 },
        tooltip: { trigger: 'axis', valueFormatter: (v: unknown) => `${(v as number).toFixed(2)} GiB` },
        grid: { left: 260, right: 30, top: 40, bottom: 30 },
        xAxis: { type: 'value', name: 'GiB per GPU' },
        yAxis: { type: 'category', data: memory.rows.map((r) => String(r.strategy)), inverse: true, axisLabel: { fontSize: 10 } },
        series: memoryCategories.map(([key, name]) => ({
          name,
          type: 'bar',
          stack: 'memory',
          data: memory.rows.map((r) => Number(r[key]) / GiB),
        })),
      });
    }
    container.append(el('h2', {}, 'Ranking'), rowsTable(ranking, { 'data-test': 'plan-table' }));
    for (const [id, section] of Object.entries(doc.sections)) {
      if (id === 'plan') continue;
      container.append(el('h2', {}, section.title), ...section.notes.map((n) => el('p', {}, n)));
      for (const t of Object.values(section.tables)) if (t.rows.length > 0) container.append(rowsTable(t, {}));
    }
  },
};

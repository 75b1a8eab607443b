// Comparison page (`gpuxray diff --html`), view 1: what changed between before and after — the step
// time verdict, the findings resolved, new and still there, and the changed rows of the diff's tables
// (collectives, link groups, time attribution, exposed communication per role, pipelines), kernels
// and ops, all as the diff document (gpuxray.diff, docs/diff.md) has them.
import type { DiffActivity, DiffPage, DiffRow, DiffTable, ReportDocument } from '../data';
import { el, missing, table } from '../dom';
import { formatBytes, formatCell, formatNs } from '../format';
import { View } from '../view';

const kActivitiesShown = 15;
const kRowsShown = 12;

function delta(before: number | null | undefined, after: number | null | undefined, unit: string): string {
  if (before === null || before === undefined || after === null || after === undefined) return '';
  const change = after - before;
  // A percentage's change is in points; a relative change of it would read as a second percentage.
  const relative = before !== 0 && unit !== 'percent' ? ` (${change >= 0 ? '+' : ''}${((100 * change) / Math.abs(before)).toFixed(1)} %)` : '';
  const sign = change > 0 ? '+' : change < 0 ? '-' : '';
  if (unit === 'percent') return `${sign}${Math.abs(change).toFixed(1)} points`;
  return `${sign}${formatCell(Math.abs(change), unit)}${relative}`;
}

// The largest relative change of a row over its values (1 = doubled or halved... 0 = the same).
function rowChange(r: DiffRow, values: string[]): number {
  if (r.change === 'new' || r.change === 'gone') return Infinity;
  let most = 0;
  for (const v of values) {
    const b = r.before[v];
    const a = r.after[v];
    if (b === null || b === undefined || a === null || a === undefined || a === b) continue;
    most = Math.max(most, Math.abs(a - b) / Math.max(Math.abs(a), Math.abs(b)));
  }
  return most;
}

function valueCell(before: number | null | undefined, after: number | null | undefined, unit: string): string {
  if (before === after) return formatCell(before, unit);
  if (before === null || before === undefined || after === null || after === undefined) return `${formatCell(before, unit)} -> ${formatCell(after, unit)}`;
  return `${formatCell(before, unit)} -> ${formatCell(after, unit)} (${delta(before, after, unit)})`;
}

// A diff table's rows that changed, the largest relative change first (at most kRowsShown; the rest
// and the rows that stayed the same counted): one cell per value, "before -> after (change)".
export function diffTable(id: string, t: DiffTable): HTMLElement {
  const values = Object.keys(t.units);
  const keys = Object.keys(t.rows[0]?.key ?? {});
  const changed = t.rows.map((r) => ({ r, by: rowChange(r, values) })).filter((x) => x.by > 0).sort((a, b) => b.by - a.by);
  const shown = changed.slice(0, kRowsShown).map((x) => x.r);
  const box = el('div', { 'data-test': `diff-table-${id}` }, el('h3', {}, t.title));
  if (shown.length === 0) {
    box.append(el('p', {}, `No change in its ${t.rows.length} row${t.rows.length === 1 ? '' : 's'}.`));
    return box;
  }
  const rows = shown.map((r) => [...keys.map((k) => r.key[k] ?? ''), r.change, ...values.map((v) => valueCell(r.before[v], r.after[v], t.units[v]))]);
  box.append(table([...keys, 'change', ...values.map((v) => `${v}: before -> after`)], rows, { class: 'diff' }));
  const rest = changed.length - shown.length;
  const same = t.rows.length - changed.length;
  if (rest > 0 || same > 0) box.append(el('p', {}, [rest > 0 ? `${rest} more changed rows (smaller changes)` : '', same > 0 ? `${same} rows the same` : ''].filter(Boolean).join('; ') + '.'));
  return box;
}

function activities(title: string, list: DiffActivity[], testId: string): HTMLElement {
  const changed = list.filter((a) => a.change !== 'same' || a.per_step_after_ns !== a.per_step_before_ns);
  const shown = changed.slice(0, kActivitiesShown);
  const box = el('div', { 'data-test': testId }, el('h3', {}, `${title}: the ${shown.length} largest changes per step (of ${list.length})`));
  if (shown.length === 0) box.append(el('p', {}, 'No change.'));
  else
    box.append(
      table(
        ['name', 'change', 'per step before', 'after', 'change', 'count before', 'after'],
        shown.map((a) => [a.name.slice(0, 110), a.change, formatNs(a.per_step_before_ns), formatNs(a.per_step_after_ns), delta(a.per_step_before_ns, a.per_step_after_ns, 'ns'), String(a.count_before), String(a.count_after)]),
        { class: 'diff' },
      ),
    );
  return box;
}

export const diffSummaryView: View = {
  id: 'changes',
  title: 'What changed',
  render(container: HTMLElement, report: ReportDocument) {
    const diff = (report as DiffPage).diff;
    const s = diff.steps;
    container.append(
      el('p', { class: 'identity', 'data-test': 'diff-identity' }, `before: ${diff.before.path} (${diff.before.kind}); after: ${diff.after.path} (${diff.after.kind})`),
      el(
        'p',
        { class: 'limiter', 'data-test': 'diff-steps' },
        `step time (median, slowest rank): ${formatNs(s.before.median_ns)} -> ${formatNs(s.after.median_ns)} ${delta(s.before.median_ns, s.after.median_ns, 'ns')}; ` +
          `verdict: ${s.verdict} (noise ${formatNs(s.noise_ns)}); tokens/s ${s.before.tokens_per_s?.toFixed(0) ?? 'not recorded'} -> ${s.after.tokens_per_s?.toFixed(0) ?? 'not recorded'}`,
      ),
    );
    if (diff.identical) container.append(el('p', {}, 'The two runs are the same: nothing changed.'));
    for (const line of [...diff.notes, ...diff.warnings]) container.append(el('p', { class: 'missing' }, line));

    container.append(el('h2', {}, 'Findings'));
    const order = { resolved: 0, new: 1, still: 2 };
    const findings = [...diff.findings].sort((a, b) => order[a.status] - order[b.status]);
    container.append(
      findings.length === 0
        ? el('p', {}, 'No findings on either side.')
        : table(['status', 'severity', 'analysis', 'finding'], findings.map((f) => [f.status, f.severity, f.analysis, (f.after ?? f.before) ?? '']), { 'data-test': 'diff-findings' }),
    );

    container.append(el('h2', {}, 'Collectives, links, time'));
    for (const [id, t] of Object.entries(diff.tables)) if (id !== 'links') container.append(diffTable(id, t));
    if (Object.keys(diff.tables).length === 0) container.append(missing('changes', 'No result both sides have to compare row by row.'));
    container.append(el('h2', {}, 'Kernels and ops'), activities('Kernels', diff.kernels, 'diff-kernels'), activities('Ops', diff.ops, 'diff-ops'));
    const m = diff.memory;
    container.append(
      el('h2', {}, 'Memory peak'),
      el('p', {}, `before: ${m.before ? `${formatBytes(m.before.peak_bytes)} on rank ${m.before.rank} in ${m.before.phase}` : 'not recorded'}; after: ${m.after ? `${formatBytes(m.after.peak_bytes)} on rank ${m.after.rank} in ${m.after.phase}` : 'not recorded'}`),
    );
  },
};

// 1. Summary: the run's identity, the findings ranked by what they cost per step (each linked to the
// view that shows it), the critical path's waterfall, the warnings and the stats of what was dropped or estimated.
import type { AnalyzeDocument, ReportDocument } from '../data';
import { el, missing, table } from '../dom';
import { formatCount, formatNs } from '../format';
import { View, ViewContext, viewOfAnalysis } from '../view';
import { criticalPathWaterfall } from './critical_path_waterfall';

function identity(doc: AnalyzeDocument): string {
  const run = doc.run;
  const hosts = run.hosts.length === 1 ? '1 host' : `${run.hosts.length} hosts`;
  // The report writes 0 for a world size the trace does not record (a PyTorch trace without
  // distributedInfo): say so rather than "1 of 0 ranks".
  const ranks =
    run.world_size > 0
      ? `${run.ranks.length} of ${run.world_size} ranks`
      : `${run.ranks.length} ${run.ranks.length === 1 ? 'rank' : 'ranks'} (world size not recorded)`;
  return (
    `run ${run.run_id}: ${ranks} on ${hosts}, ` +
    `${run.steps} steps (${run.step_source}), ${formatNs(run.span_ns)} captured, ${formatCount(run.records)} records`
  );
}

export const summaryView: View = {
  id: 'summary',
  title: 'Summary',
  render(container: HTMLElement, report: ReportDocument, context: ViewContext) {
    if (report.schema !== 'gpuxray.analyze') return;
    const doc = report as AnalyzeDocument;
    container.append(el('p', { class: 'identity', 'data-test': 'identity' }, identity(doc)));

    // With the critical path's what-if, what fixing a finding saves ranks it; those without a saving
    // follow, by what they cost.
    const withSavings = doc.findings.some((f) => f.saves_ns !== undefined);
    container.append(
      el('h2', {}, withSavings ? 'Findings, by what fixing each would save per step' : 'Findings, most costly first'),
    );
    const findings = [...doc.findings].sort((a, b) =>
      withSavings && (a.saves_ns !== undefined || b.saves_ns !== undefined)
        ? (b.saves_ns ?? -1) - (a.saves_ns ?? -1)
        : b.cost_ns - a.cost_ns,
    );
    if (findings.length === 0) {
      container.append(el('p', {}, 'No findings: nothing the analyses check for costs this run time.'));
    } else {
      const rows = findings.map((finding) => {
        const target = viewOfAnalysis(finding.analysis);
        const link = el('a', { href: `#${target}`, class: 'view-link' }, finding.summary);
        link.addEventListener('click', (event) => {
          event.preventDefault();
          context.open(target, finding.analysis);
        });
        const evidence = el('ul', { class: 'evidence' }, ...finding.evidence.map((line) => el('li', {}, line)));
        const row = [
          el('span', { class: `severity ${finding.severity}` }, finding.severity),
          formatNs(finding.cost_ns),
          el('div', {}, link, evidence),
          finding.analysis,
        ];
        if (withSavings)
          row.splice(2, 0, finding.saves_ns !== undefined ? formatNs(finding.saves_ns) : 'not computed');
        return row;
      });
      // A run without steps has its findings' costs over the whole trace (report::Finding::cost_ns).
      const per = doc.run.steps > 0 ? ' / step' : ' (whole trace)';
      const headers = withSavings
        ? ['severity', `cost${per}`, `fixing it saves${per}`, 'finding', 'analysis']
        : ['severity', `cost${per}`, 'finding', 'analysis'];
      container.append(table(headers, rows, { class: 'findings', 'data-test': 'findings' }));
    }

    criticalPathWaterfall(container, doc);

    const page = doc.results?.html_page as { left_out: string[] } | undefined;
    if (page && page.left_out.length > 0) {
      container.append(el('h2', {}, 'Left out of this page (the JSON report has it all)'));
      container.append(el('ul', { 'data-test': 'page-left-out' }, ...page.left_out.map((line) => el('li', {}, line))));
    }
    container.append(el('h2', {}, 'Warnings'));
    if (doc.warnings.length === 0) container.append(el('p', {}, 'None.'));
    else container.append(el('ul', { class: 'warnings' }, ...doc.warnings.map((w) => el('li', {}, w))));
    if (doc.violations && doc.violations.length > 0) {
      container.append(el('h2', {}, 'Thresholds violated'));
      container.append(el('ul', { class: 'warnings' }, ...doc.violations.map((w) => el('li', {}, w))));
    }
    if (doc.stats && doc.stats.length > 0) {
      container.append(el('h2', {}, 'Stats: what was dropped, skipped or estimated'));
      container.append(
        table(
          ['stat', 'severity', 'count', 'description'],
          doc.stats.map((s) => [s.name, s.severity, formatCount(s.value), s.description]),
        ),
      );
    }
    if (Object.keys(doc.results ?? {}).length === 0)
      container.append(missing('results', 'This report has no typed results (schema version 1?): most views need them.'));
  },
};

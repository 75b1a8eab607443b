// Views whose typed results the analyzer does not produce yet: each says what it lacks.
import type { AnalyzeDocument, ReportDocument } from '../data';
import { missing } from '../dom';
import { View } from '../view';

function needing(id: string, title: string, key: string, what: string): View {
  return {
    id,
    title,
    render(container: HTMLElement, report: ReportDocument) {
      const doc = report as AnalyzeDocument;
      if (doc.results?.[key] === undefined)
        container.append(missing(id, `This report has no ${what} (results.${key} is absent).`));
    },
  };
}

export const opsView = needing('ops', 'Ops ↔ kernels', 'ops', 'op tree');

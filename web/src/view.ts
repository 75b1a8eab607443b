// A view of the page: a tab that draws one part of the report when first shown.
import type { ReportDocument } from './data';

export interface ViewContext {
  // Shows another view (and, with `focus`, what in it: a kernel name, a rank).
  open(view: string, focus?: string): void;
}

export interface View {
  id: string;
  title: string;
  // Draws into `container` (empty); `focus` as given to open().
  render(container: HTMLElement, doc: ReportDocument, context: ViewContext, focus?: string): void;
}

// Which view shows what an analysis (its section id) found.
export function viewOfAnalysis(analysis: string): string {
  switch (analysis) {
    case 'link_hotspots':
    case 'collective_bandwidth':
    case 'collectives':
    case 'communicators':
    case 'topology':
      return 'topology';
    case 'pipeline_bubbles':
      return 'pipeline';
    case 'kernels':
      return 'sm';
    case 'kernel_metrics':
      return 'hierarchy';
    case 'memory':
      return 'memory';
    case 'ops':
      return 'ops';
    default:
      return 'step';
  }
}

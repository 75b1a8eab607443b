// Comparison page, view 3: the step overview of before and of after side by side, each drawn by the
// step view (its representative step, lanes per rank, exposed communication and bubbles marked).
import type { DiffPage, ReportDocument } from '../data';
import { drawnAs } from '../charts';
import { el } from '../dom';
import { View, ViewContext } from '../view';
import { stepView } from './step_view';

export const diffStepView: View = {
  id: 'step',
  title: 'Step overview before and after',
  render(container: HTMLElement, report: ReportDocument, context: ViewContext) {
    const page = report as DiffPage;
    const sides = el('div', { class: 'sides' });
    container.append(sides);
    for (const [name, doc] of [['before', page.before], ['after', page.after]] as const) {
      const side = el('div', { class: 'side', 'data-side': name }, el('h3', {}, name));
      sides.append(side);
      drawnAs(`${name}-`, () => stepView.render(side, doc, context));
    }
  },
};

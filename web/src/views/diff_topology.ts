// Comparison page, view 2: the links before and after — each link's change (the diff's `links`
// table, with the slow-link verdict of each side), then both sides' topologies, one above the
// other, drawn by the topology view.
import type { DiffPage, ReportDocument } from '../data';
import { result } from '../data';
import { drawnAs } from '../charts';
import { el, missing } from '../dom';
import { View, ViewContext } from '../view';
import { diffTable } from './diff_summary';
import { topologyView } from './topology_view';

type SlowLinks = { links: { host: string; name: string; slow: boolean }[] };

function slowOn(doc: DiffPage['before']): Set<string> {
  const links = result<SlowLinks>(doc, 'link_hotspots')?.links ?? [];
  return new Set(links.filter((l) => l.slow).map((l) => `${l.host} ${l.name}`));
}

export const diffTopologyView: View = {
  id: 'topology',
  title: 'Links before and after',
  render(container: HTMLElement, report: ReportDocument, context: ViewContext) {
    const page = report as DiffPage;
    const links = page.diff.tables.links;
    if (!links) {
      container.append(missing('topology', 'The comparison has no links table: a side has no link result (results.link_hotspots).'));
      return;
    }
    const before = slowOn(page.before);
    const after = slowOn(page.after);
    const slowLines = [...new Set([...before, ...after])].map((link) =>
      el('li', { 'data-test': 'diff-slow-link', 'data-link': link }, `${link}: ${before.has(link) ? 'slow' : 'not slow'} before, ${after.has(link) ? 'slow' : 'not slow'} after`),
    );
    container.append(el('h3', {}, 'Links the slow-link analysis names'), slowLines.length > 0 ? el('ul', {}, ...slowLines) : el('p', {}, 'None on either side.'));
    container.append(diffTable('links', links));
    // One above the other: a topology needs the page's width.
    for (const [name, doc] of [['before', page.before], ['after', page.after]] as const) {
      const side = el('div', { class: 'side', 'data-side': name }, el('h2', {}, `Topology ${name}`));
      container.append(side);
      drawnAs(`${name}-`, () => topologyView.render(side, doc, context));
    }
  },
};

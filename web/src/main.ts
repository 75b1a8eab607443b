// The page: reads the embedded report, draws a tab per view, and draws each view when first opened
// (a report of 1024 ranks stays quick to open). `window.gpuxray` exposes what was drawn, for the
// browser tests and the benchmark (web/test/).
import style from './style.css';
import { charts, resizeCharts } from './charts';
import { readDocument, ReportDocument } from './data';
import { el } from './dom';
import { View, ViewContext } from './view';
import { summaryView } from './views/summary';
import { smView } from './views/sm_view';
import { memoryView } from './views/memory_view';
import { hierarchyView } from './views/hierarchy_view';
import { planView } from './views/plan_view';
import { opsView } from './views/ops_view';
import { stepView } from './views/step_view';
import { pipelineView } from './views/pipeline_view';
import { topologyView } from './views/topology_view';
import { diffSummaryView } from './views/diff_summary';
import { diffTopologyView } from './views/diff_topology';
import { diffStepView } from './views/diff_step';

declare global {
  interface Window {
    gpuxray: { ready: boolean; readyMs: number; view: string; charts: typeof charts; error?: string };
  }
}

const analyzeViews: View[] = [summaryView, topologyView, stepView, pipelineView, smView, hierarchyView, memoryView, opsView];
const planViews: View[] = [planView];
const diffViews: View[] = [diffSummaryView, diffTopologyView, diffStepView];

function start(): void {
  document.head.append(el('style', {}, style));
  const app = document.getElementById('app')!;
  window.gpuxray = { ready: false, readyMs: 0, view: '', charts };
  let doc: ReportDocument;
  try {
    doc = readDocument();
  } catch (error) {
    const message = (error as Error).message;
    window.gpuxray.error = message;
    app.replaceChildren(el('p', { class: 'error' }, `gpuxray report: ${message}`));
    throw error;
  }
  const views = doc.schema === 'gpuxray.plan' ? planViews : doc.schema === 'gpuxray.diff_page' ? diffViews : analyzeViews;
  const title =
    doc.schema === 'gpuxray.plan' ? 'gpuxray plan'
    : doc.schema === 'gpuxray.diff_page' ? `gpuxray diff: ${doc.diff.before.path} -> ${doc.diff.after.path}`
    : `gpuxray X-ray: ${doc.run.run_id}`;
  const nav = el('nav', { class: 'tabs' });
  const main = el('main');
  app.replaceChildren(el('header', {}, el('h1', {}, title), nav), main);

  const panels = new Map<string, HTMLElement>();
  const drawn = new Set<string>();
  const context: ViewContext = { open: (id, focus) => show(id, focus) };
  function show(id: string, focus?: string): void {
    const view = views.find((v) => v.id === id) ?? views[0];
    for (const [viewId, panel] of panels) panel.hidden = viewId !== view.id;
    for (const tab of nav.querySelectorAll('a')) tab.classList.toggle('active', tab.dataset.view === view.id);
    const panel = panels.get(view.id)!;
    const wasDrawn = drawn.has(view.id) && focus === undefined;
    if (!wasDrawn) {
      panel.replaceChildren(el('h2', { class: 'view-title' }, view.title));
      view.render(panel, doc, context, focus);
      drawn.add(view.id);
    }
    if (wasDrawn) resizeCharts(panel);
    window.gpuxray.view = view.id;
    if (location.hash !== `#${view.id}`) history.replaceState(null, '', `#${view.id}`);
  }
  for (const view of views) {
    const tab = el('a', { href: `#${view.id}`, 'data-view': view.id }, view.title);
    tab.addEventListener('click', (event) => {
      event.preventDefault();
      show(view.id);
    });
    nav.append(tab);
    const panel = el('section', { class: 'view', id: `view-${view.id}`, 'data-view': view.id });
    panel.hidden = true;
    panels.set(view.id, panel);
    main.append(panel);
  }
  window.addEventListener('resize', () => resizeCharts());
  show(location.hash.slice(1) || views[0].id);
  requestAnimationFrame(() => {
    window.gpuxray.ready = true;
    window.gpuxray.readyMs = performance.now();
  });
}

start();

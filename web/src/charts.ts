// The parts of Apache ECharts the views use (tree-shaken: the bundle carries only these), drawn on
// canvas so that 10^5 points stay fast.
import * as echarts from 'echarts/core';
import { BarChart, CustomChart, GraphChart, HeatmapChart, LineChart } from 'echarts/charts';
import {
  DataZoomComponent,
  GraphicComponent,
  GridComponent,
  LegendComponent,
  MarkAreaComponent,
  MarkLineComponent,
  MarkPointComponent,
  TitleComponent,
  TooltipComponent,
  VisualMapComponent,
} from 'echarts/components';
import { CanvasRenderer } from 'echarts/renderers';

echarts.use([
  BarChart,
  CustomChart,
  GraphChart,
  HeatmapChart,
  LineChart,
  DataZoomComponent,
  GraphicComponent,
  GridComponent,
  LegendComponent,
  MarkAreaComponent,
  MarkLineComponent,
  MarkPointComponent,
  TitleComponent,
  TooltipComponent,
  VisualMapComponent,
  CanvasRenderer,
]);

export { echarts };
export type Chart = echarts.ECharts;

// Every chart the page made, by name, so that tests and the benchmark can read what was drawn.
export const charts: Record<string, Chart> = {};

// While a view draws inside drawnAs(prefix, ...), its charts are named prefix + name, so that the
// comparison page can draw a view twice (before and after) side by side.
let chartPrefix = '';
export function drawnAs(prefix: string, draw: () => void): void {
  const saved = chartPrefix;
  chartPrefix = prefix;
  try {
    draw();
  } finally {
    chartPrefix = saved;
  }
}

export function makeChart(unprefixed: string, container: HTMLElement): Chart {
  const name = chartPrefix + unprefixed;
  charts[name]?.dispose();
  const chart = echarts.init(container, undefined, { renderer: 'canvas' });
  charts[name] = chart;
  return chart;
}

// Only the charts inside `within` (the view shown), and only those whose box has an area now: resizing
// a hidden 1024-rank chart costs seconds, and a graph laid out in no area throws (ECharts inverts its
// view's transform, of scale 0: "Cannot read properties of null (reading '0')"), which a window
// squeezed to 1x1 px for a moment did (headless chromium's full-page screenshot, under load). A chart
// left out is resized when its view is shown again or on the next resize.
export function resizeCharts(within?: HTMLElement): void {
  for (const chart of Object.values(charts)) {
    if (chart.isDisposed()) continue;
    const dom = chart.getDom();
    if (within && !within.contains(dom)) continue;
    if (dom.clientWidth === 0 || dom.clientHeight === 0) continue;
    chart.resize();
  }
}

// Categorical colours, colour-blind-safe (Okabe and Ito).
export const palette = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#56B4E9', '#D55E00', '#F0E442', '#999999'];

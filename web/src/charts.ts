// The parts of Apache ECharts the views use (tree-shaken: the bundle carries only these), drawn on
// canvas so that 10^5 points stay fast.
import * as echarts from 'echarts/core';
import { BarChart, CustomChart, GraphChart, HeatmapChart, LineChart } from 'echarts/charts';
import {
  DataZoomComponent,
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

export function makeChart(name: string, container: HTMLElement): Chart {
  charts[name]?.dispose();
  const chart = echarts.init(container, undefined, { renderer: 'canvas' });
  charts[name] = chart;
  return chart;
}

// Only the charts inside `within` (the view shown): resizing a hidden 1024-rank chart costs seconds.
export function resizeCharts(within?: HTMLElement): void {
  for (const chart of Object.values(charts)) {
    if (chart.isDisposed()) continue;
    if (within && !within.contains(chart.getDom())) continue;
    chart.resize();
  }
}

// Categorical colours, colour-blind-safe (Okabe and Ito).
export const palette = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#56B4E9', '#D55E00', '#F0E442', '#999999'];

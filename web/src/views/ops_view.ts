// 7. Ops ↔ kernels (results.ops): the tree of NVTX / record_function ranges (PyTorch's cpu_ops with
// their input shapes) with the GPU time of the kernels each launched. Selecting an op highlights its
// kernels in the list beside it; selecting a kernel shows the op paths that launched it, and opens
// its SM view on a second click.
import type { AnalyzeDocument, ReportDocument } from '../data';
import { result } from '../data';
import { el, missing } from '../dom';
import { formatCount, formatNs, shortKernelName } from '../format';
import { View, ViewContext } from '../view';

interface OpKernel { name: string; count: number; time_ns: number }
interface OpNode {
  parent: number | null;
  name: string;
  inputs: string | null;
  count: number;
  ranks: number;
  host_time_ns: number;
  gpu_time_ns: number;
  self_gpu_time_ns: number;
  self_kernels: number;
  top_kernels: OpKernel[];
}
interface OpsResult {
  recorded: boolean;
  host_ranges: number;
  kernels: number;
  kernel_time_ns: number;
  correlated_time_ns: number;
  outside_ranges_time_ns: number;
  uncorrelated_kernels: number;
  uncorrelated_time_ns: number;
  nodes_left_out: number;
  nodes: OpNode[];
}

const kOpenDepth = 2;

export const opsView: View = {
  id: 'ops',
  title: 'Ops ↔ kernels',
  render(container: HTMLElement, report: ReportDocument, context: ViewContext) {
    const doc = report as AnalyzeDocument;
    const ops = result<OpsResult>(doc, 'ops');
    if (!ops || !ops.recorded || ops.nodes.length === 0) {
      container.append(missing('ops', 'This report has no op tree (results.ops): the trace records no NVTX or record_function ranges, nor PyTorch cpu_ops.'));
      return;
    }
    container.append(
      el('p', { class: 'identity', 'data-test': 'ops-header' },
        `${formatCount(ops.host_ranges)} host ranges, ${formatCount(ops.kernels)} kernels (${formatNs(ops.kernel_time_ns)}); ` +
        `${formatNs(ops.correlated_time_ns)} of kernel time traced to its launch, ${formatNs(ops.outside_ranges_time_ns)} of it outside every range` +
        (ops.uncorrelated_kernels ? `; ${formatCount(ops.uncorrelated_kernels)} kernels with no launch call found (${formatNs(ops.uncorrelated_time_ns)})` : '') +
        (ops.nodes_left_out ? `; ${formatCount(ops.nodes_left_out)} op paths with little time left out` : '')),
    );
    const children = new Map<number, number[]>();
    const roots: number[] = [];
    ops.nodes.forEach((node, index) => {
      if (node.parent === null || node.parent < 0) roots.push(index);
      else {
        if (!children.has(node.parent)) children.set(node.parent, []);
        children.get(node.parent)!.push(index);
      }
    });
    const byTime = (a: number, b: number) => ops.nodes[b].gpu_time_ns - ops.nodes[a].gpu_time_ns;
    const maxTime = Math.max(1, ...roots.map((r) => ops.nodes[r].gpu_time_ns));

    // The kernels of an op and everything under it (each node keeps its own top kernels).
    const kernelsUnder = (index: number): Map<string, OpKernel> => {
      const found = new Map<string, OpKernel>();
      const stack = [index];
      while (stack.length) {
        const at = stack.pop()!;
        for (const k of ops.nodes[at].top_kernels) {
          const seen = found.get(k.name);
          found.set(k.name, seen ? { name: k.name, count: seen.count + k.count, time_ns: seen.time_ns + k.time_ns } : { ...k });
        }
        stack.push(...(children.get(at) ?? []));
      }
      return found;
    };
    const pathOf = (index: number) => {
      const names: string[] = [];
      for (let at: number | null = index; at !== null && at >= 0; at = ops.nodes[at].parent) names.unshift(ops.nodes[at].name);
      return names.join(' › ');
    };

    const tree = el('div', { class: 'op-tree', 'data-test': 'op-tree' });
    const side = el('div', { class: 'op-side', 'data-test': 'op-kernels' }, el('p', {}, 'Select an op to see its kernels.'));
    container.append(el('div', { class: 'ops' }, tree, side));

    let selectedRow: HTMLElement | null = null;
    const showKernelsOf = (index: number, row: HTMLElement) => {
      selectedRow?.classList.remove('selected');
      row.classList.add('selected');
      selectedRow = row;
      const node = ops.nodes[index];
      const kernels = [...kernelsUnder(index).values()].sort((a, b) => b.time_ns - a.time_ns);
      const own = new Set(node.top_kernels.map((k) => k.name));
      side.replaceChildren(
        el('h3', {}, pathOf(index)),
        el('p', {}, `${formatCount(node.count)} instances on ${node.ranks} rank${node.ranks === 1 ? '' : 's'}; host ${formatNs(node.host_time_ns)}; GPU ${formatNs(node.gpu_time_ns)} (own ${formatNs(node.self_gpu_time_ns)}, ${formatCount(node.self_kernels)} kernels)${node.inputs ? `; inputs ${node.inputs}` : ''}`),
        kernels.length === 0 ? el('p', {}, 'No kernels launched under this op.') : kernelList(kernels, own),
      );
      for (const cell of tree.querySelectorAll<HTMLElement>('.op-row')) cell.classList.remove('launches');
    };
    const kernelList = (kernels: OpKernel[], own: Set<string>) =>
      el('ul', { class: 'kernel-list' }, ...kernels.map((k) => {
        const item = el('li', { class: own.has(k.name) ? 'kernel highlight' : 'kernel', 'data-kernel': k.name, title: `${k.name}\nclick: the op paths that launched it; again: its SM view` },
          el('span', { class: 'time' }, formatNs(k.time_ns)), ` ${formatCount(k.count)}x `, shortKernelName(k.name));
        item.addEventListener('click', () => {
          if (item.classList.contains('shown')) {
            context.open('sm', k.name);
            return;
          }
          item.classList.add('shown');
          const launching = ops.nodes.map((n, i) => (n.top_kernels.some((t) => t.name === k.name) ? i : -1)).filter((i) => i >= 0);
          for (const row of tree.querySelectorAll<HTMLElement>('.op-row')) row.classList.toggle('launches', launching.includes(Number(row.dataset.node)));
          item.append(el('ul', { class: 'op-paths' }, ...launching.slice(0, 10).map((i) => el('li', {}, pathOf(i)))));
        });
        return item;
      }));

    const renderNode = (index: number, depth: number): HTMLElement => {
      const node = ops.nodes[index];
      const kids = (children.get(index) ?? []).sort(byTime);
      const bar = el('span', { class: 'bar' });
      bar.style.width = `${Math.max(1, (120 * node.gpu_time_ns) / maxTime)}px`;
      const toggle = el('span', { class: 'toggle' }, kids.length ? (depth < kOpenDepth ? '▾' : '▸') : ' ');
      const row = el('div', { class: 'op-row', 'data-node': String(index), title: node.inputs ?? '' },
        toggle, bar, el('span', { class: 'time' }, formatNs(node.gpu_time_ns)), ` ${node.name}`, node.inputs ? el('span', { class: 'inputs' }, ` (${node.inputs})`) : null);
      const box = el('div', { class: 'op' }, row);
      let childBox: HTMLElement | null = null;
      const open = () => {
        childBox = el('div', { class: 'op-children' }, ...kids.map((k) => renderNode(k, depth + 1)));
        box.append(childBox);
        toggle.textContent = '▾';
      };
      toggle.addEventListener('click', (event) => {
        event.stopPropagation();
        if (!kids.length) return;
        if (childBox) {
          childBox.remove();
          childBox = null;
          toggle.textContent = '▸';
        } else open();
      });
      row.addEventListener('click', () => showKernelsOf(index, row));
      if (kids.length && depth < kOpenDepth) open();
      return box;
    };
    tree.append(...roots.sort(byTime).map((r) => renderNode(r, 0)));
  },
};

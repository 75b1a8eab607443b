// 2. Topology and traffic (results.link_hotspots): each host as it is built (GPUs on top, then its
// links group by group, equivalent links side by side, the NICs at the bottom) and the network
// between the hosts. A link's width grows with its bytes per step and its colour with its
// utilization; idle links are white; slow links are outlined red and say so. Hover: bytes per step,
// achieved vs capacity, time waiting; click: the collectives that use it (its `uses` joined with
// results.collectives' signatures) and whose bytes it carries.
import type { AnalyzeDocument, Communicator, ReportDocument } from '../data';
import { result } from '../data';
import { makeChart } from '../charts';
import { el, missing, table } from '../dom';
import { formatBytes, formatCommunicator, formatNs, formatPct, formatRank } from '../format';
import { View } from '../view';

interface Network {
  bytes_per_step: number;
  wait_ns_per_step: number;
  achieved_bytes_per_s: number | null;
  others_median_bytes_per_s: number | null;
  vs_median: number | null;
}
interface Use {
  from_rank: number;
  to_rank: number | null;
  operation: string | null;
  communicator: Communicator;
  bytes: number;
  source: string;
}
interface Link {
  id: number;
  host: string;
  name: string;
  kind: string;
  group: string;
  capacity_bytes_per_s: number | null;
  nic_assumed: boolean;
  source: string | null;
  bytes: number;
  bytes_per_step: number;
  utilization_pct: number | null;
  busy_bandwidth_pct: number | null;
  busy_ns: number;
  network: Network | null;
  slow: boolean;
  uses: Use[];
}
// What the topology view reads of results.collectives.
interface Signature {
  communicator: Communicator;
  operation: string;
  bytes: number | null;
  count: number;
  transfer_median_ns: number;
  busbw_median_bytes_per_s: number | null;
  link_pct: number | null;
}
interface Host {
  host: string;
  gpus: { rank: number; gpu: string; id?: string | null; nic: number | null }[];
  links: number[];
}
interface LinkHotspots {
  steps: number;
  nics_assumed: boolean;
  hosts: Host[];
  links: Link[];
  groups: { host: string; group: string; links: number[]; imbalance: number }[];
  imbalance: { group: number; link: number; imbalance: number; flagged: boolean } | null;
  slowest_nic: { link: number; ratio: number; slow: boolean } | null;
  busiest?: number[];
}

const slowColour = '#D55E00';
const gbps = (v: number | null | undefined) => (v === null || v === undefined ? 'not recorded' : `${(v / 1e9).toFixed(1)} GB/s`);

// White (idle) through blue to deep red as utilization rises.
function utilizationColour(link: Link): string {
  if (link.bytes === 0) return '#ffffff';
  const u = Math.min(1, Math.max(0, (link.utilization_pct ?? 0) / 100));
  const from = [198, 219, 239];
  const to = [178, 24, 43];
  const mix = from.map((c, i) => Math.round(c + (to[i] - c) * Math.sqrt(u)));
  return `rgb(${mix.join(',')})`;
}

// The link's name without what its row already says: "mlx5_3", "GPU0↔\nNVSwitch", "GPU0".
function shortName(link: Link): string {
  const name = link.name.replace(/^(NIC|NVLink|PCIe) /, '');
  return link.kind === 'GPU' ? name.split(' ')[0] : name.replace(' ↔ ', '↔\n');
}

export function linkTooltip(link: Link): string {
  const lines = [
    `<b>${link.host} ${link.name}</b>${link.slow ? ` <b style="color:${slowColour}">slow</b>` : ''}`,
    `${link.kind}, ${link.group}${link.nic_assumed ? ' (which NIC a rank uses is assumed)' : ''}`,
    `bytes per step: ${formatBytes(link.bytes_per_step)}${link.source ? ` (${link.source})` : ''}`,
    `utilization over the step: ${formatPct(link.utilization_pct)}; while busy: ${formatPct(link.busy_bandwidth_pct)} of ${gbps(link.capacity_bytes_per_s)}`,
  ];
  if (link.network) {
    lines.push(
      `achieved ${gbps(link.network.achieved_bytes_per_s)} vs the other NICs' median ${gbps(link.network.others_median_bytes_per_s)}`,
      `waiting per step: ${formatNs(link.network.wait_ns_per_step)}`,
    );
  }
  if (link.bytes === 0) lines.push('idle: no bytes recorded');
  return lines.map((l) => l.replace(/&(?!lt;|gt;|amp;)/g, '&amp;')).join('<br>');
}

// The collectives whose bytes cross the link: its uses grouped by (communicator, operation), each
// with the matched collectives of that communicator and operation (one row per size).
function collectivesOnLink(doc: AnalyzeDocument, link: Link): HTMLElement {
  const groups = new Map<string, { communicator: Communicator; operation: string; bytes: number; ranks: Set<number> }>();
  for (const u of link.uses) {
    const operation = u.operation ?? 'not recorded';
    const key = `${u.communicator.id} ${operation}`;
    const g = groups.get(key) ?? { communicator: u.communicator, operation, bytes: 0, ranks: new Set<number>() };
    g.bytes += u.bytes;
    g.ranks.add(u.from_rank);
    groups.set(key, g);
  }
  const signatures = result<{ signatures: Signature[] }>(doc, 'collectives')?.signatures ?? [];
  const rows: string[][] = [];
  for (const g of [...groups.values()].sort((a, b) => b.bytes - a.bytes)) {
    const matched = signatures.filter((s) => s.communicator.id === g.communicator.id && s.operation === g.operation);
    const label = formatCommunicator(g.communicator);
    const share = `${formatBytes(g.bytes)} from ${g.ranks.size} rank${g.ranks.size === 1 ? '' : 's'}`;
    if (matched.length === 0) {
      const p2p = g.operation === 'Send' || g.operation === 'Recv';
      rows.push([g.operation, label, share, p2p ? 'point-to-point: not a collective' : 'not matched across ranks', '', '', '']);
      continue;
    }
    for (const s of matched)
      rows.push([
        g.operation,
        label,
        share,
        s.bytes === null ? 'size not recorded' : formatBytes(s.bytes),
        String(s.count),
        formatNs(s.transfer_median_ns),
        s.busbw_median_bytes_per_s === null ? 'n/a' : `${(s.busbw_median_bytes_per_s / 1e9).toFixed(1)} GB/s`,
      ]);
  }
  const box = el('div', { 'data-test': 'link-collectives', 'data-collectives': String(groups.size) }, el('h4', {}, 'Collectives that use it'));
  box.append(
    rows.length === 0
      ? el('p', {}, 'No collective crosses this link.')
      : table(['operation', 'communicator', 'bytes on this link (all steps)', 'size', 'count', 'median transfer', 'median busbw'], rows),
  );
  if (!result(doc, 'collectives')) box.append(el('p', {}, 'This report has no matched collectives (results.collectives): sizes, counts and bandwidth are not shown.'));
  return box;
}

export const topologyView: View = {
  id: 'topology',
  title: 'Topology',
  render(container: HTMLElement, report: ReportDocument) {
    const doc = report as AnalyzeDocument;
    const hotspots = result<LinkHotspots>(doc, 'link_hotspots');
    if (!hotspots || hotspots.hosts.length === 0 || hotspots.links.length === 0) {
      container.append(missing('topology', 'This report has no topology: the traces list no links (NVLink, PCIe, NICs) and no link traffic (results.link_hotspots).'));
      return;
    }
    const links = new Map(hotspots.links.map((l) => [l.id, l]));
    const notes: string[] = [];
    if (hotspots.slowest_nic) {
      const nic = links.get(hotspots.slowest_nic.link)!;
      notes.push(`slowest NIC: ${nic.host} ${nic.name}, ${hotspots.slowest_nic.ratio.toFixed(2)}x slower than the median of the others${hotspots.slowest_nic.slow ? ' (slow)' : ''}`);
    }
    if (hotspots.imbalance) {
      const g = hotspots.groups[hotspots.imbalance.group];
      notes.push(`most imbalanced group: ${g.host} ${g.group}, busiest/mean ${hotspots.imbalance.imbalance.toFixed(2)}x${hotspots.imbalance.flagged ? ' (flagged)' : ''}`);
    }
    if (hotspots.nics_assumed) notes.push('which NIC a rank uses is assumed (local rank mod NICs): the traces do not say');
    container.append(el('ul', { 'data-test': 'topology-notes' }, ...notes.map((n) => el('li', {}, n))));

    // Layout: hosts side by side; in each, GPUs in a row, then each group of links in its own row
    // (in the order the host lists them), NICs last; the network below all hosts.
    type Node = { name: string; x: number; y: number; symbol: string; symbolSize: number[]; itemStyle: object; label: object; link?: number; value?: string };
    const nodes: Node[] = [];
    const edges: { source: string; target: string; lineStyle: object; link?: number }[] = [];
    const column = 46;
    const maxBytes = Math.max(1, ...hotspots.links.map((l) => l.bytes_per_step));
    // Past kMaxHosts, the first hosts and those of the slowest NIC and the busiest links are drawn.
    const kMaxHosts = 3;
    let shownHosts = hotspots.hosts;
    if (shownHosts.length > kMaxHosts) {
      const wanted = new Set(hotspots.hosts.slice(0, 1).map((h) => h.host));
      if (hotspots.slowest_nic) wanted.add(links.get(hotspots.slowest_nic.link)!.host);
      for (const id of hotspots.busiest ?? []) {
        if (wanted.size >= kMaxHosts) break;
        wanted.add(links.get(id)!.host);
      }
      shownHosts = hotspots.hosts.filter((h) => wanted.has(h.host));
      container.append(el('p', { 'data-test': 'topology-hosts' }, `${shownHosts.length} of ${hotspots.hosts.length} hosts drawn: the first, the slowest NIC's and the busiest links'.`));
    }
    const shownNames = new Set(shownHosts.map((h) => h.host));
    let x0 = 0;
    let bottom = 0;
    for (const host of shownHosts) {
      const groups = new Map<string, Link[]>();
      for (const id of host.links) {
        const link = links.get(id);
        if (!link) continue;
        if (!groups.has(link.group)) groups.set(link.group, []);
        groups.get(link.group)!.push(link);
      }
      const ordered = [...groups.entries()].sort((a, b) => Number(a[1][0].kind === 'NIC') - Number(b[1][0].kind === 'NIC'));
      // Ranks that share one GPU (processes on the same device) are one node.
      const gpus = new Map<string, { gpu: string; ranks: number[]; nics: Set<number> }>();
      for (const gpu of host.gpus) {
        const key = gpu.id ? `gpu ${gpu.id}` : `rank ${gpu.rank}`;
        if (!gpus.has(key)) gpus.set(key, { gpu: gpu.gpu, ranks: [], nics: new Set() });
        gpus.get(key)!.ranks.push(gpu.rank);
        if (gpu.nic !== null) gpus.get(key)!.nics.add(gpu.nic);
      }
      const width = Math.max(gpus.size, ...ordered.map(([, g]) => g.length)) * column;
      nodes.push({
        name: `host ${host.host}`, x: x0 + width / 2 - column / 2, y: -40, symbol: 'rect', symbolSize: [1, 1],
        itemStyle: { color: 'transparent' }, label: { show: true, color: '#14202e', fontWeight: 'bold', fontSize: 13, formatter: host.host },
      });
      [...gpus.entries()].forEach(([key, gpu], i) => {
        const ranks = gpu.ranks.map((r) => (r < 0 ? 'r?' : `r${r}`)).join(' ');
        nodes.push({
          name: `${host.host} ${key}`, x: x0 + i * column, y: 0, symbol: 'roundRect', symbolSize: [Math.max(38, 8 + 6 * ranks.length), 28],
          itemStyle: { color: '#14202e' }, label: { show: true, color: '#fff', fontSize: 10, lineHeight: 12, formatter: `${gpu.gpu}\n${ranks}` },
          value: `${gpu.gpu}, ${gpu.ranks.map(formatRank).join(', ')}${gpu.ranks.length > 1 ? ' (one GPU)' : ''}`,
        });
      });
      ordered.forEach(([name, group], row) => {
        const y = 70 + row * 60;
        bottom = Math.max(bottom, y);
        if (x0 === 0)
          nodes.push({
            name: `row ${name}`, x: -column * 1.2, y, symbol: 'rect', symbolSize: [1, 1], itemStyle: { color: 'transparent' },
            label: { show: true, position: 'left', fontSize: 11, color: '#4b5563', formatter: name },
          });
        group.forEach((link, i) => {
          const w = 8 + 30 * (link.bytes_per_step / maxBytes);
          nodes.push({
            name: `${link.host} ${link.name}`, x: x0 + i * column, y, symbol: 'rect', symbolSize: [w, 22], link: link.id,
            itemStyle: { color: utilizationColour(link), borderColor: link.slow ? slowColour : '#7a8a99', borderWidth: link.slow ? 3 : 1 },
            label: {
              show: true, position: 'bottom', fontSize: 9, lineHeight: 11, color: link.slow ? slowColour : '#333',
              formatter: `${shortName(link)}${link.slow ? '\nSLOW' : ''}`,
            },
          });
        });
      });
      for (const [key, gpu] of gpus) {
        for (const id of gpu.nics) {
          const nic = links.get(id);
          if (!nic) continue;
          edges.push({ source: `${host.host} ${key}`, target: `${nic.host} ${nic.name}`, lineStyle: { color: '#b8c2cc', width: 1, type: 'dotted' } });
        }
      }
      x0 += width + 2 * column;
    }
    // The network between the hosts, where a NIC joins it (one host with no NIC listed has none to draw).
    const nics = hotspots.links.filter((link) => link.kind === 'NIC' && shownNames.has(link.host));
    const networkY = nics.length > 0 ? bottom + 110 : bottom;
    if (nics.length > 0)
      nodes.push({
        name: 'network', x: (x0 - 3 * column) / 2, y: networkY, symbol: 'roundRect', symbolSize: [Math.max(120, x0 - 2 * column), 24],
        itemStyle: { color: '#eef1f4', borderColor: '#7a8a99' }, label: { show: true, formatter: 'network between the hosts' },
      });
    for (const link of nics) {
      edges.push({
        source: `${link.host} ${link.name}`, target: 'network', link: link.id,
        lineStyle: { color: link.bytes === 0 ? '#d0d5da' : link.slow ? slowColour : utilizationColour(link), width: 1 + 9 * (link.bytes_per_step / maxBytes), type: link.slow ? 'dashed' : 'solid', curveness: 0 },
      });
    }

    const chartBox = el('div', { class: 'chart topology', 'data-test': 'topology-chart' });
    chartBox.style.height = `${Math.min(900, networkY + 160)}px`;
    const uses = el('div', { 'data-test': 'link-uses' }, el('p', {}, 'Click a link to see the collectives that use it and whose bytes it carries.'));
    container.append(chartBox, uses);
    const chart = makeChart('topology', chartBox);
    chart.setOption({
      animation: false,
      tooltip: {
        confine: true,
        formatter: (p: { dataType: string; data: { link?: number; name?: string; value?: string } }) => {
          const id = p.data.link;
          if (id !== undefined) return linkTooltip(links.get(id)!);
          return p.data.value ?? p.data.name ?? '';
        },
      },
      series: [
        {
          type: 'graph',
          layout: 'none',
          roam: true,
          data: nodes,
          links: edges,
          edgeSymbol: ['none', 'none'],
          emphasis: { focus: 'adjacency' },
        },
      ],
    });
    chart.on('click', (p) => {
      const data = p.data as { link?: number };
      if (data.link === undefined) return;
      const link = links.get(data.link)!;
      uses.replaceChildren(
        el('h3', {}, `${link.host} ${link.name}: ${formatBytes(link.bytes_per_step)} per step`),
        collectivesOnLink(doc, link),
        el('h4', {}, 'Whose bytes it carries'),
        link.uses.length === 0
          ? el('p', {}, 'No traffic recorded on this link.')
          : table(
              ['from rank', 'to rank', 'operation', 'communicator', 'bytes (all steps)', 'source'],
              link.uses.map((u) => [String(u.from_rank), u.to_rank === null ? 'no file' : String(u.to_rank), u.operation ?? 'not recorded', formatCommunicator(u.communicator), formatBytes(u.bytes), u.source]),
            ),
      );
    });
  },
};

// Human units, as the text report writes them (analyzer/report/units.cc).

export function formatNs(ns: number | null | undefined): string {
  if (ns === null || ns === undefined || !Number.isFinite(ns)) return 'not recorded';
  const abs = Math.abs(ns);
  if (abs >= 1e9) return `${(ns / 1e9).toFixed(3)} s`;
  if (abs >= 1e6) return `${(ns / 1e6).toFixed(2)} ms`;
  if (abs >= 1e3) return `${(ns / 1e3).toFixed(1)} us`;
  return `${Math.round(ns)} ns`;
}

export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) return 'not recorded';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(value >= 100 ? 0 : value >= 10 ? 1 : 2)} ${units[unit]}`;
}

export function formatPct(pct: number | null | undefined): string {
  if (pct === null || pct === undefined || !Number.isFinite(pct)) return 'not recorded';
  return `${pct.toFixed(pct >= 99.95 ? 0 : 1)} %`;
}

export function formatCount(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

// A table cell in its column's unit (docs/report-schema.md's UNIT).
export function formatCell(value: unknown, unit: string | undefined): string {
  if (value === null || value === undefined) return 'not recorded';
  if (typeof value !== 'number') return String(value);
  switch (unit) {
    case 'ns': return formatNs(value);
    case 'ms': return `${value.toFixed(2)} ms`;
    case 'bytes': return formatBytes(value);
    case 'percent': return formatPct(value);
    case 'bytes_per_second': return `${(value / 1e9).toFixed(1)} GB/s`;
    case 'count': return formatCount(value);
    case 'ratio': return `${value.toFixed(2)}x`;
    default: return Number.isInteger(value) ? String(value) : value.toFixed(3);
  }
}

// A communicator as "pipeline tp1 dp1 (pipeline, 2 ranks)"; its hash where the run recorded no name.
export function formatCommunicator(c: { id: string; name: string | null; role: string | null; nranks: number | null }): string {
  return `${c.name ?? c.id} (${c.role ?? 'role not recorded'}${c.nranks ? `, ${c.nranks} ranks` : ''})`;
}

// Ranks as runs of consecutive numbers ("0-127, 256"), so that a 1024-rank stage reads in one line.
export function formatRanks(ranks: number[]): string {
  const sorted = [...ranks].sort((a, b) => a - b);
  const runs: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j += 1;
    runs.push(j - i >= 2 ? `${sorted[i]}-${sorted[j]}` : sorted.slice(i, j + 1).join(', '));
    i = j + 1;
  }
  return runs.join(', ');
}

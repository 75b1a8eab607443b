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
// A kernel's name short enough for a label; the full name goes in the label's tooltip. Demangled
// C++ names run to hundreds of characters ("void at::native::vectorized_elementwise_kernel<4,
// at::native::AddFunctor<float>, std::array<char*, 3ul> >(int, ...)"): the return type and the
// parameters go, the function keeps its name without namespaces, and each template argument is
// cut to its own last name ("vectorized_elementwise_kernel<4, AddFunctor, array>"; a lambda's by
// the function it is defined in). Names that are not C++ signatures (nvjet_..., sm90_xmma_...) stay.
export function shortKernelName(name: string, most = 90): string {
  let text = name.replace(/\(anonymous namespace\)::/g, '').replace(/^void /, '');
  // Only a C++ signature: a name followed at once by its template arguments or parameters.
  if (!/^[A-Za-z_][\w:]*[<(]/.test(text)) return name.length <= most ? name : `${name.slice(0, most - 1)}…`;
  // The top-level template arguments and where the parameters start.
  let depth = 0;
  let open = -1;
  let close = -1;
  const args: string[] = [];
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '<' || c === '(' || c === '[' || c === '{') {
      if (depth === 0 && c === '(') break; // the parameters
      if (depth === 0 && c === '<') { open = i; from = i + 1; }
      depth++;
    } else if (c === '>' || c === ')' || c === ']' || c === '}') {
      depth--;
      if (depth === 0 && c === '>') { args.push(text.slice(from, i)); close = i; }
    } else if (c === ',' && depth === 1 && open >= 0 && close < open) {
      args.push(text.slice(from, i));
      from = i + 1;
    }
  }
  const lastName = (qualified: string) => {
    // Before its own template arguments or parameters, without namespaces.
    let d = 0;
    let end = qualified.length;
    for (let i = 0; i < qualified.length; i++) {
      const c = qualified[i];
      if ((c === '<' || c === '(') && d === 0) { end = i; break; }
      if (c === '[' || c === '{') d++;
      else if (c === ']' || c === '}') d--;
    }
    const head = qualified.slice(0, end).trim();
    return head.slice(head.lastIndexOf('::') + 1 === 0 ? 0 : head.lastIndexOf('::') + 2);
  };
  if (open >= 0 && close > open) {
    // As many arguments as fit, then an ellipsis.
    const head = lastName(text.slice(0, open));
    const shortArgs: string[] = [];
    for (const a of args.map((x) => lastName(x.trim()) || x.trim())) {
      if (head.length + shortArgs.join(', ').length + a.length + 6 > most) {
        shortArgs.push('…');
        break;
      }
      shortArgs.push(a);
    }
    text = `${head}<${shortArgs.join(', ')}>`;
  } else {
    text = lastName(text) || text;
  }
  return text.length <= most ? text : `${text.slice(0, most - 1)}…`;
}

// What a finding's summary surely holds of a kernel's name: the analyzer writes it without its
// parameter list and cut at 90 characters (model::reportedKernelName), so its start up to the first
// parenthesis that is not "(anonymous namespace)", at most 40 characters.
export function findingKey(name: string): string {
  const cut = name.replace(/\(anonymous namespace\)/g, (m) => '_'.repeat(m.length)).indexOf('(');
  return name.slice(0, Math.min(40, cut < 0 ? 40 : cut));
}

// A rank as the page names it: the JSON writes a rank the launcher did not say as null (or -1).
export function formatRank(rank: number | null | undefined): string {
  return rank === null || rank === undefined || rank < 0 ? 'rank unknown' : `rank ${rank}`;
}

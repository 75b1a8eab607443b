// The document the page draws: `gpuxray analyze --format json` (schema 2, docs/report-schema.md) or
// `gpuxray plan --format json` (gpuxray.plan 1), as gpuxray embedded it.

export type Cell = number | string | null;

export interface Table {
  units: Record<string, string>;
  rows: Record<string, Cell>[];
}

export interface Section {
  title: string;
  notes: string[];
  tables: Record<string, Table>;
}

export interface Finding {
  analysis: string;
  severity: 'info' | 'warning' | 'critical';
  cost_ns: number;
  // What removing the finding's cause saves per step (`--critical-path`); absent: not computed.
  saves_ns?: number;
  summary: string;
  evidence: string[];
}

export interface Stat {
  name: string;
  severity: string;
  value: number;
  description: string;
  warnings?: string[];
}

export interface RunSummary {
  run_id: string;
  world_size: number;
  ranks: number[];
  hosts: string[];
  records: number;
  span_ns: number;
  steps: number;
  step_source: string;
  step_markers?: string[];
}

export interface AnalyzeDocument {
  schema: 'gpuxray.analyze';
  schema_version: number;
  run: RunSummary;
  metrics: Record<string, { value: number; unit: string; description: string }>;
  findings: Finding[];
  sections: Record<string, Section>;
  results?: Record<string, unknown>;
  warnings: string[];
  stats?: Stat[];
  violations?: string[];
}

export interface PlanDocument {
  schema: 'gpuxray.plan';
  schema_version: number;
  title: string;
  notes: string[];
  sections: Record<string, Section>;
}

// `gpuxray diff --html`: the comparison (gpuxray.diff 1, docs/diff.md) and both sides' reports.
export interface DiffRow {
  key: Record<string, string>;
  change: 'same' | 'changed' | 'new' | 'gone';
  before: Record<string, number | null>;
  after: Record<string, number | null>;
}
export interface DiffTable {
  title: string;
  units: Record<string, string>;
  rows: DiffRow[];
}
export interface DiffActivity {
  name: string;
  kind: string;
  change: string;
  count_before: number;
  count_after: number;
  per_step_before_ns: number;
  per_step_after_ns: number;
  launch_before?: string | null;
  launch_after?: string | null;
}
export interface DiffStepSide {
  steps: number;
  median_ns: number | null;
  stddev_ns: number | null;
  tokens_per_s: number | null;
}
export interface DiffDocument {
  schema: 'gpuxray.diff';
  schema_version: number;
  before: { path: string; kind: string };
  after: { path: string; kind: string };
  identical: boolean;
  notes: string[];
  warnings: string[];
  steps: { before: DiffStepSide; after: DiffStepSide; verdict: string; noise_ns: number };
  metrics: Record<string, { before: number | null; after: number | null; unit: string }>;
  kernels: DiffActivity[];
  ops: DiffActivity[];
  tables: Record<string, DiffTable>;
  memory: Record<'before' | 'after', { peak_bytes: number; peak_pct_of_device: number | null; rank: number; phase: string } | null>;
  findings: { status: 'resolved' | 'new' | 'still'; analysis: string; severity: string; before: string | null; after: string | null }[];
}
export interface DiffPage {
  schema: 'gpuxray.diff_page';
  schema_version: number;
  diff: DiffDocument;
  before: AnalyzeDocument;
  after: AnalyzeDocument;
}

export type ReportDocument = AnalyzeDocument | PlanDocument | DiffPage;

// A communicator as the typed results name it (docs/report-schema.md, COMM).
export interface Communicator {
  id: string;
  name: string | null;
  role: string | null;
  nranks: number | null;
}

// results.kernels (analysis/kernels.h)
export interface LaunchConfig {
  grid: [number, number, number];
  block: [number, number, number];
  registers_per_thread: number | null;
  shared_memory_bytes: number | null;
  local_memory_per_thread_bytes: number | null;
}
export interface Occupancy {
  blocks_per_sm: number;
  occupancy_pct: number;
  limited_by: string;
  waves: number;
  wave_efficiency_pct: number;
  // What would lift the limiter (analysis/occupancy.h, occupancyLift); absent in older reports.
  lift?: { changes: 'registers_per_thread' | 'shared_memory_bytes' | 'threads_per_block'; from: number; to: number; blocks_per_sm: number; occupancy_pct: number } | null;
  lift_summary?: string;
  sm_full?: boolean;
  also_limited_by?: string | null;
}
export interface KernelEntry {
  name: string;
  count: number;
  time_ns: number;
  launch: LaunchConfig | null;
  device_multiprocessors: number | null;
  occupancy: Occupancy | null;
  // The median measured by `gpuxray run --kernel-metrics`; null or absent: not measured.
  achieved_occupancy_pct?: number | null;
  small_grid: boolean;
}
export interface KernelsResult {
  compute_time_ns: number;
  amd: boolean;
  kernels: KernelEntry[];
}

// results.kernel_metrics (analysis/kernel_metrics.h): medians over a kernel's measured launches; null: not measured.
export interface KernelMetricsEntry {
  name: string;
  launches: number;
  passes: number;
  metrics: Record<
    | 'achieved_occupancy_pct' | 'sm_throughput_pct' | 'tensor_pipe_pct' | 'dram_read_bytes' | 'dram_write_bytes'
    | 'l2_bytes' | 'l2_hit_rate_pct' | 'l1_bytes' | 'l1_hit_rate_pct' | 'shared_wavefronts' | 'local_load_bytes'
    | 'local_store_bytes' | 'gpu_duration_ns',
    number | null
  >;
  theoretical_occupancy_pct: number | null;
  dram_throughput_pct: number | null;
  flops: number | null;
  flops_source: string;
  arithmetic_intensity: number | null;
  ridge_intensity: number | null;
  bound: 'memory-bound' | 'compute-bound' | 'latency-bound' | null;
  evidence: string[];
}
export interface FusionCandidate {
  first: string;
  second: string;
  rank: number;
  device: number;
  stream: number;
  first_written_bytes: number;
  second_read_bytes: number;
  bytes_saved: number;
}
export interface KernelMetricsResult {
  profiled_launches: number;
  launches_not_found: number;
  kernels: KernelMetricsEntry[];
  fusion_candidates: FusionCandidate[];
}

// results.memory (analysis/memory.h)
export interface MemoryDevice {
  rank: number;
  device: number;
  peak_bytes: number;
  peak_at_ns: number;
  peak_phase: string;
  peak_pct_of_device: number | null;
  allocations: number;
  end_bytes: number;
  curve: [number, number][] | null; // null: left out of this page (results.html_page)
  [key: string]: unknown;
}
export interface MemoryResult {
  recorded: boolean;
  origin_ns: number;
  devices: MemoryDevice[];
  worst_rank: number | null;
  worst_rank_phases: { phase: string; peak_bytes: number }[];
  [key: string]: unknown;
}

// Reads the block gpuxray wrote; throws with a sentence when it is not there or not readable.
export const kDataVersion = 1;
export function readDocument(): ReportDocument {
  const block = document.getElementById('gpuxray-data');
  if (!block) throw new Error('this page has no gpuxray data block (#gpuxray-data)');
  const version = Number(block.dataset.version);
  if (version !== kDataVersion)
    throw new Error(`the data block is version ${block.dataset.version}, this page reads version ${kDataVersion}`);
  const parsed = JSON.parse(block.textContent ?? '');
  if (parsed.schema !== 'gpuxray.analyze' && parsed.schema !== 'gpuxray.plan' && parsed.schema !== 'gpuxray.diff_page')
    throw new Error(`the data block holds '${parsed.schema}', not a gpuxray report`);
  return parsed as ReportDocument;
}

export function result<T>(doc: AnalyzeDocument, key: string): T | undefined {
  return doc.results?.[key] as T | undefined;
}

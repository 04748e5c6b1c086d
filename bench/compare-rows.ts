/**
 * The figures of several runs of one benchmark on two trees, set side by side: what
 * `npm run bench:compare` prints. A benchmark's output is read as text, the way a person reads
 * it: every line with numbers is a row, named by its words (its numbers replaced by `#`) and by
 * how many times that name came before in the same run, so the rows of one table line up across
 * runs. For each number of a row, the median of the runs on each tree and their range.
 *
 * A change is called out only when it is larger than the threshold and the two trees' ranges do
 * not overlap: on a 2-core host a single run's figure moves by more than most changes a refactor
 * makes, and its untouched baselines move with it.
 */

/** One line of one run: its name, and its numbers in order. */
export interface Row {
  key: string;
  text: string;
  values: number[];
}

/** One number of a row, over the runs of both trees. */
interface Figure {
  position: number;
  before: Spread;
  after: Spread;
  /** after ÷ before, of the medians. */
  ratio: number;
  /** Beyond the threshold, and the two ranges apart: a change the runs' own spread does not explain. */
  changed: boolean;
}

interface Spread {
  median: number;
  min: number;
  max: number;
}

export interface RowComparison {
  /** The row's text in the last run after, for the reader. */
  text: string;
  figures: Figure[];
}

// A number as the benchmarks print them: 1,234.5, -3, 0.25, 2.41× (the sign of a ratio is text).
const NUMBER = /-?\d[\d,]*(?:\.\d+)?/g;

/** The rows of one run's output. Lines without a number, and the benchmarks' progress lines, are not rows. */
export function parseRows(output: string): Row[] {
  const seen = new Map<string, number>();
  const rows: Row[] = [];
  for (const raw of output.split('\n')) {
    const text = raw.replace(/\s+$/, '');
    const values = [...text.matchAll(NUMBER)].map((m) => Number(m[0].replace(/,/g, '')));
    if (values.length === 0 || isProgress(text)) continue;
    const name = text.replace(NUMBER, '#').replace(/\s+/g, ' ').trim();
    const count = seen.get(name) ?? 0;
    seen.set(name, count + 1);
    rows.push({ key: `${name}\u0000${count}`, text, values });
  }
  return rows;
}

/** Lines that say how long something took or what is under way, not a figure of the system measured. */
const isProgress = (text: string) => /^(total: |part \d+: |building |machine: )/.test(text.trim());

function spreadOf(values: readonly number[]): Spread {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return { median, min: sorted[0]!, max: sorted[sorted.length - 1]! };
}

/**
 * The rows found in every run of both trees with the same count of numbers, in the order of the
 * last run after, each with its figures. `threshold` is a fraction: 0.1 calls out changes of more
 * than 10 % either way.
 */
export function compareRuns(before: readonly string[], after: readonly string[], threshold: number): RowComparison[] {
  const runsBefore = before.map(parseRows);
  const runsAfter = after.map(parseRows);
  const indexed = (runs: Row[][]) => runs.map((rows) => new Map(rows.map((row) => [row.key, row])));
  const mapsBefore = indexed(runsBefore);
  const mapsAfter = indexed(runsAfter);
  const last = runsAfter.at(-1) ?? [];
  const out: RowComparison[] = [];
  for (const row of last) {
    const rowsBefore = mapsBefore.map((m) => m.get(row.key));
    const rowsAfter = mapsAfter.map((m) => m.get(row.key));
    const all = [...rowsBefore, ...rowsAfter];
    if (all.some((r) => r === undefined || r.values.length !== row.values.length)) continue;
    const figures = row.values.map((_, position): Figure => {
      const b = spreadOf(rowsBefore.map((r) => r!.values[position]!));
      const a = spreadOf(rowsAfter.map((r) => r!.values[position]!));
      const ratio = b.median === 0 ? (a.median === 0 ? 1 : Number.POSITIVE_INFINITY) : a.median / b.median;
      const apart = a.min > b.max || a.max < b.min;
      const beyond = ratio > 1 + threshold || ratio < 1 / (1 + threshold);
      return { position, before: b, after: a, ratio, changed: apart && beyond };
    });
    out.push({ text: row.text, figures });
  }
  return out;
}

const num = (v: number) => (Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(4))));
const range = (s: Spread) => (s.min === s.max ? num(s.median) : `${num(s.median)} [${num(s.min)}–${num(s.max)}]`);

/** The comparison as lines of text: each row with a figure that differs, that figure's medians, ranges and ratio; `!` marks a change beyond the runs' spread. */
export function formatComparison(rows: readonly RowComparison[]): string[] {
  const lines: string[] = [];
  for (const row of rows) {
    const differing = row.figures.filter((f) => f.before.median !== f.after.median);
    if (differing.length === 0) continue;
    lines.push(row.text.trim().replace(/\s+/g, ' ').slice(0, 160));
    for (const f of differing)
      lines.push(
        `  ${f.changed ? '!' : ' '} #${f.position + 1}: ${range(f.before)} → ${range(f.after)}  (${f.ratio.toFixed(2)}×)`,
      );
  }
  return lines;
}

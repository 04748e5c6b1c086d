import { describe, expect, it } from 'vitest';
import { compareRuns, formatComparison, parseRows } from './compare-rows.js';

const run = (engine: number, baseline: number, growth = '1.05×') => `machine: 2 × AMD EPYC, 23.5 GiB
part 1: engine overhead (6 rounds) …
variant    steps/s  µs/step
---------  -------  -------
baseline    19,443     ${baseline}
engine       5,954     ${engine}
1–50         2       ${growth}
1–50         3       ${growth}

total: 12.${engine} s
`;

describe('the rows of a benchmark run', () => {
  it('names each line with numbers by its words and its place among lines of the same words', () => {
    const rows = parseRows(run(150.5, 49.5));
    expect(rows.map((r) => r.values)).toEqual([
      [19443, 49.5],
      [5954, 150.5],
      [1, 50, 2, 1.05],
      [1, 50, 3, 1.05],
    ]);
    expect(rows[0]!.key).toBe('baseline # #\u00000');
    expect(rows[2]!.key).toBe('#–# # #×\u00000');
    expect(rows[3]!.key).toBe('#–# # #×\u00001');
  });

  it('calls out a change beyond the threshold only when the two trees’ ranges do not overlap', () => {
    const before = [run(100, 50), run(104, 52), run(98, 49)];
    const after = [run(125, 51), run(130, 50), run(121, 50)];
    const rows = compareRuns(before, after, 0.1);
    const engine = rows.find((r) => r.text.startsWith('engine'))!;
    expect(engine.figures[1]).toMatchObject({
      before: { median: 100, min: 98, max: 104 },
      after: { median: 125 },
      changed: true,
    });
    expect(engine.figures[1]!.ratio).toBeCloseTo(1.25);
    const baseline = rows.find((r) => r.text.startsWith('baseline'))!;
    expect(baseline.figures[1]!.changed).toBe(false);
    expect(formatComparison(rows.filter((r) => r.figures.some((f) => f.changed)))).toEqual([
      'engine 5,954 121',
      '  ! #2: 100 [98–104] → 125 [121–130]  (1.25×)',
    ]);
  });

  it('does not call out a large change of the median when the runs overlap (noise), nor a small one when they do not', () => {
    const noisy = compareRuns(
      [run(100, 50), run(140, 50), run(95, 50)],
      [run(130, 50), run(96, 50), run(135, 50)],
      0.1,
    );
    expect(noisy.find((r) => r.text.startsWith('engine'))!.figures[1]).toMatchObject({ changed: false });
    const small = compareRuns([run(100, 50), run(101, 50)], [run(103, 50), run(104, 50)], 0.1);
    expect(small.find((r) => r.text.startsWith('engine'))!.figures[1]).toMatchObject({ changed: false });
  });

  it('leaves out rows missing from a run or with another count of numbers, and progress lines', () => {
    const odd = run(100, 50)
      .replace(/^engine .*$/m, 'engine       5,954')
      .replace(/^1–50 +3 .*$/m, '');
    const rows = compareRuns([run(100, 50), odd], [run(100, 50), run(100, 50)], 0.1);
    expect(rows.map((r) => r.text.split(/\s+/).slice(0, 2).join(' '))).toEqual(['baseline 19,443', '1–50 2']);
    expect(rows.some((r) => /^(total|machine|part)/.test(r.text))).toBe(false);
  });
});

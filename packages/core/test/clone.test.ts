import { describe, expect, it } from 'vitest';
import { cloneData } from '../src/clone.js';

describe('cloneData, the copy the memory stores make on every read and write', () => {
  it('copies plain data deeply: changing the copy leaves the original as it was', () => {
    const original = {
      id: 'c1',
      tags: ['a', 'b'],
      metrics: { tokens: 3, last: { ok: true, note: null, missing: undefined } },
      rows: [[1, 2], [3]],
    };
    const copy = cloneData(original);
    expect(copy).toStrictEqual(original);
    copy.tags.push('c');
    copy.metrics.last.ok = false;
    copy.rows[0]!.push(9);
    expect(original).toStrictEqual({
      id: 'c1',
      tags: ['a', 'b'],
      metrics: { tokens: 3, last: { ok: true, note: null, missing: undefined } },
      rows: [[1, 2], [3]],
    });
  });

  it('copies what is not plain data as structuredClone does (a Date stays a Date, bytes stay bytes)', () => {
    const original = {
      at: new Date('2026-11-26T00:00:00Z'),
      bytes: new Uint8Array([1, 2]),
      bare: Object.assign(Object.create(null) as object, { x: 1 }),
    };
    const copy = cloneData(original);
    expect(copy.at).toBeInstanceOf(Date);
    expect(copy.at).not.toBe(original.at);
    expect(copy.at.getTime()).toBe(original.at.getTime());
    expect(copy.bytes).toBeInstanceOf(Uint8Array);
    expect([...copy.bytes]).toEqual([1, 2]);
    expect(copy.bare).toEqual({ x: 1 });
    expect(copy.bare).not.toBe(original.bare);
  });
});

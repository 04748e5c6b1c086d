/**
 * The documentation of the example server's configuration stays true: the table of
 * docs/configuration.md lists exactly the variables the server reads (src/config.ts and each
 * runtime of src/sandbox-runtimes.ts), and this example's
 * README names no variable that neither the server nor its tests read.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES } from '../src/config.js';

const read = (path: string) => readFileSync(new URL(path, import.meta.url), 'utf8');

/** Every variable the server reads: the common ones of src/config.ts and each sandbox runtime's own. */
function variablesRead(): string[] {
  // INIT_CWD is set by npm (relative paths are taken from where `npm start` ran), not by the operator.
  return CONFIG_VARIABLES.filter((name) => name !== 'INIT_CWD').sort();
}

/** The variables the tests of this example read from process.env (where a test finds a tool, say). */
function variablesTestsRead(): string[] {
  const dir = new URL('.', import.meta.url);
  const sources = readdirSync(dir)
    .filter((name) => name.endsWith('.ts'))
    .map((name) => readFileSync(new URL(name, dir), 'utf8'));
  return [
    ...new Set(
      sources.flatMap((source) =>
        [...source.matchAll(/process\.env\.([A-Z][A-Z0-9_]*)|process\.env\[['"]([A-Z][A-Z0-9_]*)['"]\]/g)].map(
          (m) => m[1] ?? m[2] ?? '',
        ),
      ),
    ),
  ];
}

/** The variables named in the first column of the configuration table (docs/configuration.md). */
function variablesDocumented(): string[] {
  const page = read('../../../docs/configuration.md');
  const section = /^## Environment variables of the example server\n([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(page)?.[1];
  if (!section)
    throw new Error('docs/configuration.md: section "## Environment variables of the example server" not found');
  const firstCells = section
    .split('\n')
    .filter((line) => line.startsWith('|'))
    .map((line) => line.split('|')[1] ?? '');
  return [
    ...new Set(firstCells.flatMap((cell) => [...cell.matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((m) => m[1] ?? ''))),
  ].sort();
}

describe('the configuration documentation', () => {
  it('the table of docs/configuration.md lists every variable src/config.ts reads, and no other', () => {
    const names = variablesRead();
    expect(names.length).toBeGreaterThan(20);
    expect(variablesDocumented()).toEqual(names);
  });

  it('this example README names only variables the server or its tests read', () => {
    const known = new Set([...variablesRead(), ...variablesTestsRead(), 'DOCKER_HOST']);
    const named = [...read('../README.md').matchAll(/\b([A-Z][A-Z0-9]*_[A-Z0-9_]+)\b/g)].map((m) => m[1] ?? '');
    expect(named.length).toBeGreaterThan(0);
    expect(named.filter((name) => !known.has(name))).toEqual([]);
  });
});

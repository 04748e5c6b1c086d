import { describe, expect, it } from 'vitest';
import { clippedOutputNote, splitClippedOutput } from '@acs/core/ports';
import { expectOk, specFixture } from '@acs/core/testing';
import { FakeSandboxRuntime } from '@acs/testing';

/** What the fake runtime plays beyond the runtime contract (which exec cannot reach on a fake: its commands are handlers). */

const spec = specFixture({ working_dir: '/workspace' });

async function sandbox(runtime = new FakeSandboxRuntime()) {
  await expectOk(runtime.create({ sandbox_id: 'box', user_id: 'alice', installation_id: 'acs-tests', spec, env: {} }));
  return runtime;
}

describe('FakeSandboxRuntime', () => {
  it('keeps at most maxOutputBytes of what a handler answers, ending a cut stream with the port’s note', async () => {
    const runtime = (await sandbox()).onExec('loud', () => ({ stdout: `${'é'.repeat(10)}tail`, stderr: 'short' }));
    const cut = await expectOk(runtime.exec('box', { command: ['loud'], maxOutputBytes: 6 }));
    expect(cut).toMatchObject({ stdout: `ééé${clippedOutputNote(18)}`, stderr: 'short' });
    expect(splitClippedOutput(cut.stdout)).toEqual({ text: 'ééé', droppedBytes: 18 });
    expect((await expectOk(runtime.exec('box', { command: ['loud'] }))).stdout).toBe(`${'é'.repeat(10)}tail`);
  });

  it('plays `ln -s` (and refuses other forms of ln, and an existing link without -f); a file written over a link replaces it', async () => {
    const runtime = await sandbox();
    await expectOk(runtime.writeFile('box', 'a.txt', new TextEncoder().encode('a')));
    await expectOk(runtime.writeFile('box', 'b.txt', new TextEncoder().encode('b')));
    expect((await expectOk(runtime.exec('box', { command: ['ln', '-s', 'a.txt', 'link'] }))).exit_code).toBe(0);
    expect((await expectOk(runtime.exec('box', { command: ['ln', '-s', 'b.txt', 'link'] }))).exit_code).toBe(1);
    expect((await expectOk(runtime.exec('box', { command: ['ln', 'a.txt', 'hard'] }))).stderr).toMatch(/only `ln -s/);
    const read = async (path: string) =>
      new TextDecoder().decode((await expectOk(runtime.readFile('box', path))).bytes);
    expect(await read('link')).toBe('a');
    expect((await expectOk(runtime.exec('box', { command: ['ln', '-sf', 'b.txt', 'link'] }))).exit_code).toBe(0);
    expect(await read('link')).toBe('b');
    expect((await expectOk(runtime.listDirectory('box', '.'))).find((e) => e.name === 'link')).toMatchObject({
      type: 'symlink',
    });
    await expectOk(runtime.writeFile('box', 'link', new TextEncoder().encode('own')));
    expect([await read('link'), await read('b.txt')]).toEqual(['own', 'b']);
  });
});

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
});

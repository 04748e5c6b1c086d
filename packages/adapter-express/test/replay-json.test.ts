import { afterEach, describe, expect, it } from 'vitest';
import { errorCode, obj, startHarness, type Harness } from './harness.js';

let harnesses: Harness[] = [];

async function harness(): Promise<Harness> {
  const h = await startHarness();
  harnesses.push(h);
  return h;
}

afterEach(async () => {
  await Promise.all(harnesses.map((h) => h.close()));
  harnesses = [];
});

/** OpenHands V0 event dicts, written by hand. */
const user = (content: string) => ({
  id: 0,
  source: 'user',
  action: 'message',
  message: content,
  args: { content, image_urls: [], file_urls: [], wait_for_response: false },
});
const agent = (action: string, args: Record<string, unknown>) => ({
  source: 'agent',
  action,
  args: { thought: '', ...args },
});

describe('POST /api/conversations with replay_json', () => {
  it('replays a trajectory without settings: files written, no model call, finished', async () => {
    const h = await harness();
    const trajectory = [
      user('make a file'),
      agent('write', { path: '/workspace/out.txt', content: 'replayed\n' }),
      { source: 'environment', observation: 'write', content: '', extras: { path: '/workspace/out.txt' } },
      agent('finish', { final_thought: 'done' }),
    ];
    const r = await h.call('POST', '/api/conversations', { body: { replay_json: JSON.stringify(trajectory) } });
    expect(r.status, r.text).toBe(200);
    const id = obj(r.body).conversation_id as string;
    await h.idle();
    const found = await h.service.conversations.getMany('alice', [id]);
    if (found.isErr()) throw new Error(found.error.type);
    const record = found.value[0]!;
    const file = await h.ports.runtime.readFile(record.record.sandbox_id!, '/workspace/out.txt');
    if (file.isErr()) throw new Error(file.error.message);
    expect(new TextDecoder().decode(file.value.bytes)).toBe('replayed\n');
    expect(record.record.execution_status).toBe('finished');
    expect(h.ports.llm.calls).toBe(0);
  });

  it('answers 422 with the reason and the place for a malformed trajectory, storing nothing', async () => {
    const h = await harness();
    const cases: [string, string][] = [
      ['{not json', 'replay_json'],
      ['[]', 'replay_json'],
      [JSON.stringify([agent('run', { command: 'ls' })]), 'replay_json[0]'],
      [JSON.stringify([user('go'), agent('run', { command: 7 })]), 'replay_json[1].args.command'],
      [JSON.stringify([user('go'), agent('browse', { url: 'https://example.com' })]), 'replay_json[1].action'],
    ];
    for (const [replay_json, path] of cases) {
      const r = await h.call('POST', '/api/conversations', { body: { replay_json } });
      expect(r.status, replay_json).toBe(422);
      expect(errorCode(r.body)).toBe('VALIDATION_FAILED');
      const body = obj(r.body);
      expect(body.message).toMatch(/replay_json/);
      expect(body.issues).toEqual(expect.arrayContaining([expect.objectContaining({ path })]));
    }
    await h.idle();
    expect((await h.call('GET', '/api/v1/app-conversations/count')).body).toBe(0);
    expect((await h.call('GET', '/api/v1/sandboxes/search')).body).toEqual({ items: [], next_page_id: null });
  });
});

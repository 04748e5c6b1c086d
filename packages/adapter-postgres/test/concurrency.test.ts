import { describe, expect, it } from 'vitest';
import { createAgentConversationService } from '@acs/core';
import type { SettingsInput } from '@acs/core/schemas';
import { expectOk } from '@acs/core/testing';
import { createMemoryPorts } from '@acs/testing';
import { DATABASES, freshStorage } from './databases.js';
import { createAgent } from '@acs/agent';

for (const db of DATABASES) {
  describe(`concurrent writes on ${db.name}`, () => {
    const service = async () => {
      const storage = await freshStorage(db);
      return createAgentConversationService(
        { agent: createAgent(), ...createMemoryPorts(), ...storage },
        { pollIntervalMs: 1 },
      );
    };

    it('lands parallel settings stores of different users', async () => {
      const acs = await service();
      const users = Array.from({ length: 30 }, (_, i) => `user-${i}`);
      await Promise.all(
        users.map((u) => expectOk(acs.settings.store(u, { llm_model: `model-${u}`, llm_api_key: `key-${u}` }))),
      );
      for (const u of users)
        expect(await expectOk(acs.settings.load(u))).toMatchObject({ llm_model: `model-${u}`, llm_api_key_set: true });
    });

    it('lets the last of parallel stores of one user win whole, never a mix of two bodies', async () => {
      const acs = await service();
      const body = (n: number): SettingsInput => ({
        language: `l${n}`,
        agent: `a${n}`,
        max_iterations: n + 1,
        email: `${n}@example.com`,
        llm_api_key: `k${n}`,
      });
      await Promise.all(Array.from({ length: 25 }, (_, n) => expectOk(acs.settings.store('alice', body(n)))));
      const view = await expectOk(acs.settings.load('alice'));
      const n = Number(view.language?.slice(1));
      expect(view).toMatchObject({
        language: `l${n}`,
        agent: `a${n}`,
        max_iterations: n + 1,
        email: `${n}@example.com`,
      });
      const secrets = await expectOk(acs.settings.loadWithSecrets('alice'));
      expect(secrets?.llm_api_key).toBe(`k${n}`);
    });

    it('keeps event ids gap-free across many concurrent appenders', async () => {
      const storage = await freshStorage(db);
      const appends = Array.from({ length: 40 }, (_, i) =>
        expectOk(
          storage.events.append('alice', 'conv', [
            { kind: 'MessageEvent', source: 'user', timestamp: new Date().toISOString(), payload: { i } },
          ]),
        ),
      );
      const ids = (await Promise.all(appends))
        .flat()
        .map((e) => e.id)
        .sort((a, b) => a - b);
      expect(ids).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    });
  });
}

/**
 * The child of durability.test.ts: writes to the database at argv[2] as fast as it can (an event,
 * a conversation, and a settings change per round) and prints `ack <n>` after each write's
 * promise resolved, until it is killed. argv[4]: the synchronous mode (full, the default, or normal).
 */
import { createAesGcmCipher } from '@acs/core';
import { conversationFixture, settingsFixture } from '@acs/core/testing';
import { createSqliteStorage } from '@acs/adapter-sqlite';

const [path, keyHex, synchronous = 'full'] = process.argv.slice(2);
if (!path || !keyHex || (synchronous !== 'full' && synchronous !== 'normal'))
  throw new Error('usage: durable-writer.ts <database file> <key hex> [full|normal]');
const cipher = createAesGcmCipher({ keys: { k1: Buffer.from(keyHex, 'hex') }, currentKeyId: 'k1' });
const storage = await createSqliteStorage({ path, cipher, migrations: 'auto', synchronous });
process.stdout.write('ready\n');
for (let n = 1; ; n++) {
  const appended = await storage.events.append('alice', 'c1', [
    { kind: 'MessageEvent', source: 'user', timestamp: new Date().toISOString(), payload: { n } },
  ]);
  const inserted = await storage.conversations.insert(
    conversationFixture({ id: `conversation-${n}`, title: `n=${n}` }),
  );
  const updated = await storage.settings.update('alice', (current) => ({
    ...(current ?? settingsFixture()),
    max_iterations: n,
    llm_api_key: `sk-${n}`,
  }));
  if (appended.isErr() || inserted.isErr() || updated.isErr()) throw new Error(`write ${n} failed`);
  process.stdout.write(`ack ${n}\n`);
}

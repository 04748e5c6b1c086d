import { Zip, ZipDeflate } from 'fflate';
import type { ResultAsync } from 'neverthrow';
import type { EventPage } from '@acs/core/schemas';
import { V1EventTranslator } from '../realtime/v1-events.js';

/** What a conversation's export may hold. */
export interface ExportLimits {
  /** The most events; a longer log is refused before anything is sent (413, as OpenHands refuses more than 10,000). */
  maxEvents: number;
  /** The most bytes of event JSON; past it the archive ends with a note saying where it was cut. */
  maxBytes: number;
}

export const DEFAULT_EXPORT_LIMITS: ExportLimits = { maxEvents: 10_000, maxBytes: 512 * 1024 * 1024 };

/** The name the note of a cut archive has. */
const CUT_NOTE = 'TRUNCATED.txt';

const encoder = new TextEncoder();

/**
 * A conversation's trajectory as OpenHands 1.11 exports it: a zip of `meta.json` (the
 * conversation) and `event_<6-digit index>_<event id>.json` for each event (OpenHands SDK
 * events, oldest first), JSON indented by 2. Made as it is read: one page of events is read at
 * a time, and each file is compressed and handed out before the next is made, so the archive
 * is never held whole. Past `maxBytes` of event JSON it ends with CUT_NOTE instead of the rest.
 */
export async function* trajectoryZip(
  meta: unknown,
  readPage: (after: number) => ResultAsync<EventPage, unknown>,
  limits: ExportLimits,
): AsyncGenerator<Uint8Array> {
  const out: Uint8Array[] = [];
  let failed: Error | null = null;
  const zip = new Zip((error, chunk) => {
    if (error) failed = error;
    else out.push(chunk);
  });
  /** Adds one file, and hands out what the archive has for it (fflate's deflate is synchronous). */
  const add = function* (name: string, data: Uint8Array | string): Generator<Uint8Array> {
    const file = new ZipDeflate(name, { level: 6 });
    zip.add(file);
    file.push(typeof data === 'string' ? encoder.encode(data) : data, true);
    if (failed) throw failed;
    yield* out.splice(0);
  };

  yield* add('meta.json', JSON.stringify(meta, null, 2));
  const translator = new V1EventTranslator('sdk');
  let index = 0;
  let bytes = 0;
  let after = 0;
  for (;;) {
    const page = await readPage(after);
    if (page.isErr()) throw new Error('the conversation’s events could not be read');
    for (const event of page.value.items) {
      after = event.id;
      for (const frame of translator.translate(event)) {
        const data = encoder.encode(JSON.stringify(frame, null, 2));
        bytes += data.length;
        if (bytes > limits.maxBytes) {
          yield* add(
            CUT_NOTE,
            `This export was cut: its events passed ${limits.maxBytes} bytes of JSON at event ${event.id}. It holds the ${index} events before that one; read the rest with GET /api/v1/conversation/{id}/events/search.\n`,
          );
          zip.end();
          yield* out.splice(0);
          return;
        }
        yield* add(`event_${String(index).padStart(6, '0')}_${frame.id}.json`, data);
        index++;
      }
    }
    if (page.value.next_after === null) break;
  }
  zip.end();
  yield* out.splice(0);
}

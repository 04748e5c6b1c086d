/**
 * Named prepared statements on PGlite, each run with one call into it.
 *
 * PGlite's `query(text, params)` makes six calls into the WASM Postgres for every statement
 * (Parse, Describe, Bind, Describe, Execute, Sync), and Postgres parses and plans the text each
 * time. The agent's per-step statements (an event append, the conversation's update) are the
 * same few texts over and over, so each text is prepared once, under a name, and from then on
 * runs as Bind + Describe + Execute + Sync in one message: about a third of the CPU of `query`
 * (an append 70 µs against 214 µs, a primary-key read 37 against 103; issue 27).
 *
 * The frontend messages are written here (five message types of the PostgreSQL wire protocol),
 * so this adapter still needs nothing of PGlite at run time but the instance it is given.
 */

/** What of a PGlite instance the prepared statements use (present since PGlite 0.2). */
export interface PGliteProtocol {
  execProtocol(message: Uint8Array): Promise<{ messages: readonly PGliteBackendMessage[] }>;
  readonly serializers: Record<number | string, (value: unknown) => string>;
  readonly parsers: Record<number | string, (text: string, typeId?: number) => unknown>;
}

interface PGliteBackendMessage {
  readonly name: string;
  readonly dataTypeIDs?: readonly number[];
  readonly fields?: readonly (string | null | { name: string; dataTypeID: number })[];
}

/** How many texts stay prepared per PGlite instance; the least recently used is closed past it. */
const PREPARED_CAPACITY = 256;

/**
 * Postgres drops or refuses a prepared statement when the schema under it changed in a way its
 * plan cannot follow (0A000: "cached plan must not change result type"; 26000: it does not
 * exist): the text is prepared again, once.
 */
const STALE_STATEMENT_CODES = new Set(['0A000', '26000']);

interface Prepared {
  readonly name: string;
  /** The type of each parameter, as Postgres inferred it: how each value is written as text. */
  readonly parameterTypes: readonly number[];
}

export class PGliteStatements {
  readonly #prepared = new Map<string, Prepared>();
  #named = 0;

  constructor(private readonly db: PGliteProtocol) {}

  /** Whether this instance has what prepared statements need (else `query` is used as it is). */
  static supported(db: object): db is PGliteProtocol {
    const candidate = db as Partial<PGliteProtocol>;
    return typeof candidate.execProtocol === 'function' && !!candidate.serializers && !!candidate.parsers;
  }

  /** Runs `text` with `params` (must not be called while another statement of this instance runs). */
  async query<R>(text: string, params: readonly unknown[]): Promise<{ rows: R[] }> {
    try {
      return await this.#run<R>(await this.#prepare(text), params);
    } catch (error) {
      if (!STALE_STATEMENT_CODES.has((error as { code?: string }).code ?? '')) throw error;
      await this.#forget(text);
      return await this.#run<R>(await this.#prepare(text), params);
    }
  }

  async #prepare(text: string): Promise<Prepared> {
    const known = this.#prepared.get(text);
    if (known) {
      this.#prepared.delete(text);
      this.#prepared.set(text, known);
      return known;
    }
    const name = `acs_${++this.#named}`;
    const { messages } = await this.db.execProtocol(
      frames([parseMessage(name, text), describeMessage('S', name), SYNC]),
    );
    const description = messages.find((m) => m.name === 'parameterDescription');
    const prepared: Prepared = { name, parameterTypes: description?.dataTypeIDs ?? [] };
    this.#prepared.set(text, prepared);
    if (this.#prepared.size > PREPARED_CAPACITY) await this.#forget(this.#prepared.keys().next().value as string);
    return prepared;
  }

  async #forget(text: string): Promise<void> {
    const prepared = this.#prepared.get(text);
    if (!prepared) return;
    this.#prepared.delete(text);
    await this.db.execProtocol(frames([closeMessage(prepared.name), SYNC]));
  }

  async #run<R>(prepared: Prepared, params: readonly unknown[]): Promise<{ rows: R[] }> {
    const values = params.map((value, i) => {
      if (value === null || value === undefined) return null;
      const serialize = this.db.serializers[prepared.parameterTypes[i] ?? 0];
      return serialize ? serialize(value) : asText(value);
    });
    const { messages } = await this.db.execProtocol(
      frames([bindMessage(prepared.name, values), describeMessage('P', ''), EXECUTE, SYNC]),
    );
    return { rows: this.#rows<R>(messages) };
  }

  #rows<R>(messages: readonly PGliteBackendMessage[]): R[] {
    let columns: { name: string; dataTypeID: number }[] = [];
    const rows: R[] = [];
    for (const message of messages) {
      if (message.name === 'rowDescription') {
        columns = (message.fields ?? []) as { name: string; dataTypeID: number }[];
      } else if (message.name === 'dataRow') {
        const row: Record<string, unknown> = {};
        const fields = (message.fields ?? []) as (string | null)[];
        for (let i = 0; i < columns.length; i++) {
          const column = columns[i]!;
          const raw = fields[i] ?? null;
          const parse = this.db.parsers[column.dataTypeID];
          row[column.name] = raw === null ? null : parse ? parse(raw, column.dataTypeID) : raw;
        }
        rows.push(row as R);
      }
    }
    return rows;
  }
}

/** A parameter of a type PGlite has no serializer for, as text (PGlite's own `query` writes `toString()`). */
function asText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return value.toString();
  return JSON.stringify(value) ?? '';
}

// ---- the frontend messages (PostgreSQL protocol 3.0) ----

const encoder = new TextEncoder();

/** One message: its type byte, its length (itself included), its body. */
function message(type: string, body: readonly Uint8Array[]): Uint8Array {
  const out = frames([new Uint8Array(5), ...body]);
  out[0] = type.charCodeAt(0);
  new DataView(out.buffer).setInt32(1, out.length - 1);
  return out;
}

const cString = (text: string): Uint8Array => encoder.encode(`${text}\u0000`);

function int16(value: number): Uint8Array {
  const out = new Uint8Array(2);
  new DataView(out.buffer).setInt16(0, value);
  return out;
}

function int32(value: number): Uint8Array {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setInt32(0, value);
  return out;
}

/** Parse: a named statement, its parameter types left for Postgres to infer. */
const parseMessage = (name: string, text: string): Uint8Array => message('P', [cString(name), cString(text), int16(0)]);

/** Describe a statement ('S', for its parameter types) or the unnamed portal ('P', for its columns). */
const describeMessage = (kind: 'S' | 'P', name: string): Uint8Array =>
  message('D', [encoder.encode(kind), cString(name)]);

/** Bind the unnamed portal to a statement: every parameter as text, every column as text. */
function bindMessage(statement: string, values: readonly (string | null)[]): Uint8Array {
  const parts: Uint8Array[] = [cString(''), cString(statement), int16(0), int16(values.length)];
  for (const value of values) {
    if (value === null) {
      parts.push(int32(-1));
    } else {
      const bytes = encoder.encode(value);
      parts.push(int32(bytes.length), bytes);
    }
  }
  parts.push(int16(0));
  return message('B', parts);
}

const closeMessage = (name: string): Uint8Array => message('C', [encoder.encode('S'), cString(name)]);
/** Execute the unnamed portal, every row. */
const EXECUTE = message('E', [cString(''), int32(0)]);
const SYNC = message('S', []);

/** The parts one after another in one buffer. */
function frames(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Ajv2020 } from 'ajv/dist/2020.js';
import {
  createConversation,
  fetchOpenApi,
  obj,
  operationsOf,
  startHarness,
  storeSettings,
  takesApiKey,
  type Harness,
  type OpenApiDoc,
} from './harness.js';

/**
 * What a client generated from the document may send, the routes must take: for every
 * operation and every path, query and header parameter, each value of a corpus that the
 * parameter's schema in the document admits is sent (the other parameters at a value the
 * document admits too), with the credential the operation's security names, and must not be
 * refused as malformed (400) or invalid (422). A 404 (no such record) or 409 (the state
 * forbids it) is a declared answer about the data, not about the request's form.
 */

const STRINGS: string[] = [
  '',
  'a',
  'A',
  '0',
  '1',
  '-1',
  '00',
  'true',
  'false',
  'null',
  ' ',
  ' a ',
  'a b',
  'a,b',
  ',',
  ',a',
  'a,',
  '.',
  '/',
  'a/b',
  '%',
  '+',
  '?',
  '#',
  '&',
  '\u0000',
  'a\u0000b',
  'é',
  '日本',
  '😀',
  '\t',
  'x'.repeat(100),
  'x'.repeat(101),
  'x'.repeat(128),
  'x'.repeat(129),
  'x'.repeat(200),
  'x'.repeat(1024),
  'x'.repeat(4096),
  'x'.repeat(4097),
  // dates and date-times, well formed or not
  '2026-01-31',
  '2026-01-31T12:00',
  '2026-01-31T12:00:00',
  '2026-01-31T12:00:00Z',
  '2026-01-31T12:00:00.123456789+05:30',
  '2026-01-31T12:00:00+0530',
  '2026-02-30',
  '2026-13-01',
  '2026-01-31T24:00:00Z',
  '2026-1-1',
  '20260131',
  '0000-01-01',
  '9999-12-31T23:59:59.999Z',
  // page ids, well formed or not
  'AAAAAAAA',
  '4_______',
  'eyJ4IjoxfQ',
  'AAAAAAAAAA',
  '5AAAAAAA',
  'AAAAAAAAB',
  'AAAAAAAAAAB',
  // values of enums
  'CREATED_AT',
  'CREATED_AT_DESC',
  'message',
  'message,agent_error',
  'resolver',
  'gui',
  'github',
  'gitlab',
  'bitbucket',
  'forgejo',
  'stars-desc',
  'forks-asc',
  'updated-asc',
  // git page ids (base64url of digits), well formed or not
  'MA',
  'Mg',
  'MTAw',
  'MDA3',
  'MTIzNDU2',
  'OTk5OTk5',
  'MTIzNDU2Nw',
  'Mg==',
  'Oj',
];
const INTEGERS = [0, 1, 2, 99, 100, 101, -1, 2_147_483_647, 2_147_483_648];

type Value = string | number | string[];
interface Parameter {
  in: 'path' | 'query' | 'header';
  name: string;
  required?: boolean;
  schema?: Record<string, unknown>;
}

const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: false });

/** The corpus values a schema admits (arrays: each admitted string alone, and two together). */
function admitted(schema: Record<string, unknown>): Value[] {
  const valid = ajv.compile(schema);
  const type = schema.type;
  const candidates: Value[] =
    type === 'array'
      ? [
          ...STRINGS.map((s) => [s]),
          ['a', 'b'],
          ['a', 'a'],
          Array.from({ length: 100 }, (_, i) => `id${i}`),
          Array.from({ length: 101 }, (_, i) => `id${i}`),
        ]
      : type === 'integer'
        ? INTEGERS
        : STRINGS;
  return candidates.filter((value) => valid(value));
}

/** A plain value every parameter of its kind admits, for the parameters not under test. */
function baseline(schema: Record<string, unknown>): Value {
  const values = admitted(schema);
  const plain = values.find((v) => v === 'a' || v === 0 || (Array.isArray(v) && v.length === 1 && v[0] === 'a'));
  const value = plain ?? values[0];
  if (value === undefined) throw new Error(`the corpus has no value for ${JSON.stringify(schema)}`);
  return value;
}

function requestFor(
  path: string,
  parameters: Parameter[],
  values: Map<Parameter, Value>,
): { url: string; headers: Record<string, string> } {
  let url = path;
  const query = new URLSearchParams();
  const headers: Record<string, string> = {};
  for (const parameter of parameters) {
    const value = values.get(parameter);
    if (value === undefined) continue;
    if (parameter.in === 'path') url = url.replace(`{${parameter.name}}`, encodeURIComponent(String(value)));
    else if (parameter.in === 'query')
      for (const item of Array.isArray(value) ? value : [value]) query.append(parameter.name, String(item));
    else headers[parameter.name] = String(value);
  }
  const search = query.toString();
  return { url: search ? `${url}?${search}` : url, headers };
}

/** Header values fetch can send at all (visible ASCII and spaces, not at the ends). */
const sendableAsHeader = (value: Value) =>
  typeof value !== 'string' || /^(?:[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?)?$/.test(value);

/**
 * Whether an answer refuses the request's form: a 422 naming a path, query or header value
 * (every one sent is one the document admits, and so is the credential; a body the test leaves
 * empty may be refused on its own fields), a 400 that the URL could not be read, or a server
 * error. Answers about the data (404, 409, a 400 for a path that is a directory) are not.
 */
function refusesForm(r: { status: number; text: string }): boolean {
  if (r.status >= 500) return true;
  let body: { code?: string; issues?: { path: string }[] } = {};
  try {
    body = JSON.parse(r.text) as typeof body;
  } catch {
    return r.status === 400 || r.status === 422;
  }
  if (r.status === 400) return body.code === 'BAD_REQUEST' || body.code === 'MALFORMED_JSON';
  return r.status === 422 && (body.issues ?? []).some((issue) => /^(path|query|header)\./.test(issue.path));
}

describe('every value the document admits for a parameter is taken by its route', () => {
  let h: Harness;
  let doc: OpenApiDoc;
  let conversationKey: string;

  beforeAll(async () => {
    h = await startHarness();
    doc = await fetchOpenApi(h);
    await storeSettings(h);
    const id = await createConversation(h);
    conversationKey = obj((await h.call('GET', `/api/v1/app-conversations/${id}`)).body).session_api_key as string;
  });
  afterAll(async () => {
    await h.close();
  });

  it('walks every parameter of every operation', async () => {
    const refused: string[] = [];
    let sent = 0;
    for (const { path, method, operation } of operationsOf(doc)) {
      const parameters = (operation.parameters ?? []) as Parameter[];
      const key = takesApiKey(doc, operation) ? undefined : conversationKey;
      for (const parameter of parameters) {
        const others = new Map<Parameter, Value>();
        for (const other of parameters)
          if (other !== parameter && (other.required || other.in === 'path'))
            others.set(other, baseline(other.schema ?? {}));
        for (const value of admitted(parameter.schema ?? {})) {
          if (parameter.in === 'header' && !sendableAsHeader(value)) continue;
          const { url, headers } = requestFor(path, parameters, new Map([...others, [parameter, value]]));
          // An event stream answers 200 and stays open: read its status only.
          const stream = path.endsWith('/events/stream');
          const r = stream
            ? await fetch(h.baseUrl + url, {
                method: 'GET',
                headers: { ...headers, 'X-Session-API-Key': key ?? 'alice-key-0123456789abcdef' },
                signal: AbortSignal.timeout(2000),
              }).then(async (response) => {
                await response.body?.cancel();
                return { status: response.status, text: '' };
              })
            : await h.call(method.toUpperCase(), url, {
                headers,
                ...(key ? { key } : {}),
                ...(method === 'post' && operation.requestBody?.required ? { body: {} } : {}),
              });
          sent++;
          if (refusesForm(r)) {
            refused.push(
              `${method.toUpperCase()} ${path} ${parameter.in}.${parameter.name}=${JSON.stringify(value).slice(0, 60)} → ${r.status} ${r.text.slice(0, 200)}`,
            );
          }
        }
      }
    }
    expect(sent).toBeGreaterThan(500);
    expect(refused).toEqual([]);
  });
});

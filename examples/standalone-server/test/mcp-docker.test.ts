/**
 * MCP end to end: the example server process, a Docker sandbox, a streamable-HTTP and an SSE
 * MCP server on 127.0.0.1 (the official SDK's server side), and a stdio MCP server (a Python
 * script) started inside the sandbox. One configured server is down: only its tools are lost.
 * Needs a Docker engine and the acs-sandbox:bookworm image (like agent-docker.test.ts).
 */
import { randomBytes } from 'node:crypto';
import type { ConversationEvent, EventPage } from '@acs/core/schemas';
import type { AppConversation } from '@acs/adapter-express';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startShttpServer, startSseServer, type TestHttpServer } from '../../../packages/adapter-mcp/test/servers.js';
import { closedPort, scriptedCompletion, marker, startFakeOpenAi, toolCall, type FakeOpenAi } from '@acs/testing';
import { body, call, startServer, waitFor } from './process.js';
import { removeContainersOf } from './containers.js';

const docker = new Docker();
const user = `mcp-docker-test-${randomBytes(4).toString('hex')}`;
const KEY = `${user}-key-0123456789`;
const SHTTP_TOKEN = `shttp-token-${randomBytes(8).toString('hex')}`;
const SSE_TOKEN = `sse-token-${randomBytes(8).toString('hex')}`;

/** A stdio MCP server small enough for `python3 -c`: echo, whoami (env and cwd), crash. */
const STDIO_SERVER = `
import json, os, sys
TOOLS = [
  {"name": "whoami", "description": "Greeting and working directory", "inputSchema": {"type": "object", "properties": {}}, "annotations": {"readOnlyHint": True}},
  {"name": "crash", "description": "Exits with code 3", "inputSchema": {"type": "object", "properties": {}}},
]
def send(m):
  sys.stdout.write(json.dumps(m) + "\\n"); sys.stdout.flush()
for line in sys.stdin:
  if not line.strip(): continue
  m = json.loads(line)
  if "id" not in m or "method" not in m: continue
  method, rid, params = m["method"], m["id"], m.get("params") or {}
  if method == "initialize":
    send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": params.get("protocolVersion"), "capabilities": {"tools": {}}, "serverInfo": {"name": "in-sandbox", "version": "1"}}})
  elif method == "tools/list":
    send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
  elif method == "tools/call" and params.get("name") == "whoami":
    send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "greeting=%s cwd=%s" % (os.environ.get("MCP_GREETING"), os.getcwd())}]}})
  elif method == "tools/call" and params.get("name") == "crash":
    sys.stderr.write("crashing on purpose\\n"); os._exit(3)
  else:
    send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no " + method}})
`;

let llm: FakeOpenAi;
let shttp: TestHttpServer;
let sse: TestHttpServer;
let deadUrl: string;

beforeAll(async () => {
  llm = await startFakeOpenAi();
  shttp = await startShttpServer({ token: SHTTP_TOKEN });
  sse = await startSseServer({ token: SSE_TOKEN });
  deadUrl = `http://127.0.0.1:${await closedPort()}/sse`;
  const shttpTool = (name: string) => `127_0_0_1_${shttp.port}__${name}`;
  const sseTool = (name: string) => `127_0_0_1_${sse.port}__${name}`;
  llm.script('mcp', (turn) => {
    const calls = [
      toolCall('call_whoami', 'sandbox__whoami', {}),
      toolCall('call_add', shttpTool('add'), { a: 2, b: 3 }),
      toolCall('call_echo', sseTool('echo'), { text: 'over SSE' }),
      toolCall('call_crash', 'sandbox__crash', {}),
      toolCall('call_whoami_again', 'sandbox__whoami', {}),
    ];
    const next = calls[turn];
    return {
      status: 200,
      body: scriptedCompletion(
        turn,
        next
          ? { tool_calls: [next] }
          : { tool_calls: [toolCall('call_finish', 'finish', { message: 'Used the MCP tools.' })] },
      ),
    };
  });
});

afterAll(async () => {
  await llm.close();
  await shttp.stop();
  await sse.stop();
  await removeContainersOf(docker, user);
});

describe('MCP servers on the example server, with a Docker sandbox', () => {
  it('calls tools of an HTTP, an SSE and an in-sandbox stdio server; a dead server and a crash degrade only their own tools', async () => {
    const server = await startServer({
      ACS_API_KEYS: `${user}:${KEY}`,
      SESSION_API_KEY: 'unused-default-key-0123456789',
      ACS_SANDBOXES: 'docker',
      ACS_SANDBOX_NETWORK: 'none',
    });
    await body(
      call(server.url, '/api/settings', KEY, {
        llm_model: 'openai/scripted-model',
        llm_api_key: 'sk-scripted-mcp-0000',
        llm_base_url: llm.baseUrl,
        mcp_config: {
          shttp_servers: [{ url: shttp.url, api_key: SHTTP_TOKEN }],
          stdio_servers: [
            {
              name: 'sandbox',
              command: 'python3',
              args: ['-c', STDIO_SERVER],
              env: { MCP_GREETING: 'hello from the settings' },
            },
          ],
        },
      }),
    );
    const created = await body<{ conversation_id: string }>(
      call(server.url, '/api/conversations', KEY, {
        initial_user_msg: `${marker('mcp')} use the MCP tools`,
        mcp_config: { sse_servers: [{ url: sse.url, api_key: SSE_TOKEN }, deadUrl] },
      }),
    );
    const id = created.conversation_id;
    await waitFor(
      'the agent to finish',
      async () => {
        const [c] = await body<(AppConversation | null)[]>(
          call(server.url, `/api/v1/app-conversations?ids=${id}`, KEY),
        );
        return c?.execution_status === 'finished' || c?.execution_status === 'error' ? c : undefined;
      },
      120_000,
    );
    const events = (await body<EventPage>(call(server.url, `/api/v1/app-conversations/${id}/events?limit=100`, KEY)))
      .items;
    const observations = events.filter(
      (e): e is Extract<ConversationEvent, { kind: 'observation' }> => e.kind === 'observation',
    );
    const byCall = Object.fromEntries(observations.map((o) => [o.tool_call_id, o]));

    // The stdio server ran inside the sandbox, with its env, in the working directory.
    expect(byCall.call_whoami).toMatchObject({
      is_error: false,
      content: 'greeting=hello from the settings cwd=/workspace',
    });
    expect(byCall.call_add).toMatchObject({ is_error: false, content: '5' });
    expect(byCall.call_echo).toMatchObject({ is_error: false, content: 'over SSE' });
    // The crash fails that call; the server's tools are withdrawn, so calling one again is an unknown tool.
    expect(byCall.call_crash).toMatchObject({ is_error: true });
    expect(byCall.call_whoami_again).toMatchObject({ is_error: true });
    const errors = events.filter((e) => e.kind === 'error');
    expect(errors.map((e) => (e.kind === 'error' ? [e.code, e.fatal] : null))).toEqual([
      ['mcp_server_failed', false],
      ['mcp_server_failed', false],
    ]);
    expect(JSON.stringify(errors[0])).toContain(deadUrl);
    expect(JSON.stringify(errors[1])).toContain('sandbox');
    expect(events.at(-1)).toMatchObject({ kind: 'status', execution_status: 'finished' });

    // What the model was offered: every live server's tools, none of the dead one's; after the crash, none of the sandbox's.
    const requests = llm.requestsFor('mcp');
    const offered = (n: number) => (requests[n]!.body.tools ?? []).map((t) => t.function.name);
    expect(offered(0)).toEqual(
      expect.arrayContaining(['sandbox__whoami', `127_0_0_1_${shttp.port}__add`, `127_0_0_1_${sse.port}__echo`]),
    );
    expect(
      offered(0).filter(
        (name) =>
          name.startsWith('127_0_0_1_') && !name.includes(`_${shttp.port}__`) && !name.includes(`_${sse.port}__`),
      ),
    ).toEqual([]);
    expect(offered(requests.length - 1).some((name) => name.startsWith('sandbox__'))).toBe(false);

    // The api keys went to their servers as bearer tokens, and nowhere else.
    expect(shttp.requests.every((r) => r.authorization === `Bearer ${SHTTP_TOKEN}`)).toBe(true);
    expect(sse.requests.length).toBeGreaterThan(0);
    expect(sse.requests.every((r) => r.authorization === `Bearer ${SSE_TOKEN}`)).toBe(true);
    const everything =
      JSON.stringify(events) +
      JSON.stringify(llm.requests) +
      (await call(server.url, '/api/settings', KEY).then((r) => r.text()));
    expect(everything).not.toContain(SHTTP_TOKEN);
    expect(everything).not.toContain(SSE_TOKEN);
  });
});

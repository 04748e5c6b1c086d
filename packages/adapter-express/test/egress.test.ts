import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { errorCode, obj, startHarness, type CallResult, type Harness } from './harness.js';

/**
 * The operator's allow-lists for model and MCP URLs (issue 35), over HTTP: a URL naming another
 * host is refused when it is stored (V0 and V1 settings, LLM profiles, a conversation request's
 * `mcp_config`) with 400 and a code of its own, and nothing is stored.
 */

let h: Harness;

beforeEach(async () => {
  h = await startHarness({
    service: {
      egress: {
        llmAllowedHosts: { hosts: ['models.example', '127.0.0.1:4000'], name: 'ACS_LLM_ALLOWED_HOSTS' },
        mcpAllowedHosts: { hosts: ['mcp.example'], name: 'ACS_MCP_ALLOWED_HOSTS' },
      },
    },
  });
});

afterEach(async () => {
  await h.close();
});

/** The refusal: 400, its code, and a message that names the field, the host and the list. */
function expectRefused(r: CallResult, code: string, mentions: readonly string[]): void {
  expect(r.status, r.text).toBe(400);
  expect(errorCode(r.body)).toBe(code);
  for (const text of mentions) expect(String(obj(r.body).message)).toContain(text);
}

const settings = async () => obj((await h.call('GET', '/api/settings')).body);

describe('V0 POST /api/settings', () => {
  it('refuses a base URL on another host, or on an allowed host at another port, and stores nothing', async () => {
    expectRefused(
      await h.call('POST', '/api/settings', {
        body: { llm_model: 'openai/gpt-4o', llm_base_url: 'http://10.0.0.5:8080/v1' },
      }),
      'LLM_HOST_NOT_ALLOWED',
      ['llm_base_url names the host 10.0.0.5:8080', 'models.example, 127.0.0.1:4000 (ACS_LLM_ALLOWED_HOSTS)'],
    );
    expectRefused(
      await h.call('POST', '/api/settings', { body: { llm_base_url: 'http://127.0.0.1:4001/v1' } }),
      'LLM_HOST_NOT_ALLOWED',
      ['127.0.0.1:4001'],
    );
    expect((await h.call('GET', '/api/settings')).status).toBe(404);
  });

  it('stores a base URL on an allowed host (any port for a host alone, any case), and clears one with ""', async () => {
    for (const url of ['https://MODELS.example:8443/v1', 'http://127.0.0.1:4000/v1?api-version=1', '']) {
      const r = await h.call('POST', '/api/settings', { body: { llm_model: 'openai/gpt-4o', llm_base_url: url } });
      expect(r.status, r.text).toBe(200);
    }
    expect((await settings()).llm_base_url).toBeNull();
  });

  it('refuses an MCP server on another host, naming the server, and lets stdio servers be', async () => {
    expectRefused(
      await h.call('POST', '/api/settings', {
        body: {
          mcp_config: {
            shttp_servers: ['https://mcp.example/mcp'],
            sse_servers: [{ url: 'http://169.254.169.254/sse', api_key: null }],
          },
        },
      }),
      'MCP_HOST_NOT_ALLOWED',
      ['mcp_config.sse_servers.0.url names the host 169.254.169.254', 'mcp.example (ACS_MCP_ALLOWED_HOSTS)'],
    );
    const allowed = await h.call('POST', '/api/settings', {
      body: {
        mcp_config: {
          shttp_servers: ['https://mcp.example/mcp'],
          stdio_servers: [{ name: 'fs', command: 'npx', args: ['server'] }],
        },
      },
    });
    expect(allowed.status, allowed.text).toBe(200);
  });
});

describe('V1 settings and profiles', () => {
  it('refuses agent_settings_diff.llm.base_url and an mcp_config server on another host', async () => {
    expectRefused(
      await h.call('POST', '/api/v1/settings', {
        body: { agent_settings_diff: { llm: { model: 'openai/gpt-4o', base_url: 'http://localhost:11434/v1' } } },
      }),
      'LLM_HOST_NOT_ALLOWED',
      ['localhost:11434'],
    );
    expectRefused(
      await h.call('POST', '/api/v1/settings', {
        body: { agent_settings_diff: { mcp_config: { internal: { url: 'http://10.1.2.3/mcp', transport: 'http' } } } },
      }),
      'MCP_HOST_NOT_ALLOWED',
      ['10.1.2.3'],
    );
    const allowed = await h.call('POST', '/api/v1/settings', {
      body: { agent_settings_diff: { llm: { model: 'openai/gpt-4o', base_url: 'https://models.example/v1' } } },
    });
    expect(allowed.status, allowed.text).toBe(200);
  });

  it('refuses a profile whose base URL is on another host', async () => {
    const stored = await h.call('POST', '/api/settings', { body: { llm_model: 'openai/gpt-4o' } });
    expect(stored.status).toBe(200);
    expectRefused(
      await h.call('POST', '/api/v1/settings/profiles/local', {
        body: { llm: { model: 'ollama/llama3', base_url: 'http://127.0.0.1:11434' } },
      }),
      'LLM_HOST_NOT_ALLOWED',
      ['llm.base_url names the host 127.0.0.1:11434'],
    );
    expect(obj((await h.call('GET', '/api/v1/settings/profiles')).body).profiles).toEqual([]);
  });
});

describe('a conversation request', () => {
  it('with an MCP server on another host is refused, and no conversation is made', async () => {
    const stored = await h.call('POST', '/api/settings', { body: { llm_model: 'openai/gpt-4o', llm_api_key: 'sk-x' } });
    expect(stored.status).toBe(200);
    expectRefused(
      await h.call('POST', '/api/conversations', {
        body: { mcp_config: { shttp_servers: ['http://127.0.0.1:9999/mcp'] } },
      }),
      'MCP_HOST_NOT_ALLOWED',
      ['mcp_config.shttp_servers.0.url names the host 127.0.0.1:9999'],
    );
    expect(obj((await h.call('GET', '/api/conversations')).body).results).toEqual([]);
  });
});

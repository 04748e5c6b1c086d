import { createMemoryPorts } from '@acs/testing';
import { errAsync, okAsync } from 'neverthrow';
import { describe, expect, it } from 'vitest';
import type { GitProviderClient, GitProviderFailure, GitProviders } from '../src/git/port.js';
import { createGitService } from '../src/git/service.js';
import { defaultSettings, type GitProvider } from '../src/settings/schema.js';

/** A client per provider that answers from fixed values (or fails with the given failure). */
function stubProviders(
  behaviour: Partial<Record<GitProvider, { login: string; tasks: number } | GitProviderFailure>>,
): GitProviders & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    connect(provider, credentials) {
      const given = behaviour[provider as GitProvider];
      if (!given) return null;
      const answer = <T>(value: () => T) => {
        calls.push(`${provider}:${credentials.token}`);
        return 'type' in given ? errAsync(given) : okAsync(value());
      };
      const client: GitProviderClient = {
        user: () =>
          answer(() => ({
            id: '1',
            login: (given as { login: string }).login,
            avatar_url: '',
            company: null,
            name: null,
            email: null,
          })),
        installations: () => answer(() => Array.from({ length: 5 }, (_, i) => String(i))),
        repositories: () => answer(() => ({ items: [], hasMore: false })),
        searchRepositories: () => answer(() => ({ items: [], hasMore: false })),
        branches: () => answer(() => ({ items: [], hasMore: true })),
        suggestedTasks: () =>
          answer(() =>
            Array.from({ length: (given as { tasks: number }).tasks }, (_, i) => ({
              git_provider: provider,
              task_type: 'OPEN_ISSUE' as const,
              repo: 'o/r',
              issue_number: i,
              title: `t${i}`,
            })),
          ),
      };
      return client;
    },
  };
}

async function withTokens(tokens: Partial<Record<GitProvider, string>>) {
  const store = createMemoryPorts().settings;
  const provider_tokens = Object.fromEntries(
    Object.entries(tokens).map(([p, token]) => [p, { token, host: null, user_id: null }]),
  );
  await store.update('u', () => ({ ...defaultSettings(), secrets_store: { provider_tokens, custom_secrets: {} } }));
  return store;
}

describe('GitService', () => {
  it('without a GitProviders port, a connected provider has no client here (400, not 500)', async () => {
    const service = createGitService({ settings: await withTokens({ github: 'gh' }), providers: null });
    expect((await service.user('u'))._unsafeUnwrapErr()).toMatchObject({
      type: 'GitRequestRefused',
      reason: 'unsupported',
    });
  });

  it('the account comes from the first provider that answers; the first refusal when none does', async () => {
    const refused: GitProviderFailure = { type: 'token_invalid', message: 'Bad credentials' };
    const providers = stubProviders({ github: refused, gitlab: { login: 'lab', tasks: 0 } });
    const service = createGitService({ settings: await withTokens({ github: 'gh', gitlab: 'gl' }), providers });
    expect((await service.user('u'))._unsafeUnwrap().login).toBe('lab');
    expect(providers.calls).toEqual(['github:gh', 'gitlab:gl']);
    const none = createGitService({
      settings: await withTokens({ github: 'gh' }),
      providers: stubProviders({ github: refused }),
    });
    expect((await none.user('u'))._unsafeUnwrapErr()).toEqual({
      type: 'GitProviderRefused',
      provider: 'github',
      reason: 'token_invalid',
      message: 'Bad credentials',
    });
  });

  it('suggested tasks gather every provider, leave out one that fails, and fail only when all do', async () => {
    const down: GitProviderFailure = { type: 'timeout', message: 'no answer' };
    const mixed = createGitService({
      settings: await withTokens({ github: 'gh', gitlab: 'gl' }),
      providers: stubProviders({ github: down, gitlab: { login: 'lab', tasks: 3 } }),
    });
    const page = (await mixed.searchSuggestedTasks('u', { page: 2, limit: 2 }))._unsafeUnwrap();
    expect(page).toEqual({
      items: [expect.objectContaining({ git_provider: 'gitlab', issue_number: 2 })],
      next_page_id: null,
    });
    const allDown = createGitService({
      settings: await withTokens({ github: 'gh' }),
      providers: stubProviders({ github: down }),
    });
    expect((await allDown.searchSuggestedTasks('u', { page: 1, limit: 2 }))._unsafeUnwrapErr()).toMatchObject({
      type: 'GitProviderUnavailable',
      reason: 'timeout',
    });
  });

  it('installations page by offset; other lists say whether a page follows', async () => {
    const service = createGitService({
      settings: await withTokens({ github: 'gh' }),
      providers: stubProviders({ github: { login: 'hub', tasks: 0 } }),
    });
    expect(
      (await service.searchInstallations('u', { provider: 'github', offset: 2, limit: 2 }))._unsafeUnwrap(),
    ).toEqual({ items: ['2', '3'], next_page_id: 'NA' });
    expect(
      (
        await service.searchBranches('u', { provider: 'github', repository: 'o/r', query: '', page: 4, limit: 2 })
      )._unsafeUnwrap().next_page_id,
    ).toBe('NQ');
  });

  it("one user's tokens are never used for another", async () => {
    const store = await withTokens({ github: 'alice-token' });
    const providers = stubProviders({ github: { login: 'hub', tasks: 0 } });
    const service = createGitService({ settings: store, providers });
    expect((await service.user('someone-else'))._unsafeUnwrapErr()).toEqual({
      type: 'GitProviderNotConnected',
      provider: null,
    });
    expect(providers.calls).toEqual([]);
  });
});

import { okAsync, type ResultAsync } from 'neverthrow';
import { type Page, type PageRequest, encodeCursor, type SandboxSpecCatalog, type StoreFailure } from '@acs/core/ports';
import type { SandboxSpec } from '@acs/core/schemas';
import { cloneData } from '@acs/core';

export type SandboxSpecPreset = Omit<SandboxSpec, 'created_at' | 'description' | 'command' | 'initial_env'> &
  Partial<Pick<SandboxSpec, 'created_at' | 'description' | 'command' | 'initial_env'>>;

/** The spec every in-memory setup gets unless told otherwise. */
export const DEFAULT_MEMORY_SPEC: SandboxSpecPreset = {
  id: 'bookworm',
  image: 'acs-sandbox:bookworm',
  working_dir: '/workspace',
  description: 'Debian bookworm with bash, git and python3',
};

/** A fixed list of specs, from configuration. The first is the default; pages follow the configured order. */
export class StaticSandboxSpecCatalog implements SandboxSpecCatalog {
  readonly #specs: SandboxSpec[];

  constructor(presets: readonly SandboxSpecPreset[] = [DEFAULT_MEMORY_SPEC], createdAt = new Date().toISOString()) {
    if (presets.length === 0)
      throw new Error('A sandbox spec catalog needs at least one spec (the first is the default).');
    const ids = new Set<string>();
    this.#specs = presets.map((p) => {
      if (ids.has(p.id)) throw new Error(`Sandbox spec id "${p.id}" is listed twice.`);
      ids.add(p.id);
      return {
        id: p.id,
        image: p.image,
        command: p.command ?? null,
        working_dir: p.working_dir,
        initial_env: { ...(p.initial_env ?? {}) },
        description: p.description ?? null,
        created_at: p.created_at ?? createdAt,
        ...(p.exposed_ports && p.exposed_ports.length > 0
          ? { exposed_ports: p.exposed_ports.map((port) => ({ ...port })) }
          : {}),
        ...(p.session_api_key_variable ? { session_api_key_variable: p.session_api_key_variable } : {}),
      };
    });
  }

  list(page: PageRequest): ResultAsync<Page<SandboxSpec>, StoreFailure> {
    const position = page.after ? this.#specs.findIndex((s) => s.id === page.after?.id) : -1;
    if (page.after && position < 0) return okAsync({ items: [], next_page_id: null });
    const start = position + 1;
    const items = this.#specs.slice(start, start + page.limit);
    const last = items.at(-1);
    const more = last !== undefined && start + page.limit < this.#specs.length;
    return okAsync({
      items: cloneData(items),
      next_page_id: more ? encodeCursor({ created_at: last.created_at, id: last.id }) : null,
    });
  }

  get(id: string): ResultAsync<SandboxSpec | null, StoreFailure> {
    const spec = this.#specs.find((s) => s.id === id);
    return okAsync(spec ? cloneData(spec) : null);
  }

  getDefault(): ResultAsync<SandboxSpec, StoreFailure> {
    return okAsync(cloneData(this.#specs[0] as SandboxSpec));
  }
}

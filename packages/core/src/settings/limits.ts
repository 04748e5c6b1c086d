import type { StoredSettings } from './schema.js';
import type { SettingsStore } from './store.js';

/**
 * The most a user's settings may make the server do for them. Each setting that scales what
 * the server spends (sandbox limits, the model calls per message, the events shown to the model
 * each call, the money a task may spend) is capped by the operator: a user may ask for more,
 * and what is stored stays as they sent it (so raising a cap later gives it to them), but what
 * is applied, and what every read of the settings shows, is at most the cap.
 */
export interface UserSettingLimits {
  /** The most `remote_runtime_resource_factor` applied (default 1: users cannot raise their sandboxes' CPU, memory and pids). */
  maxResourceFactor?: number;
  /** The most `condenser_max_size` applied (default 1,000 events). */
  maxCondenserSize?: number;
  /** The most `max_iterations` applied (default 500 model calls per message). */
  maxIterations?: number;
  /** The most `max_budget_per_task` applied, in USD; a user who sets none gets this one. Default: none. */
  maxBudgetPerTask?: number | null;
}

export type ResolvedUserSettingLimits = Required<UserSettingLimits>;

export const DEFAULT_USER_SETTING_LIMITS: ResolvedUserSettingLimits = {
  maxResourceFactor: 1,
  maxCondenserSize: 1000,
  maxIterations: 500,
  maxBudgetPerTask: null,
};

/** The limits with defaults for what is not given; a limit that cannot be one throws (a host's mistake, found at start). */
export function resolveUserSettingLimits(limits: UserSettingLimits = {}): ResolvedUserSettingLimits {
  const resolved: ResolvedUserSettingLimits = {
    maxResourceFactor: limits.maxResourceFactor ?? DEFAULT_USER_SETTING_LIMITS.maxResourceFactor,
    maxCondenserSize: limits.maxCondenserSize ?? DEFAULT_USER_SETTING_LIMITS.maxCondenserSize,
    maxIterations: limits.maxIterations ?? DEFAULT_USER_SETTING_LIMITS.maxIterations,
    maxBudgetPerTask:
      limits.maxBudgetPerTask === undefined ? DEFAULT_USER_SETTING_LIMITS.maxBudgetPerTask : limits.maxBudgetPerTask,
  };
  for (const name of ['maxResourceFactor', 'maxCondenserSize', 'maxIterations'] as const) {
    if (!(Number.isInteger(resolved[name]) && resolved[name] >= 1))
      throw new Error(`userSettingLimits.${name} must be a positive integer.`);
  }
  const budget = resolved.maxBudgetPerTask;
  if (budget !== null && !(Number.isFinite(budget) && budget > 0))
    throw new Error('userSettingLimits.maxBudgetPerTask must be a positive number of USD, or null for none.');
  return resolved;
}

/** The settings as they apply: each scaling setting at most its cap. */
export function applyUserSettingLimits(settings: StoredSettings, limits: ResolvedUserSettingLimits): StoredSettings {
  const capped = {
    remote_runtime_resource_factor: atMost(settings.remote_runtime_resource_factor, limits.maxResourceFactor),
    condenser_max_size: atMost(settings.condenser_max_size, limits.maxCondenserSize),
    max_iterations: atMost(settings.max_iterations, limits.maxIterations),
    max_budget_per_task:
      limits.maxBudgetPerTask === null
        ? settings.max_budget_per_task
        : (atMost(settings.max_budget_per_task, limits.maxBudgetPerTask) ?? limits.maxBudgetPerTask),
  };
  const changed = (Object.keys(capped) as (keyof typeof capped)[]).some((key) => capped[key] !== settings[key]);
  return changed ? { ...settings, ...capped } : settings;
}

const atMost = (value: number | null | undefined, cap: number): number | null =>
  value === null || value === undefined ? null : Math.min(value, cap);

/**
 * The settings store as every part of the service reads it: what it answers is capped (the
 * agent, the sandbox limits and the settings views all see the applied values), while what is
 * written is what the user sent, so a later, higher cap gives them what they asked for.
 */
export function limitedSettingsStore(store: SettingsStore, limits: ResolvedUserSettingLimits): SettingsStore {
  const apply = (settings: StoredSettings) => applyUserSettingLimits(settings, limits);
  return {
    get: (userId) => store.get(userId).map((settings) => (settings ? apply(settings) : null)),
    update: (userId, mutate) => store.update(userId, mutate).map(apply),
  };
}

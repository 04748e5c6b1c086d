/** Qualified table names in an optional schema. All tables share the `acs_` prefix. */
export interface Tables {
  readonly schema: string | null;
  readonly migrations: string;
  readonly settings: string;
  readonly secretKeys: string;
  readonly conversations: string;
  readonly startTasks: string;
  readonly sandboxes: string;
  readonly events: string;
  readonly eventCounters: string;
  readonly installation: string;
  readonly conversationLeases: string;
  readonly apiKeys: string;
  readonly deviceGrants: string;
  readonly deviceCodeFailures: string;
}

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export function tablesIn(schema: string | null = null): Tables {
  if (schema !== null && !SCHEMA_NAME.test(schema)) {
    throw new Error(
      `Schema name "${schema}" must be lowercase letters, digits and _ (up to 63 characters, not starting with a digit).`,
    );
  }
  const t = (name: string) => (schema ? `"${schema}".acs_${name}` : `acs_${name}`);
  return {
    schema,
    migrations: t('migrations'),
    settings: t('settings'),
    secretKeys: t('secret_keys'),
    conversations: t('conversations'),
    startTasks: t('start_tasks'),
    sandboxes: t('sandboxes'),
    events: t('events'),
    eventCounters: t('event_counters'),
    installation: t('installation'),
    conversationLeases: t('conversation_leases'),
    apiKeys: t('api_keys'),
    deviceGrants: t('device_grants'),
    deviceCodeFailures: t('device_code_failures'),
  };
}

/**
 * Settings: the model and its key (write-only: shown as set or not set), limits, confirmation
 * and the security analyzer, the condenser, MCP servers, the git identity, and custom secrets
 * (names only; a value is written, never read back).
 */
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, unwrap } from '../api.js';
import { Empty, ErrorBox, Loading, useAction, useLoad } from '../ui.js';

type McpRow =
  | { type: 'sse' | 'shttp'; url: string; api_key: string }
  | { type: 'stdio'; name: string; command: string; args: string; env: Record<string, string> };

interface Form {
  llm_model: string;
  llm_base_url: string;
  llm_api_key: string;
  clear_llm_api_key: boolean;
  max_iterations: string;
  max_budget_per_task: string;
  confirmation_mode: boolean;
  security_analyzer: string;
  enable_default_condenser: boolean;
  condenser_max_size: string;
  git_user_name: string;
  git_user_email: string;
  mcp: McpRow[];
}

/** Settings as Load Settings returns them (secrets as `*_set` flags). */
const loadView = () => unwrap(api.GET('/api/settings'));
type SettingsView = Awaited<ReturnType<typeof loadView>>;

function formOf(view: SettingsView | null): Form {
  const mcp = view?.mcp_config;
  return {
    llm_model: view?.llm_model ?? '',
    llm_base_url: view?.llm_base_url ?? '',
    llm_api_key: '',
    clear_llm_api_key: false,
    max_iterations: view?.max_iterations?.toString() ?? '',
    max_budget_per_task: view?.max_budget_per_task?.toString() ?? '',
    confirmation_mode: view?.confirmation_mode ?? false,
    security_analyzer: view?.security_analyzer ?? '',
    enable_default_condenser: view?.enable_default_condenser ?? true,
    condenser_max_size: view?.condenser_max_size?.toString() ?? '',
    git_user_name: view?.git_user_name ?? '',
    git_user_email: view?.git_user_email ?? '',
    mcp: [
      ...(mcp?.sse_servers ?? []).map((s): McpRow => ({ type: 'sse', url: s.url, api_key: '' })),
      ...(mcp?.shttp_servers ?? []).map((s): McpRow => ({ type: 'shttp', url: s.url, api_key: '' })),
      ...(mcp?.stdio_servers ?? []).map((s): McpRow => ({
        type: 'stdio',
        name: s.name,
        command: s.command,
        args: s.args.join(' '),
        env: s.env,
      })),
    ],
  };
}

const numberOrNull = (text: string) => (text.trim() === '' ? null : Number(text));

/** The Store Settings body: a blank key keeps the stored one, "clear" removes it; MCP keys left blank are kept per URL. */
function bodyOf(form: Form) {
  const remote = (type: 'sse' | 'shttp') =>
    form.mcp.flatMap((row) =>
      row.type === type ? [{ url: row.url.trim(), api_key: row.api_key === '' ? null : row.api_key }] : [],
    );
  return {
    llm_model: form.llm_model.trim() || null,
    llm_base_url: form.llm_base_url.trim(),
    ...(form.clear_llm_api_key
      ? { llm_api_key: '' }
      : form.llm_api_key !== ''
        ? { llm_api_key: form.llm_api_key }
        : {}),
    max_iterations: numberOrNull(form.max_iterations),
    max_budget_per_task: numberOrNull(form.max_budget_per_task),
    confirmation_mode: form.confirmation_mode,
    security_analyzer: form.security_analyzer,
    enable_default_condenser: form.enable_default_condenser,
    condenser_max_size: numberOrNull(form.condenser_max_size),
    git_user_name: form.git_user_name.trim() || null,
    git_user_email: form.git_user_email.trim() || null,
    mcp_config: {
      sse_servers: remote('sse'),
      shttp_servers: remote('shttp'),
      stdio_servers: form.mcp.flatMap((row) =>
        row.type === 'stdio'
          ? [
              {
                name: row.name.trim(),
                command: row.command.trim(),
                args: row.args.trim() === '' ? [] : row.args.trim().split(/\s+/),
                env: row.env,
              },
            ]
          : [],
      ),
    },
  };
}

/** A field's setter, handed to each group of the form. */
type SetField = <K extends keyof Form>(key: K, value: Form[K]) => void;

interface GroupProps {
  form: Form;
  set: SetField;
}

export function SettingsPage() {
  const settings = useSettings();
  const { loaded, form } = settings;
  if (loaded.error && !loaded.value) return <ErrorBox error={loaded.error} onRetry={loaded.reload} />;
  if (!loaded.value || !form) return <Loading what="settings" />;
  const { view, models, analyzers } = loaded.value;
  const set: SetField = (key, value) => settings.edit({ ...form, [key]: value });

  return (
    <section class="page settings">
      <h1>Settings</h1>
      {!view && <p class="hint">Nothing is stored yet: choose a model and give its API key to start conversations.</p>}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void settings.save.run(form);
        }}
      >
        <ModelGroup form={form} set={set} view={view} models={models} />
        <LimitsGroup form={form} set={set} />
        <SafetyGroup form={form} set={set} analyzers={analyzers} />
        <CondenserGroup form={form} set={set} />
        <McpServersGroup form={form} set={set} />
        <GitIdentityGroup form={form} set={set} />
        <SaveActions save={settings.save} saved={settings.saved} />
      </form>
      <Secrets />
    </section>
  );
}

/** Settings, the model options and the security analyzers; a settings view of null: nothing stored yet. */
async function loadSettings() {
  const [view, models, analyzers] = await Promise.all([
    loadView().catch((error: unknown) => {
      if (error instanceof ApiError && error.status === 404) return null; // nothing stored yet
      throw error;
    }),
    unwrap(api.GET('/api/options/models')).catch(() => [] as string[]),
    unwrap(api.GET('/api/options/security-analyzers')).catch(() => [] as string[]),
  ]);
  return { view, models, analyzers };
}

/** The page's state: what was loaded, the form (made from it once loaded), "saved", and the save. */
function useSettings() {
  const loaded = useLoad(loadSettings, []);
  const [form, setForm] = useState<Form | null>(null);
  const [saved, setSaved] = useState(false);
  // The form is made from the first load only. The reload after a save refreshes the view (which
  // keys are set); it must not put the stored values back over what the user has typed since
  // (an effect runs after the paint, so an edit made in between was lost: the console test
  // filled a field in that moment and saved the stored value instead).
  useEffect(() => {
    const view = loaded.value?.view;
    if (view !== undefined) setForm((current) => current ?? formOf(view));
  }, [loaded.value]);
  const save = useAction(async (current: Form) => {
    setSaved(false);
    await unwrap(api.POST('/api/settings', { body: bodyOf(current) as never }));
    // Keys are write-only: once stored, their fields are empty at once (not only when the reload
    // below comes back, which would show "set" beside a key still in the field).
    setForm(
      (f) =>
        f && {
          ...f,
          llm_api_key: '',
          clear_llm_api_key: false,
          mcp: f.mcp.map((row) => (row.type === 'stdio' ? row : { ...row, api_key: '' })),
        },
    );
    loaded.reload();
    setSaved(true);
  });
  /** An edit of the form: it is no longer what was saved. */
  const edit = (next: Form) => {
    setSaved(false);
    setForm(next);
  };
  return { loaded, form, saved, save, edit };
}

function ModelGroup({ form, set, view, models }: GroupProps & { view: SettingsView | null; models: string[] }) {
  return (
    <fieldset>
      <legend>Model</legend>
      <label>
        Model
        <input
          name="llm_model"
          list="models"
          value={form.llm_model}
          placeholder="openai/gpt-4o"
          onInput={(e) => set('llm_model', e.currentTarget.value)}
        />
        <datalist id="models">
          {models.map((m) => (
            <option key={m} value={m} />
          ))}
        </datalist>
      </label>
      <label>
        Base URL <span class="hint">(optional: an OpenAI-compatible endpoint)</span>
        <input
          name="llm_base_url"
          type="url"
          value={form.llm_base_url}
          placeholder="https://api.openai.com/v1"
          onInput={(e) => set('llm_base_url', e.currentTarget.value)}
        />
      </label>
      <label>
        API key{' '}
        <span class={`badge ${view?.llm_api_key_set ? 'ok' : 'muted'}`} data-testid="llm-key-state">
          {view?.llm_api_key_set ? 'set' : 'not set'}
        </span>
        <input
          name="llm_api_key"
          type="password"
          autocomplete="off"
          value={form.llm_api_key}
          disabled={form.clear_llm_api_key}
          placeholder={view?.llm_api_key_set ? 'leave blank to keep the stored key' : 'sk-…'}
          onInput={(e) => set('llm_api_key', e.currentTarget.value)}
        />
      </label>
      {view?.llm_api_key_set && (
        <label class="check">
          <input
            type="checkbox"
            checked={form.clear_llm_api_key}
            onChange={(e) => set('clear_llm_api_key', e.currentTarget.checked)}
          />{' '}
          Remove the stored key
        </label>
      )}
    </fieldset>
  );
}

function LimitsGroup({ form, set }: GroupProps) {
  return (
    <fieldset>
      <legend>Limits</legend>
      <label>
        Iterations per run{' '}
        <input
          name="max_iterations"
          type="number"
          min={1}
          max={100000}
          value={form.max_iterations}
          placeholder="default"
          onInput={(e) => set('max_iterations', e.currentTarget.value)}
        />
      </label>
      <label>
        Budget per task (USD){' '}
        <input
          name="max_budget_per_task"
          type="number"
          min={0}
          step="0.01"
          value={form.max_budget_per_task}
          placeholder="none"
          onInput={(e) => set('max_budget_per_task', e.currentTarget.value)}
        />
      </label>
    </fieldset>
  );
}

function SafetyGroup({ form, set, analyzers }: GroupProps & { analyzers: string[] }) {
  return (
    <fieldset>
      <legend>Safety</legend>
      <label class="check">
        <input
          name="confirmation_mode"
          type="checkbox"
          checked={form.confirmation_mode}
          onChange={(e) => set('confirmation_mode', e.currentTarget.checked)}
        />{' '}
        Confirmation mode: risky actions wait for me
      </label>
      <label>
        Security analyzer
        <select
          name="security_analyzer"
          value={form.security_analyzer}
          onChange={(e) => set('security_analyzer', e.currentTarget.value)}
        >
          <option value="">none</option>
          {analyzers.map((a) => (
            <option key={a} value={a}>
              {a}
            </option>
          ))}
        </select>
      </label>
    </fieldset>
  );
}

function CondenserGroup({ form, set }: GroupProps) {
  return (
    <fieldset>
      <legend>Condenser</legend>
      <label class="check">
        <input
          name="enable_default_condenser"
          type="checkbox"
          checked={form.enable_default_condenser}
          onChange={(e) => set('enable_default_condenser', e.currentTarget.checked)}
        />{' '}
        Summarise older events to keep the prompt bounded
      </label>
      <label>
        Events before summarising{' '}
        <input
          name="condenser_max_size"
          type="number"
          min={2}
          value={form.condenser_max_size}
          placeholder="120"
          onInput={(e) => set('condenser_max_size', e.currentTarget.value)}
        />
      </label>
    </fieldset>
  );
}

function McpServersGroup({ form, set }: GroupProps) {
  const setRow = (i: number, row: McpRow) =>
    set(
      'mcp',
      form.mcp.map((r, j) => (j === i ? row : r)),
    );
  return (
    <fieldset>
      <legend>MCP servers</legend>
      {form.mcp.length === 0 && (
        <p class="hint">No MCP servers. Their tools are offered to the agent as server__tool.</p>
      )}
      {form.mcp.map((row, i) => (
        <McpServerRow
          key={i}
          row={row}
          onChange={(next) => setRow(i, next)}
          onRemove={() =>
            set(
              'mcp',
              form.mcp.filter((_, j) => j !== i),
            )
          }
        />
      ))}
      <button
        type="button"
        class="secondary"
        onClick={() => set('mcp', [...form.mcp, { type: 'shttp', url: '', api_key: '' }])}
      >
        Add a server
      </button>
    </fieldset>
  );
}

/** A blank server of the type chosen in a row's select. */
const blankMcpRow = (type: string): McpRow =>
  type === 'stdio'
    ? { type: 'stdio', name: '', command: '', args: '', env: {} }
    : { type: type as 'sse' | 'shttp', url: '', api_key: '' };

function McpServerRow({
  row,
  onChange,
  onRemove,
}: {
  row: McpRow;
  onChange: (row: McpRow) => void;
  onRemove: () => void;
}) {
  return (
    <div class="mcp-row">
      <select aria-label="Server type" value={row.type} onChange={(e) => onChange(blankMcpRow(e.currentTarget.value))}>
        <option value="shttp">HTTP</option>
        <option value="sse">SSE</option>
        <option value="stdio">stdio (in the sandbox)</option>
      </select>
      {row.type === 'stdio' ? (
        <>
          <input
            aria-label="Name"
            placeholder="name"
            value={row.name}
            onInput={(e) => onChange({ ...row, name: e.currentTarget.value })}
          />
          <input
            aria-label="Command"
            placeholder="command"
            value={row.command}
            onInput={(e) => onChange({ ...row, command: e.currentTarget.value })}
          />
          <input
            aria-label="Arguments"
            placeholder="arguments"
            value={row.args}
            onInput={(e) => onChange({ ...row, args: e.currentTarget.value })}
          />
        </>
      ) : (
        <>
          <input
            aria-label="URL"
            type="url"
            placeholder="https://mcp.example.com/mcp"
            value={row.url}
            onInput={(e) => onChange({ ...row, url: e.currentTarget.value })}
          />
          <input
            aria-label="API key"
            type="password"
            autocomplete="off"
            placeholder="key (blank keeps it)"
            value={row.api_key}
            onInput={(e) => onChange({ ...row, api_key: e.currentTarget.value })}
          />
        </>
      )}
      <button type="button" class="secondary" aria-label="Remove server" onClick={onRemove}>
        Remove
      </button>
    </div>
  );
}

function GitIdentityGroup({ form, set }: GroupProps) {
  return (
    <fieldset>
      <legend>Git identity</legend>
      <label>
        Name{' '}
        <input
          name="git_user_name"
          value={form.git_user_name}
          placeholder="openhands"
          onInput={(e) => set('git_user_name', e.currentTarget.value)}
        />
      </label>
      <label>
        Email{' '}
        <input
          name="git_user_email"
          type="email"
          value={form.git_user_email}
          placeholder="openhands@all-hands.dev"
          onInput={(e) => set('git_user_email', e.currentTarget.value)}
        />
      </label>
    </fieldset>
  );
}

/** The save button, "Saved." once the form is stored, and the save's error. */
function SaveActions({ save, saved }: { save: ReturnType<typeof useSettings>['save']; saved: boolean }) {
  return (
    <>
      <div class="actions">
        <button type="submit" disabled={save.busy}>
          {save.busy ? 'Saving…' : 'Save settings'}
        </button>
        {saved && (
          <span class="saved" role="status">
            Saved.
          </span>
        )}
      </div>
      {save.error !== undefined && <ErrorBox error={save.error} />}
    </>
  );
}

function Secrets() {
  const list = useLoad(() => unwrap(api.GET('/api/secrets')), []);
  const [draft, setDraft] = useState({ name: '', value: '', description: '' });
  const add = useAction(async () => {
    await unwrap(
      api.POST('/api/secrets', {
        body: { name: draft.name.trim(), value: draft.value, description: draft.description.trim() || null },
      }),
    );
    setDraft({ name: '', value: '', description: '' });
    list.reload();
  });
  const remove = useAction(async (name: string) => {
    await unwrap(api.DELETE('/api/secrets/{secret_id}', { params: { path: { secret_id: name } } }));
    list.reload();
  });
  return (
    <section class="secrets">
      <h2>Custom secrets</h2>
      <p class="hint">Given to the agent's sandbox as environment variables. Values are never shown again.</p>
      {list.error !== undefined && <ErrorBox error={list.error} onRetry={list.reload} />}
      {!list.value && !list.error && <Loading what="secrets" />}
      {list.value && list.value.custom_secrets.length === 0 && <Empty>No custom secrets.</Empty>}
      {list.value && list.value.custom_secrets.length > 0 && (
        <ul class="secret-list">
          {list.value.custom_secrets.map((s) => (
            <li key={s.name}>
              <code>{s.name}</code> {s.description && <span class="hint">{s.description}</span>}
              <button type="button" class="secondary" disabled={remove.busy} onClick={() => void remove.run(s.name)}>
                Delete
              </button>
            </li>
          ))}
        </ul>
      )}
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          void add.run();
        }}
      >
        <input
          aria-label="Secret name"
          placeholder="NAME"
          value={draft.name}
          required
          onInput={(e) => setDraft({ ...draft, name: e.currentTarget.value })}
        />
        <input
          aria-label="Secret value"
          type="password"
          autocomplete="off"
          placeholder="value"
          value={draft.value}
          required
          onInput={(e) => setDraft({ ...draft, value: e.currentTarget.value })}
        />
        <input
          aria-label="Description"
          placeholder="description (optional)"
          value={draft.description}
          onInput={(e) => setDraft({ ...draft, description: e.currentTarget.value })}
        />
        <button type="submit" disabled={add.busy}>
          Add secret
        </button>
      </form>
      {add.error !== undefined && <ErrorBox error={add.error} />}
      {remove.error !== undefined && <ErrorBox error={remove.error} />}
    </section>
  );
}

/**
 * API keys: the user's named keys (made here or by signing in a device such as the OpenHands
 * CLI), when each was last used, revoke; and a new key, whose secret is shown once.
 */
import { useState } from 'preact/hooks';
import { api, unwrap } from '../api.js';
import { Empty, ErrorBox, formatAge, Loading, useAction, useLoad } from '../ui.js';

export function KeysPage() {
  const list = useLoad(() => unwrap(api.GET('/api/keys')), []);
  const [name, setName] = useState('');
  const [made, setMade] = useState<{ name: string; key: string } | null>(null);
  const create = useAction(async () => {
    const key = await unwrap(api.POST('/api/keys', { body: { name: name.trim() } }));
    setMade({ name: key.name, key: key.key });
    setName('');
    list.reload();
  });
  const revoke = useAction(async (id: string, keyName: string) => {
    if (!confirm(`Revoke the key “${keyName}”? Whatever uses it is signed out at once.`)) return;
    await unwrap(api.DELETE('/api/keys/{key_id}', { params: { path: { key_id: id } } }));
    list.reload();
  });
  return (
    <section class="page keys">
      <div class="page-head">
        <h1>API keys</h1>
        <button type="button" class="secondary" onClick={list.reload} disabled={list.loading}>
          Refresh
        </button>
      </div>
      <p class="hint">
        Keys open the API as you (X-Session-API-Key or Authorization: Bearer). Signing in the OpenHands CLI (
        <code>openhands login</code>) makes one. Keys from the server’s configuration are not listed here.
      </p>
      {made && (
        <div class="state new-key" role="status" data-testid="new-key">
          <strong>Key “{made.name}” made.</strong> Copy it now: it is not shown again.
          <input readOnly value={made.key} aria-label="The new key" onFocus={(e) => e.currentTarget.select()} />
          <button type="button" class="secondary" onClick={() => setMade(null)}>
            Done
          </button>
        </div>
      )}
      {revoke.error !== undefined && <ErrorBox error={revoke.error} />}
      {list.error !== undefined && <ErrorBox error={list.error} onRetry={list.reload} />}
      {!list.value && !list.error && <Loading what="keys" />}
      {list.value && list.value.length === 0 && <Empty>No keys yet.</Empty>}
      {list.value && list.value.length > 0 && (
        <table class="list">
          <thead>
            <tr>
              <th class="wide">Name</th>
              <th>Made</th>
              <th>Last used</th>
              <th>Actions</th>
            </tr>
          </thead>
          <tbody>
            {list.value.map((k) => (
              <tr key={k.id} data-key={k.id}>
                <td data-label="Name" class="wide">
                  {k.name}
                </td>
                <td data-label="Made" title={k.created_at}>
                  {formatAge(k.created_at)}
                </td>
                <td data-label="Last used" title={k.last_used_at ?? undefined}>
                  {k.last_used_at ? formatAge(k.last_used_at) : 'never'}
                </td>
                <td data-label="Actions" class="buttons">
                  <button
                    type="button"
                    class="danger"
                    disabled={revoke.busy}
                    onClick={() => void revoke.run(k.id, k.name)}
                  >
                    Revoke
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2>New key</h2>
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          void create.run();
        }}
      >
        <input
          aria-label="Key name"
          placeholder="name (where it is used, e.g. laptop)"
          maxLength={100}
          value={name}
          required
          onInput={(e) => setName(e.currentTarget.value)}
        />
        <button type="submit" disabled={create.busy}>
          Make key
        </button>
      </form>
      {create.error !== undefined && <ErrorBox error={create.error} />}
    </section>
  );
}

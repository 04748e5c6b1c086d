/**
 * API keys: the user's named keys (made here or by signing in a device such as the OpenHands
 * CLI), when each was last used and when it expires, revoke; a new key, whose secret is shown
 * once; and signing out every browser signed in as the user.
 */
import { useState } from 'preact/hooks';
import { api, unwrap } from '../api.js';
import { Empty, ErrorBox, formatAge, Loading, useAction, useLoad } from '../ui.js';

const loadKeys = () => unwrap(api.GET('/api/keys'));
type ApiKey = Awaited<ReturnType<typeof loadKeys>>[number];

/** A key just made: its name and its secret, shown until dismissed. */
interface MadeKey {
  name: string;
  key: string;
}

export function KeysPage() {
  const keys = useKeys();
  const { list, revoke } = keys;
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
      {keys.made && <NewKeySecret made={keys.made} onDone={() => keys.setMade(null)} />}
      {revoke.error !== undefined && <ErrorBox error={revoke.error} />}
      {list.error !== undefined && <ErrorBox error={list.error} onRetry={list.reload} />}
      {!list.value && !list.error && <Loading what="keys" />}
      {list.value && list.value.length === 0 && <Empty>No keys yet.</Empty>}
      {list.value && list.value.length > 0 && <KeyTable keys={list.value} revoke={revoke} />}
      <h2>New key</h2>
      <NewKeyForm name={keys.name} setName={keys.setName} create={keys.create} />
      {keys.create.error !== undefined && <ErrorBox error={keys.create.error} />}
      <SignOutEverywhere />
    </section>
  );
}

/** Ends every browser session of the user (this one too), e.g. after a laptop was lost. */
function SignOutEverywhere() {
  const signOut = useAction(async () => {
    if (!confirm('Sign out every browser signed in as you, this one too?')) return;
    await unwrap(api.POST('/api/sign-out', { body: { everywhere: true } }));
    location.reload();
  });
  return (
    <>
      <h2>Browsers</h2>
      <p class="hint">
        Revoking a key signs out the browsers it signed in. To sign out every browser signed in as you, whatever key
        they used:
      </p>
      <button type="button" class="secondary" disabled={signOut.busy} onClick={() => void signOut.run()}>
        Sign out everywhere
      </button>
      {signOut.error !== undefined && <ErrorBox error={signOut.error} />}
    </>
  );
}

/**
 * The page's state: the user's keys, the new key's name as typed, the key just made, and the
 * two actions: create (shows the new secret, clears the name) and revoke (after a confirm);
 * both reload the list.
 */
function useKeys() {
  const list = useLoad(loadKeys, []);
  const [name, setName] = useState('');
  const [made, setMade] = useState<MadeKey | null>(null);
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
  return { list, name, setName, made, setMade, create, revoke };
}

type Keys = ReturnType<typeof useKeys>;

/** The secret of the key just made, shown this once, ready to copy. */
function NewKeySecret({ made, onDone }: { made: MadeKey; onDone: () => void }) {
  return (
    <div class="state new-key" role="status" data-testid="new-key">
      <strong>Key “{made.name}” made.</strong> Copy it now: it is not shown again.
      <input readOnly value={made.key} aria-label="The new key" onFocus={(e) => e.currentTarget.select()} />
      <button type="button" class="secondary" onClick={onDone}>
        Done
      </button>
    </div>
  );
}

function KeyTable({ keys, revoke }: { keys: ApiKey[]; revoke: Keys['revoke'] }) {
  return (
    <table class="list">
      <thead>
        <tr>
          <th class="wide">Name</th>
          <th>Made</th>
          <th>Last used</th>
          <th>Expires</th>
          <th>Actions</th>
        </tr>
      </thead>
      <tbody>
        {keys.map((k) => (
          <KeyRow key={k.id} k={k} revoke={revoke} />
        ))}
      </tbody>
    </table>
  );
}

function KeyRow({ k, revoke }: { k: ApiKey; revoke: Keys['revoke'] }) {
  return (
    <tr data-key={k.id}>
      <td data-label="Name" class="wide">
        {k.name}
      </td>
      <td data-label="Made" title={k.created_at}>
        {formatAge(k.created_at)}
      </td>
      <td data-label="Last used" title={k.last_used_at ?? undefined}>
        {k.last_used_at ? formatAge(k.last_used_at) : 'never'}
      </td>
      <td data-label="Expires" title={k.expires_at ?? undefined}>
        {expiryOf(k.expires_at)}
      </td>
      <td data-label="Actions" class="buttons">
        <button type="button" class="danger" disabled={revoke.busy} onClick={() => void revoke.run(k.id, k.name)}>
          Revoke
        </button>
      </td>
    </tr>
  );
}

/** When a key expires, in words: never, expired, or its date. */
function expiryOf(expiresAt: string | null): string {
  if (expiresAt === null) return 'never';
  return Date.parse(expiresAt) <= Date.now() ? 'expired' : new Date(expiresAt).toLocaleDateString();
}

function NewKeyForm({ name, setName, create }: Pick<Keys, 'name' | 'setName' | 'create'>) {
  return (
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
  );
}

/** The console: sign-in check, navigation, and the page for the current path. */
import { render } from 'preact';
import { useState } from 'preact/hooks';
import { api, apiBase, ApiError, unwrap } from './api.js';
import { ConversationPage } from './pages/conversation.js';
import { ConversationsPage, NewConversationPage } from './pages/conversations.js';
import { DevicePage } from './pages/device.js';
import { KeysPage } from './pages/keys.js';
import { SandboxesPage } from './pages/sandboxes.js';
import { SettingsPage } from './pages/settings.js';
import { href, onLinkClick, useRoute } from './router.js';
import './style.css';
import { ErrorBox, Loading, useLoad } from './ui.js';

function App() {
  const { path, query } = useRoute();
  // Any authenticated call tells whether the browser is signed in.
  const session = useLoad(
    () =>
      unwrap(api.GET('/api/v1/app-conversations/count')).then(
        () => 'signed-in' as const,
        (error: unknown) => {
          if (error instanceof ApiError && error.status === 401) return 'signed-out' as const;
          throw error;
        },
      ),
    [],
  );
  if (session.error !== undefined)
    return (
      <Shell path={path}>
        <ErrorBox error={session.error} onRetry={session.reload} />
      </Shell>
    );
  if (!session.value)
    return (
      <Shell path={path}>
        <Loading what="the console" />
      </Shell>
    );
  if (session.value === 'signed-out')
    return (
      <Shell path={path} signedOut>
        {path === '/device' && <DeviceSignInHint />}
        <SignIn />
      </Shell>
    );
  return <Shell path={path}>{page(path, query)}</Shell>;
}

function page(path: string, query: URLSearchParams) {
  if (path === '/' || path === '/conversations') return <ConversationsPage query={query} />;
  if (path === '/new') return <NewConversationPage />;
  const conversation = /^\/conversations\/([^/]+)$/.exec(path);
  if (conversation) return <ConversationPage id={decodeURIComponent(conversation[1]!)} />;
  if (path === '/sandboxes') return <SandboxesPage />;
  if (path === '/settings') return <SettingsPage />;
  if (path === '/keys') return <KeysPage />;
  if (path === '/device') return <DevicePage userCode={query.get('user_code')} />;
  return (
    <section class="page">
      <h1>Not found</h1>
      <p>
        There is no page {path} in the console. <a href={href('/')}>Conversations</a>
      </p>
    </section>
  );
}

const NAV = [
  {
    path: '/',
    label: 'Conversations',
    active: (p: string) => p === '/' || p.startsWith('/conversations') || p === '/new',
  },
  { path: '/sandboxes', label: 'Sandboxes', active: (p: string) => p === '/sandboxes' },
  { path: '/settings', label: 'Settings', active: (p: string) => p === '/settings' },
  { path: '/keys', label: 'API keys', active: (p: string) => p === '/keys' },
];

function Shell({
  path,
  signedOut = false,
  children,
}: {
  path: string;
  signedOut?: boolean;
  children: preact.ComponentChildren;
}) {
  return (
    <div class="shell" onClick={(e) => onLinkClick(e)}>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href={href('/')}>
          Agent Conversation Service
        </a>
        {!signedOut && (
          <nav aria-label="Main">
            {NAV.map((item) => (
              <a key={item.path} href={href(item.path)} aria-current={item.active(path) ? 'page' : undefined}>
                {item.label}
              </a>
            ))}
            <a href={href('/api-reference/')} data-external>
              API reference
            </a>
            <SignOut />
          </nav>
        )}
      </header>
      <main id="main">{children}</main>
    </div>
  );
}

function SignOut() {
  return (
    <button
      type="button"
      class="link"
      onClick={() => {
        void api
          .POST('/api/sign-out')
          .catch(() => undefined)
          .then(() => location.reload());
      }}
    >
      Sign out
    </button>
  );
}

/** A device sent the user here: sign in first, and this page comes back with its code. */
function DeviceSignInHint() {
  return (
    <section class="page device">
      <h1>Sign in a device</h1>
      <p>
        A device (the OpenHands CLI) is asking to sign in as you. Sign in to this console first: open the link the
        server printed when it started (it ends in <code>?key=…</code>) and come back to this page, or enter an API key
        below and you return here at once.
      </p>
    </section>
  );
}

function SignIn() {
  const [key, setKey] = useState('');
  return (
    <section class="page sign-in">
      <h1>Sign in</h1>
      <p>
        Open the link the server printed when it started (it ends in <code>?key=…</code>), or enter an API key. The key
        becomes a session cookie and is not kept in the address.
      </p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          // The router signs in any page opened with ?key= and comes back to it (query and all) without the key.
          const query = new URLSearchParams(location.search);
          query.set('key', key.trim());
          location.assign(`${location.pathname}?${query.toString()}`);
        }}
      >
        <label>
          API key
          <input
            type="password"
            name="key"
            autocomplete="current-password"
            required
            value={key}
            onInput={(e) => setKey(e.currentTarget.value)}
          />
        </label>
        <button type="submit">Sign in</button>
      </form>
      {apiBase && <p class="hint">The API is at {apiBase}.</p>}
    </section>
  );
}

render(<App />, document.getElementById('app')!);

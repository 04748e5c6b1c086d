/**
 * Device sign-in: a device (the OpenHands CLI's `openhands login`) opened this page with its
 * user code. The signed-in user sees who asks, and approves (the device gets a new API key of
 * theirs) or denies. Without a code in the address, the code can be typed.
 */
import { useState } from 'preact/hooks';
import { api, ApiError, unwrap } from '../api.js';
import { navigate } from '../router.js';
import { ErrorBox, Loading, useAction, useLoad } from '../ui.js';

export function DevicePage({ userCode }: { userCode: string | null }) {
  if (!userCode) return <EnterCode />;
  return <Answer key={userCode} userCode={userCode} />;
}

function Answer({ userCode }: { userCode: string }) {
  const loaded = useLoad(async () => {
    const [grant, me] = await Promise.all([
      unwrap(api.GET('/api/device-authorizations/{user_code}', { params: { path: { user_code: userCode } } })),
      unwrap(api.GET('/api/v1/users/me')),
    ]);
    return { grant, user: me.id };
  }, [userCode]);
  const [answered, setAnswered] = useState<'approved' | 'denied' | null>(null);
  const respond = useAction(async (action: 'approve' | 'deny') => {
    const params = { params: { path: { user_code: userCode } } };
    const grant = await unwrap(
      action === 'approve'
        ? api.POST('/api/device-authorizations/{user_code}/approve', params)
        : api.POST('/api/device-authorizations/{user_code}/deny', params),
    );
    setAnswered(grant.status === 'approved' ? 'approved' : 'denied');
  });

  if (loaded.error !== undefined && !loaded.value) {
    return (
      <section class="page device">
        <h1>Sign in a device</h1>
        <ErrorBox error={loaded.error} onRetry={loaded.reload} />
        {loaded.error instanceof ApiError && loaded.error.status === 404 && (
          <p class="hint">
            Codes expire after a few minutes: run the sign-in on the device again (e.g. <code>openhands login</code>) to
            get a new one.
          </p>
        )}
      </section>
    );
  }
  if (!loaded.value) return <Loading what="the sign-in" />;
  const { grant, user } = loaded.value;
  const status = answered ?? grant.status;
  return (
    <section class="page device">
      <h1>Sign in a device</h1>
      <div class="device-card">
        <p class="device-code" data-testid="user-code">
          {grant.user_code}
        </p>
        <p>
          <strong>{grant.client_name}</strong> wants to sign in as <strong data-testid="device-user">{user}</strong>.
        </p>
        <p class="hint">
          Approve only a sign-in you started yourself just now (e.g. with <code>openhands login</code>; the code is in
          the link it printed). Approving gives the device a new API key of yours, listed under API keys, where you can
          revoke it. Asked {new Date(grant.created_at).toLocaleTimeString()}; the code expires at{' '}
          {new Date(grant.expires_at).toLocaleTimeString()}.
        </p>
        {status === 'pending' && (
          <div class="actions">
            <button type="button" disabled={respond.busy} onClick={() => void respond.run('approve')}>
              Approve
            </button>
            <button type="button" class="danger" disabled={respond.busy} onClick={() => void respond.run('deny')}>
              Deny
            </button>
          </div>
        )}
        {status === 'approved' && (
          <p class="state done" role="status">
            Approved. The device finishes signing in by itself; you can close this page.
          </p>
        )}
        {status === 'denied' && (
          <p class="state done" role="status">
            Denied. The device gets no key.
          </p>
        )}
        {respond.error !== undefined && <ErrorBox error={respond.error} />}
      </div>
    </section>
  );
}

function EnterCode() {
  const [code, setCode] = useState('');
  return (
    <section class="page device">
      <h1>Sign in a device</h1>
      <p>Enter the code the device shows (e.g. WDJB-MJHT).</p>
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          navigate(`/device?user_code=${encodeURIComponent(code.trim().toUpperCase())}`);
        }}
      >
        <input
          aria-label="Code"
          placeholder="XXXX-XXXX"
          maxLength={9}
          autocomplete="off"
          required
          value={code}
          onInput={(e) => setCode(e.currentTarget.value)}
        />
        <button type="submit">Continue</button>
      </form>
    </section>
  );
}
